"""The offsets partitions in ZooKeeper: their agreed count, and the election of each one's leader with an epoch
(architecture.md "ZooKeeper use", group-coordinator §9.6, §9.7, §10). The nodes themselves register
through :mod:`zkcoord.zk.nodes`.

Every offsets partition ``p`` has at most one leader: the node whose ephemeral ``partition_leader_path``
exists. Its epoch comes from the partition's persistent counter, raised in the same ZooKeeper transaction
that creates the leader znode, so each new leader of ``p`` has a higher epoch than every earlier one. The
epoch is what the log's :class:`~zkcoord.log.fence.EpochFence` writes into the partition directory.

The preferred leader of ``p`` is ``sorted(live node ids)[p % len(live nodes)]``. A leaderless partition is
claimed at once by its preferred node and, after ``claim_grace_ms``, by any node (so a live preferred node
gets it first). A leader hands a partition over when its preferred node is live. When it took the
partition because that very registration let the grace pass, it waits before offering it back, ten graces
at first and twice as long after each further miss (up to ``MAX_HAND_BACK_S``): a node that is registered
but not electing does not make the partition bounce, and one that was only slow still gets it back.

kazoo runs with ``SequentialGeventHandler``: create and start these objects on the hub the client runs on,
with or without monkey-patching. Watches and state listeners only enqueue; a worker greenlet makes the
ZooKeeper calls and calls the callbacks, one at a time. Must not import the log, the runtime or the server:
they follow leadership through the callbacks.
"""

import contextlib
import logging
import time
from collections.abc import Callable
from typing import NamedTuple

import gevent
import gevent.event
import gevent.queue
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    BadVersionError,
    ConnectionLoss,
    KazooException,
    NodeExistsError,
    NoNodeError,
    RolledBackError,
    RuntimeInconsistency,
)

from zkcoord.errors import ConfigError
from zkcoord.zk import layout
from zkcoord.zk.layout import ZnodeDecodeError
from zkcoord.zk.nodes import CALL_TIMEOUT_S, DISCONNECTED, RETRY_DELAY_S, session_id

log = logging.getLogger(__name__)

DEFAULT_CLAIM_GRACE_MS = 1000
HAND_BACK_GRACES = 10
MAX_HAND_BACK_S = 300.0

_LOSS_STATES = (KazooState.SUSPENDED, KazooState.LOST)

OnElected = Callable[[int, int], None]
OnResigned = Callable[[int, "int | None"], None]
OnConfirmed = Callable[[dict[int, int]], None]


def ensure_partition_count(client: KazooClient, root: str, num_partitions: int) -> int:
    """Store ``offsets.topic.num.partitions`` at the first start; refuse a node configured differently later."""
    if isinstance(num_partitions, bool) or not isinstance(num_partitions, int) or num_partitions < 1:
        raise ConfigError(f"offsets.topic.num.partitions must be an int ≥ 1, not {num_partitions!r}")
    path = layout.offsets_config_path(root)
    try:
        client.create(path, layout.encode_offsets_config(num_partitions), makepath=True)
        return num_partitions
    except NodeExistsError:
        pass
    data, _ = client.get(path)
    stored = layout.decode_offsets_config(path, data)
    if stored != num_partitions:
        raise ConfigError(
            f"offsets.topic.num.partitions is {num_partitions} here but {stored} in ZooKeeper at {path}; "
            "a node configured differently refuses to start (the partition of every group depends on it)"
        )
    return stored


def raise_partition_epoch(client: KazooClient, root: str, partition: int, epoch: int, dry_run: bool = False) -> int:
    """Make the partition's epoch counter at least ``epoch`` (it only ever grows); returns its value before.

    The repair for a partition directory whose ``leader-epoch`` is above ZooKeeper's counter (ZooKeeper's data
    was lost or reset): the next leader is then elected with a higher epoch than the one on disk.
    """
    path = layout.partition_epoch_path(root, partition)
    while True:
        try:
            data, stat = client.get(path)
        except NoNodeError:
            if dry_run:
                return 0
            with contextlib.suppress(NodeExistsError):
                client.create(path, layout.encode_partition_epoch(epoch), makepath=True)
                return 0
            continue
        current = layout.decode_partition_epoch(path, data)
        if current >= epoch or dry_run:
            return current
        with contextlib.suppress(BadVersionError):
            client.set(path, layout.encode_partition_epoch(epoch), version=stat.version)
            return current


