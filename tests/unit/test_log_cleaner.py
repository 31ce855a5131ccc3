"""Compaction: latest record per key, tombstone retention, idempotence, replay equality, the active segment."""

import gevent
import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from record_strategies import records

from zkcoord.clock import ManualClock
from zkcoord.errors import CorruptLogError, LogError
from zkcoord.log import LogConfig, PartitionLog
from zkcoord.log.cleaner import BackgroundCleaner, TokenBucket, clean
from zkcoord.log.loader import load_partition
from zkcoord.log.segment import read_batches
from zkcoord.offsets.records import OffsetCommitKey, OffsetCommitValue, encode_record

CONFIG = LogConfig(segment_bytes=1024, max_message_bytes=1024, index_interval_bytes=128)
RETENTION_MS = 1_000

few_records = records(
    groups=st.sampled_from(["a", "b", "c"]), topics=st.sampled_from(["t", "u"]), partitions=st.integers(0, 2)
)
small_values = few_records.filter(lambda record: len(encode_record(*record)[1] or b"") < 300)
batches = st.lists(
    st.tuples(st.lists(small_values, min_size=1, max_size=3), st.integers(0, 5_000)), min_size=1, max_size=80
)


def entries_with_time(segments, config=CONFIG):
    return [
        (offset, key, value, batch.timestamp_ms)
        for segment in segments
        for batch in read_batches(segment.fd, 0, segment.size, config.max_message_bytes, config.load_buffer_bytes)
        for offset, key, value in batch.entries()
    ]


def write(directory, appended):
    partition = PartitionLog.open(directory, CONFIG)
    for pairs, timestamp_ms in appended:
        partition.append([encode_record(key, value) for key, value in pairs], timestamp_ms)
    return partition


@settings(max_examples=60, deadline=None)
@given(batches, st.integers(0, 6_000))
def test_cleaning_keeps_the_latest_record_per_key_and_replays_to_the_same_store(tmp_path_factory, appended, now_ms):
    """group-coordinator §9.8: the loader gives the same result whether or not superseded records remain."""
    with write(tmp_path_factory.mktemp("log"), appended) as partition:
        closed_before = entries_with_time(partition.segments[:-1])
        active = partition.segments[-1]
        active_bytes = active.path.read_bytes()
        store_before = load_partition(partition).store

        clean(partition, now_ms, RETENTION_MS)

        assert load_partition(partition).store == store_before
        assert partition.segments[-1] is active and active.path.read_bytes() == active_bytes
        closed_after = entries_with_time(partition.segments[:-1])
        last_of_key = {key: (offset, value, timestamp) for offset, key, value, timestamp in closed_before}
        expected = sorted(
            (offset, key, value, timestamp)
            for key, (offset, value, timestamp) in last_of_key.items()
            if not (value is None and now_ms - timestamp >= RETENTION_MS)
        )
        assert closed_after == expected  # offsets, order and timestamps kept; nothing else survives

        clean(partition, now_ms, RETENTION_MS)
        assert entries_with_time(partition.segments[:-1]) == closed_after  # idempotent

    with PartitionLog.open(partition.directory, CONFIG) as reopened:
        assert reopened.recovery.compaction is None and reopened.recovery.truncated is None
        assert load_partition(reopened).store == store_before


def test_a_young_tombstone_is_kept_and_an_old_one_dropped(tmp_path):
    key = OffsetCommitKey("g", "t", 0)
    with PartitionLog.open(tmp_path, CONFIG) as partition:
        partition.append([encode_record(key, OffsetCommitValue(1, "", 0))], timestamp_ms=0)
        partition.append([encode_record(key, None)], timestamp_ms=100)
        partition.roll()
        partition.append([encode_record(OffsetCommitKey("g", "t", 1), OffsetCommitValue(2, "", 0))], 200)

        clean(partition, now_ms=100 + RETENTION_MS - 1, delete_retention_ms=RETENTION_MS)
        assert [(o, v) for o, _, v, _ in entries_with_time(partition.segments[:-1])] == [(1, None)]

        result = clean(partition, now_ms=100 + RETENTION_MS, delete_retention_ms=RETENTION_MS)
        assert result.tombstones_dropped == 1
        assert entries_with_time(partition.segments[:-1]) == []
        assert partition.start_offset == 2 and partition.end_offset == 3
        assert len(load_partition(partition).store) == 1


