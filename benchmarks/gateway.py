"""librdkafka through a coordinator node's Kafka gateway against the same client on the broker itself.

In one run, first the hop alone (benchmarks/gateway_hop.py: a client, a node's KafkaListener and an echo broker
in this process): the node's CPU to forward one request with a small answer and one with a 4 MiB answer. Then
an embedded ZooKeeper, one Kafka 3.9 broker and one ``zkcoord coordinator start --kafka-port`` process (its
gateway ports front the broker), and:

1. preload: ``--records`` records of 100 bytes into a topic of 4 partitions, with a confluent-kafka producer
   straight to the broker;
2. consume: a confluent-kafka consumer subscribes in a new group (auto commit off, from the earliest offset) and
   reads until it has seen every record, through the node (bootstrap at its Kafka port: the group lives on the
   node, Metadata and Fetch go through the gateway) and directly (bootstrap at the broker, the group on the
   broker); records/s from the assignment to the last record, the join (subscribe to assignment) apart;
3. produce: ``--records`` records, acks=1, through the gateway and directly; records/s from the first send to the
   end of the flush;
4. round trips: one record at a time, acks=1, each flushed before the next (one Produce request in flight):
   latency percentiles, and what the gateway adds per request in wall time and in the node's CPU;
5. the medians, and the ratios gateway ÷ direct.

Routes alternate: one untimed round, then ``--repeats`` timed rounds of each route in turn. Each run shows the
CPU used, in cores, by the node, the broker, this process (the client: librdkafka's threads and the Python loop)
and everything else on the machine (other sessions' processes skew the figures): a node at 1.00 core is the
bottleneck (its gevent hub runs on one core). The consumer sets ``fetch.queue.backoff.ms=0``: with librdkafka's
default (1000 ms) it pauses fetching whenever its prefetch queue is full, and both routes then measure that
pause, not the transport. Progress goes to stderr. Every process is stopped and the temporary directory (under
the repository's var/) removed at the end. About 1.5 minutes on 2 cores; figures in docs/coordinator.md.

    python benchmarks/gateway.py [--records 1000000] [--repeats 5] [--quick]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import gateway_hop
from confluent_kafka import Consumer, Producer
from contenders import machine
from coordinator import CpuWindow, bench_directory

from zkcoord.testing.kafka_broker import TestKafka, kafka_cluster
from zkcoord.testing.node_process import NodeProcess, kafka_node
from zkcoord.testing.zookeeper import zookeeper_for_tests

RECORD_BYTES = 100
PARTITIONS = 4
ROUTES = ("gateway", "direct")
ROLES = ("node", "broker", "client")
NODE_OVERRIDES = {"group.initial.rebalance.delay.ms": 0, "offsets.topic.num.partitions": 4}
CONSUMER_CONFIG = {"enable.auto.commit": False, "auto.offset.reset": "earliest", "fetch.queue.backoff.ms": 0}
PRODUCER_CONFIG = {"acks": 1, "linger.ms": 5, "queue.buffering.max.messages": 1_000_000}
ROUND_TRIP_CONFIG = {"acks": 1, "linger.ms": 0}
HOP_ANSWERS = ((60, 5000), (4 << 20, 50))  # (answer bytes, round trips per run): a Produce's, a large Fetch's
ROUND_TRIPS = 2000  # per route and round: the node's CPU per request is read in 10 ms ticks
RUN_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Run:
    """One timed run of one route: ``count`` records (or round trips) in ``seconds``."""

    route: str
    count: int
    seconds: float  # consume: from the assignment; produce: from the first send; to the last record
    join_s: float  # consume: from subscribe to the assignment (FindCoordinator, JoinGroup, SyncGroup)
    latencies: tuple[float, ...]  # round trips: each one's seconds
    cpu: CpuWindow
    cpu_seconds: dict[str, float]  # by role, over the whole run (join and close included)

    @property
    def rate(self) -> float:
        return self.count / self.seconds


@dataclass(frozen=True)
class Outcome:
    """What one route's client reports of one run."""

    count: int
    seconds: float
    join_s: float = 0.0
    latencies: tuple[float, ...] = ()


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def produce(bootstrap: str, topic: str, records: int) -> Outcome:
    """Send ``records`` values of RECORD_BYTES to ``topic``, spread over its partitions in turn, and flush."""
    producer = Producer({"bootstrap.servers": bootstrap, **PRODUCER_CONFIG})
    acknowledged = [0]

    def delivered(error, _message) -> None:
        if error is None:
            acknowledged[0] += 1

    value = b"v" * RECORD_BYTES
    started = time.perf_counter()
    for index in range(records):
        while True:
            try:
                producer.produce(topic, value, partition=index % PARTITIONS, on_delivery=delivered)
                break
            except BufferError:  # the local queue is full: let deliveries drain it
                producer.poll(0.01)
    left = producer.flush(RUN_TIMEOUT_S)
    seconds = time.perf_counter() - started
    if left or acknowledged[0] != records:
        raise RuntimeError(f"{records - acknowledged[0]} records to {bootstrap} not acknowledged")
    return Outcome(records, seconds)


