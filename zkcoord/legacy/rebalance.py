"""A legacy member's rebalances: the triggers (ZooKeeper watches), the loop that runs them, and each attempt.

Spec: legacy-zk-protocol.md §3. The watches stand for zkclient's persistent listeners (§3.1): kazoo callbacks
that only re-arm and enqueue a reason. The loop is 0.8.2's watcher executor: triggers that arrive during a
rebalance collapse into one more (§3.2). An attempt reads the group fresh, commits (with auto-commit) and
releases everything, decides with the configured assignor, claims its owner znodes, then fetches the
claimed partitions' offsets (§3.4); ``rebalance.max.retries`` attempts make one rebalance. Rebalance-listener
callbacks run in the hub's native thread pool: they may block, and the member keeps answering ZooKeeper.

Runs on the member's hub thread. IO: the kazoo client of its context. Does not import the membership or
consumer modules.
"""

import logging
import time
from collections.abc import Iterable
from typing import Any, Protocol

import gevent
import gevent.event
import gevent.lock
from kazoo.exceptions import KazooException, NoNodeError
from kazoo.protocol.states import EventType

from zkcoord.assign.legacy import ROUNDROBIN, hash_ties, legacy_assignment, roundrobin_listing
from zkcoord.errors import ZkcoordError
from zkcoord.legacy.commits import OffsetCommits
from zkcoord.legacy.context import MemberContext, MemberPart
from zkcoord.legacy.ownership import ClaimConflict, OwnerNodes, ZkOps
from zkcoord.legacy.stream import Owned
from zkcoord.model import TopicPartition
from zkcoord.zk import layout
from zkcoord.zk.layout import ZnodeDecodeError
from zkcoord.zk.topic_filter import TopicFilter, expand

log = logging.getLogger(__name__)


def _ms_since(started: float) -> float:
    """Milliseconds since the ``time.monotonic()`` reading ``started``, as trace events carry them."""
    return round((time.monotonic() - started) * 1000.0, 3)


class RebalanceListener(Protocol):
    """kafka-python style callbacks; both are optional. They run in a worker thread and may block."""

    def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None: ...

    def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None: ...


