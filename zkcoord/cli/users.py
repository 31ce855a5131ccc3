"""``zkcoord users``: SCRAM credentials of users in ZooKeeper, as ``kafka-configs --entity-type users`` manages them.

Must not import another command family module; shared helpers come from ``zkcoord.cli.common``.
"""

import argparse
import re

from zkcoord.auth.scram import DEFAULT_ITERATIONS, HASHES, ScramCredential, make_credential
from zkcoord.cli.common import EXIT_OK, UsageError, emit_json, zookeeper, zookeeper_option
from zkcoord.zk import users

# kafka-configs' --add-config: split at commas outside [...], then at the first '=' of each item.
_CONFIG_ITEM = re.compile(r"\s*([^=,\[\]]+?)\s*=\s*(\[[^\]]*\]|[^,\[\]]*)\s*(?:,|$)")
# ConfigCommand's SCRAM value: an optional iteration count, then the password, which takes the rest.
_SCRAM_VALUE = re.compile(r"(?:iterations=([0-9]+),)?password=(.*)", re.DOTALL)


def _entity(user: str) -> str:
    return f"user-principal '{user}'"


def parse_add_config(text: str) -> dict[str, ScramCredential]:
    """``SCRAM-SHA-256=[iterations=8192,password=secret],SCRAM-SHA-512=[password=secret]`` as new credentials."""
    credentials = {}
    position = 0
    while position < len(text):
        item = _CONFIG_ITEM.match(text, position)
        if item is None or item.end() == position:
            raise UsageError(f"--add-config: cannot read {text[position:]!r}: configs are KEY=[VALUE],...")
        position = item.end()
        mechanism, value = item[1], item[2].removeprefix("[").removesuffix("]").strip()
        if mechanism not in HASHES:
            raise UsageError(f"--add-config: {mechanism!r} is not a SCRAM mechanism ({', '.join(HASHES)})")
        scram = _SCRAM_VALUE.fullmatch(value)
        if scram is None:
            raise UsageError(f"--add-config: invalid credential property {mechanism}=[iterations=N,]password=...")
        iterations = int(scram[1]) if scram[1] else DEFAULT_ITERATIONS
        credentials[mechanism] = make_credential(mechanism, scram[2], iterations)
    if not credentials:
        raise UsageError("--add-config is empty")
    return credentials


def _describe_line(user: str, mechanisms: dict[str, int]) -> str:
    if not mechanisms:
        return f"No SCRAM credential configs for {_entity(user)}"
    described = ", ".join(f"{mechanism}=iterations={iterations}" for mechanism, iterations in mechanisms.items())
    return f"SCRAM credential configs for {_entity(user)} are {described}"


def cmd_users(args: argparse.Namespace) -> int:
    if args.entity_type != "users":
        raise UsageError(f"--entity-type {args.entity_type!r}: zkcoord users manages only 'users'")
    if args.alter:
        if not args.entity_name:
            raise UsageError("--alter needs --entity-name")
        if not args.add_config and not args.delete_config:
            raise UsageError("--alter needs --add-config or --delete-config")
        upserts = parse_add_config(args.add_config) if args.add_config else {}
        deletions = [name.strip() for name in (args.delete_config or "").split(",") if name.strip()]
        unknown = [name for name in deletions if name not in HASHES]
        if unknown:
            raise UsageError(f"--delete-config: {', '.join(unknown)} not a SCRAM mechanism ({', '.join(HASHES)})")
        # Kafka's bootstrap creates SCRAM users before any broker registers: the chroot is created, unwarned.
        with zookeeper(args, create_chroot=True) as zk:
            users.alter_scram_credentials(zk, args.entity_name, upserts, deletions)
        print(f"Completed updating config for entity: {_entity(args.entity_name)}.")
        return EXIT_OK
    with zookeeper(args) as zk:
        described = users.describe_users(zk, args.entity_name)
    if args.json:
        emit_json(described)
    else:
        for user, mechanisms in described.items():
            print(_describe_line(user, mechanisms))
    return EXIT_OK


def register(commands) -> None:
    """Add ``users`` to the ``zkcoord`` subcommands."""
    parser = commands.add_parser(
        "users", help="SCRAM credentials of users in ZooKeeper, as kafka-configs --entity-type users"
    )
    zookeeper_option(parser)
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--alter", action="store_true", help="add or delete credentials of --entity-name")
    action.add_argument("--describe", action="store_true", help="the mechanisms and iterations of users")
    parser.add_argument("--entity-type", default="users", help="only 'users' (accepted as kafka-configs takes it)")
    parser.add_argument("--entity-name", metavar="USER", help="the user (with --describe: default every user)")
    parser.add_argument(
        "--add-config",
        metavar="CONFIGS",
        help="'SCRAM-SHA-256=[iterations=8192,password=secret],SCRAM-SHA-512=[password=secret]'",
    )
    parser.add_argument("--delete-config", metavar="MECHANISMS", help="'SCRAM-SHA-512' (comma-separated)")
    parser.add_argument("--json", action="store_true", help="with --describe: a JSON object by user")
    parser.set_defaults(func=cmd_users)
