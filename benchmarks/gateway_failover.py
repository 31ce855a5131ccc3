"""How long a librdkafka consumer goes without records when the node whose gateway fronts its broker is SIGKILLed,
with the nodes' listener probes (``zkcoord.gateway.probe.interval.ms``, default 1000) and without them (0).

One embedded ZooKeeper and one Kafka 3.9 broker for the run. Each trial starts two ``zkcoord coordinator start
--kafka-port`` nodes on a fresh log directory (6 s ZooKeeper session), a producer of about 200 records/s straight
to the broker and a confluent-kafka consumer bootstrapping at both nodes; once the consumer has read 300 records,
node 1 (the node fronting broker 0) is SIGKILLed, and the longest gap between two records the consumer receives
in the next 20 s is the trial's pause. Without the probes the broker moves to node 2's gateway only when node 1's
session expires. Trials alternate between the two settings; the medians and their ratio are printed. About
3 minutes on 2 cores; progress on stderr.

    python benchmarks/gateway_failover.py [--trials 3]
"""

from __future__ import annotations

import argparse
import signal
import statistics
import sys
import threading
import time
import uuid

from confluent_kafka import Consumer, Producer
from coordinator import bench_directory

from zkcoord.testing.kafka_broker import TestKafka, kafka_cluster
from zkcoord.testing.node_process import kafka_node
from zkcoord.testing.zookeeper import zookeeper_for_tests

SESSION_MS = 6000
NODE_OVERRIDES = {
    "offsets.topic.num.partitions": 4,
    "group.initial.rebalance.delay.ms": 0,
    "coordinator.claim.grace.ms": 200,
    "zookeeper.session.timeout.ms": SESSION_MS,
}
SETTINGS = {"probes": 1000, "no probes": 0}  # zkcoord.gateway.probe.interval.ms
BEFORE_KILL = 300  # records read before the kill
AFTER_KILL_S = 20.0
WAIT_S = 60.0


def progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _produce(kafka: TestKafka, topic: str, stop: threading.Event) -> None:
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 1})
    sequence = 0
    while not stop.is_set():
        producer.produce(topic, b"%d" % sequence)
        producer.poll(0)
        sequence += 1
        time.sleep(0.005)
    producer.flush(10)


def longest_pause(kafka: TestKafka, directory, probe_interval_ms: int) -> float:
    """One trial: the longest gap in seconds between two records received after the kill."""
    overrides = {**NODE_OVERRIDES, "zkcoord.gateway.probe.interval.ms": probe_interval_ms}
    directory.mkdir(parents=True)
    nodes = [kafka_node(node_id, kafka.zk_connect, directory / "log", overrides, directory) for node_id in (1, 2)]
    stop = threading.Event()
    consumer = None
    try:
        for node in nodes:
            node.wait_serving()
        topic = f"failover-{uuid.uuid4().hex[:8]}"
        kafka.create_topic(topic, 4)
        threading.Thread(target=_produce, args=(kafka, topic, stop), daemon=True).start()
        consumer = Consumer(
            {
                "bootstrap.servers": ",".join(node.kafka_bootstrap for node in nodes),
                "group.id": topic,
                "auto.offset.reset": "earliest",
                "session.timeout.ms": SESSION_MS,
                "heartbeat.interval.ms": 500,
            }
        )
        consumer.subscribe([topic])
        arrivals: list[float] = []
        killed_at, deadline = None, time.monotonic() + WAIT_S
        while killed_at is None or time.monotonic() < killed_at + AFTER_KILL_S:
            if killed_at is None and time.monotonic() > deadline:
                raise TimeoutError(f"fewer than {BEFORE_KILL} records in {WAIT_S} s")
            message = consumer.poll(0.05)
            if message is not None and message.error() is None:
                arrivals.append(time.monotonic())
            if killed_at is None and len(arrivals) >= BEFORE_KILL:
                nodes[0].signal(signal.SIGKILL)  # node 1: the lowest id fronts broker 0
                killed_at = time.monotonic()
        after = [t for t in arrivals if t >= killed_at]
        gaps = [later - earlier for earlier, later in zip([killed_at, *after], after, strict=False)]
        return max(gaps, default=AFTER_KILL_S)
    finally:
        stop.set()
        if consumer is not None:
            consumer.close()
        for node in nodes:
            node.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=3, help="trials of each setting")
    args = parser.parse_args(argv)
    pauses: dict[str, list[float]] = {name: [] for name in SETTINGS}
    with bench_directory("gateway-failover") as directory, zookeeper_for_tests() as zk, kafka_cluster(zk) as kafka:
        for trial in range(args.trials):
            for name, interval_ms in SETTINGS.items():
                pause = longest_pause(kafka, directory / f"{trial}-{interval_ms}", interval_ms)
                pauses[name].append(pause)
                progress(f"   trial {trial + 1}, {name}: longest pause {pause:.2f} s")
    print(f"\nlongest consumption pause after SIGKILL of the gateway node ({SESSION_MS} ms session), seconds:")
    for name, values in pauses.items():
        print(f"   {name:>10}: median {statistics.median(values):.2f}  ({', '.join(f'{v:.2f}' for v in values)})")
    ratio = statistics.median(pauses["probes"]) / statistics.median(pauses["no probes"])
    print(f"   probes ÷ no probes: {ratio:.2f}×")


if __name__ == "__main__":
    main()
