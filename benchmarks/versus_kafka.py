"""The same librdkafka workload against Kafka's group coordinator and against zkcoord's, in one run.

An embedded ZooKeeper, one Kafka 3.9 broker and one ``zkcoord coordinator start --kafka-port`` process (its
gateway ports front the broker) on the same machine. Each workload runs with confluent-kafka consumers
bootstrapped at the broker (the group lives in Kafka's coordinator) and at the node's Kafka port (the group lives
in zkcoord's; Metadata goes through the gateway to the same broker):

1. commits/s: ``--committers`` consumers of one group, each on its own partition and thread, commit explicit
   offsets for ``--seconds``: synchronously (one OffsetCommit in flight each), then asynchronously with
   ``--window`` in flight each;
2. heartbeats/s: ``--heartbeaters`` consumers of one group at ``heartbeat.interval.ms=--heartbeat-ms``, counted
   from librdkafka's statistics (each broker's ``req.Heartbeat``, the same count on both sides) over
   ``--seconds``. librdkafka paces them itself: one member sends about 5 a second whatever the interval below
   ~200 ms, with round trips under 1 ms, so this rate says more of the client than of the coordinator; the
   coordinator's CPU per heartbeat is printed too;
3. rebalance: at each of ``--members`` (a topic with as many partitions, heartbeat.interval.ms=100), every member
   subscribes and the group settles (the join, from the first subscribe to every member assigned), then
   ``--repeats`` times one member closes (LeaveGroup) and the clock runs until every remaining member's
   on_assign has fired; median. Members are Consumer objects in processes of at most SHARD_MEMBERS (librdkafka
   runs 4-5 threads each), each polled in turn by a few threads: a callback's time is late by up to one sweep,
   which is printed.

Rates run one untimed round, then ``--repeats`` rounds with the routes alternating; medians. The ratios are
zkcoord ÷ Kafka (above 1: zkcoord is faster; for times, Kafka's time ÷ zkcoord's). The broker's offsets are not
fsynced (Kafka relies on replicas: ``log.flush.interval.messages`` unbounded), a node's are
(``log.flush.policy=group``). Both use ``group.initial.rebalance.delay.ms=0``; the node's ``max.connections`` is
raised, as Kafka's is unbounded. Progress goes to stderr; every process is stopped at the end. About 3.5
minutes on 2 cores with the defaults, 7-10 with ``--members 10,100,1000`` (``make bench``); figures in
docs/performance.md.

    python benchmarks/versus_kafka.py [--members 10,100] [--seconds 3] [--repeats 3] [--quick] [--rebalance-only]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import signal
import statistics
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from multiprocessing.connection import Connection

from confluent_kafka import Consumer, TopicPartition
from contenders import machine
from coordinator import CpuWindow, bench_directory

from zkcoord.testing.kafka_broker import TestKafka, kafka_cluster
from zkcoord.testing.node_process import NodeProcess, kafka_node
from zkcoord.testing.zookeeper import wait_until, zookeeper_for_tests

ROUTES = ("kafka", "zkcoord")
# max.connections: a node's default (1,024) refuses 1,000 librdkafka members (each opens about three connections
# to it: bootstrap, coordinator, gateway); Kafka's broker sets no bound by default.
NODE_OVERRIDES = {"group.initial.rebalance.delay.ms": 0, "offsets.topic.num.partitions": 4, "max.connections": 100_000}
MEMBER_CONFIG = {
    "enable.auto.commit": False,
    "session.timeout.ms": 30_000,  # 1,000 members on 2 cores: no member may expire while the machine is busy
    "heartbeat.interval.ms": 100,
    "statistics.interval.ms": 0,
    "log.connection.close": False,
}
POLLERS = 4
SHARD_MEMBERS = 250
SETTLE_TIMEOUT_S = 180.0


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Rate:
    """Operations per second over a timed window, and the CPU used in it."""

    per_second: float
    cpu: CpuWindow


class Member:
    """One librdkafka consumer of a group, with the times of its assignments and its last statistics."""

    def __init__(self, bootstrap: str, group: str, config: dict):
        self.assigned: frozenset[int] | None = None  # None between a revoke and the next assign
        self.assignments = 0
        self.assigned_at = 0.0
        self.heartbeats: list[tuple[int, int]] = []  # (librdkafka's ts in µs, Heartbeat requests so far)
        self.committed = 0  # asynchronous commits answered without an error
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                **MEMBER_CONFIG,
                **config,
                "stats_cb": self._stats,
                "on_commit": self._on_commit,
            }
        )

    def subscribe(self, topic: str) -> None:
        self.consumer.subscribe([topic], on_assign=self._on_assign, on_revoke=self._on_revoke)

    def _on_assign(self, _consumer, partitions) -> None:
        self.assigned = frozenset(tp.partition for tp in partitions)
        self.assignments += 1
        self.assigned_at = time.perf_counter()

    def _on_revoke(self, _consumer, _partitions) -> None:
        self.assigned = None

    def _on_commit(self, error, _partitions) -> None:
        if error is not None:
            raise RuntimeError(f"an asynchronous commit failed: {error}")
        self.committed += 1

    def _stats(self, text: str) -> None:
        stats = json.loads(text)
        sent = sum(broker.get("req", {}).get("Heartbeat", 0) for broker in stats["brokers"].values())
        self.heartbeats.append((stats["ts"], sent))


class Group:
    """Members of one group, polled in turn by POLLERS threads so that their callbacks run."""

    def __init__(self, bootstrap: str, topic: str, size: int, config: dict | None = None, group: str = ""):
        self.topic = topic
        group = group or f"versus-{uuid.uuid4().hex[:8]}"
        self.members = [Member(bootstrap, group, config or {}) for _ in range(size)]
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self.sweep_s = 0.0  # the longest sweep of one poller: how late a callback's time may be
        self._pollers = [threading.Thread(target=self._poll, args=(index,), daemon=True) for index in range(POLLERS)]
        for poller in self._pollers:
            poller.start()

    def _poll(self, index: int) -> None:
        while not self._stopping.is_set():
            started = time.perf_counter()
            with self._lock:
                mine = self.members[index::POLLERS]
                for member in mine:
                    member.consumer.poll(0)
            self.sweep_s = max(self.sweep_s, time.perf_counter() - started)
            time.sleep(0.001)

    def join(self, partitions: int) -> float:
        """Subscribe every member and wait until the group is settled: seconds from the first subscribe."""
        started = time.perf_counter()
        for member in self.members:
            member.subscribe(self.topic)
        self.wait_settled(partitions, lambda member: member.assignments > 0)
        return max(member.assigned_at for member in self.members) - started

    def wait_settled(self, partitions: int, reassigned) -> None:
        def settled() -> bool:
            with self._lock:
                members = list(self.members)
            if not all(member.assigned is not None and reassigned(member) for member in members):
                return False
            return sum(len(member.assigned) for member in members) == partitions

        wait_until(settled, timeout=SETTLE_TIMEOUT_S, what=f"{len(self.members)} members assigned")

    def status(self) -> list[tuple[int, int | None, float]]:
        """Each member's (assignments so far, partitions now or None while revoked, time of the last)."""
        with self._lock:
            return [
                (member.assignments, None if member.assigned is None else len(member.assigned), member.assigned_at)
                for member in self.members
            ]

    def close_one(self) -> float:
        """Close the last member (it leaves the group); the time the close began."""
        with self._lock:
            leaving = self.members.pop()
        started = time.perf_counter()
        leaving.consumer.close()
        return started

    def close(self) -> None:
        self._stopping.set()
        for poller in self._pollers:
            poller.join()
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda member: member.consumer.close(), self.members))


