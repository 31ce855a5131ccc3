"""A legacy member's metrics for Prometheus: counters its trace events feed, gauges read from the member when scraped.

:class:`LegacyMetrics` is one of the member's trace sinks: the member's parts only emit events (docs/traces.md), and
this observer counts them. Gauges (owned partitions, lag, consumed records, ZooKeeper state) are read through a
:class:`MemberReadings` at each scrape, so nothing is updated twice.

Names: Kafka's consumer metrics where one exists, mapped as zkcoord's client (and Micrometer's KafkaClientMetrics)
map them, the metric group without ``-metrics`` and every dash an underscore (``consumer-coordinator-metrics``
``rebalance-total`` → ``kafka_consumer_coordinator_rebalance_total``); zkcoord's own under ``zkcoord_legacy_``.
Every family is labelled ``client_id``, ``group_id`` and ``consumer_id`` (docs/legacy.md lists them); a
:class:`MembersMetrics` puts several members' samples in one family each.

Pure: counts plain events and reads through its :class:`MemberReadings`; imports no gevent, kazoo, clock or IO.
"""

import bisect
import itertools
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from zkcoord.legacy.states import MemberState
from zkcoord.model import TopicPartition

LABELS = ("client_id", "group_id", "consumer_id")
# The trace's store names → the ones of ``offsets.storage`` (and of 0.8.2's KafkaCommitsPerSec/ZooKeeperCommitsPerSec).
STORES = {"zookeeper": "zookeeper", "log": "kafka"}
# kazoo's connection states, as the member's lifecycle keeps them.
SESSION_STATES = ("CONNECTED", "SUSPENDED", "LOST")
# Rebalance durations, seconds: a 0.8.2 rebalance takes from tens of ms to minutes of retries with back-off.
REBALANCE_BUCKETS_S = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)


