"""``python -m zkcoord.pipeline``: the pipeline's jobs, in a process that imports neither gevent nor kazoo.

Exit codes: 0 done; 1 the report found records that were never processed, or runs that did not finish (it is
written all the same, with a banner); 2 usage or input errors (and a missing PySpark or Java); 130 interrupted.
Each job is imported only when chosen, so one job's dependencies do not hold back another.
"""

import argparse
import sys
from collections.abc import Sequence

from zkcoord.pipeline.spark import DRIVER_MEMORY_HELP

PROG = "python -m zkcoord.pipeline"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description="PySpark jobs over comparison traces and offsets")
    commands = parser.add_subparsers(dest="command", required=True)
    report = commands.add_parser(
        "rebalance-report",
        help="metrics of a comparison run (docs/compare.md): parquet tables, report.html and a terminal table",
    )
    report.add_argument("--in", dest="in_dir", required=True, metavar="DIR", help="a `zkcoord compare run` directory")
    report.add_argument("--out", dest="out_dir", required=True, metavar="REPORT", help="directory for the report")
    report.add_argument("--master", help="Spark master URL (default local[*])")
    report.add_argument("--driver-memory", metavar="SIZE", help=DRIVER_MEMORY_HELP)
    commands.add_parser("offsets-audit", add_help=False, help="audit offsets (see offsets-audit --help)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["offsets-audit"]:
        return _offsets_audit(argv[1:])
    args = build_parser().parse_args(argv)
    return _rebalance_report(args.in_dir, args.out_dir, args.master, args.driver_memory)


def _offsets_audit(argv: list[str]) -> int:
    from zkcoord.pipeline import offsets_audit

    return offsets_audit.main(argv)


def _rebalance_report(in_dir: str, out_dir: str, master: str | None, driver_memory: str | None) -> int:
    try:
        from zkcoord.pipeline import rebalance_report
        from zkcoord.pipeline.spark import SparkUnavailableError
    except ImportError as error:
        print(
            f"{PROG}: the pipeline needs PySpark and matplotlib: pip install 'zkcoord[spark]' ({error})",
            file=sys.stderr,
        )
        return 2
    try:
        summary = rebalance_report.run(in_dir, out_dir, master, driver_memory=driver_memory)
    except (rebalance_report.ReportInputError, SparkUnavailableError) as error:
        print(f"{PROG} rebalance-report: {error}", file=sys.stderr)
        return 2
    missed = [row for row in summary if row["records_missed"]]
    for row in missed:
        print(
            f"records missed: {row['scenario']}/{row['variant']}: {row['records_missed']} produced records were never "
            "processed",
            file=sys.stderr,
        )
    incomplete = [row for row in summary if row.get("incomplete")]
    for row in incomplete:
        print(
            f"incomplete: {row['scenario']}/{row['variant']} did not finish ({row['incomplete']}); the report flags it",
            file=sys.stderr,
        )
    return 1 if missed or incomplete else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # Ctrl-C reaches `zkcoord pipeline` too, which says interrupted in one line
        sys.exit(130)
