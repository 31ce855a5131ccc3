"""The offsets log: entry codec, segments, index reads, flush policies, rolling and recovery on open."""

import contextlib
import os
import struct
import zlib

import gevent
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zkcoord.clock import ManualClock
from zkcoord.errors import (
    ConfigError,
    CorruptLogError,
    LogInUseError,
    LogStorageError,
    RecordTooLargeError,
    UnreadableLogStateError,
)
from zkcoord.log import LogConfig, PartitionLog, syncer
from zkcoord.log.format import HEADER_SIZE, LogFormatError, decode_entry, encode_entry, encode_records
from zkcoord.log.segment import check_batches, find_valid_entry, partition_directories

SMALL = LogConfig(segment_bytes=4096, max_message_bytes=2048, index_interval_bytes=256)

keys = st.binary(min_size=1, max_size=40)
values = st.none() | st.binary(max_size=200)
record_lists = st.lists(st.tuples(keys, values), min_size=1, max_size=20)


def replay(partition: PartitionLog, start: int | None = None) -> list[tuple[int, bytes, bytes | None]]:
    return [entry for batch in partition.read(start) for entry in batch.entries()]


def fill(partition: PartitionLog, count: int, size: int = 100) -> list[tuple[int, bytes, bytes]]:
    written = []
    for number in range(count):
        key, value = b"key-%d" % (number % 17), bytes([number % 251]) * size
        result = partition.append([(key, value)])
        written.append((result.base_offset, key, value))
    return written


# -- entry codec ------------------------------------------------------------------------------------


@given(st.integers(0, 2**62), st.integers(-(2**63), 2**63 - 1), record_lists)
def test_entry_round_trips(base_offset, timestamp_ms, pairs):
    entry = encode_records(base_offset, timestamp_ms, pairs)
    batch = decode_entry(entry, 0, len(entry))
    assert (batch.base_offset, batch.timestamp_ms, batch.size) == (base_offset, timestamp_ms, len(entry))
    assert batch.entries() == [(base_offset + i, key, value) for i, (key, value) in enumerate(pairs)]


@given(st.binary(max_size=300))
def test_random_bytes_only_raise_the_codecs_error(data):
    with contextlib.suppress(LogFormatError):
        decode_entry(data, 0, 1 << 20)


@given(st.binary(max_size=300), st.integers(0, 5), st.integers(0, 10))
def test_random_records_under_a_valid_crc_only_raise_the_codecs_error(payload, count, last_delta):
    body = struct.pack(">BBqqII", 1, 0, 0, 0, count, last_delta) + payload
    entry = struct.pack(">II", len(body) + 4, zlib.crc32(body)) + body
    try:
        batch = decode_entry(entry, 0, 1 << 20)
    except LogFormatError:
        return
    assert len(batch.records) == count and batch.last_offset_delta == last_delta


@given(record_lists, st.data())
def test_a_cut_entry_is_torn_and_a_flipped_byte_is_corrupt(pairs, data):
    entry = encode_records(7, 0, pairs)
    cut = data.draw(st.integers(0, len(entry) - 1))
    with pytest.raises(LogFormatError) as torn:
        decode_entry(entry[:cut], 0, 1 << 20)
    assert torn.value.torn
    position = data.draw(st.integers(4, len(entry) - 1))
    flipped = bytearray(entry)
    flipped[position] ^= data.draw(st.integers(1, 255))
    with pytest.raises(LogFormatError) as corrupt:
        decode_entry(bytes(flipped), 0, 1 << 20)
    assert not corrupt.value.torn


def test_a_record_needs_a_key():
    """group-coordinator §9.2: every record has a non-null key."""
    entry = encode_entry(0, 0, [(0, 0, None, b"v")])
    with pytest.raises(LogFormatError, match="no key"):
        decode_entry(entry, 0, 1 << 20)


# -- appending and reading ----------------------------------------------------------------------------


def test_appends_get_consecutive_offsets_and_survive_reopening(tmp_path):
    with PartitionLog.open(tmp_path, SMALL) as partition:
        first = partition.append([(b"a", b"1"), (b"b", None)])
        second = partition.append([(b"c", b"3")], timestamp_ms=42)
        assert (first.base_offset, first.last_offset, second.base_offset, second.timestamp_ms) == (0, 1, 2, 42)
    with PartitionLog.open(tmp_path, SMALL) as partition:
        assert partition.recovery.truncated is None
        assert partition.end_offset == 3
        assert replay(partition) == [(0, b"a", b"1"), (1, b"b", None), (2, b"c", b"3")]