def commits(bootstrap: str, topic: str, committers: int, seconds: float, window: int, roles: dict) -> Rate:
    """Commits of explicit offsets by ``committers`` members each on its own thread, for ``seconds``: commits/s.

    ``window`` 1 commits synchronously; more keeps up to that many asynchronous commits in flight per member
    (their answers are counted by the pollers' on_commit callbacks)."""
    group = Group(bootstrap, topic, committers)
    try:
        group.join(committers)
        counts = [0] * committers
        deadline = time.perf_counter() + seconds

        def commit(index: int) -> None:
            member = group.members[index]
            (partition,) = member.assigned
            while time.perf_counter() < deadline:
                if counts[index] - member.committed >= window > 1:
                    time.sleep(0.0005)
                    continue
                counts[index] += 1
                offsets = [TopicPartition(topic, partition, counts[index])]
                member.consumer.commit(offsets=offsets, asynchronous=window > 1)

        cpu = CpuWindow(roles)
        started = time.perf_counter()
        threads = [threading.Thread(target=commit, args=(index,)) for index in range(committers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - started
        done = sum(counts) if window == 1 else sum(member.committed for member in group.members)
        return Rate(done / elapsed, cpu.stop())
    finally:
        group.close()


def heartbeats(bootstrap: str, topic: str, size: int, interval_ms: int, seconds: float, roles: dict) -> Rate:
    """Heartbeat requests/s of ``size`` settled members, from librdkafka's statistics over ``seconds``."""
    config = {"heartbeat.interval.ms": interval_ms, "statistics.interval.ms": 500}
    group = Group(bootstrap, topic, size, config)
    try:
        group.join(size)
        time.sleep(1.0)  # past the join's own requests
        first = [len(member.heartbeats) for member in group.members]
        cpu = CpuWindow(roles)
        time.sleep(seconds)
        cpu.stop()
        rate = 0.0
        for member, start in zip(group.members, first, strict=True):
            (ts0, sent0), (ts1, sent1) = member.heartbeats[start], member.heartbeats[-1]
            rate += (sent1 - sent0) / ((ts1 - ts0) / 1e6)
        return Rate(rate, cpu)
    finally:
        group.close()


def shard(connection: Connection, bootstrap: str, topic: str, size: int, group: str) -> None:
    """A process holding ``size`` members of ``group``: it subscribes them, reports their assignments and closes
    one of them, when told through ``connection``."""
    members = Group(bootstrap, topic, size, group=group)
    try:
        while True:
            command = connection.recv()
            if command == "subscribe":
                for member in members.members:
                    member.subscribe(topic)
                connection.send(None)
            elif command == "status":
                connection.send((members.status(), members.sweep_s))
            elif command == "leave":
                connection.send(members.close_one())
            else:
                return
    finally:
        members.close()
        connection.send(None)


class ShardedGroup:
    """Members of one group spread over processes of at most SHARD_MEMBERS each: a process holds about a
    thousand librdkafka consumers at most (each takes a thread-local key, and a process has 1,024)."""

    def __init__(self, bootstrap: str, topic: str, size: int):
        shards = -(-size // SHARD_MEMBERS)
        group = f"versus-{uuid.uuid4().hex[:8]}"
        context = multiprocessing.get_context("spawn")  # no fork of a process running librdkafka threads
        self._connections = []
        self._processes = []
        for index in range(shards):
            mine, theirs = context.Pipe()
            share = size // shards + (index < size % shards)
            process = context.Process(target=shard, args=(theirs, bootstrap, topic, share, group), daemon=True)
            process.start()
            self._connections.append(mine)
            self._processes.append(process)
        self.sweep_s = 0.0

    def _ask(self, command: str, connections=None) -> list:
        connections = self._connections if connections is None else connections
        for connection in connections:
            connection.send(command)
        return [connection.recv() for connection in connections]

    def _status(self) -> list[list[tuple[int, int | None, float]]]:
        answers = self._ask("status")
        self.sweep_s = max(self.sweep_s, *(sweep for _, sweep in answers))
        return [status for status, _ in answers]

    def _wait(self, partitions: int, before: list[list[int]]) -> float:
        """Until every member has an assignment newer than ``before`` and the partitions are all assigned: the
        time of the last assignment."""
        latest = [0.0]

        def settled() -> bool:
            status = [member for shard in self._status() for member in shard]
            counts = [count for shard in before for count in shard]
            if any(
                assigned is None or seen <= count for (seen, assigned, _), count in zip(status, counts, strict=True)
            ):
                return False
            latest[0] = max(at for _, _, at in status)
            return sum(assigned for _, assigned, _ in status) == partitions

        wait_until(settled, timeout=SETTLE_TIMEOUT_S, what=f"{len(before)} shards of members reassigned")
        return latest[0]

    def join(self, partitions: int) -> float:
        """Subscribe every member and wait until the group is settled: seconds from the first subscribe."""
        status = self._status()
        started = time.perf_counter()
        self._ask("subscribe")
        return self._wait(partitions, [[0] * len(shard) for shard in status]) - started

    def leave(self, partitions: int) -> float:
        """Close one member of the largest shard; seconds until every remaining member has a new assignment."""
        status = self._status()
        largest = max(range(len(status)), key=lambda index: len(status[index]))
        before = [[count for count, _, _ in shard] for shard in status]
        before[largest].pop()
        (started,) = self._ask("leave", [self._connections[largest]])
        return self._wait(partitions, before) - started

    def close(self) -> None:
        self._ask("close")
        for process in self._processes:
            process.join(timeout=60)


def rebalances(bootstrap: str, topic: str, size: int, repeats: int) -> tuple[float, list[float], float]:
    """The join of ``size`` members and ``repeats`` leaves: (join s, each leave's s, the longest sweep s)."""
    group = ShardedGroup(bootstrap, topic, size)
    try:
        joined = group.join(size)
        times = [group.leave(size) for _ in range(repeats)]
        return joined, times, group.sweep_s
    finally:
        group.close()


def ratio(kafka: float, zkcoord: float, higher_is_better: bool = True) -> str:
    return f"{(zkcoord / kafka if higher_is_better else kafka / zkcoord):.2f}x"


def rates(kind: str, repeats: int, roles: dict[str, list[int]], once) -> str:
    """An untimed round (the JVM compiles its hot paths), then ``repeats`` rounds of both routes in turn; print
    each rate, the median, the coordinator's cores and CPU per operation; zkcoord ÷ Kafka of the medians."""
    runs: dict[str, list[Rate]] = {route: [] for route in ROUTES}
    for round_number in range(repeats + 1):
        for route in ROUTES:
            run = once(route)
            label = f"round {round_number}" if round_number else "warm-up"
            progress(f"   {kind} {label} {route:>7}: {run.per_second:,.0f}/s; {run.cpu}")
            if round_number:
                runs[route].append(run)
    medians = {}
    for route in ROUTES:
        medians[route] = statistics.median(run.per_second for run in runs[route])
        each = ", ".join(f"{run.per_second:,.0f}" for run in runs[route])
        coordinator = "node" if route == "zkcoord" else "broker"
        cost = statistics.median(run.cpu.cores[coordinator] * 1e6 / run.per_second for run in runs[route])
        cores = statistics.median(run.cpu.cores[coordinator] for run in runs[route])
        client = statistics.median(run.cpu.cores["client"] for run in runs[route])
        print(
            f"   {route:>7}: {each} ({medians[route]:,.0f}) {kind}; the {coordinator} {cores:.2f} cores, "
            f"{cost:,.0f} µs CPU each; client {client:.2f} cores"
        )
    result = ratio(medians["kafka"], medians["zkcoord"])
    print(f"   zkcoord ÷ Kafka: {result}")
    return result


def rate_measures(kafka: TestKafka, bootstrap: dict, roles: dict, suffix: str, args: argparse.Namespace) -> dict:
    """1. commits/s and 2. heartbeats/s: zkcoord ÷ Kafka of each."""
    summary = {}
    topic = f"versus-commits-{suffix}"
    kafka.create_topic(topic, args.committers)
    for window, label in ((1, "synchronous"), (args.window, f"asynchronous, {args.window} in flight per member")):
        print(f"\n1. commits/s: {args.committers} members, explicit offsets, {label}, {args.seconds:g} s windows")
        summary[f"commits/s ({label.split(',')[0]})"] = rates(
            "commits/s",
            args.repeats,
            roles,
            lambda route, window=window: commits(bootstrap[route], topic, args.committers, args.seconds, window, roles),
        )

    topic = f"versus-heartbeats-{suffix}"
    kafka.create_topic(topic, args.heartbeaters)
    ceiling = args.heartbeaters * 1000 / args.heartbeat_ms
    print(
        f"\n2. heartbeats/s: {args.heartbeaters} members at heartbeat.interval.ms={args.heartbeat_ms} "
        f"(ceiling {ceiling:,.0f}/s), from librdkafka's statistics, {args.seconds:g} s windows"
    )
    summary["heartbeats/s"] = rates(
        "heartbeats/s",
        args.repeats,
        roles,
        lambda route: heartbeats(bootstrap[route], topic, args.heartbeaters, args.heartbeat_ms, args.seconds, roles),
    )
    return summary


def measure(kafka: TestKafka, node: NodeProcess, args: argparse.Namespace) -> None:
    bootstrap = {"kafka": kafka.bootstrap, "zkcoord": node.kafka_bootstrap}
    roles = {"node": [node.process.pid], "broker": [kafka.broker._process.pid], "client": [os.getpid()]}
    suffix = uuid.uuid4().hex[:8]
    summary = {}

    if not args.rebalance_only:
        summary.update(rate_measures(kafka, bootstrap, roles, suffix, args))

    print(
        f"\n3. rebalance: N members on N partitions at heartbeat.interval.ms={MEMBER_CONFIG['heartbeat.interval.ms']}: "
        f"the join, then {args.repeats} leaves (LeaveGroup to every member reassigned), median"
    )
    for size in args.members:
        topic = f"versus-rebalance-{size}-{suffix}"
        kafka.create_topic(topic, size)
        results = {}
        for route in ROUTES:
            cpu = CpuWindow(roles)
            try:
                results[route] = rebalances(bootstrap[route], topic, size, args.repeats)
            except TimeoutError:
                progress(f"   {size} members {route:>7}: {cpu.stop()}")
                print(f"   {size:>5} members {route:>7}: not settled within {SETTLE_TIMEOUT_S:.0f} s")
                continue
            joined, times, sweep = results[route]
            progress(f"   {size} members {route:>7}: {cpu.stop()}")
            print(
                f"   {size:>5} members {route:>7}: join {joined * 1000:,.0f} ms; leave "
                f"{', '.join(f'{t * 1000:,.0f}' for t in times)} ({statistics.median(times) * 1000:,.0f}) ms; "
                f"poll sweep up to {sweep * 1000:,.0f} ms"
            )
        if len(results) < len(ROUTES):
            summary[f"rebalance at {size}"] = summary[f"join of {size}"] = "not measured (a route did not settle)"
            continue
        kafka_leave, zkcoord_leave = (statistics.median(results[route][1]) for route in ROUTES)
        summary[f"rebalance at {size}"] = ratio(kafka_leave, zkcoord_leave, higher_is_better=False)
        summary[f"join of {size}"] = ratio(results["kafka"][0], results["zkcoord"][0], higher_is_better=False)
        print(
            f"   {size:>5} members zkcoord ÷ Kafka (speed): leave {summary[f'rebalance at {size}']}, "
            f"join {summary[f'join of {size}']}"
        )

    lost = node.log_path.read_text(errors="replace").count("session lost")
    if lost:
        print(f"\nThe node lost its ZooKeeper session {lost} time(s) in this run (its log: 'session lost'): it")
        print("resigned its offsets partitions and took them back, and its groups with them.")

    print("\nzkcoord ÷ Kafka (above 1: zkcoord faster):")
    for kind, value in summary.items():
        print(f"   {kind:<28} {value}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--members", default="10,100", help="group sizes of the rebalance (default 10,100)")
    parser.add_argument("--seconds", type=float, default=3.0, help="window of commits and heartbeats (default 3)")
    parser.add_argument("--repeats", type=int, default=3, help="rounds of each measure (default 3)")
    parser.add_argument("--committers", type=int, default=8, help="committing members (default 8)")
    parser.add_argument("--window", type=int, default=32, help="asynchronous commits in flight per member (32)")
    parser.add_argument("--heartbeaters", type=int, default=50, help="heartbeating members (default 50)")
    parser.add_argument("--heartbeat-ms", type=int, default=5, help="their heartbeat.interval.ms (default 5)")
    parser.add_argument("--quick", action="store_true", help="10 and 100 members, 2 s windows, 1 round")
    parser.add_argument("--rebalance-only", action="store_true", help="only the rebalances (3.), not the rates")
    args = parser.parse_args()
    args.members = [int(size) for size in args.members.split(",")]
    if args.quick:
        args.members, args.seconds, args.repeats = [10, 100], 2.0, 1
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so that the cleanup below runs
    with bench_directory("versus-kafka-") as root:
        print(f"Machine: {machine(('confluent-kafka', 'gevent'))}")
        print("The cores are shared with other processes: figures vary with their load; the client (librdkafka")
        print("and this Python process), the broker and the node all run on them.")
        with zookeeper_for_tests() as zookeeper, kafka_cluster(zookeeper) as kafka:
            node = kafka_node(1, kafka.zk_connect, root / "offsets", NODE_OVERRIDES, root)
            try:
                node.wait_serving()
                measure(kafka, node, args)
            finally:
                node.stop()  # while ZooKeeper still runs: the node resigns its partitions there


if __name__ == "__main__":
    main()
