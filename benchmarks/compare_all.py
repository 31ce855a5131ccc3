"""Every variant of ``zkcoord compare run`` side by side, at 10 and 50 members (docs/compare.md, "Every variant at
once"): the ZooKeeper group, zkcoord's coordinator (eager, cooperative, static), the mixed-group migrations,
librdkafka on Kafka 3.9's and on zkcoord's coordinator, and on a Kafka 4 broker the classic protocol and KIP-848.

Starts an embedded ZooKeeper and a Kafka 3.9 broker in a chroot of it (the records of every variant but the Kafka 4
ones, and the legacy groups' ZooKeeper); ``compare run`` starts the Kafka 4 broker (KRaft) itself. For each member
count: every scenario under every variant (2 partitions per member, 20 records/s per partition, 1 ms per record,
6 s sessions), then the PySpark report over that run's traces, whose terminal table it prints, then the figures a
team moving to KIP-848 asks about: rebalances, time to stable, longest member pause and the median of the
members' longest pauses, partitions moved, records processed twice. Each member is a process: 50 members of every
variant take hours on 2 cores; ``--scenario``, ``--variants`` and ``--bounces`` narrow it.

    python benchmarks/compare_all.py [--members 10,50] [--scenario all] [--variants V,...] [--bounces N]
        [--out var/bench-compare-all]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pyarrow.parquet as pq

from zkcoord.compare.production import kafka_spec
from zkcoord.compare.runner import STOPS, CompareOptions, compare_run, signal_of
from zkcoord.compare.scenarios import SCENARIOS, VARIANTS, Workload
from zkcoord.interrupts import stop_on_interrupt
from zkcoord.pipeline.report_summary import sort_rows
from zkcoord.tables import format_table
from zkcoord.testing.kafka_broker import kafka_cluster
from zkcoord.zk.server import EmbeddedZooKeeper

FIGURES = (
    "rebalances",
    "time_to_stable_ms",
    "pause_max_ms",
    "pause_p50_ms",
    "partitions_moved",
    "records_duplicated",
)


def progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def compare(out: Path, workload: Workload, scenarios: list[str], variants: list[str], kafka, duration: float) -> bool:
    """Every scenario under every variant; True if no run failed."""
    options = CompareOptions(
        out=out,
        scenarios=scenarios,
        variants=variants,
        workload=workload,
        duration_s=duration,
        zookeeper=kafka.zk_connect,
        source=kafka_spec(kafka),
        node_properties={"group.initial.rebalance.delay.ms": 0},  # as the brokers'
    )
    return all(result["status"] != "failed" for result in compare_run(options, say=progress))


def report(traces: Path) -> list[dict]:
    """The PySpark report over ``traces`` (its terminal table printed); its summary rows, none if it failed."""
    out = traces / "report"
    shutil.rmtree(out, ignore_errors=True)  # a failed report must not leave an earlier one's rows to print
    command = [sys.executable, "-m", "zkcoord.pipeline", "rebalance-report", "--in", str(traces), "--out", str(out)]
    subprocess.run(command, check=False)
    summary = out / "summary.parquet"
    return pq.read_table(summary).to_pylist() if summary.exists() else []


def figures_table(rows: list[dict]) -> str:
    """The figures of each run, in the report's order: scenarios as docs/compare.md has them, variants along the
    migration path."""
    cells = [
        [r["scenario"], r["variant"], *("-" if r.get(f) is None else r[f] for f in FIGURES)] for r in sort_rows(rows)
    ]
    return format_table(["scenario", "variant", *FIGURES], cells)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--members", default="10,50", help="member counts, comma-separated (default 10,50)")
    parser.add_argument("--scenario", default="all", help=f"comma-separated, or all: {', '.join(SCENARIOS)}")
    parser.add_argument("--variants", help="comma-separated (default: every variant)")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds each window lasts at least")
    parser.add_argument("--bounces", type=int, default=0, help="a rolling bounce bounces the first N members only")
    parser.add_argument("--out", default="var/bench-compare-all", help="where traces and reports go")
    args = parser.parse_args(argv)
    scenarios = list(SCENARIOS) if args.scenario == "all" else args.scenario.split(",")
    variants = args.variants.split(",") if args.variants else list(VARIANTS)
    stop_on_interrupt()  # Ctrl-C and SIGTERM stop every process it started (brokers, ZooKeeper, nodes, members, Spark)
    try:
        return 0 if run(args, scenarios, variants) else 1
    except STOPS as stop:  # after every process it started has been stopped
        signum = signal_of(stop)
        print(f"interrupted ({signum.name}); what finished is in {args.out}", file=sys.stderr)
        return 128 + signum


def run(args: argparse.Namespace, scenarios: list[str], variants: list[str]) -> bool:
    """The comparisons, then their reports; True if no run failed."""
    ok, runs = True, {}
    with tempfile.TemporaryDirectory(prefix="zkcoord-bench-") as scratch:
        zookeeper = EmbeddedZooKeeper(data_dir=Path(scratch) / "zookeeper", max_session_timeout_ms=60_000)
        with zookeeper, kafka_cluster(zookeeper.connect_string) as kafka:
            for members in map(int, args.members.split(",")):
                runs[members] = Path(args.out) / f"members-{members}"
                workload = Workload(members=members, partitions=2 * members, bounces=args.bounces)
                ok &= compare(runs[members], workload, scenarios, variants, kafka, args.duration)
    for members, traces in runs.items():
        print(f"\n{members} members, {2 * members} partitions: the report", flush=True)
        rows = report(traces)
        print(f"\n{members} members: rebalance time and pauses per member (ms)")
        print(figures_table(rows))
    return ok


if __name__ == "__main__":
    sys.exit(main())
