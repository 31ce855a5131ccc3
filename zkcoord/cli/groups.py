"""``zkcoord groups``: consumer groups as ``kafka-consumer-groups`` shows and changes them, coordinator and legacy.

Must not import another command family module; shared helpers come from ``zkcoord.cli.common``.
"""

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from kazoo.exceptions import KazooException

from zkcoord import env
from zkcoord.cli.common import (
    EXIT_OK,
    EXIT_PROBLEM,
    EXIT_USAGE,
    UsageError,
    client_security,
    comma_list,
    command_config_option,
    emit_json,
)
from zkcoord.errors import ZkcoordError
from zkcoord.model import TopicPartition


def _groups_client(args: argparse.Namespace):
    from zkcoord.admin import AdminClient
    from zkcoord.admin.client import KAFKA

    security = client_security(args.command_config)
    if args.bootstrap_server:
        others = [
            option
            for option, given in (
                ("--coordinator-server", args.coordinator_server),
                ("--zookeeper", args.zookeeper),
                ("--source", args.source),
            )
            if given
        ]
        if others:
            raise UsageError(
                f"--bootstrap-server cannot be combined with {', '.join(others)}: it speaks Kafka's protocol to a "
                "Kafka-protocol coordinator, which holds no legacy groups and gives the log offsets itself; "
                "zkcoord's coordinator nodes over msgpack are --coordinator-server and/or --zookeeper"
            )
        if args.log_level.upper() != "DEBUG":
            # kafka-python logs every refused connection while it retries; the one error that matters is ours.
            logging.getLogger("kafka").setLevel(logging.CRITICAL)
        return AdminClient(
            bootstrap_servers=args.bootstrap_server,
            request_timeout_ms=args.timeout,
            protocol=KAFKA,
            security=security,
        )
    connect = args.zookeeper or env.zookeeper_connect()
    if not args.coordinator_server and not connect:
        raise UsageError(
            "no cluster given: pass --bootstrap-server HOST:PORT[,HOST:PORT] for the groups of a Kafka-protocol "
            "coordinator, or --coordinator-server HOST:PORT[,HOST:PORT] (zkcoord's nodes, msgpack) and/or "
            "--zookeeper HOST:PORT[/chroot] (or set ZKCOORD_ZK_CONNECT) for coordinator and legacy groups"
        )
    return AdminClient(
        bootstrap_servers=args.coordinator_server,
        zookeeper_connect=connect,
        root=args.root,
        source=args.source,
        request_timeout_ms=args.timeout,
        security=security,
        warn=lambda message: print(f"WARN: {message}", file=sys.stderr),
    )