def read_leaders(
    client: KazooClient, root: str, num_partitions: int, partitions: list[int] | None = None
) -> dict[int, tuple[int, int]]:
    """``{partition: (node_id, epoch)}`` of the partitions (all, or those listed) that have a leader now."""
    wanted = range(num_partitions) if partitions is None else [p for p in partitions if 0 <= p < num_partitions]
    pending = [(p, client.get_async(layout.partition_leader_path(root, p))) for p in wanted]
    leaders = {}
    for partition, result in pending:
        try:
            data, _ = result.get(timeout=CALL_TIMEOUT_S)
            leaders[partition] = layout.decode_partition_leader(layout.partition_leader_path(root, partition), data)
        except NoNodeError:
            continue
        except ZnodeDecodeError as error:
            log.warning("unreadable leader znode partition=%d error=%s", partition, error)
    return leaders


class _Leader(NamedTuple):
    node_id: int
    epoch: int
    owner: int  # the ephemeral owner's session id
    version: int


class _GraceClaim(NamedTuple):
    """This node took a partition after the grace although ``preferred`` (node id, registration czxid) was live."""

    preferred: tuple[int, int]
    hand_back_at: float  # monotonic
    misses: int  # consecutive grace claims over this registration


class _Unreadable(NamedTuple):
    reason: str


class _SessionInterrupted(Exception):
    """The session was lost while the worker waited on ZooKeeper; it resigns before anything else."""


_WAKE = object()
_STOP = object()


