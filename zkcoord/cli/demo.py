"""``zkcoord demo``: the comparison, members moved one by one, a migration there and back, and the report, in one
run (``make demo``).

Must not import another command family module; shared helpers come from ``zkcoord.cli.common``.
"""

import argparse
import signal
from pathlib import Path

from zkcoord.cli.common import comma_list
from zkcoord.errors import StopRequested


def cmd_demo(args: argparse.Namespace) -> int:
    """Run the demo; Ctrl-C (130) and SIGTERM (0) stop it after every process it started has stopped."""
    from zkcoord.compare.runner import RunInterrupted
    from zkcoord.demo import run_demo
    from zkcoord.interrupts import stop_on_interrupt

    variants = tuple(comma_list(args.variants))
    stop_on_interrupt()
    try:
        return run_demo(Path(args.out), members=args.members, partitions=args.partitions, variants=variants)
    except RunInterrupted as stopped:  # in the comparison: what the signal raises elsewhere in the demo
        raise (StopRequested if stopped.signum == signal.SIGTERM else KeyboardInterrupt) from None


def register(commands) -> None:
    """Add ``demo`` to the ``zkcoord`` subcommands."""
    demo = commands.add_parser(
        "demo", help="compare the old and the new rebalance, move members, migrate a group, report"
    )
    demo.add_argument("--members", type=int, default=4, help="members of the compared groups (default 4)")
    demo.add_argument("--partitions", type=int, default=8, help="partitions of each topic (default 8)")
    demo.add_argument("--variants", default="legacy,eager,static,cooperative", help="variants compared")
    demo.add_argument("--out", default="var/demo", help="where traces and the report go (default var/demo)")
    demo.set_defaults(func=cmd_demo)
