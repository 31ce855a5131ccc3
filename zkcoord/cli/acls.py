"""``zkcoord acls``: Kafka's ACLs in ZooKeeper, added, removed and listed as ``kafka-acls`` does with its
authorizer (``--authorizer-properties zookeeper.connect=...``), with the same options and output.

Must not import another command family module; shared helpers come from ``zkcoord.cli.common``.
"""

import argparse
import contextlib
import sys

from kazoo.client import KazooClient

from zkcoord.auth.acls import (
    CLUSTER_NAME,
    LITERAL,
    PATTERN_TYPES,
    SUPPORTED_OPERATIONS,
    WILDCARD_HOST,
    Acl,
    ResourcePattern,
    ResourcePatternFilter,
    enum_name,
    parse_operation,
    parse_principal,
)
from zkcoord.cli.common import EXIT_OK, UsageError, parse_key_values, zk_connect, zookeeper_at, zookeeper_option
from zkcoord.zk import acls as stored

RESOURCE_OPTIONS = (("topic", "Topic"), ("group", "Group"), ("transactional_id", "TransactionalId"))


def authorizer_properties(args: argparse.Namespace) -> dict[str, str]:
    """``--authorizer-properties`` as a dict, with ``--zookeeper`` as ``zookeeper.connect`` when given."""
    properties = parse_key_values(args.authorizer_properties or [], "--authorizer-properties")
    if args.zookeeper:
        properties["zookeeper.connect"] = args.zookeeper
    return properties


def acl_zookeeper(
    properties: dict[str, str], create_chroot: bool = False
) -> contextlib.AbstractContextManager[KazooClient]:
    """The ZooKeeper client of ``zkcoord acls``, from the authorizer's properties (the one place that builds it)."""
    return zookeeper_at(zk_connect(properties.get("zookeeper.connect")), create_chroot)


def _filters(args: argparse.Namespace, required: bool) -> list[ResourcePatternFilter]:
    """One filter per resource option (``getResourceFilter``); ``--cluster`` only with literal patterns."""
    pattern_type = args.resource_pattern_type.upper()
    filters = [
        ResourcePatternFilter(resource_type, name.strip(), pattern_type)
        for option, resource_type in RESOURCE_OPTIONS
        for name in getattr(args, option) or ()
    ]
    if args.cluster and pattern_type == LITERAL:
        filters.append(ResourcePatternFilter("Cluster", CLUSTER_NAME, LITERAL))
    if required and not filters:
        raise UsageError("You must provide at least one resource: --topic <topic> or --cluster or --group <group>")
    return filters


def _principals(given: list[str] | None) -> list[str]:
    try:
        return sorted({parse_principal(principal.strip()) for principal in given or ()})
    except ValueError as error:
        raise UsageError(str(error)) from None


def _entries(args: argparse.Namespace, operations: list[str]) -> set[Acl]:
    """Principals × operations × hosts for allow, then for deny (``getAcl``); hosts default to ``*``."""
    entries = set()
    for permission, principals, hosts in (
        ("Allow", args.allow_principal, args.allow_host),
        ("Deny", args.deny_principal, args.deny_host),
    ):
        for principal in _principals(principals):
            for host in hosts or [WILDCARD_HOST]:
                entries.update(Acl(principal, host.strip(), operation, permission) for operation in operations)
    return entries


def _acls_per_filter(args: argparse.Namespace) -> dict[ResourcePatternFilter, set[Acl]]:
    """What ``--add``/``--remove`` apply to each resource (``getResourceFilterToAcls``), operations checked as
    kafka-acls checks them."""
    filters = _filters(args, required=True)
    if args.consumer:
        if not args.topic or not args.group:
            raise UsageError("With --consumer you must specify a --topic and a --group")
        if args.operation or args.deny_principal or args.deny_host:
            raise UsageError("--consumer takes no --operation, --deny-principal or --deny-host")
        acls = {f: _entries(args, ["Read", "Describe"] if f.resource_type == "Topic" else ["Read"]) for f in filters}
        return {f: entries for f, entries in acls.items() if f.resource_type in ("Topic", "Group")}
    try:
        operations = sorted({parse_operation(operation) for operation in args.operation or ["All"]})
    except ValueError as error:
        raise UsageError(str(error)) from None
    for resource_filter in filters:
        valid = {*SUPPORTED_OPERATIONS[resource_filter.resource_type], "All"}
        if not valid.issuperset(operations):
            raise UsageError(
                f"ResourceType {enum_name(resource_filter.resource_type)} only supports operations "
                f"{', '.join(sorted(valid))}"
            )
    entries = _entries(args, operations)
    return {resource_filter: entries for resource_filter in filters}


def _listing(acls) -> str:
    return "\n".join(f"\t{acl.describe()}" for acl in sorted(acls))


def _resource_block(title: str, acls) -> str:
    # kafka-acls' own spacing: a space after the colon's line break and before the closing one.
    return f"{title}: \n {_listing(acls)} \n"


def _confirm(args: argparse.Namespace, question: str) -> bool:
    if args.force:
        return True
    print(question, flush=True)
    return sys.stdin.readline().strip().lower() == "y"