class PartitionElection:
    """Leadership of every offsets partition for one node; see the module docstring.

    ``on_elected(p, epoch)`` and ``on_resigned(p, epoch_or_None)`` are called from the worker greenlet, one
    at a time, in order. ``on_resigned`` gets the epoch it resigns when handing over or stopping, and None
    when the session is lost (SUSPENDED or LOST), which resigns every partition before anything else.
    ``on_confirmed(led)`` answers :meth:`confirm` with ``{partition: epoch}`` still led after a fresh read.
    """

    def __init__(
        self,
        client: KazooClient,
        root: str,
        node_id: int,
        num_partitions: int,
        on_elected: OnElected,
        on_resigned: OnResigned,
        claim_grace_ms: int = DEFAULT_CLAIM_GRACE_MS,
        on_confirmed: OnConfirmed | None = None,
    ):
        if num_partitions < 1:
            raise ConfigError(f"offsets.topic.num.partitions must be ≥ 1, not {num_partitions}")
        self.client = client
        self.root = root
        self.node_id = node_id
        self.num_partitions = num_partitions
        self.on_elected = on_elected
        self.on_resigned = on_resigned
        self.on_confirmed = on_confirmed
        self._confirms_asked = 0  # how many times confirm() was called; a step answers those asked before it began
        self._confirms_answered = 0
        self.claim_grace_s = claim_grace_ms / 1000.0
        self._owned: dict[int, int] = {}
        self._events: gevent.queue.Queue = gevent.queue.Queue()
        self._loss = gevent.event.Event()  # set by the state listener; the worker resigns everything first
        self._worker: gevent.Greenlet | None = None
        self._session: int | None = None
        self._leaderless_since: dict[int, float] = {}
        self._grace_claims: dict[int, _GraceClaim] = {}
        self._wake_at: float | None = None
        self._stopped = True
        self._give_ups: list[tuple[int, int, float]] = []  # (partition, epoch, hold-off s) for the worker
        self._held_off: dict[int, float] = {}  # partition → monotonic time before which this node does not claim it

    # -- public -------------------------------------------------------------------------------------

    def start(self) -> None:
        if self._worker is not None:
            raise RuntimeError("the election is already running")
        self._stopped = False
        self._events = gevent.queue.Queue()
        self._loss.clear()
        self._session = None
        self.client.add_listener(self._on_state)
        self._worker = gevent.spawn(self._run)
        self._events.put(_WAKE)

    def stop(self, timeout: float = CALL_TIMEOUT_S) -> None:
        """Resign every partition (``on_resigned(p, epoch)``) and delete this node's leader znodes."""
        worker = self._worker
        if worker is None:
            return
        if gevent.getcurrent() is worker:
            raise RuntimeError("stop() from an election callback would wait for itself")
        self._events.put(_STOP)
        worker.join(timeout)
        if not worker.dead:
            log.warning("partition election did not stop in time node=%d timeout_s=%.0f", self.node_id, timeout)
            worker.kill()
        self._worker = None
        self._stopped = True
        self.client.remove_listener(self._on_state)

    def give_up(self, partition: int, epoch: int, hold_off_s: float) -> None:
        """Stop leading ``partition`` at ``epoch`` (it cannot be served here): resign it, delete its leader znode so
        that another node may claim it, and claim it again no sooner than ``hold_off_s`` from then.

        Safe from any greenlet of the client's hub, also from a callback; the worker does it on its next step.
        """
        self._give_ups.append((partition, epoch, hold_off_s))
        self._events.put(_WAKE)

    def confirm(self) -> None:
        """Ask for ``on_confirmed``: once connected, after a step that read every leader znode afresh (resigning
        those no longer this session's), with the partitions still led. Safe from any greenlet of the client's hub.
        """
        self._confirms_asked += 1
        self._events.put(_WAKE)

    def owned(self) -> dict[int, int]:
        """``{partition: epoch}`` this node leads, as far as it knows."""
        return dict(self._owned)

    # -- kazoo callbacks: enqueue only --------------------------------------------------------------

    def _on_state(self, state: str) -> None:
        if state in _LOSS_STATES:
            self._loss.set()
        self._events.put(_WAKE)

    def _on_watch(self, _event) -> None:
        if not self._stopped:
            self._events.put(_WAKE)

    # -- the worker ---------------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            items = [self._events.get()]
            while not self._events.empty():
                items.append(self._events.get_nowait())
            if _STOP in items:
                self._shut_down()
                return
            try:
                self._step()
            except _SessionInterrupted:
                pass  # the listener queued a wake-up: the next step resigns
            except DISCONNECTED as error:
                log.debug("partition election step interrupted node=%d error=%r", self.node_id, error)
                self._wake_in(RETRY_DELAY_S)
            except Exception:
                log.exception("partition election step failed, retrying node=%d", self.node_id)
                self._wake_in(RETRY_DELAY_S)

    def _step(self) -> None:
        if self._loss.is_set():
            self._loss.clear()
            self._resign_all()
        if self.client.state != KazooState.CONNECTED:
            return  # CONNECTED wakes us
        confirms = self._confirms_asked  # asked later: its wake-up runs another step, with reads after it
        session = session_id(self.client)
        if session != self._session:
            self._resign_all()
            self._session = session
            self._leaderless_since.clear()
            self._grace_claims.clear()
            self._wait(self.client.ensure_path_async(layout.coordinator_nodes_path(self.root)))
        self._apply_give_ups()
        self._reconcile()
        if confirms > self._confirms_answered and self.on_confirmed is not None:
            self._confirms_answered = confirms
            self.on_confirmed(self.owned())

    def _apply_give_ups(self) -> None:
        """Hold off the partitions given up at the epoch still led; :meth:`_reconcile` resigns and hands them over."""
        give_ups, self._give_ups = self._give_ups, []
        for partition, epoch, hold_off_s in give_ups:
            if self._owned.get(partition) == epoch:
                self._held_off[partition] = time.monotonic() + hold_off_s
                log.warning(
                    "giving up partition=%d epoch=%d node=%d; not claiming it again for %.0fs",
                    partition,
                    epoch,
                    self.node_id,
                    hold_off_s,
                )

    def _reconcile(self) -> None:
        live = self._read_live_nodes()
        leaders = self._read_leaders()
        ids = sorted(live)
        now = time.monotonic()
        wake_at = None
        for partition in range(self.num_partitions):
            self._check_loss()
            preferred = ids[partition % len(ids)] if ids else None
            leader = leaders.get(partition)
            if leader is None:
                if partition in self._owned:
                    self._resign(partition)  # our leader znode is gone
                held_until = self._held_off.get(partition)
                if held_until is not None and now < held_until:
                    wake_at = held_until if wake_at is None else min(wake_at, held_until)
                    continue
                self._held_off.pop(partition, None)
                if preferred == self.node_id:
                    self._claim(partition, None)
                    continue
                due = self._leaderless_since.setdefault(partition, now) + self.claim_grace_s
                if now >= due:
                    self._claim(partition, None if preferred is None else (preferred, live[preferred]))
                    wake_at = self._earliest(wake_at, self._grace_claims.get(partition), now)
                else:
                    wake_at = due if wake_at is None else min(wake_at, due)
                continue
            self._leaderless_since.pop(partition, None)
            if isinstance(leader, _Unreadable) or leader.owner != self._session:
                if partition in self._owned:
                    self._resign(partition)
                if not isinstance(leader, _Unreadable) and leader.node_id == preferred:
                    self._grace_claims.pop(partition, None)  # its preferred node took it: no misses to remember
                continue
            if self._held_off.get(partition, 0.0) > now:
                self._hand_over(partition, leader, "given up")  # again after an interrupted step: idempotent
                continue
            grace_claim = self._grace_claims.get(partition)
            if preferred is None or preferred == self.node_id:
                keep = True
            elif grace_claim is not None and grace_claim.preferred == (preferred, live[preferred]):
                keep = now < grace_claim.hand_back_at
                wake_at = self._earliest(wake_at, grace_claim, now)
            else:
                keep = False
            if not keep:
                self._hand_over(partition, leader)
            elif self._owned.get(partition) != leader.epoch:
                self._adopt(partition, leader)
        if wake_at is not None:
            self._wake_in(wake_at - now)

    def _read_live_nodes(self) -> dict[int, int]:
        """``{node_id: czxid of its registration}``, watching the list."""
        path = layout.coordinator_nodes_path(self.root)
        children = self._wait(self.client.get_children_async(path, watch=self._on_watch))
        ids = [int(child) for child in children if child.isdigit()]
        pending = [(i, self.client.exists_async(layout.coordinator_node_path(self.root, i))) for i in ids]
        live = {}
        for node_id, result in pending:
            stat = self._wait(result)
            if stat is not None:
                live[node_id] = stat.czxid
        return live

    def _read_leaders(self) -> dict[int, _Leader | _Unreadable]:
        """Every partition's leader, watching each leader znode."""
        paths = [layout.partition_leader_path(self.root, p) for p in range(self.num_partitions)]
        watched = [self.client.exists_async(path, watch=self._on_watch) for path in paths]
        present = [p for p, result in enumerate(watched) if self._wait(result) is not None]
        pending = [(p, self.client.get_async(paths[p])) for p in present]
        leaders: dict[int, _Leader | _Unreadable] = {}
        for partition, result in pending:
            try:
                data, stat = self._wait(result)
            except NoNodeError:
                continue  # deleted since: its watch wakes us
            try:
                node_id, epoch = layout.decode_partition_leader(paths[partition], data)
            except ZnodeDecodeError as error:
                log.warning("partition blocked by an unreadable leader znode partition=%d error=%s", partition, error)
                leaders[partition] = _Unreadable(str(error))
                continue
            leaders[partition] = _Leader(node_id, epoch, stat.ephemeralOwner, stat.version)
        return leaders

    def _next_epoch(self, partition: int) -> tuple[int, int]:
        """``(epoch + 1, version)`` of the partition's counter, creating it at 0 if needed."""
        path = layout.partition_epoch_path(self.root, partition)
        while True:
            try:
                data, stat = self._wait(self.client.get_async(path))
            except NoNodeError:
                with contextlib.suppress(NodeExistsError):
                    self._wait(self.client.create_async(path, layout.encode_partition_epoch(0), makepath=True))
                continue
            return layout.decode_partition_epoch(path, data) + 1, stat.version

    def _claim(self, partition: int, passed_over: tuple[int, int] | None) -> None:
        """Raise the epoch and create the leader znode in one transaction; NodeExists means another node leads.

        ``passed_over`` is the live preferred node (id, registration czxid) that let the grace pass, if any.
        """
        epoch_path = layout.partition_epoch_path(self.root, partition)
        leader_path = layout.partition_leader_path(self.root, partition)
        while True:
            epoch, version = self._next_epoch(partition)
            transaction = self.client.transaction()
            transaction.set_data(epoch_path, layout.encode_partition_epoch(epoch), version=version)
            transaction.create(leader_path, layout.encode_partition_leader(self.node_id, epoch), ephemeral=True)
            results = self._wait(transaction.commit_async())
            if isinstance(results[0], BadVersionError):
                continue
            if isinstance(results[1], NodeExistsError):
                return
            _raise_failure(results)
            break
        self._leaderless_since.pop(partition, None)
        self._note_grace_claim(partition, passed_over)
        self._owned[partition] = epoch
        log.info("elected node=%d partition=%d epoch=%d", self.node_id, partition, epoch)
        self._call(self.on_elected, partition, epoch)

    def _adopt(self, partition: int, leader: _Leader) -> None:
        """Lead again, with a new epoch, a partition whose znode this session kept through a suspension."""
        if partition in self._owned:
            self._resign(partition)
        epoch_path = layout.partition_epoch_path(self.root, partition)
        leader_path = layout.partition_leader_path(self.root, partition)
        while True:
            epoch, version = self._next_epoch(partition)
            transaction = self.client.transaction()
            transaction.set_data(epoch_path, layout.encode_partition_epoch(epoch), version=version)
            transaction.set_data(
                leader_path, layout.encode_partition_leader(self.node_id, epoch), version=leader.version
            )
            results = self._wait(transaction.commit_async())
            if isinstance(results[0], BadVersionError):
                continue
            if isinstance(results[1], (BadVersionError, NoNodeError)):
                self._events.put(_WAKE)  # the znode changed under us: look again
                return
            _raise_failure(results)
            break
        self._owned[partition] = epoch
        log.info("elected again after a suspension node=%d partition=%d epoch=%d", self.node_id, partition, epoch)
        self._call(self.on_elected, partition, epoch)

    def _hand_over(self, partition: int, leader: _Leader, why: str = "its preferred node is live") -> None:
        if partition in self._owned:
            self._resign(partition)
        with contextlib.suppress(NoNodeError, BadVersionError):  # the znode's watch wakes us
            self._wait(self.client.delete_async(layout.partition_leader_path(self.root, partition), leader.version))
        log.info("handed over node=%d partition=%d: %s", self.node_id, partition, why)

    def _resign(self, partition: int) -> None:
        epoch = self._owned.pop(partition)
        log.info("resigned node=%d partition=%d epoch=%d", self.node_id, partition, epoch)
        self._call(self.on_resigned, partition, epoch)

    def _resign_all(self) -> None:
        if self._owned:
            log.warning("session lost, resigning everything node=%d partitions=%d", self.node_id, len(self._owned))
        while self._owned:
            partition = min(self._owned)
            del self._owned[partition]
            self._call(self.on_resigned, partition, None)

    def _shut_down(self) -> None:
        self._stopped = True
        for partition in sorted(self._owned):
            self._resign(partition)
        if self.client.state != KazooState.CONNECTED:
            return  # the session's end removes its leader znodes
        session = session_id(self.client)
        paths = [layout.partition_leader_path(self.root, p) for p in range(self.num_partitions)]
        try:
            stats = [(path, self.client.exists_async(path)) for path in paths]
            deletions = [
                self.client.delete_async(path, stat.version)
                for path, result in stats
                if (stat := result.get(timeout=CALL_TIMEOUT_S)) is not None and stat.ephemeralOwner == session
            ]
            for deletion in deletions:
                with contextlib.suppress(NoNodeError, BadVersionError):
                    deletion.get(timeout=CALL_TIMEOUT_S)
        except (KazooException, gevent.Timeout) as error:
            log.warning("could not delete leader znodes on stop node=%d error=%r", self.node_id, error)

    # -- helpers ------------------------------------------------------------------------------------

    def _wait(self, result):
        """The result of an async kazoo call, unless the session is lost first (_SessionInterrupted)."""
        if not result.ready():
            gevent.wait([result, self._loss], timeout=CALL_TIMEOUT_S, count=1)
        self._check_loss()
        if not result.ready():
            raise ConnectionLoss(f"no answer from ZooKeeper within {CALL_TIMEOUT_S:.0f}s")
        return result.get()

    def _check_loss(self) -> None:
        if self._loss.is_set():
            raise _SessionInterrupted()

    def _call(self, callback, partition: int, epoch: int | None) -> None:
        try:
            callback(partition, epoch)
        except Exception:
            log.exception(
                "callback failed callback=%s node=%d partition=%d epoch=%s",
                callback.__name__,
                self.node_id,
                partition,
                epoch,
            )

    def _note_grace_claim(self, partition: int, passed_over: tuple[int, int] | None) -> None:
        if passed_over is None:
            self._grace_claims.pop(partition, None)
            return
        previous = self._grace_claims.get(partition)
        misses = previous.misses + 1 if previous is not None and previous.preferred == passed_over else 1
        delay = min(self.claim_grace_s * HAND_BACK_GRACES * 2 ** (misses - 1), MAX_HAND_BACK_S)
        self._grace_claims[partition] = _GraceClaim(passed_over, time.monotonic() + delay, misses)

    @staticmethod
    def _earliest(wake_at: float | None, grace_claim: _GraceClaim | None, now: float) -> float | None:
        """``wake_at``, or the grace claim's hand-back time if that is sooner and still to come."""
        if grace_claim is None or grace_claim.hand_back_at <= now:
            return wake_at
        return grace_claim.hand_back_at if wake_at is None else min(wake_at, grace_claim.hand_back_at)

    def _wake_in(self, delay_s: float) -> None:
        """Queue a wake-up ``delay_s`` from now, unless one is already due by then."""
        due = time.monotonic() + max(delay_s, 0.0)
        if self._wake_at is not None and self._wake_at <= due and self._wake_at > time.monotonic():
            return
        self._wake_at = due
        gevent.spawn_later(max(delay_s, 0.0), self._events.put, _WAKE)


def _raise_failure(results: list) -> None:
    """Raise the operation's error that failed a transaction (the others only say they were rolled back)."""
    failures = [result for result in results if isinstance(result, Exception)]
    for failure in failures:
        if not isinstance(failure, (RolledBackError, RuntimeInconsistency)):
            raise failure
    if failures:
        raise failures[0]
