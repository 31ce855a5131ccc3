"""Offset migration throughput: backfill and verify of many groups, against the raw pipelined ZooKeeper read rate.

One coordinator node runs in its own process (benchmarks/coordinator_load.py ``serve``, started by
benchmarks/coordinator.py's ``Server``: a CoordinatorNode as ``zkcoord coordinator start`` runs it) on an embedded
ZooKeeper; this process plays ``zkcoord migrate``: the kazoo client (threading handler), the CoordinatorChannel
(nodes discovered in ZooKeeper) and the Runner are built as the CLI builds them. In one run, prints:

0. set-up (not a result, its time printed): ZooKeeper, the node, 10 topics x 10 partitions under /brokers/topics,
   and a random ZooKeeper offset for every partition of every group (/consumers/[g]/offsets/[t]/[p], pipelined
   ``write_offsets``, 16 groups at a time); the log holds none of them;
1. the baseline: the raw pipelined ZooKeeper read rate, kazoo ``get_async`` of every offset znode in windows of
   ``zkcoord.zk.offsets.BATCH`` (as ``read_groups_offsets`` does), best of two passes; the same reads through
   ``read_groups_offsets`` 200 groups at a time (what verify does); and the coordinator's pipelined OffsetFetch
   rate from the log alone, on as many control groups (no migration state) with as many committed offsets;
2. ``migrate up --all --to 0001_dual_commit`` (ZK_ONLY -> DUAL_WRITE), then the backfill
   ``migrate up --all --to 0002_backfill_log`` (``Runner.run_all``, as the CLI runs ``--all``: ``WORKERS`` groups
   at once, so their reads, state writes and commits are in flight together), each timed: groups/s,
   partitions/s, ZooKeeper requests counted twice: this process's (``KazooClient._call`` wrapped, by request
   type), and all clients' (ZooKeeper's ``zk_packets_received`` from ``mntr``, before and after), the difference
   being the node's (migration-state watches, OffsetFetch's MAX reads, the commit mirror, FindCoordinator); and
   the wall time spent waiting for coordinator requests (``CoordinatorChannel``'s ``call`` and ``pipeline``
   wrapped, summed over the workers' channels). The backfill runs twice, each over half the groups: one group
   after another (``Runner.run`` per group, as ``--all`` ran before), then ``Runner.run_all``. Then every
   offset of the log, read from the node's log directory (not through OffsetFetch, which in ZK_ONLY and
   DUAL_WRITE answers max(log, ZooKeeper)), against ZooKeeper's;
3. ``verify_groups`` over all groups (``migrate verify --all``): the same figures, every group ``ok``, and the log
   offsets verify compared with against the log on disk.

The aim of the issue is a ZooKeeper read rate within 1.2x of the raw rate, for the backfill and for verify: this
process's reads/s are held to it, marked PASS or BELOW (never a non-zero exit status); beside it, partitions/s
against the raw rate (the backfill reads each offset twice: to copy it, and again in its post-condition, after
the copy). Each phase shows the CPU used, in cores, by
the node, ZooKeeper, this process and everything else on the machine (other sessions' tests skew the figures).
--profile runs cProfile in this process (main thread, by cumulative time: where the runner's wall time goes) and
in the node (by own time) during the backfill and the verify. Fixed seed; every process is stopped and the
temporary directory (under the repository's var/, not tmpfs) removed at the end.

    python benchmarks/migration.py [--quick | --groups N] [--profile]
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import os
import pstats
import random
import re
import signal
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from coordinator import CpuWindow, Server, bench_directory, create_topics, machine, print_profile, verdict
from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError

from zkcoord.channel import CoordinatorChannel
from zkcoord.cli.common import zookeeper as cli_zookeeper
from zkcoord.log.inspect import scan_partition
from zkcoord.log.segment import partition_directories
from zkcoord.migration.phases import MigrationError
from zkcoord.migration.runner import WORKERS, Runner, load_steps
from zkcoord.migration.verify import verify_groups
from zkcoord.offsets.records import decode_offset_commit
from zkcoord.zk import layout
from zkcoord.zk.nodes import discover_nodes
from zkcoord.zk.offsets import BATCH, read_groups_offsets, write_offsets
from zkcoord.zk.server import EmbeddedZooKeeper, four_letter_word

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
ROOT = layout.DEFAULT_ROOT  # zkcoord's root, the CLI's --root default
CHROOT = "/bench"
TOPICS, PARTITIONS_PER_TOPIC = 10, 10  # every group has an offset for each of the 100 partitions
TIMEOUT_MS = 30_000  # the CLI's --timeout default
AIM_RATIO = 1.2  # within 1.2x of the raw pipelined read rate
VERIFY_BATCH = 200  # verify_groups' default, groups per pipeline
READS = frozenset({"GetData", "GetChildren", "GetChildren2", "Exists", "GetACL"})
WRITERS = 16  # groups whose offsets are written at once during set-up
SEED = 20240601


@dataclass(frozen=True)
class Scale:
    groups: int


FULL = Scale(1000)
QUICK = Scale(100)


# ---- counting ZooKeeper requests ------------------------------------------------------------------------------


class CountingClient:
    """Counts every request a kazoo client queues (sync calls go through the async ones, so through ``_call``)."""

    def __init__(self, client: KazooClient):
        self.by_type: Counter = Counter()
        inner = client._call

        def call(request, async_object):
            self.by_type[type(request).__name__] += 1
            return inner(request, async_object)

        client._call = call  # an instance attribute: kazoo's own ``self._call(...)`` finds it first

    def snapshot(self) -> Counter:
        return Counter(self.by_type)


@dataclass
class Requests:
    """ZooKeeper requests of one phase: this process's, by type, and all ZooKeeper received (``mntr``)."""

    ours: Counter
    server_total: int

    @property
    def reads(self) -> int:
        return sum(n for kind, n in self.ours.items() if kind in READS)

    @property
    def writes(self) -> int:
        return sum(n for kind, n in self.ours.items() if kind not in READS)

    def describe(self) -> str:
        kinds = ", ".join(f"{kind} {n:,}" for kind, n in self.ours.most_common())
        return kinds or "none"


