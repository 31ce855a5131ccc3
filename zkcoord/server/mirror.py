"""The write-behind mirror: the OffsetCommits a node accepted, copied into ZooKeeper while the phase asks for it.

Owns :class:`OffsetMirror`: while ``RULES[phase].coordinator_mirror``, a commit's accepted partitions are
queued and one greenlet writes them into ``/consumers/<g>/offsets`` (set-if-greater, a group's pending
partitions per ZooKeeper pipeline, failures retried with backoff). The phases come from
:class:`~zkcoord.server.migration.GroupMigrations`.

IO: gevent and the node's gevent kazoo client. Must not import the group state machine, the wire server or
the log.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

import gevent
from gevent.event import Event
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException

from zkcoord.migration.phases import RULES, Phase
from zkcoord.server.migration import GroupMigrations, ZooKeeperUnavailableError
from zkcoord.zk.offsets import Partition, write_offsets_if_greater

log = logging.getLogger(__name__)

WRITE_TIMEOUT_S = 30.0  # one group's mirror pipeline; a late answer is harmless (version-checked writes)
BACKOFF_S = (0.1, 5.0)  # first and largest wait before a failed partition is mirrored again


@dataclass
class _Pending:
    """The highest accepted offset of a partition not yet in ZooKeeper."""

    offset: int
    since_ms: float  # monotonic: when the oldest accepted commit not yet in ZooKeeper was accepted
    confirmed: bool  # queued while the group's phase was known to mirror (else checked before writing)
    attempts: int = 0
    retry_at_ms: float = 0.0

    def merge(self, other: _Pending) -> None:
        self.offset = max(self.offset, other.offset)
        self.since_ms = min(self.since_ms, other.since_ms)
        self.confirmed = self.confirmed or other.confirmed
        self.attempts = max(self.attempts, other.attempts)
        self.retry_at_ms = max(self.retry_at_ms, other.retry_at_ms)


def _mirrors(phase: Phase | None) -> bool:
    return phase is not None and RULES[phase].coordinator_mirror


class OffsetMirror:
    """One node's write-behind mirror into ZooKeeper; :meth:`start` with the node's kazoo client."""

    def __init__(
        self,
        migrations: GroupMigrations,
        clock,
        *,
        write_timeout_s: float = WRITE_TIMEOUT_S,
        backoff_s: tuple[float, float] = BACKOFF_S,
    ):
        self.migrations = migrations
        self.clock = clock
        self.write_timeout_s = write_timeout_s
        self.backoff_ms = (backoff_s[0] * 1000, backoff_s[1] * 1000)
        self.zk: KazooClient | None = None
        self.mirrored_total = 0
        self.mirror_failures_total = 0
        self._queue: dict[str, dict[Partition, _Pending]] = {}
        self._in_flight: tuple[str, dict[Partition, _Pending]] | None = None
        self._wakeup = Event()
        self._idle = Event()
        self._idle.set()
        self._greenlet: gevent.Greenlet | None = None

    def start(self, zk: KazooClient) -> None:
        self.zk = zk
        self._greenlet = gevent.spawn(self._run_mirror)

    def stop(self, timeout_s: float) -> None:
        """Give the mirror up to ``timeout_s`` to empty its queue, then end it."""
        if self._greenlet is not None:
            self._wakeup.set()
            self._idle.wait(timeout_s)
            self._greenlet.kill(block=True, timeout=1)
        left = self.lag_partitions()
        if left:
            log.warning("stopping with offsets not mirrored into ZooKeeper partitions=%d", left)

    def on_commit_answered(self, group: str | None, offsets: Mapping[Partition, int]) -> None:
        """Queue a commit's accepted partitions if the group's phase mirrors; never blocks.

        A group whose phase is not cached yet is queued too and checked by the mirror before it writes.
        """
        if not offsets:
            return
        known, phase = self.migrations.known_phase(group)
        if known and not _mirrors(phase):
            return
        now = self.clock.monotonic_ms()
        queued = self._queue.setdefault(group, {})
        for partition, offset in offsets.items():
            pending = _Pending(offset, now, confirmed=known)
            if partition in queued:
                queued[partition].merge(pending)
            else:
                queued[partition] = pending
        self._idle.clear()
        self._wakeup.set()

    def lag_partitions(self) -> int:
        """Partitions whose accepted offset is not in ZooKeeper yet (queued or being written)."""
        waiting = {(group, p) for group, queued in self._queue.items() for p in queued}
        if self._in_flight is not None:
            group, batch = self._in_flight
            waiting.update((group, p) for p in batch)
        return len(waiting)

    def lag_ms(self) -> float:
        """Age of the oldest accepted commit not yet in ZooKeeper (0 when there is none)."""
        since = [p.since_ms for queued in self._queue.values() for p in queued.values()]
        if self._in_flight is not None:
            since.extend(p.since_ms for p in self._in_flight[1].values())
        return max(0.0, self.clock.monotonic_ms() - min(since)) if since else 0.0

    def stats(self) -> dict:
        """The mirror's figures, as metrics and tests read them."""
        return {
            "lag_partitions": self.lag_partitions(),
            "lag_ms": self.lag_ms(),
            "writes_total": self.mirrored_total,
            "failures_total": self.mirror_failures_total,
        }

    def _run_mirror(self) -> None:
        while True:
            group, wait_ms = self._next_due()
            if group is None:
                if not self._queue:
                    self._idle.set()
                self._wakeup.clear()
                self._wakeup.wait(None if wait_ms is None else wait_ms / 1000)
                continue
            try:
                self._mirror(group)
            except Exception:
                # A bug here must not end the mirror; the batch was put back by _mirror's finally.
                log.exception("mirror failed group=%s", group)
                gevent.sleep(self.backoff_ms[0] / 1000)

    def _next_due(self) -> tuple[str | None, float | None]:
        """The first queued group with a partition due now, else (None, ms until the next retry or None)."""
        now = self.clock.monotonic_ms()
        soonest = None
        for group, queued in self._queue.items():
            retry_at = min(p.retry_at_ms for p in queued.values())
            if retry_at <= now:
                return group, None
            soonest = retry_at if soonest is None else min(soonest, retry_at)
        return None, None if soonest is None else soonest - now

    def _mirror(self, group: str) -> None:
        """Write the group's due partitions into ZooKeeper in one pipeline; failures go back with a backoff."""
        now = self.clock.monotonic_ms()
        queued = self._queue.pop(group)
        batch = {p: pending for p, pending in queued.items() if pending.retry_at_ms <= now}
        later = {p: pending for p, pending in queued.items() if p not in batch}
        if later:
            self._queue[group] = later
        self._in_flight = (group, batch)
        failed: dict[Partition, str] = dict.fromkeys(batch, "interrupted")
        try:
            failed = self._write_confirmed(group, batch)
        finally:
            self._in_flight = None
            self._requeue(group, {p: batch[p] for p in failed if p in batch})
        if failed:
            self.mirror_failures_total += len(failed)
            shown = ", ".join(f"{t}-{p}: {why}" for (t, p), why in sorted(failed.items())[:3])
            log.warning("mirror into ZooKeeper failed, will retry group=%s partitions=%d %s", group, len(failed), shown)

    def _write_confirmed(self, group: str, batch: dict[Partition, _Pending]) -> dict[Partition, str]:
        """Write ``batch``; first, for partitions queued before the group's phase was known, look the phase up
        and drop them (from ``batch`` itself) if it does not mirror. Returns the failed partitions."""
        if not all(pending.confirmed for pending in batch.values()):
            try:
                mirrors = _mirrors(self.migrations.phase(group))
            except ZooKeeperUnavailableError as error:
                return dict.fromkeys(batch, str(error))
            for partition, pending in list(batch.items()):
                if mirrors:
                    pending.confirmed = True
                elif not pending.confirmed:
                    del batch[partition]
        return self._write(group, batch) if batch else {}

    def _write(self, group: str, batch: dict[Partition, _Pending]) -> dict[Partition, str]:
        late = ZooKeeperUnavailableError(f"no answer within {self.write_timeout_s}s")
        try:
            with gevent.Timeout(self.write_timeout_s, late):
                outcome = write_offsets_if_greater(self.zk, group, {p: pending.offset for p, pending in batch.items()})
        except ZooKeeperUnavailableError as error:
            return dict.fromkeys(batch, str(error))
        except KazooException as error:
            return dict.fromkeys(batch, repr(error))
        self.mirrored_total += len(outcome.written)
        return outcome.failed

    def _requeue(self, group: str, failed: dict[Partition, _Pending]) -> None:
        if not failed:
            return
        now = self.clock.monotonic_ms()
        queued = self._queue.setdefault(group, {})
        first, largest = self.backoff_ms
        for partition, pending in failed.items():
            pending.attempts += 1
            pending.retry_at_ms = now + min(largest, first * 2 ** (pending.attempts - 1))
            if partition in queued:
                queued[partition].merge(pending)
            else:
                queued[partition] = pending
