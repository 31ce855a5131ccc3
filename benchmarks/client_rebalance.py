"""Rolling bounces of a consumer group: rebalances, their duration and each member's processing pause, per protocol.

For each member count (default 10, 50, 100; a topic of 2 partitions per member) one group per variant runs against
one coordinator node (a ``zkcoord coordinator start`` process: group.initial.rebalance.delay.ms=0,
group.min.session.timeout.ms=1000) on one embedded ZooKeeper, and members are bounced one at a time: close(), a new
instance in the same slot 1-1.5 s later, then wait until the group is settled and quiet. Every member of a group of
up to 10 is bounced in turn; larger groups bounce a fixed sample of 5 evenly spaced members (--bounces).

- legacy (the baseline): the 0.8.2 ZooKeeper group of the same shape (LegacyConsumer, one KafkaStream each, range);
- eager: the client (zkcoord.client.Consumer), range assignor, dynamic members (LeaveGroup on close);
- cooperative: the client, cooperative-sticky, dynamic members;
- static: the client, range, the same group.instance.id across the restart (within session.timeout.ms): no
  LeaveGroup, and the coordinator hands the returning instance its old assignment: 0 rebalances expected.

Prints, per member count, a table: rebalances per bounce, rebalance time (from the trigger until every member holds
its part of a complete assignment), the processing pause of every member that stayed (from the last record it
processed before it gave partitions up to the first record it processed after that), how many members paused, the
bounced slot's own gap, member-seconds lost per bounce, and the ratios legacy / variant, all from the members' trace
events; then, per variant, the steady state before the bounces (CPU of the members' processes, the node and
ZooKeeper; the longest gap between two records of a member while nothing rebalances), which shows how much the
machine distorts the figures. Members run as threads of host processes, --members-per-process each (0: all in this
process; 100 members in one process saturate its GIL and stretch every figure). Records: 1000/s over the topic (at
most 50/s per partition) unless --rate. Fixed seed; everything started is stopped and the temporary directory
removed at the end. About 9 minutes on 2 cores; --quick (10 members, 3 bounces) about 1.

    python benchmarks/client_rebalance.py [--members 10,50,100] [--bounces N] [--members-per-process 10] [--quick]
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import itertools
import logging
import math
import multiprocessing
import os
import platform
import random
import shutil
import signal
import statistics
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import client_rebalance_members
from client_rebalance_members import POLL_TIMEOUT_MS, Host
from coordinator_harness import process_cpu_seconds
from kazoo.client import KazooClient

from zkcoord.legacy.consumer import LegacyConsumer
from zkcoord.sources import SyntheticSource
from zkcoord.testing.node_process import NodeProcess
from zkcoord.zk import admin
from zkcoord.zk.server import EmbeddedZooKeeper

REPO = Path(__file__).resolve().parent.parent
TOPIC_PREFIX = "bounce"  # one topic per member count: bounce-10, bounce-50, ...
PARTITIONS_PER_MEMBER = 2
SESSION_TIMEOUT_MS = 6000
HEARTBEAT_INTERVAL_MS = 500
QUIET_S = 2 * HEARTBEAT_INTERVAL_MS / 1000  # settled and nothing reported for this long: the bounce is over
JITTER_S = HEARTBEAT_INTERVAL_MS / 1000  # a random wait up to this before each close, and added to each downtime
SETTLE_TIMEOUT_S = 180.0
STEADY_S = 3.0
SEED = 20240611
TOPIC_RECORDS_PER_S = 1000  # default rate: this many records/s over the whole topic, at most 50/s per partition
ROLLING_MAX = 10  # groups up to this size bounce every member; larger ones a sample (--bounces, default 5)
SAMPLE = 5
CLIENT_CONFIG = {
    "session_timeout_ms": SESSION_TIMEOUT_MS,
    "heartbeat_interval_ms": HEARTBEAT_INTERVAL_MS,
    "enable_auto_commit": True,  # commit before revoking, so the next owner starts where this one stopped
    "auto_offset_reset": "latest",
}
LEGACY_CONFIG = {  # tuned as benchmarks/legacy_rebalance.py (0.8.2's defaults: backoff 2000 ms, 4 attempts)
    "zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS,
    "rebalance.backoff.ms": 200,
    "rebalance.max.retries": 10,
    "auto.commit.enable": True,  # 0.8.2's default: commit before releasing
    "auto.offset.reset": "largest",
}
NODE_OVERRIDES = {"group.initial.rebalance.delay.ms": 0, "group.min.session.timeout.ms": 1000}
_incarnations = itertools.count(1)  # member instances are (slot, incarnation), unique over the whole run


@dataclass(frozen=True)
class Variant:
    key: str
    label: str
    legacy: bool = False
    strategy: str = "range"
    static: bool = False


VARIANTS = (
    Variant("legacy", "legacy ZooKeeper 0.8.2 (baseline)", legacy=True),
    Variant("eager", "eager (range, dynamic)"),
    Variant("cooperative", "cooperative (cooperative-sticky)", strategy="cooperative-sticky"),
    Variant("static", "static (range, group.instance.id)", static=True),
)


def legacy_has_streams() -> bool:
    """LegacyConsumer hands out records (KafkaStreams over a ``source=``), or only claims partitions."""
    return hasattr(LegacyConsumer, "streams") and "source" in inspect.signature(LegacyConsumer.__init__).parameters


# ---- the group as its members report it ------------------------------------------------------------------------


@dataclass
class View:
    """What one member instance reported."""

    key: tuple[int, int]
    live: bool = True
    state: str = "UNJOINED"
    generation: int = -1
    partitions: frozenset = frozenset()
    pending: bool = False  # a pause began and has not ended
    pauses: list[tuple[float, float]] = field(default_factory=list)
    first: float | None = None


class Monitor:
    """The live member instances and whether the group is settled; fed by the members' reports (any thread).

    Settled: every live member holds a partition, their partitions are disjoint and cover the topic, and (client)
    all are STABLE on one generation. ``settled_at``: the time of the latest report when it became so (None while
    it is not); ``last_report``: when the latest report of any kind arrived.
    """

    def __init__(self, topic: str, partitions: int, legacy: bool, records: bool = True):
        self.lock = threading.Lock()
        self.everything = frozenset((topic, p) for p in range(partitions))
        self.legacy = legacy
        self.records = records  # members process records (not: legacy members without streams)
        self.views: dict[tuple[int, int], View] = {}
        self.live: dict[tuple[int, int], View] = {}
        self.settled_at: float | None = None
        self.generation = -1  # of the settled client group
        self.latest = 0.0
        self.last_report = time.monotonic()
        self.attempts: list[tuple[float, tuple[int, int], str]] = []

    def add(self, key: tuple[int, int]) -> View:
        with self.lock:
            view = self.views[key] = self.live[key] = View(key)
            self._check(time.monotonic())
            return view

    def remove(self, key: tuple[int, int]) -> None:
        with self.lock:
            self.live.pop(key).live = False
            self._check(time.monotonic())

    def report(self, message: tuple) -> None:
        kind, key = message[0], message[1]
        with self.lock:
            view = self.views.get(key)
            if view is None:
                return
            self.last_report = time.monotonic()
            if kind == "state":
                view.state, view.generation = message[3], message[4]
                self._check(message[2])
            elif kind == "assignment":
                view.partitions = frozenset(tuple(tp) for tp in message[3])
                self._check(message[2])
            elif kind == "attempt":
                self.attempts.append((message[2], key, message[3]))
            elif kind == "pending":
                view.pending = True
            elif kind == "pause":
                view.pending = False
                if view.live:
                    view.pauses.append((message[2], message[3]))
            elif kind == "first":
                view.first = message[2]

    def _check(self, at: float) -> None:
        self.latest = max(self.latest, at)
        seen: set = set()
        generations = set()
        settled = bool(self.live)
        for view in self.live.values():
            if not view.partitions or seen & view.partitions or (not self.legacy and view.state != "STABLE"):
                settled = False
                break
            generations.add(view.generation)
            seen |= view.partitions
        settled = settled and seen == self.everything and (self.legacy or len(generations) == 1)
        if not settled:
            self.settled_at = None
        elif self.settled_at is None:
            self.settled_at = self.latest
            self.generation = next(iter(generations)) if not self.legacy else -1

    def why(self) -> str:
        """What keeps the group from counting as settled (for the error when it never does)."""
        with self.lock:
            owners: dict = {}
            for view in self.live.values():
                for partition in view.partitions:
                    owners.setdefault(partition, []).append(view.key)
            lines = [
                f"settled_at {self.settled_at}, {time.monotonic() - self.last_report:.1f} s since the last report, "
                f"{len(self.everything - set(owners))} partitions unowned, "
                f"{sum(len(keys) > 1 for keys in owners.values())} owned twice"
            ]
            for view in self.live.values():
                if view.state != "STABLE" or not view.partitions or view.pending or view.first is None:
                    lines.append(
                        f"   {view.key}: {view.state} generation {view.generation}, {len(view.partitions)} partitions, "
                        f"pending {view.pending}, first record {view.first}"
                    )
            generations = {view.generation for view in self.live.values()}
            lines.append(f"generations {sorted(generations)}")
            return "\n".join(lines[:40])

    def quiet(self, since: float) -> float | None:
        """When the group became settled (not before ``since``), once it has been quiet for QUIET_S, else None."""
        with self.lock:
            if self.settled_at is None or time.monotonic() - self.last_report < QUIET_S:
                return None
            if any(view.pending or (self.records and view.first is None) for view in self.live.values()):
                return None
            return max(self.settled_at, since)


# ---- where the members run --------------------------------------------------------------------------------------


class Members:
    """Member hosts: this process (``hosts`` = 0) or ``hosts`` processes; slot s lives on host s % hosts.

    Reports from every member go to ``sink`` (the current run's monitor).
    """

    def __init__(self, hosts: int, source_spec: str, trace_dir: Path | None = None, label: str = ""):
        self.sink: Callable[[tuple], None] = lambda message: None
        self.local: Host | None = None
        self.processes: list[multiprocessing.Process] = []
        self.inboxes: list = []
        self._replies: dict[int, list] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

        def trace_path(host: int) -> str | None:
            return str(trace_dir / f"{label}host-{host}.jsonl") if trace_dir is not None else None

        if hosts == 0:
            self.local = Host(lambda message: self.sink(message), source_spec, trace_path(0))
            return
        context = multiprocessing.get_context("spawn")
        self.outbox = context.Queue()
        for host in range(hosts):
            inbox = context.Queue()
            args = (inbox, self.outbox, source_spec, trace_path(host))
            process = context.Process(target=client_rebalance_members.host_main, args=args, daemon=True)
            process.start()
            self.inboxes.append(inbox)
            self.processes.append(process)
        ready = 0
        while ready < hosts:
            message = self.outbox.get(timeout=120)
            ready += message[0] == "ready"
        threading.Thread(target=self._dispatch, daemon=True).start()

    @property
    def count(self) -> int:
        return len(self.processes) or 1

    @property
    def pids(self) -> list[int]:
        return [os.getpid(), *(p.pid for p in self.processes if p.pid is not None)]

    def _dispatch(self) -> None:
        while True:
            message = self.outbox.get()
            if message[0] == "reply":
                with self._lock:
                    waiter = self._replies.pop(message[1])
                waiter[1:] = message[2:]
                waiter[0].set()
            else:
                try:
                    self.sink(message)
                except Exception:
                    logging.getLogger(__name__).error("report %r failed", message, exc_info=True)

    def call(self, host: int, method: str, *args, timeout: float = 300.0):
        if self.local is not None:
            return getattr(self.local, method)(*args)
        request_id = next(self._ids)
        waiter = [threading.Event(), None, None]
        with self._lock:
            self._replies[request_id] = waiter
        self.inboxes[host].put((request_id, method, args))
        if not waiter[0].wait(timeout):
            raise TimeoutError(f"host {host}: no answer to {method} in {timeout:.0f} s")
        if waiter[2] is not None:
            raise RuntimeError(f"host {host}: {method} failed:\n{waiter[2]}")
        return waiter[1]

    def on_slot(self, slot: int, method: str, *args):
        return self.call(slot % self.count, method, *args)

    def everywhere(self, method: str) -> list:
        with ThreadPoolExecutor(self.count) as pool:
            return list(pool.map(lambda host: self.call(host, method), range(self.count)))

    def close(self) -> None:
        if self.local is not None:
            self.local.close_all()
            if self.local.trace is not None:
                self.local.trace.close()
            return
        for inbox in self.inboxes:
            inbox.put(None)
        for process in self.processes:
            process.join(timeout=30)
            if process.is_alive():
                process.terminate()
                process.join(5)


# ---- processes outside the members: CPU, the coordinator node ----------------------------------------------------


def machine_busy_seconds() -> float:
    with open("/proc/stat") as file:
        values = [int(x) for x in file.readline().split()[1:9]]
    return (sum(values) - values[3] - values[4]) / os.sysconf("SC_CLK_TCK")


class CpuWindow:
    """CPU used since creation, in cores, by each role's processes and by the whole machine."""

    def __init__(self, roles: dict[str, list[int]]):
        self.roles = roles
        self.started = time.monotonic()
        self.before = {role: sum(map(process_cpu_seconds, pids)) for role, pids in roles.items()}
        self.machine = machine_busy_seconds()

    def cores(self) -> dict[str, float]:
        elapsed = time.monotonic() - self.started
        cores = {
            role: (sum(map(process_cpu_seconds, pids)) - self.before[role]) / elapsed
            for role, pids in self.roles.items()
        }
        cores["machine"] = (machine_busy_seconds() - self.machine) / elapsed
        return cores


@dataclass
class Env:
    connect: str  # ZooKeeper, with the chroot the node and the legacy groups use
    bootstrap: str
    pids: dict[str, list[int]]
    downtime_s: float
    streams: bool


# ---- one variant at one size ------------------------------------------------------------------------------------


@dataclass
class Bounce:
    rebalances: int
    rebalance_ms: list[float]  # one per trigger that changed the group (a close that ran into the restart: one)
    rejoin_ms: float | None  # restart -> settled, when the restart changed no generation (static)
    restart_gap_ms: float | None
    pauses_ms: list[float]
    paused_members: int
    stayed: int
    failed_attempts: int


@dataclass
class Result:
    variant: Variant
    members: int
    setup_s: float
    steady_cpu: dict[str, float]
    steady_gaps_ms: list[float]
    bounces: list[Bounce] = field(default_factory=list)

    def rebalance_ms(self) -> list[float]:
        return [ms for b in self.bounces for ms in b.rebalance_ms]

    def pauses_ms(self) -> list[float]:
        return [ms for b in self.bounces for ms in b.pauses_ms]

    def lost_member_s(self) -> float:
        return statistics.mean(sum(b.pauses_ms) / 1000 for b in self.bounces)


class Run:
    """One group of ``size`` members of ``variant``: start, settle, a steady window, bounces, teardown."""

    def __init__(self, env: Env, members: Members, variant: Variant, size: int):
        self.env = env
        self.members = members
        self.variant = variant
        self.size = size
        self.group = f"{variant.key}-{size}"
        self.topic = f"{TOPIC_PREFIX}-{size}"
        records = env.streams or not variant.legacy
        self.monitor = Monitor(self.topic, size * PARTITIONS_PER_MEMBER, variant.legacy, records)
        members.sink = self.monitor.report
        self.current: dict[int, tuple[int, int]] = {}
        # The same close and restart moments for every variant of a size, each at a random point of the heartbeat
        # cycle (after a rebalance the members heartbeat in step: a fixed delay would always hit the same point).
        self.random = random.Random(SEED + size)

    def spec(self, slot: int) -> dict:
        name = f"m{slot:03d}"
        if self.variant.legacy:
            config = {**LEGACY_CONFIG, "group.id": self.group, "zookeeper.connect": self.env.connect}
            config["consumer.id"] = name
            return {"kind": "legacy", "config": config, "topic": self.topic, "streams": self.env.streams}
        config = {**CLIENT_CONFIG, "bootstrap_servers": self.env.bootstrap, "group_id": self.group, "client_id": name}
        config["partition_assignment_strategy"] = self.variant.strategy
        if self.variant.static:
            config["group_instance_id"] = name
        return {"kind": "client", "config": config, "topic": self.topic, "streams": False}

    def start_member(self, slot: int) -> View:
        key = (slot, next(_incarnations))
        view = self.monitor.add(key)
        self.current[slot] = key
        self.members.on_slot(slot, "start", slot, key[1], self.spec(slot))
        return view

    def wait_settled(self, since: float, timeout: float = SETTLE_TIMEOUT_S) -> float:
        deadline = time.monotonic() + timeout
        while (settled_at := self.monitor.quiet(since)) is None:
            if time.monotonic() > deadline:
                raise TimeoutError(f"group {self.group}: not settled within {timeout:.0f} s:\n{self.monitor.why()}")
            time.sleep(0.02)
        return settled_at

    def start(self) -> float:
        started = time.monotonic()
        if self.variant.legacy:  # start() returns after the member's first rebalance: 8 at a time
            with ThreadPoolExecutor(8) as pool:
                list(pool.map(self.start_member, range(self.size)))
        else:
            for slot in range(self.size):
                self.start_member(slot)
        self.wait_settled(started, timeout=300)
        return time.monotonic() - started

    def steady(self) -> tuple[dict[str, float], list[float]]:
        self.members.everywhere("reset_gaps")
        window = CpuWindow({"members": self.members.pids, **self.env.pids})
        time.sleep(STEADY_S)
        cores = window.cores()
        gaps = [gap * 1000 for found in self.members.everywhere("gaps") for gap in found.values()]
        return cores, sorted(gaps)

    def bounce(self, slot: int) -> Bounce:
        monitor = self.monitor
        time.sleep(self.random.uniform(0, JITTER_S))
        downtime_s = self.env.downtime_s + self.random.uniform(0, JITTER_S)
        old_key = self.current[slot]
        generation_before = monitor.generation
        stayed = [view for key, view in list(monitor.live.items()) if key != old_key]
        marks = {view.key: len(view.pauses) for view in stayed}
        attempts_mark = len(monitor.attempts)
        monitor.remove(old_key)  # its own revocation at close is no pause of a member that stayed
        closed_at, old_last = self.members.on_slot(slot, "close", slot)
        time.sleep(max(0.0, closed_at + downtime_s - time.monotonic()))
        with monitor.lock:
            settled_early, generation_mid = monitor.settled_at, monitor.generation
            close_attempts = len(monitor.attempts)
        restarted_at = time.monotonic()
        new_view = self.start_member(slot)
        settled_at = self.wait_settled(restarted_at)
        generation_after = monitor.generation

        attempts = monitor.attempts[attempts_mark:]
        if self.variant.legacy:
            stayed_keys = {view.key for view in stayed}
            successes: dict[tuple[int, int], int] = {}
            for _, key, outcome in attempts:
                if outcome == "success" and key in stayed_keys:
                    successes[key] = successes.get(key, 0) + 1
            rebalances = max(successes.values(), default=0)
            close_changed = any(o == "success" for _, _, o in monitor.attempts[attempts_mark:close_attempts])
            restart_changed = any(o == "success" for _, _, o in monitor.attempts[close_attempts:])
        else:
            rebalances = generation_after - generation_before
            close_changed = generation_mid > generation_before
            restart_changed = generation_after > generation_mid
        rebalance_ms: list[float] = []
        rejoin_ms = None
        if settled_early is not None and settled_early >= closed_at and close_changed:
            rebalance_ms.append((settled_early - closed_at) * 1000)
            if restart_changed:
                rebalance_ms.append((settled_at - restarted_at) * 1000)
            else:
                rejoin_ms = (settled_at - restarted_at) * 1000
        elif rebalances > 0:
            rebalance_ms.append((settled_at - closed_at) * 1000)  # the close's rebalance ran into the restart
        else:
            rejoin_ms = (settled_at - restarted_at) * 1000
        pauses = []
        paused = 0
        for view in stayed:
            found = [(end - start) * 1000 for start, end in view.pauses[marks[view.key] :]]
            pauses += found
            paused += bool(found)
        gap = (new_view.first - old_last) * 1000 if new_view.first is not None and old_last is not None else None
        failed = sum(outcome != "success" for _, _, outcome in attempts)
        return Bounce(rebalances, rebalance_ms, rejoin_ms, gap, pauses, paused, len(stayed), failed)

    def close(self) -> None:
        self.members.everywhere("close_all")


def bounce_order(size: int, bounces: int | None) -> list[int]:
    """The slots to bounce, in order: all of them, or ``bounces`` evenly spaced ones (default: all up to
    ROLLING_MAX members, else SAMPLE)."""
    if bounces is None:
        bounces = size if size <= ROLLING_MAX else SAMPLE
    if bounces >= size:
        return list(range(size))
    return [i * size // bounces for i in range(bounces)]


def default_rate(size: int) -> float:
    return min(50.0, TOPIC_RECORDS_PER_S / (size * PARTITIONS_PER_MEMBER))


def measure(env: Env, members: Members, variant: Variant, size: int, bounces: int | None) -> Result:
    run = Run(env, members, variant, size)
    try:
        setup_s = run.start()
        cores, gaps = run.steady()
        result = Result(variant, size, setup_s, cores, gaps)
        for number, slot in enumerate(bounce_order(size, bounces), 1):
            bounce = run.bounce(slot)
            result.bounces.append(bounce)
            rebalance = ", ".join(f"{ms:.0f}" for ms in bounce.rebalance_ms) or "-"
            pause = f"{max(bounce.pauses_ms):.0f}" if bounce.pauses_ms else "-"
            gap = f"{bounce.restart_gap_ms:.0f}" if bounce.restart_gap_ms is not None else "-"
            print(
                f"   {variant.key:>11} {size:>3} bounce {number:>2} (m{slot:03d}): {bounce.rebalances} rebalances "
                f"({rebalance} ms), {bounce.paused_members}/{bounce.stayed} members paused (longest {pause} ms), "
                f"restarted slot's gap {gap} ms",
                flush=True,
            )
        return result
    finally:
        run.close()


# ---- output -----------------------------------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def ratio(baseline: float | None, value: float | None) -> str:
    if baseline is None or value is None:
        return "-"
    if value <= 0:
        return "inf" if baseline > 0 else "-"
    return f"{baseline / value:.1f}x"


def print_table(size: int, results: list[Result], bounces: int | None, hosts: int, rate: float) -> None:
    order = bounce_order(size, bounces)
    how = "every member once, in order" if len(order) == size else f"a sample of {len(order)} evenly spaced slots"
    where = f"{hosts} host process{'es' if hosts > 1 else ''}" if hosts else "threads of this process"
    spacing = 1000 / (rate * PARTITIONS_PER_MEMBER)
    print(
        f"\n{size} members ({where}), {size * PARTITIONS_PER_MEMBER} partitions at {rate:g} records/s each (a record "
        f"every ~{spacing:.0f} ms per member); {len(order)} bounces ({how}); pauses of the {size - 1} members that "
        "stayed\n"
    )
    print(
        f"   {'variant':<34} {'rebalances':>10} {'rebalance ms':>13} {'pause ms (paused members)':>25} "
        f"{'members':>8} {'restarted':>9} {'lost':>8}  {'legacy / variant':>23}"
    )
    print(
        f"   {'':<34} {'per bounce':>10} {'median':>6} {'max':>6} {'median':>8} {'p95':>7} {'max':>8} "
        f"{'paused':>8} {'gap ms':>9} {'member·s':>8}  {'rebalance':>9} {'pause':>6} {'lost':>6}"
    )
    baseline = next((r for r in results if r.variant.legacy), None)

    def figures(result: Result) -> tuple[float | None, float | None, float]:
        rebalance, pauses = result.rebalance_ms(), result.pauses_ms()
        return (
            statistics.median(rebalance) if rebalance else None,
            statistics.median(pauses) if pauses else None,
            result.lost_member_s(),
        )

    base = figures(baseline) if baseline is not None else (None, None, None)
    for result in results:
        rebalance, pauses = result.rebalance_ms(), result.pauses_ms()
        mine = figures(result)
        per_bounce = statistics.mean(b.rebalances for b in result.bounces)
        cells = f"{mine[0]:>6.0f} {max(rebalance):>6.0f}" if rebalance else f"{'-':>6} {'-':>6}"
        if pauses:
            cells += f" {mine[1]:>8.0f} {percentile(pauses, 0.95):>7.0f} {max(pauses):>8.0f}"
        else:
            cells += f" {'-':>8} {'-':>7} {'-':>8}"
        paused = statistics.mean(b.paused_members for b in result.bounces)
        gaps = [b.restart_gap_ms for b in result.bounces if b.restart_gap_ms is not None]
        gap = f"{statistics.median(gaps):>9.0f}" if gaps else f"{'-':>9}"
        if result is baseline:
            ratios = f"{'(baseline)':>23}"
        else:
            ratios = f"{ratio(base[0], mine[0]):>9} {ratio(base[1], mine[1]):>6} {ratio(base[2], mine[2]):>6}"
        print(
            f"   {result.variant.label:<34} {per_bounce:>10.1f} {cells} {paused:>4.1f}/{size - 1:<3} {gap} "
            f"{mine[2]:>8.2f}  {ratios}"
        )
    print()
    for result in results:
        cpu = result.steady_cpu
        notes = []
        rejoins = [b.rejoin_ms for b in result.bounces if b.rejoin_ms is not None]
        if rejoins:
            notes.append(f"restart -> settled without a rebalance: median {statistics.median(rejoins):.0f} ms")
        if result.variant.legacy:
            failed = statistics.mean(b.failed_attempts for b in result.bounces)
            notes.append(f"failed rebalance attempts (conflicts, errors) per bounce: {failed:.1f}")
        line = (
            f"{result.variant.key}: set-up {result.setup_s:.1f} s. Steady state: CPU cores members "
            f"{cpu['members']:.2f}, node {cpu['node']:.2f}, ZooKeeper {cpu['zookeeper']:.2f}, whole machine "
            f"{cpu['machine']:.2f} of {os.cpu_count()}; "
            + (
                f"longest gap between two records of a member: median {statistics.median(result.steady_gaps_ms):.0f} "
                f"ms, max {max(result.steady_gaps_ms):.0f} ms"
                if max(result.steady_gaps_ms, default=0) > 0
                else "no records (ownership gaps)"
            )
            + "".join(f"; {note}" for note in notes)
        )
        print(textwrap.fill(line, width=118, initial_indent="   ", subsequent_indent="      "))


def describe(env: Env, rate: float | None, hosts_note: str) -> None:
    jitter = JITTER_S * 1000
    downtime = env.downtime_s * 1000
    legacy_pause = (
        "from the last record its KafkaStream handed out before the release to the first one after (LegacyConsumer."
        "streams(), one stream per member, iterated in a thread of its own)"
        if env.streams
        else "its ownership gap, as LegacyConsumer has no streams() in this tree: from the legacy.assignment that "
        "released partitions to the next one that claimed some (no records)"
    )
    paragraphs = [
        f"Members: {hosts_note}. A client member polls in a thread of its own (poll(timeout_ms={POLL_TIMEOUT_MS}) "
        "and nothing else) and its coordinator traffic runs on its own native hub thread; a legacy member's "
        "ZooKeeper session runs on its own hub thread, its KafkaStream in a thread of its own.",
        f"Records: SyntheticSource, {PARTITIONS_PER_MEMBER} partitions per member, "
        + (
            f"{rate:g} records/s per partition"
            if rate
            else f"{TOPIC_RECORDS_PER_S} records/s over the whole topic (at most 50/s per partition), to keep the "
            "members' CPU within the machine"
        )
        + ": the start of a pause is known to about one record's spacing (given with each table). Both sides "
        "commit before they give partitions up (client enable.auto.commit, legacy auto.commit.enable); a partition "
        "without a commit starts at its latest offset.",
        f"Timeouts: client session.timeout.ms {SESSION_TIMEOUT_MS}, heartbeat.interval.ms {HEARTBEAT_INTERVAL_MS}, "
        "max.poll.interval.ms (the rebalance timeout) 300000; legacy zookeeper.session.timeout.ms "
        f"{SESSION_TIMEOUT_MS}, rebalance.backoff.ms 200, rebalance.max.retries 10 (as in legacy_rebalance.py; 0.8.2's "
        "defaults are 2000 ms and 4). Coordinator node: " + ", ".join(f"{k}={v}" for k, v in NODE_OVERRIDES.items()),
        f"A bounce: after a random 0-{jitter:.0f} ms, stop the member's poll loop and close() it (client: commit, "
        "on_partitions_revoked, LeaveGroup unless static; legacy: commit, close the ZooKeeper session); "
        f"{downtime:.0f}-{downtime + jitter:.0f} ms after the close start a new instance in the slot (same client.id "
        "/ consumer.id; static: the same group.instance.id, well within the session timeout); wait until the group "
        f"is settled and nobody reported anything for {QUIET_S:.1f} s. The random waits (fixed seed, the same for "
        "every variant) put the triggers at random points of the heartbeat cycle. Bounced: every member in order "
        f"in groups of at most {ROLLING_MAX}, else a fixed sample of {SAMPLE} evenly spaced slots (--bounces).",
        "Rebalances: generations the client group went through in the bounce; legacy: the most successful rebalance "
        "attempts of any member that stayed. Rebalance time: from the trigger (close(), or the new instance's start) "
        "until every live member holds its part of a complete, disjoint assignment (client: all STABLE on one "
        "generation), from the client.state / client.assignment / legacy.assignment trace events; a close whose "
        "rebalance still ran when the new instance started counts once, from the close.",
        "Pause: per member that stayed, from the last record it processed before it gave partitions up "
        "(client.partitions_revoked or _lost) to the first record it processed after that (client.consumed); "
        f"legacy: {legacy_pause}. A member that gave nothing up did not pause. Members paused: per bounce, of those "
        "that stayed. Restarted gap: the bounced slot, from the last record of the old instance to the first of the "
        "new one (the downtime included). Lost: member-seconds of pause per bounce. legacy / variant: the ratios of "
        "the medians (rebalance time, pause) and of lost.",
    ]
    print("\nHow this is measured")
    for paragraph in paragraphs:
        print(textwrap.fill(paragraph, width=118, initial_indent="   ", subsequent_indent="   "))
    sys.stdout.flush()


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as file:
        cpu = next((line.split(":", 1)[1].strip() for line in file if line.startswith("model name")), cpu)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return f"{os.cpu_count()} cores, {cpu}; {platform.python_implementation()} {platform.python_version()}; load {load}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--members", default="10,50,100", help="member counts, comma-separated")
    parser.add_argument(
        "--bounces", type=int, help=f"bounces per group (default: every member up to {ROLLING_MAX}, else {SAMPLE})"
    )
    parser.add_argument("--members-per-process", type=int, default=10, help="0: every member in this process")
    parser.add_argument("--downtime-ms", type=int, default=1000, help="close() to restart, plus 0-500 ms at random")
    parser.add_argument(
        "--rate", type=float, help=f"records/s per partition (default: {TOPIC_RECORDS_PER_S}/s over the topic, <= 50)"
    )
    parser.add_argument("--variants", default=",".join(v.key for v in VARIANTS), help="comma-separated subset")
    parser.add_argument("--quick", action="store_true", help="10 members, 3 bounces (a smoke test)")
    parser.add_argument("--trace-dir", type=Path, help="also write every member's trace events (JSON lines) here")
    args = parser.parse_args()
    sizes = [10] if args.quick else [int(x) for x in args.members.split(",")]
    bounces = 3 if args.quick else args.bounces
    chosen = [v for v in VARIANTS if v.key in args.variants.split(",")]
    if args.downtime_ms + JITTER_S * 1000 >= SESSION_TIMEOUT_MS:
        parser.error("the downtime must stay below the session timeout for the static bounce")
    logging.basicConfig(level=logging.CRITICAL)  # commits refused mid-rebalance and the like are expected here
    logging.getLogger(__name__).setLevel(logging.ERROR)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so that the cleanup below runs
    parent = REPO / "var"
    created_parent = not parent.exists()
    parent.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="client-rebalance-bench-", dir=parent))
    started = time.monotonic()
    zk = EmbeddedZooKeeper(data_dir=root / "zookeeper", tick_time_ms=500, max_session_timeout_ms=60_000)
    node: NodeProcess | None = None
    members: Members | None = None
    try:
        print(f"Machine: {machine()}", flush=True)
        zk.start()
        connect = f"{zk.connect_string}/bench"
        with contextlib.closing(KazooClient(hosts=zk.connect_string)) as client:
            client.start(timeout=30)
            client.ensure_path("/bench")
            client.stop()
        with contextlib.closing(KazooClient(hosts=connect)) as client:
            client.start(timeout=30)
            admin.register_broker(client, 0, "localhost", 9092, timestamp_ms=1, persistent=True)
            for size in sizes:
                admin.create_topic(client, f"{TOPIC_PREFIX}-{size}", size * PARTITIONS_PER_MEMBER)
            client.stop()
        node = NodeProcess(1, connect, root / "offsets", NODE_OVERRIDES, root, log_level="WARNING")
        node.wait_serving(60)
        bootstrap = "{}:{}".format(*node.address)
        env = Env(
            connect=connect,
            bootstrap=bootstrap,
            pids={"node": [node.process.pid], "zookeeper": [zk._process.pid] if zk._process else []},
            downtime_s=args.downtime_ms / 1000,
            streams=legacy_has_streams(),
        )
        print(f"ZooKeeper {zk.connect_string} (tickTime 500 ms); coordinator node {bootstrap}", flush=True)
        per = args.members_per_process
        hosts_note = (
            f"threads of ceil(members / {per}) host processes per member count (slot s on host s mod hosts), "
            "reused by its variants"
            if per
            else "threads of this process"
        )
        describe(env, args.rate, hosts_note)
        for size in sizes:
            hosts = math.ceil(size / per) if per else 0
            print(f"\n{size} members: starting {hosts or 'no'} host processes ...", flush=True)
            if args.trace_dir is not None:
                args.trace_dir.mkdir(parents=True, exist_ok=True)
            rate = args.rate or default_rate(size)
            members = Members(hosts, SyntheticSource(rate_per_partition=rate).spec, args.trace_dir, f"{size}-")
            results = [measure(env, members, variant, size, bounces) for variant in chosen]
            members.close()
            members = None
            print_table(size, results, bounces, hosts, rate)
    finally:
        if members is not None:
            members.close()
        if node is not None:
            node.stop()
        zk.stop()
        shutil.rmtree(root, ignore_errors=True)
        if created_parent:
            with contextlib.suppress(OSError):
                parent.rmdir()  # only if empty: someone else may use it too
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"\nTotal {time.monotonic() - started:.0f} s; load average now {load} (other processes skew the figures)")


if __name__ == "__main__":
    main()
