"""``zkcoord compare run`` and ``zkcoord pipeline``: the two rebalances under one workload, then the Spark jobs
that read what the comparison (and a cluster's offsets) left behind.

Must not import another command family module; shared helpers come from ``zkcoord.cli.common``.
Must not import pyspark or the pipeline's jobs: they run in a process of their own.
"""

import argparse
import shlex
import signal
import sys
from pathlib import Path

from zkcoord import env
from zkcoord.cli.common import EXIT_INTERRUPTED, EXIT_OK, EXIT_PROBLEM, UsageError, comma_list, parse_key_values


def cmd_compare_run(args: argparse.Namespace) -> int:
    """Run the scenarios under every variant; exit 1 when a run failed, 130 when Ctrl-C stopped them, 0 when SIGTERM
    did (a requested stop); either way every process they started is stopped first."""
    from zkcoord.compare.runner import CompareOptions, RunInterrupted, compare_run
    from zkcoord.compare.scenarios import SCENARIOS, Workload
    from zkcoord.interrupts import stop_on_interrupt

    scenarios = list(SCENARIOS) if args.scenario == "all" else comma_list(args.scenario)
    workload = Workload(
        members=args.members,
        partitions=args.partitions,
        topics=args.topics,
        k=args.k,
        downtime_ms=args.downtime_ms,
        session_timeout_ms=args.session_timeout_ms,
        bounces=args.bounces,
    )
    options = CompareOptions(
        out=Path(args.out),
        scenarios=scenarios,
        variants=comma_list(args.variants) if args.variants else None,
        workload=workload,
        rate=args.rate,
        source=args.source,
        cost_ms=args.cost_ms,
        duration_s=args.duration,
        auto_commit_interval_ms=args.auto_commit_interval_ms,
        zookeeper=args.zookeeper or env.zookeeper_connect(),
        node_properties=parse_key_values(args.node_property or [], "--node-property"),
        jvm_members=args.jvm_members,
        kafka4=args.kafka4_bootstrap,
    )
    stop_on_interrupt()
    try:
        results = compare_run(options)
    except ValueError as error:
        raise UsageError(str(error)) from None
    except RunInterrupted as interrupted:
        print(_interrupted_line(interrupted.entry, interrupted.not_started, args.out), file=sys.stderr)
        return EXIT_OK if interrupted.signum == signal.SIGTERM else EXIT_INTERRUPTED
    failed = [r for r in results if r["status"] == "failed"]
    print(f"traces in {args.out}/traces; next: zkcoord pipeline rebalance-report --in {args.out} --out REPORT_DIR")
    return EXIT_PROBLEM if failed else EXIT_OK


def _interrupted_line(entry: dict | None, not_started: list[dict], out: str) -> str:
    """The one line Ctrl-C (or SIGTERM) leaves: what state the output is in, what is left to run, and how."""
    manifest = f"{out}/compare.json"
    left = ([entry] if entry else []) + not_started
    if entry is None:
        state = f"the finished runs are in {manifest}"
    else:
        state = f"{entry['scenario']} / {entry['variant']} is marked interrupted in {manifest} and its traces"
    if not_started:
        state += ", not started: " + ", ".join(f"{run['scenario']} / {run['variant']}" for run in not_started)
    resume = f"run {_commands_for(left, out)} to resume" if left else "no run is left to do"
    return f"interrupted; the state is: {state}, every process the run started is stopped; {resume}"


def _commands_for(runs: list[dict], out: str) -> str:
    """The ``compare run`` commands that make exactly ``runs``: one per set of variants its scenarios share."""
    variants_of: dict[str, list[str]] = {}
    for run in runs:
        variants_of.setdefault(run["scenario"], []).append(run["variant"])
    scenarios_of: dict[tuple[str, ...], list[str]] = {}
    for scenario, variants in variants_of.items():
        scenarios_of.setdefault(tuple(variants), []).append(scenario)
    return " and ".join(
        f"zkcoord compare run --scenario {','.join(scenarios)} --variants {','.join(variants)} ... "
        f"--out {shlex.quote(out)}"
        for variants, scenarios in scenarios_of.items()
    )


