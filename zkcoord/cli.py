"""The ``zkcoord`` command.

Conventions for every subcommand: ``--zookeeper HOST:PORT[/chroot]`` (default ``$ZKCOORD_ZK_CONNECT``),
``--group``, ``--topic``, ``--json`` for machine output; exit 0 = ok, 1 = a check found a problem,
2 = usage or connection error.
"""

import argparse
import contextlib
import json
import logging
import os
import re
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError
from tqdm import tqdm

from zkcoord.clock import SystemClock
from zkcoord.errors import ConfigError, LogError, ZkcoordError
from zkcoord.log import LogConfig
from zkcoord.log.cleaner import clean
from zkcoord.log.inspect import describe_records, scan_partition
from zkcoord.log.loader import load_partition
from zkcoord.log.partition import PartitionLog
from zkcoord.log.segment import partition_directories
from zkcoord.model import TopicPartition
from zkcoord.tables import format_table
from zkcoord.zk import admin

EXIT_OK, EXIT_PROBLEM, EXIT_USAGE = 0, 1, 2
CONNECT_TIMEOUT_S = 10.0
NO_ZOOKEEPER = "no ZooKeeper given: pass --zookeeper HOST:PORT[/chroot] or set ZKCOORD_ZK_CONNECT"


class UsageError(ZkcoordError):
    """Bad arguments or an unreachable service: exit code 2."""


def _zookeeper_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--zookeeper", metavar="HOST:PORT[/chroot]", help="ZooKeeper connect string (default: $ZKCOORD_ZK_CONNECT)"
    )


@contextlib.contextmanager
def zookeeper(args: argparse.Namespace, create_chroot: bool = False) -> Iterator[KazooClient]:
    """A started kazoo client on ``--zookeeper``; the chroot is created first when asked."""
    connect = args.zookeeper or os.environ.get("ZKCOORD_ZK_CONNECT")
    if not connect:
        raise UsageError(NO_ZOOKEEPER)
    hosts, _, chroot = connect.partition("/")
    client = KazooClient(hosts=hosts)
    try:
        client.start(timeout=CONNECT_TIMEOUT_S)
    except KazooTimeoutError:
        client.stop()
        raise UsageError(f"cannot connect to ZooKeeper at {hosts} within {CONNECT_TIMEOUT_S:.0f}s") from None
    try:
        if chroot:
            if create_chroot:
                client.ensure_path("/" + chroot)
            client.chroot = "/" + chroot.rstrip("/")
        yield client
    finally:
        client.stop()
        client.close()


def _print_table(rows: Sequence[Sequence[object]], header: Sequence[str]) -> None:
    print(format_table(header, rows))


def _emit_json(value: object) -> None:
    print(json.dumps(value, indent=2, sort_keys=True, default=str))


def _emit_json_line(value: object) -> None:
    print(json.dumps(value, sort_keys=True))


def _interrupt_event() -> threading.Event:
    """An event set by Ctrl-C or SIGTERM; install it before starting what they should stop."""
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    return stop


def _wait(stop: threading.Event) -> None:
    while not stop.wait(0.5):
        pass


# ---- zk -------------------------------------------------------------------------------------------


def cmd_zk_start(args: argparse.Namespace) -> int:
    from zkcoord.zk.server import EmbeddedZooKeeper

    server = EmbeddedZooKeeper(port=args.port, data_dir=args.data_dir, host=args.host, tick_time_ms=args.tick_time)
    stop = _interrupt_event()
    with server:
        print(f"ZooKeeper serving on {server.connect_string} (data {server.data_dir}); Ctrl-C stops it", flush=True)
        _wait(stop)
    print("ZooKeeper stopped")
    return EXIT_OK


# ---- topics and brokers ----------------------------------------------------------------------------


def cmd_topics_create(args: argparse.Namespace) -> int:
    with zookeeper(args, create_chroot=True) as client:
        admin.create_topic(client, args.name, args.partitions, args.replication_factor)
    print(f'Created topic "{args.name}" with {args.partitions} partitions.')
    return EXIT_OK


def cmd_topics_alter(args: argparse.Namespace) -> int:
    with zookeeper(args) as client:
        old = admin.alter_topic_partitions(client, args.topic, args.partitions)
    print(f'Topic "{args.topic}": partitions {old} -> {args.partitions}.')
    return EXIT_OK


def cmd_topics_list(args: argparse.Namespace) -> int:
    with zookeeper(args) as client:
        topics = admin.list_topics(client)
    if args.json:
        _emit_json({t: {"partitions": len(p)} if isinstance(p, list) else {"error": str(p)} for t, p in topics.items()})
    else:
        _print_table(
            [(t, len(p) if isinstance(p, list) else f"unreadable: {p.reason}") for t, p in topics.items()],
            ("TOPIC", "PARTITIONS"),
        )
    return EXIT_OK


def cmd_brokers_register(args: argparse.Namespace) -> int:
    with zookeeper(args, create_chroot=True) as client:
        path = admin.register_broker(
            client, args.id, args.host, args.port, SystemClock().now_ms(), persistent=args.persistent
        )
        if args.persistent:
            print(f"Registered broker {args.id} at {path} (persistent).")
            return EXIT_OK
        print(f"Registered broker {args.id} at {path}; the registration lasts until Ctrl-C", flush=True)
        _wait(_interrupt_event())
    return EXIT_OK


# ---- legacy ---------------------------------------------------------------------------------------


