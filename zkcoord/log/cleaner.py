"""Log compaction: rewrite the closed segments keeping the latest record per key.

A pass takes every segment but the active one, finds the last offset of each key (compared in canonical
form, :func:`zkcoord.offsets.records.canonical_key`), and copies each batch
with only the records that are still the latest for their key, keeping offsets, batch base offsets and
timestamps. A tombstone that is the latest for its key is dropped once its batch is older than
``log.cleaner.delete.retention.ms``: every older record of that key is in the same closed range and is
dropped too, so replaying the cleaned log gives what replaying the original gives.

The new segments become visible through :mod:`zkcoord.log.swap`, so a crash leaves the old set or the
new set. :class:`BackgroundCleaner` runs passes in a greenlet, within an IO budget.

In a directory shared by coordinator nodes (a fenced log), every change to the directory's names (creating,
replacing or discarding ``.cleaned`` files, the swap itself) is made under the log's fence, so a deposed
leader's cleaner cannot touch what the new leader's cleaner writes.
"""

import contextlib
import logging
import os
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import gevent

from zkcoord.errors import CorruptLogError, LogError
from zkcoord.log import swap
from zkcoord.log.format import Batch, LogFormatError, encode_entry
from zkcoord.log.partition import PartitionLog
from zkcoord.log.segment import INDEX_SUFFIX, ScanProblem, Segment, fsync_directory, read_batches, segment_name
from zkcoord.offsets.records import canonical_key

log = logging.getLogger(__name__)

IoHook = Callable[[int], None]
"""Called with the bytes just read or written: the background cleaner sleeps there to keep within its IO
budget (and yields to other greenlets); the CLI shows progress."""


@dataclass(frozen=True)
class CleanResult:
    segments_before: int
    segments_after: int
    bytes_before: int
    bytes_after: int
    records_read: int
    records_kept: int
    tombstones_dropped: int
    seconds: float

    @property
    def records_per_second(self) -> float:
        return self.records_read / self.seconds if self.seconds else 0.0

    def __str__(self) -> str:
        return (
            f"{self.segments_before} → {self.segments_after} segments, {self.bytes_before} → {self.bytes_after} bytes, "
            f"kept {self.records_kept} of {self.records_read} records ({self.tombstones_dropped} tombstones dropped) "
            f"in {self.seconds:.2f}s"
        )


def _ignore_io(_: int) -> None:
    pass


def clean(
    partition: PartitionLog,
    now_ms: int,
    delete_retention_ms: int | None = None,
    on_io: IoHook = _ignore_io,
) -> CleanResult | None:
    """One compaction pass over the closed segments of ``partition``; None if there are none."""
    started = time.perf_counter()
    closed = partition.segments[:-1]
    if not closed:
        return None
    retention = partition.config.delete_retention_ms if delete_retention_ms is None else delete_retention_ms
    read, close = _reader(partition, closed, on_io)
    try:
        latest, records_read = _last_offset_per_key(read)
        new_segments, records_kept, tombstones_dropped = _copy_latest(
            partition, read, latest, now_ms - retention, on_io
        )
        _swap_in(partition, closed, new_segments)
    finally:
        close()
    return CleanResult(
        len(closed),
        len(new_segments),
        sum(segment.size for segment in closed),
        sum(segment.size for segment in new_segments),
        records_read,
        records_kept,
        tombstones_dropped,
        time.perf_counter() - started,
    )


def _last_offset_per_key(read) -> tuple[dict[bytes, int], int]:
    latest: dict[bytes, int] = {}
    records_read = 0
    for batch in read():
        base = batch.base_offset
        for delta, _, key, _ in batch.records:
            latest[canonical_key(key)] = base + delta
        records_read += len(batch.records)
    return latest, records_read


def _copy_latest(
    partition: PartitionLog, read, latest: dict[bytes, int], tombstone_horizon_ms: int, on_io: IoHook
) -> tuple[list[Segment], int, int]:
    """Write the still-latest records to ``.cleaned`` segments; tombstones from batches at or before the horizon go."""
    writer = _CleanedWriter(partition, on_io)
    records_kept = tombstones_dropped = 0
    try:
        for batch in read():
            kept = []
            base = batch.base_offset
            expired = batch.timestamp_ms <= tombstone_horizon_ms
            for record in batch.records:
                delta, _, key, value = record
                if latest[canonical_key(key)] != base + delta:
                    continue
                if value is None and expired:
                    tombstones_dropped += 1
                    continue
                kept.append(record)
            if kept:
                records_kept += len(kept)
                writer.write(batch, kept)
        if partition.closed:
            raise LogError(f"{partition.directory} was closed during compaction; nothing was swapped")
        return writer.finish(), records_kept, tombstones_dropped
    except BaseException:
        writer.abandon()
        raise


def _swap_in(partition: PartitionLog, closed: tuple[Segment, ...], new_segments: list[Segment]) -> None:
    plan = swap.SwapPlan(tuple(segment.base_offset for segment in closed), tuple(s.base_offset for s in new_segments))
    with partition.fenced():
        swap.commit_plan(partition.directory, plan)
        swap.apply_plan(partition.directory, plan)
    for segment in new_segments:
        segment.path = partition.directory / segment_name(segment.base_offset)
        segment.index_path = segment.path.with_suffix(INDEX_SUFFIX)
    partition.replace_segments(closed, new_segments)