def test_segments_roll_by_size_and_are_named_by_base_offset(tmp_path):
    with PartitionLog.open(tmp_path, SMALL) as partition:
        written = fill(partition, 200)
        assert len(partition.segments) > 3
        assert all(segment.size <= SMALL.segment_bytes for segment in partition.segments)
        names = sorted(path.name for path in tmp_path.glob("*.log"))
        assert names == [f"{segment.base_offset:020d}.log" for segment in partition.segments]
        assert replay(partition) == written


def test_segments_roll_by_age(tmp_path):
    clock = ManualClock(1_000)
    config = LogConfig(roll_ms=60_000)
    with PartitionLog.open(tmp_path, config, clock) as partition:
        partition.append([(b"k", b"v")])
        clock.advance(59_999)
        partition.append([(b"k", b"v")])
        assert len(partition.segments) == 1
        clock.advance(1)
        partition.append([(b"k", b"v")])
        assert [segment.base_offset for segment in partition.segments] == [0, 2]


def test_an_oversized_batch_is_refused_and_nothing_is_written(tmp_path):
    with PartitionLog.open(tmp_path, SMALL) as partition:
        with pytest.raises(RecordTooLargeError) as error:
            partition.append([(b"k", b"x" * 4000)])
        assert error.value.error_code.name == "MESSAGE_TOO_LARGE"
        assert partition.end_offset == 0
        partition.append([(b"k", b"small")])
        assert replay(partition) == [(0, b"k", b"small")]


@pytest.mark.parametrize("start", [0, 1, 57, 123, 198, 199])
def test_read_from_an_offset_returns_the_batches_from_there(tmp_path, start):
    with PartitionLog.open(tmp_path, SMALL) as partition:
        written = fill(partition, 200)
        assert replay(partition, start) == written[start:]
    with PartitionLog.open(tmp_path, SMALL) as partition:  # older segments now read their .index files
        assert replay(partition, start) == written[start:]


def test_read_from_an_offset_does_not_scan_from_the_start(tmp_path):
    """A read from an offset begins at the index entry before it: damage earlier in the segment is never read."""
    config = LogConfig(index_interval_bytes=256)
    with PartitionLog.open(tmp_path, config) as partition:
        written = fill(partition, 50)
        partition.roll()
        fill(partition, 1)
    segment = tmp_path / f"{0:020d}.log"
    damaged = bytearray(segment.read_bytes())
    damaged[HEADER_SIZE + 2] ^= 0xFF  # inside the first entry of the (now older) segment
    segment.write_bytes(bytes(damaged))
    with PartitionLog.open(tmp_path, config) as partition:
        assert replay(partition, 40)[:10] == written[40:]
        with pytest.raises(CorruptLogError, match="00000000000000000000.log"):
            replay(partition)


def test_a_missing_or_bad_index_is_rebuilt(tmp_path):
    with PartitionLog.open(tmp_path, SMALL) as partition:
        written = fill(partition, 100)
    indexes = sorted(tmp_path.glob("*.index"))
    assert indexes
    indexes[0].unlink()
    indexes[1].write_bytes(b"\x00\x00\x00\x09")  # not a whole entry
    with PartitionLog.open(tmp_path, SMALL) as partition:
        assert replay(partition, 60) == written[60:]
        assert replay(partition) == written
    assert indexes[0].exists() and len(indexes[1].read_bytes()) % 8 == 0


def test_a_second_opener_is_refused_while_the_first_holds_the_directory(tmp_path):
    with PartitionLog.open(tmp_path, SMALL), pytest.raises(LogInUseError, match=str(os.getpid())):
        PartitionLog.open(tmp_path, SMALL)
    PartitionLog.open(tmp_path, SMALL).close()


def test_unknown_flush_policy_is_a_config_error():
    with pytest.raises(ConfigError, match="log.flush.policy=sometimes is not valid: use always, group or never"):
        LogConfig(flush_policy="sometimes")


# -- flush policies -----------------------------------------------------------------------------------