class Rebalancer(MemberPart):
    """Rebalances one member whenever its watches, its session or its start ask for one."""

    def __init__(
        self,
        context: MemberContext,
        owners: OwnerNodes,
        commits: OffsetCommits,
        listener: RebalanceListener | None,
    ):
        super().__init__(context)
        # Held by each rebalance, and by whatever must not overlap one (auto-commit, re-registration, close).
        self.lock = gevent.lock.Semaphore()
        self._requested = gevent.event.Event()
        self._pending_reasons: set[str] = set()
        self._owners = owners
        self._commits = commits
        self._listener = listener
        self._registration = context.registration
        self._filter = TopicFilter.of(context.registration) if context.registration.is_wildcard else None
        self._wildcard_topics: list[str] = []
        self._watched_topics: set[str] = set()
        self._watching_brokers = False

    # ---- watches (kazoo callbacks: only enqueue) ---------------------------------------------------

    def start_watching(self) -> None:
        """At startup, once registered: learn a wildcard's topics, then arm every watch."""
        if self._filter is not None:
            self._wildcard_topics = self._allowed_topics()
        self.arm_watches()

    def arm_watches(self) -> None:
        """The persistent listeners of zkclient (§3.1), as one-shot ZooKeeper watches re-armed on fire."""
        self._watch_children(layout.ids_path(self._group), self._on_ids_event)
        topics = self._wildcard_topics if self._filter is not None else list(self._registration.subscription)
        self._watched_topics = set()
        self._watch_topic_data(topics)
        if self._filter is not None and self._filter.watches_topic_list:
            self._watch_children(layout.BROKER_TOPICS_PATH, self._on_topics_event)
        if self._watching_brokers:
            self._watch_children(layout.BROKER_IDS_PATH, self._on_brokers_event)

    def _watch_children(self, path: str, watcher) -> None:
        # exists() arms a watch even while the node is missing; get_children() arms the child watch.
        self._zk.exists_async(path, watch=watcher)
        self._zk.get_children_async(path, watch=watcher)

    def _watch_topic_data(self, topics: Iterable[str]) -> None:
        for topic in topics:
            if topic not in self._watched_topics:
                self._watched_topics.add(topic)
                self._zk.exists_async(layout.topic_path(topic), watch=self._on_topic_event)

    def _watch_fired(self, event) -> bool:
        """A real znode event; kazoo also calls watchers with type NONE when a session ends, and the
        new session re-arms everything itself."""
        return not self._lifecycle.closing and event.type != EventType.NONE

    def _on_ids_event(self, event) -> None:
        if self._watch_fired(event):
            self._watch_children(event.path, self._on_ids_event)
            self.request("ids-changed")

    def _on_brokers_event(self, event) -> None:
        if self._watch_fired(event):
            self._watch_children(event.path, self._on_brokers_event)
            self.request("brokers-changed")

    def _on_topic_event(self, event) -> None:
        if not self._watch_fired(event):
            return
        self._zk.exists_async(event.path, watch=self._on_topic_event)
        if event.type == EventType.DELETED:
            log.warning("topic node %s deleted; 0.8.2 does not rebalance for that (§3.2)", event.path)
        else:
            self.request("topic-changed")

    def _on_topics_event(self, event) -> None:
        if self._watch_fired(event):
            self._watch_children(event.path, self._on_topics_event)
            gevent.spawn(self._on_topic_list_changed)

    def _on_topic_list_changed(self) -> None:
        """Wildcard: reinitialize when the set of allowed topics changed (§3.1 step 3)."""
        try:
            allowed = self._allowed_topics()
        except KazooException as error:
            log.warning("cannot list topics member=%s error=%s", self._consumer_id, error)
            return
        if set(allowed) != set(self._wildcard_topics):
            self._wildcard_topics = allowed
            self._watch_topic_data(allowed)
            self.request("topics-changed")

    def _allowed_topics(self) -> list[str]:
        return [t for t in self._list_topics() if self._filter.allows(t, self._config.exclude_internal_topics)]

    def _list_topics(self) -> list[str]:
        try:
            return self._zk.get_children(layout.BROKER_TOPICS_PATH)
        except NoNodeError:
            return []

    # ---- the loop ----------------------------------------------------------------------------------

    def request(self, reason: str) -> None:
        self._pending_reasons.add(reason)
        self._requested.set()

    def wake(self) -> None:
        """Wake the loop without a reason: it ends if the member is closing."""
        self._requested.set()

    def loop(self) -> None:
        """The watcher executor: triggers that arrive during a rebalance collapse into one more (§3.2)."""
        while True:
            self._requested.wait()
            if self._lifecycle.closing:
                return
            self._requested.clear()
            reasons, self._pending_reasons = self._pending_reasons, set()
            try:
                self.synced_rebalance(",".join(sorted(reasons)))
            except Exception:  # the executor must outlive any bug: a dead one would leave the member deaf
                log.exception("rebalance failed unexpectedly member=%s", self._consumer_id)

    # ---- rebalance (§3.3, §3.4) ---------------------------------------------------------------------

    def synced_rebalance(self, reason: str) -> bool:
        """One rebalance of up to ``rebalance.max.retries`` attempts; False if none succeeded, or it gave way."""
        with self.lock:
            started = time.monotonic()
            for attempt in range(1, self._config.rebalance_max_retries + 1):
                if self._lifecycle.closing or self._lifecycle.superseded:
                    return False
                if self._attempt(attempt, reason):
                    self._trace.emit(
                        "legacy.rebalance_completed", reason=reason, attempts=attempt, duration_ms=_ms_since(started)
                    )
                    return True
                if self._config.auto_commit_enable:
                    self._commits.commit_quietly()  # closeFetchersForQueues commits after a failed attempt
                self._stopping.wait(self._config.backoff_ms / 1000.0)
            log.error(
                "%s can't rebalance after %d retries; it owns nothing until the next trigger",
                self._consumer_id,
                self._config.rebalance_max_retries,
            )
            self._trace.emit(
                "legacy.rebalance_failed",
                reason=reason,
                attempts=self._config.rebalance_max_retries,
                duration_ms=_ms_since(started),
            )
            return False

    def _attempt(self, attempt: int, reason: str) -> bool:
        started = time.monotonic()
        ops = ZkOps()
        fields: dict[str, Any] = {"released": [], "claimed": [], "conflicts": [], "error": None}
        try:
            outcome, fields["released"], fields["claimed"] = self._rebalance_once(ops)
        except ClaimConflict as conflict:
            outcome, fields["released"], fields["conflicts"] = "conflict", conflict.released, conflict.conflicts
        except (KazooException, ZkcoordError) as error:
            outcome, fields["error"] = "error", f"{type(error).__name__}: {error}"
            log.warning(
                "rebalance attempt failed member=%s attempt=%d error=%s",
                self._consumer_id,
                attempt,
                fields["error"],
            )
        except Exception as error:  # 0.8.2 catches everything here: a failed attempt never kills the member
            outcome, fields["error"] = "error", f"{type(error).__name__}: {error}"
            log.exception("unexpected error in rebalance attempt member=%s attempt=%d", self._consumer_id, attempt)
        if outcome == "conflict":
            log.info(
                "rebalance conflict member=%s attempt=%d conflicts=%s",
                self._consumer_id,
                attempt,
                fields["conflicts"],
            )
        self._trace.emit(
            "legacy.rebalance_attempt",
            attempt=attempt,
            reason=reason,
            outcome=outcome,
            duration_ms=_ms_since(started),
            zk_ops=ops.requests,
            zk_round_trips=ops.round_trips,
            **{
                key: [list(tp) for tp in value] if key in ("released", "claimed") else value
                for key, value in fields.items()
            },
        )
        return outcome in ("success", "no-brokers")

    def _rebalance_once(self, ops: ZkOps) -> tuple[str, list, list]:
        session = self._zk.client_id
        own = self._read_registration(self._consumer_id, ops)
        if not self._read_brokers(ops):
            # §3.4 step 2: nothing released or claimed; watch /brokers/ids from now on.
            log.warning("no brokers under %s; member=%s keeps what it owns", layout.BROKER_IDS_PATH, self._consumer_id)
            if not self._watching_brokers:
                self._watching_brokers = True
                self._watch_children(layout.BROKER_IDS_PATH, self._on_brokers_event)
            return "no-brokers", [], []
        self._ownership.detach_streams()  # closeFetchers: the streams stop, so the commit covers all they handed out
        if self._config.auto_commit_enable:
            self._commits.commit_before_release(ops)  # so the next owner starts where we stopped
        released = sorted(self._ownership.registry)
        if released:
            self.notify("on_partitions_revoked", released)
        self._check_session(session)
        self._ownership.registry.clear()
        self._ownership.publish()  # stop believing before the znodes go, or two members could overlap
        self._owners.delete_confirmed(sorted(self._owners.held), ops)  # the registry's nodes are all held
        self._owners.release_uncertain(ops)

        subscriptions, partitions = self._group_view(own, ops)
        decision = legacy_assignment(
            self._config.partition_assignment_strategy, subscriptions, partitions, self._consumer_id
        )
        if self._config.partition_assignment_strategy == ROUNDROBIN:
            ties = hash_ties(roundrobin_listing(subscriptions[self._consumer_id], partitions))
            if ties:
                log.warning("round-robin hash ties %s: members may disagree on their order (§4.3)", ties)
        self._ownership.thread_ids = list(decision)
        wanted = {TopicPartition(t, p): thread for thread, claims in decision.items() for t, p in claims}
        self._check_session(session)
        claimed = self._owners.claim(wanted, ops, released)
        try:
            offsets = self._commits.fetch(claimed, ops)  # after the claim: no stale-offset race (§3.4)
        except BaseException:
            self._owners.delete_confirmed(claimed, ops)
            raise
        self._ownership.registry = {tp: Owned(wanted[tp], *offsets[tp]) for tp in sorted(wanted)}
        self._ownership.publish()
        if wanted:
            self.notify("on_partitions_assigned", sorted(wanted))
        return "success", released, sorted(wanted)

    def _check_session(self, session) -> None:
        """An attempt begun in an expired session must not go on: it would claim while unregistered."""
        if self._zk.client_id != session or self._lifecycle.superseded:
            raise ZkcoordError("the ZooKeeper session changed during the attempt; re-registering first")

    def _read_registration(self, consumer_id: str, ops: ZkOps) -> layout.ConsumerRegistration:
        data, _ = self._zk.get(layout.consumer_path(self._group, consumer_id))
        ops.add(1)
        return layout.decode_consumer_registration(self._group, consumer_id, data)

    def _read_brokers(self, ops: ZkOps) -> list[layout.BrokerRegistration]:
        """``getCluster``: every broker registration; one that vanishes or is garbage fails the attempt."""
        try:
            broker_ids = self._zk.get_children(layout.BROKER_IDS_PATH)
        except NoNodeError:
            broker_ids = []
        ops.add(1)
        pending = [(b, self._zk.get_async(layout.broker_path(b))) for b in broker_ids]
        ops.add(len(pending))
        brokers = []
        for broker_id, result in pending:
            if not broker_id.lstrip("-").isdigit():
                raise ZnodeDecodeError(layout.broker_path(broker_id), "broker id is not an int")
            brokers.append(layout.decode_broker_registration(int(broker_id), result.get()[0]))
        return brokers

    def _group_view(
        self, own: layout.ConsumerRegistration, ops: ZkOps
    ) -> tuple[dict[str, dict[str, int]], dict[str, list[int]]]:
        """PA ``AssignmentContext`` (§3.4 step 5), every znode read fresh and pipelined."""
        consumer_ids = self._zk.get_children(layout.ids_path(self._group), watch=self._on_ids_event)
        ops.add(1)
        pending = [(c, self._zk.get_async(layout.consumer_path(self._group, c))) for c in consumer_ids]
        ops.add(len(pending))
        registrations = {c: layout.decode_consumer_registration(self._group, c, r.get()[0]) for c, r in pending}
        registrations[self._consumer_id] = own
        topic_list: list[str] | None = None
        if any(r.is_wildcard for r in registrations.values()):
            topic_list = self._list_topics()
            ops.add(1)
        subscriptions = {
            c: expand(r, topic_list or [], self._config.exclude_internal_topics) for c, r in registrations.items()
        }
        own_topics = list(subscriptions[self._consumer_id])
        pending_topics = [(t, self._zk.get_async(layout.topic_path(t))) for t in own_topics]
        ops.add(len(pending_topics))
        partitions = {}
        for topic, result in pending_topics:
            try:
                partitions[topic] = layout.decode_topic_partitions(topic, result.get()[0])
            except NoNodeError:
                partitions[topic] = []
            except ZnodeDecodeError as error:
                if not error.not_json:
                    raise  # JSON of the wrong shape makes 0.8.2 throw: the attempt fails
                log.warning("%s; treating topic %s as having no partitions, as 0.8.2 does", error, topic)
                partitions[topic] = []
        return subscriptions, partitions

    def notify(self, method: str, partitions: list[TopicPartition]) -> None:
        """Run a rebalance-listener callback in the hub's native thread pool and wait; a failure is logged."""
        callback = getattr(self._listener, method, None)
        if callback is None:
            return
        try:
            gevent.get_hub().threadpool.spawn(callback, list(partitions)).get()
        except Exception:
            log.exception("rebalance listener %s failed member=%s", method, self._consumer_id)