class TimedChannel:
    """Wall time this process spends in requests to coordinator nodes (``call`` and ``pipeline`` wrapped; the
    FindCoordinator lookups of ``call_coordinator`` are calls too)."""

    def __init__(self, channel: CoordinatorChannel):
        self.seconds = 0.0
        self.requests = 0
        self._wrap(channel)

    def _wrap(self, channel: CoordinatorChannel) -> None:
        inner_clone = channel.clone

        def clone() -> CoordinatorChannel:
            copy = inner_clone()
            self._wrap(copy)
            return copy

        channel.clone = clone
        for name in ("call", "pipeline"):
            inner = getattr(channel, name)

            def timed(*args, _inner=inner, _name=name, **kwargs):
                started = time.perf_counter()
                try:
                    return _inner(*args, **kwargs)
                finally:
                    self.seconds += time.perf_counter() - started
                    self.requests += len(args[1]) if _name == "pipeline" else 1

            setattr(channel, name, timed)


def packets_received(zk: EmbeddedZooKeeper) -> int:
    """ZooKeeper's ``zk_packets_received`` (every request of every client, pings included)."""
    for line in four_letter_word(zk.host, zk.port, "mntr", timeout=5.0).splitlines():
        key, _, value = line.partition("\t")
        if key == "zk_packets_received":
            return int(value)
    raise RuntimeError("mntr has no zk_packets_received")


@dataclass
class Phase:
    """Wall time, CPU, ZooKeeper requests and node requests of one measured phase."""

    name: str
    groups: int = 0
    partitions: int = 0
    seconds: float = 0.0
    cpu: CpuWindow | None = None
    requests: Requests | None = None
    node_requests: int = 0
    channel_seconds: float = 0.0  # this process's wall time in coordinator requests
    channel_requests: int = 0
    failures: list[str] = field(default_factory=list)
    profile: pstats.Stats | None = None
    node_profile: pstats.Stats | None = None


