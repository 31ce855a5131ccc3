"""The legacy member's metrics observer: trace events counted, gauges read through its readings, names and labels
as a Prometheus scraper parses them; and the streams' consumed counts it reads."""

import socket
import sys
import threading

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from zkcoord import cli
from zkcoord.assign.legacy import thread_id
from zkcoord.clock import ManualClock
from zkcoord.config import build_config
from zkcoord.legacy.config import LegacyConsumerConfig
from zkcoord.legacy.metrics import LegacyMetrics, MembersMetrics
from zkcoord.legacy.stream import Owned, Streams
from zkcoord.legacy.subscription import registration_for
from zkcoord.model import TopicPartition
from zkcoord.sources import SyntheticSource
from zkcoord.trace import make_event

MEMBER = {"client_id": "billing", "group_id": "billing", "consumer_id": "billing_a"}


class Readings:
    """A member as the metrics read it, set by each test."""

    def __init__(self):
        self.owned: dict[TopicPartition, int] = {}
        self.ends: dict[TopicPartition, int] = {}
        self.streams: dict[str, tuple[int, int]] = {}
        self.session: str | None = None
        self.state = "NEW"

    def positions(self):
        return dict(self.owned)

    def log_ends(self, partitions):
        return {tp: self.ends[tp] for tp in partitions if tp in self.ends}

    def consumed(self):
        return dict(self.streams)

    def session_state(self):
        return self.session

    def member_state(self):
        return self.state


@pytest.fixture
def readings():
    return Readings()


@pytest.fixture
def metrics(readings):
    return LegacyMetrics("billing", "billing", "billing_a", readings)


def event(kind: str, **fields):
    return make_event(kind, 1_000, "billing", "billing_a", **fields)