def comma_list(text: str) -> list[str]:
    """``a, b,,c`` as ``["a", "b", "c"]``: the items of a comma-separated option, stripped, empty ones left out."""
    return [item for item in (part.strip() for part in text.split(",")) if item]


def parse_topic_streams(text: str) -> dict[str, int]:
    """``t1:2,t2:1`` (streams default to 1) as an ordered ``{topic: streams}``."""
    topics: dict[str, int] = {}
    for item in comma_list(text):
        topic, _, streams = item.partition(":")
        try:
            topics[topic] = int(streams or 1)
        except ValueError:
            raise UsageError(f"--topics: {item!r} is not TOPIC[:STREAMS]") from None
    if not topics:
        raise UsageError("--topics names no topic")
    return topics


def read_properties(path: str) -> dict[str, str]:
    """A Java properties file: ``key=value``, ``key: value`` or ``key value`` lines; ``#``/``!`` comments."""
    properties = {}
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "!")):
            key, *value = re.split(r"\s*[=:]\s*|\s+", line, maxsplit=1)
            properties[key] = value[0] if value else ""
    return properties


def parse_key_values(items: Sequence[str], flag: str) -> dict[str, str]:
    """``KEY=VALUE`` arguments of a repeatable ``flag`` (``--override``, ``--consumer-property``)."""
    properties = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"{flag} {item!r} is not KEY=VALUE")
        properties[key.strip()] = value.strip()
    return properties


def _format_partitions(partitions: Sequence[TopicPartition]) -> str:
    return ",".join(f"{tp.topic}-{tp.partition}" for tp in partitions) or "-"


def cmd_legacy_run(args: argparse.Namespace) -> int:
    from zkcoord.legacy.consumer import LegacyConsumer
    from zkcoord.legacy.trace import JsonLinesTraceWriter

    properties = read_properties(args.consumer_config) if args.consumer_config else {}
    properties.update(parse_key_values(args.consumer_property, "--consumer-property"))
    # --zookeeper beats the properties file, which beats $ZKCOORD_ZK_CONNECT
    connect = args.zookeeper or properties.get("zookeeper.connect") or os.environ.get("ZKCOORD_ZK_CONNECT")
    if not connect:
        raise UsageError(NO_ZOOKEEPER)
    properties["zookeeper.connect"] = connect
    properties["group.id"] = args.group
    if args.consumer_id:
        properties["consumer.id"] = args.consumer_id
    subscription: dict = {}
    if args.topics:
        subscription["topics"] = parse_topic_streams(args.topics)
    if args.whitelist:
        subscription["whitelist"] = args.whitelist
    if args.blacklist:
        subscription["blacklist"] = args.blacklist
    sinks: list[Callable] = [_print_rebalance(args.json)]
    writer = JsonLinesTraceWriter(args.trace) if args.trace else None
    if writer:
        sinks.append(writer)
    consumer = LegacyConsumer(properties, trace=sinks, num_streams=args.num_streams, **subscription)
    print(f"member {consumer.consumer_id} joining group {args.group}; Ctrl-C leaves", flush=True)
    try:
        consumer.start()  # Ctrl-C here raises KeyboardInterrupt, which start() turns into a clean close
        _wait(_interrupt_event())
    except KeyboardInterrupt:
        print("interrupted before the member had joined", file=sys.stderr)
        return EXIT_OK
    finally:
        consumer.close()
        if writer:
            writer.close()
    return EXIT_OK


def _print_rebalance(as_json: bool) -> Callable[[dict], None]:
    def sink(event: dict) -> None:
        if as_json:
            print(json.dumps(event, sort_keys=True), flush=True)
        elif event["type"] == "legacy.rebalance_attempt":
            detail = {"conflict": f" conflicts={event['conflicts']}", "error": f" {event['error']}"}
            print(
                f"rebalance attempt {event['attempt']} ({event['reason']}): {event['outcome']} in "
                f"{event['duration_ms']:.0f} ms, {event['zk_ops']} ZooKeeper ops" + detail.get(event["outcome"], ""),
                flush=True,
            )
        elif event["type"] == "legacy.assignment" and event["connected"]:
            for thread, claims in event["assignment"].items():
                print(f"  {thread}: {_format_partitions([TopicPartition(*c) for c in claims])}", flush=True)
        elif event["type"] in ("legacy.session_expired", "legacy.rebalance_failed"):
            print(f"{event['type']}: {json.dumps({k: v for k, v in event.items() if k not in ('schema', 'type')})}")

    return sink


def cmd_legacy_verify(args: argparse.Namespace) -> int:
    with zookeeper(args) as client:
        snapshot = admin.read_group(client, args.group, exclude_internal_topics=not args.include_internal_topics)
    problems = snapshot.problems()
    rows = [
        (
            args.group,
            topic,
            partition,
            snapshot.owners.get(TopicPartition(topic, partition), "-"),
            snapshot.offsets.get(TopicPartition(topic, partition), "-"),
        )
        for topic, partitions in sorted(snapshot.partitions.items())
        for partition in partitions
    ]
    if args.json:
        _emit_json(
            {
                "group": args.group,
                "ok": not problems,
                "members": snapshot.members,
                "partitions": [
                    dict(zip(("group", "topic", "partition", "owner", "offset"), r, strict=True)) for r in rows
                ],
                "problems": problems,
            }
        )
    else:
        if not snapshot.members and not snapshot.bad_members:
            print(f"Consumer group '{args.group}' has no active members.")
        _print_table(rows, ("GROUP", "TOPIC", "PARTITION", "OWNER", "OFFSET"))
        for problem in problems:
            print(f"ERROR: {problem}")
        print(
            "Rebalance verified: every partition has one live owner."
            if not problems
            else f"Rebalance NOT verified: {len(problems)} problem(s)."
        )
    return EXIT_PROBLEM if problems else EXIT_OK