def _add(zk: KazooClient, args: argparse.Namespace) -> None:
    if args.resource_pattern_type.upper() not in PATTERN_TYPES:
        given = args.resource_pattern_type
        raise UsageError(f"A '--resource-pattern-type' value of '{given}' is not valid when adding acls.")
    for resource_filter, acls in _acls_per_filter(args).items():
        if not acls:
            raise UsageError("You must specify one of: --allow-principal, --deny-principal when trying to add ACLs.")
        pattern = ResourcePattern(resource_filter.resource_type, resource_filter.name, resource_filter.pattern_type)
        print(_resource_block(f"Adding ACLs for resource `{pattern.describe()}`", acls))
        stored.add_acls(zk, pattern, acls)


def _remove(zk: KazooClient, args: argparse.Namespace) -> None:
    for resource_filter, acls in _acls_per_filter(args).items():
        if acls:
            question = f"Are you sure you want to remove ACLs: \n {_listing(acls)} \n from resource filter "
        else:
            question = "Are you sure you want to delete all ACLs for resource filter "
        if not _confirm(args, f"{question}`{resource_filter.describe()}`? (y/n)"):
            continue
        for pattern in stored.list_acls(zk, resource_filter):
            stored.remove_acls(zk, pattern, acls or None)


def _list(zk: KazooClient, args: argparse.Namespace) -> None:
    filters = _filters(args, required=False) or [ResourcePatternFilter()]
    found: dict[ResourcePattern, frozenset[Acl]] = {}
    for resource_filter in filters:
        found.update(stored.list_acls(zk, resource_filter))
    principals = _principals(args.principal)
    for principal in principals:
        print(f"ACLs for principal `{principal}`")
        for pattern, acls in sorted(found.items()):
            own = [acl for acl in acls if acl.principal == principal]
            if own:
                print(_resource_block(f"Current ACLs for resource `{pattern.describe()}`", own))
    if not principals:
        for pattern, acls in sorted(found.items()):
            print(_resource_block(f"Current ACLs for resource `{pattern.describe()}`", acls))


def cmd_acls(args: argparse.Namespace) -> int:
    if args.list and (args.allow_principal or args.deny_principal or args.allow_host or args.deny_host):
        raise UsageError("--list takes no --allow-principal, --deny-principal, --allow-host or --deny-host")
    if args.principal and not args.list:
        raise UsageError("The --principal option is only available if --list is set")
    action = _add if args.add else _remove if args.remove else _list
    # Kafka's bootstrap adds ACLs before any broker registers: --add creates the chroot, unwarned.
    with acl_zookeeper(authorizer_properties(args), create_chroot=args.add) as zk:
        try:
            action(zk, args)
        except ValueError as error:  # a name ZooKeeper cannot hold, or ACLs in ZooKeeper that cannot be read
            raise UsageError(str(error)) from None
    return EXIT_OK


def register(commands) -> None:
    """Add ``acls`` to the ``zkcoord`` subcommands."""
    acls = commands.add_parser("acls", help="Kafka's ACLs in ZooKeeper, as kafka-acls")
    action = acls.add_mutually_exclusive_group(required=True)
    action.add_argument("--add", action="store_true", help="add ACLs")
    action.add_argument("--remove", action="store_true", help="remove ACLs (all of a resource if no principal)")
    action.add_argument("--list", action="store_true", help="list ACLs (of the resources given, else all)")
    zookeeper_option(acls)
    acls.add_argument(
        "--authorizer-properties",
        action="append",
        metavar="KEY=VALUE",
        help="kafka-acls' form: zookeeper.connect=HOST:PORT[/chroot] (repeatable)",
    )
    for flag in ("--allow-principal", "--deny-principal"):
        acls.add_argument(flag, action="append", metavar="TYPE:NAME", help="a principal, User:alice (repeatable)")
    for flag in ("--allow-host", "--deny-host"):
        acls.add_argument(flag, action="append", metavar="HOST", help="an IP address or * (the default; repeatable)")
    acls.add_argument("--operation", action="append", metavar="OP", help="Read, Write, Describe, ... (default All)")
    acls.add_argument("--topic", action="append", help="a topic, * for all (repeatable)")
    acls.add_argument("--group", action="append", help="a consumer group, * for all (repeatable)")
    acls.add_argument("--transactional-id", action="append", help="a transactional id, * for all (repeatable)")
    acls.add_argument("--cluster", action="store_true", help="the cluster resource")
    acls.add_argument(
        "--resource-pattern-type",
        default="literal",
        type=str.lower,
        choices=("literal", "prefixed", "any", "match"),
        help="literal (default) or prefixed; to list or remove also any or match",
    )
    acls.add_argument("--consumer", action="store_true", help="Read and Describe on --topic, Read on --group")
    acls.add_argument("--principal", action="append", help="with --list: only this principal's ACLs (repeatable)")
    acls.add_argument("--force", action="store_true", help="remove without asking")
    acls.set_defaults(func=cmd_acls)
