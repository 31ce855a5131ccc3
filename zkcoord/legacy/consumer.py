"""Kafka 0.8.2's high-level consumer group protocol on ZooKeeper (ZookeeperConsumerConnector).

Spec: legacy-zk-protocol.md §1–§7. Everything ZooKeeper-facing (registration, watches, the rebalance
loop, commits) runs on one gevent hub in a native :class:`~zkcoord.zk.session.HubThread`, so user code
that holds the caller's hub or burns CPU cannot starve the session. Public methods are thread-safe and
hand their work to that thread. Rebalance-listener callbacks run in that hub's native thread pool: they
may block, and the member keeps answering ZooKeeper meanwhile.

:class:`LegacyConsumer` is the public face. It builds the member's parts and runs their start and close;
the parts run on the hub thread and share a :class:`~zkcoord.legacy.context.MemberContext`:

- :mod:`~zkcoord.legacy.membership`: the ids node, sessions (:mod:`~zkcoord.legacy.states`), the advertisement;
- :mod:`~zkcoord.legacy.rebalance`: watches, the rebalance loop and its attempts;
- :mod:`~zkcoord.legacy.ownership`: the registry, its owner znodes, the assignment it reports;
- :mod:`~zkcoord.legacy.commits`: offset commits and fetches in the mode the group's migration phase or the
  config says (§5), the log reached with gevent sockets on the same hub, so it never blocks it;
- :mod:`~zkcoord.legacy.stream`: the :class:`KafkaStream` s that hand records to the application in user
  threads, each through a view of ownership the hub thread replaces under the stream's lock.

Its metrics (:mod:`~zkcoord.legacy.metrics`) count the parts' trace events and read the member when scraped;
``zkcoord.metrics.port`` serves them from a hub thread of their own, so a slow scrape never holds the member's.
"""

import logging
import socket
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import gevent
import gevent.event
import gevent.socket
from prometheus_client import CollectorRegistry

from zkcoord.channel import INITIAL_BACKOFF_S, CoordinatorChannel
from zkcoord.clock import SystemClock
from zkcoord.config import build_config, parse_bootstrap_servers
from zkcoord.errors import (
    CommitFailedError,
    ConfigError,
    ConsumerRebalanceFailedError,
    CoordinatorMembersError,
    SourceError,
    ZkcoordError,
    ZooKeeperConnectionError,
)
from zkcoord.legacy.commits import OffsetCommits
from zkcoord.legacy.config import LegacyConsumerConfig
from zkcoord.legacy.context import MemberContext, Tracer
from zkcoord.legacy.log_ends import LogEnds
from zkcoord.legacy.membership import Membership
from zkcoord.legacy.metrics import LegacyMetrics
from zkcoord.legacy.offsets import INACTIVE_STATES, LogOffsets, LogUnavailableError, OffsetsMode
from zkcoord.legacy.ownership import OwnerNodes, Ownership, ZkOps
from zkcoord.legacy.rebalance import RebalanceListener, Rebalancer
from zkcoord.legacy.states import Lifecycle
from zkcoord.legacy.stream import WILDCARD_STREAMS, KafkaStream, Owned, Streams
from zkcoord.legacy.subscription import registration_for
from zkcoord.migration.store import watch_state
from zkcoord.model import Address, TopicPartition
from zkcoord.sources import RecordSource, SyntheticSource
from zkcoord.trace import TraceSink
from zkcoord.zk import layout
from zkcoord.zk.nodes import discover_nodes
from zkcoord.zk.session import HubThread, make_kazoo_client

__all__ = ["WILDCARD_STREAMS", "KafkaStream", "LegacyConsumer", "RebalanceListener", "make_consumer_id"]

log = logging.getLogger(__name__)


def make_consumer_id(group: str, configured: str | None, now_ms: int) -> str:
    """ZKCC ``consumerIdString``: ``group_consumer.id`` or ``group_host-ms-hex8`` (§2.1)."""
    if configured:
        return f"{group}_{configured}"
    hex8 = format(uuid.uuid4().int >> 64, "x")[:8]  # Long.toHexString drops leading zeros
    return f"{group}_{socket.gethostname()}-{now_ms}-{hex8}"


class _Readings:
    """What the member's metrics read when scraped, from the scraping thread: values the hub thread replaces whole
    (the assignment) or that are safe to read from any thread (the log ends, the streams' counts)."""

    def __init__(self, consumer: "LegacyConsumer"):
        self._consumer = consumer
        self._log_ends = LogEnds(consumer.source, consumer.consumer_id)

    def positions(self) -> dict[TopicPartition, int]:
        ownership = self._consumer._ownership
        registry = dict(ownership.registry)  # one copy: the hub thread may clear the registry meanwhile
        return {tp: registry[tp].position for tps in ownership.assignment.values() for tp in tps if tp in registry}

    def log_ends(self, partitions) -> dict[TopicPartition, int]:
        return self._log_ends.read(partitions)

    def consumed(self) -> dict[str, tuple[int, int]]:
        return self._consumer._streams.consumed()

    def session_state(self) -> str | None:
        return self._consumer._lifecycle.connection

    def member_state(self) -> str:
        return self._consumer._lifecycle.state.name