def cmd_pipeline(args: argparse.Namespace) -> int:
    """Run a Spark job in a process of its own: py4j and gevent's patched sockets do not mix."""
    import subprocess

    return subprocess.call([sys.executable, "-m", "zkcoord.pipeline", args.job, *args.job_args])


def register(commands) -> None:
    """Add ``compare`` and ``pipeline`` to the ``zkcoord`` subcommands."""
    from zkcoord.compare.scenarios import SCENARIOS, VARIANTS

    compare = commands.add_parser("compare", help="the same workload under the ZooKeeper and the coordinator rebalance")
    actions = compare.add_subparsers(dest="action", required=True)
    run = actions.add_parser("run", help="run scenarios under every variant and write their traces")
    run.add_argument("--scenario", required=True, help=f"comma-separated, or all: {', '.join(SCENARIOS)}")
    run.add_argument(
        "--variants",
        help=f"comma-separated: {', '.join(VARIANTS)} (default: every one the source can run; the librdkafka "
        "variants need a Kafka source, but for classic-kafka4 and kip848, which run on a Kafka 4 broker of their own)",
    )
    run.add_argument("--members", type=int, default=6, help="members at the start (default 6)")
    run.add_argument("--partitions", type=int, default=12, help="partitions per topic (default 12)")
    run.add_argument("--topics", type=int, default=1, help="topics the group consumes (default 1)")
    run.add_argument("--rate", type=float, default=20.0, help="records/s per partition (default 20)")
    run.add_argument(
        "--source",
        default="synthetic",
        metavar="SPEC",
        help="where records come from: synthetic (default), or kafka:bootstrap=HOST:PORT, a broker the run creates "
        "its topics on and produces --rate into; --zookeeper must then be the broker's (chroot included)",
    )
    run.add_argument("--duration", type=float, default=10.0, help="seconds the window lasts at least (default 10)")
    run.add_argument("--k", type=int, default=2, help="members added or removed, partitions added (default 2)")
    run.add_argument("--cost-ms", type=float, default=1.0, help="processing time per record (default 1)")
    run.add_argument("--auto-commit-interval-ms", type=int, default=1000)
    run.add_argument("--session-timeout-ms", type=int, default=6000, help="ZooKeeper and coordinator sessions")
    run.add_argument("--downtime-ms", type=int, default=1000, help="a bounced member's time down (default 1000)")
    run.add_argument(
        "--bounces", type=int, default=0, help="a rolling bounce bounces the first N members only (default: every one)"
    )
    run.add_argument(
        "--jvm-members",
        type=int,
        default=0,
        metavar="N",
        help="the first N legacy members run Kafka 0.8.2's own consumer in a JVM (needs a Kafka source; default 0)",
    )
    run.add_argument(
        "--kafka4-bootstrap",
        metavar="HOST:PORT",
        help="a running Kafka 4 broker for the classic-kafka4 and kip848 variants (default: the run starts one in "
        "KRaft mode; a given broker's own group.consumer.* timings apply)",
    )
    run.add_argument(
        "--node-property", action="append", metavar="KEY=VALUE", help="coordinator node setting (repeatable)"
    )
    run.add_argument(
        "--zookeeper",
        metavar="HOST:PORT[/chroot]",
        help="ZooKeeper to use (default: $ZKCOORD_ZK_CONNECT, else embedded)",
    )
    run.add_argument("--out", required=True, metavar="DIR", help="where traces, logs and compare.json go")
    run.set_defaults(func=cmd_compare_run)

    pipeline = commands.add_parser("pipeline", help="PySpark jobs over traces, offset exports and offsets logs")
    pipeline.add_argument(
        "job",
        choices=("rebalance-report", "offsets-audit"),
        help="the job (zkcoord pipeline JOB --help for its options)",
    )
    pipeline.add_argument("job_args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    pipeline.set_defaults(func=cmd_pipeline)