def test_nothing_to_clean_without_closed_segments(tmp_path):
    with PartitionLog.open(tmp_path, CONFIG) as partition:
        partition.append([(b"k", b"v")])
        assert clean(partition, 0) is None


def test_token_bucket_keeps_within_its_rate_and_yields():
    now = [0.0]
    slept = []

    def sleep(seconds):
        slept.append(seconds)
        now[0] += seconds

    bucket = TokenBucket(1000, sleep=sleep, clock=lambda: now[0])
    for _ in range(10):
        bucket(500)
    assert now[0] == 5.0
    assert len(slept) == 10  # every call yields, even with budget left


def test_the_background_cleaner_compacts_while_appends_go_on(tmp_path):
    clock = ManualClock(10_000)
    config = LogConfig(segment_bytes=2048, max_message_bytes=2048, cleaner_min_cleanable_ratio=0.2)
    keys = [OffsetCommitKey("g", "t", number) for number in range(5)]
    with PartitionLog.open(tmp_path, config, clock) as partition:
        cleaner = BackgroundCleaner(clock, rate_bytes_per_second=10_000_000, backoff_ms=1)
        cleaner.add(partition)
        cleaner.start()

        def appender():
            for number in range(400):
                key = keys[number % 5]
                partition.append([encode_record(key, OffsetCommitValue(number, "m" * 40, clock.now_ms()))])
                gevent.sleep(0)

        gevent.spawn(appender).get(timeout=30)
        cleaner.stop()
        assert cleaner.results, "the cleaner never ran"
        assert sum(segment.size for segment in partition.segments[:-1]) < 2 * 2048
        store = load_partition(partition).store
        assert {tp.partition: committed.offset for tp, committed in store.offsets["g"].items()} == {
            number: 395 + number for number in range(5)
        }


def test_a_version_0_key_and_its_version_1_tombstone_compact_as_one_key(tmp_path):
    """§9.3: offset-commit keys v0 and v1 are one logical key; the v0 value must not outlive the tombstone."""
    key_v1, value = encode_record(OffsetCommitKey("g", "t", 0), OffsetCommitValue(5, "", 1_000))
    key_v0 = msgpack.packb((0, "g", "t", 0), use_bin_type=True)
    with PartitionLog.open(tmp_path, CONFIG) as partition:
        partition.append([(key_v0, value)], timestamp_ms=1_000)
        partition.append([(key_v1, None)], timestamp_ms=2_000)
        partition.roll()
        assert len(load_partition(partition).store) == 0
        clean(partition, now_ms=10**9, delete_retention_ms=RETENTION_MS)
        assert entries_with_time(partition.segments[:-1]) == []
        assert len(load_partition(partition).store) == 0


def test_a_corrupt_closed_segment_stops_the_pass_and_changes_nothing(tmp_path):
    with write(tmp_path, [([(OffsetCommitKey("g", "t", n % 3), OffsetCommitValue(n, "", 0))], 0) for n in range(60)]):
        pass
    first = tmp_path / f"{0:020d}.log"
    damaged = bytearray(first.read_bytes())
    damaged[40] ^= 0xFF
    first.write_bytes(bytes(damaged))
    files_before = sorted(path.name for path in tmp_path.iterdir())
    with PartitionLog.open(tmp_path, CONFIG) as partition, pytest.raises(CorruptLogError, match=str(first)):
        clean(partition, now_ms=0)
    assert sorted(path.name for path in tmp_path.iterdir()) == files_before
    assert first.read_bytes() == bytes(damaged)


def test_a_partition_closed_during_a_pass_is_left_as_it_was(tmp_path):
    with write(tmp_path, [([(OffsetCommitKey("g", "t", n % 3), OffsetCommitValue(n, "", 0))], 0) for n in range(60)]):
        pass
    before = {path.name: path.read_bytes() for path in tmp_path.glob("*.log")}
    partition = PartitionLog.open(tmp_path, CONFIG)
    with pytest.raises(LogError, match="closed during compaction"):
        clean(partition, now_ms=0, on_io=lambda _: partition.close())
    assert {path.name: path.read_bytes() for path in tmp_path.glob("*.log")} == before
    assert not list(tmp_path.glob("*.cleaned"))
