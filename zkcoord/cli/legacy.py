"""``zkcoord legacy run|verify|offsets``: a Kafka 0.8.2 ZooKeeper group member, its check, its offsets' export.

Must not import another command family module; shared helpers come from ``zkcoord.cli.common``.
"""

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from zkcoord.cli.common import (
    EXIT_OK,
    EXIT_PROBLEM,
    UsageError,
    comma_list,
    emit_json,
    interrupt_event,
    parse_key_values,
    print_table,
    read_properties,
    wait_until_set,
    zk_connect,
    zookeeper,
    zookeeper_option,
)
from zkcoord.model import TopicPartition
from zkcoord.zk import admin


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


def _format_partitions(partitions: Sequence[TopicPartition]) -> str:
    return ",".join(f"{tp.topic}-{tp.partition}" for tp in partitions) or "-"


def cmd_legacy_run(args: argparse.Namespace) -> int:
    from zkcoord.legacy.consumer import LegacyConsumer
    from zkcoord.trace import JsonLinesTraceWriter

    properties = read_properties(args.consumer_config) if args.consumer_config else {}
    properties.update(parse_key_values(args.consumer_property, "--consumer-property"))
    # --zookeeper beats the properties file, which beats $ZKCOORD_ZK_CONNECT
    properties["zookeeper.connect"] = zk_connect(args.zookeeper or properties.get("zookeeper.connect"))
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
        wait_until_set(interrupt_event())
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
        emit_json(
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
        print_table(rows, ("GROUP", "TOPIC", "PARTITION", "OWNER", "OFFSET"))
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


def register(commands) -> None:
    """Add ``legacy`` and its actions to the ``zkcoord`` subcommands."""
    legacy = commands.add_parser("legacy", help="Kafka 0.8.2 ZooKeeper consumer groups")
    actions = legacy.add_subparsers(dest="action", required=True)
    run = actions.add_parser("run", help="run one member until Ctrl-C, printing assignment changes")
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
    zookeeper_option(run)
    run.set_defaults(func=cmd_legacy_run)

    verify = actions.add_parser("verify", help="check every partition has one live owner (exit 1 if not)")
    verify.add_argument("--group", required=True)
    verify.add_argument("--include-internal-topics", action="store_true", help="expand wildcards over internal topics")
    verify.add_argument("--json", action="store_true")
    zookeeper_option(verify)
    verify.set_defaults(func=cmd_legacy_verify)

    offsets = actions.add_parser("offsets", help="export or import ZooKeeper offsets")
    offsets_actions = offsets.add_subparsers(dest="offsets_action", required=True)
    export = offsets_actions.add_parser("export", help="write <znode>:<offset> lines (ExportZkOffsets)")
    export.add_argument("--group", action="append", help="a group (repeatable; default: every group)")
    export.add_argument("--output", metavar="FILE", help="default: standard output")
    zookeeper_option(export)
    export.set_defaults(func=cmd_legacy_offsets_export)
    load = offsets_actions.add_parser("import", help="read <znode>:<offset> lines (ImportZkOffsets)")
    load.add_argument("--input", required=True, metavar="FILE", help="'-' for standard input")
    zookeeper_option(load)
    load.set_defaults(func=cmd_legacy_offsets_import)
