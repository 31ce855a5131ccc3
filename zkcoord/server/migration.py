"""Offset migration on a coordinator node: each group's phase, the write-behind mirror, ZooKeeper's side of reads.

Owns :class:`GroupMigrations`: a bounded cache of the groups' migration states (filled on first use by a
ZooKeeper read and kept current by a watch; while a group is cached the node acknowledges the epoch it has
applied in an ephemeral znode, so that ``zkcoord migrate`` waits for it), the mirror that copies the
OffsetCommits a node accepted while ``RULES[phase].coordinator_mirror`` into ``/consumers/<g>/offsets`` (one
greenlet, set-if-greater, a group's pending partitions per ZooKeeper pipeline, failures retried with backoff),
and the ZooKeeper reads behind OffsetFetch's MAX answer and JoinGroup's single-protocol check.
:func:`max_fetch_response` and :func:`join_refusal_message` are the pure halves of those two.

IO: gevent and the node's gevent kazoo client. Must not import the group state machine, the wire server or
the log: :mod:`zkcoord.server.steps` hands in typed requests and responses around the coordinator runtime.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import gevent
import msgspec
from gevent.event import Event
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, NoNodeError

from zkcoord.errors import ZkcoordError
from zkcoord.migration.phases import MAX, RULES, MigrationState, MigrationStateError, Phase
from zkcoord.migration.store import watch_state, write_node_ack
from zkcoord.wire.messages import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequestTopic,
    OffsetFetchResponse,
    OffsetFetchResponsePartition,
    OffsetFetchResponseTopic,
)
from zkcoord.zk import layout
from zkcoord.zk.layout import ZnodeDecodeError
from zkcoord.zk.offsets import Partition, read_group_offsets, write_offsets_if_greater

log = logging.getLogger(__name__)

READ_TIMEOUT_S = 5.0  # a request that needs ZooKeeper waits this long, then gets a retriable error
WRITE_TIMEOUT_S = 30.0  # one group's mirror pipeline; a late answer is harmless (version-checked writes)
MAX_GROUPS = 10_000  # migration states cached (each with a watch); the least recently used go first
BACKOFF_S = (0.1, 5.0)  # first and largest wait before a failed partition is mirrored again
MAX_IDS_SHOWN = 2


class ZooKeeperUnavailableError(ZkcoordError):
    """ZooKeeper could not be read in time; the request that needed it gets a retriable error."""


@dataclass
class _Watched:
    """A group's cached migration state; ``ready`` once the first read answered."""

    state: MigrationState | None = None
    ready: Event = field(default_factory=Event)
    failed: str | None = None
    stop: Callable[[], None] | None = None
    forgotten: bool = False
    acked: int | None = None  # the epoch this node's acknowledgement says, once written
    acking: bool = False  # a greenlet is writing the acknowledgement

    @property
    def phase(self) -> Phase | None:
        return None if self.state is None else self.state.phase

    @property
    def epoch(self) -> int:
        return -1 if self.state is None else self.state.epoch


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


def _managed_name(group: object) -> bool:
    """Only a group Kafka 0.8.2 could name has znodes; any other id is unmanaged without asking ZooKeeper."""
    return isinstance(group, str) and layout.is_legal_name(group)


