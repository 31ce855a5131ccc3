"""One coordinator node: the group core in the coordinator runtime, behind the wire server, on the shared log.

Owns what is the node's own around :class:`~zkcoord.runtime.CoordinatorRuntime`: the real-clock timer
greenlet, loading and unloading offsets partitions as ZooKeeper elects this node or moves a partition away
(with the epoch fence on disk, :mod:`zkcoord.runtime.durable`), the topic-metadata watch, the cluster as
ZooKeeper's watches have it (for FindCoordinator and Metadata, :mod:`zkcoord.server.cluster`), metrics, and
offset migration's request steps (:mod:`zkcoord.server.steps`). Every entry into the runtime runs to completion
without yielding, so one gevent hub serialises them: the "one serial queue per partition" of the design, with
no locks. ZooKeeper is therefore read before a request enters the core or after it answered.

IO: gevent, kazoo, files. Expects gevent's monkey-patching in the process entry point only.
"""

from __future__ import annotations

import gc
import logging
import time
from pathlib import Path

import gevent
from gevent.event import Event
from gevent.queue import Queue
from kazoo.client import KazooClient, KazooState

from zkcoord.auth.acls import Authorizer, parse_super_users
from zkcoord.clock import SystemClock
from zkcoord.errors import ErrorCode, FencedLeaderError, LogError, ZooKeeperConnectionError
from zkcoord.group.coordinator import GroupCoordinator
from zkcoord.group.effects import Append
from zkcoord.runtime import CoordinatorRuntime
from zkcoord.runtime.durable import DurableLogs
from zkcoord.security.config import MSGPACK_LISTENER, SecurityConfig
from zkcoord.server.bridge import MixedGroups
from zkcoord.server.bridge_plans import BridgeSettings
from zkcoord.server.cluster import ZooKeeperCluster
from zkcoord.server.config import KafkaListenerSettings, NodeConfig
from zkcoord.server.connection import WireServer
from zkcoord.server.gateway import GatewayAddresses, UpstreamBrokers
from zkcoord.server.identity import NodeIdentity
from zkcoord.server.kafka_listener import KafkaListener
from zkcoord.server.limits import ConnectionLimits
from zkcoord.server.metrics import NodeMetrics
from zkcoord.server.migration import GroupMigrations
from zkcoord.server.mirror import OffsetMirror
from zkcoord.server.security import ListenerSecurity
from zkcoord.server.steps import MigrationSteps
from zkcoord.wire.codec import API_NAMES
from zkcoord.wire.messages import Request
from zkcoord.zk import layout
from zkcoord.zk.acl import start_logged_in
from zkcoord.zk.acls import AclStore
from zkcoord.zk.election import PartitionElection
from zkcoord.zk.leader_znodes import ensure_partition_count
from zkcoord.zk.nodes import NodeRegistry, previous_session_wait_s
from zkcoord.zk.session import make_kazoo_client
from zkcoord.zk.users import WatchedCredentials

log = logging.getLogger(__name__)


_ALL_INTERFACES = ("", "0.0.0.0", "::")


# The cyclic collector's first threshold: with CPython's 700, a busy node ran a collection every few requests,
# and a full one (every object the node keeps) often enough to hold its event loop for 100 ms at a time.
GC_YOUNG_THRESHOLD = 50_000


def tune_garbage_collector() -> None:
    """For a node's own process, once the node has started (the CLI and the benchmarks call it): move what start-up
    made out of the cyclic collector's way, and collect the young generation less often.

    A node's requests leave few cycles (reference counts free nearly all they allocate), while a full collection
    walks every object it keeps: with a heartbeat benchmark's groups left over, it cut durable commits by a fifth
    and held the event loop for 100 ms at a time. Not for a process that runs other code, such as a test's."""
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, older, oldest)


def _authorizer(security: SecurityConfig) -> Authorizer | None:
    """Kafka's AclAuthorizer when ``authorizer.class.name`` names it; None: every request is allowed."""
    if not security.authorizes:
        return None
    return Authorizer(parse_super_users(security.super_users), security.allow_everyone_if_no_acl_found)


