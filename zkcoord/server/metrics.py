"""A node's metrics under Kafka's group-coordinator names, exported for Prometheus.

Kafka's names have dashes (``partition-load-time-max``, ``offset-commit-rate``) or CamelCase JMX names
(``NumGroupsStable``); Prometheus allows neither, so each is exported with underscores and the Kafka
name in its help text. Gauges are read from the node when scraped, so nothing is updated twice.
"""

from __future__ import annotations

import time
from collections import Counter, deque
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from zkcoord.errors import ErrorCode
from zkcoord.model import GroupState
from zkcoord.offsets.records import OffsetCommitKey

if TYPE_CHECKING:
    from zkcoord.group.effects import Append
    from zkcoord.server.node import CoordinatorNode

RATE_WINDOW_SECONDS = 30.0


class NodeMetrics:
    """Counters the node feeds, and a Prometheus registry that reads them and the node's groups."""

    def __init__(self, node: CoordinatorNode):
        self._node = node
        self.requests: dict[str, int] = {}
        self.offset_commits = 0
        self.append_errors = 0
        self.partition_loads = 0
        self.partition_load_time_max_ms = 0.0
        self.partition_load_time_total_ms = 0.0
        self._commit_times: deque[tuple[float, int]] = deque()
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)

    def on_request(self, api: str) -> None:
        self.requests[api] = self.requests.get(api, 0) + 1

    def on_append(self, append: Append, error: ErrorCode | None) -> None:
        if error is not None:
            self.append_errors += 1
            return
        commits = sum(1 for key, value in append.records if type(key) is OffsetCommitKey and value is not None)
        if commits:
            self.offset_commits += commits
            now = time.monotonic()
            self._commit_times.append((now, commits))
            while self._commit_times and self._commit_times[0][0] < now - RATE_WINDOW_SECONDS:
                self._commit_times.popleft()

    def on_partition_loaded(self, elapsed_ms: float) -> None:
        self.partition_loads += 1
        self.partition_load_time_total_ms += elapsed_ms
        self.partition_load_time_max_ms = max(self.partition_load_time_max_ms, elapsed_ms)

    def offset_commit_rate(self) -> float:
        """Offsets committed per second over the last :data:`RATE_WINDOW_SECONDS`."""
        now = time.monotonic()
        recent = sum(count for at, count in self._commit_times if at >= now - RATE_WINDOW_SECONDS)
        return recent / RATE_WINDOW_SECONDS

    def snapshot(self) -> dict:
        """The figures ``coordinator status`` and tests read."""
        coordinator = self._node.coordinator
        return {
            "groups": {state.value: 0 for state in GroupState}
            | dict(Counter(group.state for group in coordinator.groups.values())),
            "offsets": sum(len(group.offsets) for group in coordinator.groups.values()),
            "owned_partitions": sorted(coordinator.owned),
            "loading_partitions": sorted(coordinator.loading),
            "offset_commits": self.offset_commits,
            "partition_load_time_max_ms": self.partition_load_time_max_ms,
            "migration_mirror": self._node.mirror.stats(),
            "mixed_groups": self._node.bridge.stats(),
        }

    def collect(self):
        snapshot = self.snapshot()
        groups = GaugeMetricFamily("num_groups", "Groups per state (Kafka NumGroups<State>)", labels=["state"])
        for state, count in snapshot["groups"].items():
            groups.add_metric([state], count)
        yield groups
        yield GaugeMetricFamily("num_offsets", "Committed offsets cached (Kafka NumOffsets)", value=snapshot["offsets"])
        yield GaugeMetricFamily(
            "partition_load_time_max",
            "Longest offsets-partition load, ms (Kafka partition-load-time-max)",
            value=self.partition_load_time_max_ms,
        )
        average = self.partition_load_time_total_ms / self.partition_loads if self.partition_loads else 0.0
        yield GaugeMetricFamily(
            "partition_load_time_avg",
            "Average offsets-partition load, ms (Kafka partition-load-time-avg)",
            value=average,
        )
        yield GaugeMetricFamily(
            "offset_commit_rate",
            "Offsets committed per second (Kafka offset-commit-rate)",
            value=self.offset_commit_rate(),
        )
        yield CounterMetricFamily(
            "offset_commit", "Offsets committed (Kafka offset-commit-count)", value=self.offset_commits
        )
        yield CounterMetricFamily("append_errors", "Failed offsets-log appends", value=self.append_errors)
        requests = CounterMetricFamily("requests", "Requests handled per API", labels=["api"])
        for api, count in sorted(self.requests.items()):
            requests.add_metric([api], count)
        yield requests
        yield GaugeMetricFamily(
            "owned_partitions", "Offsets partitions this node coordinates", value=len(snapshot["owned_partitions"])
        )
        yield GaugeMetricFamily("connections_open", "Open client connections", value=self._node.server.connections_open)
        yield CounterMetricFamily(
            "connections_rejected",
            "Connections refused at accept (max.connections, max.connections.per.ip)",
            value=self._node.server.connections_rejected_total,
        )
        yield CounterMetricFamily(
            "connections_expired",
            "Connections closed idle (connections.max.idle.ms) or mid-request (request.read.timeout.ms)",
            value=self._node.server.connections_expired_total,
        )
        mixed = snapshot["mixed_groups"]
        yield GaugeMetricFamily("mixed_groups", "Mixed groups this node bridges into 0.8.2's", value=mixed["groups"])
        for name, help_text in (
            ("join_refusals", "JoinGroups a mixed group refused (cooperative only, a subscription 0.8.2 cannot take)"),
            ("claim_conflicts", "Owner znode claims of a mixed group's handover that found another owner"),
            ("departed_released", "Coordinator members released from a mixed group after the grace"),
            ("legacy_retriggers", "Legacy rebalances a mixed group re-triggered after partitions stayed unowned"),
        ):
            yield CounterMetricFamily(f"mixed_group_{name}", help_text, value=mixed[f"{name}_total"])
        mirror = snapshot["migration_mirror"]
        yield GaugeMetricFamily(
            "migration_mirror_lag_partitions",
            "Partitions whose accepted commit is not mirrored into ZooKeeper yet",
            value=mirror["lag_partitions"],
        )
        yield GaugeMetricFamily(
            "migration_mirror_lag_ms",
            "Age of the oldest accepted commit not mirrored into ZooKeeper yet, ms",
            value=mirror["lag_ms"],
        )
        yield CounterMetricFamily(
            "migration_mirror_writes",
            "ZooKeeper offsets the mirror raised to an accepted commit",
            value=mirror["writes_total"],
        )
        yield CounterMetricFamily(
            "migration_mirror_failures",
            "Partition writes of the mirror that failed (each is retried)",
            value=mirror["failures_total"],
        )
        kafka = self._node.kafka
        if kafka is not None:
            yield GaugeMetricFamily(
                "kafka_connections_open", "Open connections on the Kafka listener", value=kafka.connections_open
            )
            yield CounterMetricFamily(
                "kafka_requests",
                "Requests read on the Kafka listener (served and forwarded)",
                value=kafka.requests_total,
            )
            yield CounterMetricFamily(
                "kafka_forwarded_requests", "Requests forwarded to the data brokers", value=kafka.forwarded_total
            )
            yield CounterMetricFamily(
                "kafka_frame_errors",
                "Kafka frames that could not be read (their connection closed)",
                value=kafka.frame_errors_total,
            )