class Measure:
    """Context manager around one phase: wall time, CPU by role, ZooKeeper and node request counts, profiles."""

    def __init__(self, env: Env, name: str, profile: bool = False):
        self.env, self.phase, self.profile = env, Phase(name), profile

    def __enter__(self) -> Phase:
        env = self.env
        self._ours = env.counter.snapshot()
        self._server = packets_received(env.zk)
        self._node = env.server.stats()
        self._channel = (env.timer.seconds, env.timer.requests)
        if self.profile:
            env.server.profile_start()
            self._profiler = cProfile.Profile()
        self._cpu = CpuWindow(env.roles)
        self._started = time.perf_counter()
        if self.profile:
            self._profiler.enable()
        return self.phase

    def __exit__(self, *exc_info) -> None:
        env, phase = self.env, self.phase
        if self.profile:
            self._profiler.disable()
        phase.seconds = time.perf_counter() - self._started
        phase.channel_seconds = env.timer.seconds - self._channel[0]
        phase.channel_requests = env.timer.requests - self._channel[1]
        phase.cpu = self._cpu.stop()
        if self.profile:
            phase.node_profile = env.server.profile_stop()
            phase.profile = pstats.Stats(self._profiler)
        node = env.server.stats()
        phase.node_requests = node["requests"] - self._node["requests"]
        phase.requests = Requests(env.counter.snapshot() - self._ours, packets_received(env.zk) - self._server)


# ---- the environment ------------------------------------------------------------------------------------------


@dataclass
class Env:
    zk: EmbeddedZooKeeper
    server: Server
    client: KazooClient
    counter: CountingClient
    channel: CoordinatorChannel
    timer: TimedChannel
    runner: Runner
    log_dir: Path
    groups: list[str]
    topics: dict[str, int]
    expected: dict[str, dict[tuple[str, int], int]]
    said: list[str]

    @property
    def roles(self) -> dict[str, list[int]]:
        zookeeper_pid = self.zk._process.pid if self.zk._process is not None else 0
        return {"node": [self.server.process.pid], "zookeeper": [zookeeper_pid], "benchmark": [os.getpid()]}

    @property
    def partitions(self) -> int:
        return len(self.groups) * sum(self.topics.values())


def group_names(count: int, prefix: str = "bench-g") -> list[str]:
    return [f"{prefix}{n:05d}" for n in range(count)]


def write_zookeeper_offsets(client: KazooClient, topics: dict[str, int], groups: list[str]) -> dict:
    """A random offset for every partition of every group: the parents created level by level, pipelined across
    groups, then ``write_offsets`` (pipelined within a group) for many groups at once from a thread pool, so that
    ZooKeeper's group commit takes many groups' writes per fsync."""
    rng = random.Random(SEED)
    expected = {g: {(t, p): rng.randrange(1, 10**9) for t, n in topics.items() for p in range(n)} for g in groups}
    levels = [
        [layout.CONSUMERS_PATH],
        [layout.group_path(g) for g in groups],
        [layout.offsets_path(g) for g in groups],
        [layout.offsets_path(g, t) for g in groups for t in topics],
    ]
    for paths in levels:
        for start in range(0, len(paths), BATCH):
            for reply in [client.create_async(path) for path in paths[start : start + BATCH]]:
                with contextlib.suppress(NodeExistsError):
                    reply.get()
    with ThreadPoolExecutor(WRITERS) as pool:
        list(pool.map(lambda group: write_offsets(client, group, expected[group]), groups))
    return expected


# ---- 1. the baseline ----------------------------------------------------------------------------------------