def consume(bootstrap: str, topic: str, records: int) -> Outcome:
    """Read ``topic`` in a new group from the start until ``records`` records are seen."""
    group = f"gateway-bench-{uuid.uuid4().hex[:8]}"
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, **CONSUMER_CONFIG})
    assigned_at: list[float] = []
    try:
        subscribed = time.perf_counter()
        consumer.subscribe([topic], on_assign=lambda *_: assigned_at.append(time.perf_counter()))
        seen = 0
        while seen < records:
            batch = consumer.consume(num_messages=10_000, timeout=0.5)
            if time.perf_counter() - subscribed > RUN_TIMEOUT_S:
                raise RuntimeError(f"{seen} of {records} records through {bootstrap} in {RUN_TIMEOUT_S:.0f} s")
            errors = [message.error() for message in batch if message.error() is not None]
            if errors:
                raise RuntimeError(f"consuming through {bootstrap}: {errors[0]}")
            seen += len(batch)
        return Outcome(seen, time.perf_counter() - assigned_at[0], assigned_at[0] - subscribed)
    finally:
        consumer.close()


def round_trips(bootstrap: str, topic: str, count: int) -> Outcome:
    """``count`` records sent one at a time to partition 0, each flushed (acknowledged) before the next."""
    producer = Producer({"bootstrap.servers": bootstrap, **ROUND_TRIP_CONFIG})
    value = b"v" * RECORD_BYTES
    producer.produce(topic, value, partition=0)  # metadata and the connection, outside the clock
    producer.flush(RUN_TIMEOUT_S)
    latencies = []
    started = time.perf_counter()
    for _ in range(count):
        sent = time.perf_counter()
        producer.produce(topic, value, partition=0)
        if producer.flush(RUN_TIMEOUT_S):
            raise RuntimeError(f"a record to {bootstrap} not acknowledged in {RUN_TIMEOUT_S:.0f} s")
        latencies.append(time.perf_counter() - sent)
    return Outcome(count, time.perf_counter() - started, latencies=tuple(latencies))


def alternate(kind: str, repeats: int, roles: dict[str, list[int]], once: Callable[[str], Outcome]) -> dict:
    """One untimed round, then ``repeats`` rounds of every route in turn: the timed runs of each route."""
    runs: dict[str, list[Run]] = {route: [] for route in ROUTES}
    for round_number in range(repeats + 1):
        for route in ROUTES:
            cpu = CpuWindow(roles)
            started = time.monotonic()
            outcome = once(route)
            wall = time.monotonic() - started
            cpu.stop()
            cpu_seconds = {role: cpu.cores[role] * wall for role in roles}
            run = Run(route, outcome.count, outcome.seconds, outcome.join_s, outcome.latencies, cpu, cpu_seconds)
            label = "warm-up" if round_number == 0 else f"round {round_number}"
            progress(f"   {kind} {label} {route:>7}: {run.rate:>10,.0f}/s; {cpu}")
            if round_number:
                runs[route].append(run)
    return runs


