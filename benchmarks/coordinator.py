"""Coordinator node throughput and rebalance latency over loopback, against ZooKeeper offset commits.

One coordinator node runs in its own process (benchmarks/coordinator_load.py ``serve``: a CoordinatorNode as
``zkcoord coordinator start`` runs it, default settings except group.initial.rebalance.delay.ms=100, with a
Kafka listener and no upstream broker) on an embedded ZooKeeper; load-generator processes drive it over
loopback. In one run, prints:

1. Heartbeats/s against Stable groups: many members, many connections, requests pipelined on each connection;
   and how long the node's gevent hub was kept from waking a 10 ms sleep meanwhile (timers, accepts, signals);
2. durable OffsetCommit/s (log.flush.policy=group, the default: each reply after the fsync of its batch), one
   group per connection, with 1 and with 100 partitions per request (requests/s and offsets/s), requests per
   fsync and the node's CPU per request; the groups spread over the offsets partitions as their ids hash, and,
   for 1 partition per request, all on one offsets partition (the group commit at its best); the spread
   1-partition commits again over the node's Kafka listener (Kafka's wire protocol, frames encoded ahead by
   kio), and against two nodes of one cluster (each connection on its group's coordinator), as a ratio to one
   node. Each row's groups are new: every group commits once, and the window starts when the node has no
   migration-state read of a new group left in ZooKeeper (steady state);
3. rebalance latency for (members, partitions) = (10, 100) and (100, 1000), heartbeat.interval.ms 3000 and 100,
   and at the full scale (1000, 10000) at 3000 and 1000 ms: from a new member's JoinGroup, and from a LeaveGroup,
   to every member synced on the next generation with the range assignment of every partition. Members run the
   real protocol, one connection each, 25 per load-generator process (at most 8 processes): heartbeats at the
   interval, a rejoin on REBALANCE_IN_PROGRESS, the leader assigns by range, all SyncGroup. Each trigger comes at
   a random moment of the heartbeat cycle; "detect" is until the last member learned of the rebalance from its
   heartbeat and rejoined, "join+sync" the rest. The verdict is on the median LeaveGroup re-settle time of 100
   members / 1,000 partitions at 100 ms;
4. the baseline, on the same ZooKeeper: 0.8.2 offset commits, one znode write per partition
   (/consumers/[g]/offsets/[t]/[p]), synchronous and pipelined (kazoo set_async), then pipelined from a minimal
   client of ZooKeeper's own protocol (kazoo costs more CPU than ZooKeeper itself); and the ratios.

Each measurement shows the CPU used, in cores, by the node, the load generators, ZooKeeper and everything else on
the machine (other sessions' tests skew the figures): a node at 1.00 core is the bottleneck. The aims are marked
PASS or BELOW; being below never makes the exit status non-zero. Fixed seeds; every process is stopped and the
temporary directory (under the repository's var/, not tmpfs) removed at the end. --profile also runs cProfile in
the node during the heartbeat and the spread 1-partition commit measurements and prints the top functions;
--only runs some sections (the summary shows theirs).

    python benchmarks/coordinator.py [--quick] [--profile] [--only heartbeats,commits,rebalance,zookeeper]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import itertools
import json
import multiprocessing
import os
import platform
import pstats
import queue
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import coordinator_load
import gevent
import msgpack
from kazoo.client import KazooClient

from zkcoord.channel import WireConnection
from zkcoord.group.coordinator import partition_for
from zkcoord.testing.node_process import GATEWAY_PORTS
from zkcoord.zk import admin
from zkcoord.zk.server import EmbeddedZooKeeper, free_port_block

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SERVER_SCRIPT = HERE / "coordinator_load.py"  # its ``serve`` command runs the node
OFFSETS_PARTITIONS = 50  # offsets.topic.num.partitions, the default
HEARTBEAT_TOPIC, COMMIT_TOPIC = "bench-heartbeat", "bench-commits"
COMMIT_TOPIC_PARTITIONS = 100
REBALANCE_CONFIGS = ((10, 100), (100, 1000))
LARGE_REBALANCE = (1000, 10_000)  # at the FULL scale only: reported, without an aim
AIMED_REBALANCE = (100, 1000, 100, "leave")  # (members, partitions, heartbeat.interval.ms, trigger)
MEMBERS_PER_PROCESS, REBALANCE_PROCESSES = 25, 8  # a rebalance's members per load generator, at most so many
SESSION_TIMEOUT_MS = 45_000  # Kafka's default session.timeout.ms
AIM_HEARTBEATS = 20_000
AIM_COMMITS = 10_000
AIM_REBALANCE_MS = 100
AIM_ZOOKEEPER_RATIO = 5.0
AIM_RAW_ZOOKEEPER_RATIO = 1.0  # durable 1-partition commits against the raw client's pipelined znode writes
KAFKA_COMMIT_VERSION = 8  # OffsetCommit's newest version before KIP-848's member epochs
SEED = 20240601


@dataclass(frozen=True)
class Scale:
    warmup_seconds: float
    measure_seconds: float
    load_processes: int  # load generators of a throughput measurement
    heartbeat_groups: int  # per load generator
    heartbeat_members: int  # per group
    heartbeat_connections: int  # per load generator
    heartbeat_depth: int  # requests in flight per connection
    commit_connections: int  # per load generator, one group each
    commit_depth: int
    zookeeper_clients: int  # pipelining kazoo clients, one process each
    zookeeper_window: int  # set_async in flight per pipelining client
    repeats: dict[int, int]  # heartbeat.interval.ms -> triggers of each kind
    large_repeats: dict[int, int] = field(default_factory=dict)  # the same for LARGE_REBALANCE


FULL = Scale(1.0, 5.0, 2, 5, 100, 50, 16, 128, 4, 2, 1000, {3000: 2, 100: 6}, {3000: 3, 1000: 3})
QUICK = Scale(0.5, 1.5, 2, 2, 50, 20, 16, 32, 4, 2, 500, {3000: 1, 100: 5})


def verdict(ok: bool) -> str:
    return "PASS" if ok else "BELOW"


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as file:
        cpu = next((line.split(":", 1)[1].strip() for line in file if line.startswith("model name")), cpu)
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    compiled = "C extension" if msgpack.Packer.__module__.endswith("_cmsgpack") else "pure Python"
    return (
        f"{os.cpu_count()} cores ({usable} usable), {cpu}, {platform.system()} {platform.release()}; "
        f"{platform.python_implementation()} {platform.python_version()}, gevent {gevent.__version__}, "
        f"msgpack {msgpack.version_str if hasattr(msgpack, 'version_str') else msgpack.version} ({compiled}); "
        f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (all its threads), from /proc."""
    try:
        with open(f"/proc/{pid}/stat") as file:
            fields = file.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# ---- the node under test ------------------------------------------------------------------------------------


