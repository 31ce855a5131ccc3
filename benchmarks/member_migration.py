"""A legacy group moved to coordinator members one member at a time, against the whole group stopped and started
again: ``zkcoord compare run --scenario member-migration`` with 10 members (docs/compare.md, "Migrating members").

Both runs start 10 zkcoord legacy members on 20 partitions of the synthetic source (20 records/s per partition,
1 ms per record) and one coordinator node on an embedded ZooKeeper. ``member-by-member`` puts the group in
DUAL_WRITE (``migrate up --to 0001_dual_commit``), then for each legacy member starts a coordinator member, waits
until it owns partitions and closes the legacy member; ``whole-group`` closes all legacy members at once, migrates
and starts all coordinator members. Printed per run, from its traces: partitions owned twice (the history
checker's), records processed twice, the longest time one partition went without a processed record, and the
steps' settle times on stderr. The traces stay in ``--out`` for ``zkcoord pipeline rebalance-report``. About
2 minutes on 2 cores.

    python benchmarks/member_migration.py [--members 10] [--out var/bench-member-migration]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from zkcoord.compare.runner import CompareOptions, compare_run
from zkcoord.compare.scenarios import MEMBER_BY_MEMBER, WHOLE_GROUP, Workload
from zkcoord.tables import format_table

VARIANTS = (WHOLE_GROUP, MEMBER_BY_MEMBER)
COLUMNS = ("owned_twice", "records_duplicated", "longest_pause_ms", "violations")


def progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--members", type=int, default=10, help="legacy members moved (default 10)")
    parser.add_argument("--out", default="var/bench-member-migration", help="where the traces go")
    args = parser.parse_args(argv)
    options = CompareOptions(
        out=Path(args.out),
        scenarios=["member-migration"],
        variants=list(VARIANTS),
        workload=Workload(members=args.members, partitions=2 * args.members),
        node_properties={"group.initial.rebalance.delay.ms": 0},
    )
    results = compare_run(options, say=progress)
    rows = [
        [r["variant"], r["status"], *(r.get("figures", {}).get(column, "-") for column in COLUMNS)] for r in results
    ]
    print(f"\nmember-migration of {args.members} legacy members to coordinator members, {2 * args.members} partitions:")
    print(format_table(["variant", "status", *COLUMNS], rows))
    pauses = {r["variant"]: r.get("figures", {}).get("longest_pause_ms") for r in results}
    if pauses.get(WHOLE_GROUP) and pauses.get(MEMBER_BY_MEMBER) is not None:
        ratio = pauses[MEMBER_BY_MEMBER] / pauses[WHOLE_GROUP]
        print(f"longest partition pause, member by member ÷ whole group: {ratio:.2f}")
    print(f"traces: {args.out} (zkcoord pipeline rebalance-report --in {args.out} --out REPORT_DIR)")
    return 0 if all(r["status"] == "ok" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