class GroupMigrations:
    """One node's view of its groups' migrations and its mirror; :meth:`start` with the node's kazoo client."""

    def __init__(
        self,
        root: str,
        node_id: int,
        clock,
        *,
        read_timeout_s: float = READ_TIMEOUT_S,
        write_timeout_s: float = WRITE_TIMEOUT_S,
        max_groups: int = MAX_GROUPS,
        backoff_s: tuple[float, float] = BACKOFF_S,
    ):
        self.root = root
        self.node_id = node_id
        self.clock = clock
        self.read_timeout_s = read_timeout_s
        self.write_timeout_s = write_timeout_s
        self.max_groups = max_groups
        self.backoff_ms = (backoff_s[0] * 1000, backoff_s[1] * 1000)
        self.zk: KazooClient | None = None
        self.mirrored_total = 0
        self.mirror_failures_total = 0
        self._states: OrderedDict[str, _Watched] = OrderedDict()
        self._queue: dict[str, dict[Partition, _Pending]] = {}
        self._in_flight: tuple[str, dict[Partition, _Pending]] | None = None
        self._wakeup = Event()
        self._idle = Event()
        self._idle.set()
        self._greenlet: gevent.Greenlet | None = None
        self._stopped = False

    # -- lifecycle -------------------------------------------------------------------------------------------

    def start(self, zk: KazooClient) -> None:
        self.zk = zk
        zk.add_listener(self._on_session_state)
        self._greenlet = gevent.spawn(self._run_mirror)

    def stop(self, timeout_s: float) -> None:
        """Give the mirror up to ``timeout_s`` to empty its queue, then end it and every watch."""
        if self._greenlet is not None:
            self._wakeup.set()
            self._idle.wait(timeout_s)
            self._greenlet.kill(block=True, timeout=1)
        left = self.lag_partitions()
        if left:
            log.warning("stopping with offsets not mirrored into ZooKeeper partitions=%d", left)
        self.forget_where(lambda group: True)
        self._stopped = True
        if self.zk is not None:
            self.zk.remove_listener(self._on_session_state)

    def _on_session_state(self, state: str) -> None:
        """A kazoo listener. A lost session took this node's acknowledgements with it, so a runner no longer waits
        for it: forget every cached state (without blocking), and the next request reads and acknowledges afresh."""
        if state == KazooState.LOST and self._states:
            log.warning("ZooKeeper session lost: forgetting the migration states of groups=%d", len(self._states))
            for group in list(self._states):
                self._forget(group, drop_ack=False)

    # -- phases ----------------------------------------------------------------------------------------------

    def phase(self, group: str | None) -> Phase | None:
        """The group's phase (None: unmanaged), from the cache or ZooKeeper (blocks on a miss, bounded).

        Raises :class:`ZooKeeperUnavailableError` when the first read does not answer in time.
        """
        if not _managed_name(group):
            return None
        entry = self._entry(group)
        if not entry.ready.wait(self.read_timeout_s):
            raise ZooKeeperUnavailableError(f"migration state of group {group} not read within {self.read_timeout_s}s")
        if entry.failed is not None:
            raise ZooKeeperUnavailableError(f"migration state of group {group} cannot be read: {entry.failed}")
        return entry.phase

    def fetch_may_read_zookeeper(self, group: str | None) -> bool:
        """False when OffsetFetch surely answers from the log alone (without waiting for ZooKeeper)."""
        if not _managed_name(group):
            return False
        entry = self._entry(group)
        if not entry.ready.is_set() or entry.failed is not None:
            return True
        return entry.phase is not None and RULES[entry.phase].coordinator_fetch == MAX

    def forget_where(self, predicate: Callable[[str], bool]) -> int:
        """Drop the cached states (and watches) of the groups ``predicate`` picks; queued offsets stay."""
        doomed = [group for group in self._states if predicate(group)]
        for group in doomed:
            self._forget(group)
        return len(doomed)

    def _entry(self, group: str) -> _Watched:
        """The group's cache entry, moved to the recent end; a new one starts its read and watch."""
        entry = self._states.get(group)
        if entry is not None:
            self._states.move_to_end(group)
            return entry
        entry = _Watched()
        self._states[group] = entry
        while len(self._states) > self.max_groups:
            self._forget(next(iter(self._states)))
        gevent.spawn(self._watch, group, entry)
        return entry

    def _watch(self, group: str, entry: _Watched) -> None:
        def on_change(state: MigrationState | None) -> None:
            # A kazoo callback: only record the state (nothing blocking runs here); every answer from now on
            # follows it, so it may be acknowledged at once.
            if entry.ready.is_set() and entry.state != state:
                shown = "unmanaged" if state is None else f"{state.phase.name} epoch={state.epoch}"
                log.info("migration state changed group=%s phase=%s", group, shown)
            entry.state = state
            entry.failed = None
            entry.ready.set()
            self._acknowledge(group, entry)

        def on_unreadable(error: MigrationStateError) -> None:
            # Fail closed: "unmanaged" would drop the group's commits from the mirror. Requests that need the
            # phase get a retriable error and queued commits wait (retried) until the state reads again.
            log.error("unreadable migration state group=%s: %s", group, error)
            entry.state = None
            entry.failed = str(error)
            entry.ready.set()

        try:
            # The acknowledgement first, then the read: a runner that changes the phase after this node read
            # it finds the acknowledgement and waits for the watch to bring the change (docs/migration.md).
            self.zk.retry(write_node_ack, self.zk, self.root, group, self.node_id, -1)
            entry.stop = watch_state(self.zk, self.root, group, on_change, on_unreadable)
        except Exception as error:  # a kazoo error other than a lost connection (those are retried)
            log.warning("cannot watch the migration state group=%s: %s", group, error)
            entry.failed = f"{type(error).__name__}: {error}"
            entry.ready.set()
            if self._states.get(group) is entry:
                del self._states[group]  # the next request tries again
            self._drop_ack(group)
            return
        if entry.forgotten:
            entry.stop()
            self._drop_ack(group)

    def _forget(self, group: str, drop_ack: bool = True) -> None:
        entry = self._states.pop(group)
        entry.forgotten = True
        if entry.stop is not None:
            entry.stop()
        if drop_ack:
            self._drop_ack(group)

    # -- acknowledgements: ``/zkcoord/migration/nodes/<group>/<node id>``, ephemeral, while the group is cached ---

    def _acknowledge(self, group: str, entry: _Watched) -> None:
        """Have the entry's epoch written (never blocks); one writer per entry, which always writes the newest."""
        if entry.acking or entry.forgotten or entry.acked == entry.epoch:
            return
        entry.acking = True
        gevent.spawn(self._write_acks, group, entry)

    def _write_acks(self, group: str, entry: _Watched) -> None:
        try:
            while not entry.forgotten and entry.acked != entry.epoch:
                epoch = entry.epoch
                try:
                    self.zk.retry(write_node_ack, self.zk, self.root, group, self.node_id, epoch)
                except KazooException as error:
                    log.warning("cannot acknowledge migration group=%s epoch=%d, retrying: %r", group, epoch, error)
                    gevent.sleep(self.backoff_ms[0] / 1000)
                    continue
                entry.acked = epoch
        finally:
            entry.acking = False
            if entry.forgotten:
                self._drop_ack(group)  # a write that raced with the forgetting may have created it again

    def _drop_ack(self, group: str) -> None:
        """Delete this node's acknowledgement unless the group is cached again (whose entry then owns it). A
        session's requests are applied in order, so this delete lands after every write issued before it."""
        if group in self._states or self.zk is None or self._stopped:
            return
        reply = self.zk.delete_async(layout.node_ack_path(self.root, group, self.node_id))
        reply.rawlink(functools.partial(self._on_ack_dropped, group))

    def _on_ack_dropped(self, group: str, reply) -> None:
        try:
            reply.get()
        except NoNodeError:
            pass
        except Exception as error:
            # Left in place it would make every later step wait for this node: try again.
            log.warning("cannot delete the migration acknowledgement group=%s, retrying: %r", group, error)
            gevent.spawn_later(self.backoff_ms[0] / 1000, self._drop_ack, group)

    # -- ZooKeeper reads for requests -------------------------------------------------------------------------

    @contextlib.contextmanager
    def _reading(self, what: str):
        """Bound a ZooKeeper read in time; a timeout or a kazoo error becomes :class:`ZooKeeperUnavailableError`."""
        late = ZooKeeperUnavailableError(f"{what} not read within {self.read_timeout_s}s")
        try:
            with gevent.Timeout(self.read_timeout_s, late):
                yield
        except KazooException as error:
            raise ZooKeeperUnavailableError(f"{what} cannot be read: {error!r}") from None

    def zookeeper_offsets(self, group: str, partitions: Iterable[Partition] | None) -> dict[Partition, int]:
        """The group's ZooKeeper offsets of ``partitions`` (None: all of them), pipelined and bounded in time.

        A znode that does not hold an offset counts as no offset (and is logged).
        """
        with self._reading(f"ZooKeeper offsets of group {group}"):
            if partitions is not None:
                return self._read_offsets(group, partitions)
            found = read_group_offsets(self.zk, group)
        for (topic, partition), data in found.unreadable.items():
            log.warning("ignoring a foreign ZooKeeper offset group=%s %s-%d: %r", group, topic, partition, data)
        return found.offsets

    def _read_offsets(self, group: str, partitions: Iterable[Partition]) -> dict[Partition, int]:
        wanted = sorted({(t, p) for t, p in partitions if layout.is_legal_name(t) and p >= 0})
        pending = [(tp, self.zk.get_async(layout.offset_path(group, *tp))) for tp in wanted]
        offsets = {}
        for tp, reply in pending:
            try:
                data, _ = reply.get()
            except NoNodeError:
                continue
            try:
                offsets[tp] = layout.decode_offset(layout.offset_path(group, *tp), data)
            except ZnodeDecodeError as error:
                log.warning("ignoring a foreign ZooKeeper offset group=%s: %s", group, error)
        return offsets

    def legacy_ids(self, group: str) -> list[str]:
        """The consumer ids registered under ``/consumers/<group>/ids`` (one ZooKeeper call, bounded)."""
        with self._reading(layout.ids_path(group)):
            try:
                return sorted(self.zk.get_children(layout.ids_path(group)))
            except NoNodeError:
                return []

    def fetch_response(
        self, group: str | None, topics: tuple[OffsetFetchRequestTopic, ...] | None, response: OffsetFetchResponse
    ) -> OffsetFetchResponse:
        """OffsetFetch's answer given the log's ``response``: in a MAX phase, with ZooKeeper's larger offsets.

        Blocks on ZooKeeper (bounded); raises :class:`ZooKeeperUnavailableError`.
        """
        phase = self.phase(group)
        if phase is None or RULES[phase].coordinator_fetch != MAX:
            return response
        asked = None if topics is None else [(t.name, p) for t in topics for p in t.partition_indexes]
        return max_fetch_response(response, self.zookeeper_offsets(group, asked), topics is None)

    def join_refusal(self, group: str) -> str | None:
        """Why a JoinGroup for ``group`` must be refused, or None (reads ZooKeeper, bounded; see
        :func:`join_refusal_message`). Raises :class:`ZooKeeperUnavailableError`."""
        if not _managed_name(group):
            return None
        return join_refusal_message(group, self.legacy_ids(group), self.phase(group))

    # -- the mirror ----------------------------------------------------------------------------------------------

    def on_commit_answered(self, group: str | None, offsets: Mapping[Partition, int]) -> None:
        """Queue a commit's accepted partitions if the group's phase mirrors; never blocks.

        A group whose phase is not cached yet is queued too and checked by the mirror before it writes.
        """
        if not offsets or not _managed_name(group):
            return
        entry = self._entry(group)
        known = entry.ready.is_set() and entry.failed is None
        if known and not _mirrors(entry.phase):
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

    def mirror_stats(self) -> dict:
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
                mirrors = _mirrors(self.phase(group))
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