def cmd_legacy_offsets_export(args: argparse.Namespace) -> int:
    with zookeeper(args) as client:
        lines = admin.export_offsets(client, args.group or None)
    text = "".join(line + "\n" for line in lines)
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
        print(f"Exported {len(lines)} offsets to {args.output}.")
    else:
        sys.stdout.write(text)
    return EXIT_OK


def cmd_legacy_offsets_import(args: argparse.Namespace) -> int:
    source = sys.stdin if args.input == "-" else open(args.input, encoding="utf-8")  # noqa: SIM115
    with source:
        entries = admin.parse_offset_lines(source)
    with zookeeper(args, create_chroot=True) as client:
        count = admin.import_offsets(client, entries)
    print(f"Imported {count} offsets.")
    return EXIT_OK


def _log_config(args: argparse.Namespace):
    return LogConfig(skip_corrupt_segments=getattr(args, "skip_corrupt", False))


def _partitions(args: argparse.Namespace) -> list[Path]:
    try:
        found = partition_directories(args.path)
    except FileNotFoundError as error:
        raise UsageError(str(error)) from None
    if not found:
        raise UsageError(f"{args.path} holds no partition directory (no *.log segment files)")
    return found


def cmd_log_verify(args: argparse.Namespace) -> int:
    summaries = [scan_partition(directory) for directory in _partitions(args)]
    problems = [(summary.directory, kind, problem) for summary in summaries for kind, problem in summary.problems]
    if args.json:
        _emit_json(
            {
                "partitions": [
                    {
                        "directory": str(summary.directory),
                        "segments": len(summary.segments),
                        "records": summary.records,
                        "bytes": summary.bytes,
                        "pending_compaction": summary.pending_swap,
                        "problems": [
                            {
                                "kind": kind,
                                "file": str(problem.path),
                                "position": problem.position,
                                "offset": problem.offset,
                                "reason": problem.reason,
                            }
                            for kind, problem in summary.problems
                        ],
                    }
                    for summary in summaries
                ]
            }
        )
    else:
        rows = [
            (
                summary.directory.name,
                len(summary.segments),
                summary.batches,
                summary.records,
                summary.bytes,
                "ok" if not summary.problems else ", ".join(kind for kind, _ in summary.problems),
            )
            for summary in summaries
        ]
        _print_table(rows, ("PARTITION", "SEGMENTS", "BATCHES", "RECORDS", "BYTES", "STATUS"))
        for summary in summaries:
            if summary.pending_swap:
                print(f"{summary.directory}: an interrupted compaction will be completed when the log is opened")
        for _, kind, problem in problems:
            print(f"{kind}: {problem}")
    return EXIT_PROBLEM if problems else EXIT_OK


def cmd_log_dump(args: argparse.Namespace) -> int:
    def visit(path: Path, batch) -> None:
        if args.json:
            for record in describe_records(batch):
                _emit_json_line(
                    {"segment": str(path), "base_offset": batch.base_offset, "timestamp": batch.timestamp_ms, **record}
                )
            return
        print(
            f"baseOffset: {batch.base_offset} lastOffset: {batch.last_offset} count: {len(batch.records)} "
            f"createTime: {batch.timestamp_ms} size: {batch.size}"
        )
        for record in describe_records(batch):
            text = record.get("error") or f"{record['type']} key: {record['key']} value: {record['value']}"
            print(f"| offset: {record['offset']} {text}")

    found = []
    for directory in _partitions(args):
        if not args.json:
            print(f"Dumping {directory}")
        summary = scan_partition(directory, visit=visit)
        found.extend(summary.problems)
    for kind, problem in found:
        print(f"{kind}: {problem}", file=sys.stderr)
    return EXIT_PROBLEM if found else EXIT_OK


def _progress(total: int, description: str):
    return tqdm(total=total, unit="B", unit_scale=True, desc=description, leave=False, disable=None)


def cmd_log_compact(args: argparse.Namespace) -> int:
    config = _log_config(args)
    for directory in _partitions(args):
        with PartitionLog.open(directory, config) as partition:
            if partition.recovery.truncated or partition.recovery.compaction:
                print(partition.recovery)
            closed_bytes = sum(segment.size for segment in partition.segments[:-1])
            with _progress(3 * closed_bytes, f"compacting {directory.name}") as bar:
                result = clean(partition, SystemClock().now_ms(), args.delete_retention_ms, on_io=bar.update)
            print(f"{directory}: {result or 'nothing to compact (only the active segment)'}")
    return EXIT_OK


def cmd_log_load(args: argparse.Namespace) -> int:
    config = _log_config(args)
    rows = []
    for directory in _partitions(args):
        with PartitionLog.open(directory, config) as partition, _progress(partition.size_bytes, directory.name) as bar:
            result = load_partition(partition, progress=bar.update)
        print(f"{directory}: {result}", file=sys.stderr if args.json else sys.stdout)
        for problem in result.skipped:
            print(f"skipped corrupt data: {problem}", file=sys.stderr)
        for group, offsets in sorted(result.store.offsets.items()):
            for partition_key, committed in sorted(offsets.items()):
                rows.append((group, partition_key.topic, partition_key.partition, committed.offset, committed.metadata))
    if args.json:
        _emit_json([dict(zip(("group", "topic", "partition", "offset", "metadata"), row, strict=True)) for row in rows])
    elif rows:
        _print_table(rows, ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "METADATA"))
    return EXIT_OK


