"""Each group's migration phase on a coordinator node, and this node's acknowledgement of it.

Owns :class:`GroupMigrations`: a bounded cache of the groups' migration states, filled on first use by a
ZooKeeper read and kept current by a watch. While a group is cached the node acknowledges the epoch it has
applied in an ephemeral znode, so that ``zkcoord migrate`` waits for it. The write-behind mirror
(:mod:`zkcoord.server.mirror`) and the requests' steps (:mod:`zkcoord.server.steps`) ask it for phases.

IO: gevent and the node's gevent kazoo client. Must not import the group state machine, the wire server or
the log.
"""

from __future__ import annotations

import functools
import logging
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

import gevent
from gevent.event import Event
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, NoNodeError

from zkcoord.errors import ZkcoordError
from zkcoord.migration.phases import MAX, RULES, MigrationState, MigrationStateError, Phase
from zkcoord.migration.store import watch_state, write_node_ack
from zkcoord.zk import layout

log = logging.getLogger(__name__)

READ_TIMEOUT_S = 5.0  # a request that needs ZooKeeper waits this long, then gets a retriable error
MAX_GROUPS = 10_000  # migration states cached (each with a watch); the least recently used go first
RETRY_S = 0.1  # before an acknowledgement that could not be written or deleted is tried again


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


def managed_name(group: object) -> bool:
    """Only a group Kafka 0.8.2 could name has znodes; any other id is unmanaged without asking ZooKeeper."""
    return isinstance(group, str) and layout.is_legal_name(group)


class GroupMigrations:
    """One node's view of its groups' migration phases; :meth:`start` with the node's kazoo client."""

    def __init__(
        self,
        root: str,
        node_id: int,
        *,
        read_timeout_s: float = READ_TIMEOUT_S,
        max_groups: int = MAX_GROUPS,
        retry_s: float = RETRY_S,
    ):
        self.root = root
        self.node_id = node_id
        self.read_timeout_s = read_timeout_s
        self.max_groups = max_groups
        self.retry_s = retry_s
        self.zk: KazooClient | None = None
        self._states: OrderedDict[str, _Watched] = OrderedDict()
        self._stopped = False

    # -- lifecycle -------------------------------------------------------------------------------------------

    def start(self, zk: KazooClient) -> None:
        self.zk = zk
        zk.add_listener(self._on_session_state)

    def stop(self) -> None:
        """End every watch and drop this node's acknowledgements."""
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
        if not managed_name(group):
            return None
        entry = self._entry(group)
        if not entry.ready.wait(self.read_timeout_s):
            raise ZooKeeperUnavailableError(f"migration state of group {group} not read within {self.read_timeout_s}s")
        if entry.failed is not None:
            raise ZooKeeperUnavailableError(f"migration state of group {group} cannot be read: {entry.failed}")
        return entry.phase

    def fetch_may_read_zookeeper(self, group: str | None) -> bool:
        """False when OffsetFetch surely answers from the log alone (without waiting for ZooKeeper)."""
        if not managed_name(group):
            return False
        entry = self._entry(group)
        if not entry.ready.is_set() or entry.failed is not None:
            return True
        return entry.phase is not None and RULES[entry.phase].coordinator_fetch == MAX

    def forget_where(self, predicate: Callable[[str], bool]) -> int:
        """Drop the cached states (and watches) of the groups ``predicate`` picks; the mirror's queued offsets stay."""
        doomed = [group for group in self._states if predicate(group)]
        for group in doomed:
            self._forget(group)
        return len(doomed)

    def known_phase(self, group: str | None) -> tuple[bool, Phase | None]:
        """``(known, phase)`` without waiting: whether the group's phase has been read (and could be), and the
        phase if so. An unmanaged group is known (None); a group not cached yet starts its read."""
        if not managed_name(group):
            return True, None
        entry = self._entry(group)
        known = entry.ready.is_set() and entry.failed is None
        return known, entry.phase if known else None

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
                    gevent.sleep(self.retry_s)
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
            gevent.spawn_later(self.retry_s, self._drop_ack, group)