def median_run(runs: list[Run]) -> Run:
    return sorted(runs, key=lambda run: run.rate)[len(runs) // 2]


def report_throughput(kind: str, runs: dict[str, list[Run]]) -> float:
    """Print the rates of each route, their median and the CPU per million records; gateway ÷ direct."""
    print(f"\n{kind}: records/s of each run (median); CPU seconds per million records (median of the runs)")
    medians = {}
    for route in ROUTES:
        medians[route] = statistics.median(run.rate for run in runs[route])
        rates = ", ".join(f"{run.rate:,.0f}" for run in runs[route])
        joined = ""
        if kind == "consume":
            joined = f"; assigned {statistics.median(run.join_s for run in runs[route]) * 1000:,.0f} ms after subscribe"
        per_million = {
            role: statistics.median(run.cpu_seconds[role] * 1e6 / run.count for run in runs[route]) for role in ROLES
        }
        print(f"   {route:>7}: {rates} ({medians[route]:,.0f}){joined}")
        print("            CPU s per million: " + ", ".join(f"{role} {per_million[role]:.2f}" for role in ROLES))
        print(f"            median run: {median_run(runs[route]).cpu}")
    ratio = medians["gateway"] / medians["direct"]
    print(f"   gateway ÷ direct: {ratio:.2f}x")
    return ratio


def report_round_trips(runs: dict[str, list[Run]]) -> float:
    """Print the latency percentiles of each route and what the gateway adds; gateway ÷ direct of the p50s."""
    print("\nround trips (one Produce in flight, acks=1): latency over all timed runs; the node's CPU per request")
    p50 = {}
    for route in ROUTES:
        latencies = sorted(latency for run in runs[route] for latency in run.latencies)
        quantiles = statistics.quantiles(latencies, n=100)
        p50[route] = statistics.median(latencies)
        node_us = statistics.median(run.cpu_seconds["node"] * 1e6 / run.count for run in runs[route])
        print(
            f"   {route:>7}: p50 {p50[route] * 1000:.3f} ms, p90 {quantiles[89] * 1000:.3f} ms, "
            f"p99 {quantiles[98] * 1000:.3f} ms over {len(latencies):,}; node CPU {node_us:,.0f} µs per request"
        )
    print(
        f"   the gateway adds {(p50['gateway'] - p50['direct']) * 1e6:,.0f} µs at p50 (a hop of two loopback sockets)"
    )
    ratio = p50["direct"] / p50["gateway"]
    print(f"   round trips/s gateway ÷ direct (p50): {ratio:.2f}x")
    return ratio


def report_hop(repeats: int) -> None:
    print("\nthe hop in one process: CPU per round trip of client + echo broker, through the listener and direct")
    for answer_bytes, count in HOP_ANSWERS:
        progress(f"   the hop: {count:,} round trips per run, {answer_bytes:,}-byte answers")
        cost = gateway_hop.measure(answer_bytes, count, repeats)
        rate = f" ({answer_bytes / cost.forwarding_s / 1e6:,.0f} MB/s per core)" if answer_bytes > 1 << 20 else ""
        print(
            f"   {answer_bytes:>9,}-byte answers: {cost.gateway_cpu_s * 1e6:8,.1f} µs through the listener, "
            f"{cost.direct_cpu_s * 1e6:8,.1f} µs direct: forwarding costs {cost.forwarding_s * 1e6:,.1f} µs{rate}"
        )


def measure(kafka: TestKafka, node: NodeProcess, records: int, repeats: int) -> None:
    bootstrap = {"gateway": node.kafka_bootstrap, "direct": kafka.bootstrap}
    broker_pid = kafka.broker._process.pid  # the JVM, for its CPU
    roles = {"node": [node.process.pid], "broker": [broker_pid], "client": [os.getpid()]}
    topic = f"gateway-bench-{uuid.uuid4().hex[:8]}"
    produced_topic = f"{topic}-produced"
    for name in (topic, produced_topic):
        kafka.create_topic(name, PARTITIONS)
    progress(f"node pid {node.process.pid} (Kafka listener {node.kafka_bootstrap}), broker pid {broker_pid}")
    progress(f"preloading {records:,} records into {topic} directly")
    produce(kafka.bootstrap, topic, records)
    consumed = alternate("consume", repeats, roles, lambda route: consume(bootstrap[route], topic, records))
    produced = alternate("produce", repeats, roles, lambda route: produce(bootstrap[route], produced_topic, records))
    trips = alternate("round trips", repeats, roles, lambda route: round_trips(bootstrap[route], topic, ROUND_TRIPS))
    ratios = {
        "consume": report_throughput("consume", consumed),
        "produce (acks=1)": report_throughput("produce (acks=1)", produced),
        "round trips": report_round_trips(trips),
    }
    print("\nGateway ÷ direct, medians: " + ", ".join(f"{kind} {ratio:.2f}x" for kind, ratio in ratios.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000, help="records of each run (default 1000000)")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs of each route (default 5)")
    parser.add_argument("--quick", action="store_true", help="50000 records, 1 timed run each (a smoke test)")
    args = parser.parse_args()
    records, repeats = (50_000, 1) if args.quick else (args.records, args.repeats)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so that the cleanup below runs
    with bench_directory("gateway-bench-") as root:
        print(f"Machine: {machine(('confluent-kafka', 'gevent', 'kio'))}")
        report_hop(repeats)
        print(f"\nRecords: {records:,} of {RECORD_BYTES} bytes over {PARTITIONS} partitions per run", flush=True)
        with zookeeper_for_tests() as zookeeper, kafka_cluster(zookeeper) as kafka:
            node = kafka_node(1, kafka.zk_connect, root / "offsets", NODE_OVERRIDES, root)
            try:
                node.wait_serving()
                measure(kafka, node, records, repeats)
            finally:
                node.stop()  # while ZooKeeper still runs: the node resigns its partitions there


if __name__ == "__main__":
    main()