class LegacyConsumer:
    """A member of a Kafka 0.8.2 ZooKeeper consumer group, indistinguishable from a JVM member.

    Subscribe with exactly one of ``topics={topic: streams}`` (ordered), ``whitelist=regex`` or
    ``blacklist=regex`` (with ``num_streams``). Configure with Kafka's property names in ``config``
    or snake_case keywords (``group_id=...``). Use as a context manager or call :meth:`start` and
    :meth:`close`. Records come from ``source`` (default: a :class:`~zkcoord.sources.SyntheticSource`
    on the member's clock, closed with the member; a source passed in stays the caller's to close)
    through the streams of :meth:`streams`.

    Metrics (docs/legacy.md): :attr:`metrics` is the member's Prometheus collector, to register in a registry
    of your own; :attr:`metrics_registry` holds it alone, and ``zkcoord.metrics.port`` serves it over HTTP.
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
        self.consumer_id = make_consumer_id(self.config.group_id, self.config.consumer_id, self._clock.now_ms())
        self._listener = listener
        self._group = self.config.group_id
        self._root = self.config.zkcoord_root
        self._bootstrap = (
            parse_bootstrap_servers(self.config.bootstrap_servers) if self.config.bootstrap_servers else None
        )
        self.metrics = LegacyMetrics(self.config.effective_client_id, self._group, self.consumer_id, _Readings(self))
        sinks = (trace,) if callable(trace) else tuple(trace)
        self._trace = Tracer(self._clock, self._group, self.consumer_id, (*sinks, self.metrics))
        self._lifecycle = Lifecycle()  # the hub thread's; start() moves it out of NEW before the hub runs
        self._streams = Streams(self._registration, self.config, self.source, self.consumer_id)
        self._ownership = Ownership(self._streams, self._lifecycle, self._trace.emit)
        self.metrics_registry = CollectorRegistry(auto_describe=False)
        self.metrics_registry.register(self.metrics)  # describes it: reads the parts above
        self._closed = False  # the caller's side: public methods refuse once close() began or start() failed
        self._io: HubThread | None = None
        self._metrics_io: HubThread | None = None
        self._metrics_server = None
        self._zk = None
        # The hub-side parts, built by start() on the hub thread.
        self._commits: OffsetCommits | None = None
        self._owner_nodes: OwnerNodes | None = None
        self._rebalancer: Rebalancer | None = None
        self._membership: Membership | None = None
        self._stopping: gevent.event.Event | None = None
        self._stop_state_watch = None
        self._greenlets: list[gevent.Greenlet] = []

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
            if self.config.metrics_port is not None:  # probes answer from the start: alive, not ready yet
                self._serve_metrics()
            self._io.call(self._startup, timeout=timeout)
        except BaseException:
            self._io.call(self._shutdown, False)
            self._io.stop()
            self._stop_metrics()
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
            self._stop_metrics()
            self._close_source()

    def _serve_metrics(self) -> None:
        from zkcoord.metrics_http import serve_metrics

        self._metrics_io = HubThread(f"zkcoord-legacy-metrics-{self.consumer_id}").start()
        host, port = self.config.metrics_host, self.config.metrics_port
        try:
            self._metrics_server = self._metrics_io.call(
                lambda: serve_metrics(self.metrics_registry, host, port, readiness=self._readiness), timeout=10.0
            )
        except OSError as error:
            raise ConfigError(f"zkcoord.metrics.port={port}: cannot serve metrics on {host}:{port}: {error}") from None

    def _stop_metrics(self) -> None:
        if self._metrics_io is None:
            return
        if self._metrics_server is not None:
            self._metrics_io.call(self._metrics_server.stop, timeout=10.0)
            self._metrics_server = None
        self._metrics_io.stop()
        self._metrics_io = None

    def _readiness(self) -> dict:
        """``/readyz``: ready while registered in a connected session."""
        lifecycle = self._lifecycle
        return {
            "ready": lifecycle.registered and lifecycle.connected,
            "state": lifecycle.state.name,
            "session": lifecycle.connection,
        }

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
        return {thread: list(tps) for thread, tps in self._ownership.assignment.items()}

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
            self._commits.commit(ZkOps())

        self._call(commit)

    def committed(self, partition: TopicPartition) -> int | None:
        """The committed offset of ``partition`` as the member's read rule sees it (ZooKeeper, the log, or the
        larger of both); None when there is none."""
        partition = TopicPartition(*partition)
        return self._call(lambda: self._commits.committed(partition))

    @property
    def offsets_mode(self) -> OffsetsMode | None:
        """Where the member commits and reads offsets now (None before :meth:`start`, and while its group's
        migration state has never been readable: it then neither commits nor fetches)."""
        return None if self._commits is None else self._commits.mode

    @property
    def _uncertain(self) -> set[TopicPartition]:
        """Owner znodes whose fate a lost connection left unknown (hub thread; tests stage some)."""
        return self._owner_nodes.uncertain

    def _call(self, fn):
        if self._io is None or self._closed:
            raise ZkcoordError("the consumer is not running")
        return self._io.call(fn, timeout=max(30.0, self.config.zookeeper_session_timeout_ms / 1000.0 * 2))

    def _owned(self, partition: TopicPartition) -> Owned:
        owned = self._ownership.registry.get(TopicPartition(*partition))
        if owned is None:
            raise CommitFailedError(f"{self.consumer_id} does not own {partition}")
        return owned

    def _set_position(self, partition: TopicPartition, offset: int) -> None:
        partition = TopicPartition(*partition)
        self._streams.set_position(partition, self._owned(partition), offset)

    # ---- start and close (hub thread) ----------------------------------------------------------------

    def _startup(self) -> None:
        self._stopping = gevent.event.Event()
        backoff_s = self.config.offsets_channel_backoff_ms / 1000.0
        channel = CoordinatorChannel(
            self._coordinator_addresses,
            self.config.effective_client_id,
            self.config.offsets_channel_socket_timeout_ms,
            unavailable=LogUnavailableError,
            sleep=gevent.sleep,
            create_connection=self.config.client_security.connector(gevent.socket.create_connection),
            initial_backoff_s=min(INITIAL_BACKOFF_S, backoff_s),
            max_backoff_s=backoff_s,
        )
        self._zk = make_kazoo_client(self.config.zookeeper_connect, self.config.zookeeper_session_timeout_ms)
        context = MemberContext(
            config=self.config,
            consumer_id=self.consumer_id,
            registration=self._registration,
            clock=self._clock,
            zk=self._zk,
            lifecycle=self._lifecycle,
            ownership=self._ownership,
            stopping=self._stopping,
            trace=self._trace,
        )
        self._commits = OffsetCommits(context, LogOffsets(channel, self._group))
        self._owner_nodes = OwnerNodes(self._zk, self._group)
        self._rebalancer = Rebalancer(context, self._owner_nodes, self._commits, self._listener)
        self._membership = Membership(context, self._owner_nodes, self._commits, self._rebalancer)
        self._zk.add_listener(self._membership.on_session_state)
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
        self._stop_state_watch = watch_state(
            self._zk,
            self._root,
            self._group,
            self._membership.on_migration_state,
            self._membership.on_unreadable_migration_state,
        )
        self._check_no_coordinator_members()
        if not self._membership.register():  # closed while registering (Ctrl-C): start no greenlet close() would miss
            raise ZkcoordError("the consumer was closed while starting")
        self._membership.write_advertisement()
        self._rebalancer.start_watching()
        self._greenlets.append(gevent.spawn(self._rebalancer.loop))
        self._greenlets.append(gevent.spawn(self._membership.advertise_loop))
        if self.config.auto_commit_enable:
            self._greenlets.append(gevent.spawn(self._commits.auto_commit_loop, self._rebalancer.lock))
        if not self._rebalancer.synced_rebalance("startup"):
            raise ConsumerRebalanceFailedError(
                f"{self.consumer_id} can't rebalance after {self.config.rebalance_max_retries} retries"
            )

    def _shutdown(self, commit: bool) -> None:
        self._lifecycle.close()
        if self._zk is None:
            return
        self._stopping.set()
        self._rebalancer.wake()
        with self._rebalancer.lock:
            gevent.killall(self._greenlets)
            self._streams.shut_down()  # 0.8.2's shutdown command: nothing is handed out after the commit
            if commit:
                self._commits.commit_with_retries()
            self._ownership.registry.clear()
            self._ownership.publish()
            if self._stop_state_watch is not None:
                self._stop_state_watch()
            self._commits.close()
            self._zk.stop()
            self._zk.close()
        self._lifecycle.closed()
        self._trace.emit("legacy.closed")

    # ---- the group's coordinator ---------------------------------------------------------------------

    def _coordinator_addresses(self) -> list[Address]:
        if self._bootstrap is not None:
            return list(self._bootstrap)
        return discover_nodes(self._zk, self._root)

    def _check_no_coordinator_members(self) -> None:
        """Refuse a group that coordinator (new-client) members run: a group speaks one protocol at a time.

        Asked only where coordinator nodes are configured or registered. If none answers, a member that
        keeps its offsets in ZooKeeper only goes on (a pure ZooKeeper deployment has no coordinator);
        one that needs the log cannot work and fails.
        """
        if not self._coordinator_addresses():
            log.debug("no coordinator node under %s; group %s has no coordinator members", self._root, self._group)
            return
        if self._zk.exists(layout.bridge_path(self._root, self._group)):
            log.info("group %s is a mixed group: its coordinator members take part in the 0.8.2 protocol", self._group)
            return
        try:
            state, members = self._commits.describe_group()
        except LogUnavailableError as error:
            mode = self._commits.mode
            if mode is not None and mode.uses_log:
                raise LogUnavailableError(
                    f"{error}; this member keeps offsets in the log (it follows {mode.describe()}) "
                    "and cannot start without the group's coordinator"
                ) from None
            log.debug("no coordinator node answered; not checking for coordinator members: %s", error)
            return
        if members or state not in INACTIVE_STATES:
            raise CoordinatorMembersError(self._group, state, members)
