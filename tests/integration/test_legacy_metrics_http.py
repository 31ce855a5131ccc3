"""``zkcoord legacy run --metrics-port``: a member on the real ZooKeeper, scraped over HTTP as Prometheus does while
another member joins and leaves its group and it consumes and commits."""

import json
import signal
import subprocess
import sys
import threading
import urllib.request

from legacy_support import FAST, member, prepare_cluster
from prometheus_client.parser import text_string_to_metric_families

from zkcoord.legacy.consumer import LegacyConsumer
from zkcoord.model import TopicPartition
from zkcoord.sources import SyntheticSource
from zkcoord.testing.zookeeper import expire_session, wait_until
from zkcoord.zk.server import free_port

HOST = "127.0.0.1"
RECORDS_PER_PARTITION = 50


def scrape(port: int) -> list:
    text = urllib.request.urlopen(f"http://{HOST}:{port}/metrics", timeout=5).read().decode()
    return [sample for family in text_string_to_metric_families(text) for sample in family.samples]


def answers(port: int) -> bool:
    try:
        return urllib.request.urlopen(f"http://{HOST}:{port}/healthz", timeout=5).status == 200
    except OSError:  # not listening yet
        return False


def total(samples, name: str, **labels) -> float:
    """The sum of ``name``'s samples whose labels include ``labels``."""
    return sum(s.value for s in samples if s.name == name and labels.items() <= s.labels.items())


def by_label(samples, name: str, label: str) -> dict[str, float]:
    return {s.labels[label]: s.value for s in samples if s.name == name}


def test_a_members_metrics_follow_its_rebalances_commits_and_session(zk_connect, zk, tmp_path):
    prepare_cluster(zk, {"t": 4})
    port = free_port(HOST)
    properties = ("rebalance.backoff.ms=150", "auto.commit.interval.ms=100")
    argv = [sys.executable, "-m", "zkcoord.cli", "legacy", "run", "--zookeeper", zk_connect, "--group", "g"]
    argv += ["--topics", "t", "--consumer-id", "a", "--from-beginning", "--metrics-port", str(port)]
    argv += ["--source", f"synthetic:rate=0,initial={RECORDS_PER_PARTITION}"]
    argv += [arg for value in properties for arg in ("--consumer-property", value)]
    with (tmp_path / "a.out").open("wb") as out, (tmp_path / "a.err").open("wb") as err:
        process = subprocess.Popen(argv, stdout=out, stderr=err)
    other = None
    try:
        wait_until(lambda: answers(port), timeout=30, interval=0.1, what="the metrics endpoint to answer")

        # Alone: every partition, everything consumed and committed to ZooKeeper, no lag left.
        def settled_alone():
            samples = scrape(port)
            lag = by_label(samples, "kafka_consumer_fetch_manager_records_lag", "partition")
            offsets = total(samples, "zkcoord_legacy_committed_offsets_total", store="zookeeper")
            return lag == dict.fromkeys("0123", 0) and offsets >= 4 and samples

        samples = wait_until(
            settled_alone, timeout=30, interval=0.2, what="member a to consume and commit every partition"
        )
        labels = {"client_id": "g", "group_id": "g", "consumer_id": "g_a"}
        assert total(samples, "kafka_consumer_coordinator_assigned_partitions", **labels) == 4
        assert total(samples, "zkcoord_legacy_owned_partitions", topic="t", **labels) == 4
        assert total(samples, "kafka_consumer_coordinator_rebalance_total", **labels) == 1
        assert total(samples, "zkcoord_legacy_rebalance_attempts_total", outcome="success") == 1
        assert total(samples, "zkcoord_legacy_rebalance_duration_seconds_count") == 1
        assert total(samples, "kafka_consumer_fetch_manager_records_consumed_total", topic="t") == 4 * 50
        assert total(samples, "zkcoord_legacy_commits_total", store="zookeeper") >= 1
        assert total(samples, "zkcoord_legacy_commits_total", store="kafka") == 0  # offsets.storage=zookeeper
        assert total(samples, "kafka_consumer_coordinator_commit_total") == 0
        assert total(samples, "zkcoord_legacy_commit_failures_total") == 0
        assert by_label(samples, "zkcoord_legacy_zookeeper_session_state", "state") == {
            "CONNECTED": 1,
            "SUSPENDED": 0,
            "LOST": 0,
        }
        assert total(samples, "zkcoord_legacy_member_state", state="REGISTERED") == 1
        ready = json.loads(urllib.request.urlopen(f"http://{HOST}:{port}/readyz", timeout=5).read())
        assert ready == {"ready": True, "session": "CONNECTED", "state": "REGISTERED"}

        # A second member joins: a rebalances and keeps half; nothing is consumed twice.
        other = member(zk_connect, "b", subscription={"topics": {"t": 1}}, **FAST).start()

        def halved():
            samples = scrape(port)
            owned = total(samples, "kafka_consumer_coordinator_assigned_partitions")
            return owned == 2 and total(samples, "kafka_consumer_coordinator_rebalance_total") >= 2 and samples

        samples = wait_until(halved, timeout=30, interval=0.2, what="member a to give half the partitions to b")
        rebalances = total(samples, "kafka_consumer_coordinator_rebalance_total")
        assert total(samples, "zkcoord_legacy_rebalance_duration_seconds_count") == rebalances
        assert total(samples, "zkcoord_legacy_rebalance_attempts_total", outcome="success") == rebalances
        assert total(samples, "kafka_consumer_coordinator_failed_rebalance_total") == 0
        assert len(by_label(samples, "kafka_consumer_fetch_manager_records_lag", "partition")) == 2
        assert total(samples, "kafka_consumer_fetch_manager_records_consumed_total") == 4 * 50

        # It leaves: a takes every partition back.
        other.close()
        other = None
        wait_until(
            lambda: total(scrape(port), "kafka_consumer_coordinator_assigned_partitions") == 4,
            timeout=30,
            what="member a to take every partition back",
        )
        process.send_signal(signal.SIGINT)
        assert process.wait(30) == 130  # Ctrl-C: interrupted, after the member left
    finally:
        if other is not None:
            other.close()
        if process.poll() is None:
            process.kill()
            process.wait(10)
    assert f"metrics at http://{HOST}:{port}/metrics" in (tmp_path / "a.out").read_text()


