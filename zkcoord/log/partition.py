"""One partition of the offsets log: a directory of segments, opened, appended to, read and cleaned.

Opening recovers the directory (:mod:`zkcoord.log.recovery`); appends go through the partition's
:class:`~zkcoord.log.appender.Appender` under the flush policy. Older segments were fsynced when they were
rolled, so they are only checked as they are read; a corrupt one stops the read with
:class:`CorruptLogError` unless ``log.recovery.skip.corrupt.segments`` is set. The cleaner swaps cleaned
segments in for a closed prefix of the log (:meth:`PartitionLog.replace_segments`).

A log belongs to the gevent hub (thread) that opened it; greenlets of that hub may append concurrently.

Opened with an :class:`~zkcoord.log.fence.EpochFence`, the directory is shared by coordinator nodes: the log
holds the directory lock shared (an unfenced open, such as an offline tool, still excludes them all), claims
the directory for its leader epoch before recovering, and makes every write under the fence's guard. Once a
newer epoch has claimed the directory, the write is refused and the log fails with :class:`FencedLeaderError`.
"""

import bisect
import contextlib
import logging
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from zkcoord.clock import SystemClock
from zkcoord.errors import CorruptLogError
from zkcoord.log import swap
from zkcoord.log.appender import AppendDone, Appender, AppendResult
from zkcoord.log.config import LogConfig
from zkcoord.log.fence import EpochFence
from zkcoord.log.format import Batch, LogFormatError
from zkcoord.log.recovery import (
    RecoveryReport,
    lock_directory,
    open_segments,
    recover_segments,
    release_directory,
)
from zkcoord.log.segment import ScanProblem, Segment, read_batches
from zkcoord.log.syncer import RoundSyncer

log = logging.getLogger(__name__)


class PartitionLog:
    """An open, writable partition directory. Use :meth:`open`."""

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        clock,
        segments: list[Segment],
        lock_fd: int,
        fence: EpochFence | None = None,
        recovery: RecoveryReport | None = None,
        skipped: list[ScanProblem] | None = None,
        syncer: RoundSyncer | None = None,
    ):
        self.directory = directory
        self.config = config
        self.clock = clock
        self.recovery = recovery or RecoveryReport(directory)
        self.skipped: list[ScanProblem] = skipped or []
        self._segments = segments
        self._lock_fd = lock_fd
        self._fence = fence
        self._appender = Appender(directory, config, clock, segments, fence, syncer)

    # -- opening ------------------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        directory: str | os.PathLike,
        config: LogConfig | None = None,
        clock=None,
        fence: EpochFence | None = None,
        syncer: RoundSyncer | None = None,
    ) -> "PartitionLog":
        """Open (creating if needed) and recover a partition directory.

        With ``fence``, claim the directory for its epoch first (FencedLeaderError if a newer one has) and
        recover under its guard; see the module docstring. ``syncer`` runs its ``group``-policy rounds (with
        the other partitions it serves); without one the partition has its own.
        """
        config = config or LogConfig()
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        lock_fd = lock_directory(directory, shared=fence is not None)
        segments: list[Segment] = []
        try:
            if fence is not None:
                fence.claim()
            with fence.guard() if fence is not None else contextlib.nullcontext():
                compaction = swap.recover(directory)
                segments = open_segments(directory, config)
                recovery, skipped = recover_segments(directory, segments, config, compaction)
        except BaseException:
            release_directory(segments, lock_fd)
            if fence is not None:
                fence.close()
            raise
        return cls(directory, config, clock or SystemClock(), segments, lock_fd, fence, recovery, skipped, syncer)

    # -- offsets ------------------------------------------------------------------------------------

    @property
    def start_offset(self) -> int:
        return self._segments[0].base_offset

    @property
    def end_offset(self) -> int:
        """The offset the next record will get."""
        return self._appender.end_offset

    @property
    def segments(self) -> tuple[Segment, ...]:
        return tuple(self._segments)

    @property
    def closed(self) -> bool:
        return self._lock_fd < 0

    @property
    def size_bytes(self) -> int:
        return sum(segment.size for segment in self._segments)

    @property
    def fsync_count(self) -> int:
        return self._appender.fsync_count

    # -- appending (see :class:`~zkcoord.log.appender.Appender`) ----------------------------------------

    def append(self, records: Sequence[tuple[bytes, bytes | None]], timestamp_ms: int | None = None) -> AppendResult:
        """Append ``(key, value)`` records, contiguous and all-or-nothing; returns when the flush policy is met."""
        return self._appender.append(records, timestamp_ms)

    def submit(self, records: Sequence[tuple[bytes, bytes | None]], timestamp_ms: int, done: AppendDone) -> None:
        """Append ``records`` without waiting: ``done(error, base_offset)`` is called once the flush policy is met."""
        self._appender.submit(records, timestamp_ms, done)

    def fenced(self) -> contextlib.AbstractContextManager[None]:
        """Hold the fence's guard (if the log has a fence) around writes that must not outlive this leader."""
        return self._appender.fenced()

    def roll(self) -> None:
        """Start a new segment now (if the active one holds anything), so the cleaner may take it."""
        self._appender.roll()

    def flush(self) -> None:
        """Write and fsync everything appended so far, whatever the policy."""
        self._appender.flush()

    # -- reading ------------------------------------------------------------------------------------

    def read(self, start_offset: int | None = None) -> Iterator[Batch]:
        """Batches holding offsets ≥ ``start_offset`` (all if None), in log order.

        The read starts at the segment and indexed position for ``start_offset``, never at the log start.
        What is appended while reading may or may not be seen.
        """
        target = self.start_offset if start_offset is None else start_offset
        first = max(0, bisect.bisect_right([segment.base_offset for segment in self._segments], target) - 1)
        views = [(segment, os.dup(segment.fd), segment.written_size) for segment in self._segments[first:]]
        try:
            for number, (segment, fd, end) in enumerate(views):
                position = segment.position_for(target) if number == 0 else 0
                next_offset = segment.base_offset
                config = self.config
                try:
                    for batch in read_batches(fd, position, end, config.max_message_bytes, config.load_buffer_bytes):
                        next_offset = batch.next_offset
                        if next_offset > target:
                            yield batch
                except LogFormatError as exc:
                    self._on_corrupt(ScanProblem.of(exc, segment.path, next_offset))
        finally:
            for _, fd, _ in views:
                os.close(fd)

    def _on_corrupt(self, problem: ScanProblem) -> None:
        if not self.config.skip_corrupt_segments:
            raise CorruptLogError(problem)
        log.error("skipping the rest of a corrupt segment: %s", problem)
        self.skipped.append(problem)

    # -- the cleaner's hook -------------------------------------------------------------------------

    def replace_segments(self, replaced: Sequence[Segment], new: Sequence[Segment]) -> None:
        """Swap in cleaned segments for a closed prefix of the log (after :mod:`swap` made it durable)."""
        count = len(replaced)
        if tuple(self._segments[:count]) != tuple(replaced) or count >= len(self._segments):
            raise ValueError("only a closed prefix of the segments can be replaced")
        self._segments[:count] = list(new)
        for segment in replaced:
            segment.close()

    # -- closing ------------------------------------------------------------------------------------

    def close(self) -> None:
        """Flush (whatever the policy) and release the directory."""
        if self._lock_fd < 0:
            return
        try:
            if self._appender.failure is None:
                self.flush()
        finally:
            release_directory(self._segments, self._lock_fd)
            self._lock_fd = -1
            self._appender.close()
            if self._fence is not None:
                self._fence.close()

    def __enter__(self) -> "PartitionLog":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