def cmd_demo(args: argparse.Namespace) -> int:
    from zkcoord.demo import run_demo

    variants = tuple(comma_list(args.variants))
    return run_demo(Path(args.out), members=args.members, partitions=args.partitions, variants=variants)


# ---- groups (kafka-consumer-groups) ---------------------------------------------------------------


def _groups_client(args: argparse.Namespace):
    from zkcoord.admin import AdminClient

    connect = args.zookeeper or os.environ.get("ZKCOORD_ZK_CONNECT")
    if not args.bootstrap_server and not connect:
        raise UsageError(
            "no cluster given: pass --bootstrap-server HOST:PORT[,HOST:PORT] for coordinator groups and/or "
            "--zookeeper HOST:PORT[/chroot] (or set ZKCOORD_ZK_CONNECT) for legacy groups"
        )
    return AdminClient(
        bootstrap_servers=args.bootstrap_server,
        zookeeper_connect=connect,
        root=args.root,
        source=args.source,
        request_timeout_ms=args.timeout,
    )


def cmd_groups(args: argparse.Namespace) -> int:
    """Every ``groups`` action: 0 ok, 1 error (``Error: <message>`` on stderr)."""
    try:
        with _groups_client(args) as client:
            return args.groups_func(client, args)
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

    listings = client.list_consumer_groups(parse_group_states(args.state) if args.state else ())
    if args.json:
        _emit_json([render.listing_json(listing) for listing in listings])
    else:
        _print_lines(render.list_lines(listings, with_state=args.state is not None))
    return EXIT_OK


def _groups_describe(client, args: argparse.Namespace) -> int:
    from zkcoord.admin import GroupIdNotFoundError, render

    if args.all_groups:
        group_ids = sorted({listing.group_id for listing in client.list_consumer_groups()})
    elif args.group:
        group_ids = sorted(set(args.group))
    else:
        raise UsageError("describe takes one of these options: --group, --all-groups")
    documents, code = [], EXIT_OK
    for group_id in group_ids:
        try:
            if args.members or args.state:
                results = client.describe_consumer_groups([group_id])
            else:
                results = client.describe_consumer_group_offsets([group_id])
        except GroupIdNotFoundError as error:
            print(f"Error: {error}", file=sys.stderr)
            code = EXIT_PROBLEM
            continue
        for result in results:
            description = getattr(result, "description", result)
            if args.members:
                documents.append(render.members_json(description))
                lines = render.members_lines(description, args.verbose)
            elif args.state:
                documents.append(render.state_json(description))
                lines = render.state_lines(description)
            else:
                documents.append(render.offsets_json(result))
                lines = render.offsets_lines(result)
            if not args.json:
                if (notice := render.state_notice(description)) is not None:
                    print(notice, file=sys.stderr)
                _print_lines(lines)
    if args.json:
        _emit_json(documents)
    return code


def _groups_delete(client, args: argparse.Namespace) -> int:
    from zkcoord.admin import render

    results = client.delete_consumer_groups(args.group)
    if args.json:
        _emit_json([render.delete_json(result) for result in results])
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
        _emit_json([render.reset_json(plan) for plan in plans])
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
        _emit_json([render.removal_json(args.group, removal) for removal in removals])
    else:
        _print_lines(render.remove_members_lines(args.group, removals))
    return EXIT_PROBLEM if any(removal.error for removal in removals) else EXIT_OK


def _groups_delete_offsets(client, args: argparse.Namespace) -> int:
    from zkcoord.admin import render

    deletions = client.delete_consumer_group_offsets(args.group, parse_topic_partitions(args.topic))
    failed = any(error for deletion in deletions for error in deletion.partitions.values())
    if args.json:
        _emit_json([render.deletion_json(deletion) for deletion in deletions])
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
        help="coordinator nodes (default: discovered under --root in ZooKeeper)",
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


def _add_groups_parser(commands) -> None:
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
    listing.add_argument("--state", nargs="?", const="", metavar="STATES", help="show states; filter: stable,empty")

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


# ---- migrate (offsets from ZooKeeper to the log) ------------------------------------------------------


@contextlib.contextmanager
def _migration_runner(args: argparse.Namespace) -> Iterator:
    from zkcoord.client.bootstrap import discover_nodes, parse_bootstrap_servers
    from zkcoord.migration.runner import Runner, load_steps
    from zkcoord.wire.channel import CoordinatorChannel

    steps = load_steps(args.migrations_dir)
    with zookeeper(args) as client:
        fixed = parse_bootstrap_servers(args.bootstrap_server) if args.bootstrap_server else None
        channel = CoordinatorChannel(
            lambda: list(fixed) if fixed else discover_nodes(client, args.root), "zkcoord-migrate", args.timeout
        )
        progress = None if args.json else _count_progress
        try:
            yield Runner(client, channel, steps, root=args.root, say=_say(args), progress=progress)
        finally:
            channel.close()


def _say(args: argparse.Namespace) -> Callable[[str], None]:
    return (lambda line: print(line, file=sys.stderr)) if args.json else print


def _count_progress(total: int, description: str) -> Callable[[int], None]:
    """A progress bar for long backfills (only on a terminal, only past a thousand partitions)."""
    bar = tqdm(total=total, unit="partition", desc=description, leave=False, disable=None if total > 1000 else True)

    def advance(count: int) -> None:
        bar.update(count)
        if bar.n >= total:
            bar.close()

    return advance


