"""The offsets-log store: records applied in log order (§9.6 step 4, §7.3 step 5) and compaction (§9.8).

Retention (``OffsetStore.expire``) is tested in test_retention.py.
"""

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st
from record_strategies import records

from zkcoord.model import GroupState, TopicPartition
from zkcoord.offsets.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    RecordError,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from zkcoord.offsets.retention import view_of_loaded_group
from zkcoord.offsets.store import CommittedOffset, OffsetStore

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)
MEMBER = MemberMetadata("m", None, "c", "/h", 300000, 10000, b"", b"")
STABLE_GROUP = GroupMetadataValue("consumer", 3, "range", "m", 1000, (MEMBER,))


def commit(offset: int, commit_timestamp: int = 1000) -> OffsetCommitValue:
    return OffsetCommitValue(offset, f"meta-{offset}", commit_timestamp)


def offset_key(group: str = "g", partition: TopicPartition = T0) -> OffsetCommitKey:
    return OffsetCommitKey(group, partition.topic, partition.partition)


def replay(log) -> OffsetStore:
    """Load (log_offset, key bytes, value bytes) in order, as the loader does: decode, then apply."""
    store = OffsetStore()
    for log_offset, key_bytes, value_bytes in log:
        key = decode_key(key_bytes, log_offset)
        store.apply(key, decode_value(key, value_bytes, log_offset), log_offset)
    return store


def encoded(record_list) -> list[tuple[int, bytes, bytes | None]]:
    return [(log_offset, encode_key(key), encode_value(value)) for log_offset, (key, value) in enumerate(record_list)]


# ---- apply ---------------------------------------------------------------------------------------------


def test_committed_offset_from_value_keeps_every_field():
    value = OffsetCommitValue(5, "m", 1000, 2000, 7)
    assert CommittedOffset.from_value(value, 42) == CommittedOffset(5, "m", 1000, 2000, 7, 42)


def test_upsert_then_read_spec_9_6_step_4():
    store = OffsetStore()
    store.apply(offset_key(), commit(5), 10)
    assert store.offset("g", T0) == CommittedOffset(5, "meta-5", 1000, -1, -1, 10)
    assert store.offset("g", T1) is None
    assert store.offset("other", T0) is None
    assert store.offsets == {"g": {T0: CommittedOffset(5, "meta-5", 1000, -1, -1, 10)}}


def test_later_record_wins_spec_9_6_step_4():
    store = OffsetStore()
    store.apply(offset_key(), commit(5), 10)
    store.apply(offset_key(), commit(6), 11)
    assert store.offset("g", T0).offset == 6
    assert store.offset("g", T0).log_offset == 11


def test_later_record_of_the_same_batch_wins():
    # Records of one batch share its base offset (§9.6 step 4).
    store = OffsetStore()
    store.apply(offset_key(), commit(5), 10)
    store.apply(offset_key(), commit(6), 10)
    assert store.offset("g", T0).offset == 6


def test_entry_written_at_a_higher_log_offset_is_kept_spec_7_3_step_5():
    store = OffsetStore()
    store.apply(offset_key(), commit(9), 20)
    store.apply(offset_key(), commit(5), 10)
    assert store.offset("g", T0) == CommittedOffset.from_value(commit(9), 20)


def test_offset_tombstone_deletes_and_empty_group_disappears_spec_9_6_step_4():
    store = OffsetStore()
    store.apply(offset_key(partition=T0), commit(5), 1)
    store.apply(offset_key(partition=T1), commit(6), 2)
    store.apply(offset_key(partition=T0), None, 3)
    assert store.offset("g", T0) is None
    assert store.offsets == {"g": {T1: CommittedOffset.from_value(commit(6), 2)}}
    store.apply(offset_key(partition=T1), None, 4)
    assert store.offsets == {}
    assert store.group_ids() == set()


def test_tombstone_of_an_unknown_key_changes_nothing():
    store = OffsetStore()
    store.apply(offset_key("g", T0), commit(5), 1)
    store.apply(offset_key("g", T1), None, 2)
    store.apply(offset_key("other", T0), None, 3)
    store.apply(GroupMetadataKey("other"), None, 4)
    assert store.offsets == {"g": {T0: CommittedOffset.from_value(commit(5), 1)}}
    assert store.groups == {}


def test_group_record_upsert_and_tombstone_spec_9_6_step_4():
    store = OffsetStore()
    store.apply(GroupMetadataKey("g"), STABLE_GROUP, 1)
    assert store.groups == {"g": STABLE_GROUP}
    newer = GroupMetadataValue("consumer", 4, None, None, 2000)
    store.apply(GroupMetadataKey("g"), newer, 2)
    assert store.groups == {"g": newer}
    store.apply(GroupMetadataKey("g"), None, 3)
    assert store.groups == {}
    assert store.group_ids() == set()


def test_group_tombstone_keeps_the_group_offsets():
    # Offsets have keys of their own; DeleteGroups writes their tombstones separately (§7.9).
    store = OffsetStore()
    store.apply(offset_key(), commit(5), 1)
    store.apply(GroupMetadataKey("g"), STABLE_GROUP, 2)
    store.apply(GroupMetadataKey("g"), None, 3)
    assert store.groups == {}
    assert store.offset("g", T0).offset == 5


