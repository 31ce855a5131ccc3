"""The election of each offsets partition's leader with an epoch: which node claims, keeps or hands over which
partition (architecture.md "ZooKeeper use", group-coordinator §9.6, §9.7, §10). The nodes themselves register
through :mod:`zkcoord.zk.nodes`; the leader and epoch znodes are read and written by
:mod:`zkcoord.zk.leader_znodes`. The epoch is what the log's :class:`~zkcoord.log.fence.EpochFence` writes
into the partition directory.

The preferred leader of ``p`` is ``sorted(live node ids)[p % len(live nodes)]``. A leaderless partition is
claimed at once by its preferred node and, after ``claim_grace_ms``, by any node (so a live preferred node
gets it first). A leader hands a partition over when its preferred node is live. When it took the
partition because that very registration let the grace pass, it waits before offering it back, ten graces
at first and twice as long after each further miss (up to ``MAX_HAND_BACK_S``): a node that is registered
but not electing does not make the partition bounce, and one that was only slow still gets it back.

kazoo runs with ``SequentialGeventHandler``: create and start these objects on the hub the client runs on,
with or without monkey-patching. Watches and state listeners only enqueue; a worker greenlet
(:mod:`zkcoord.zk.election_worker`) makes the ZooKeeper calls and calls the callbacks, one at a time. Must not
import the log, the runtime or the server: they follow leadership through the callbacks.
"""

import logging
import time
from collections.abc import Callable
from typing import NamedTuple

from kazoo.client import KazooClient, KazooState

from zkcoord.errors import ConfigError
from zkcoord.zk.election_worker import ElectionWorker
from zkcoord.zk.leader_znodes import Leader, LeaderZnodes, Unreadable
from zkcoord.zk.nodes import CALL_TIMEOUT_S, session_id

log = logging.getLogger(__name__)

DEFAULT_CLAIM_GRACE_MS = 1000
HAND_BACK_GRACES = 10
MAX_HAND_BACK_S = 300.0

OnElected = Callable[[int, int], None]
OnResigned = Callable[[int, "int | None"], None]
OnConfirmed = Callable[[dict[int, int]], None]


class _GraceClaim(NamedTuple):
    """This node took a partition after the grace although ``preferred`` (node id, registration czxid) was live."""

    preferred: tuple[int, int]
    hand_back_at: float  # monotonic
    misses: int  # consecutive grace claims over this registration


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
        self._worker = ElectionWorker(client, node_id, self._step, self._shut_down)
        self._znodes = LeaderZnodes(client, root, node_id, num_partitions, self._worker.wait, self._worker.on_watch)
        self._session: int | None = None
        self._leaderless_since: dict[int, float] = {}
        self._grace_claims: dict[int, _GraceClaim] = {}
        self._give_ups: list[tuple[int, int, float]] = []  # (partition, epoch, hold-off s) for the worker
        self._held_off: dict[int, float] = {}  # partition → monotonic time before which this node does not claim it

    # -- public -------------------------------------------------------------------------------------

    def start(self) -> None:
        self._worker.start()
        self._session = None  # before the worker's first step: it runs once this greenlet yields

    def stop(self, timeout: float = CALL_TIMEOUT_S) -> None:
        """Resign every partition (``on_resigned(p, epoch)``) and delete this node's leader znodes."""
        self._worker.stop(timeout)

    def give_up(self, partition: int, epoch: int, hold_off_s: float) -> None:
        """Stop leading ``partition`` at ``epoch`` (it cannot be served here): resign it, delete its leader znode so
        that another node may claim it, and claim it again no sooner than ``hold_off_s`` from then.

        Safe from any greenlet of the client's hub, also from a callback; the worker does it on its next step.
        """
        self._give_ups.append((partition, epoch, hold_off_s))
        self._worker.wake()

    def confirm(self) -> None:
        """Ask for ``on_confirmed``: once connected, after a step that read every leader znode afresh (resigning
        those no longer this session's), with the partitions still led. Safe from any greenlet of the client's hub.
        """
        self._confirms_asked += 1
        self._worker.wake()

    def owned(self) -> dict[int, int]:
        """``{partition: epoch}`` this node leads, as far as it knows."""
        return dict(self._owned)

    # -- the worker's steps -------------------------------------------------------------------------

    def _step(self) -> None:
        if self._worker.take_loss():
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
            self._znodes.ensure_nodes_path()
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
        live = self._znodes.live_nodes()
        leaders = self._znodes.leaders()
        ids = sorted(live)
        now = time.monotonic()
        wake_at = None
        for partition in range(self.num_partitions):
            self._worker.check_loss()
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
            if isinstance(leader, Unreadable) or leader.owner != self._session:
                if partition in self._owned:
                    self._resign(partition)
                if not isinstance(leader, Unreadable) and leader.node_id == preferred:
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
            self._worker.wake_in(wake_at - now)

    def _claim(self, partition: int, passed_over: tuple[int, int] | None) -> None:
        """Raise the epoch and create the leader znode in one transaction; NodeExists means another node leads.

        ``passed_over`` is the live preferred node (id, registration czxid) that let the grace pass, if any.
        """
        epoch = self._znodes.create(partition)
        if epoch is None:
            return
        self._leaderless_since.pop(partition, None)
        self._note_grace_claim(partition, passed_over)
        self._owned[partition] = epoch
        log.info("elected node=%d partition=%d epoch=%d", self.node_id, partition, epoch)
        self._call(self.on_elected, partition, epoch)

    def _adopt(self, partition: int, leader: Leader) -> None:
        """Lead again, with a new epoch, a partition whose znode this session kept through a suspension."""
        if partition in self._owned:
            self._resign(partition)
        epoch = self._znodes.take_over(partition, leader.version)
        if epoch is None:
            self._worker.wake()  # the znode changed under us: look again
            return
        self._owned[partition] = epoch
        log.info("elected again after a suspension node=%d partition=%d epoch=%d", self.node_id, partition, epoch)
        self._call(self.on_elected, partition, epoch)

    def _hand_over(self, partition: int, leader: Leader, why: str = "its preferred node is live") -> None:
        if partition in self._owned:
            self._resign(partition)
        self._znodes.delete(partition, leader.version)
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
        for partition in sorted(self._owned):
            self._resign(partition)
        if self.client.state != KazooState.CONNECTED:
            return  # the session's end removes its leader znodes
        self._znodes.delete_owned_by(session_id(self.client))

    # -- helpers ------------------------------------------------------------------------------------

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
