"""One coordinator node: the group state machine behind the wire server, on the shared offsets log.

Owns the runtime around :class:`~zkcoord.group.coordinator.GroupCoordinator`: real-clock timers, the
appends it asks for (each on a greenlet, so the log's group commit batches them), loading and unloading
offsets partitions as ZooKeeper elects this node or moves a partition away (with the epoch fence on
disk), the topic-metadata watch, FindCoordinator/Metadata/ApiVersions, metrics, and where offset migration
(:mod:`zkcoord.server.migration`) meets the requests: JoinGroup's single-protocol check, OffsetFetch's MAX
answer, the mirror of accepted OffsetCommits. Every entry into the state machine runs to completion without
yielding, so one gevent hub serialises them: the "one serial queue per partition" of the design, with no
locks. ZooKeeper is therefore read before a request enters the state machine or after it answered.

IO: gevent, kazoo, files. Expects gevent's monkey-patching in the process entry point only.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import gevent
from gevent.event import Event
from gevent.queue import Queue
from kazoo.client import KazooClient

from zkcoord.clock import SystemClock
from zkcoord.errors import ErrorCode, FencedLeaderError, LogError
from zkcoord.group.coordinator import AppendRequest, GroupCoordinator, join_response
from zkcoord.log.fence import EpochFence
from zkcoord.log.loader import load_partition
from zkcoord.log.partition import PartitionLog
from zkcoord.offsets.records import encode_record
from zkcoord.server.config import NodeConfig
from zkcoord.server.connection import WireServer
from zkcoord.server.metrics import NodeMetrics
from zkcoord.server.migration import GroupMigrations, ZooKeeperUnavailableError, accepted_offsets
from zkcoord.wire.requests import metadata_response, supported_api_versions
from zkcoord.zk import layout
from zkcoord.zk.coordination import NodeRegistry, PartitionElection, ensure_partition_count
from zkcoord.zk.session import make_kazoo_client

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
LOAD_RETRY_S = 5.0


def partition_directory(log_dir: str | Path, partition: int) -> Path:
    """Where offsets partition ``partition`` lives in the shared log directory (Kafka's naming)."""
    return Path(log_dir) / f"{OFFSETS_TOPIC}-{partition}"


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
    ):
        self.node_id = node_id
        self.host = host
        self.advertised_host = advertised_host or host
        self.config = config
        self.zookeeper = zookeeper
        self.log_dir = Path(log_dir)
        self.clock = clock or SystemClock()
        self.coordinator = GroupCoordinator(config.coordinator, self.clock.now_ms())
        self.logs: dict[int, PartitionLog] = {}
        self.epochs: dict[int, int] = {}
        self.migrations = GroupMigrations(config.server.root, self.clock)
        self.metrics = NodeMetrics(self)
        self.server = WireServer(
            host,
            port,
            self.dispatch,
            max_request_bytes=config.server.max_request_bytes,
            max_connections=config.server.max_connections,
        )
        self.zk: KazooClient | None = None
        self.registry: NodeRegistry | None = None
        self.election: PartitionElection | None = None
        self._timer_wakeup = Event()
        self._timer_target: int | None = None  # the deadline the timer greenlet sleeps towards
        self._topic_events: Queue = Queue()
        self._topic_counts: dict[str, int] = {}
        self._greenlets: list[gevent.Greenlet] = []
        self._stopping = False

    # -- lifecycle ---------------------------------------------------------------------------------------

    def start(self) -> None:
        server = self.config.server
        self.zk = make_kazoo_client(self.zookeeper, server.zookeeper_session_timeout_ms)
        self.zk.start(timeout=server.zookeeper_connection_timeout_ms / 1000)
        self.migrations.start(self.zk)
        ensure_partition_count(self.zk, server.root, self.config.coordinator.offsets_topic_num_partitions)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.server.start()
        port = self.server.address[1]
        self.registry = NodeRegistry(self.zk, server.root, self.node_id, self.advertised_host, port)
        self.registry.register()
        self._greenlets.append(gevent.spawn(self._run_timers))
        self._greenlets.append(gevent.spawn(self._run_topic_events))
        self.zk.ensure_path(layout.BROKER_TOPICS_PATH)
        self.zk.ChildrenWatch(layout.BROKER_TOPICS_PATH, self._on_topics)
        self.election = PartitionElection(
            self.zk,
            server.root,
            self.node_id,
            self.config.coordinator.offsets_topic_num_partitions,
            on_elected=self._on_elected,
            on_resigned=self._on_resigned,
            claim_grace_ms=server.claim_grace_ms,
        )
        self.election.start()
        log.info("coordinator node started node=%d address=%s:%d", self.node_id, self.host, port)

    @property
    def port(self) -> int:
        return self.server.address[1]

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
        for partition in list(self.logs):
            self._unload(partition)
        self.coordinator.shutdown()
        self.server.stop(self.config.server.shutdown_timeout_ms / 1000)
        # Commits answered until now are still owed to ZooKeeper: the mirror gets the same bound to catch up.
        self.migrations.stop(self.config.server.shutdown_timeout_ms / 1000)
        gevent.killall(self._greenlets, timeout=1)
        if self.zk is not None:
            self.zk.stop()
            self.zk.close()
        log.info("coordinator node stopped node=%d", self.node_id)

    # -- requests ----------------------------------------------------------------------------------------

    def dispatch(self, request: dict, respond) -> None:
        """Answer one well-formed request (the wire server calls this in each connection's order)."""
        api = request["api"]
        self.metrics.on_request(api)
        if self.coordinator.handles(api):
            if api == "JoinGroup" and self._join_refused(request, respond):
                return
            if api == "OffsetCommit" and not request["if_greater"]:
                # A backfill's conditional commits copy ZooKeeper's own offsets: mirroring them back never writes.
                respond = self._mirroring(request, respond)
            elif api == "OffsetFetch":
                respond = self._with_zookeeper_offsets(request, respond)
            host = request.get("client_host") or ""
            self.coordinator.handle(request, respond, self.clock.now_ms(), f"/{host}" if host else "")
            self._after_entry()
        elif api == "ApiVersions":
            respond({"error_code": 0, "apis": supported_api_versions()})
        elif api == "FindCoordinator":
            respond(self._find_coordinator(request["key"]))
        elif api == "Metadata":
            respond(self._metadata(request["topics"]))
        else:
            respond({"error_code": int(ErrorCode.UNSUPPORTED_VERSION), "error_message": f"unknown api {api!r}"})

    def _serves(self, group_id: str | None) -> bool:
        """Whether the state machine would take ``group_id`` in now (else it answers 24, 15, 14 or 16 itself)."""
        if not group_id or not self.coordinator.active:
            return False
        partition = self.coordinator.partition_for(group_id)
        return partition in self.coordinator.owned and partition not in self.coordinator.loading

    def _join_refused(self, request: dict, respond) -> bool:
        """Single-protocol membership: answer 23 (or 15 if ZooKeeper cannot tell) instead of letting a member
        join a group that ZooKeeper consumers run or whose offsets are not in the log yet."""
        group_id, member_id = request["group_id"], request["member_id"]
        if not self._serves(group_id):
            return False
        try:
            refusal = self.migrations.join_refusal(group_id)
        except ZooKeeperUnavailableError as error:
            respond(join_response(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id, error_message=str(error)))
            return True
        if refusal is None:
            return False
        log.info("JoinGroup refused group=%s member=%s: %s", group_id, member_id, refusal)
        respond(join_response(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id, error_message=refusal))
        return True

    def _mirroring(self, request: dict, respond):
        """``respond``, then hand the commit's accepted partitions to the mirror (which never blocks)."""

        def answered(response: dict) -> None:
            respond(response)
            self.migrations.on_commit_answered(request["group_id"], accepted_offsets(request, response))

        return answered

    def _with_zookeeper_offsets(self, request: dict, respond):
        """``respond`` with ZooKeeper's larger offsets where the group's phase reads MAX (unless the request asks
        for the log alone); the coordinator's own errors pass through. ZooKeeper is read on a greenlet of its
        own, after the state machine answered."""
        group_id = request["group_id"]

        def answered(response: dict) -> None:
            if (
                response["error_code"] != 0
                or request["log_only"]
                or not self.migrations.fetch_may_read_zookeeper(group_id)
            ):
                respond(response)
            else:
                gevent.spawn(self._answer_fetch, group_id, request["topics"], response, respond)

        return answered

    def _answer_fetch(self, group_id: str, topics: list[dict] | None, response: dict, respond) -> None:
        try:
            response = self.migrations.fetch_response(group_id, topics, response)
        except ZooKeeperUnavailableError as error:
            response = {
                "error_code": int(ErrorCode.COORDINATOR_NOT_AVAILABLE),
                "error_message": str(error),
                "topics": [],
            }
        except Exception:
            # The connection waits for this answer: a bug must still answer it.
            log.exception("OffsetFetch with ZooKeeper offsets failed group=%s", group_id)
            response = {"error_code": int(ErrorCode.UNKNOWN_SERVER_ERROR), "topics": []}
        respond(response)

    def _find_coordinator(self, key: str | None) -> dict:
        if key is None:
            return {"error_code": int(ErrorCode.INVALID_GROUP_ID), "node_id": -1, "host": "", "port": -1}
        partition = self.coordinator.partition_for(key)
        leader = self.election.leader(partition) if self.election is not None else None
        nodes = self.registry.nodes() if self.registry is not None else {}
        if leader is None or leader[0] not in nodes:
            return {"error_code": int(ErrorCode.COORDINATOR_NOT_AVAILABLE), "node_id": -1, "host": "", "port": -1}
        host, port = nodes[leader[0]]
        return {"error_code": 0, "node_id": leader[0], "host": host, "port": port}

    def _metadata(self, topics: list[str] | None) -> dict:
        nodes = self.registry.nodes() if self.registry is not None else {}
        listed = [{"node_id": node, "host": host, "port": port} for node, (host, port) in sorted(nodes.items())]
        return metadata_response(listed, self.coordinator.topics or {}, topics)

    def _after_entry(self) -> None:
        """After any entry into the state machine: start the appends it asked for, re-aim the timer greenlet."""
        for append in self.coordinator.take_appends():
            gevent.spawn(self._append, append)
        deadline = self.coordinator.timers.next_deadline()
        # Most entries only move deadlines later (a heartbeat); wake the timer greenlet only for an earlier one.
        if deadline is not None and (self._timer_target is None or deadline < self._timer_target):
            self._timer_wakeup.set()

    def _append(self, append: AppendRequest) -> None:
        partition_log = self.logs.get(append.partition)
        error, base_offset = None, -1
        if partition_log is None or partition_log.closed:
            error = "NOT_LEADER_OR_FOLLOWER"
        else:
            try:
                records = [encode_record(key, value) for key, value in append.records]
                base_offset = partition_log.append(records, self.clock.now_ms()).base_offset
            except LogError as exc:
                error = exc.kafka_error
                log.warning("append failed partition=%d error=%s: %s", append.partition, error, exc)
        self._enter(append.on_complete, error, base_offset, self.clock.now_ms())
        self.metrics.on_append(append, error)
        self._after_entry()

    @staticmethod
    def _enter(action, *args) -> None:
        """Run a timer or append callback; a bug in one must not stop the greenlet that runs them all."""
        try:
            action(*args)
        except Exception:
            log.exception("coordinator callback failed: %r", action)

    # -- timers --------------------------------------------------------------------------------------------

    def _run_timers(self) -> None:
        timers = self.coordinator.timers
        while True:
            deadline = self._timer_target = timers.next_deadline()
            # Kafka fires a timer once the clock is past its deadline; +1 ms matches "now > deadline".
            wait = None if deadline is None else max(0.0, (deadline + 1 - self.clock.now_ms()) / 1000)
            self._timer_wakeup.clear()
            if wait is None or wait > 0:
                self._timer_wakeup.wait(timeout=wait)
                continue
            now = self.clock.now_ms()
            while (action := timers.pop_due(now)) is not None:
                self._enter(action, now)
                self._after_entry()
            gevent.sleep(0)

    # -- partitions ------------------------------------------------------------------------------------------

    def _on_elected(self, partition: int, epoch: int) -> None:
        """Load ``partition`` (its groups answer 14 meanwhile), fenced on disk by ``epoch`` (§9.6)."""
        if self._stopping or self.epochs.get(partition, -1) > epoch:
            return  # an election older than one already seen (§9.6 step 1)
        self.epochs[partition] = epoch
        self.coordinator.begin_loading(partition)
        self._load(partition, epoch)

    def _load(self, partition: int, epoch: int) -> None:
        if self._stopping or self.epochs.get(partition) != epoch or partition not in self.coordinator.loading:
            return  # resigned, or elected again, since this load was scheduled
        started = time.monotonic()
        try:
            directory = partition_directory(self.log_dir, partition)
            fence = EpochFence(directory, epoch)
            partition_log = PartitionLog.open(directory, self.config.log, self.clock, fence=fence)
            result = load_partition(partition_log)
        except FencedLeaderError as exc:
            # A newer leader already claimed the directory; ZooKeeper will tell this node it lost the partition.
            log.warning("not loading partition=%d epoch=%d: %s", partition, epoch, exc)
            self.coordinator.unload_partition(partition)
            return
        except LogError as exc:
            # Serving without the log's groups would lose acknowledged state; keep answering 14 (retriable)
            # and try again, so an operator can fix the disk (or set log.recovery.skip.corrupt.segments).
            log.error("cannot load partition=%d epoch=%d, retrying in %ss: %s", partition, epoch, LOAD_RETRY_S, exc)
            gevent.spawn_later(LOAD_RETRY_S, self._load, partition, epoch)
            return
        self.logs[partition] = partition_log
        groups = self.coordinator.load_partition(partition, result.store, self.clock.now_ms())
        elapsed_ms = (time.monotonic() - started) * 1000
        self.metrics.on_partition_loaded(elapsed_ms)
        log.info(
            "loaded partition=%d epoch=%d groups=%d records=%d in %.0f ms",
            partition,
            epoch,
            groups,
            result.records,
            elapsed_ms,
        )
        self._after_entry()

    def _on_resigned(self, partition: int, epoch: int | None) -> None:
        if epoch is not None and epoch < self.epochs.get(partition, -1):
            return  # a late resignation for an older epoch (§9.7 step 1)
        self._unload(partition)

    def _unload(self, partition: int) -> None:
        groups = self.coordinator.unload_partition(partition)
        self.migrations.forget_where(lambda group_id: self.coordinator.partition_for(group_id) == partition)
        partition_log = self.logs.pop(partition, None)
        if partition_log is not None:
            try:
                partition_log.flush()
            except LogError as exc:
                log.warning("flush on resignation failed partition=%d: %s", partition, exc)
            partition_log.close()
        log.info("unloaded partition=%d groups=%d", partition, groups)
        self._after_entry()

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
            rebalanced = self.coordinator.set_topics(dict(self._topic_counts), self.clock.now_ms())
            if rebalanced:
                log.info("partition counts changed; rebalancing groups=%s", ",".join(rebalanced))
            self._after_entry()

    def _topic_watcher(self, topic: str):
        def on_change(data, stat) -> bool:
            self._topic_events.put(("data", (topic, data)))
            return topic in self._topic_counts or data is not None

        return on_change
