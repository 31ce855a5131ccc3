"""``zkcoord faults run``: the fault campaign (docs/faults.md), seeded, resumable, checked by the history checker.

Must not import another command family module; shared helpers come from ``zkcoord.cli.common``.
"""

import argparse
from pathlib import Path

from zkcoord.cli.common import EXIT_OK, EXIT_PROBLEM, UsageError, comma_list, set_resume_hint


def cmd_faults_run(args: argparse.Namespace) -> int:
    """Run the seeds not yet in OUT/runs.jsonl; exit 1 when a run failed or broke a rule."""
    from zkcoord.faults.campaign import CampaignOptions, failed, run_campaign
    from zkcoord.interrupts import stop_on_interrupt

    options = CampaignOptions(
        out=Path(args.out),
        runs=args.runs,
        first_seed=args.seed,
        window_s=args.window,
        kinds=comma_list(args.kinds),
        session_timeout_ms=args.session_timeout_ms,
        rate=args.rate,
        handover_slack_ms=args.handover_slack_ms,
        migrate=not args.no_migration,
        rdkafka_members=args.rdkafka_members,
        mixed_members=args.mixed_members,
    )
    stop_on_interrupt()
    set_resume_hint(f"every finished run in {args.out}/runs.jsonl, the run under way stopped", "the same command")
    try:
        records = run_campaign(options)
    except ValueError as error:
        raise UsageError(str(error)) from None
    bad = [record["seed"] for record in records if failed(record)]
    if bad:
        print(f"{len(bad)} of {len(records)} runs failed or broke a rule: seeds {', '.join(map(str, bad))}")
    print(f"traces and logs in {args.out}/runs/seed-N; rerun one with --seed N --runs 1 after removing its line")
    return EXIT_PROBLEM if bad else EXIT_OK


def register(commands) -> None:
    """Add ``faults`` to the ``zkcoord`` subcommands."""
    from zkcoord.compare.history import HANDOVER_SLACK_MS
    from zkcoord.faults.schedule import FAULT_KINDS

    faults = commands.add_parser("faults", help="fault campaigns on real processes, checked from their traces")
    actions = faults.add_subparsers(dest="action", required=True)
    run = actions.add_parser("run", help="run seeded fault runs (resumes where OUT/runs.jsonl stops)")
    run.add_argument("--out", required=True, metavar="DIR", help="where runs.jsonl, traces and logs go")
    run.add_argument("--runs", type=int, default=5, help="how many runs (default 5)")
    run.add_argument("--seed", type=int, default=1, help="the first run's seed; run i has seed SEED+i (default 1)")
    run.add_argument("--window", type=float, default=20.0, help="seconds of faults per run (default 20)")
    run.add_argument("--kinds", default=",".join(FAULT_KINDS), help="comma-separated fault kinds (default: all)")
    run.add_argument("--session-timeout-ms", type=int, default=4000, help="ZooKeeper and group sessions")
    run.add_argument("--rate", type=float, default=20.0, help="records/s per partition (default 20)")
    run.add_argument(
        "--handover-slack-ms",
        type=int,
        default=HANDOVER_SLACK_MS,
        help=f"overlap of two owners the checker tolerates (default {HANDOVER_SLACK_MS})",
    )
    run.add_argument(
        "--rdkafka-members",
        type=int,
        default=2,
        metavar="N",
        help="librdkafka members, through the nodes' Kafka listeners to a Kafka broker (default 2; 0: none)",
    )
    run.add_argument(
        "--mixed-members",
        type=int,
        default=1,
        metavar="N",
        help="zkcoord legacy members, and as many client members, in one DUAL_WRITE group the nodes bridge "
        "(default 1; 0: no mixed group)",
    )
    run.add_argument("--no-migration", action="store_true", help="leave the legacy group's migration alone")
    run.set_defaults(func=cmd_faults_run)