def cmd_migrate(args: argparse.Namespace) -> int:
    """``migrate status|plan|up|down|verify``: 0 ok; 1 refused, failed or a regression found."""
    from zkcoord.migration.phases import MigrationError
    from zkcoord.migration.runner import iter_groups

    try:
        with _migration_runner(args) as runner:
            groups = list(iter_groups(runner, args.group, args.all))
            return args.migrate_func(runner, groups, args)
    except MigrationError as error:
        print(f"Error: {error}", file=sys.stderr)
        return EXIT_PROBLEM


def _migrate_status(runner, groups: list[str], args: argparse.Namespace) -> int:
    rows = []
    for group in groups:
        status = runner.status(group)
        state = status.state
        rows.append(
            {
                "group": group,
                "phase": status.phase.name,
                "epoch": 0 if state is None else state.epoch,
                "applied": status.applied,
                "under_way": None if state is None or state.pending is None else "{} {}".format(*state.pending),
                "next": status.next_step,
                "legacy_members": status.legacy_members,
                "coordinator_members": status.coordinator_members,  # None: no coordinator answered
            }
        )
    if args.json:
        _emit_json(rows)
        return EXIT_OK
    header = ("GROUP", "PHASE", "EPOCH", "APPLIED", "UNDER-WAY", "NEXT", "LEGACY-MEMBERS", "COORDINATOR-MEMBERS")
    _print_table(
        [
            (
                r["group"],
                r["phase"],
                r["epoch"],
                r["applied"][-1] if r["applied"] else "-",
                r["under_way"] or "-",
                r["next"] or "-",
                r["legacy_members"],
                "-" if r["coordinator_members"] is None else r["coordinator_members"],
            )
            for r in rows
        ],
        header,
    )
    return EXIT_OK


def _migrate_plan(runner, groups: list[str], args: argparse.Namespace) -> int:
    from zkcoord.migration.runner import DOWN, UP

    direction = DOWN if args.down else UP
    plans = {group: runner.plan(group, direction, args.to) for group in groups}
    if args.json:
        _emit_json(
            {
                g: [{"step": p.step.name, "direction": p.direction, "resumed": p.resumed} for p in plan]
                for g, plan in plans.items()
            }
        )
        return EXIT_OK
    for group, plan in plans.items():
        if not plan:
            print(f"group {group}: nothing to do")
        for planned in plan:
            again = " (under way: runs again first)" if planned.resumed else ""
            print(f"group {group}: {planned.step.name} {planned.direction}{again}: {planned.step.description}")
    return EXIT_OK


def _migrate_run(runner, groups: list[str], args: argparse.Namespace) -> int:
    from zkcoord.migration.phases import MigrationError

    failed = 0
    for group in tqdm(
        groups, unit="group", desc=f"migrate {args.action}", leave=False, disable=None if len(groups) > 1 else True
    ):
        try:
            result = runner.run(group, args.action, args.to, dry_run=args.dry_run, allow_rewind=args.allow_rewind)
        except MigrationError as error:  # refused, or a step that did not complete: go on with the other groups
            print(f"Error: {error}", file=sys.stderr)
            failed += 1
            continue
        if not result.done:
            runner.say(f"group {group}: nothing to do")
    return EXIT_PROBLEM if failed else EXIT_OK


def _migrate_verify(runner, groups: list[str], args: argparse.Namespace) -> int:
    from zkcoord.migration.verify import verify_groups

    with tqdm(
        total=len(groups), unit="group", desc="verify", leave=False, disable=None if len(groups) > 1 else True
    ) as bar:
        results = verify_groups(runner.zk, runner.channel, runner.root, groups, advance=bar.update)
    if args.json:
        _emit_json([_verification_json(result) for result in results])
    else:
        _print_verification(results, args.verbose)
    return EXIT_OK if all(result.ok for result in results) else EXIT_PROBLEM


def _verification_json(result) -> dict:
    bad = {(r.topic, r.partition) for r in result.regressions}
    return {
        "group": result.group,
        "phase": None if result.phase is None else result.phase.name,
        "counts": result.counts,
        "regressions": len(bad),
        "lag_partitions": result.lag_partitions,
        "lag_offsets": result.lag_offsets,
        "unreadable": [{"topic": t, "partition": p, "data": d} for (t, p), d in sorted(result.unreadable.items())],
        "partitions": [
            {
                "topic": r.topic,
                "partition": r.partition,
                "zookeeper": r.zk,
                "log": r.log,
                "status": r.status.value,
                "regression": (r.topic, r.partition) in bad,
            }
            for r in result.rows
        ],
    }


def _print_verification(results, verbose: bool) -> None:
    for result in results:
        bad = {(r.topic, r.partition) for r in result.regressions}
        rows = [
            (
                result.group,
                r.topic,
                r.partition,
                "-" if r.zk is None else r.zk,
                "-" if r.log is None else r.log,
                r.status.value + (" REGRESSION" if (r.topic, r.partition) in bad else ""),
                r.log - r.zk if r.status.value == "log_ahead" else "-",
            )
            for r in result.rows
            if verbose or (r.topic, r.partition) in bad or r.status.value != "match"
        ]
        counts = ", ".join(f"{n} {status}" for status, n in result.counts.items())
        phase = "not migrating" if result.phase is None else f"phase {result.phase.name}"
        print(
            f"\ngroup {result.group} ({phase}): {len(result.rows)} partition(s): {counts}; "
            f"write-behind lag {result.lag_offsets} offset(s) on {result.lag_partitions} partition(s); "
            f"{len(bad)} regression(s)"
        )
        for (topic, partition), data in sorted(result.unreadable.items()):
            print(f"  unreadable ZooKeeper offset {topic}-{partition}: {data!r}")
        if rows:
            _print_table(rows, ("GROUP", "TOPIC", "PARTITION", "ZOOKEEPER-OFFSET", "LOG-OFFSET", "STATUS", "LAG"))