def raw_reads(env: Env) -> None:
    """Every offset znode read with get_async, ``BATCH`` in flight at a time, each answer decoded as the code does."""
    paths = [layout.offset_path(g, t, p) for g in env.groups for t, count in env.topics.items() for p in range(count)]
    for start in range(0, len(paths), BATCH):
        for reply in [env.client.get_async(path) for path in paths[start : start + BATCH]]:
            data, _ = reply.get()
            layout.decode_offset("", data)


def baseline_phase(env: Env) -> dict[str, float]:
    partitions = env.partitions
    print(
        f"\n1. Baseline: raw pipelined ZooKeeper reads, kazoo get_async (threading handler, the runner's) of all "
        f"{partitions:,} offset znodes, {BATCH:,} in flight at a time, best of two passes",
        flush=True,
    )
    passes = []
    for n in range(2):
        with Measure(env, f"raw reads #{n + 1}") as phase:
            raw_reads(env)
        passes.append(phase)
        print(f"   pass {n + 1}: {partitions / phase.seconds:>9,.0f} reads/s in {phase.seconds:.2f} s   {phase.cpu}")
    best = min(passes, key=lambda p: p.seconds)
    raw_rate = partitions / best.seconds

    with Measure(env, "read_groups_offsets") as bulk:
        for start in range(0, len(env.groups), VERIFY_BATCH):
            read_groups_offsets(env.client, env.groups[start : start + VERIFY_BATCH])
    bulk_rate = bulk.requests.reads / bulk.seconds
    print(
        f"   zkcoord.zk.offsets.read_groups_offsets, {VERIFY_BATCH} groups per call (topics, partitions, offsets: each "
        f"level pipelined): {bulk.requests.reads:,} reads in {bulk.seconds:.2f} s, {bulk_rate:,.0f} reads/s, "
        f"{partitions / bulk.seconds:,.0f} partitions/s   {bulk.cpu}",
        flush=True,
    )

    # The coordinator's side of the same reads: OffsetFetch of control groups that are not migrating, from the log.
    control = group_names(len(env.groups), "control-g")
    address = env.channel.addresses()[0]
    commit = [
        (
            "OffsetCommit",
            {
                "group_id": group,
                "generation_id": -1,
                "member_id": "",
                "group_instance_id": None,
                "retention_time_ms": -1,
                "topics": [
                    {
                        "name": topic,
                        "partitions": [
                            {"partition_index": p, "committed_offset": 1 + p, "committed_metadata": ""}
                            for p in range(count)
                        ],
                    }
                    for topic, count in env.topics.items()
                ],
            },
        )
        for group in control
    ]
    fetch = [("OffsetFetch", {"group_id": group, "topics": None}) for group in control]
    started = time.perf_counter()
    committed = env.channel.pipeline(address, commit)
    commit_seconds = time.perf_counter() - started
    bad = sum(1 for r in committed for t in r["topics"] for p in t["partitions"] if p["error_code"])
    env.channel.pipeline(address, fetch)  # the node reads each new group's migration state (none) once
    with Measure(env, "OffsetFetch") as fetched:
        answers = env.channel.pipeline(address, fetch)
    got = sum(len(t["partitions"]) for a in answers for t in a.get("topics") or [])
    fetch_rate = got / fetched.seconds
    per_group = sum(env.topics.values())
    print(
        f"   coordinator, log only: pipelined OffsetFetch of {len(control):,} control groups (no migration state) "
        f"with {per_group} offsets each, committed just before ({commit_seconds:.2f} s, pipelined OffsetCommits of "
        f"{per_group} partitions{f', {bad} partition errors' if bad else ''}): {got:,} partitions in "
        f"{fetched.seconds:.2f} s, {len(control) / fetched.seconds:,.0f} fetches/s, {fetch_rate:,.0f} partitions/s; "
        f"ZooKeeper requests meanwhile {fetched.requests.server_total:,}   {fetched.cpu}",
        flush=True,
    )
    return {"raw": raw_rate, "bulk": bulk_rate, "fetch": fetch_rate}


# ---- 2. the backfill ------------------------------------------------------------------------------------------


