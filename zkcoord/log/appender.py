"""Appending to a partition's segments under the flush policy (docs/offsets-log.md "Durability").

Appends are acknowledged (``append`` returns, or :meth:`Appender.submit` calls back) only when the flush
policy is met:

* ``always``: the entry is written and fsynced before the next append may write;
* ``group``: an append reserves its offsets and waits for the next round of the partition's
  :class:`~zkcoord.log.syncer.RoundSyncer` (shared by a node's partitions): the round encodes all that are
  waiting as one entry (split only at ``message.max.bytes``), writes it with one system call and fsyncs it on
  a native thread, so concurrent appends share one fsync and the loop keeps running during it. The
  round calls back each submitted append, in offset order: no greenlet waits per append;
* ``never``: written at once, fsynced only on roll and close.

A failed write or fsync, or a refused fence guard, fails the appender for good: the partition must be
reopened. Owned by :class:`~zkcoord.log.partition.PartitionLog`, which shares its list of segments with it.
"""

import contextlib
import logging
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import NamedTuple

import gevent
from gevent.event import AsyncResult
from gevent.lock import Semaphore

from zkcoord.errors import FencedLeaderError, LogError, LogStorageError, RecordTooLargeError
from zkcoord.log.config import FLUSH_ALWAYS, FLUSH_GROUP, LogConfig
from zkcoord.log.fence import EpochFence
from zkcoord.log.format import HEADER_SIZE, encode_records
from zkcoord.log.rounds import PendingAppend, merged_entry, pack_round, records_bound
from zkcoord.log.segment import Segment, fsync_directory, segment_name
from zkcoord.log.syncer import RoundSyncer

log = logging.getLogger(__name__)


AppendDone = Callable[[LogError | None, int], None]  # (error or None, base offset)


class AppendResult(NamedTuple):
    base_offset: int
    last_offset: int
    timestamp_ms: int


def _call_back(done: AppendDone, error: LogError | None, base_offset: int) -> None:
    """Report an append's outcome; a failing callback must not stop the flusher that reports them all."""
    try:
        done(error, base_offset)
    except Exception:
        log.exception("append callback failed: %r", done)


class Appender:
    """Appends to the active segment of ``segments`` (the partition's list, rolled in place) under the flush policy."""

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        clock,
        segments: list[Segment],
        fence: EpochFence | None,
        syncer: RoundSyncer | None = None,
    ):
        self.directory = directory
        self.config = config
        self.clock = clock
        self._segments = segments
        self._fence = fence
        self._append_lock = Semaphore()
        self._written_seq = 0
        self._durable_seq = 0
        self._own_syncer = syncer is None
        self._syncer = syncer or RoundSyncer()
        self._acknowledge: deque[tuple[int, int, AppendDone]] = deque()  # (sequence, base offset, done)
        self._failure: LogError | None = None  # LogStorageError or FencedLeaderError
        self._end_offset = segments[-1].next_offset
        self._pending: list[PendingAppend] = []  # group policy: appends waiting for the next round
        self._round_budget = config.max_message_bytes - HEADER_SIZE - 8  # payload of one entry, msgpack array head
        self.fsync_count = 0
        self._round_target = 0

    @property
    def end_offset(self) -> int:
        """The offset the next record will get."""
        return self._end_offset

    @property
    def failure(self) -> LogError | None:
        """What failed the appender (LogStorageError or FencedLeaderError), or None."""
        return self._failure

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
        size = records_bound(records)
        if size > self._round_budget:  # the bound is loose: only an exact encoding can refuse the append
            self._encode(0, timestamp_ms, records)
        base_offset = self._end_offset
        self._end_offset += len(records)
        self._pending.append(PendingAppend(base_offset, timestamp_ms, records, size))
        self._written_seq += 1
        self._acknowledge.append((self._written_seq, base_offset, done))
        self._syncer.schedule(self)

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
        for appends in pack_round(pending, self._round_budget):
            self._place(*merged_entry(appends))

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
        self._enter_fence()
        try:
            yield
        finally:
            self._fence.release()

    def _enter_fence(self) -> None:
        if self._failure is not None:
            raise self._failure
        try:
            self._fence.acquire()
        except (OSError, LogError) as exc:
            self._fail(exc)
            raise self._failure from exc

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

    def start_round(self) -> int | None:
        """The syncer's round: write out the appends waiting, under the fence; the descriptor it must fsync
        before :meth:`finish_round`, or None if there is nothing to fsync (what could be called back was)."""
        if self._durable_seq >= self._written_seq or self._failure is not None:
            self._acknowledge_durable()  # a flush() may have made them durable already
            return None
        self._append_lock.acquire()  # flush() and close() wait for the fsync in flight
        try:
            if self._fence is not None:
                self._enter_fence()
            try:
                self._place_pending()
                active = self._segments[-1]
                self._guarded(active.write_out)
            except BaseException:
                if self._fence is not None:
                    self._fence.release()
                raise
        except (OSError, LogError) as exc:
            self._append_lock.release()
            self._fail(exc)
            self._acknowledge_durable()
            return None
        except BaseException:
            self._append_lock.release()
            raise
        self._round_target = self._written_seq
        return active.fd

    def finish_round(self, error: BaseException | None) -> None:
        """End the round :meth:`start_round` began, once its fsync returned ``error`` (None: it succeeded)."""
        try:
            if error is None:
                self.fsync_count += 1
                self._durable_seq = max(self._durable_seq, self._round_target)
            else:
                self._fail(error)
        finally:
            if self._fence is not None:
                self._fence.release()
            self._append_lock.release()
            self._acknowledge_durable()

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

    def close(self) -> None:
        """Release what the appender holds of its own (a syncer no other partition shares)."""
        if self._own_syncer:
            self._syncer.close()

    def flush(self) -> None:
        """Write and fsync everything appended so far, whatever the policy."""
        if self._fence is not None and self._durable_seq >= self._written_seq:
            return  # nothing to make durable: a deposed leader may close what it has
        with self._append_lock, self.fenced():
            self._place_pending()
            self._guarded(lambda: self._sync(Segment.fsync))
        self._acknowledge_durable()
