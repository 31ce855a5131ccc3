"""The ``zkcoord`` argument parser: global options, then each command family's subcommands, in help order.

Knows the families, not their options: each family module's ``register(commands)`` adds its own.
"""

import argparse

from zkcoord.cli import (
    acls,
    cluster,
    compare,
    coordinator,
    demo,
    faults,
    groups,
    kafka,
    lag,
    legacy,
    log,
    migrate,
    users,
)

FAMILIES = (cluster, kafka, legacy, log, coordinator, groups, lag, acls, users, migrate, compare, faults, demo)


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``zkcoord``'s command line; each subcommand sets ``func``, its handler."""
    parser = argparse.ArgumentParser(prog="zkcoord", description="The ``zkcoord`` command.")
    parser.add_argument("--log-level", default="WARNING", help="Python logging level (default WARNING)")
    commands = parser.add_subparsers(dest="command", required=True)
    for family in FAMILIES:
        family.register(commands)
    return parser