def _add_migrate_parser(commands) -> None:
    migrate = commands.add_parser("migrate", help="move group offsets from ZooKeeper to the offsets log, step by step")
    actions = migrate.add_subparsers(dest="action", required=True)

    def action(name: str, help_text: str, handler) -> argparse.ArgumentParser:
        parser = actions.add_parser(name, help=help_text)
        which = parser.add_mutually_exclusive_group(required=True)
        which.add_argument("--group", help="one group")
        which.add_argument("--all", action="store_true", help="every ZooKeeper group and every migrating group")
        _zookeeper_option(parser)
        parser.add_argument(
            "--bootstrap-server",
            metavar="HOST:PORT[,HOST:PORT]",
            help="coordinator nodes (default: discovered under --root in ZooKeeper)",
        )
        parser.add_argument("--root", default="/zkcoord", help="zkcoord's ZooKeeper root")
        parser.add_argument("--migrations-dir", metavar="DIR", help="steps to apply (default: the shipped ones)")
        parser.add_argument("--timeout", type=int, metavar="MS", default=30000, help="coordinator request timeout")
        parser.add_argument("--json", action="store_true", help="print JSON")
        parser.set_defaults(func=cmd_migrate, migrate_func=handler)
        return parser

    action("status", "phase, applied steps and live members of groups", _migrate_status)
    plan = action("plan", "the steps up (or --down) would run", _migrate_plan)
    plan.add_argument("--down", action="store_true", help="plan going down instead of up")
    plan.add_argument("--to", metavar="STEP", help="stop at this step (zero: none applied)")
    for name, help_text in (
        ("up", "apply the next steps (all, or up to --to)"),
        ("down", "undo the last step (or down to --to STEP; zero undoes all)"),
    ):
        run = action(name, help_text, _migrate_run)
        run.add_argument("--to", metavar="STEP", help="the last step left applied (zero: none)")
        run.add_argument("--dry-run", action="store_true", help="check and show the next step without running it")
        run.add_argument("--allow-rewind", action="store_true", help="backfill may lower log offsets to ZooKeeper's")
    verify = action(
        "verify", "compare ZooKeeper and log offsets per partition (exit 1 on a regression)", _migrate_verify
    )
    verify.add_argument("--verbose", action="store_true", help="list matching partitions too")


# ---- compare and pipeline --------------------------------------------------------------------------


def cmd_compare_run(args: argparse.Namespace) -> int:
    """Run the scenarios under every variant; exit 1 when a run failed."""
    from zkcoord.compare.runner import CompareOptions, compare_run
    from zkcoord.compare.scenarios import SCENARIOS, Workload

    scenarios = list(SCENARIOS) if args.scenario == "all" else comma_list(args.scenario)
    workload = Workload(
        members=args.members,
        partitions=args.partitions,
        topics=args.topics,
        k=args.k,
        downtime_ms=args.downtime_ms,
        session_timeout_ms=args.session_timeout_ms,
    )
    options = CompareOptions(
        out=Path(args.out),
        scenarios=scenarios,
        variants=comma_list(args.variants),
        workload=workload,
        rate=args.rate,
        cost_ms=args.cost_ms,
        duration_s=args.duration,
        auto_commit_interval_ms=args.auto_commit_interval_ms,
        zookeeper=args.zookeeper or os.environ.get("ZKCOORD_ZK_CONNECT"),
        node_properties=parse_key_values(args.node_property or [], "--node-property"),
    )
    try:
        results = compare_run(options)
    except ValueError as error:
        raise UsageError(str(error)) from None
    failed = [r for r in results if r["status"] == "failed"]
    print(f"traces in {args.out}/traces; next: zkcoord pipeline rebalance-report --in {args.out} --out REPORT_DIR")
    return EXIT_PROBLEM if failed else EXIT_OK


def cmd_pipeline(args: argparse.Namespace) -> int:
    """Run a Spark job in a process of its own: py4j and gevent's patched sockets do not mix."""
    import subprocess

    return subprocess.call([sys.executable, "-m", "zkcoord.pipeline", args.job, *args.job_args])


def _add_compare_parser(commands) -> None:
    from zkcoord.compare.scenarios import SCENARIOS, VARIANTS

    compare = commands.add_parser("compare", help="the same workload under the ZooKeeper and the coordinator rebalance")
    actions = compare.add_subparsers(dest="action", required=True)
    run = actions.add_parser("run", help="run scenarios under every variant and write their traces")
    run.add_argument("--scenario", required=True, help=f"comma-separated, or all: {', '.join(SCENARIOS)}")
    run.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated (default: all)")
    run.add_argument("--members", type=int, default=6, help="members at the start (default 6)")
    run.add_argument("--partitions", type=int, default=12, help="partitions per topic (default 12)")
    run.add_argument("--topics", type=int, default=1, help="topics the group consumes (default 1)")
    run.add_argument("--rate", type=float, default=20.0, help="records/s per partition (default 20)")
    run.add_argument("--duration", type=float, default=10.0, help="seconds the window lasts at least (default 10)")
    run.add_argument("--k", type=int, default=2, help="members added or removed, partitions added (default 2)")
    run.add_argument("--cost-ms", type=float, default=1.0, help="processing time per record (default 1)")
    run.add_argument("--auto-commit-interval-ms", type=int, default=1000)
    run.add_argument("--session-timeout-ms", type=int, default=6000, help="ZooKeeper and coordinator sessions")
    run.add_argument("--downtime-ms", type=int, default=1000, help="a bounced member's time down (default 1000)")
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