def cmd_groups(args: argparse.Namespace) -> int:
    """Every ``groups`` action: 0 ok, 1 error (``Error: <message>`` on stderr), 2 bad options or a connection
    error: a ``--bootstrap-server`` cluster or a coordinator node that does not answer (``list`` and ``describe``
    still show what they found, saying what is unknown)."""
    from zkcoord.admin import CoordinatorNotAvailableError
    from zkcoord.admin.model import ClusterUnreachableError, ZooKeeperUnreachableError

    try:
        with _groups_client(args) as client:
            return args.groups_func(client, args)
    except UsageError:
        raise
    except ClusterUnreachableError as error:
        print(f"Error: {error}", file=sys.stderr)
        print("(zkcoord's coordinator nodes speak msgpack: reach them with --coordinator-server)", file=sys.stderr)
        return EXIT_USAGE
    except (CoordinatorNotAvailableError, ZooKeeperUnreachableError) as error:
        print(f"Error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except (ZkcoordError, KazooException, OSError) as error:
        print(f"Error: {error}", file=sys.stderr)
        return EXIT_PROBLEM


def _print_lines(lines: Sequence[str], stream=None) -> None:
    for line in lines:
        print(line, file=stream or sys.stdout)


def parse_topic_partitions(items: Sequence[str]) -> list:
    """``--topic T`` (every partition) or ``--topic T:0,1`` (those partitions), as kafka-consumer-groups."""
    parsed: list = []
    for item in items:
        topic, separator, partitions = item.partition(":")
        if not topic:
            raise UsageError(f"Invalid topic arg '{item}', expected topic name and partitions")
        if not separator:
            parsed.append(topic)
            continue
        for partition in partitions.split(","):
            if not partition.strip().isdigit():
                raise UsageError(f"Invalid partition '{partition}' specified in topic arg '{item}'")
            parsed.append(TopicPartition(topic, int(partition)))
    return parsed


def parse_group_states(text: str) -> list[str]:
    """``--state stable,empty`` → Kafka's state names (case-insensitive, as ConsumerGroupState.parse)."""
    from zkcoord.admin.model import GROUP_STATES

    by_name = {state.lower(): state for state in GROUP_STATES}
    states = []
    for item in comma_list(text):
        if item.lower() not in by_name:
            raise UsageError(f"Invalid state list '{text}'. Valid states are: {', '.join(GROUP_STATES)}")
        states.append(by_name[item.lower()])
    return states


def _groups_list(client, args: argparse.Namespace) -> int:
    from zkcoord.admin import render

    overview = client.list_groups(parse_group_states(args.state) if args.state else ())
    if args.json:
        emit_json([render.listing_json(listing) for listing in overview.listings])
    else:
        _print_lines(render.list_lines(overview.listings))
    _print_lines(render.unreachable_lines(overview.unreachable), sys.stderr)
    return EXIT_USAGE if overview.unreachable else EXIT_OK


def _groups_describe(client, args: argparse.Namespace) -> int:
    """Each group in turn: one that cannot be described is an ``Error:`` line and the others are still described;
    the exit code is the worst (2 for a coordinator that did not answer, 1 for any other error)."""
    from zkcoord.admin import CoordinatorNotAvailableError, render
    from zkcoord.admin.model import ClusterUnreachableError, ZooKeeperUnreachableError

    documents, code = [], EXIT_OK
    if args.all_groups:
        overview = client.list_groups()
        _print_lines(render.unreachable_lines(overview.unreachable), sys.stderr)
        code = EXIT_USAGE if overview.unreachable else EXIT_OK
        group_ids = sorted({listing.group_id for listing in overview.listings})
    elif args.group:
        group_ids = sorted(set(args.group))
    else:
        raise UsageError("describe takes one of these options: --group, --all-groups")
    for group_id in group_ids:
        try:
            if args.members or args.state:
                results = client.describe_consumer_groups([group_id])
            else:
                results = client.describe_consumer_group_offsets([group_id])
        except (ClusterUnreachableError, ZooKeeperUnreachableError):
            raise  # the whole cluster: no other group can be described either
        except CoordinatorNotAvailableError as error:
            print(f"Error: {error}", file=sys.stderr)
            code = max(code, EXIT_USAGE)
            continue
        except ZkcoordError as error:  # the group exists nowhere, or its migration state is unreadable
            print(f"Error: {error}", file=sys.stderr)
            code = max(code, EXIT_PROBLEM)
            continue
        for result in results:
            description = getattr(result, "description", result)
            if description.unreachable is not None:
                code = max(code, EXIT_USAGE)
            if args.members:
                documents.append(render.members_json(description))
                lines = render.members_lines(description, args.verbose)
            elif args.state:
                documents.append(render.state_json(description))
                lines = render.state_lines(description)
            else:
                documents.append(render.offsets_json(result))
                lines = render.offsets_lines(result)
            _print_lines(render.unreachable_notices(description), sys.stderr)
            if not args.json:
                if (notice := render.state_notice(description)) is not None:
                    print(notice, file=sys.stderr)
                _print_lines(render.mismatch_notices(description), sys.stderr)
                if (header := render.migration_header(description)) is not None:
                    lines = ["", header, *lines[1:]]  # above its table, in place of the blank line before it
                _print_lines(lines)
    if args.json:
        emit_json(documents)
    return code


def _groups_delete(client, args: argparse.Namespace) -> int:
    from zkcoord.admin import render

    results = client.delete_consumer_groups(args.group)
    if args.json:
        emit_json([render.delete_json(result) for result in results])
    else:
        out, errors = render.delete_lines(results)
        _print_lines(errors, sys.stderr)
        _print_lines(out)
    return EXIT_PROBLEM if any(result.error for result in results) else EXIT_OK


def _reset_spec(args: argparse.Namespace):
    from zkcoord.admin import ResetSpec
    from zkcoord.admin.model import parse_reset_csv

    if args.to_earliest:
        return ResetSpec.to_earliest()
    if args.to_latest:
        return ResetSpec.to_latest()
    if args.to_offset is not None:
        return ResetSpec.to_offset(args.to_offset)
    if args.shift_by is not None:
        return ResetSpec.shift_by(args.shift_by)
    return ResetSpec.from_plan(parse_reset_csv(Path(args.from_file).read_text(encoding="utf-8"), args.group))


def _groups_reset_offsets(client, args: argparse.Namespace) -> int:
    from zkcoord.admin import render
    from zkcoord.admin.model import format_reset_csv

    if not (args.topic or args.all_topics or args.from_file):
        raise UsageError("One of the reset scopes should be defined: --all-topics, --topic.")
    if not (args.dry_run or args.execute):
        print("WARN: No action will be performed as the --execute option is missing.", file=sys.stderr)
    partitions = None if args.all_topics or not args.topic else parse_topic_partitions(args.topic)
    plans = client.reset_offsets(args.group, _reset_spec(args), partitions, execute=args.execute)
    if args.export:
        sys.stdout.write("".join(format_reset_csv(plan.offsets) for plan in plans))
    elif args.json:
        emit_json([render.reset_json(plan) for plan in plans])
    else:
        _print_lines(render.reset_lines(plans))
    return EXIT_OK


def _groups_remove_members(client, args: argparse.Namespace) -> int:
    from zkcoord.admin import render

    instance_ids = comma_list(args.instance_ids)
    if not instance_ids:
        raise UsageError("--instance-ids names no group.instance.id")
    removals = client.remove_members(args.group, instance_ids)
    if args.json:
        emit_json([render.removal_json(args.group, removal) for removal in removals])
    else:
        _print_lines(render.remove_members_lines(args.group, removals))
    return EXIT_PROBLEM if any(removal.error for removal in removals) else EXIT_OK


def _groups_delete_offsets(client, args: argparse.Namespace) -> int:
    from zkcoord.admin import render

    deletions = client.delete_consumer_group_offsets(args.group, parse_topic_partitions(args.topic))
    failed = any(error for deletion in deletions for error in deletion.partitions.values())
    if args.json:
        emit_json([render.deletion_json(deletion) for deletion in deletions])
    else:
        if failed:
            print("Error: Encounter some partition level error, see the follow-up details:", file=sys.stderr)
        for deletion in deletions:
            _print_lines(render.delete_offsets_lines(deletion, args.topic))
    return EXIT_PROBLEM if failed else EXIT_OK


def _groups_options(parser: argparse.ArgumentParser, top: bool) -> None:
    """The options every ``groups`` action takes, before or after the action's name."""

    def default(value):
        return value if top else argparse.SUPPRESS  # the action's copy must not hide a value given before it

    parser.add_argument(
        "--bootstrap-server",
        metavar="HOST:PORT[,HOST:PORT]",
        default=default(None),
        help="brokers of any Kafka-protocol coordinator (Kafka, zkcoord's Kafka listener), over Kafka's protocol",
    )
    parser.add_argument(
        "--coordinator-server",
        metavar="HOST:PORT[,HOST:PORT]",
        default=default(None),
        help="zkcoord's coordinator nodes, over msgpack (default: discovered under --root in ZooKeeper)",
    )
    parser.add_argument(
        "--zookeeper",
        metavar="HOST:PORT[/chroot]",
        default=default(None),
        help="ZooKeeper, for legacy groups and node discovery (default: $ZKCOORD_ZK_CONNECT)",
    )
    parser.add_argument("--root", default=default("/zkcoord"), help="zkcoord's ZooKeeper root")
    parser.add_argument("--source", metavar="SPEC", default=default(None), help="record source for log offsets")
    parser.add_argument("--timeout", type=int, metavar="MS", default=default(30000), help="request timeout")
    parser.add_argument("--json", action="store_true", default=default(False), help="print JSON")
    command_config_option(parser, default(None))


def register(commands) -> None:
    """Add ``groups`` and its actions to the ``zkcoord`` subcommands."""
    groups = commands.add_parser("groups", help="consumer groups, as kafka-consumer-groups (coordinator and legacy)")
    _groups_options(groups, top=True)
    groups.set_defaults(func=cmd_groups)
    actions = groups.add_subparsers(dest="action", required=True)

    def action(name: str, help_text: str, handler) -> argparse.ArgumentParser:
        parser = actions.add_parser(name, help=help_text)
        _groups_options(parser, top=False)
        parser.set_defaults(groups_func=handler)
        return parser

    listing = action("list", "list consumer groups", _groups_list)
    listing.add_argument("--state", nargs="?", const="", metavar="STATES", help="only groups in STATES: stable,empty")

    describe = action("describe", "offsets and lag (default), members or state of groups", _groups_describe)
    which = describe.add_mutually_exclusive_group()
    which.add_argument("--group", action="append", help="a group (repeatable)")
    which.add_argument("--all-groups", action="store_true")
    view = describe.add_mutually_exclusive_group()
    view.add_argument("--offsets", action="store_true", help="partitions, offsets and lag (the default)")
    view.add_argument("--members", action="store_true", help="members and their partition counts")
    view.add_argument("--state", action="store_true", help="coordinator, assignment strategy, state, #members")
    describe.add_argument("--verbose", action="store_true", help="with --members: each member's assignment")

    delete = action("delete", "delete groups that have no live members", _groups_delete)
    delete.add_argument("--group", action="append", required=True, help="a group (repeatable)")

    reset = action("reset-offsets", "reset the committed offsets of an inactive group", _groups_reset_offsets)
    reset.add_argument("--group", required=True)
    scope = reset.add_mutually_exclusive_group()
    scope.add_argument("--topic", action="append", metavar="T[:P,P]", help="a topic or some partitions (repeatable)")
    scope.add_argument("--all-topics", action="store_true", help="every partition with a committed offset")
    scenario = reset.add_mutually_exclusive_group(required=True)
    scenario.add_argument("--to-earliest", action="store_true")
    scenario.add_argument("--to-latest", action="store_true")
    scenario.add_argument("--to-offset", type=int, metavar="N")
    scenario.add_argument("--shift-by", type=int, metavar="N", help="move each committed offset by N (may be < 0)")
    scenario.add_argument("--from-file", metavar="CSV", help="topic,partition,offset lines")
    mode = reset.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="only show the new offsets (the default)")
    mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    reset.add_argument("--export", action="store_true", help="print the plan as topic,partition,offset CSV")

    remove = action("remove-members", "make static members leave (KIP-345)", _groups_remove_members)
    remove.add_argument("--group", required=True)
    remove.add_argument("--instance-ids", required=True, metavar="ID[,ID]", help="group.instance.id values")

    delete_offsets = action("delete-offsets", "delete committed offsets of topics (KIP-496)", _groups_delete_offsets)
    delete_offsets.add_argument("--group", required=True)
    delete_offsets.add_argument("--topic", action="append", required=True, metavar="T[:P,P]", help="(repeatable)")