def test_a_session_expiry_is_counted_and_the_state_comes_back_connected(zk_connect, zk):
    """The Python API serves the same endpoint with ``zkcoord.metrics.port``."""
    prepare_cluster(zk, {"t": 2})
    port = free_port(HOST)
    with member(zk_connect, "a", **{"zkcoord.metrics.port": port}) as consumer:
        assert total(scrape(port), "kafka_consumer_coordinator_assigned_partitions") == 2
        expire_session(consumer.zk_client)

        def back():
            samples = scrape(port)
            registered = total(samples, "zkcoord_legacy_member_state", state="REGISTERED")
            return registered == 1 and total(samples, "kafka_consumer_coordinator_rebalance_total") >= 2 and samples

        samples = wait_until(back, timeout=30, interval=0.2, what="the member to re-register and rebalance")
        assert total(samples, "zkcoord_legacy_zookeeper_session_expirations_total", consumer_id="g_a") == 1
        assert total(samples, "zkcoord_legacy_zookeeper_session_state", state="CONNECTED") == 1
        assert total(samples, "kafka_consumer_coordinator_assigned_partitions") == 2
        rebalances = total(samples, "kafka_consumer_coordinator_rebalance_total")
        assert total(samples, "zkcoord_legacy_rebalance_attempts_total", outcome="success") == rebalances
    assert not answers(port)  # closing the member stops its endpoint


class SlowLogEnds(SyntheticSource):
    """Ten records a partition; asking where the logs end waits until the test lets it answer, as a KafkaSource's
    ListOffsets waits behind a stream's fetch or a slow broker."""

    def __init__(self):
        super().__init__(rate_per_partition=0, initial_records=10, start_ms=0)
        self.answer = threading.Event()

    def end_offsets(self, partitions):
        self.answer.wait(30)
        return super().end_offsets(partitions)


def test_scrapes_and_probes_answer_while_the_source_is_slow_to_say_where_its_logs_end(zk_connect, zk):
    prepare_cluster(zk, {"t": 2})
    port = free_port(HOST)
    source = SlowLogEnds()
    config = {**FAST, "group.id": "g", "zookeeper.connect": zk_connect, "consumer.id": "a", "metrics_port": port}
    try:
        with LegacyConsumer(config, topics={"t": 1}, source=source) as consumer:
            for partition in (0, 1):
                consumer.seek(TopicPartition("t", partition), 4)  # a position: the lag metric asks for log ends
            samples = scrape(port)
            assert total(samples, "kafka_consumer_coordinator_assigned_partitions") == 2
            assert by_label(samples, "kafka_consumer_fetch_manager_records_lag", "partition") == {}  # not known yet
            assert urllib.request.urlopen(f"http://{HOST}:{port}/healthz", timeout=5).status == 200
            assert json.loads(urllib.request.urlopen(f"http://{HOST}:{port}/readyz", timeout=5).read())["ready"]
            source.answer.set()
            wait_until(
                lambda: (
                    by_label(scrape(port), "kafka_consumer_fetch_manager_records_lag", "partition") == {"0": 6, "1": 6}
                ),
                timeout=10,
                interval=0.1,
                what="the lag from the source's answer",
            )
    finally:
        source.answer.set()  # a question still pending ends with the test
