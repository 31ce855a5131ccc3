"""Kafka 0.8.2's high-level consumer group protocol on ZooKeeper (ZookeeperConsumerConnector).

Spec: legacy-zk-protocol.md §1–§7. Everything ZooKeeper-facing (registration, watches, the rebalance
loop, commits) runs on one gevent hub in a native :class:`~zkcoord.zk.session.HubThread`, so user code
that holds the caller's hub or burns CPU cannot starve the session. Public methods are thread-safe and
hand their work to that thread. Rebalance-listener callbacks run in that hub's native thread pool: they
may block, and the member keeps answering ZooKeeper meanwhile.

Offsets go to ZooKeeper, to the coordinator's offsets log, or both (§5): the group's migration phase,
watched from startup, wins over ``offsets.storage``/``dual.commit.enabled`` (:mod:`zkcoord.legacy.offsets`).
Log requests use gevent sockets on the same hub, so they never block it.

Records reach the application through :class:`~zkcoord.legacy.stream.KafkaStream` s (0.8.2's KafkaStream and
ConsumerIterator), iterated in user threads; each sees its share of ownership through a view the hub thread
replaces under the stream's lock (:mod:`zkcoord.legacy.stream`).
"""

import contextlib
import logging
import socket
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

import gevent
import gevent.event
import gevent.lock
import gevent.socket
from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError
from kazoo.protocol.states import EventType, KazooState

from zkcoord.assign.legacy import ROUNDROBIN, hash_ties, legacy_assignment, roundrobin_listing
from zkcoord.client.bootstrap import Address, discover_nodes, parse_bootstrap_servers
from zkcoord.clock import SystemClock
from zkcoord.config import build_config
from zkcoord.errors import (
    CommitFailedError,
    ConsumerRebalanceFailedError,
    CoordinatorMembersError,
    CoordinatorResponseError,
    ErrorCode,
    SourceError,
    ZkcoordError,
    ZooKeeperConnectionError,
)
from zkcoord.legacy.config import LegacyConsumerConfig
from zkcoord.legacy.offsets import INACTIVE_STATES, LogOffsets, LogUnavailableError, OffsetsMode, mode_for
from zkcoord.legacy.states import AfterConnect, Lifecycle
from zkcoord.legacy.stream import WILDCARD_STREAMS, KafkaStream, Owned, Streams
from zkcoord.legacy.subscription import TopicFilter, expand, registration_for
from zkcoord.legacy.trace import TraceSink, make_event
from zkcoord.migration.phases import LOG, ZK, MigrationState, read_offset
from zkcoord.migration.store import advertise, watch_state
from zkcoord.model import TopicPartition
from zkcoord.sources import RecordSource, SyntheticSource
from zkcoord.wire.channel import INITIAL_BACKOFF_S, CoordinatorChannel
from zkcoord.zk import layout
from zkcoord.zk.layout import ZnodeDecodeError
from zkcoord.zk.session import HubThread, make_kazoo_client

log = logging.getLogger(__name__)

__all__ = ["WILDCARD_STREAMS", "KafkaStream", "LegacyConsumer", "RebalanceListener", "make_consumer_id"]


class RebalanceListener(Protocol):
    """kafka-python style callbacks; both are optional. They run in a worker thread and may block."""

    def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None: ...

    def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None: ...


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code}"


def make_consumer_id(group: str, configured: str | None, now_ms: int) -> str:
    """ZKCC ``consumerIdString``: ``group_consumer.id`` or ``group_host-ms-hex8`` (§2.1)."""
    if configured:
        return f"{group}_{configured}"
    hex8 = format(uuid.uuid4().int >> 64, "x")[:8]  # Long.toHexString drops leading zeros
    return f"{group}_{socket.gethostname()}-{now_ms}-{hex8}"


class _Ops:
    """ZooKeeper requests and round trips spent by one rebalance attempt (pipelined batches count once)."""

    def __init__(self):
        self.requests = 0
        self.round_trips = 0

    def add(self, requests: int) -> None:
        if requests:
            self.requests += requests
            self.round_trips += 1


class _Conflict(Exception):
    """Another thread holds a partition this attempt decided to claim (§3.4 step 9)."""

    def __init__(self, released: list, conflicts: list):
        self.released, self.conflicts = released, conflicts


