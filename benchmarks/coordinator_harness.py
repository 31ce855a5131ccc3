"""The harness of benchmarks/coordinator.py: the node under test in its own process, load-generator processes,
CPU windows read from /proc, and one measured window of throughput."""

from __future__ import annotations

import contextlib
import itertools
import json
import multiprocessing
import os
import platform
import pstats
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import coordinator_load
import gevent
import msgpack

from zkcoord.channel import WireConnection

HERE = Path(__file__).resolve().parent
SERVER_SCRIPT = HERE / "coordinator_load.py"  # its ``serve`` command runs the node
OFFSETS_PARTITIONS = 50  # offsets.topic.num.partitions, the default
SESSION_TIMEOUT_MS = 45_000  # Kafka's default session.timeout.ms


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