class Server:
    """The coordinator node's process; its stdout carries the serving line and the JSON answers to signals.

    ``overrides`` are node properties beside group.initial.rebalance.delay.ms=100; ``create_connection`` is how
    this process reaches the node (a secured listener's connector).
    """

    def __init__(
        self,
        root: Path,
        connect: str,
        profile: Path,
        overrides: dict[str, str] | None = None,
        create_connection=socket.create_connection,
        node_id: int = 1,
    ):
        self.node_id = node_id
        self.log_path = root / ("server.log" if node_id == 1 else f"server-{node_id}.log")
        self.profile_path = profile
        self.create_connection = create_connection
        settings = {"group.initial.rebalance.delay.ms": "100", **(overrides or {})}
        self._lines: queue.Queue = queue.Queue()
        command = [
            sys.executable,
            str(SERVER_SCRIPT),
            "serve",
            "--node-id",
            str(node_id),
            "--zookeeper",
            connect,
            "--log-dir",
            str(root / "offsets"),
            "--profile",
            str(profile),
            *itertools.chain.from_iterable(("--override", f"{key}={value}") for key, value in settings.items()),
        ]
        with open(self.log_path, "ab") as log_file:
            self.process = subprocess.Popen(
                command,
                stdout=subprocess.PIPE,
                stderr=log_file,
                stdin=subprocess.DEVNULL,
                text=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        threading.Thread(target=self._read, daemon=True).start()
        self.kafka_address: tuple[str, int] | None = None  # its Kafka listener's, when the overrides ask for one
        try:
            line = self._line(60)
            if "kafka listener on" in line:
                self.kafka_address = address_in(line)
                line = self._line(60)
            if "serving on" not in line:
                raise RuntimeError(f"the coordinator did not start: {line!r}\n{self.log_tail()}")
        except BaseException:
            self.stop()
            raise
        self.address = address_in(line)

    def _read(self) -> None:
        for line in self.process.stdout:
            self._lines.put(line.strip())
        self._lines.put("")  # EOF: the process is gone

    def _line(self, timeout: float) -> str:
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise RuntimeError(f"the coordinator said nothing in {timeout:.0f} s\n{self.log_tail()}") from None
        if not line:
            raise RuntimeError(f"the coordinator exited with {self.process.poll()}\n{self.log_tail()}")
        return line

    def _signal(self, signum: int, key: str) -> dict:
        self.process.send_signal(signum)
        while True:
            with contextlib.suppress(ValueError):
                answer = json.loads(self._line(30))
                if key in answer:
                    return answer

    def stats(self) -> dict:
        """CPU seconds, fsyncs, requests, timers ... of the node, now (SIGUSR1)."""
        return self._signal(signal.SIGUSR1, "cpu")

    def profile_start(self) -> None:
        self._signal(signal.SIGUSR2, "profiling")

    def profile_stop(self) -> pstats.Stats:
        self._signal(signal.SIGUSR2, "profile")
        return pstats.Stats(str(self.profile_path))

    def wait_loaded(self, timeout: float = 60, partitions: int = OFFSETS_PARTITIONS) -> None:
        """Until the node leads ``partitions`` offsets partitions and loads none."""
        deadline = time.monotonic() + timeout
        while (figures := self.stats())["owned"] != partitions or figures["loading"]:
            if time.monotonic() > deadline:
                raise RuntimeError(f"offsets partitions not loaded in {timeout:.0f} s: {figures}")
            time.sleep(0.2)

    def wait_topics(self, topics: dict[str, int], timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        with WireConnection(*self.address, create_connection=self.create_connection) as conn:
            while True:
                answer = conn.call("Metadata", topics=sorted(topics))["topics"]
                if all(t["error_code"] == 0 and len(t["partitions"]) == topics[t["name"]] for t in answer):
                    return
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the coordinator does not know the topics in {timeout:.0f} s: {answer}")
                time.sleep(0.1)

    def log_tail(self, lines: int = 30) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        return ""

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def address_in(line: str) -> tuple[str, int]:
    """The ``HOST:PORT`` that ends one of the node's lines."""
    host, port = line.rsplit(" ", 1)[1].rsplit(":", 1)
    return host, int(port)


def wait_no_migration_reads(servers: list[Server], timeout: float = 60) -> None:
    """Until no node has a migration-state read or acknowledgement of a new group in flight in ZooKeeper."""
    deadline = time.monotonic() + timeout
    while pending := sum(server.stats()["migration_reads"] for server in servers):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{pending} migration-state reads still in flight after {timeout:.0f} s")
        time.sleep(0.05)


# ---- load generators ----------------------------------------------------------------------------------------


class LoadError(RuntimeError):
    pass


class Workers:
    """Load-generator processes of one kind (coordinator_load.LOADS), each with its inbox; one shared outbox."""

    running: list[multiprocessing.Process] = []

    def __init__(self, kind: str, params: list[dict]):
        context = multiprocessing.get_context("spawn")
        self.kind = kind
        self.outbox = context.Queue()
        self.inboxes = [context.Queue() for _ in params]
        self.processes = [
            context.Process(
                target=coordinator_load.worker_main, args=(kind, p, inbox, self.outbox), daemon=True, name=kind
            )
            for p, inbox in zip(params, self.inboxes, strict=True)
        ]
        for process in self.processes:
            process.start()
            Workers.running.append(process)

    def collect(self, what: str, timeout: float, on_progress=None) -> list:
        """One ``what`` message from every process; progress messages go to ``on_progress`` meanwhile."""
        answers = []
        deadline = time.monotonic() + timeout
        while len(answers) < len(self.processes):
            try:
                message = self.outbox.get(timeout=1.0)
            except queue.Empty:
                if time.monotonic() > deadline:
                    raise LoadError(f"{self.kind} load generators: no {what} in {timeout:.0f} s") from None
                if any(p.exitcode not in (None, 0) for p in self.processes):
                    raise LoadError(f"a {self.kind} load generator died") from None
                continue
            if message[0] == "error":
                raise LoadError(message[1])
            if message[0] == "progress":
                if on_progress is not None:
                    on_progress(message[1])
                continue
            if message[0] != what:
                raise LoadError(f"{self.kind}: expected {what}, got {message[0]}")
            answers.append(message[1])
        return answers

    @property
    def pids(self) -> list[int]:
        return [process.pid for process in self.processes if process.pid is not None]

    def go(self, start_at: float, end_at: float) -> None:
        for inbox in self.inboxes:
            inbox.put(("go", start_at, end_at))

    def close(self) -> None:
        for process in self.processes:
            process.join(timeout=10)
        stop_processes(self.processes)

    @staticmethod
    def stop_all() -> None:
        stop_processes(Workers.running)


def stop_processes(processes: list[multiprocessing.Process]) -> None:
    for process in processes:
        if process.is_alive():
            process.terminate()
    for process in processes:
        process.join(timeout=5)
        if process.is_alive():
            process.kill()
            process.join()


class CpuWindow:
    """CPU used over a window, in cores (1.0 = one core busy): by role from /proc/PID/stat, and by the whole machine
    from /proc/stat; "others" is the machine's less ours (other sessions' tests, the kernel's own work)."""

    def __init__(self, roles: dict[str, list[int]]):
        self.roles = roles
        self._start = {role: sum(process_cpu_seconds(pid) for pid in pids) for role, pids in roles.items()}
        self._machine = machine_seconds()
        self._at = time.monotonic()
        self.cores: dict[str, float] = {}

    def stop(self) -> CpuWindow:
        elapsed = time.monotonic() - self._at
        for role, pids in self.roles.items():
            self.cores[role] = (sum(process_cpu_seconds(pid) for pid in pids) - self._start[role]) / elapsed
        busy, _ = machine_seconds()
        self.cores["machine"] = (busy - self._machine[0]) / elapsed
        self.cores["others"] = max(0.0, self.cores["machine"] - sum(self.cores[role] for role in self.roles))
        return self

    def __str__(self) -> str:
        parts = [f"{role} {self.cores[role]:.2f}" for role in (*self.roles, "others")]
        return f"CPU cores: {', '.join(parts)} (machine {self.cores['machine']:.2f} of {os.cpu_count()})"


def machine_seconds() -> tuple[float, float]:
    """(busy, total) CPU seconds of the machine since boot, from /proc/stat (busy: all but idle and iowait)."""
    with open("/proc/stat") as file:
        values = [int(x) for x in file.readline().split()[1:9]]
    tick = os.sysconf("SC_CLK_TCK")
    return (sum(values) - values[3] - values[4]) / tick, sum(values) / tick


@dataclass
class Throughput:
    count: int
    seconds: float
    errors: dict
    cpu: CpuWindow
    server_before: dict
    server_after: dict
    profile: pstats.Stats | None = None

    @property
    def rate(self) -> float:
        return self.count / self.seconds


def measure(
    kind: str,
    params: list[dict],
    scale: Scale,
    server: Server | None,
    zookeeper_pid: int,
    profile: bool = False,
    settle: Callable[[], None] | None = None,
    peers: Sequence[Server] = (),
) -> Throughput:
    """Start the load generators, let them set up (then ``settle``, e.g. wait for the node's one-time work to
    end), then count what completes in one window after a warm-up; ``peers`` are more nodes under the load.

    CPU is read from /proc at the window's edges; the node's own counters (SIGUSR1) are read after that, so a
    node slow to answer signals (its hub busy) delays those counters, not the window.
    """
    workers = Workers(kind, params)
    try:
        workers.collect("ready", timeout=180)
        if settle is not None:
            settle()
        return measure_window(workers, scale, server, zookeeper_pid, profile, peers)
    finally:
        workers.close()


def measure_window(
    workers: Workers,
    scale: Scale,
    server: Server | None,
    zookeeper_pid: int,
    profile: bool = False,
    peers: Sequence[Server] = (),
) -> Throughput:
    """One window of load generators that are ready: what :func:`measure` does once they have set up. The CPU
    of each of ``peers`` is the role "node N"."""
    start_at = time.monotonic() + scale.warmup_seconds
    end_at = start_at + scale.measure_seconds
    workers.go(start_at, end_at)
    roles = {"server": [server.process.pid] if server is not None else [], "load generators": workers.pids}
    roles.update({f"node {peer.node_id}": [peer.process.pid] for peer in peers})
    roles["zookeeper"] = [zookeeper_pid]
    time.sleep(max(0.0, start_at - time.monotonic()))
    cpu = CpuWindow(roles)
    before = server.stats() if server is not None else {}
    if profile and server is not None:
        server.profile_start()
    time.sleep(max(0.0, end_at - time.monotonic()))
    cpu.stop()
    stats = server.profile_stop() if profile and server is not None else None
    after = server.stats() if server is not None else {}
    results = workers.collect("result", timeout=120)
    errors: dict = {}
    for result in results:
        for code, count in result["errors"].items():
            errors[code] = errors.get(code, 0) + count
    return Throughput(sum(r["count"] for r in results), end_at - start_at, errors, cpu, before, after, stats)


def print_profile(title: str, stats: pstats.Stats, top: int = 20) -> None:
    print(f"\n   cProfile of the server during {title}: top {top} by own time (profiling slows it)")
    total = stats.total_tt or 1.0
    rows = sorted(stats.stats.items(), key=lambda item: item[1][2], reverse=True)[:top]
    print(f"   {'own s':>7} {'share':>6} {'calls':>10} {'cum s':>7}  function")
    for (file, line, name), (_, calls, own, cumulative, _) in rows:
        where = f"{Path(file).name}:{line}" if file != "~" else "built-in"
        print(f"   {own:7.2f} {own / total:6.1%} {calls:>10,} {cumulative:7.2f}  {name} ({where})")


# ---- the phases -----------------------------------------------------------------------------------------------


def heartbeat_phase(server: Server, zookeeper_pid: int, scale: Scale, profile: bool) -> Throughput:
    groups = scale.load_processes * scale.heartbeat_groups
    members = groups * scale.heartbeat_members
    connections = scale.load_processes * scale.heartbeat_connections
    print(
        f"\n1. Heartbeats against Stable groups: {groups} groups x {scale.heartbeat_members} members = {members:,} "
        f"members (session.timeout.ms {SESSION_TIMEOUT_MS}), heartbeats over {connections} connections from "
        f"{scale.load_processes} processes, {scale.heartbeat_depth} in flight per connection "
        f"({connections * scale.heartbeat_depth:,} in all); {scale.warmup_seconds:g} s warm-up, "
        f"{scale.measure_seconds:g} s measured",
        flush=True,
    )
    print(f"   joining {members:,} members (one connection each, the leader assigns by range) ...", flush=True)
    params = [
        {
            "address": server.address,
            "groups": [f"hb-{w}-{g}" for g in range(scale.heartbeat_groups)],
            "members": scale.heartbeat_members,
            "topic": HEARTBEAT_TOPIC,
            "partitions": 10,
            "session_timeout_ms": SESSION_TIMEOUT_MS,
            "connections": scale.heartbeat_connections,
            "depth": scale.heartbeat_depth,
        }
        for w in range(scale.load_processes)
    ]
    run = measure("heartbeat", params, scale, server, zookeeper_pid, profile)
    before, after = run.server_before, run.server_after
    print(
        f"   {run.rate:>10,.0f} heartbeats/s   errors {run.errors or 'none'}   "
        f"aim ≥ {AIM_HEARTBEATS:,}/s: {verdict(run.rate >= AIM_HEARTBEATS)}\n"
        f"   {run.cpu}\n"
        f"   server: longest wait of a 10 ms sleep on its hub {after['lag_max_ms']:,.0f} ms (how late timers, "
        f"accepts and signals can run), {after['timers']:,} live timers in a heap of {before['timer_heap']:,} -> "
        f"{after['timer_heap']:,} entries, RSS {after['rss_mb']:,.0f} MiB",
        flush=True,
    )
    if run.profile is not None:
        print_profile("the heartbeat window", run.profile)
    return run


def groups_on_one_partition(prefix: str, count: int) -> list[str]:
    """``count`` group ids that all belong to offsets partition 0 (wire-protocol.md §6)."""
    names = (f"{prefix}-{n}" for n in itertools.count())
    return list(itertools.islice((g for g in names if partition_for(g, OFFSETS_PARTITIONS) == 0), count))


def commit_phase(
    server: Server, zookeeper_pid: int, scale: Scale, profile: bool, start_peer: Callable[[], Server]
) -> dict[str, Throughput]:
    """Section 2; ``start_peer`` starts a second node of the cluster (same ZooKeeper, same log directory)."""
    connections = scale.load_processes * scale.commit_connections
    print(
        f"\n2. Durable OffsetCommits (log.flush.policy=group: each reply after the fsync of its batch): simple "
        f"commits (generation -1) from {connections} connections in {scale.load_processes} processes, one group "
        f"per connection, {scale.commit_depth} in flight per connection (a connection is served one request at a "
        f"time, so at most {connections} commits wait for a flush); topic of {COMMIT_TOPIC_PARTITIONS} partitions. "
        f"The groups are spread over the {OFFSETS_PARTITIONS} offsets partitions as their ids hash, or (to show "
        f"the group commit at its best) chosen to share one. Over the msgpack listener, and over the Kafka "
        f"listener (Kafka's wire protocol, OffsetCommit v{KAFKA_COMMIT_VERSION} frames encoded ahead by kio). "
        f"Steady state: the groups are new in each row, so each commits once first and the window starts when the "
        f"node has no migration-state read of a new group left in ZooKeeper. Last, the spread 1-partition row "
        f"again against two nodes of one cluster (same ZooKeeper and log directory, {OFFSETS_PARTITIONS // 2} "
        f"offsets partitions each), each connection on its group's coordinator as FindCoordinator names it. "
        f"µs/request: the node's CPU per request; hub: its event loop's thread, in cores, and the longest a 10 ms "
        f"sleep on it overslept (a node starved of CPU, or kept busy)\n",
        flush=True,
    )
    print(
        f"   {'listener':>8} {'groups':>14} {'partitions/request':>18} {'requests/s':>11} {'offsets/s':>11} "
        f"{'requests/fsync':>14} {'requests/round':>14} {'µs/request':>10}  CPU cores"
    )
    settle = functools.partial(wait_no_migration_reads, [server])
    runs: dict[str, Throughput] = {}
    plan = (
        ("msgpack", "spread", 1),
        ("msgpack", "one partition", 1),
        ("msgpack", "spread", 100),
        ("kafka", "spread", 1),
    )
    for listener, spread, per_request in plan:
        label = f"{spread} {per_request}" if listener == "msgpack" else f"{listener} {spread} {per_request}"
        if spread == "spread":
            groups = [f"commit-{listener}-{per_request}-{n}" for n in range(connections)]
        else:
            groups = groups_on_one_partition(f"commit-one-{per_request}", connections)
        params = [
            {
                "address": server.address if listener == "msgpack" else server.kafka_address,
                "groups": groups[w * scale.commit_connections : (w + 1) * scale.commit_connections],
                "topic": COMMIT_TOPIC,
                "topic_partitions": COMMIT_TOPIC_PARTITIONS,
                "partitions_per_request": per_request,
                "version": KAFKA_COMMIT_VERSION,
                "depth": scale.commit_depth,
            }
            for w in range(scale.load_processes)
        ]
        kind = "commit" if listener == "msgpack" else "kafka-commit"
        run = measure(
            kind, params, scale, server, zookeeper_pid, profile and spread == "spread" and per_request == 1, settle
        )
        runs[label] = run
        after, before = run.server_after, run.server_before
        fsyncs = after["fsyncs"] - before["fsyncs"]
        rounds = after["fsync_rounds"] - before["fsync_rounds"]
        requests = after["requests"] + after["kafka_requests"] - before["requests"] - before["kafka_requests"]
        hub = (after["hub_cpu"] - before["hub_cpu"]) / (after["t"] - before["t"])
        cores = run.cpu.cores
        print(
            f"   {listener:>8} {spread:>14} {per_request:>18} {run.rate:>11,.0f} {run.rate * per_request:>11,.0f} "
            f"{requests / max(fsyncs, 1):>14.1f} {requests / max(rounds, 1):>14.1f} "
            f"{cpu_per_request(cores['server'], run.rate):>10.0f}  server {cores['server']:.2f} "
            f"(hub {hub:.2f}, its longest wait {after['lag_max_ms']:,.0f} ms), load generators "
            f"{cores['load generators']:.2f}, others {cores['others']:.2f}"
            + (f"  errors {run.errors}" if run.errors else ""),
            flush=True,
        )
    runs["two nodes spread 1"] = two_nodes_run(server, zookeeper_pid, scale, start_peer, runs["spread 1"])
    for label, listener in (("spread 1", "msgpack"), ("kafka spread 1", "Kafka")):
        if runs[label].profile is not None:
            print_profile(
                f"the 1-partition commit window on the {listener} listener, groups spread", runs[label].profile
            )
    return runs


def per_core(run: Throughput, role: str) -> float:
    """The rate per CPU core the process of ``role`` used in the window."""
    cores = run.cpu.cores[role]
    return run.rate / cores if cores else 0.0


def cpu_per_request(cores: float, rate: float) -> float:
    """Microseconds of CPU per request of a process that used ``cores`` at ``rate`` requests/s."""
    return cores / rate * 1e6 if rate else 0.0


def two_nodes_run(
    server: Server, zookeeper_pid: int, scale: Scale, start_peer: Callable[[], Server], one: Throughput
) -> Throughput:
    """The spread 1-partition commits against ``server`` and a second node that took half the offsets partitions
    (their preferred leader); stopped at the end, ``server`` leads them all again."""
    connections = scale.load_processes * scale.commit_connections
    groups = [f"commit-two-nodes-{n}" for n in range(connections)]
    peer = start_peer()
    try:
        half = OFFSETS_PARTITIONS // 2
        peer.wait_loaded(120, partitions=half)
        server.wait_loaded(120, partitions=OFFSETS_PARTITIONS - half)
        params = [
            {
                "bootstrap": server.address,
                "groups": groups[w * scale.commit_connections : (w + 1) * scale.commit_connections],
                "topic": COMMIT_TOPIC,
                "topic_partitions": COMMIT_TOPIC_PARTITIONS,
                "partitions_per_request": 1,
                "depth": scale.commit_depth,
            }
            for w in range(scale.load_processes)
        ]
        settle = functools.partial(wait_no_migration_reads, [server, peer])
        run = measure("commit", params, scale, server, zookeeper_pid, settle=settle, peers=[peer])
    finally:
        peer.stop()
    server.wait_loaded(120)
    cores = run.cpu.cores
    both = cores["server"] + cores[f"node {peer.node_id}"]
    print(
        f"   two nodes, msgpack, spread, 1 partition/request: {run.rate:,.0f} requests/s, "
        f"{run.rate / one.rate:.2f}x one node ({one.rate:,.0f}/s); µs/request {cpu_per_request(both, run.rate):.0f} "
        f"(both nodes; one node: {cpu_per_request(one.cpu.cores['server'], one.rate):.0f}); CPU cores: node 1 "
        f"{cores['server']:.2f}, node {peer.node_id} {cores[f'node {peer.node_id}']:.2f}, load generators "
        f"{cores['load generators']:.2f}, others {cores['others']:.2f}"
        + (f"  errors {run.errors}" if run.errors else ""),
        flush=True,
    )
    return run


class RebalanceGroup:
    """One group's members spread over load-generator processes (coordinator_load.rebalance_load), about
    MEMBERS_PER_PROCESS each, at most REBALANCE_PROCESSES of them; the first also holds the newcomer that joins
    and leaves."""

    def __init__(self, server: Server, members: int, partitions: int, interval_ms: int):
        self.partitions = partitions
        processes = min(REBALANCE_PROCESSES, -(-members // MEMBERS_PER_PROCESS))
        shares = [members // processes + (1 if n < members % processes else 0) for n in range(processes)]
        params = {
            "address": server.address,
            "group": f"rebalance-{members}x{partitions}-{interval_ms}",
            "topic": f"bench-rebalance-{partitions}",
            "partitions": partitions,
            "interval_ms": interval_ms,
            "session_timeout_ms": SESSION_TIMEOUT_MS,
        }
        self.workers = Workers("rebalance", [{**params, "members": share} for share in shares])

    def settle(self, after: int, with_newcomer: bool, timeout: float) -> tuple[int, list[dict], dict | None]:
        """Wait until every member (and the newcomer if it is in) is synced on one generation later than ``after``
        with every partition assigned once; returns it, the members' records and the newcomer's."""
        deadline = time.monotonic() + timeout
        while True:
            left = max(0.0, deadline - time.monotonic())
            for inbox in self.workers.inboxes:
                inbox.put(("await", after, left))
            records = [r for status in self.workers.collect("status", timeout=left + 30) for r in status]
            members = [r for r in records if not r["newcomer"]]
            newcomer = next((r for r in records if r["newcomer"]), None)
            in_group = [*members, newcomer] if with_newcomer else members
            generation = coordinator_load.settled_generation(in_group, after, self.partitions)
            if generation is not None:
                return generation, members, newcomer
            if time.monotonic() > deadline:
                raise LoadError(f"the group did not settle after generation {after} in {timeout:.0f} s")
            time.sleep(0.05)  # members on different generations: another rebalance is under way

    def trigger(self, what: str) -> None:
        self.workers.inboxes[0].put((what,))

    def close(self) -> dict:
        """Stop the members; the answers they did not expect, by kind."""
        for inbox in self.workers.inboxes:
            inbox.put(("stop",))
        try:
            results = self.workers.collect("result", timeout=60)
        finally:
            self.workers.close()
        unexpected: dict = {}
        for result in results:
            for key, count in result["unexpected"].items():
                unexpected[key] = unexpected.get(key, 0) + count
        return unexpected


def rebalance_configs(scale: Scale) -> list[tuple[int, int, int, int]]:
    """(members, partitions, heartbeat.interval.ms, triggers of each kind) in the order they run."""
    runs = [
        (members, partitions, interval, repeats)
        for members, partitions in REBALANCE_CONFIGS
        for interval, repeats in sorted(scale.repeats.items(), reverse=True)
    ]
    members, partitions = LARGE_REBALANCE
    runs += [(members, partitions, i, n) for i, n in sorted(scale.large_repeats.items(), reverse=True)]
    return runs


def rebalance_phase(server: Server, zookeeper_pid: int, scale: Scale) -> dict[tuple[int, int, int, str], list[dict]]:
    print(
        f"\n3. Rebalance latency: members run the real protocol (heartbeat.interval.ms below, session.timeout.ms "
        f"{SESSION_TIMEOUT_MS}, one connection each, {MEMBERS_PER_PROCESS} per load-generator process, or more in "
        f"{REBALANCE_PROCESSES} processes); "
        f"a new member joins, then leaves again (LeaveGroup), each at a random moment of the heartbeat cycle; from "
        f"that JoinGroup or LeaveGroup until every member is synced on the next generation with all partitions "
        f"assigned by range. detect: until the last member rejoined after its heartbeat got 27; join+sync: the rest",
        flush=True,
    )
    rows: dict[tuple[int, int, int, str], list[dict]] = {}
    unexpected: dict = {}
    rng = random.Random(SEED)
    for members, partitions, interval, repeats in rebalance_configs(scale):
        label = f"{members} members, {partitions} partitions, heartbeat {interval} ms"
        print(f"   {label}: joining ...", flush=True)
        started = time.monotonic()
        group = RebalanceGroup(server, members, partitions, interval)
        try:
            group.workers.collect("ready", timeout=120)
            timeout = 3 * interval / 1000 + 20 + members / 20
            generation, _, _ = group.settle(-1, with_newcomer=False, timeout=timeout + 60)
            print(f"   {label}: settled on generation {generation} in {time.monotonic() - started:.1f} s", flush=True)
            roles = {"server": [server.process.pid], "load generators": group.workers.pids}
            cpu = CpuWindow({**roles, "zookeeper": [zookeeper_pid]})
            for repeat in range(repeats):
                for trigger in ("join", "leave"):
                    time.sleep(rng.uniform(0, interval / 1000))  # a random moment of the members' heartbeat cycle
                    group.trigger(trigger)
                    generation, records, newcomer = group.settle(generation, trigger == "join", timeout)
                    row = coordinator_load.rebalance_row(trigger, records, newcomer)
                    rows.setdefault((members, partitions, interval, trigger), []).append(row)
                    print(
                        f"   {label}: {trigger:>5} #{repeat + 1}: {row['total_ms']:7.1f} ms (detect "
                        f"{row['detect_ms']:7.1f} + join+sync {row['join_sync_ms']:6.1f}), generation {generation}",
                        flush=True,
                    )
            print(f"   {label}: {cpu.stop()}", flush=True)
        finally:
            closed = group.close()
        for key, count in closed.items():
            unexpected[key] = unexpected.get(key, 0) + count
    print(
        f"\n   {'members':>7} {'partitions':>10} {'interval':>8} {'trigger':>7} {'n':>2} {'median':>9} {'max':>9} "
        f"{'detect (median)':>15} {'join+sync (median)':>18} {'join+sync (max)':>15}"
    )
    for (members, partitions, interval, trigger), found in rows.items():
        totals = [row["total_ms"] for row in found]
        print(
            f"   {members:>7} {partitions:>10} {interval:>5} ms {trigger:>7} {len(found):>2} "
            f"{statistics.median(totals):>6.1f} ms {max(totals):>6.1f} ms "
            f"{statistics.median(row['detect_ms'] for row in found):>12.1f} ms "
            f"{statistics.median(row['join_sync_ms'] for row in found):>15.1f} ms "
            f"{max(row['join_sync_ms'] for row in found):>12.1f} ms"
        )
    if unexpected:
        print(f"   unexpected answers seen by members: {unexpected}")
    if (found := rows.get(AIMED_REBALANCE)) is not None:
        median = statistics.median(row["total_ms"] for row in found)
        print(
            f"\n   the LeaveGroup re-settle time < {AIM_REBALANCE_MS} ms: {median:.1f} ms, median of {len(found)} "
            f"(100 members, 1,000 partitions, heartbeat 100 ms): {verdict(median < AIM_REBALANCE_MS)}",
            flush=True,
        )
    return rows


def rebalance_summary(row, rebalances: dict[tuple[int, int, int, str], list[dict]]) -> None:
    """Section 3's lines of the summary, through ``row(measure, value, aim, ok)``."""
    for key, found in rebalances.items():
        members, partitions, interval, trigger = key
        totals = [r["total_ms"] for r in found]
        median = statistics.median(totals)
        if key != AIMED_REBALANCE:
            what = "LeaveGroup" if trigger == "leave" else "a join"
            measure = f"rebalance {members}/{partitions} after {what}, heartbeat {interval} ms, median"
            row(measure, f"{median:,.0f} ms (max {max(totals):,.0f})")
            continue
        measure = (
            f"the LeaveGroup re-settle time, {members}/{partitions}, heartbeat {interval} ms, median of {len(found)}"
        )
        value = f"{median:,.1f} ms (max {max(totals):,.0f})"
        row(measure, value, f"< {AIM_REBALANCE_MS} ms", median < AIM_REBALANCE_MS)
        join_sync = [r["join_sync_ms"] for r in found]
        value = f"{statistics.median(join_sync):,.0f} ms (max {max(join_sync):,.0f})"
        row("   its join+sync, after the last member learned of it", value)


def zookeeper_phase(connect: str, zookeeper_pid: int, scale: Scale) -> dict[str, Throughput]:
    print(
        f"\n4. Baseline: 0.8.2 offset commits on the same ZooKeeper (same disk; it fsyncs its transaction log, "
        f"group-committed): one setData of /consumers/[g]/offsets/[t]/[p] per partition offset; synchronous (one "
        f"at a time, as the 0.8.2 consumer commits) from 1 kazoo client, and pipelined (set_async, "
        f"{scale.zookeeper_window} in flight per client) from {scale.zookeeper_clients} kazoo clients in as many "
        f"processes; kazoo costs the client far more CPU than ZooKeeper, so last the same pipelined writes from a "
        f"minimal client of ZooKeeper's own protocol (pre-built frames, one process) show what ZooKeeper takes\n",
        flush=True,
    )
    runs = {}
    plan = (("sync", "zookeeper", 1), ("pipelined", "zookeeper", scale.zookeeper_clients), ("raw", "zookeeper-raw", 1))
    for mode, kind, clients in plan:
        params = [
            {
                "connect": connect,
                "mode": mode,
                "group": f"zk-pipelined-{c}" if mode == "raw" else f"zk-{mode}-{c}",
                "topic": COMMIT_TOPIC,
                "partitions": COMMIT_TOPIC_PARTITIONS,
                "window": scale.zookeeper_window,
            }
            for c in range(clients)
        ]
        run = measure(kind, params, scale, None, zookeeper_pid)
        runs[mode] = run
        cores = run.cpu.cores
        label = {"sync": "synchronous", "pipelined": "pipelined", "raw": "pipelined, raw client"}[mode]
        client = "raw client" if mode == "raw" else "kazoo clients"
        print(
            f"   {label:>21}: {run.rate:>9,.0f} commits/s   CPU cores: zookeeper {cores['zookeeper']:.2f}, {client} "
            f"{cores['load generators']:.2f}, others {cores['others']:.2f}"
            + (f"  errors {run.errors}" if run.errors else ""),
            flush=True,
        )
    return runs


# ---- main -------------------------------------------------------------------------------------------------------


def create_topics(server: str, connect: str, topics: dict[str, int]) -> None:
    """The chroot of ``connect`` on ``server``, then the topics under its /brokers/topics."""
    client = KazooClient(hosts=server)
    client.start(timeout=30)
    client.ensure_path(connect[len(server) :])
    client.stop()
    client.close()
    client = KazooClient(hosts=connect)
    client.start(timeout=30)
    try:
        for name, partitions in topics.items():
            admin.create_topic(client, name, partitions)
    finally:
        client.stop()
        client.close()


def summary(
    heartbeats: Throughput | None,
    commits: dict[str, Throughput] | None,
    rebalances: dict[tuple[int, int, int, str], list[dict]],
    zookeeper: dict[str, Throughput] | None,
) -> None:
    """The aims' rows of the sections that ran (None, or no rebalances: not run)."""
    print("\nSummary (the aims of the issue; being below does not fail this command)\n")
    print(f"   {'measure':<72} {'value':>20}  {'aim':<11} verdict")

    def row(measure: str, value: str, aim: str = "", ok: bool | None = None) -> None:
        print(f"   {measure:<72} {value:>20}  {aim:<11} {'' if ok is None else verdict(ok)}".rstrip())

    if heartbeats is not None:
        rate = heartbeats.rate
        row("heartbeats/s, Stable groups", f"{rate:,.0f}/s", f"≥ {AIM_HEARTBEATS:,}/s", rate >= AIM_HEARTBEATS)
    if commits is not None:
        commit_rows(row, commits)
    rebalance_summary(row, rebalances)
    if zookeeper is not None:
        zookeeper_rows(row, zookeeper, commits)


def commit_rows(row: Callable, commits: dict[str, Throughput]) -> None:
    spread, one, hundred = commits["spread 1"], commits["one partition 1"], commits["spread 100"]
    kafka, two = commits["kafka spread 1"], commits["two nodes spread 1"]
    aim = f"≥ {AIM_COMMITS:,}/s"
    row(
        "durable OffsetCommit/s, 1 partition/request, msgpack listener",
        f"{spread.rate:,.0f}/s",
        aim,
        spread.rate >= AIM_COMMITS,
    )
    row("   per core the node used (the machine is shared)", f"{per_core(spread, 'server'):,.0f}/s")
    row("   the same, Kafka listener", f"{kafka.rate:,.0f}/s", aim, kafka.rate >= AIM_COMMITS)
    row("      per core the node used", f"{per_core(kafka, 'server'):,.0f}/s")
    row(
        "   the same (msgpack), all groups on one offsets partition", f"{one.rate:,.0f}/s", aim, one.rate >= AIM_COMMITS
    )
    row("durable OffsetCommit/s, 100 partitions/request", f"{hundred.rate:,.0f}/s")
    row("   offsets/s", f"{hundred.rate * 100:,.0f}/s")
    row("two nodes ÷ one node, 1 partition/request (load generators share the cores)", f"{two.rate / spread.rate:.2f}x")


def zookeeper_rows(row: Callable, zookeeper: dict[str, Throughput], commits: dict[str, Throughput] | None) -> None:
    sync, pipelined, raw = zookeeper["sync"], zookeeper["pipelined"], zookeeper["raw"]
    row("ZooKeeper offset commits/s, synchronous (kazoo)", f"{sync.rate:,.0f}/s")
    row("ZooKeeper offset commits/s, pipelined (kazoo set_async)", f"{pipelined.rate:,.0f}/s")
    row("ZooKeeper offset commits/s, pipelined (raw protocol client)", f"{raw.rate:,.0f}/s")
    row("   per core ZooKeeper used", f"{per_core(raw, 'zookeeper'):,.0f}/s")
    if commits is None:
        return
    spread, one, hundred, kafka = (
        commits[label] for label in ("spread 1", "one partition 1", "spread 100", "kafka spread 1")
    )
    aim = f"≥ {AIM_RAW_ZOOKEEPER_RATIO:g}x"
    for listener, run in (("msgpack", spread), ("Kafka", kafka)):
        ratio = run.rate / raw.rate
        row(
            f"coordinator ÷ ZooKeeper raw pipelined, 1 partition/request, {listener}",
            f"{ratio:.2f}x",
            aim,
            ratio >= AIM_RAW_ZOOKEEPER_RATIO,
        )
        zookeeper_per_core = per_core(raw, "zookeeper")
        if zookeeper_per_core:
            row("   the same per core each used", f"{per_core(run, 'server') / zookeeper_per_core:.2f}x")
    aim = f"≥ {AIM_ZOOKEEPER_RATIO:g}x"
    for baseline, zookeeper_rate in (("kazoo", pipelined.rate), ("raw", raw.rate)):
        for label, coordinator in (
            ("1 partition/request", spread.rate),
            ("1/request, 1 offsets part.", one.rate),
            ("offsets at 100/request", hundred.rate * 100),
        ):
            ratio = coordinator / zookeeper_rate
            measure = f"coordinator ÷ ZooKeeper pipelined, {baseline}: {label}"
            row(measure, f"{ratio:.2f}x", aim, ratio >= AIM_ZOOKEEPER_RATIO)
    row("coordinator ÷ ZooKeeper synchronous, 1 partition/request", f"{spread.rate / sync.rate:.2f}x")


@contextlib.contextmanager
def bench_directory(prefix: str):
    """A temporary directory under the repository's var/ (not tmpfs), removed at the end (and var/ too if this
    made it and it is empty); then the total time and the load average, which other processes skew."""
    parent = REPO / "var"
    created_parent = not parent.exists()
    parent.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    started = time.monotonic()
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)
        if created_parent:
            with contextlib.suppress(OSError):
                parent.rmdir()  # only if empty: someone else may use it too
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"\nTotal {time.monotonic() - started:.0f} s; load average now {load} (other processes skew the figures)")


SECTIONS = ("heartbeats", "commits", "rebalance", "zookeeper")


def sections(text: str) -> set[str]:
    """``--only``'s comma-separated section names."""
    chosen = {name.strip() for name in text.split(",") if name.strip()}
    if unknown := chosen - set(SECTIONS):
        raise argparse.ArgumentTypeError(f"unknown sections {', '.join(sorted(unknown))}; known: {', '.join(SECTIONS)}")
    return chosen


def kafka_listener_overrides() -> dict[str, str]:
    """Node properties for a Kafka listener on any free port (no upstream broker: the node answers the group APIs
    itself); its gateway ports must be given then, on free ports."""
    first = free_port_block("127.0.0.1", GATEWAY_PORTS)
    return {
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "zkcoord.gateway.port.range": f"{first}-{first + GATEWAY_PORTS - 1}",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer members, short windows (a smoke test)")
    parser.add_argument("--profile", action="store_true", help="cProfile the server in the heartbeat/commit windows")
    parser.add_argument(
        "--only",
        type=sections,
        default=set(SECTIONS),
        metavar="SECTIONS",
        help=f"run only these sections (comma-separated: {','.join(SECTIONS)}); the summary shows what ran",
    )
    args = parser.parse_args()
    scale = QUICK if args.quick else FULL
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so that the cleanup below runs
    with bench_directory("coordinator-bench-") as root:
        started = time.monotonic()
        server: Server | None = None
        zk = EmbeddedZooKeeper(data_dir=root / "zookeeper", tick_time_ms=2000, max_session_timeout_ms=60_000)
        try:
            print(f"Machine: {machine()}")
            print(f"Directory: {root} (ZooKeeper's data and the offsets log, on one filesystem)", flush=True)
            zk.start()
            zookeeper_pid = zk._process.pid if zk._process is not None else 0
            connect = f"{zk.connect_string}/bench"
            topics = {HEARTBEAT_TOPIC: 10, COMMIT_TOPIC: COMMIT_TOPIC_PARTITIONS}
            topics.update({f"bench-rebalance-{p}": p for _, p in (*REBALANCE_CONFIGS, LARGE_REBALANCE)})
            create_topics(zk.connect_string, connect, topics)
            server = Server(root, connect, root / "server.prof", kafka_listener_overrides())
            server.wait_loaded()
            server.wait_topics(topics)
            print(
                f"ZooKeeper {zk.connect_string} (pid {zookeeper_pid}); coordinator node on "
                f"{server.address[0]}:{server.address[1]}, its Kafka listener on port {server.kafka_address[1]} "
                f"(pid {server.process.pid}), {OFFSETS_PARTITIONS} offsets partitions loaded; "
                f"{time.monotonic() - started:.1f} s to set up",
                flush=True,
            )

            def start_peer() -> Server:
                return Server(root, connect, root / "server-2.prof", node_id=2)

            heartbeats = commits = zookeeper = None
            rebalances: dict = {}
            if "heartbeats" in args.only:
                heartbeats = heartbeat_phase(server, zookeeper_pid, scale, args.profile)
            if "commits" in args.only:
                commits = commit_phase(server, zookeeper_pid, scale, args.profile, start_peer)
            if "rebalance" in args.only:
                rebalances = rebalance_phase(server, zookeeper_pid, scale)
            if "zookeeper" in args.only:
                zookeeper = zookeeper_phase(connect, zookeeper_pid, scale)
            summary(heartbeats, commits, rebalances, zookeeper)
        finally:
            Workers.stop_all()
            if server is not None:
                server.stop()  # while ZooKeeper still runs: the node resigns its partitions there
            zk.stop()


if __name__ == "__main__":
    main()
