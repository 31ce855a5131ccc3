"""The consumer's coordinator metrics under Kafka's names (consumer-coordinator-metrics), and a Prometheus view.

Kafka measures rates and averages over a sampled window (two 30 s samples); here a sensor keeps its samples of
the last :data:`WINDOW_MS` and reports rate, average and maximum over them, plus a lifetime total.
Join, sync and rebalance times are derived from the member's state transitions; commit latency from the worker.
"""

import collections

from prometheus_client.core import GaugeMetricFamily

from zkcoord.membership import MemberState, Transition

WINDOW_MS = 60_000
S = MemberState
_REBALANCE_STARTS = frozenset({S.PREPARE_REVOCATION, S.PREPARING_REBALANCE})


class Sensor:
    """Timed samples: ``rate`` per second, ``avg`` and ``max`` over the window, ``total`` for ever."""

    def __init__(self, window_ms: int = WINDOW_MS):
        self.window_ms = window_ms
        self._samples: collections.deque = collections.deque()
        self.total = 0

    def record(self, now_ms: int, value: float = 0.0) -> None:
        """Only the worker thread records (and so prunes); readers in other threads work on a copy."""
        self._samples.append((now_ms, value))
        self.total += 1
        while self._samples[0][0] < now_ms - self.window_ms:
            self._samples.popleft()

    def _recent(self, now_ms: int) -> list[float]:
        return [value for at, value in list(self._samples) if at >= now_ms - self.window_ms]

    def rate(self, now_ms: int) -> float:
        return len(self._recent(now_ms)) / (self.window_ms / 1000)

    def avg(self, now_ms: int) -> float:
        recent = self._recent(now_ms)
        return sum(recent) / len(recent) if recent else 0.0

    def max(self, now_ms: int) -> float:
        return max(self._recent(now_ms), default=0.0)


class ClientMetrics:
    """Fed in the worker thread (:meth:`on_event`, :meth:`on_commit`); :meth:`snapshot` (any thread) is Kafka-named."""

    def __init__(self):
        self.join = Sensor()
        self.sync = Sensor()
        self.rebalance = Sensor()
        self.commit = Sensor()
        self.failed_rebalances = 0
        self._joining_since: int | None = None
        self._syncing_since: int | None = None
        self._rebalance_since: int | None = None
        self.last_rebalance_ms: int | None = None

    def on_event(self, event) -> None:
        if not isinstance(event, Transition):
            return
        now, state = event.now_ms, event.state
        if state in _REBALANCE_STARTS and self._rebalance_since is None:
            self._rebalance_since = now
        if state == S.PREPARING_REBALANCE:
            self._joining_since = now
        elif state == S.COMPLETING_REBALANCE and self._joining_since is not None:
            self.join.record(now, now - self._joining_since)
            self._syncing_since, self._joining_since = now, None
        elif state == S.ASSIGNING_PARTITIONS and self._syncing_since is not None:
            self.sync.record(now, now - self._syncing_since)
            self._syncing_since = None
            if self._rebalance_since is not None:
                self.rebalance.record(now, now - self._rebalance_since)
            self._rebalance_since = None
            self.last_rebalance_ms = now
        elif state == S.UNJOINED and event.previous in (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE):
            self.failed_rebalances += 1

    def on_commit(self, now_ms: int, latency_ms: float) -> None:
        self.commit.record(now_ms, latency_ms)

    def snapshot(self, now_ms: int, last_heartbeat_ms: int | None, assigned_partitions: int) -> dict[str, float]:
        def seconds_ago(at_ms: int | None) -> float:
            return -1.0 if at_ms is None else (now_ms - at_ms) / 1000

        return {
            "join-rate": self.join.rate(now_ms),
            "join-time-avg": self.join.avg(now_ms),
            "join-time-max": self.join.max(now_ms),
            "join-total": self.join.total,
            "sync-rate": self.sync.rate(now_ms),
            "sync-time-avg": self.sync.avg(now_ms),
            "sync-time-max": self.sync.max(now_ms),
            "sync-total": self.sync.total,
            "rebalance-latency-avg": self.rebalance.avg(now_ms),
            "rebalance-latency-max": self.rebalance.max(now_ms),
            "rebalance-total": self.rebalance.total,
            "rebalance-rate-per-hour": self.rebalance.rate(now_ms) * 3600,
            "failed-rebalance-total": self.failed_rebalances,
            "last-rebalance-seconds-ago": seconds_ago(self.last_rebalance_ms),
            "last-heartbeat-seconds-ago": seconds_ago(last_heartbeat_ms),
            "commit-rate": self.commit.rate(now_ms),
            "commit-latency-avg": self.commit.avg(now_ms),
            "commit-latency-max": self.commit.max(now_ms),
            "commit-total": self.commit.total,
            "assigned-partitions": assigned_partitions,
        }


class PrometheusCollector:
    """Exposes a consumer's metrics() as ``kafka_consumer_coordinator_<name>`` gauges labelled by client and group."""

    def __init__(self, read_metrics, client_id: str, group_id: str):
        self._read = read_metrics
        self._labels = [client_id, group_id or ""]

    def collect(self):
        for name, value in self._read().items():
            family = GaugeMetricFamily(
                "kafka_consumer_coordinator_" + name.replace("-", "_"),
                f"Kafka consumer-coordinator-metrics {name}",
                labels=["client_id", "group_id"],
            )
            family.add_metric(self._labels, float(value))
            yield family