def scrape(metrics: LegacyMetrics) -> dict[tuple[str, frozenset], float]:
    """Every sample as a scraper parses the text, by name and labels; each carries the member's labels."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(metrics)
    samples = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for sample in family.samples:
            assert {key: sample.labels[key] for key in MEMBER} == MEMBER
            extra = frozenset((k, v) for k, v in sample.labels.items() if k not in MEMBER)
            samples[sample.name, extra] = sample.value
    return samples


def labelled(samples, name: str) -> dict[frozenset, float]:
    return {labels: value for (found, labels), value in samples.items() if found == name}


def test_rebalances_count_completed_failed_and_each_attempt_by_outcome(metrics):
    for attempt, outcome in enumerate(("conflict", "error", "success"), start=1):
        metrics(event("legacy.rebalance_attempt", attempt=attempt, outcome=outcome, duration_ms=5.0))
    metrics(event("legacy.rebalance_completed", reason="ids-changed", attempts=3, duration_ms=700.0))
    metrics(event("legacy.rebalance_attempt", attempt=1, outcome="no-brokers", duration_ms=1.0))
    metrics(event("legacy.rebalance_completed", reason="startup", attempts=1, duration_ms=40.0))
    metrics(event("legacy.rebalance_failed", reason="topic-changed", attempts=4, duration_ms=9_000.0))
    samples = scrape(metrics)
    assert samples["kafka_consumer_coordinator_rebalance_total", frozenset()] == 2
    assert samples["kafka_consumer_coordinator_failed_rebalance_total", frozenset()] == 1
    assert labelled(samples, "zkcoord_legacy_rebalance_attempts_total") == {
        frozenset({("outcome", outcome)}): 1 for outcome in ("conflict", "error", "success", "no-brokers")
    }
    buckets = {
        dict(labels)["le"]: value
        for labels, value in labelled(samples, "zkcoord_legacy_rebalance_duration_seconds_bucket").items()
    }
    assert (buckets["0.05"], buckets["0.5"], buckets["1.0"], buckets["+Inf"]) == (
        1,
        1,
        2,
        2,
    )  # a failed one is not timed
    assert samples["zkcoord_legacy_rebalance_duration_seconds_count", frozenset()] == 2
    assert samples["zkcoord_legacy_rebalance_duration_seconds_sum", frozenset()] == pytest.approx(0.74)


def test_commits_count_per_store_named_as_offsets_storage(metrics):
    offsets = [["t", 0, 10], ["t", 1, 12]]
    metrics(event("legacy.committed", store="log", offsets=offsets))  # a dual commit: the log, then ZooKeeper
    metrics(event("legacy.committed", store="zookeeper", offsets=offsets[:1]))
    metrics(event("legacy.committed", store="zookeeper", offsets=offsets))
    metrics(event("legacy.commit_failed", store="log", error="CommitFailedError: refused"))
    samples = scrape(metrics)
    kafka, zookeeper = frozenset({("store", "kafka")}), frozenset({("store", "zookeeper")})
    assert labelled(samples, "zkcoord_legacy_commits_total") == {kafka: 1, zookeeper: 2}
    assert labelled(samples, "zkcoord_legacy_committed_offsets_total") == {kafka: 2, zookeeper: 3}
    assert labelled(samples, "zkcoord_legacy_commit_failures_total") == {kafka: 1, zookeeper: 0}
    assert samples["kafka_consumer_coordinator_commit_total", frozenset()] == 1  # a new client's commits: to the log


def test_owned_partitions_in_all_and_per_topic_and_the_lag_of_each_with_a_position(metrics, readings):
    readings.owned = {TopicPartition("a", 0): 5, TopicPartition("a", 1): -1, TopicPartition("b", 3): 40}
    readings.ends = {TopicPartition("a", 0): 9, TopicPartition("a", 1): 7, TopicPartition("b", 3): 40}
    readings.streams = {"a": (4, 100), "b": (40, 1_000)}
    samples = scrape(metrics)
    assert samples["kafka_consumer_coordinator_assigned_partitions", frozenset()] == 3  # Kafka's has no topic
    assert labelled(samples, "zkcoord_legacy_owned_partitions") == {
        frozenset({("topic", "a")}): 2,
        frozenset({("topic", "b")}): 1,
    }
    assert labelled(samples, "kafka_consumer_fetch_manager_records_lag") == {
        frozenset({("topic", "a"), ("partition", "0")}): 4,
        frozenset({("topic", "b"), ("partition", "3")}): 0,
    }  # a-1 has no position yet: no lag
    assert labelled(samples, "kafka_consumer_fetch_manager_records_consumed_total") == {
        frozenset({("topic", "a")}): 4,
        frozenset({("topic", "b")}): 40,
    }
    assert labelled(samples, "kafka_consumer_fetch_manager_bytes_consumed_total")[frozenset({("topic", "b")})] == 1_000


def test_a_partition_whose_log_end_the_source_has_not_given_has_no_lag(metrics, readings):
    readings.owned = {TopicPartition("a", 0): 5, TopicPartition("a", 1): 2}
    readings.ends = {TopicPartition("a", 1): 3}
    samples = scrape(metrics)
    assert labelled(samples, "kafka_consumer_fetch_manager_records_lag") == {
        frozenset({("topic", "a"), ("partition", "1")}): 1
    }
    assert labelled(samples, "zkcoord_legacy_owned_partitions") == {frozenset({("topic", "a")}): 2}


def test_session_and_member_state_are_one_hot_and_expirations_count(metrics, readings):
    readings.session, readings.state = "SUSPENDED", "REGISTERED"
    metrics(event("legacy.session_expired"))
    samples = scrape(metrics)
    session = {
        dict(labels)["state"]: value
        for labels, value in labelled(samples, "zkcoord_legacy_zookeeper_session_state").items()
    }
    assert session == {"CONNECTED": 0, "SUSPENDED": 1, "LOST": 0}
    states = {
        dict(labels)["state"]: value for labels, value in labelled(samples, "zkcoord_legacy_member_state").items()
    }
    assert states["REGISTERED"] == 1 and sum(states.values()) == 1 and "NEW_SESSION" in states
    assert samples["zkcoord_legacy_zookeeper_session_expirations_total", frozenset()] == 1
    readings.session = None  # before the first connection: no state is 1
    assert sum(labelled(scrape(metrics), "zkcoord_legacy_zookeeper_session_state").values()) == 0


def test_streams_count_the_records_and_bytes_they_hand_out_per_topic():
    config = build_config(LegacyConsumerConfig, group_id="g", zookeeper_connect="127.0.0.1:2181", consumer_timeout_ms=0)
    source = SyntheticSource(rate_per_partition=0, initial_records=3, clock=ManualClock(0))
    streams = Streams(registration_for({"t": 1}, None, None, 1, 0), config, source, "g_a")
    streams.show({TopicPartition("t", 0): Owned(thread_id("g_a", 0), 1, None)})
    stream = streams.by_key()["t"][0]
    records = [next(stream), next(stream)]  # offsets 1 and 2: the position was 1
    assert [record.offset for record in records] == [1, 2]
    size = sum(len(record.key) + len(record.value) for record in records)
    assert streams.consumed() == {"t": (2, size)}


def test_legacy_run_on_a_metrics_port_in_use_exits_2_naming_it(capsys):
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        argv = ["legacy", "run", "--zookeeper", "127.0.0.1:1", "--group", "g", "--topics", "t"]
        code = cli.main([*argv, "--source", "synthetic", "--metrics-port", str(port)])
    assert code == 2
    assert f"zkcoord.metrics.port={port}: cannot serve metrics on 127.0.0.1:{port}" in capsys.readouterr().err


def test_a_scrape_reads_the_rebalance_histograms_buckets_and_sum_of_the_same_rebalances(metrics):
    """Rebalances complete on the hub thread while another thread scrapes: each scrape's count and sum agree."""
    completed = event("legacy.rebalance_completed", reason="startup", attempts=1, duration_ms=1_000.0)
    scrapes = 0
    stop = threading.Event()

    def rebalance():
        while not stop.is_set():
            metrics(completed)

    switch_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads take turns every few bytecodes: a scrape lands inside an observation
    thread = threading.Thread(target=rebalance)
    thread.start()
    try:
        for scrapes in range(1, 10_001):
            histogram = next(f for f in metrics.collect() if f.name == "zkcoord_legacy_rebalance_duration_seconds")
            values = {
                sample.name: sample.value for sample in histogram.samples if sample.labels.get("le") in (None, "+Inf")
            }
            assert (
                values["zkcoord_legacy_rebalance_duration_seconds_sum"]
                == values["zkcoord_legacy_rebalance_duration_seconds_count"]
            ), f"scrape {scrapes}: {values}"
    finally:
        stop.set()
        thread.join(10)
        sys.setswitchinterval(switch_interval)
    assert scrapes == 10_000