@pytest.fixture
def synced_sizes(monkeypatch):
    """Record the file size each fsync made durable (keyed by inode)."""
    sizes: dict[int, int] = {}
    real_fsync = os.fsync

    def recording_fsync(fd):
        size = os.fstat(fd)
        real_fsync(fd)
        sizes[size.st_ino] = max(sizes.get(size.st_ino, 0), size.st_size)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    if syncer.fsync_all is not None:  # a group round's fsyncs, where they run compiled
        real_fsync_all = syncer.fsync_all

        def recording_fsync_all(fds):
            before = [os.fstat(fd) for fd in fds]
            errors = real_fsync_all(fds)
            for size, error in zip(before, errors, strict=True):
                if not error:
                    sizes[size.st_ino] = max(sizes.get(size.st_ino, 0), size.st_size)
            return errors

        monkeypatch.setattr(syncer, "fsync_all", recording_fsync_all)
    return sizes


def _append_concurrently(partition: PartitionLog, synced: dict[int, int], appenders: int, each: int) -> list[int]:
    """Offsets acknowledged before an fsync covered their whole entry (none, if the policy holds)."""
    acknowledged = []

    def appender(number: int) -> None:
        for _ in range(each):
            result = partition.append([(b"k%d" % number, b"v" * 150)])
            inode = os.fstat(partition.segments[-1].fd).st_ino
            acknowledged.append((result.base_offset, synced.get(inode, -1)))

    gevent.joinall([gevent.spawn(appender, number) for number in range(appenders)], raise_error=True)
    (segment,) = partition.segments
    config = partition.config
    entry_ends = {  # offset → end of the entry holding it (group writes a round's appends as one entry)
        offset: position + batch.size
        for position, batch in check_batches(
            segment.fd, 0, segment.size, config.max_message_bytes, config.load_buffer_bytes
        )
        for offset, _, _ in batch.entries()
    }
    assert len(entry_ends) == len(acknowledged) == appenders * each
    return [offset for offset, synced_then in acknowledged if synced_then < entry_ends[offset]]


def test_always_fsyncs_each_append_before_returning(tmp_path, synced_sizes):
    with PartitionLog.open(tmp_path, LogConfig(flush_policy="always")) as partition:
        assert _append_concurrently(partition, synced_sizes, appenders=4, each=5) == []
        assert partition.fsync_count == 20


def test_group_shares_fsyncs_between_concurrent_appends_and_acknowledges_only_after_them(tmp_path, synced_sizes):
    with PartitionLog.open(tmp_path, LogConfig(flush_policy="group")) as partition:
        assert _append_concurrently(partition, synced_sizes, appenders=32, each=5) == []
        assert partition.end_offset == 160
        assert partition.fsync_count <= 160 // 4
        assert replay(partition) == [(offset, b"k%d" % (offset % 32), b"v" * 150) for offset in range(160)]


def test_group_writes_a_round_as_few_entries_as_message_max_bytes_allows(tmp_path):
    config = LogConfig(flush_policy="group", max_message_bytes=1000, segment_bytes=4000)
    with PartitionLog.open(tmp_path, config) as partition:
        results = []

        def appender(number: int) -> None:
            results.append(partition.append([(b"k%d" % number, b"v" * 100)] * 3, timestamp_ms=number))

        gevent.joinall([gevent.spawn(appender, number) for number in range(20)], raise_error=True)
        batches = list(partition.read())
        assert all(batch.size <= 1000 for batch in batches)
        assert 1 < len(batches) < 20  # merged, and split where an entry would outgrow message.max.bytes
        assert sorted((r.base_offset, r.last_offset) for r in results) == [(3 * n, 3 * n + 2) for n in range(20)]
        by_offset = {offset: key for batch in batches for offset, key, _ in batch.entries()}
        for result in results:  # each append's records are contiguous, in its own order
            assert {by_offset[offset] for offset in range(result.base_offset, result.last_offset + 1)} == {
                b"k%d" % result.timestamp_ms
            }
        assert [batch.timestamp_ms for batch in batches] == sorted(batch.timestamp_ms for batch in batches)


def test_never_leaves_fsync_to_the_os_until_close(tmp_path, synced_sizes):
    partition = PartitionLog.open(tmp_path, LogConfig(flush_policy="never"))
    fill(partition, 10)
    assert partition.fsync_count == 0
    assert os.path.getsize(tmp_path / f"{0:020d}.log") == partition.segments[-1].size  # written, not buffered
    partition.close()
    assert partition.fsync_count == 1


