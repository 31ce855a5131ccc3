"""Building the store from the surviving records: the compiled builder, its Python twin, and replay in log order."""

import msgpack
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from record_strategies import INT64, group_metadata_values, offset_commit_values, records

from zkcoord.log.format import Batch
from zkcoord.log.loader import build_offsets, build_offsets_in_python, compiled_build_offsets, load_batches
from zkcoord.model import TopicPartition
from zkcoord.offsets.records import (
    GroupMetadataKey,
    OffsetCommitKey,
    OffsetCommitValue,
    RecordError,
    decode_key,
    decode_value,
    encode_key,
    encode_record,
    encode_value,
)
from zkcoord.offsets.store import CommittedOffset, OffsetStore

GROUPS = st.sampled_from(["g", "h", "grüppe", "x" * 40])
TOPICS = st.sampled_from(["t", "topic-ü", "y" * 300])
PARTITIONS = st.sampled_from([0, 1, 127, 128, 70_000, -1, -33, -(2**31)])


def wide_int(value: int) -> bytes:
    """``value`` as a 64-bit msgpack int: valid, but not the smallest encoding."""
    return b"\xd3" + value.to_bytes(8, "big", signed=True)


def wide_str(text: str) -> bytes:
    data = text.encode()
    return b"\xdb" + len(data).to_bytes(4, "big") + data


def packed(value) -> bytes:
    return msgpack.packb(value, use_bin_type=True)


@st.composite
def key_bytes(draw) -> bytes:
    """Key bytes as zkcoord writes them, in other valid encodings (Kafka's version 0, wider fields), or damaged."""
    group, topic, partition = draw(GROUPS), draw(TOPICS), draw(PARTITIONS)
    canonical = encode_key(OffsetCommitKey(group, topic, partition))
    return draw(
        st.sampled_from(
            [
                canonical,
                canonical,
                encode_key(GroupMetadataKey(group)),
                packed([0, group, topic, partition]),
                b"\x94\x01" + wide_str(group) + packed(topic) + packed(partition),
                b"\x94\x01" + packed(group) + packed(topic) + wide_int(partition),
                b"\x92\x02" + wide_str(group),
                canonical + b"\x00",
                canonical[:-1],
                b"\x94\x01\xa1\xff" + packed(topic) + packed(partition),  # a group that is not UTF-8
                b"\x94\x01" + packed(group) + packed(topic) + packed(2**31),
            ]
        )
    )


@st.composite
def value_bytes(draw) -> bytes | None:
    """Offset commit values in any valid encoding, group metadata values, and bytes that are neither."""
    value = draw(offset_commit_values)
    fields = msgpack.unpackb(encode_value(value))
    widened = b"\xdc\x00\x05" + b"".join(
        wide_int(field) if type(field) is int and draw(st.booleans()) else packed(field) for field in fields
    )
    epoch_out_of_range = packed([3, draw(INT64), 2**31, "", draw(INT64)])
    return draw(
        st.sampled_from(
            [
                None,
                encode_value(value),
                encode_value(value),
                widened,
                encode_value(draw(group_metadata_values)),
                epoch_out_of_range,
                packed([3, 2**63, 0, "", 0]),
                packed([3, 1.0, 0, "", 0]),
                packed([4, 1, 0, "", 0]),
                packed([3, 1, 0, "", 0, 0]),
                b"\x95\x03\x01\x01\xa1\xff\x01",  # metadata that is not UTF-8
                encode_value(value) + b"\xc0",
                encode_value(value)[:-1],
            ]
        )
    )


def latest_of(pairs: list[tuple[bytes, bytes | None]]) -> dict[bytes, tuple[bytes | None, int]]:
    latest: dict[bytes, tuple[bytes | None, int]] = {}
    for offset, (key, value) in enumerate(pairs):
        latest[key] = (value, offset)
    return latest


def test_the_loader_uses_the_compiled_builder_when_it_was_built():
    assert build_offsets is (compiled_build_offsets or build_offsets_in_python)