def one_after_another(runner: Runner, groups: list[str], to: str):
    """``migrate up --all`` as it ran before ``Runner.run_all``: ``Runner.run`` for one group after another."""
    for group in groups:
        try:
            yield group, runner.run(group, "up", to)
        except MigrationError as error:
            yield group, error


def run_steps(env: Env, name: str, to: str, profile: bool, groups: list[str], together: bool = True) -> Phase:
    how = f"{WORKERS} at a time (Runner.run_all)" if together else "one after another (Runner.run per group)"
    print(f"   {name}: migrate up --all --to {to}, {len(groups):,} groups, {how} ...", flush=True)
    env.said.clear()
    runs = env.runner.run_all(groups, "up", to) if together else one_after_another(env.runner, groups, to)
    with Measure(env, name, profile) as phase:
        phase.groups, phase.partitions = len(groups), len(groups) * sum(env.topics.values())
        started = time.perf_counter()
        shown = started
        for n, (group, outcome) in enumerate(runs, 1):
            if isinstance(outcome, MigrationError):
                phase.failures.append(f"{group}: {outcome}")
            now = time.perf_counter()
            if now - shown >= 10:
                shown = now
                print(f"      {n:,}/{len(groups):,} groups, {n / (now - started):,.1f} groups/s so far", flush=True)
    report_phase(phase)
    return phase


def report_phase(phase: Phase) -> None:
    requests = phase.requests
    seconds = phase.seconds
    groups, partitions = phase.groups, phase.partitions
    print(
        f"   {phase.name}: {seconds:.2f} s, {groups / seconds:,.1f} groups/s, {partitions / seconds:,.0f} partitions/s"
        + (f", {len(phase.failures)} groups FAILED" if phase.failures else "")
    )
    print(
        f"      ZooKeeper, this process: {requests.reads:,} reads ({requests.reads / groups:,.1f}/group, "
        f"{requests.reads / seconds:,.0f} reads/s), {requests.writes:,} writes; {requests.describe()}"
    )
    print(
        f"      ZooKeeper, all clients (mntr zk_packets_received, the node's too): {requests.server_total:,} "
        f"({requests.server_total / groups:,.1f}/group, {requests.server_total / seconds:,.0f}/s); node requests "
        f"{phase.node_requests:,} ({phase.node_requests / groups:,.1f}/group)"
    )
    others = requests.server_total - requests.reads - requests.writes
    print(
        f"      wall time waiting for coordinator requests (FindCoordinator, OffsetFetch, OffsetCommit, "
        f"DescribeGroups), summed over the workers: {phase.channel_seconds:.2f} s "
        f"({phase.channel_seconds / seconds:.0%}) for "
        f"{phase.channel_requests:,} requests; ZooKeeper requests of other clients (the node) meanwhile {others:,} "
        f"({others / groups:,.1f}/group)"
    )
    print(f"      {phase.cpu}", flush=True)
    for failure in phase.failures[:3]:
        print(f"      failed: {failure}")


def log_offsets_on_disk(log_dir: Path) -> dict[str, dict[tuple[str, int], int]]:
    """Every group's offsets as the node's log holds them (the last record of each key, in log order)."""
    found: dict[str, dict[tuple[str, int], int]] = {}

    def visit(_path: Path, batch) -> None:
        for _, key, value in batch.entries():
            record = decode_offset_commit(key, value)
            if record is None:
                continue  # group metadata, or not an offset commit
            group, topic, partition, committed = record
            offsets = found.setdefault(group, {})
            if committed is None:
                offsets.pop((topic, partition), None)
            else:
                offsets[(topic, partition)] = committed.offset

    for directory in partition_directories(log_dir):
        scan_partition(directory, visit=visit)
    return found


