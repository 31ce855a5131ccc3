"""Loading a partition into an offset store (§9.6) and offset expiry written as tombstones (§7.6)."""

import os

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st
from record_strategies import records

from zkcoord.errors import CorruptRecordError
from zkcoord.log import LogConfig, PartitionLog, syncer
from zkcoord.log.format import Batch
from zkcoord.log.loader import expire_offsets, load_batches, load_partition
from zkcoord.model import TopicPartition
from zkcoord.offsets.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_key,
    decode_value,
    encode_key,
    encode_record,
)
from zkcoord.offsets.store import OffsetStore

RETENTION_MS = 60_000


def commit(group, partition, offset, timestamp):
    return encode_record(OffsetCommitKey(group, "t", partition), OffsetCommitValue(offset, "", timestamp))


def test_load_takes_the_latest_record_per_key_across_segments_and_deletes_on_tombstones(tmp_path):
    """GMMT testLoadGroupAndOffsetsFromDifferentSegments, testLoadOffsetsWithTombstones."""
    with PartitionLog.open(tmp_path, LogConfig(segment_bytes=1024, max_message_bytes=1024)) as partition:
        for number in range(30):
            partition.append([commit("g", number % 3, number, 1_000)])
        partition.append([encode_record(OffsetCommitKey("g", "t", 2), None)])
        partition.append([encode_record(GroupMetadataKey("g"), GroupMetadataValue("consumer", 1, "range", "m", 5))])
        assert len(partition.segments) > 1
        result = load_partition(partition)
    assert {tp.partition: committed.offset for tp, committed in result.store.offsets["g"].items()} == {0: 27, 1: 28}
    assert result.store.offset("g", TopicPartition("t", 1)).log_offset == 28
    assert result.store.groups["g"].generation == 1
    assert (result.records, result.batches) == (32, 32)
    assert "32 records" in str(result) and result.records_per_second > 0


def replay_one_by_one(pairs: list[tuple[bytes, bytes | None]]) -> OffsetStore:
    store = OffsetStore()
    for offset, (key_bytes, value_bytes) in enumerate(pairs):
        key = decode_key(key_bytes, offset)
        store.apply(key, decode_value(key, value_bytes, offset), offset)
    return store


def version_0_key(key):
    """The same offset commit key as Kafka's version 0 writes it: not the bytes zkcoord writes."""
    return msgpack.packb([0, *key]) if type(key) is OffsetCommitKey else encode_key(key)


@given(
    st.lists(
        st.tuples(records(groups=st.sampled_from("gh"), topics=st.just("t"), partitions=st.just(0)), st.booleans())
    )
)
def test_loading_rebuilds_the_store_that_applying_each_record_in_turn_builds(records_and_foreign):
    """The bulk path (keys in zkcoord's own bytes) and the record-by-record one agree, also when a key comes in
    another encoding."""
    pairs = [
        (version_0_key(key) if foreign else encode_key(key), encode_record(key, value)[1])
        for (key, value), foreign in records_and_foreign
    ]
    batches = [Batch(offset, 0, 0, ((0, 0, *pair),), 1) for offset, pair in enumerate(pairs)]
    assert load_batches(batches).store == replay_one_by_one(pairs)


def test_an_unknown_record_version_stops_the_load_naming_its_offset(tmp_path):
    with PartitionLog.open(tmp_path) as partition:
        partition.append([commit("g", 0, 1, 0)])
        partition.append([(encode_key(GroupMetadataKey("g"))[:1] + b"\\x07", b"x")])
        with pytest.raises(CorruptRecordError, match=f"{tmp_path}: record at offset 1: .*zkcoord log verify"):
            load_partition(partition)


def test_expired_offsets_are_tombstoned_and_stay_gone_after_a_reload(tmp_path):
    """§7.6 (c): an offsets-only group's offsets expire retention after their commit; the group goes with them."""
    with PartitionLog.open(tmp_path) as partition:
        partition.append([commit("old", 0, 5, 1_000), commit("old", 1, 6, 1_000)])
        partition.append([commit("young", 0, 7, 50_000)])
        store = load_partition(partition).store

        expired = expire_offsets(partition, store, now_ms=61_000, retention_ms=RETENTION_MS)

        assert expired == [OffsetCommitKey("old", "t", 0), OffsetCommitKey("old", "t", 1)]
        assert store.group_ids() == {"young"}
        assert load_partition(partition).store == store
        assert [value for batch in partition.read(3) for _, _, value in batch.entries()] == [None, None]
        assert expire_offsets(partition, store, now_ms=61_000, retention_ms=RETENTION_MS) == []
        assert partition.end_offset == 5


def test_many_expiry_tombstones_are_split_into_batches_that_fit(tmp_path):
    with PartitionLog.open(tmp_path, LogConfig(max_message_bytes=200, segment_bytes=1024)) as partition:
        for number in range(30):  # one commit per batch fits; thirty tombstones in one batch would not
            partition.append([commit("g", number, number, 0)])
        store = load_partition(partition).store
        expired = expire_offsets(partition, store, now_ms=RETENTION_MS, retention_ms=RETENTION_MS)
        assert len(expired) == 30
        tombstone_batches = list(partition.read(30))
        assert len(tombstone_batches) > 1
        assert sum(len(batch.records) for batch in tombstone_batches) == 30
        assert len(load_partition(partition).store) == 0


def test_an_expiry_append_failure_is_only_logged(tmp_path, monkeypatch, caplog):
    """§9.4: expiry tombstones are fire-and-forget; the store changes regardless."""
    with PartitionLog.open(tmp_path) as partition:
        partition.append([commit("g", 0, 1, 0), commit("g", 1, 2, 0)])
        store = load_partition(partition).store

        def failing_fsync(fd):
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(os, "fsync", failing_fsync)
        monkeypatch.setattr(syncer, "fsync_all", None)  # a group round's fsyncs go through os.fsync too
        expired = expire_offsets(partition, store, now_ms=RETENTION_MS, retention_ms=RETENTION_MS)
        monkeypatch.undo()
    assert len(expired) == 2 and store.group_ids() == set()
    assert "could not append 2 expiry tombstones" in caplog.text and "No space left" in caplog.text