# ---- parser ---------------------------------------------------------------------------------------


def cmd_coordinator_start(args: argparse.Namespace) -> int:
    """Run one coordinator node until SIGTERM or Ctrl-C, then shut down gracefully."""
    import gevent
    import gevent.event

    from zkcoord.server.config import node_config
    from zkcoord.server.metrics import serve_metrics
    from zkcoord.server.node import CoordinatorNode

    properties: dict[str, object] = read_properties(args.config) if args.config else {}
    properties.update(parse_key_values(args.override or [], "--override"))
    config = node_config(properties)
    connect = args.zookeeper or os.environ.get("ZKCOORD_ZK_CONNECT")
    if not connect:
        raise UsageError(NO_ZOOKEEPER)
    node = CoordinatorNode(
        args.node_id, args.host, args.port, connect, args.log_dir, config, advertised_host=args.advertised_host
    )
    stop = gevent.event.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        gevent.signal_handler(signum, stop.set)
    node.start()
    metrics = serve_metrics(node.metrics.registry, args.host, args.metrics_port) if args.metrics_port else None
    print(f"coordinator node {args.node_id} serving on {args.host}:{node.port}", flush=True)
    try:
        stop.wait()
    finally:
        if metrics is not None:
            metrics.stop()
        node.stop()
    return EXIT_OK