def check_log(env: Env) -> dict[str, int]:
    """Every log offset against ZooKeeper's (read again) and against what set-up wrote."""
    zookeeper = {}
    for start in range(0, len(env.groups), VERIFY_BATCH):
        chunk = read_groups_offsets(env.client, env.groups[start : start + VERIFY_BATCH])
        zookeeper.update({group: found.offsets for group, found in chunk.items()})
    logged = log_offsets_on_disk(env.log_dir)
    counts = Counter()
    for group in env.groups:
        zk_offsets, log_offsets = zookeeper[group], logged.get(group, {})
        counts["ZooKeeper = set-up"] += sum(1 for p, o in env.expected[group].items() if zk_offsets.get(p) == o)
        for partition, offset in zk_offsets.items():
            if partition not in log_offsets:
                counts["missing from the log"] += 1
            elif log_offsets[partition] == offset:
                counts["log = ZooKeeper"] += 1
            else:
                counts["log != ZooKeeper"] += 1
        counts["only in the log"] += sum(1 for p in log_offsets if p not in zk_offsets)
    return counts


def backfill_phase(env: Env, profile: bool) -> tuple[Phase, Phase, Phase, dict[str, int]]:
    print(
        f"\n2. Migration of {len(env.groups):,} groups x {sum(env.topics.values())} partitions = {env.partitions:,} "
        f"partitions, as `zkcoord migrate up --all` runs it (Runner.run_all, {WORKERS} groups at once; the log holds "
        f"none of their offsets before); the backfill of the first half of the groups runs one group after another "
        f"as `--all` did before, for comparison in the same run",
        flush=True,
    )
    half = len(env.groups) // 2
    dual = run_steps(env, "0001 (DUAL_WRITE)", "0001_dual_commit", False, env.groups)
    alone = run_steps(
        env, "0002 (backfill, one group after another)", "0002_backfill_log", False, env.groups[:half], False
    )
    said_before = list(env.said)
    backfill = run_steps(env, "0002 (backfill, --all)", "0002_backfill_log", profile, env.groups[half:])
    env.said[:0] = said_before
    said = [line for line in env.said if "backfilling" in line]
    copied = sum(int(match.group(1)) for line in said if (match := re.search(r"backfilling (\d+) of", line)))
    print(
        f"      the runner said it backfilled {copied:,} partitions"
        + (f", e.g. {said[0]!r}" if said else "")
        + (
            "; it compares ZooKeeper with the log as OffsetFetch answers (in DUAL_WRITE: max(log, ZooKeeper))"
            if copied < env.partitions
            else ""
        )
    )
    counts = check_log(env)
    total = env.partitions
    right = counts["log = ZooKeeper"] == total and counts["ZooKeeper = set-up"] == total
    print(
        f"   correctness, every offset of the log (read from {env.log_dir.name}/, not through OffsetFetch) against "
        f"ZooKeeper's: " + ", ".join(f"{what} {n:,}" for what, n in sorted(counts.items()) if n) + f" of {total:,}: "
        f"{'all equal' if right else 'NOT all equal'}",
        flush=True,
    )
    return dual, alone, backfill, counts


# ---- 3. verify ------------------------------------------------------------------------------------------------


def verify_phase(env: Env, profile: bool) -> tuple[Phase, int, int]:
    print(
        f"\n3. migrate verify --all: verify_groups over {len(env.groups):,} groups, {VERIFY_BATCH} per pipeline",
        flush=True,
    )
    with Measure(env, "verify", profile) as phase:
        results = verify_groups(env.client, env.channel, ROOT, env.groups, batch=VERIFY_BATCH)
    statuses = Counter()
    for result in results:
        statuses.update(result.counts)
    ok = sum(1 for result in results if result.ok)
    phase.groups, phase.partitions = len(env.groups), env.partitions
    report_phase(phase)
    own = sum(result.zk_reads for result in results)
    on_disk = log_offsets_on_disk(env.log_dir)
    wrong = sum(
        1
        for result in results
        for row in result.rows
        if row.log != on_disk.get(result.group, {}).get((row.topic, row.partition))
    )
    print(
        f"      groups ok {ok:,} of {len(results):,}; partitions by status: "
        + ", ".join(f"{status} {n:,}" for status, n in statuses.items() if n)
        + f"; zk_reads as verify counts them {own:,}",
        flush=True,
    )
    print(
        f"      the log offsets verify compared with, against the log on disk: {wrong:,} of "
        f"{sum(len(r.rows) for r in results):,} partitions differ"
        + (" (OffsetFetch answered something other than the log)" if wrong else ""),
        flush=True,
    )
    return phase, ok, wrong