def members_metrics(*consumer_ids: str) -> list[LegacyMetrics]:
    members = []
    for consumer_id in consumer_ids:
        readings = Readings()
        readings.owned = {TopicPartition("t", len(members)): 0}
        readings.session, readings.state = "CONNECTED", "REGISTERED"
        members.append(LegacyMetrics("billing", "billing", consumer_id, readings))
    return members


def test_members_of_one_process_share_a_registry_each_family_once_with_every_members_samples():
    first, second = members_metrics("billing_a", "billing_b")
    first(event("legacy.rebalance_completed", reason="startup", attempts=1, duration_ms=10.0))
    members = MembersMetrics(first)
    registry = CollectorRegistry()  # describes collectors and refuses duplicated names, as the default REGISTRY
    registry.register(members)
    members.add(second)
    text = generate_latest(registry).decode()
    families = list(text_string_to_metric_families(text))
    assert len({family.name for family in families}) == len(families)
    assert text.count("# TYPE kafka_consumer_coordinator_rebalance_total counter") == 1
    by_name = {family.name: family for family in families}
    rebalances = {s.labels["consumer_id"]: s.value for s in by_name["kafka_consumer_coordinator_rebalance"].samples}
    assert rebalances == {"billing_a": 1, "billing_b": 0}
    histogram = by_name["zkcoord_legacy_rebalance_duration_seconds"].samples
    counts = {s.labels["consumer_id"]: s.value for s in histogram if s.name.endswith("_count")}
    assert counts == {"billing_a": 1, "billing_b": 0}
    members.remove(first)
    assert "billing_a" not in generate_latest(registry).decode()


@pytest.mark.parametrize("auto_describe", [True, False])
def test_a_registry_refuses_a_second_members_collector_rather_than_expose_its_families_twice(auto_describe):
    first, second = members_metrics("billing_a", "billing_b")
    registry = CollectorRegistry(auto_describe=auto_describe)
    registry.register(first)
    with pytest.raises(ValueError, match="Duplicated timeseries"):
        registry.register(second)