class LegacyConsumer:
    """A member of a Kafka 0.8.2 ZooKeeper consumer group, indistinguishable from a JVM member.

    Subscribe with exactly one of ``topics={topic: streams}`` (ordered), ``whitelist=regex`` or
    ``blacklist=regex`` (with ``num_streams``). Configure with Kafka's property names in ``config``
    or snake_case keywords (``group_id=...``). Use as a context manager or call :meth:`start` and
    :meth:`close`. Records come from ``source`` (default: a :class:`~zkcoord.sources.SyntheticSource`
    on the member's clock, closed with the member; a source passed in stays the caller's to close)
    through the streams of :meth:`streams`.
    """

    def __init__(
        self,
        config: Mapping[str, Any] | None = None,
        *,
        topics: Mapping[str, int] | None = None,
        whitelist: str | None = None,
        blacklist: str | None = None,
        num_streams: int = 1,
        listener: RebalanceListener | None = None,
        trace: TraceSink | Sequence[TraceSink] = (),
        clock=None,
        source: RecordSource | None = None,
        **properties: Any,
    ):
        self.config: LegacyConsumerConfig = build_config(LegacyConsumerConfig, config, **properties)
        self._clock = clock or SystemClock()
        self._owns_source = source is None
        self.source: RecordSource = SyntheticSource(clock=self._clock) if source is None else source
        self._registration = registration_for(topics, whitelist, blacklist, num_streams, 0)
        self._filter = TopicFilter.of(self._registration) if self._registration.is_wildcard else None
        self.consumer_id = make_consumer_id(self.config.group_id, self.config.consumer_id, self._clock.now_ms())
        self._listener = listener
        self._sinks: tuple[TraceSink, ...] = (trace,) if callable(trace) else tuple(trace)
        self._group = self.config.group_id
        self._own_path = layout.consumer_path(self._group, self.consumer_id)
        self._root = self.config.zkcoord_root
        self._bootstrap = (
            parse_bootstrap_servers(self.config.bootstrap_servers) if self.config.bootstrap_servers else None
        )
        self._mode: OffsetsMode | None = None  # set by the migration-state watch at startup
        self._log: LogOffsets | None = None
        self._stop_state_watch = None
        self._io: HubThread | None = None
        self._zk = None
        self._registry: dict[TopicPartition, Owned] = {}
        # Owner znodes of this session: _held are known to be ours; _uncertain may be (a create or delete
        # that died with the connection); each attempt releases both before it claims anything.
        self._held: set[TopicPartition] = set()
        self._uncertain: set[TopicPartition] = set()
        self._lost_partitions: list[TopicPartition] = []
        self._thread_ids: list[str] = []
        self._assignment: dict[str, list[TopicPartition]] = {}
        self._wildcard_topics: list[str] = []
        self._watched_topics: set[str] = set()
        self._watching_brokers = False
        self._lifecycle = Lifecycle()  # the hub thread's; start() moves it out of NEW before the hub runs
        self._closed = False  # the caller's side: public methods refuse once close() began or start() failed
        self._greenlets: list[gevent.Greenlet] = []
        self._streams = Streams(self._registration, self.config, self.source, self.consumer_id)

    # ---- public API (any thread) -------------------------------------------------------------------

    def streams(self) -> dict[str, list[KafkaStream]]:
        """The member's streams, the same objects on every call (0.8.2 ``createMessageStreams``).

        Static subscriptions: ``{topic: [stream of thread <consumer_id>-0, -1, ...]}``, one stream per
        registered stream of that topic. Wildcard subscriptions: ``{"*": [num_streams streams]}``
        (:data:`WILDCARD_STREAMS`), each yielding from every matched topic its thread owns, as 0.8.2's
        ``createMessageStreamsByFilter``. Streams may be taken before :meth:`start`; they yield once
        the member owns partitions and stop (``StopIteration``) after :meth:`close`.
        """
        return self._streams.by_key()

    def start(self, timeout: float | None = None) -> "LegacyConsumer":
        """Connect, register, and run the first rebalance (raises if it fails after every retry)."""
        if self._io is not None:
            raise ZkcoordError("a LegacyConsumer starts once")
        self._lifecycle.start()
        self._io = HubThread(f"zkcoord-legacy-{self.consumer_id}").start()
        try:
            self._io.call(self._startup, timeout=timeout)
        except BaseException:
            self._io.call(self._shutdown, False)
            self._io.stop()
            self._closed = True
            self._close_source()
            raise
        return self

    def close(self, timeout: float = 60.0) -> None:
        """End the streams, commit (with auto-commit on), then close the session: ZooKeeper drops our
        ephemerals (§3.6). Closes the record source if the member made it."""
        if self._io is None or self._closed:
            self._streams.shut_down()
            self._close_source()
            return
        self._closed = True
        try:
            self._io.call(self._shutdown, self.config.auto_commit_enable, timeout=timeout)
        finally:
            self._io.stop()
            self._close_source()

    def _close_source(self) -> None:
        if self._owns_source:
            self._owns_source = False
            try:
                self.source.close()
            except SourceError as error:
                log.warning("closing the record source failed member=%s error=%s", self.consumer_id, error)

    def __enter__(self) -> "LegacyConsumer":
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.close()

    @property
    def zk_client(self):
        """The kazoo client (lives in the member's hub thread; for tests and diagnostics)."""
        return self._zk

    def assignment(self) -> dict[str, list[TopicPartition]]:
        """Thread id → partitions it owns now (every thread listed, possibly with none).

        While the ZooKeeper connection is suspended the member cannot know whether its session, and
        so its owner znodes, still exist: it then reports no partitions, and a careful caller pauses.
        """
        return {thread: list(tps) for thread, tps in self._assignment.items()}

    def owned_partitions(self) -> set[TopicPartition]:
        return {tp for tps in self.assignment().values() for tp in tps}

    def position(self, partition: TopicPartition) -> int:
        """The consumed position (next offset to consume; -1 when nothing was committed)."""
        return self._call(lambda: self._owned(partition).position)

    def seek(self, partition: TopicPartition, offset: int) -> None:
        """Set the consumed position of an owned partition; its stream reads on from there, and the next
        commit writes it."""
        self._call(lambda: self._set_position(partition, int(offset)))

    def commit(self, offsets: Mapping[TopicPartition, int] | None = None) -> None:
        """Commit the positions where the member's offsets mode says (§5.1); ``offsets`` are set first.

        ZooKeeper gets only changed positions; the log gets every owned position (KAFKA-1510). Raises
        :class:`~zkcoord.errors.CommitFailedError` when the log refused a partition or did not answer.
        """

        def commit():
            for partition, offset in (offsets or {}).items():
                self._set_position(partition, int(offset))
            self._commit_changed(_Ops())

        self._call(commit)

    def committed(self, partition: TopicPartition) -> int | None:
        """The committed offset of ``partition`` as the member's read rule sees it (ZooKeeper, the log, or the
        larger of both); None when there is none."""
        partition = TopicPartition(*partition)

        def read():
            with self._offsets_lock:
                reads = self._mode.reads
                zk = self._read_zk_offsets([partition], _Ops())[partition] if reads != LOG else None
                logged = self._log.fetch([partition])[partition] if reads != ZK else None
            offset = read_offset(reads, zk, logged)
            return None if offset < 0 else offset

        return self._call(read)

    @property
    def offsets_mode(self) -> OffsetsMode | None:
        """Where the member commits and reads offsets now (None before :meth:`start`)."""
        return self._mode

    def _call(self, fn):
        if self._io is None or self._closed:
            raise ZkcoordError("the consumer is not running")
        return self._io.call(fn, timeout=max(30.0, self.config.zookeeper_session_timeout_ms / 1000.0 * 2))

    def _owned(self, partition: TopicPartition) -> Owned:
        owned = self._registry.get(TopicPartition(*partition))
        if owned is None:
            raise CommitFailedError(f"{self.consumer_id} does not own {partition}")
        return owned

    def _set_position(self, partition: TopicPartition, offset: int) -> None:
        partition = TopicPartition(*partition)
        self._streams.set_position(partition, self._owned(partition), offset)

    # ---- life cycle (hub thread) ---------------------------------------------------------------------

    def _startup(self) -> None:
        self._rebalance_lock = gevent.lock.Semaphore()
        # Held by every commit, fetch and advertisement write: the log channel serves one request at a
        # time, and a new mode is advertised only once no commit or fetch of the old one is under way.
        self._offsets_lock = gevent.lock.Semaphore()
        self._advert_wanted = gevent.event.Event()
        self._rebalance_requested = gevent.event.Event()
        self._stopping = gevent.event.Event()
        self._pending_reasons: set[str] = set()
        backoff_s = self.config.offsets_channel_backoff_ms / 1000.0
        channel = CoordinatorChannel(
            self._coordinator_addresses,
            self.config.effective_client_id,
            self.config.offsets_channel_socket_timeout_ms,
            unavailable=LogUnavailableError,
            error_for=lambda code, message: CoordinatorResponseError(code, message or ""),
            sleep=gevent.sleep,
            create_connection=gevent.socket.create_connection,
            initial_backoff_s=min(INITIAL_BACKOFF_S, backoff_s),
            max_backoff_s=backoff_s,
        )
        self._log = LogOffsets(channel, self._group)
        self._zk = make_kazoo_client(self.config.zookeeper_connect, self.config.zookeeper_session_timeout_ms)
        self._zk.add_listener(self._on_session_state)
        try:
            self._zk.start(timeout=self.config.connection_timeout_ms / 1000.0)
        except self._zk.handler.timeout_exception:
            raise ZooKeeperConnectionError(
                f"no ZooKeeper session with {self.config.zookeeper_connect} within "
                f"{self.config.connection_timeout_ms} ms"
            ) from None
        if self._lifecycle.closing:  # closed while connecting: leave no session behind
            self._zk.stop()
            raise ZkcoordError("the consumer was closed while starting")
        self._stop_state_watch = watch_state(self._zk, self._root, self._group, self._on_migration_state)
        self._check_no_coordinator_members()
        if not self._register():  # closed while registering (Ctrl-C): start no greenlet close() would miss
            raise ZkcoordError("the consumer was closed while starting")
        self._write_advertisement()
        if self._filter is not None:
            self._wildcard_topics = self._allowed_topics()
        self._arm_watches()
        self._greenlets.append(gevent.spawn(self._rebalance_loop))
        self._greenlets.append(gevent.spawn(self._advertise_loop))
        if self.config.auto_commit_enable:
            self._greenlets.append(gevent.spawn(self._auto_commit_loop))
        if not self._synced_rebalance("startup"):
            raise ConsumerRebalanceFailedError(
                f"{self.consumer_id} can't rebalance after {self.config.rebalance_max_retries} retries"
            )

    def _shutdown(self, commit: bool) -> None:
        self._lifecycle.close()
        if self._zk is None:
            return
        self._stopping.set()
        self._rebalance_requested.set()
        with self._rebalance_lock:
            gevent.killall(self._greenlets)
            self._streams.shut_down()  # 0.8.2's shutdown command: nothing is handed out after the commit
            if commit:
                self._commit_with_retries()
            self._registry.clear()
            self._publish_assignment()
            if self._stop_state_watch is not None:
                self._stop_state_watch()
            self._log.close()
            self._zk.stop()
            self._zk.close()
        self._lifecycle.closed()
        self._emit("legacy.closed")

    def _commit_with_retries(self) -> None:
        """At shutdown a commit is retried ``offsets.commit.max.retries`` times (§5.1)."""
        for attempt in range(1 + self.config.offsets_commit_max_retries):
            if attempt:
                gevent.sleep(self.config.offsets_channel_backoff_ms / 1000.0)
            if self._commit_quietly():
                return

    def _register(self) -> bool:
        """Create our ids node, "expecting conflict" (§1.4): identical data is ours; other data is an old
        session's node (ZOOKEEPER-1740), so back off one session timeout and retry until it is gone.
        ZooKeeper errors (connection loss, a further expiry) are retried for as long as we run.
        False if the member closed first."""
        registration = layout.ConsumerRegistration(
            self._registration.subscription, self._registration.pattern, self._clock.now_ms()
        )
        data = layout.encode_consumer_registration(registration)
        while not self._lifecycle.closing:
            try:
                registered = self._create_registration(data)
            except KazooException as error:
                log.warning("registration failed member=%s error=%r; retrying", self.consumer_id, error)
                self._stopping.wait(self.config.backoff_ms / 1000.0)
                continue
            if registered:
                self._lifecycle.registration_written()
                self._emit("legacy.registered", registration=data.decode("utf-8"), session_id=self._zk.client_id[0])
                return True
            log.info(
                "ids node %s left by an earlier session; backing off %d ms until ZooKeeper deletes it",
                self._own_path,
                self.config.zookeeper_session_timeout_ms,
            )
            self._emit("legacy.registration_conflict", backoff_ms=self.config.zookeeper_session_timeout_ms)
            self._stopping.wait(self.config.zookeeper_session_timeout_ms / 1000.0)
        return False

    def _create_registration(self, data: bytes) -> bool:
        """One try: True when the ids node is ours, False when an earlier session's node is in the way."""
        try:
            self._zk.create(self._own_path, data, ephemeral=True, makepath=True)
            return True
        except NodeExistsError:
            try:
                existing, stat = self._zk.get(self._own_path)
            except NoNodeError:
                return self._create_registration(data)
        # Ours if identical (a create whose reply was lost), or if this very session wrote it.
        return existing == data or stat.ephemeralOwner == self._zk.client_id[0]

    # ---- offsets mode, advertisement, coordinator members ------------------------------------------

    def _coordinator_addresses(self) -> list[Address]:
        if self._bootstrap is not None:
            return list(self._bootstrap)
        return discover_nodes(self._zk, self._root)

    def _on_migration_state(self, state: MigrationState | None) -> None:
        """The group's migration state, now and on each change (a kazoo callback): switch the mode at once, so
        the next commit or fetch follows it, then have the advertisement say so."""
        if self._lifecycle.closing:
            return
        mode = mode_for(self.config.offsets_storage, self.config.dual_commit, state)
        previous = self._mode
        if mode == previous:
            return
        self._mode = mode
        if previous is not None and mode.rule != previous.rule:
            # ZooKeeper may have moved while this member did not write it (the coordinator's mirror, a copy
            # step): the next ZooKeeper write covers every position.
            for owned in self._registry.values():
                owned.checkpointed = None
        log.info(
            "offsets mode member=%s: follows %s%s",
            self.consumer_id,
            mode.describe(),
            "" if previous is None else f" (was {previous.describe()})",
        )
        self._emit("legacy.offsets_mode", **mode.trace_fields())
        self._advert_wanted.set()

    def _write_advertisement(self) -> bool:
        """Write the advertisement of the mode in force, once no commit or fetch of an older mode is under way
        (so an epoch is advertised only when the member follows it). False if it could not be written now."""
        self._advert_wanted.clear()
        try:
            with self._offsets_lock:
                advertise(self._zk, self._root, self._group, self.consumer_id, self._mode.advert())
        except KazooException as error:
            log.warning("cannot write the advertisement member=%s error=%r; retrying", self.consumer_id, error)
            self._advert_wanted.set()
            return False
        return True

    def _advertise_loop(self) -> None:
        """Write the advertisement whenever it is due, once registered (the 0.8.2 registration comes first; a
        re-registration writes it again)."""
        while not self._lifecycle.closing:
            self._advert_wanted.wait()
            if not self._lifecycle.registered or not self._write_advertisement():
                self._stopping.wait(self.config.backoff_ms / 1000.0)

    def _check_no_coordinator_members(self) -> None:
        """Refuse a group that coordinator (new-client) members run: a group speaks one protocol at a time.

        Asked only where coordinator nodes are configured or registered. If none answers, a member that
        keeps its offsets in ZooKeeper only goes on (a pure ZooKeeper deployment has no coordinator);
        one that needs the log cannot work and fails.
        """
        if not self._coordinator_addresses():
            log.debug("no coordinator node under %s; group %s has no coordinator members", self._root, self._group)
            return
        try:
            with self._offsets_lock:
                state, members = self._log.describe()
        except LogUnavailableError as error:
            if self._mode.uses_log:
                raise LogUnavailableError(
                    f"{error}; this member keeps offsets in the log (it follows {self._mode.describe()}) "
                    "and cannot start without the group's coordinator"
                ) from None
            log.debug("no coordinator node answered; not checking for coordinator members: %s", error)
            return
        if members or state not in INACTIVE_STATES:
            raise CoordinatorMembersError(self._group, state, members)

    # ---- watches (kazoo callbacks: only enqueue) ---------------------------------------------------

    def _arm_watches(self) -> None:
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
            self._request_rebalance("ids-changed")

    def _on_brokers_event(self, event) -> None:
        if self._watch_fired(event):
            self._watch_children(event.path, self._on_brokers_event)
            self._request_rebalance("brokers-changed")

    def _on_topic_event(self, event) -> None:
        if not self._watch_fired(event):
            return
        self._zk.exists_async(event.path, watch=self._on_topic_event)
        if event.type == EventType.DELETED:
            log.warning("topic node %s deleted; 0.8.2 does not rebalance for that (§3.2)", event.path)
        else:
            self._request_rebalance("topic-changed")

    def _on_topics_event(self, event) -> None:
        if self._watch_fired(event):
            self._watch_children(event.path, self._on_topics_event)
            gevent.spawn(self._on_topic_list_changed)

    def _on_topic_list_changed(self) -> None:
        """Wildcard: reinitialize when the set of allowed topics changed (§3.1 step 3)."""
        try:
            allowed = self._allowed_topics()
        except KazooException as error:
            log.warning("cannot list topics member=%s error=%s", self.consumer_id, error)
            return
        if set(allowed) != set(self._wildcard_topics):
            self._wildcard_topics = allowed
            self._watch_topic_data(allowed)
            self._request_rebalance("topics-changed")

    def _allowed_topics(self) -> list[str]:
        return [t for t in self._list_topics() if self._filter.allows(t, self.config.exclude_internal_topics)]

    def _list_topics(self) -> list[str]:
        try:
            return self._zk.get_children(layout.BROKER_TOPICS_PATH)
        except NoNodeError:
            return []

    def _on_session_state(self, state: str) -> None:
        after = self._lifecycle.connection_changed(state)
        if state == KazooState.LOST:
            # The session, and with it every owner znode, is gone: forget them before a new session
            # could make the old registry look owned again.
            self._lost_partitions.extend(self._registry)
            self._registry.clear()
            self._held.clear()
            self._uncertain.clear()
        self._publish_assignment()
        if after is AfterConnect.NEW_SESSION:
            gevent.spawn(self._on_new_session)
        elif after is AfterConnect.RECONNECTED:
            # kazoo forgets every watcher when a connection drops and does not send them again.
            self._arm_watches()
            self._request_rebalance("reconnected")

    def _on_new_session(self) -> None:
        """handleNewSession (§3.5): our ephemerals are gone; re-register, then rebalance."""
        self._emit("legacy.session_expired")
        with self._rebalance_lock:
            self._lifecycle.reregistration_began()
            lost, self._lost_partitions = sorted(set(self._lost_partitions)), []
            if lost:
                self._run_listener("on_partitions_revoked", lost)
            if self._register():
                self._write_advertisement()  # the advertisement died with the old session too
            self._arm_watches()
        self._synced_rebalance("session-expired")

    def _request_rebalance(self, reason: str) -> None:
        self._pending_reasons.add(reason)
        self._rebalance_requested.set()

    def _rebalance_loop(self) -> None:
        """The watcher executor: triggers that arrive during a rebalance collapse into one more (§3.2)."""
        while True:
            self._rebalance_requested.wait()
            if self._lifecycle.closing:
                return
            self._rebalance_requested.clear()
            reasons, self._pending_reasons = self._pending_reasons, set()
            try:
                self._synced_rebalance(",".join(sorted(reasons)))
            except Exception:  # the executor must outlive any bug: a dead one would leave the member deaf
                log.exception("rebalance failed unexpectedly member=%s", self.consumer_id)

    def _auto_commit_loop(self) -> None:
        interval = self.config.auto_commit_interval_ms / 1000.0
        while not self._stopping.wait(interval):
            # Not during a rebalance: a log commit waits on the network, and one that landed after the
            # release could overwrite what the partition's next owner committed meanwhile.
            with self._rebalance_lock:
                self._commit_quietly()

    def _commit_quietly(self) -> bool:
        """One commit try that logs a failure instead of raising (auto-commit makes one try, §5.1)."""
        try:
            self._commit_changed(_Ops())
            return True
        except (KazooException, ZkcoordError) as error:
            log.warning("offset commit failed member=%s error=%s", self.consumer_id, error)
            return False

    # ---- rebalance (§3.3, §3.4) ---------------------------------------------------------------------

    def _synced_rebalance(self, reason: str) -> bool:
        with self._rebalance_lock:
            for attempt in range(1, self.config.rebalance_max_retries + 1):
                if self._lifecycle.closing or self._lifecycle.superseded:
                    return False
                if self._attempt(attempt, reason):
                    return True
                if self.config.auto_commit_enable:
                    self._commit_quietly()  # closeFetchersForQueues commits after a failed attempt
                self._stopping.wait(self.config.backoff_ms / 1000.0)
            log.error(
                "%s can't rebalance after %d retries; it owns nothing until the next trigger",
                self.consumer_id,
                self.config.rebalance_max_retries,
            )
            self._emit("legacy.rebalance_failed", reason=reason, attempts=self.config.rebalance_max_retries)
            return False

    def _attempt(self, attempt: int, reason: str) -> bool:
        started = time.monotonic()
        ops = _Ops()
        fields: dict[str, Any] = {"released": [], "claimed": [], "conflicts": [], "error": None}
        try:
            outcome, fields["released"], fields["claimed"] = self._rebalance_once(ops)
        except _Conflict as conflict:
            outcome, fields["released"], fields["conflicts"] = "conflict", conflict.released, conflict.conflicts
        except (KazooException, ZkcoordError) as error:
            outcome, fields["error"] = "error", f"{type(error).__name__}: {error}"
            log.warning(
                "rebalance attempt failed member=%s attempt=%d error=%s",
                self.consumer_id,
                attempt,
                fields["error"],
            )
        except Exception as error:  # 0.8.2 catches everything here: a failed attempt never kills the member
            outcome, fields["error"] = "error", f"{type(error).__name__}: {error}"
            log.exception("unexpected error in rebalance attempt member=%s attempt=%d", self.consumer_id, attempt)
        if outcome == "conflict":
            log.info(
                "rebalance conflict member=%s attempt=%d conflicts=%s",
                self.consumer_id,
                attempt,
                fields["conflicts"],
            )
        self._emit(
            "legacy.rebalance_attempt",
            attempt=attempt,
            reason=reason,
            outcome=outcome,
            duration_ms=round((time.monotonic() - started) * 1000.0, 3),
            zk_ops=ops.requests,
            zk_round_trips=ops.round_trips,
            **{
                key: [list(tp) for tp in value] if key in ("released", "claimed") else value
                for key, value in fields.items()
            },
        )
        return outcome in ("success", "no-brokers")

    def _rebalance_once(self, ops: _Ops) -> tuple[str, list, list]:
        session = self._zk.client_id
        own = self._read_registration(self.consumer_id, ops)
        if not self._read_brokers(ops):
            # §3.4 step 2: nothing released or claimed; watch /brokers/ids from now on.
            log.warning("no brokers under %s; member=%s keeps what it owns", layout.BROKER_IDS_PATH, self.consumer_id)
            if not self._watching_brokers:
                self._watching_brokers = True
                self._watch_children(layout.BROKER_IDS_PATH, self._on_brokers_event)
            return "no-brokers", [], []
        self._streams.show({})  # closeFetchers: the streams stop, so the commit covers all they handed out
        if self.config.auto_commit_enable:
            self._commit_before_release(ops)  # so the next owner starts where we stopped
        released = sorted(self._registry)
        if released:
            self._run_listener("on_partitions_revoked", released)
        self._check_session(session)
        self._registry.clear()
        self._publish_assignment()  # stop believing before the znodes go, or two members could overlap
        self._delete_confirmed(sorted(self._held), ops)  # the registry's nodes are all in _held
        self._release_uncertain(ops)

        subscriptions, partitions = self._group_view(own, ops)
        decision = legacy_assignment(
            self.config.partition_assignment_strategy, subscriptions, partitions, self.consumer_id
        )
        if self.config.partition_assignment_strategy == ROUNDROBIN:
            ties = hash_ties(roundrobin_listing(subscriptions[self.consumer_id], partitions))
            if ties:
                log.warning("round-robin hash ties %s: members may disagree on their order (§4.3)", ties)
        self._thread_ids = list(decision)
        wanted = {TopicPartition(t, p): thread for thread, claims in decision.items() for t, p in claims}
        self._check_session(session)
        claimed = self._claim(wanted, ops, released)
        try:
            offsets = self._fetch_offsets(claimed, ops)  # after the claim: no stale-offset race (§3.4)
        except BaseException:
            self._delete_confirmed(claimed, ops)
            raise
        self._registry = {tp: Owned(wanted[tp], *offsets[tp]) for tp in sorted(wanted)}
        self._publish_assignment()
        if wanted:
            self._run_listener("on_partitions_assigned", sorted(wanted))
        return "success", released, sorted(wanted)

    def _check_session(self, session) -> None:
        """An attempt begun in an expired session must not go on: it would claim while unregistered."""
        if self._zk.client_id != session or self._lifecycle.superseded:
            raise ZkcoordError("the ZooKeeper session changed during the attempt; re-registering first")

    def _read_registration(self, consumer_id: str, ops: _Ops) -> layout.ConsumerRegistration:
        data, _ = self._zk.get(layout.consumer_path(self._group, consumer_id))
        ops.add(1)
        return layout.decode_consumer_registration(self._group, consumer_id, data)

    def _read_brokers(self, ops: _Ops) -> list[layout.BrokerRegistration]:
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
        self, own: layout.ConsumerRegistration, ops: _Ops
    ) -> tuple[dict[str, dict[str, int]], dict[str, list[int]]]:
        """PA ``AssignmentContext`` (§3.4 step 5), every znode read fresh and pipelined."""
        consumer_ids = self._zk.get_children(layout.ids_path(self._group), watch=self._on_ids_event)
        ops.add(1)
        pending = [(c, self._zk.get_async(layout.consumer_path(self._group, c))) for c in consumer_ids]
        ops.add(len(pending))
        registrations = {c: layout.decode_consumer_registration(self._group, c, r.get()[0]) for c, r in pending}
        registrations[self.consumer_id] = own
        topic_list: list[str] | None = None
        if any(r.is_wildcard for r in registrations.values()):
            topic_list = self._list_topics()
            ops.add(1)
        subscriptions = {
            c: expand(r, topic_list or [], self.config.exclude_internal_topics) for c, r in registrations.items()
        }
        own_topics = list(subscriptions[self.consumer_id])
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

    def _claim(self, wanted: Mapping[TopicPartition, str], ops: _Ops, released: list) -> list[TopicPartition]:
        """reflectPartitionOwnershipDecision (§3.4 step 9, §1.5), pipelined: try every partition; on any
        conflict delete what this attempt created and fail."""
        creates = {
            tp: self._zk.create_async(
                layout.owner_path(self._group, *tp),
                layout.encode_owner(thread),
                ephemeral=True,
                makepath=True,
            )
            for tp, thread in wanted.items()
        }
        ops.add(len(creates))
        owned, existing, failure = [], [], None
        for tp, result in creates.items():
            try:
                result.get()
                owned.append(tp)
            except NodeExistsError:
                existing.append(tp)
            except KazooException as error:
                self._uncertain.add(tp)  # the create may have been applied before the connection dropped
                failure = failure or error
        reads = {tp: self._zk.get_async(layout.owner_path(self._group, *tp)) for tp in existing}
        ops.add(len(reads))
        conflicts = []
        for tp, result in reads.items():
            try:
                holder = result.get()[0]
            except NoNodeError:
                holder = None  # vanished meanwhile: still a conflict for this attempt
            except KazooException as error:
                failure, holder = failure or error, None
            if holder == layout.encode_owner(wanted[tp]):
                owned.append(tp)  # our own node, e.g. a retry after connection loss
            else:
                conflicts.append([tp.topic, tp.partition, layout.decode_owner(holder)])
        self._held.update(owned)
        if conflicts or failure is not None:
            self._delete_confirmed(owned, ops)
            if failure is not None:
                raise failure
            raise _Conflict(released, conflicts)
        return owned

    def _delete_confirmed(self, partitions: Sequence[TopicPartition], ops: _Ops) -> None:
        """Delete owner znodes known to be ours. One whose delete fails becomes uncertain: the delete
        may have been applied, and another member may own the partition by the next attempt."""
        pending = [(tp, self._zk.delete_async(layout.owner_path(self._group, *tp))) for tp in partitions]
        ops.add(len(pending))
        failure = None
        for tp, result in pending:
            self._held.discard(tp)
            try:
                result.get()
            except NoNodeError:
                pass  # already gone: released either way
            except KazooException as error:
                self._uncertain.add(tp)
                failure = failure or error
        if failure is not None:
            raise failure

    def _release_uncertain(self, ops: _Ops) -> None:
        """Delete the uncertain owner znodes that turn out to be ours (``ephemeralOwner`` is our session);
        a node another member created is never touched."""
        if not self._uncertain:
            return
        session_id = self._zk.client_id[0]
        reads = [(tp, self._zk.get_async(layout.owner_path(self._group, *tp))) for tp in sorted(self._uncertain)]
        ops.add(len(reads))
        ours = []
        for tp, result in reads:
            try:
                _, stat = result.get()
            except NoNodeError:
                self._uncertain.discard(tp)
                continue
            if stat.ephemeralOwner == session_id:
                ours.append(tp)
            else:
                self._uncertain.discard(tp)
        deletes = [(tp, self._zk.delete_async(layout.owner_path(self._group, *tp))) for tp in ours]
        ops.add(len(deletes))
        for tp, result in deletes:
            with contextlib.suppress(NoNodeError):
                result.get()  # a failure propagates and the partition stays uncertain
            self._uncertain.discard(tp)

    def _fetch_offsets(
        self, partitions: Sequence[TopicPartition], ops: _Ops
    ) -> dict[TopicPartition, tuple[int, int | None]]:
        """``(offset to start from, ZooKeeper's offset if it was read)`` per partition, as the read rule says:
        ZooKeeper, the log, or the larger of both (§5.2)."""
        with self._offsets_lock:
            reads = self._mode.reads
            zk = self._read_zk_offsets(partitions, ops) if reads != LOG else {}
            logged = self._fetch_log_offsets(partitions) if reads != ZK else {}
        return {tp: (read_offset(reads, zk.get(tp), logged.get(tp)), zk.get(tp)) for tp in partitions}

    def _read_zk_offsets(self, partitions: Sequence[TopicPartition], ops: _Ops) -> dict[TopicPartition, int]:
        pending = {tp: self._zk.get_async(layout.offset_path(self._group, *tp)) for tp in partitions}
        ops.add(len(pending))
        offsets = {}
        for tp, result in pending.items():
            try:
                offsets[tp] = layout.decode_offset(layout.offset_path(self._group, *tp), result.get()[0])
            except NoNodeError:
                offsets[tp] = -1
        return offsets

    def _fetch_log_offsets(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        """OffsetFetch until it succeeds; shutdown, a new session or a new offsets mode (which may not read the
        log at all) ends the attempt instead (§5.2)."""
        mode = self._mode
        while True:
            try:
                return self._log.fetch(partitions)
            except LogUnavailableError as error:
                problem = error
            if self._mode != mode:
                raise ZkcoordError(f"the offsets mode changed while the log did not answer; {problem}")
            if not self._stopping.is_set() and not self._lifecycle.superseded:
                log.warning(
                    "offset fetch from the log failed member=%s error=%s; retrying in %d ms",
                    self.consumer_id,
                    problem,
                    self.config.offsets_channel_backoff_ms,
                )
                self._stopping.wait(self.config.offsets_channel_backoff_ms / 1000.0)
            if self._stopping.is_set() or self._lifecycle.superseded:
                raise ZkcoordError(
                    f"offset fetch from the log given up: the member is closing or re-registering; {problem}"
                )

    def _commit_before_release(self, ops: _Ops) -> None:
        """ZooKeeper errors fail the attempt, as in 0.8.2; a failed commit to the log is logged and the release
        goes on, as 0.8.2's ``commitOffsets`` returns without throwing (the next owner may repeat records)."""
        try:
            self._commit_changed(ops)
        except CommitFailedError as error:
            log.warning("offset commit before release failed member=%s error=%s", self.consumer_id, error)

    def _commit_changed(self, ops: _Ops) -> None:
        """Commit the registry's positions where the mode in force says (§5.1); raises if the try failed.

        ZooKeeper only: positions that differ from the checkpoint. With the log: every position (KAFKA-1510),
        then, with dual commit, ZooKeeper for the changed ones the log accepted. A partition without a
        position (-1: nothing committed, nothing consumed yet) is not committed anywhere.
        """
        with self._offsets_lock:
            mode = self._mode
            positions = {tp: (owned, owned.position) for tp, owned in self._registry.items() if owned.position >= 0}
            if not mode.writes_log:
                self._write_checkpointed(positions, ops)
                return
            if not positions:
                return
            try:
                codes = self._log.commit({tp: position for tp, (_, position) in positions.items()})
            except (KazooException, ZkcoordError) as error:
                raise CommitFailedError(f"offset commit to the log failed: {error}") from error
            self._trace_committed("log", {tp: positions[tp][1] for tp, code in codes.items() if code == 0})
            if mode.writes_zk:
                accepted = {tp: positions[tp] for tp, code in codes.items() if code == 0}
                try:
                    self._write_checkpointed(accepted, ops)
                except KazooException as error:
                    raise CommitFailedError(
                        f"offsets accepted by the log but not written to ZooKeeper: {error}"
                    ) from error
            refused = {tp: code for tp, code in codes.items() if code}
            if refused:
                raise CommitFailedError(
                    f"the log refused offsets of {len(refused)} partition(s): "
                    + ", ".join(
                        f"{tp.topic}-{tp.partition} {_error_name(code)}" for tp, code in sorted(refused.items())
                    )
                )

    def _write_checkpointed(self, positions: Mapping[TopicPartition, tuple[Owned, int]], ops: _Ops) -> None:
        """Write to ZooKeeper the positions that differ from their checkpoint, then move the checkpoint."""
        changed = {
            tp: (owned, position) for tp, (owned, position) in positions.items() if position != owned.checkpointed
        }
        if not changed:
            return
        self._write_offsets({tp: position for tp, (_, position) in changed.items()}, ops)
        for owned, position in changed.values():
            owned.checkpointed = position
        self._trace_committed("zookeeper", {tp: position for tp, (_, position) in changed.items()})

    def _trace_committed(self, store: str, offsets: Mapping[TopicPartition, int]) -> None:
        if self._sinks:
            self._emit(
                "legacy.committed", store=store, offsets=[[*tp, offset] for tp, offset in sorted(offsets.items())]
            )

    def _write_offsets(self, offsets: Mapping[TopicPartition, int], ops: _Ops) -> None:
        """``updatePersistentPath``, pipelined: set; create the missing; set again on a create race."""
        paths = {tp: layout.offset_path(self._group, *tp) for tp in offsets}
        sets = {tp: self._zk.set_async(paths[tp], layout.encode_offset(o)) for tp, o in offsets.items()}
        ops.add(len(sets))
        missing = []
        for tp, result in sets.items():
            try:
                result.get()
            except NoNodeError:
                # Create only for partitions still owned: a partition released meanwhile may have a new
                # owner that already read "no offset", and a late create would slip under it.
                if tp in self._registry:
                    missing.append(tp)
        creates = {
            tp: self._zk.create_async(paths[tp], layout.encode_offset(offsets[tp]), makepath=True) for tp in missing
        }
        ops.add(len(creates))
        for tp, result in creates.items():
            try:
                result.get()
            except NodeExistsError:
                self._zk.set(paths[tp], layout.encode_offset(offsets[tp]))
                ops.add(1)

    # ---- outputs -------------------------------------------------------------------------------------

    def _publish_assignment(self) -> None:
        """Make the registry (or nothing, while disconnected) the assignment others read, and trace it.

        ``monotonic_before``/``monotonic_after`` bracket the switch, so a checker can order the
        changes of members in one process and prove that no two owned a partition at once.
        """
        connected = self._lifecycle.connected
        threads: dict[str, list[TopicPartition]] = {thread: [] for thread in self._thread_ids}
        if connected:
            for tp, owned in sorted(self._registry.items()):
                threads.setdefault(owned.thread_id, []).append(tp)
        self._streams.show(self._registry if connected else {})
        if threads == self._assignment:
            return
        before = time.monotonic()
        self._assignment = threads  # replaced whole: readers in other threads see one consistent dict
        after = time.monotonic()
        self._emit(
            "legacy.assignment",
            assignment={thread: [list(tp) for tp in tps] for thread, tps in threads.items()},
            connected=connected,
            monotonic_before=before,
            monotonic_after=after,
        )

    def _run_listener(self, method: str, partitions: list[TopicPartition]) -> None:
        callback = getattr(self._listener, method, None)
        if callback is None:
            return
        try:
            self._io.hub.threadpool.spawn(callback, list(partitions)).get()
        except Exception:
            log.exception("rebalance listener %s failed member=%s", method, self.consumer_id)

    def _emit(self, event_type: str, **fields: Any) -> None:
        event = make_event(event_type, self._clock.now_ms(), self._group, self.consumer_id, **fields)
        for sink in self._sinks:
            try:
                sink(event)
            except Exception:
                log.exception("trace sink failed")