@pytest.mark.parametrize("policy", ["always", "group", "never"])
def test_a_failed_write_fails_the_log_until_it_is_reopened(tmp_path, monkeypatch, policy):
    partition = PartitionLog.open(tmp_path, LogConfig(flush_policy=policy))
    partition.append([(b"k", b"kept")])
    partition.flush()

    def failing_pwrite(fd, data, position):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "pwrite", failing_pwrite)
    with pytest.raises(LogStorageError, match="Input/output error") as error:
        partition.append([(b"k", b"lost")])
    assert error.value.error_code.name == "KAFKA_STORAGE_ERROR"
    monkeypatch.undo()
    with pytest.raises(LogStorageError):
        partition.append([(b"k", b"refused")])
    partition.close()
    with PartitionLog.open(tmp_path) as reopened:
        assert replay(reopened) == [(0, b"k", b"kept")]


# -- recovery on open -----------------------------------------------------------------------------------


def test_a_torn_tail_is_cut_and_reported(tmp_path):
    with PartitionLog.open(tmp_path, SMALL) as partition:
        written = fill(partition, 5)
    segment = tmp_path / f"{0:020d}.log"
    whole = segment.stat().st_size
    with open(segment, "ab") as file:
        file.write(encode_records(5, 0, [(b"half", b"written")])[:20])
    with PartitionLog.open(tmp_path, SMALL) as partition:
        report = partition.recovery
        assert report.truncated is not None and report.truncated.torn
        assert (report.truncated.position, report.truncated.offset, report.bytes_cut) == (whole, 5, 20)
        assert "cut 20 bytes" in str(report)
        assert replay(partition) == written
        assert partition.append([(b"next", b"v")]).base_offset == 5
    with PartitionLog.open(tmp_path, SMALL) as partition:
        assert partition.recovery.truncated is None


def test_partition_directories_finds_a_partition_or_the_partitions_of_a_log_dir(tmp_path):
    for name in ("__consumer_offsets-1", "__consumer_offsets-0"):
        PartitionLog.open(tmp_path / name).close()
    (tmp_path / "not-a-partition").mkdir()
    assert [path.name for path in partition_directories(tmp_path)] == ["__consumer_offsets-0", "__consumer_offsets-1"]
    assert partition_directories(tmp_path / "__consumer_offsets-1") == [tmp_path / "__consumer_offsets-1"]


@settings(max_examples=30, deadline=None)
@given(st.lists(record_lists, min_size=1, max_size=30))
def test_what_is_appended_is_what_is_read_back(tmp_path_factory, batches):
    directory = tmp_path_factory.mktemp("log")
    with PartitionLog.open(directory, SMALL) as partition:
        expected = []
        for pairs in batches:
            try:
                result = partition.append(pairs)
            except RecordTooLargeError:
                continue
            expected += [(result.base_offset + i, key, value) for i, (key, value) in enumerate(pairs)]
    with PartitionLog.open(directory, SMALL) as partition:
        assert replay(partition) == expected


def test_an_older_segment_with_a_garbage_header_and_no_index_still_opens_and_reports_on_read(tmp_path):
    config = LogConfig(segment_bytes=1024, max_message_bytes=1024, index_interval_bytes=1)
    with PartitionLog.open(tmp_path, config) as partition:
        written = fill(partition, 60)
    first = tmp_path / f"{0:020d}.log"
    data = bytearray(first.read_bytes())
    second_entry = decode_entry(bytes(data), 0, 1024).size
    data[second_entry + 10] ^= 0xFF  # the base offset of the second entry
    first.write_bytes(bytes(data))
    first.with_suffix(".index").unlink()
    with PartitionLog.open(tmp_path, config) as partition:
        with pytest.raises(CorruptLogError, match=f"byte {second_entry} "):
            replay(partition)
        assert replay(partition, 40) == written[40:]


def test_temporary_files_of_an_interrupted_index_write_are_removed_on_open(tmp_path):
    with PartitionLog.open(tmp_path, SMALL) as partition:
        fill(partition, 40)
    leftovers = [tmp_path / f"{0:020d}.index.tmp", tmp_path / f"{0:020d}.index.cleaned.tmp", tmp_path / "swap.json.tmp"]
    for path in leftovers:
        path.write_bytes(b"partial")
    PartitionLog.open(tmp_path, SMALL).close()
    assert not any(path.exists() for path in leftovers)