class CoordinatorNode:
    """A running coordinator node; :meth:`start`, then :meth:`stop` (resign, flush, close)."""

    def __init__(
        self,
        node_id: int,
        host: str,
        port: int,
        zookeeper: str,
        log_dir: str | Path,
        config: NodeConfig,
        clock=None,
        advertised_host: str | None = None,
        advertised_port: int | None = None,
        kafka_port: int | None = None,
    ):
        self.node_id = node_id
        self.host = host
        self.advertised_host = advertised_host or host
        self.advertised_port = advertised_port  # None: the bound port
        self.config = config
        self.zookeeper = zookeeper
        self.zookeeper_security = config.server.zookeeper_security()  # a bad JAAS file fails here, not at start
        self.log_dir = Path(log_dir)
        self.identity = NodeIdentity(self.log_dir, node_id)
        self.clock = clock or SystemClock()
        self.coordinator = GroupCoordinator(config.coordinator, self.clock.now_ms())
        self.logs = DurableLogs(self.log_dir, config.log, self.clock)
        self.epochs: dict[int, int] = {}
        self.migrations = GroupMigrations(config.server.root, node_id)
        self.mirror = OffsetMirror(self.migrations, self.clock)
        self.metrics = NodeMetrics(self)
        self.cluster = ZooKeeperCluster()
        self.runtime = CoordinatorRuntime(
            self.coordinator,
            self.logs,
            self.cluster,
            self.clock,
            steps=MigrationSteps(self.migrations, self.mirror, self.coordinator, self._bridged),
            on_append_done=self._on_append_done,
        )
        server = config.server
        self.bridge = MixedGroups(
            server.root,
            self.coordinator,
            lambda request, respond: self._enter(self.runtime.submit, request, respond),
            lambda action: self._enter(self.runtime.enter, action),
            self.epochs,
            self.clock,
            BridgeSettings(
                server.bridge_rebalance_max_retries,
                server.bridge_rebalance_backoff_ms,
                server.bridge_release_grace_ms,
                server.bridge_check_interval_ms,
            ),
        )
        self.authorizer = _authorizer(config.security)
        self._credentials: WatchedCredentials | None = None  # once ZooKeeper is connected
        self.acls: AclStore | None = None
        self.server = WireServer(
            host,
            port,
            self.dispatch,
            security=self._listener_security(MSGPACK_LISTENER),
            max_request_bytes=config.server.max_request_bytes,
            max_connections=config.server.max_connections,
            max_idle_ms=config.server.connections_max_idle_ms,
            read_timeout_ms=config.server.request_read_timeout_ms,
            max_connections_per_ip=config.server.max_connections_per_ip,
            max_connections_per_ip_overrides=config.server.per_ip_overrides(),
        )
        self.kafka_settings = config.server.kafka_listener(kafka_port)
        self.upstream = UpstreamBrokers(config.server.gateway_upstream_timeout_ms / 1000)
        probe_tls = self.kafka_settings is not None and config.security.for_listener(self.kafka_settings.name).tls
        self.gateway = GatewayAddresses(self.cluster, self.upstream, config.server, node_id, probe_tls)
        self.kafka = None if self.kafka_settings is None else self._kafka_listener(self.kafka_settings)
        self.zk: KazooClient | None = None
        self._timer_wakeup = Event()
        self._timer_target: int | None = None  # the deadline the timer greenlet sleeps towards
        # A hub that did not run for this long (SIGSTOP, a VM freeze) may have outlived its ZooKeeper session.
        self._pause_limit_ms = config.server.zookeeper_session_timeout_ms / 3
        self._last_tick_ms = self.clock.monotonic_ms()
        self._topic_events: Queue = Queue()
        self._topic_counts: dict[str, int] = {}
        self._greenlets: list[gevent.Greenlet] = []
        self._stopping = False
        self._reopens: dict[int, int] = {}  # partition → reopens after a storage error since its last good append
        self._reopening: set[int] = set()

    @property
    def registry(self) -> NodeRegistry | None:
        return self.cluster.registry

    @property
    def election(self) -> PartitionElection | None:
        return self.cluster.election

    # -- lifecycle ---------------------------------------------------------------------------------------

    def start(self) -> None:
        server = self.config.server
        self.log_dir.mkdir(parents=True, exist_ok=True)
        identity = self.identity.acquire()  # first: a second process with this id and directory stops here
        security = self.zookeeper_security
        self.zk = make_kazoo_client(self.zookeeper, server.zookeeper_session_timeout_ms, security)
        try:
            start_logged_in(self.zk, security, server.zookeeper_connection_timeout_ms / 1000)
        except self.zk.handler.timeout_exception:  # gevent's Timeout, a BaseException: callers would not catch it
            raise ZooKeeperConnectionError(
                f"no ZooKeeper session with {self.zookeeper} within {server.zookeeper_connection_timeout_ms} ms"
            ) from None
        self.zk.add_listener(self._on_zookeeper_state)
        if security.set_acl:
            # Created open before any 0.8.2 member needs it, as Kafka's brokers do: they cannot create it under a
            # secured chroot.
            self.zk.ensure_path(layout.CONSUMERS_PATH)
        self.migrations.start(self.zk)
        self.mirror.start(self.zk)
        self.bridge.start(self.zk)
        ensure_partition_count(self.zk, server.root, self.config.coordinator.offsets_topic_num_partitions)
        self._credentials = WatchedCredentials(self.zk)
        if self.authorizer is not None:
            self.acls = AclStore(self.zk, self.authorizer)
            self.acls.start()  # before the listeners: no request is checked against ACLs not yet read
        self.server.start()
        self._warn_if_open(self.host, self.server.security)
        port = self.server.address[1]
        if self.kafka is not None:
            self._warn_if_open(self.kafka_settings.host, self.kafka.security)
            self.upstream.watch(self.zk)
            self.kafka.start()
            self.gateway.start()
        self.cluster.registry = NodeRegistry(
            self.zk,
            server.root,
            self.node_id,
            self.advertised_host,
            self.advertised_port or port,
            identity=identity,
            previous_session_wait_s=previous_session_wait_s(server.zookeeper_session_timeout_ms),
            kafka=self._kafka_address(),
        )
        self.cluster.registry.register()
        self._greenlets.append(gevent.spawn(self._run_timers))
        self._greenlets.append(gevent.spawn(self._run_topic_events))
        self.zk.ensure_path(layout.BROKER_TOPICS_PATH)
        self.zk.ChildrenWatch(layout.BROKER_TOPICS_PATH, self._on_topics)
        self.cluster.election = PartitionElection(
            self.zk,
            server.root,
            self.node_id,
            self.config.coordinator.offsets_topic_num_partitions,
            on_elected=self._on_elected,
            on_resigned=self._on_resigned,
            claim_grace_ms=server.claim_grace_ms,
            on_confirmed=self._on_confirmed,
        )
        self.cluster.election.start()
        self.cluster.watch(self.zk, server.root, self.election.num_partitions, (self.node_id, self.registry.data))
        self.logs.start_cleaner()
        log.info("coordinator node started node=%d address=%s:%d", self.node_id, self.host, port)

    # -- Kafka's protocol ----------------------------------------------------------------------------------

    def _listener_security(self, listener: str) -> ListenerSecurity | None:
        """A listener's TLS, SASL and ACL checks; None for a plaintext listener without an authorizer."""
        settings = self.config.security.for_listener(listener)
        if settings.protocol == "PLAINTEXT" and self.authorizer is None:
            return None
        server = self.config.server
        return ListenerSecurity(
            settings,
            self._scram_credential,
            self.authorizer,
            server.request_read_timeout_ms / 1000,
            server.connection_failed_authentication_delay_ms / 1000,
        )

    def _scram_credential(self, user: str, mechanism: str):
        if self._credentials is None:
            return None
        return self._credentials(user, mechanism)

    @staticmethod
    def _warn_if_open(host: str, security: ListenerSecurity | None) -> None:
        if host in _ALL_INTERFACES and (security is None or security.protocol == "PLAINTEXT"):
            log.warning(
                "listening on %s (every interface) in plaintext%s: anyone who reaches this host can read and change "
                "every group; bind 127.0.0.1 or set up TLS, SASL and ACLs (docs/security.md)",
                host or "0.0.0.0",
                "" if security is None else ", though with ACLs",
            )

    def _kafka_listener(self, settings: KafkaListenerSettings) -> KafkaListener:
        server = self.config.server
        return KafkaListener(
            settings.host,
            settings.port,
            settings.gateway_ports(),
            self.dispatch,
            self.upstream,
            self.gateway,
            max_request_bytes=server.socket_request_max_bytes,
            limits=ConnectionLimits(
                "kafka connection", server.max_connections, server.max_connections_per_ip, server.per_ip_overrides()
            ),
            idle_timeout_s=server.connections_max_idle_ms / 1000,
            security=self._listener_security(settings.name),
        )

    def _kafka_address(self) -> layout.KafkaListenerAddress | None:
        """What the registration tells other nodes of this node's Kafka listener."""
        if self.kafka is None:
            return None
        settings = self.kafka_settings
        host, port = settings.advertised or (self.advertised_host, self.kafka.port)
        count = settings.gateway_last_port - settings.gateway_first_port + 1
        return layout.KafkaListenerAddress(host, port, settings.gateway_first_port, count)

    @property
    def kafka_port(self) -> int | None:
        return None if self.kafka is None else self.kafka.port

    @property
    def port(self) -> int:
        return self.server.address[1]

    def readiness(self) -> dict:
        """What ``/readyz`` answers: ready while connected to ZooKeeper, registered, with a current view of the
        cluster, and not stopping."""
        state = self.zk.state if self.zk is not None else "NOT_STARTED"
        ready = state == KazooState.CONNECTED and self.registry is not None and self.cluster.current
        return {
            "ready": ready and not self._stopping,
            "zookeeper": str(state),
            "cluster_view_current": self.cluster.current,
            "partitions_led": sorted(self.coordinator.owned),
            "partitions_loading": sorted(self.coordinator.loading),
            "partitions_suspended": sorted(self.coordinator.suspended),
        }

    def stop(self) -> None:
        """Graceful: resign every partition (parked requests get NOT_COORDINATOR), flush and close the logs."""
        if self._stopping:
            return
        self._stopping = True
        if self.registry is not None:
            # Deregister first: the others then see this node gone and claim its partitions without a grace.
            self.registry.stop()
        if self.election is not None:
            self.election.stop()
        self.logs.stop_cleaner()
        self.bridge.stop()
        for partition in sorted(self.coordinator.owned | self.coordinator.loading):
            self._unload(partition)
        self.logs.syncer.close()
        self.runtime.enter(lambda now: self.coordinator.shutdown())
        self.server.stop(self.config.server.shutdown_timeout_ms / 1000)
        if self.kafka is not None:
            self.gateway.stop()
            self.kafka.stop()
        if self.acls is not None:
            self.acls.stop()
        # Commits answered until now are still owed to ZooKeeper: the mirror gets the same bound to catch up.
        self.mirror.stop(self.config.server.shutdown_timeout_ms / 1000)
        self.migrations.stop()
        gevent.killall(self._greenlets, timeout=1)
        self.cluster.stop()
        if self.zk is not None:
            self.zk.stop()
            self.zk.close()
        self.identity.release()
        log.info("coordinator node stopped node=%d", self.node_id)

    # -- requests ----------------------------------------------------------------------------------------

    def dispatch(self, request: Request, respond) -> None:
        """Answer one well-formed request (the wire server calls this in each connection's order)."""
        self.metrics.on_request(API_NAMES[type(request)])
        self._check_pause()  # before answering from state that a pause may have made stale
        if self.bridge.takes(request):
            self.bridge.admit(request, respond)
            return
        self.runtime.submit(request, respond)
        self._aim_timers()

    def _bridged(self, group: str) -> bool:
        return group in self.bridge.bridged

    def _aim_timers(self) -> None:
        """After any entry into the runtime: wake the timer greenlet if the next deadline moved earlier."""
        deadline = self.runtime.next_deadline()
        # Most entries only move deadlines later (a heartbeat); wake the timer greenlet only for an earlier one.
        if deadline is not None and (self._timer_target is None or deadline < self._timer_target):
            self._timer_wakeup.set()

    def _enter(self, action, *args):
        """Run an entry of the runtime from a greenlet of the node's own; a bug must not end that greenlet."""
        try:
            return action(*args)
        except Exception:
            log.exception("coordinator entry failed: %r", action)
            return None
        finally:
            self._aim_timers()

    # -- timers --------------------------------------------------------------------------------------------

    def _run_timers(self) -> None:
        """Fire due timers; also the pause watchdog, so it wakes at least four times per pause limit."""
        tick_s = self._pause_limit_ms / 4 / 1000
        while True:
            self._check_pause()
            deadline = self._timer_target = self.runtime.next_deadline()
            # Kafka fires a timer once the clock is past its deadline; +1 ms matches "now > deadline".
            wait = tick_s if deadline is None else min(tick_s, (deadline + 1 - self.clock.now_ms()) / 1000)
            if self.coordinator.suspended:
                wait = tick_s  # the runtime fires nothing now; confirmation wakes this greenlet
            self._timer_wakeup.clear()
            if wait > 0:
                self._timer_wakeup.wait(timeout=wait)
                continue
            self._enter(self.runtime.fire_due, self.clock.now_ms())
            gevent.sleep(0)

    # -- after a pause or a disconnect (docs/coordinator.md) ----------------------------------------------------

    def _check_pause(self) -> None:
        now = self.clock.monotonic_ms()
        paused_ms = now - self._last_tick_ms
        self._last_tick_ms = now
        if paused_ms > self._pause_limit_ms:
            self._suspect(f"the node did not run for {paused_ms:.0f} ms")

    def _on_zookeeper_state(self, state: str) -> None:
        if state != KazooState.CONNECTED:
            self._suspect(f"the ZooKeeper session is {state}")

    def _suspect(self, why: str) -> None:
        """Answer 15 for every partition led until the election confirms this node still leads it."""
        led = self.coordinator.owned | self.coordinator.loading
        if not led:
            return
        log.warning("suspending partitions=%s until ZooKeeper confirms them: %s", sorted(led), why)
        self.coordinator.suspend(led)
        if self.election is not None:
            self.election.confirm()

    def _on_confirmed(self, led: dict[int, int]) -> None:
        """The election's fresh read after :meth:`_suspect`: serve what is still led at its epoch, drop the rest."""
        for partition in sorted(self.coordinator.suspended):
            if led.get(partition) == self.epochs.get(partition):
                self.coordinator.resume(partition)
                log.info("partition=%d confirmed at epoch=%d, serving again", partition, led[partition])
            else:
                self._unload(partition)
        self._timer_wakeup.set()

    # -- partitions ------------------------------------------------------------------------------------------

    def _on_elected(self, partition: int, epoch: int) -> None:
        """Load ``partition`` (its groups answer 14 meanwhile), fenced on disk by ``epoch`` (§9.6)."""
        if self._stopping or self.epochs.get(partition, -1) > epoch:
            return  # an election older than one already seen (§9.6 step 1)
        self.epochs[partition] = epoch
        self.runtime.begin_loading(partition)
        self._load(partition, epoch)

    def _load(self, partition: int, epoch: int, attempt: int = 1) -> None:
        if self._stopping or self.epochs.get(partition) != epoch or partition not in self.coordinator.loading:
            return  # resigned, or elected again, since this load was scheduled
        started = time.monotonic()
        server = self.config.server
        try:
            groups = self.runtime.load(partition, epoch)
        except FencedLeaderError as exc:
            # Another epoch has claimed the directory: a newer leader (ZooKeeper will say so), or one ZooKeeper
            # forgot after losing its data; either way this epoch can never write here.
            log.warning("not loading partition=%d epoch=%d, resigning it: %s", partition, epoch, exc)
            self._give_up(partition, epoch)
            return
        except Exception as exc:  # whatever stops a load must not leave the partition stuck
            # Serving without the log's groups would lose acknowledged state: answer 14 (retriable) and try
            # again, so an operator can fix the disk; then let another node try (its disk, or a repaired one).
            if attempt < server.load_max_attempts:
                log.error(
                    "cannot load partition=%d epoch=%d attempt=%d of %d, retrying in %.1fs: %s",
                    partition,
                    epoch,
                    attempt,
                    server.load_max_attempts,
                    server.load_retry_backoff_ms / 1000,
                    exc,
                    exc_info=not isinstance(exc, LogError),  # a bug's traceback, not a bad disk's
                )
                gevent.spawn_later(server.load_retry_backoff_ms / 1000, self._load, partition, epoch, attempt + 1)
            else:
                log.error(
                    "cannot load partition=%d epoch=%d after %d attempts, resigning it so another node can try: %s",
                    partition,
                    epoch,
                    attempt,
                    exc,
                    exc_info=not isinstance(exc, LogError),
                )
                self._give_up(partition, epoch)
            return
        finally:
            self._aim_timers()
        elapsed_ms = (time.monotonic() - started) * 1000
        self.metrics.on_partition_loaded(elapsed_ms)
        log.info("loaded partition=%d epoch=%d groups=%d in %.0f ms", partition, epoch, groups, elapsed_ms)

    # -- after a storage error (a full disk) ---------------------------------------------------------------------

    def _on_append_done(self, append: Append, error: ErrorCode | None) -> None:
        self.metrics.on_append(append, error)
        partition = append.partition
        if error is None:
            self._reopens.pop(partition, None)
        elif error == ErrorCode.KAFKA_STORAGE_ERROR and partition not in self._reopening:
            # The log refuses every write after a failed one (no later fsync can vouch for the lost pages) until
            # it is reopened: reload the partition from what the log holds, or it would answer errors for good.
            self._reopening.add(partition)
            delay_s = self.config.server.load_retry_backoff_ms / 1000 if partition in self._reopens else 0
            gevent.spawn_later(delay_s, self._reopen, partition, self.epochs.get(partition))

    def _reopen(self, partition: int, epoch: int | None) -> None:
        self._reopening.discard(partition)
        if self._stopping or epoch is None or self.epochs.get(partition) != epoch:
            return
        if partition not in self.coordinator.owned:
            return  # resigned, or already loading again
        reopens = self._reopens[partition] = self._reopens.get(partition, 0) + 1
        if reopens > self.config.server.load_max_attempts:
            log.error(
                "partition=%d epoch=%d failed to write after %d reloads, resigning it so another node can try",
                partition,
                epoch,
                reopens - 1,
            )
            self._reopens.pop(partition, None)
            self._give_up(partition, epoch)
            return
        log.warning("reloading partition=%d epoch=%d after a storage error, from what its log holds", partition, epoch)
        self._unload(partition)
        self.runtime.begin_loading(partition)
        self._load(partition, epoch)

    def _give_up(self, partition: int, epoch: int) -> None:
        """Resign a partition this node cannot load; until the election resigns it, its groups still answer 14."""
        server = self.config.server
        hold_off_s = server.load_retry_backoff_ms * server.load_max_attempts / 1000
        if self.election is not None:
            self.election.give_up(partition, epoch, hold_off_s)

    def _on_resigned(self, partition: int, epoch: int | None) -> None:
        if epoch is not None and epoch < self.epochs.get(partition, -1):
            return  # a late resignation for an older epoch (§9.7 step 1)
        self._unload(partition)

    def _unload(self, partition: int) -> None:
        groups = self._enter(self.runtime.unload, partition)
        self.migrations.forget_where(lambda group_id: self.coordinator.partition_for(group_id) == partition)
        log.info("unloaded partition=%d groups=%s", partition, groups)

    # -- topic metadata (0.9 design: the coordinator rebalances on partition-count changes) -------------------

    def _on_topics(self, children: list[str]) -> bool:
        self._topic_events.put(("children", children))
        return not self._stopping

    def _run_topic_events(self) -> None:
        watched: set[str] = set()
        unknown: set[str] = set()  # watched, but their first data event has not arrived yet
        while True:
            kind, payload = self._topic_events.get()
            if kind == "children":
                for topic in set(payload) - watched:
                    watched.add(topic)
                    unknown.add(topic)
                    self.zk.DataWatch(layout.topic_path(topic), self._topic_watcher(topic))
                for topic in watched - set(payload):
                    watched.discard(topic)
                    unknown.discard(topic)
                    self._topic_counts.pop(topic, None)
            else:
                topic, data = payload
                unknown.discard(topic)
                if data is None:
                    self._topic_counts.pop(topic, None)
                else:
                    try:
                        self._topic_counts[topic] = len(layout.decode_topic_partitions(topic, data))
                    except layout.ZnodeDecodeError as exc:
                        log.warning("ignoring topic with foreign data topic=%s: %s", topic, exc)
            if unknown:
                continue  # a half-read topic list would look like topics vanishing and coming back
            rebalanced = self._enter(self.runtime.enter, self._set_topics)
            if rebalanced:
                log.info("partition counts changed; rebalancing groups=%s", ",".join(rebalanced))

    def _set_topics(self, now_ms: int) -> list[str]:
        return self.coordinator.set_topics(dict(self._topic_counts), now_ms)

    def _topic_watcher(self, topic: str):
        def on_change(data, stat) -> bool:
            self._topic_events.put(("data", (topic, data)))
            return topic in self._topic_counts or data is not None

        return on_change