@given(st.lists(st.tuples(key_bytes(), value_bytes()), max_size=30))
@example([(encode_key(OffsetCommitKey("g", "t", 0)), b"\x95\x03\x01\x01\xa1\xff\x01")])
def test_the_compiled_builder_and_its_python_twin_agree_on_any_survivors(pairs):
    """Both refuse the same survivors (a key not in zkcoord's bytes, a value that does not decode) or build equal
    offsets of the same types, with equal topic partitions and metadata strings stored once."""
    for pair in pairs:  # one by one, each is refused or built alike, not only the first refusal of the lot
        assert build_offsets(latest_of([pair]), CommittedOffset, TopicPartition) == build_offsets_in_python(
            latest_of([pair])
        )
    latest = latest_of(pairs)
    built = build_offsets(latest, CommittedOffset, TopicPartition)
    assert built == build_offsets_in_python(latest)
    if built is not None:
        offsets, _ = built
        entries = [(partition, committed) for group in offsets.values() for partition, committed in group.items()]
        assert {type(partition) for partition, _ in entries} <= {TopicPartition}
        assert {type(committed) for _, committed in entries} <= {CommittedOffset}
        assert len({id(partition) for partition, _ in entries}) == len({partition for partition, _ in entries})
        assert len({id(committed.metadata) for _, committed in entries}) == len(
            {committed.metadata for _, committed in entries}
        )


def replay_in_log_order(pairs: list[tuple[bytes, bytes | None]]) -> OffsetStore:
    store = OffsetStore()
    for offset, (key, value) in enumerate(pairs):
        decoded = decode_key(key, offset)
        store.apply(decoded, decode_value(decoded, value, offset), offset)
    return store


@given(
    st.lists(
        st.tuples(
            records(groups=GROUPS, topics=TOPICS, partitions=PARTITIONS),
            st.sampled_from(["canonical", "canonical", "version 0"]),
        ),
        max_size=60,
    ),
    st.lists(st.integers(1, 10), min_size=1),
)
def test_loading_batches_of_many_records_rebuilds_what_replaying_each_record_in_log_order_builds(records, sizes):
    """Overwrites, tombstones, group records and keys in another encoding, in batches of several records."""
    pairs = [
        (encode_key(key) if form == "canonical" else packed([0, *key]), encode_record(key, value)[1])
        if type(key) is OffsetCommitKey
        else encode_record(key, value)
        for (key, value), form in records
    ]
    batches, offset = [], 0
    while offset < len(pairs):
        chunk = pairs[offset : offset + sizes[len(batches) % len(sizes)]]
        batches.append(Batch(offset, 0, len(chunk) - 1, tuple((d, 0, *pair) for d, pair in enumerate(chunk)), 1))
        offset += len(chunk)
    assert load_batches(batches).store == replay_in_log_order(pairs)


@pytest.mark.parametrize(
    "value",
    [packed([3, 1, 2**31, "", 0]), packed([9, 1, 0, "", 0]), b"\x95\x03\x01\x01\xa1\xff\x01", b"\xc1"],
    ids=["epoch out of range", "unknown version", "metadata not UTF-8", "not msgpack"],
)
def test_a_surviving_value_that_does_not_decode_stops_the_load_naming_its_offset(value):
    good = encode_record(OffsetCommitKey("g", "t", 0), OffsetCommitValue(5, "", 1_000))
    bad = (encode_key(OffsetCommitKey("g", "t", 1)), value)
    batch = Batch(7, 0, 1, ((0, 0, *good), (1, 0, *bad)), 1)
    with pytest.raises(RecordError, match="^record at offset 8: "):
        load_batches([batch])


def test_a_partition_number_beyond_int32_is_not_a_key():
    key = b"\x94\x01" + packed("g") + packed("t") + packed(2**31)
    with pytest.raises(RecordError, match="^record at offset 0: "):
        load_batches([Batch(0, 0, 0, ((0, 0, key, None),), 1)])