# ---- output ---------------------------------------------------------------------------------------------------


def print_client_profile(title: str, stats: pstats.Stats, top: int = 25) -> None:
    """This process's profile by cumulative time (its main thread: kazoo's IO thread is not profiled)."""
    print(f"\n   cProfile of this process (main thread) during {title}: top {top} by cumulative time")
    total = max((row[3] for row in stats.stats.values()), default=1.0) or 1.0
    rows = sorted(stats.stats.items(), key=lambda item: item[1][3], reverse=True)
    shown = 0
    print(f"   {'cum s':>7} {'share':>6} {'calls':>9} {'own s':>7}  function")
    for (file, line, name), (_, calls, own, cumulative, _) in rows:
        if file == "~" and name.startswith("<built-in method builtins.exec"):
            continue
        where = f"{Path(file).name}:{line}" if file != "~" else "built-in"
        print(f"   {cumulative:7.2f} {cumulative / total:6.1%} {calls:>9,} {own:7.2f}  {name} ({where})")
        shown += 1
        if shown >= top:
            break


def summary(
    env: Env,
    rates: dict[str, float],
    dual: Phase,
    alone: Phase,
    backfill: Phase,
    verify: Phase,
    log_ok: bool,
    ok: int,
    wrong: int,
) -> None:
    print("\nSummary (the aim of the issue; being below does not fail this command)\n")
    print(f"   {'measure':<78} {'value':>18}  {'aim':<9} verdict")

    def row(measure: str, value: str, aim: str = "", good: bool | None = None) -> None:
        print(f"   {measure:<78} {value:>18}  {aim:<9} {'' if good is None else verdict(good)}".rstrip())

    raw = rates["raw"]
    row("raw pipelined ZooKeeper reads/s (kazoo get_async, the baseline)", f"{raw:,.0f}/s")
    row("   read_groups_offsets reads/s (200 groups per call)", f"{rates['bulk']:,.0f}/s")
    row("   coordinator OffsetFetch partitions/s, log only (pipelined)", f"{rates['fetch']:,.0f}/s")
    row(f"0001 dual commit, {len(env.groups):,} groups", f"{dual.seconds:,.1f} s")
    aim = f"≤ {AIM_RATIO:g}x"
    labels = ((alone, "backfill, one by one"), (backfill, "backfill, --all"), (verify, "verify"))
    for phase, label in labels:
        partitions = phase.partitions
        reads = phase.requests.reads / phase.seconds
        row(f"{label}: wall time for {partitions:,} partitions", f"{phase.seconds:,.1f} s")
        row(f"{label}: partitions/s", f"{partitions / phase.seconds:,.0f}/s")
        row(f"{label}: ZooKeeper reads/s, this process", f"{reads:,.0f}/s")
        row(f"{label}: raw rate ÷ its ZooKeeper reads/s", f"{raw / reads:,.2f}x", aim, raw / reads <= AIM_RATIO)
        ratio = raw / (partitions / phase.seconds)
        row(f"{label}: raw rate ÷ its partitions/s (one read per partition at least)", f"{ratio:,.2f}x")
        row(
            f"{label}: ZooKeeper requests per partition, this process / all clients",
            (f"{phase.requests.reads / partitions:.2f} / {phase.requests.server_total / partitions:.2f}"),
        )
    speedup = (backfill.partitions / backfill.seconds) / (alone.partitions / alone.seconds)
    row("backfill partitions/s: --all ÷ one by one", f"{speedup:,.2f}x")
    row("log offsets equal to ZooKeeper's after the backfill", "yes" if log_ok else "NO")
    row("verify: groups ok", f"{ok:,} of {len(env.groups):,}")
    row("verify: partitions whose log offset differs from the log on disk", f"{wrong:,}")


