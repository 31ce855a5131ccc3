"""One partition of the offsets log: a directory of segments, appended to under a durability policy.

Opening recovers: an interrupted compaction is finished or discarded, the newest segment is verified
entry by entry and a torn or corrupt tail is cut (and reported); damage with a valid entry after it is
not a tail and stops the open with :class:`CorruptLogError` (docs/offsets-log.md "Recovery on open").
Older segments were fsynced when they were rolled, so they are only checked as they are read; a corrupt
one stops the read with :class:`CorruptLogError` unless ``log.recovery.skip.corrupt.segments`` is set.

Appends are acknowledged (``append`` returns, or :meth:`PartitionLog.submit` calls back) only when the
flush policy is met:

* ``always``: the entry is written and fsynced before the next append may write;
* ``group``: an append reserves its offsets and waits; one flusher greenlet encodes all that are waiting
  as one entry (split only at ``message.max.bytes``), writes it with one system call and fsyncs it on
  gevent's thread pool, so concurrent appends share one fsync and the loop keeps running during it. The
  flusher calls back each submitted append of the round, in offset order: no greenlet waits per append;
* ``never``: written at once, fsynced only on roll and close.

A log belongs to the gevent hub (thread) that opened it; greenlets of that hub may append concurrently.

Opened with an :class:`~zkcoord.log.fence.EpochFence`, the directory is shared by coordinator nodes: the log
holds the directory lock shared (an unfenced open, such as an offline tool, still excludes them all), claims
the directory for its leader epoch before recovering, and makes every write under the fence's guard. Once a
newer epoch has claimed the directory, the write is refused and the log fails with :class:`FencedLeaderError`.
"""

import bisect
import contextlib
import dataclasses
import fcntl
import logging
import os
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import gevent
from gevent.event import AsyncResult
from gevent.lock import Semaphore

from zkcoord.clock import SystemClock
from zkcoord.errors import (
    CorruptLogError,
    FencedLeaderError,
    LogError,
    LogInUseError,
    LogStorageError,
    RecordTooLargeError,
)
from zkcoord.log import swap
from zkcoord.log.config import FLUSH_ALWAYS, FLUSH_GROUP, LogConfig
from zkcoord.log.fence import EpochFence
from zkcoord.log.format import HEADER_SIZE, Batch, LogFormatError, encode_entry, encode_records
from zkcoord.log.segment import (
    ScanProblem,
    Segment,
    find_valid_entry,
    fsync_directory,
    read_batches,
    segment_name,
)

log = logging.getLogger(__name__)

LOCK_FILE = ".lock"
_SHARED_HOLDER = b"coordinator nodes (fenced)"
ACTIVE_SEGMENT_HINT = (
    "nothing was changed; inspect it with `zkcoord log verify` and `zkcoord log dump`, restore the partition, or "
    "set log.recovery.skip.corrupt.segments=true (--skip-corrupt) to cut the newest segment there, losing what follows"
)


AppendDone = Callable[[LogError | None, int], None]  # (error or None, base offset)


class AppendResult(NamedTuple):
    base_offset: int
    last_offset: int
    timestamp_ms: int


@dataclass(frozen=True)
class RecoveryReport:
    """What opening a partition had to repair."""

    directory: Path
    truncated: ScanProblem | None = None
    bytes_cut: int = 0
    compaction: str | None = None

    def __str__(self) -> str:
        parts = []
        if self.compaction:
            parts.append(self.compaction)
        if self.truncated:
            parts.append(f"cut {self.bytes_cut} bytes after the last valid entry: {self.truncated}")
        return f"{self.directory}: " + ("; ".join(parts) or "clean")


def _lock_directory(directory: Path, shared: bool = False) -> int:
    fd = os.open(directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
        os.close(fd)
        holder = f"process {holder}" if holder.isdigit() else holder or "another process"
        raise LogInUseError(f"{directory} is in use by {holder}; stop it first") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, _SHARED_HOLDER if shared else str(os.getpid()).encode(), 0)
    return fd


def _call_back(done: AppendDone, error: LogError | None, base_offset: int) -> None:
    """Report an append's outcome; a failing callback must not stop the flusher that reports them all."""
    try:
        done(error, base_offset)
    except Exception:
        log.exception("append callback failed: %r", done)


class _PendingAppend(NamedTuple):
    base_offset: int
    timestamp_ms: int
    records: Sequence[tuple[bytes, bytes | None]]
    size_bound: int  # of the records once encoded, from _records_bound