def _reader(partition: PartitionLog, segments: tuple[Segment, ...], on_io: IoHook):
    """Batches of ``segments``; a corrupt one stops the pass with CorruptLogError before anything is swapped.

    Reads through duplicated descriptors taken now, so a partition closed during a (yielding) pass cannot
    make the pass read a reused descriptor.
    """
    config = partition.config
    views = [(segment, os.dup(segment.fd), segment.size) for segment in segments]

    def read():
        for segment, fd, size in views:
            next_offset = segment.base_offset
            try:
                for batch in read_batches(fd, 0, size, config.max_message_bytes, config.load_buffer_bytes):
                    on_io(batch.size)
                    next_offset = batch.next_offset
                    yield batch
            except LogFormatError as exc:
                raise CorruptLogError(ScanProblem.of(exc, segment.path, next_offset)) from None

    def close():
        for _, fd, _ in views:
            os.close(fd)

    return read, close


class _CleanedWriter:
    """Writes kept batches into ``.cleaned`` segments of at most ``log.segment.bytes``, each fsynced."""

    def __init__(self, partition: PartitionLog, on_io: IoHook):
        self.partition = partition
        self.on_io = on_io
        self.segments: list[Segment] = []
        self.first_base = partition.segments[0].base_offset

    def write(self, batch: Batch, records: list) -> None:
        entry = encode_entry(batch.base_offset, batch.timestamp_ms, records)
        current = self.segments[-1] if self.segments else None
        if current is None or current.size + len(entry) > self.partition.config.segment_bytes:
            self._close_current()
            base = self.first_base if current is None else batch.base_offset
            path = swap.cleaned_path(self.partition.directory, base)
            with self.partition.fenced():
                path.unlink(missing_ok=True)
                current = Segment(path, base, True, self.partition.config.index_interval_bytes)
            self.segments.append(current)
        current.append(entry, batch.base_offset, batch.base_offset + records[-1][0] + 1, batch.timestamp_ms)
        if current.size - current.written_size >= self.partition.config.load_buffer_bytes:
            current.write_out()
        self.on_io(len(entry))

    def _close_current(self) -> None:
        if not self.segments:
            return
        current = self.segments[-1]
        current.write_out()
        current.fsync()
        current.index_path = swap.cleaned_path(self.partition.directory, current.base_offset, INDEX_SUFFIX)
        with self.partition.fenced():
            current.write_index_file()

    def abandon(self) -> None:
        for segment in self.segments:
            segment.close()
        # A fenced (or failed) log leaves the leftovers to the next open, which discards them under its own claim.
        with contextlib.suppress(LogError), self.partition.fenced():
            swap.discard_unfinished(self.partition.directory)

    def finish(self) -> list[Segment]:
        self._close_current()
        fsync_directory(self.partition.directory)
        return self.segments


class TokenBucket:
    """Sleeps (cooperatively) so that at most ``rate`` bytes per second pass; yields to other greenlets often."""

    def __init__(self, rate: int, sleep: Callable[[float], None] = gevent.sleep, clock=time.monotonic):
        self.rate = rate
        self.sleep = sleep
        self.clock = clock
        self.started = clock()
        self.spent = 0

    def __call__(self, size: int) -> None:
        self.spent += size
        ahead = self.spent / self.rate - (self.clock() - self.started)
        self.sleep(max(ahead, 0.0))


class BackgroundCleaner:
    """Cleans each registered partition when enough of its closed bytes are new since its last pass."""

    def __init__(self, clock, rate_bytes_per_second: int | None = None, backoff_ms: int | None = None):
        self.clock = clock
        self.rate = rate_bytes_per_second
        self.backoff_ms = backoff_ms
        self.partitions: list[PartitionLog] = []
        self._clean_bytes: dict[int, int] = {}
        self._greenlet: gevent.Greenlet | None = None
        self.results: deque[CleanResult] = deque(maxlen=64)  # the latest passes, for metrics and tests

    def add(self, partition: PartitionLog) -> None:
        self.partitions.append(partition)

    def remove(self, partition: PartitionLog) -> None:
        self.partitions.remove(partition)
        self._clean_bytes.pop(id(partition), None)

    def dirty_ratio(self, partition: PartitionLog) -> float:
        closed = sum(segment.size for segment in partition.segments[:-1])
        if not closed:
            return 0.0
        return (closed - self._clean_bytes.get(id(partition), 0)) / closed

    def run_once(self) -> list[CleanResult]:
        """Clean every partition that is dirty enough; returns what was done."""
        done = []
        for partition in list(self.partitions):
            if self.dirty_ratio(partition) < partition.config.cleaner_min_cleanable_ratio:
                continue
            rate = self.rate or partition.config.cleaner_io_bytes_per_second
            try:
                result = clean(partition, self.clock.now_ms(), on_io=TokenBucket(rate))
            except Exception:
                log.exception("cleaning %s failed; will retry after the back-off", partition.directory)
                continue
            if result is not None:
                self._clean_bytes[id(partition)] = result.bytes_after
                log.info("cleaned %s: %s", partition.directory, result)
                done.append(result)
        self.results.extend(done)
        return done

    def _loop(self) -> None:
        while True:
            self.run_once()
            backoff = self.backoff_ms
            if backoff is None:
                backoff = min((p.config.cleaner_backoff_ms for p in self.partitions), default=15000)
            gevent.sleep(backoff / 1000.0)

    def start(self) -> None:
        if self._greenlet is None:
            self._greenlet = gevent.spawn(self._loop)

    def stop(self) -> None:
        if self._greenlet is not None:
            self._greenlet.kill()
            self._greenlet = None