# ---- main -----------------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="100 groups instead of 1000 (a smoke test)")
    parser.add_argument("--groups", type=int, help="this many groups (default 1000, --quick 100)")
    parser.add_argument("--profile", action="store_true", help="cProfile this process and the node (backfill, verify)")
    args = parser.parse_args()
    scale = Scale(args.groups) if args.groups else QUICK if args.quick else FULL
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so that the cleanup below runs
    with bench_directory("migration-bench-") as root:
        started = time.monotonic()
        server: Server | None = None
        channel: CoordinatorChannel | None = None
        zk = EmbeddedZooKeeper(data_dir=root / "zookeeper", tick_time_ms=2000, max_session_timeout_ms=60_000)
        try:
            print(f"Machine: {machine()}")
            print(f"Directory: {root} (ZooKeeper's data and the offsets log, on one filesystem)", flush=True)
            zk.start()
            connect = f"{zk.connect_string}{CHROOT}"
            topics = {f"bench-t{n}": PARTITIONS_PER_TOPIC for n in range(TOPICS)}
            create_topics(zk.connect_string, connect, topics)
            zookeeper_at = time.monotonic()
            server = Server(root, connect, root / "server.prof")
            server.wait_loaded()
            server.wait_topics(topics)
            node_at = time.monotonic()
            with cli_zookeeper(argparse.Namespace(zookeeper=connect)) as client:
                counter = CountingClient(client)
                channel = CoordinatorChannel(lambda: discover_nodes(client, ROOT), "zkcoord-migrate", TIMEOUT_MS)
                timer = TimedChannel(channel)
                said: list[str] = []
                runner = Runner(client, channel, load_steps(), root=ROOT, say=said.append)
                groups = group_names(scale.groups)
                expected = write_zookeeper_offsets(client, topics, groups)
                listed = runner.groups()
                if listed != groups:
                    raise RuntimeError(f"runner.groups() lists {len(listed)} groups, not the {len(groups)} written")
                env = Env(
                    zk,
                    server,
                    client,
                    counter,
                    channel,
                    timer,
                    runner,
                    root / "offsets",
                    groups,
                    topics,
                    expected,
                    said,
                )
                written_at = time.monotonic()
                print(
                    f"Set-up: ZooKeeper {zk.connect_string} (pid {env.roles['zookeeper'][0]}) and 10 topics x 10 "
                    f"partitions in {zookeeper_at - started:.1f} s; coordinator node {server.address[0]}:"
                    f"{server.address[1]} (pid {server.process.pid}) with its offsets partitions loaded in "
                    f"{node_at - zookeeper_at:.1f} s; {env.partitions:,} ZooKeeper offsets of {len(groups):,} groups "
                    f"written (write_offsets, pipelined, {WRITERS} groups at a time) in {written_at - node_at:.1f} s",
                    flush=True,
                )
                rates = baseline_phase(env)
                dual, alone, backfill, counts = backfill_phase(env, args.profile)
                log_ok = counts["log = ZooKeeper"] == env.partitions
                verify, ok, wrong = verify_phase(env, args.profile)
                for phase in (backfill, verify):
                    if phase.node_profile is not None:
                        print_profile(f"the {phase.name}", phase.node_profile)
                    if phase.profile is not None:
                        print_client_profile(f"the {phase.name}", phase.profile)
                summary(env, rates, dual, alone, backfill, verify, log_ok, ok, wrong)
        finally:
            if channel is not None:
                channel.close()
            if server is not None:
                server.stop()  # while ZooKeeper still runs: the node resigns its partitions there
            zk.stop()


if __name__ == "__main__":
    main()