def _entry_starts(path) -> list[int]:
    data = path.read_bytes()
    starts, position = [], 0
    while position < len(data):
        starts.append(position)
        position += 4 + struct.unpack_from(">I", data, position)[0]
    return starts


@pytest.mark.parametrize("where", [30, 1], ids=["body", "length"])
def test_damage_with_valid_entries_after_it_stops_the_open_and_cuts_nothing(tmp_path, where):
    with PartitionLog.open(tmp_path, SMALL) as partition:
        fill(partition, 8)
    segment = tmp_path / f"{0:020d}.log"
    starts = _entry_starts(segment)
    start = starts[3]
    content = bytearray(segment.read_bytes())
    content[start + where] ^= 0x40
    segment.write_bytes(bytes(content))
    with pytest.raises(CorruptLogError) as raised:
        PartitionLog.open(tmp_path, SMALL)
    message = str(raised.value)
    assert f"{segment}: corrupt entry at byte {start} (offset 3)" in message
    assert f"a valid entry follows at byte {starts[4]} (offset 4)" in message
    assert "log.recovery.skip.corrupt.segments" in message
    assert segment.read_bytes() == bytes(content)  # nothing was cut


def test_skip_corrupt_cuts_a_damaged_active_segment_and_reports_what_followed(tmp_path):
    with PartitionLog.open(tmp_path, SMALL) as partition:
        written = fill(partition, 8)
    segment = tmp_path / f"{0:020d}.log"
    start = _entry_starts(segment)[3]
    content = bytearray(segment.read_bytes())
    content[start + 30] ^= 0x40
    segment.write_bytes(bytes(content))
    with PartitionLog.open(tmp_path, LogConfig(**{**SMALL.__dict__, "skip_corrupt_segments": True})) as partition:
        assert replay(partition) == written[:3]
        assert partition.recovery.bytes_cut == len(content) - start
        assert [problem.position for problem in partition.skipped] == [start]
        assert "a valid entry follows" in str(partition.recovery)


def test_a_torn_tail_after_valid_entries_is_still_cut_when_only_garbage_follows(tmp_path):
    with PartitionLog.open(tmp_path, SMALL) as partition:
        written = fill(partition, 5)
    segment = tmp_path / f"{0:020d}.log"
    whole = segment.stat().st_size
    torn = encode_records(5, 0, [(b"k", b"v" * 300)])
    with open(segment, "ab") as file:
        file.write(torn[:-3])  # its length says more than there is: torn
    with PartitionLog.open(tmp_path, SMALL) as partition:
        assert partition.recovery.truncated.torn and partition.recovery.truncated.position == whole
        assert replay(partition) == written


@pytest.mark.parametrize("content", [b"\xff\xfe{", b"[]", b'{"replaces": [1], "new": ["x"]}'])
def test_a_garbage_swap_plan_stops_the_open_with_a_log_error_naming_it(tmp_path, content):
    with PartitionLog.open(tmp_path, SMALL) as partition:
        fill(partition, 3)
    (tmp_path / "swap.json").write_bytes(content)
    with pytest.raises(UnreadableLogStateError, match=f"{tmp_path / 'swap.json'} is not a swap plan"):
        PartitionLog.open(tmp_path, SMALL)
    assert (tmp_path / "swap.json").read_bytes() == content


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_the_next_valid_entry_is_found_behind_any_damage(tmp_path_factory, data):
    entries = [encode_records(offset, 0, [(b"k%d" % offset, b"v" * (offset * 7 % 50))]) for offset in range(6)]
    damaged = data.draw(st.integers(0, 4), label="damaged entry")
    start = sum(map(len, entries[:damaged]))
    content = bytearray(b"".join(entries))
    for position in data.draw(st.lists(st.integers(0, len(entries[damaged]) - 1), min_size=1, max_size=3)):
        content[start + position] ^= data.draw(st.integers(1, 255))
    path = tmp_path_factory.mktemp("find") / "segment"
    path.write_bytes(bytes(content))
    fd = os.open(path, os.O_RDONLY)
    try:
        found = find_valid_entry(fd, start + 1, len(content), damaged, 4096, data.draw(st.sampled_from([16, 4096])))
    finally:
        os.close(fd)
    assert found == (start + len(entries[damaged]), damaged + 1)