def test_group_tombstone_then_offsets_gives_an_offsets_only_group_spec_9_6_step_5():
    # GMMT testOffsetWriteAfterGroupRemoved.
    store = OffsetStore()
    store.apply(GroupMetadataKey("g"), STABLE_GROUP, 1)
    store.apply(GroupMetadataKey("g"), None, 2)
    store.apply(offset_key(), commit(5), 3)
    assert store.group_ids() == {"g"}
    assert "g" not in store.groups
    view = view_of_loaded_group(store.groups.get("g"))
    assert (view.state, view.protocol_type, view.generation) == (GroupState.EMPTY, None, 0)


def test_group_ids_are_groups_with_records_or_offsets():
    store = OffsetStore()
    store.apply(GroupMetadataKey("with-record"), STABLE_GROUP, 1)
    store.apply(offset_key("offsets-only"), commit(1), 2)
    store.apply(offset_key("with-record"), commit(1), 3)
    assert store.group_ids() == {"with-record", "offsets-only"}


def test_len_counts_live_keys():
    store = OffsetStore()
    assert len(store) == 0
    store.apply(offset_key("g", T0), commit(1), 1)
    store.apply(offset_key("g", T1), commit(1), 2)
    store.apply(offset_key("h", T0), commit(1), 3)
    store.apply(GroupMetadataKey("g"), STABLE_GROUP, 4)
    assert len(store) == 4
    store.apply(offset_key("g", T0), None, 5)
    store.apply(GroupMetadataKey("g"), None, 6)
    assert len(store) == 2


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (OffsetCommitKey("g", "t", 0), STABLE_GROUP),
        (GroupMetadataKey("g"), commit(1)),
        ("g", commit(1)),
        ("g", None),
    ],
)
def test_apply_refuses_a_value_of_the_wrong_type(key, value):
    store = OffsetStore()
    with pytest.raises(RecordError, match="record at offset 7: cannot apply"):
        store.apply(key, value, 7)
    assert store == OffsetStore()


# ---- equality --------------------------------------------------------------------------------------


def test_equality():
    def build(offset: int) -> OffsetStore:
        store = OffsetStore()
        store.apply(offset_key(), commit(offset), 1)
        store.apply(GroupMetadataKey("g"), STABLE_GROUP, 2)
        return store

    assert OffsetStore() == OffsetStore()
    assert build(5) == build(5)
    assert build(5) != build(6)
    assert build(5) != OffsetStore()
    only_offsets = OffsetStore()
    only_offsets.apply(offset_key(), commit(5), 1)
    assert build(5) != only_offsets  # groups differ
    assert OffsetStore() != {}


def test_equality_includes_the_log_offset_of_each_commit():
    first, second = OffsetStore(), OffsetStore()
    first.apply(offset_key(), commit(5), 1)
    second.apply(offset_key(), commit(5), 2)
    assert first != second


# ---- the log as a stream of upserts and deletes (§9.8) -----------------------------------------------

small_records = records(
    groups=st.sampled_from(["g1", "g2", "😀"]),
    topics=st.sampled_from(["t", "u"]),
    partitions=st.integers(0, 2),
    tombstone_probability=0.3,
)


def compact(log, drop_tombstones: bool):
    """What the cleaner may leave: the last record of each key (by its bytes), in log order."""
    last_of_key = {key_bytes: log_offset for log_offset, key_bytes, _ in log}
    return [
        (log_offset, key_bytes, value_bytes)
        for log_offset, key_bytes, value_bytes in log
        if last_of_key[key_bytes] == log_offset and not (drop_tombstones and value_bytes is None)
    ]


@given(st.lists(small_records, max_size=40), st.booleans())
def test_compacted_log_rebuilds_the_same_store_spec_9_8(record_list, drop_tombstones):
    log = encoded(record_list)
    assert replay(compact(log, drop_tombstones)) == replay(log)


@given(st.lists(small_records, max_size=40))
def test_store_holds_the_last_value_of_each_key(record_list):
    store = replay(encoded(record_list))
    last: dict = {}
    for log_offset, (key, value) in enumerate(record_list):
        last[key] = (log_offset, value)
    expected = OffsetStore()
    for key, (log_offset, value) in last.items():
        if value is not None:
            expected.apply(key, value, log_offset)
    assert store == expected
    assert len(store) == sum(value is not None for _, value in last.values())


def test_key_v0_and_v1_are_one_logical_key_and_log_order_decides_spec_9_3():
    v0_key = msgpack.packb([0, "g", "t", 0])
    v1_key = encode_key(offset_key())
    # Different compaction keys, so both survive cleaning; the later one wins on load.
    log = [(0, v1_key, encode_value(commit(1))), (1, v0_key, encode_value(commit(2)))]
    assert compact(log, drop_tombstones=True) == log
    assert replay(log).offset("g", T0).offset == 2
    assert replay([(0, v0_key, encode_value(commit(1))), (1, v1_key, None)]).offsets == {}