def cmd_coordinator_status(args: argparse.Namespace) -> int:
    """Nodes, partition leaders and epochs from ZooKeeper; loading state and groups from each node."""
    from zkcoord.server.status import cluster_status

    with zookeeper(args) as client:
        status = cluster_status(client, args.root)
    if args.json:
        _emit_json(status)
        return EXIT_OK
    rows = [
        (
            node["node_id"],
            f"{node['host']}:{node['port']}",
            node["partitions"],
            node["loading"],
            node["groups"],
            node["error"],
        )
        for node in status["nodes"]
    ]
    _print_table(rows, ("NODE", "ADDRESS", "PARTITIONS", "LOADING", "GROUPS", "ERROR"))
    print()
    leaders = [(p["partition"], p["leader"], p["epoch"]) for p in status["partitions"]]
    _print_table(leaders, ("PARTITION", "LEADER", "EPOCH"))
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="zkcoord", description=__doc__.split("\n")[0])
    parser.add_argument("--log-level", default="WARNING", help="Python logging level (default WARNING)")
    commands = parser.add_subparsers(dest="command", required=True)

    zk = commands.add_parser("zk", help="embedded ZooKeeper").add_subparsers(dest="action", required=True)
    start = zk.add_parser("start", help="run a standalone ZooKeeper until Ctrl-C")
    start.add_argument("--port", type=int, default=2181)
    start.add_argument("--host", default="127.0.0.1")
    start.add_argument("--data-dir", help="keep data here (default: a temporary directory, removed at exit)")
    start.add_argument("--tick-time", type=int, default=2000, metavar="MS", help="ZooKeeper tickTime")
    start.set_defaults(func=cmd_zk_start)

    topics = commands.add_parser("topics", help="topics in the 0.8 layout").add_subparsers(dest="action", required=True)
    create = topics.add_parser("create", help="create a topic")
    create.add_argument("name")
    create.add_argument("--partitions", type=int, required=True)
    create.add_argument("--replication-factor", type=int, default=1)
    create.set_defaults(func=cmd_topics_create)
    listing = topics.add_parser("list", help="list topics and partition counts")
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(func=cmd_topics_list)
    alter = topics.add_parser("alter", help="add partitions to a topic")
    alter.add_argument("--topic", required=True)
    alter.add_argument("--partitions", type=int, required=True)
    alter.set_defaults(func=cmd_topics_alter)

    brokers = commands.add_parser("brokers", help="broker registrations").add_subparsers(dest="action", required=True)
    register = brokers.add_parser("register", help="write a 0.8 broker registration under /brokers/ids")
    register.add_argument("--id", type=int, required=True)
    register.add_argument("--host", required=True)
    register.add_argument("--port", type=int, required=True)
    register.add_argument("--persistent", action="store_true", help="a persistent node instead of an ephemeral one")
    register.set_defaults(func=cmd_brokers_register)

    legacy = commands.add_parser("legacy", help="Kafka 0.8.2 ZooKeeper consumer groups")
    legacy_commands = legacy.add_subparsers(dest="action", required=True)
    run = legacy_commands.add_parser("run", help="run one member until Ctrl-C, printing assignment changes")
    run.add_argument("--group", required=True)
    subscription = run.add_mutually_exclusive_group(required=True)
    subscription.add_argument("--topics", metavar="T1:STREAMS,T2:STREAMS", help="static subscription, in order")
    subscription.add_argument("--whitelist", metavar="REGEX")
    subscription.add_argument("--blacklist", metavar="REGEX")
    run.add_argument("--num-streams", type=int, default=1, help="streams of a wildcard subscription")
    run.add_argument("--consumer-id", help="consumer.id (default: host-time-random, as 0.8.2)")
    run.add_argument("--consumer.config", dest="consumer_config", metavar="FILE", help="Kafka consumer properties")
    run.add_argument("--consumer-property", action="append", default=[], metavar="KEY=VALUE")
    run.add_argument("--trace", metavar="FILE", help="append trace events (JSON lines) here")
    run.add_argument("--json", action="store_true", help="print every trace event as JSON")
    run.set_defaults(func=cmd_legacy_run)
    verify = legacy_commands.add_parser("verify", help="check every partition has one live owner (exit 1 if not)")
    verify.add_argument("--group", required=True)
    verify.add_argument("--include-internal-topics", action="store_true", help="expand wildcards over internal topics")
    verify.add_argument("--json", action="store_true")
    verify.set_defaults(func=cmd_legacy_verify)
    offsets = legacy_commands.add_parser("offsets", help="export or import ZooKeeper offsets")
    offsets_commands = offsets.add_subparsers(dest="offsets_action", required=True)
    export = offsets_commands.add_parser("export", help="write <znode>:<offset> lines (ExportZkOffsets)")
    export.add_argument("--group", action="append", help="a group (repeatable; default: every group)")
    export.add_argument("--output", metavar="FILE", help="default: standard output")
    export.set_defaults(func=cmd_legacy_offsets_export)
    load = offsets_commands.add_parser("import", help="read <znode>:<offset> lines (ImportZkOffsets)")
    load.add_argument("--input", required=True, metavar="FILE", help="'-' for standard input")
    load.set_defaults(func=cmd_legacy_offsets_import)

    logs = commands.add_parser("log", help="the offsets log: check, print, compact, load")
    log_commands = logs.add_subparsers(dest="action", required=True)
    path_help = "a partition directory, or a log directory (every partition in it)"
    log_verify = log_commands.add_parser("verify", help="check every entry's length and CRC (exit 1 on a problem)")
    log_verify.add_argument("path", help=path_help)
    log_verify.add_argument("--json", action="store_true")
    log_verify.set_defaults(func=cmd_log_verify)
    log_dump = log_commands.add_parser("dump", help="print batches and decoded records")
    log_dump.add_argument("path", help=path_help)
    log_dump.add_argument("--json", action="store_true", help="one JSON object per record")
    log_dump.set_defaults(func=cmd_log_dump)
    log_compact = log_commands.add_parser("compact", help="compact the closed segments now")
    log_compact.add_argument("path", help=path_help)
    log_compact.add_argument(
        "--delete-retention-ms",
        type=int,
        default=None,
        help="keep tombstones this long (log.cleaner.delete.retention.ms)",
    )
    log_load = log_commands.add_parser("load", help="replay partitions and list the committed offsets")
    log_load.add_argument("path", help=path_help)
    log_load.add_argument("--json", action="store_true")
    log_load.set_defaults(func=cmd_log_load)
    for sub in (log_compact, log_load):
        sub.add_argument("--skip-corrupt", action="store_true", help="read past a corrupt older segment (reported)")
    log_compact.set_defaults(func=cmd_log_compact)

    coordinator = commands.add_parser("coordinator", help="broker-side group coordinator nodes")
    coordinator_commands = coordinator.add_subparsers(dest="action", required=True)
    coordinator_start = coordinator_commands.add_parser("start", help="run one coordinator node until SIGTERM")
    coordinator_start.add_argument("--node-id", type=int, required=True, help="this node's id (unique)")
    coordinator_start.add_argument("--host", default="127.0.0.1", help="address to bind and advertise")
    coordinator_start.add_argument("--port", type=int, default=9092, help="wire-protocol port (0: any free port)")
    coordinator_start.add_argument("--advertised-host", help="host clients are told to connect to (default: --host)")
    coordinator_start.add_argument("--log-dir", required=True, help="offsets log directory (shared by all nodes)")
    coordinator_start.add_argument("--config", metavar="FILE", help="Kafka-style properties file")
    coordinator_start.add_argument(
        "--override", action="append", metavar="KEY=VALUE", help="a property that beats --config (repeatable)"
    )
    coordinator_start.add_argument("--metrics-port", type=int, help="serve Prometheus metrics at :PORT/metrics")
    coordinator_start.set_defaults(func=cmd_coordinator_start)
    coordinator_status = coordinator_commands.add_parser("status", help="nodes, partition leaders, groups per node")
    coordinator_status.add_argument("--root", default="/zkcoord", help="zkcoord's ZooKeeper root")
    coordinator_status.add_argument("--json", action="store_true", help="print JSON")
    coordinator_status.set_defaults(func=cmd_coordinator_status)

    _add_groups_parser(commands)
    _add_migrate_parser(commands)
    _add_compare_parser(commands)

    demo = commands.add_parser("demo", help="compare the old and the new rebalance, migrate a group, report")
    demo.add_argument("--members", type=int, default=4, help="members of the compared groups (default 4)")
    demo.add_argument("--partitions", type=int, default=8, help="partitions of each topic (default 8)")
    demo.add_argument("--variants", default="legacy,eager,static,cooperative", help="variants compared")
    demo.add_argument("--out", default="var/demo", help="where traces and the report go (default var/demo)")
    demo.set_defaults(func=cmd_demo)

    for sub in (listing, alter, create, register, run, verify, export, load, coordinator_start, coordinator_status):
        _zookeeper_option(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return args.func(args)
    except BrokenPipeError:  # `zkcoord log dump ... | head`: the reader has all it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except (UsageError, ConfigError, admin.AdminError, LogError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except (ZkcoordError, KazooException) as error:
        print(f"error: {type(error).__name__}: {error}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