# ---- the pure halves of the requests that involve ZooKeeper -------------------------------------------------


def accepted_offsets(request: OffsetCommitRequest, response: OffsetCommitResponse) -> dict[Partition, int]:
    """The partitions of an OffsetCommit answered error_code 0, with the offsets committed (last one wins)."""
    accepted = {}
    for topic, answered in zip(request.topics, response.topics, strict=False):
        for partition, result in zip(topic.partitions, answered.partitions, strict=False):
            if result.error_code == 0:
                accepted[(topic.name, partition.partition_index)] = partition.committed_offset
    return accepted


def max_fetch_response(
    response: OffsetFetchResponse, zookeeper: Mapping[Partition, int], every_partition: bool
) -> OffsetFetchResponse:
    """OffsetFetch's answer in a MAX phase: each partition's larger offset of the log's answer and ZooKeeper's.

    Metadata stays the log's ("" where the log has none). ``every_partition`` (the request's ``topics`` was
    nil): every partition either store has, sorted by topic and partition, as the log-only answer is.
    """
    entries = {(topic.name, entry.partition_index): entry for topic in response.topics for entry in topic.partitions}
    if every_partition:
        for topic, partition in zookeeper:
            entries.setdefault(
                (topic, partition),
                OffsetFetchResponsePartition(partition_index=partition, committed_offset=-1, metadata="", error_code=0),
            )
    for key, entry in entries.items():
        if key in zookeeper and zookeeper[key] > entry.committed_offset:
            entries[key] = msgspec.structs.replace(entry, committed_offset=zookeeper[key])
    if every_partition:
        by_topic: dict[str, list[OffsetFetchResponsePartition]] = {}
        for (topic, _), entry in sorted(entries.items()):
            by_topic.setdefault(topic, []).append(entry)
        pairs = by_topic.items()
    else:
        pairs = (
            (topic.name, [entries[(topic.name, entry.partition_index)] for entry in topic.partitions])
            for topic in response.topics
        )
    topics = tuple(OffsetFetchResponseTopic(name=name, partitions=tuple(partitions)) for name, partitions in pairs)
    return msgspec.structs.replace(response, topics=topics)


def join_refusal_message(group: str, legacy_ids: list[str], phase: Phase | None) -> str | None:
    """Why a JoinGroup for ``group`` is refused (single-protocol membership), or None to let it in."""
    if legacy_ids:
        shown = ", ".join(legacy_ids[:MAX_IDS_SHOWN])
        more = len(legacy_ids) - MAX_IDS_SHOWN
        listed = f"{shown} and {more} more" if more > 0 else shown
        return (
            f"group {group} is run by ZooKeeper (Kafka 0.8.2) consumers ({listed} under "
            f"{layout.ids_path(group)}); a group cannot have members of both protocols: stop them, "
            "or follow the runbook in docs/migration.md"
        )
    if phase is not None and RULES[phase].client_member is None:
        return (
            f"the offsets of group {group} are still in ZooKeeper (migration phase {phase.name}); "
            f"run `zkcoord migrate up --group {group}` to move it to DUAL_WRITE first"
        )
    return None