def _records_bound(records: Sequence[tuple[bytes, bytes | None]]) -> int:
    """An upper bound of the encoded size of ``records`` in an entry; TypeError unless keys and values are bytes."""
    size = 0
    for key, value in records:
        if type(key) is not bytes or (value is not None and type(value) is not bytes):
            raise TypeError("records are (key bytes, value bytes or None) pairs")
        # [offset_delta (≤ 5 bytes), attributes (1), bin key (≤ 5 + len), bin or nil value (≤ 5 + len)] + array head
        size += len(key) + (len(value) if value is not None else 0) + 17
    return size


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
    ):
        self.directory = directory
        self.config = config
        self.clock = clock
        self.recovery = RecoveryReport(directory)
        self.skipped: list[ScanProblem] = []
        self._segments = segments
        self._lock_fd = lock_fd
        self._fence = fence
        self._append_lock = Semaphore()
        self._written_seq = 0
        self._durable_seq = 0
        self._flusher: gevent.Greenlet | None = None
        self._acknowledge: deque[tuple[int, int, AppendDone]] = deque()  # (sequence, base offset, done)
        self._failure: LogError | None = None  # LogStorageError or FencedLeaderError
        self._end_offset = segments[-1].next_offset
        self._pending: list[_PendingAppend] = []  # group policy: appends waiting for the next round
        self._round_budget = config.max_message_bytes - HEADER_SIZE - 8  # payload of one entry, msgpack array head
        self.fsync_count = 0

    # -- opening ------------------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        directory: str | os.PathLike,
        config: LogConfig | None = None,
        clock=None,
        fence: EpochFence | None = None,
    ) -> "PartitionLog":
        """Open (creating if needed) and recover a partition directory.

        With ``fence``, claim the directory for its epoch first (FencedLeaderError if a newer one has) and
        recover under its guard; see the module docstring.
        """
        config = config or LogConfig()
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        lock_fd = _lock_directory(directory, shared=fence is not None)
        partition = None
        try:
            if fence is not None:
                fence.claim()
            with fence.guard() if fence is not None else contextlib.nullcontext():
                compaction = swap.recover(directory)
                bases = sorted(swap.visible_segments(directory))
                if not bases:
                    bases = [0]
                segments = [
                    Segment(directory / segment_name(base), base, base == bases[-1], config.index_interval_bytes)
                    for base in bases
                ]
                fsync_directory(directory)
                partition = cls(directory, config, clock or SystemClock(), segments, lock_fd, fence)
                partition._recover(compaction)
        except BaseException:
            if partition is not None:
                partition._release()
            else:
                os.close(lock_fd)
            raise
        return partition

    def _recover(self, compaction: str | None) -> None:
        for segment in self._segments[:-1]:
            if not segment.load_index():
                segment.rebuild_index_from_headers()
                segment.write_index_file()
        active = self._segments[-1]
        config = self.config
        valid, next_offset, problem = active.scan(config.max_message_bytes, config.load_buffer_bytes)
        cut = active.size - valid
        if problem is not None:
            problem = self._refuse_to_cut_valid_entries(active, problem)
            active.truncate(valid)
        active.next_offset = self._end_offset = next_offset
        self.recovery = RecoveryReport(self.directory, problem, cut, compaction)
        if problem is not None or compaction:
            log.warning("recovered %s", self.recovery)

    def _refuse_to_cut_valid_entries(self, active: Segment, problem: ScanProblem) -> ScanProblem:
        """Raise CorruptLogError if a valid entry follows the bad one: that is damage, not a torn tail.

        Cutting there would drop entries that were written (and maybe acknowledged) after it and serve
        rewound offsets. Only ``log.recovery.skip.corrupt.segments`` lets recovery cut them, reported.
        """
        config = self.config
        found = find_valid_entry(
            active.fd,
            problem.position + 1,
            active.size,
            problem.offset,
            config.max_message_bytes,
            config.load_buffer_bytes,
        )
        if found is None:
            return problem
        damage = dataclasses.replace(
            problem,
            reason=f"{problem.reason}; a valid entry follows at byte {found[0]} (offset {found[1]}), "
            "so this is damage, not a torn tail",
            torn=False,
        )
        if not config.skip_corrupt_segments:
            raise CorruptLogError(damage, hint=ACTIVE_SEGMENT_HINT)
        log.error("cutting a damaged active segment and the valid entries after it: %s", damage)
        self.skipped.append(damage)
        return damage

    # -- offsets ------------------------------------------------------------------------------------

    @property
    def start_offset(self) -> int:
        return self._segments[0].base_offset

    @property
    def end_offset(self) -> int:
        """The offset the next record will get."""
        return self._end_offset

    @property
    def segments(self) -> tuple[Segment, ...]:
        return tuple(self._segments)

    @property
    def closed(self) -> bool:
        return self._lock_fd < 0

    @property
    def size_bytes(self) -> int:
        return sum(segment.size for segment in self._segments)

    # -- appending ----------------------------------------------------------------------------------

    def append(self, records: Sequence[tuple[bytes, bytes | None]], timestamp_ms: int | None = None) -> AppendResult:
        """Append ``(key, value)`` records, contiguous and all-or-nothing; returns when the flush policy is met.

        Under ``always`` and ``never`` they are one batch; under ``group`` they share a batch with their round.

        Raises RecordTooLargeError (nothing written) or LogStorageError (the log has failed).
        """
        if not records:
            raise ValueError("append needs at least one record")
        if self._failure is not None:
            raise self._failure
        timestamp_ms = self.clock.now_ms() if timestamp_ms is None else timestamp_ms
        policy = self.config.flush_policy
        if policy == FLUSH_GROUP:
            outcome = AsyncResult()
            self._append_to_round(records, timestamp_ms, lambda error, base: outcome.set((error, base)))
            error, base_offset = outcome.get()
            if error is not None:
                raise error
            return AppendResult(base_offset, base_offset + len(records) - 1, timestamp_ms)
        if policy == FLUSH_ALWAYS:
            with self._append_lock, self.fenced():
                result = self._append_now(records, timestamp_ms)
                self._guarded(self._sync_off_loop)
            return result
        with self.fenced():
            result = self._append_now(records, timestamp_ms)
            self._guarded(self._segments[-1].write_out)
        return result

    def _append_now(self, records: Sequence[tuple[bytes, bytes | None]], timestamp_ms: int) -> AppendResult:
        base_offset = self._end_offset
        entry = self._encode(base_offset, timestamp_ms, records)
        self._place(entry, base_offset, base_offset + len(records), timestamp_ms)
        self._end_offset += len(records)
        self._written_seq += 1
        return AppendResult(base_offset, self._end_offset - 1, timestamp_ms)

    def submit(self, records: Sequence[tuple[bytes, bytes | None]], timestamp_ms: int, done: AppendDone) -> None:
        """Append ``records`` as :meth:`append` does, without waiting: ``done(error, base_offset)`` is called once
        the flush policy is met (error None), or with the LogError that refused them (base offset -1).

        Under ``group`` the flusher calls back, in offset order; an append refused at once is called back at once.
        """
        try:
            if not records:
                raise ValueError("append needs at least one record")
            if self._failure is not None:
                raise self._failure
            if self.config.flush_policy == FLUSH_GROUP:
                self._append_to_round(records, timestamp_ms, done)
                return
        except LogError as error:
            done(error, -1)
            return
        gevent.spawn(self._append_and_call_back, records, timestamp_ms, done)

    def _append_and_call_back(self, records, timestamp_ms: int, done: AppendDone) -> None:
        try:
            result = self.append(records, timestamp_ms)
        except LogError as error:
            _call_back(done, error, -1)
        else:
            _call_back(done, None, result.base_offset)

    def _append_to_round(
        self, records: Sequence[tuple[bytes, bytes | None]], timestamp_ms: int, done: AppendDone
    ) -> None:
        """Reserve offsets and leave the append to the flusher, which writes each round's appends as one entry."""
        size = _records_bound(records)
        if size > self._round_budget:  # the bound is loose: only an exact encoding can refuse the append
            self._encode(0, timestamp_ms, records)
        base_offset = self._end_offset
        self._end_offset += len(records)
        self._pending.append(_PendingAppend(base_offset, timestamp_ms, records, size))
        self._written_seq += 1
        self._acknowledge.append((self._written_seq, base_offset, done))
        if self._flusher is None:
            self._flusher = gevent.spawn(self._flush_rounds)

    def _encode(self, base_offset: int, timestamp_ms: int, records: Sequence[tuple[bytes, bytes | None]]) -> bytes:
        entry = encode_records(base_offset, timestamp_ms, records)
        if len(entry) > self.config.max_message_bytes:
            raise RecordTooLargeError(
                f"a batch of {len(records)} records is {len(entry)} bytes, more than message.max.bytes="
                f"{self.config.max_message_bytes}"
            )
        return entry

    def _place(self, entry: bytes, base_offset: int, next_offset: int, timestamp_ms: int) -> None:
        """Buffer an encoded entry in the active segment, rolling first if it is full or old."""
        active = self._segments[-1]
        if active.size and (
            active.size + len(entry) > self.config.segment_bytes
            or timestamp_ms - (active.first_timestamp_ms or timestamp_ms) >= self.config.roll_ms
        ):
            self._guarded(self._roll)
            active = self._segments[-1]
        active.append(entry, base_offset, next_offset, timestamp_ms)

    def _place_pending(self) -> None:
        """Encode the appends waiting for this round, as few entries as ``message.max.bytes`` allows."""
        pending, self._pending = self._pending, []
        entry: list = []
        used = 0
        for append in pending:
            if entry and used + append.size_bound > self._round_budget:
                self._place_merged(entry)
                entry, used = [], 0
            entry.append(append)
            used += append.size_bound
        if entry:
            self._place_merged(entry)

    def _place_merged(self, appends: list[_PendingAppend]) -> None:
        base_offset = appends[0].base_offset
        records = [
            (append.base_offset - base_offset + index, 0, key, value)
            for append in appends
            for index, (key, value) in enumerate(append.records)
        ]
        # One timestamp per entry: the newest, so no tombstone in it is dropped before its own retention.
        timestamp_ms = max(append.timestamp_ms for append in appends)
        entry = encode_entry(base_offset, timestamp_ms, records)
        self._place(entry, base_offset, base_offset + records[-1][0] + 1, timestamp_ms)

    def _guarded(self, action) -> None:
        """Run a write or fsync; a failure fails the log, as no later fsync can vouch for the lost pages."""
        try:
            action()
        except OSError as exc:
            self._fail(exc)
            raise self._failure from exc

    def _fail(self, exc: Exception) -> None:
        if self._failure is None:
            if isinstance(exc, FencedLeaderError):
                self._failure = exc
            else:
                self._failure = LogStorageError(f"{self.directory}: {exc}; reopen the log to recover")
            log.error("offsets log failed: %s", self._failure)

    @contextlib.contextmanager
    def fenced(self) -> Iterator[None]:
        """Hold the fence's guard (if the log has a fence) around writes that must not outlive this leader.

        A refused guard fails the log: this and every later write raise FencedLeaderError.
        """
        if self._fence is None:
            yield
            return
        if self._failure is not None:
            raise self._failure
        with contextlib.ExitStack() as stack:
            try:
                stack.enter_context(self._fence.guard())
            except (OSError, LogError) as exc:
                self._fail(exc)
                raise self._failure from exc
            yield

    def _sync_off_loop(self) -> None:
        self._sync(lambda segment: gevent.get_hub().threadpool.apply(segment.fsync))

    def _sync(self, fsync) -> None:
        """Write out and fsync the active segment; what was buffered before the call is then durable."""
        target = self._written_seq
        active = self._segments[-1]
        active.write_out()
        fsync(active)
        self.fsync_count += 1
        self._durable_seq = max(self._durable_seq, target)

    def _flush_rounds(self) -> None:
        try:
            while self._durable_seq < self._written_seq and self._failure is None:
                try:
                    with self.fenced():
                        self._place_pending()
                        self._sync_off_loop()
                except (OSError, LogError) as exc:
                    self._fail(exc)
                finally:
                    self._acknowledge_durable()
        finally:
            self._flusher = None
            self._acknowledge_durable()  # a flush() may have made them durable before this greenlet ran

    def _acknowledge_durable(self) -> None:
        """Call back the appends that are durable now, in offset order; after a failure, all that wait."""
        waiting = self._acknowledge
        while waiting and waiting[0][0] <= self._durable_seq:
            _, base_offset, done = waiting.popleft()
            _call_back(done, None, base_offset)
        if self._failure is not None:
            while waiting:
                _call_back(waiting.popleft()[2], self._failure, -1)

    def _roll(self) -> None:
        """Close the active segment durably (data and index), then start a new one at the log end."""
        active = self._segments[-1]
        active.write_out()
        active.fsync()
        self.fsync_count += 1
        active.write_index_file()
        base = active.next_offset
        segment = Segment(self.directory / segment_name(base), base, True, self.config.index_interval_bytes)
        fsync_directory(self.directory)
        self._segments.append(segment)

    def roll(self) -> None:
        """Start a new segment now (if the active one holds anything), so the cleaner may take it."""
        with self.fenced():
            self._place_pending()
            if self._segments[-1].size:
                self._guarded(self._roll)

    def flush(self) -> None:
        """Write and fsync everything appended so far, whatever the policy."""
        if self._fence is not None and self._durable_seq >= self._written_seq:
            return  # nothing to make durable: a deposed leader may close what it has
        with self._append_lock, self.fenced():
            self._place_pending()
            self._guarded(lambda: self._sync(Segment.fsync))
        self._acknowledge_durable()

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
            if self._failure is None:
                self.flush()
        finally:
            self._release()

    def _release(self) -> None:
        for segment in self._segments:
            segment.close()
        with contextlib.suppress(OSError):
            os.close(self._lock_fd)
        self._lock_fd = -1

    def __enter__(self) -> "PartitionLog":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