class MemberReadings(Protocol):
    """What a scrape reads of the member; called from the scraping thread."""

    def positions(self) -> dict[TopicPartition, int]:
        """Consumed position of every partition the member owns now (none while disconnected); -1: none yet."""

    def log_ends(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The log-end offsets the member's record source gave last (none it has not given); never waits for it."""

    def consumed(self) -> dict[str, tuple[int, int]]:
        """``{topic: (records, key+value bytes)}`` handed out by the member's streams so far."""

    def session_state(self) -> str | None:
        """kazoo's last connection state (``CONNECTED``, ``SUSPENDED``, ``LOST``); None before the first."""

    def member_state(self) -> str:
        """The lifecycle state's name (``REGISTERED``, ``NEW_SESSION``, ...)."""


class Histogram:
    """Cumulative bucket counts and a sum, as a Prometheus histogram exposes them; one thread observes, any reads."""

    def __init__(self, bounds: tuple[float, ...]):
        self.bounds = bounds
        # Per-bucket counts (the last one +Inf) and the sum, replaced whole: a reader never sees one without the other.
        self._state: tuple[tuple[int, ...], float] = ((0,) * (len(bounds) + 1), 0.0)

    def observe(self, value: float) -> None:
        counts, total = self._state
        index = bisect.bisect_left(self.bounds, value)
        self._state = (counts[:index] + (counts[index] + 1,) + counts[index + 1 :], total + value)

    def snapshot(self) -> tuple[list[tuple[str, int]], float]:
        """The cumulative buckets and the sum of the same observations."""
        counts, total = self._state
        return list(zip((*map(str, self.bounds), "+Inf"), itertools.accumulate(counts), strict=True)), total


class LegacyMetrics:
    """One member's metrics: call it with each trace event (on the member's hub thread); a Prometheus collector.

    Counters are plain ints only the hub thread writes; a scrape in another thread reads them whole.
    """

    def __init__(self, client_id: str, group_id: str, consumer_id: str, readings: MemberReadings):
        self._labels = [client_id, group_id, consumer_id]
        self._readings = readings
        self.rebalances = 0
        self.failed_rebalances = 0
        self.rebalance_seconds = Histogram(REBALANCE_BUCKETS_S)
        self.attempts: dict[str, int] = {}  # by outcome
        self.commits: dict[str, int] = dict.fromkeys(STORES.values(), 0)  # by store
        self.committed_offsets: dict[str, int] = dict.fromkeys(STORES.values(), 0)
        self.commit_failures: dict[str, int] = dict.fromkeys(STORES.values(), 0)
        self.session_expirations = 0

    def __call__(self, event: Mapping[str, Any]) -> None:
        kind = event["type"]
        if kind == "legacy.rebalance_attempt":
            self.attempts[event["outcome"]] = self.attempts.get(event["outcome"], 0) + 1
        elif kind == "legacy.rebalance_completed":
            self.rebalances += 1
            self.rebalance_seconds.observe(event["duration_ms"] / 1000.0)
        elif kind == "legacy.rebalance_failed":
            self.failed_rebalances += 1
        elif kind == "legacy.committed":
            store = STORES[event["store"]]
            self.commits[store] += 1
            self.committed_offsets[store] += len(event["offsets"])
        elif kind == "legacy.commit_failed":
            self.commit_failures[STORES[event["store"]]] += 1
        elif kind == "legacy.session_expired":
            self.session_expirations += 1

    # ---- the collector ----------------------------------------------------------------------------------

    def describe(self):
        """The member's families, so a registry refuses a second member's (register a :class:`MembersMetrics`)."""
        return list(self.collect())

    def collect(self):
        yield from self._rebalance_families()
        yield from self._commit_families()
        yield from self._ownership_families()
        yield from self._session_families()

    def _family(self, kind, name: str, documentation: str, labels: Iterable[str] = (), values=None):
        """A family labelled as every family of the member, with ``values`` ``{label values tuple: value}``."""
        family = kind(name, documentation, labels=[*LABELS, *labels])
        for extra, value in (values or {}).items():
            family.add_metric([*self._labels, *extra], value)
        return family

    def _rebalance_families(self):
        yield self._family(
            CounterMetricFamily,
            "kafka_consumer_coordinator_rebalance",
            "Rebalances completed (Kafka consumer-coordinator-metrics rebalance-total)",
            values={(): self.rebalances},
        )
        yield self._family(
            CounterMetricFamily,
            "kafka_consumer_coordinator_failed_rebalance",
            "Rebalances that failed after rebalance.max.retries attempts (Kafka failed-rebalance-total)",
            values={(): self.failed_rebalances},
        )
        yield self._family(
            CounterMetricFamily,
            "zkcoord_legacy_rebalance_attempts",
            "Rebalance attempts by outcome: success, conflict, no-brokers, error (0.8.2 retries failed ones)",
            ["outcome"],
            {(outcome,): count for outcome, count in sorted(dict(self.attempts).items())},
        )
        family = HistogramMetricFamily(
            "zkcoord_legacy_rebalance_duration_seconds",
            "Completed rebalances' duration, retries and back-off included (0.8.2 RebalanceRateAndTime; "
            "the sum is Kafka's rebalance-latency-total)",
            labels=list(LABELS),
        )
        family.add_metric(self._labels, *self.rebalance_seconds.snapshot())
        yield family

    def _commit_families(self):
        for attribute, name, documentation in (
            ("commits", "zkcoord_legacy_commits", "Commits that wrote to a store (store=kafka: Kafka's commit-total)"),
            (
                "committed_offsets",
                "zkcoord_legacy_committed_offsets",
                "Partition offsets written to a store (0.8.2 ZooKeeperCommitsPerSec, KafkaCommitsPerSec)",
            ),
            ("commit_failures", "zkcoord_legacy_commit_failures", "Commits a store failed or refused"),
        ):
            counts = dict(getattr(self, attribute))
            by_store = {(store,): counts[store] for store in sorted(counts)}
            yield self._family(CounterMetricFamily, name, documentation, ["store"], by_store)
        yield self._family(
            CounterMetricFamily,
            "kafka_consumer_coordinator_commit",
            "Commits written to the group coordinator's offsets log (Kafka commit-total; offsets.storage=kafka)",
            values={(): self.commits["kafka"]},
        )

    def _ownership_families(self):
        positions = self._readings.positions()
        by_topic: dict[str, int] = {}
        for tp in positions:
            by_topic[tp.topic] = by_topic.get(tp.topic, 0) + 1
        yield self._family(
            GaugeMetricFamily,
            "kafka_consumer_coordinator_assigned_partitions",
            "Partitions the member owns now (Kafka assigned-partitions)",
            values={(): len(positions)},
        )
        yield self._family(
            GaugeMetricFamily,
            "zkcoord_legacy_owned_partitions",
            "Partitions the member owns now, per topic (0.8.2 OwnedPartitionsCount)",
            ["topic"],
            {(topic,): count for topic, count in sorted(by_topic.items())},
        )
        consumed = self._readings.consumed()
        for index, name, documentation in (
            (0, "records_consumed", "Records the streams handed out (Kafka records-consumed-total)"),
            (1, "bytes_consumed", "Key and value bytes the streams handed out (Kafka bytes-consumed-total)"),
        ):
            yield self._family(
                CounterMetricFamily,
                f"kafka_consumer_fetch_manager_{name}",
                documentation,
                ["topic"],
                {(topic,): counts[index] for topic, counts in sorted(consumed.items())},
            )
        yield self._family(
            GaugeMetricFamily,
            "kafka_consumer_fetch_manager_records_lag",
            "Log-end offset minus the consumed position, per owned partition (Kafka records-lag)",
            ["topic", "partition"],
            {(tp.topic, str(tp.partition)): lag for tp, lag in sorted(self._lags(positions).items())},
        )

    def _lags(self, positions: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        """Lag of each owned partition with a position whose log end the source gave."""
        known = [tp for tp, position in positions.items() if position >= 0]
        ends = self._readings.log_ends(known) if known else {}
        return {tp: max(0, ends[tp] - positions[tp]) for tp in known if tp in ends}

    def _session_families(self):
        session = self._readings.session_state()
        yield self._family(
            GaugeMetricFamily,
            "zkcoord_legacy_zookeeper_session_state",
            "1 for the member's ZooKeeper connection state (kazoo's), 0 for the others",
            ["state"],
            {(state,): int(state == session) for state in SESSION_STATES},
        )
        member = self._readings.member_state()
        yield self._family(
            GaugeMetricFamily,
            "zkcoord_legacy_member_state",
            "1 for the member's lifecycle state (REGISTERED while its ids node exists), 0 for the others",
            ["state"],
            {(state.name,): int(state.name == member) for state in MemberState},
        )
        yield self._family(
            CounterMetricFamily,
            "zkcoord_legacy_zookeeper_session_expirations",
            "ZooKeeper sessions that expired under the member (Kafka ZooKeeperExpiresPerSec)",
            values={(): self.session_expirations},
        )


class MembersMetrics:
    """Several members' metrics in one registry: each family once, with every member's samples (``consumer_id`` tells
    them apart). A registry takes one collector per family name, so register this instead of each member's."""

    def __init__(self, *members: LegacyMetrics):
        self._members = members  # replaced whole: a scrape in another thread reads one tuple

    def add(self, member: LegacyMetrics) -> None:
        self._members = (*self._members, member)

    def remove(self, member: LegacyMetrics) -> None:
        self._members = tuple(known for known in self._members if known is not member)

    def collect(self):
        families = {}
        for member in self._members:
            for family in member.collect():
                if family.name in families:
                    families[family.name].samples.extend(family.samples)
                else:
                    families[family.name] = family
        return list(families.values())
