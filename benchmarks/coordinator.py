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
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from coordinator_harness import (
    HERE,
    OFFSETS_PARTITIONS,
    SESSION_TIMEOUT_MS,
    Scale,
    Server,
    Throughput,
    Workers,
    machine,
    measure,
    print_profile,
    verdict,
    wait_no_migration_reads,
)
from coordinator_rebalance import LARGE_REBALANCE, REBALANCE_CONFIGS, rebalance_phase, rebalance_summary
from kazoo.client import KazooClient

from zkcoord.group.coordinator import partition_for
from zkcoord.testing.node_process import GATEWAY_PORTS
from zkcoord.zk import admin
from zkcoord.zk.server import EmbeddedZooKeeper, free_port_block

REPO = HERE.parent
HEARTBEAT_TOPIC, COMMIT_TOPIC = "bench-heartbeat", "bench-commits"
COMMIT_TOPIC_PARTITIONS = 100
AIM_HEARTBEATS = 20_000
AIM_COMMITS = 10_000
AIM_ZOOKEEPER_RATIO = 5.0
AIM_RAW_ZOOKEEPER_RATIO = 1.0  # durable 1-partition commits against the raw client's pipelined znode writes
KAFKA_COMMIT_VERSION = 8  # OffsetCommit's newest version before KIP-848's member epochs


FULL = Scale(1.0, 5.0, 2, 5, 100, 50, 16, 128, 4, 2, 1000, {3000: 2, 100: 6}, {3000: 3, 1000: 3})
QUICK = Scale(0.5, 1.5, 2, 2, 50, 20, 16, 32, 4, 2, 500, {3000: 1, 100: 5})


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
