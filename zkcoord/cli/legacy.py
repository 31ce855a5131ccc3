"""``zkcoord legacy run|verify|offsets``: a Kafka 0.8.2 ZooKeeper group member that reads the brokers as 0.8.2's
ConsoleConsumer does, its check, its offsets' export.

Must not import another command family module; shared helpers come from ``zkcoord.cli.common``.
"""

import argparse
import contextlib
import json
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

from zkcoord.cli.common import (
    EXIT_OK,
    EXIT_PROBLEM,
    UsageError,
    comma_list,
    command_config,
    command_config_option,
    emit_json,
    interrupt_event,
    parse_key_values,
    print_table,
    read_properties,
    stop_on_sigterm,
    zk_connect,
    zookeeper,
    zookeeper_at,
    zookeeper_option,
)
from zkcoord.config import parse_bootstrap_servers
from zkcoord.errors import ConfigError
from zkcoord.model import TopicPartition
from zkcoord.sources import RecordSource, open_source
from zkcoord.zk import admin, layout

# How often `legacy run` without --print writes the counts so far (when they changed).
COUNTS_REPORT_INTERVAL_S = 10.0


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a positive number")
    return value


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


def broker_bootstrap(brokers: Sequence[layout.BrokerRegistration], connect: str) -> str:
    """``host:port,...`` of the brokers registered under ``/brokers/ids`` of ``connect``, as 0.8.2 finds them.

    A UsageError saying what to do when none is registered or none has a PLAINTEXT host.
    """
    addresses = [broker.connection_string for broker in brokers if broker.connection_string]
    if addresses:
        return ",".join(addresses)
    if brokers:
        found = (
            f"no broker registered under {layout.BROKER_IDS_PATH} in {connect} has a PLAINTEXT host "
            f"(broker ids {', '.join(str(broker.broker_id) for broker in brokers)})"
        )
    else:
        found = f"no broker is registered under {layout.BROKER_IDS_PATH} in {connect}"
    raise UsageError(
        f"{found}: start one on that ZooKeeper chroot (zkcoord kafka start --zookeeper {connect}), name the brokers "
        "with --bootstrap-server HOST:PORT[,HOST:PORT], or read synthetic records with --source synthetic"
    )


def _open_source(args: argparse.Namespace, connect: str) -> RecordSource:
    """``--source``, else Kafka at ``--bootstrap-server``, else Kafka at the brokers registered in ZooKeeper."""
    if args.source:
        return open_source(args.source)
    from zkcoord.sources.kafka import KafkaSource

    if args.bootstrap_server:
        try:
            parse_bootstrap_servers(args.bootstrap_server)
        except ConfigError:
            raise UsageError(f"--bootstrap-server {args.bootstrap_server!r}: give HOST:PORT[,HOST:PORT]") from None
        return KafkaSource(args.bootstrap_server)
    with zookeeper_at(connect) as client:
        return KafkaSource(broker_bootstrap(admin.read_brokers(client), connect))


def cmd_legacy_run(args: argparse.Namespace) -> int:
    from zkcoord.legacy.config import AUTO_OFFSET_RESET_SMALLEST
    from zkcoord.legacy.console import StreamReaders, format_counts
    from zkcoord.legacy.consumer import LegacyConsumer
    from zkcoord.trace import JsonLinesTraceWriter

    properties = read_properties(args.consumer_config) if args.consumer_config else {}
    properties.update(command_config(args.command_config))  # its log commits' security (offsets.storage=kafka)
    properties.update(parse_key_values(args.consumer_property, "--consumer-property"))
    # --zookeeper beats the properties file, which beats $ZKCOORD_ZK_CONNECT
    properties["zookeeper.connect"] = zk_connect(args.zookeeper or properties.get("zookeeper.connect"))
    properties["group.id"] = args.group
    if args.consumer_id:
        properties["consumer.id"] = args.consumer_id
    if args.metrics_port is not None:
        properties["zkcoord.metrics.port"] = args.metrics_port
    if args.metrics_host:
        properties["zkcoord.metrics.host"] = args.metrics_host
    # 0.8.2's ConsoleConsumer sets this too, but refuses a group with offsets unless told to delete them all: a
    # member beside others keeps them, and reset applies only where a partition has none (or an invalid one).
    if args.from_beginning:
        properties["auto.offset.reset"] = AUTO_OFFSET_RESET_SMALLEST
    subscription: dict = {}
    if args.topics:
        subscription["topics"] = parse_topic_streams(args.topics)
    if args.whitelist:
        subscription["whitelist"] = args.whitelist
    if args.blacklist:
        subscription["blacklist"] = args.blacklist
    printing = args.print or args.print_key or args.print_offsets
    notices = sys.stderr if printing else sys.stdout  # with records on standard output, it carries nothing else
    with contextlib.ExitStack() as cleanup:
        stop_on_sigterm()  # until the readers' event: SIGTERM during start-up unwinds as Ctrl-C does, and exits 0
        source = _open_source(args, properties["zookeeper.connect"])
        cleanup.callback(source.close)
        sinks: list[Callable] = [_print_rebalance(args.json, notices)]
        if args.trace:
            writer = JsonLinesTraceWriter(args.trace)
            cleanup.callback(writer.close)
            sinks.append(writer)
        consumer = LegacyConsumer(properties, trace=sinks, num_streams=args.num_streams, source=source, **subscription)
        cleanup.callback(consumer.close)
        print(
            f"member {consumer.consumer_id} joining group {args.group}, reading {source.spec}; Ctrl-C leaves",
            file=notices,
            flush=True,
        )
        if consumer.config.metrics_port is not None:
            address = f"{consumer.config.metrics_host}:{consumer.config.metrics_port}"
            print(f"metrics at http://{address}/metrics", file=notices, flush=True)
        consumer.start()  # Ctrl-C here raises KeyboardInterrupt after a clean close: `zkcoord` says interrupted
        write = _record_writer(args) if printing else lambda record: None
        readers = StreamReaders(consumer, write, max_records=args.max_messages, stop=interrupt_event()).start()
        _wait_reporting(readers, None if printing else notices)
        readers.close()  # the member's final commit
        print(format_counts(readers.counts()), file=notices, flush=True)
        if readers.failure:
            raise readers.failure  # a SourceError exits 2; a closed standard output (BrokenPipeError) 0
    return EXIT_OK


def _record_writer(args: argparse.Namespace) -> Callable:
    """Write each record as one line on standard output, as it comes, from any stream's thread."""
    from zkcoord.legacy.console import format_record

    output = sys.stdout.buffer
    lock = threading.Lock()
    fields = {"value": args.print or args.print_key, "key": args.print_key, "offsets": args.print_offsets}

    def write(record) -> None:
        line = format_record(record, **fields) + b"\n"
        with lock:
            output.write(line)
            output.flush()

    return write


def _wait_reporting(readers, report: TextIO | None) -> None:
    """Until the readers stop (Ctrl-C included), writing the counts to ``report`` now and then when they changed."""
    from zkcoord.legacy.console import format_counts

    reported: dict = {}
    next_report = time.monotonic() + COUNTS_REPORT_INTERVAL_S
    while not readers.stop.wait(0.5):  # wakes now and then so that signal handlers run
        if report is not None and time.monotonic() >= next_report:
            next_report += COUNTS_REPORT_INTERVAL_S
            counts = readers.counts()
            if counts != reported:
                print(format_counts(counts, so_far=True), file=report, flush=True)
                reported = counts


def _print_rebalance(as_json: bool, output: TextIO) -> Callable[[dict], None]:
    def sink(event: dict) -> None:
        if as_json:
            print(json.dumps(event, sort_keys=True), file=output, flush=True)
        elif event["type"] == "legacy.rebalance_attempt":
            detail = {"conflict": f" conflicts={event['conflicts']}", "error": f" {event['error']}"}
            print(
                f"rebalance attempt {event['attempt']} ({event['reason']}): {event['outcome']} in "
                f"{event['duration_ms']:.0f} ms, {event['zk_ops']} ZooKeeper ops" + detail.get(event["outcome"], ""),
                file=output,
                flush=True,
            )
        elif event["type"] == "legacy.assignment" and event["connected"]:
            for thread, claims in event["assignment"].items():
                print(
                    f"  {thread}: {_format_partitions([TopicPartition(*c) for c in claims])}", file=output, flush=True
                )
        elif event["type"] in ("legacy.session_expired", "legacy.rebalance_failed"):
            fields = {k: v for k, v in event.items() if k not in ("schema", "type")}
            print(f"{event['type']}: {json.dumps(fields)}", file=output, flush=True)

    return sink


def cmd_legacy_verify(args: argparse.Namespace) -> int:
    with zookeeper(args) as client:
        snapshot = admin.read_group(client, args.group, exclude_internal_topics=not args.include_internal_topics)
    problems = snapshot.problems()
    if snapshot.exists and not snapshot.members:  # 0.8.2's VerifyConsumerRebalance calls this verified
        problems.append(f"consumer group {args.group} has no live member: nothing consumes its partitions")
    rows = [
        (
            args.group,
            topic,
            partition,
            admin.printable(snapshot.owners.get(TopicPartition(topic, partition), "-")),
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
    run = actions.add_parser(
        "run", help="run one member until Ctrl-C, reading the brokers' records and printing rebalances and counts"
    )
    run.add_argument("--group", required=True)
    subscription = run.add_mutually_exclusive_group(required=True)
    subscription.add_argument("--topics", metavar="T1:STREAMS,T2:STREAMS", help="static subscription, in order")
    subscription.add_argument("--whitelist", metavar="REGEX")
    subscription.add_argument("--blacklist", metavar="REGEX")
    run.add_argument("--num-streams", type=int, default=1, help="streams of a wildcard subscription")
    run.add_argument("--consumer-id", help="consumer.id (default: host-time-random, as 0.8.2)")
    run.add_argument("--consumer.config", dest="consumer_config", metavar="FILE", help="Kafka consumer properties")
    run.add_argument("--consumer-property", action="append", default=[], metavar="KEY=VALUE")
    command_config_option(run)
    run.add_argument(
        "--from-beginning",
        action="store_true",
        help="auto.offset.reset=smallest: partitions without a committed offset start at the log's beginning",
    )
    run.add_argument("--max-messages", type=_positive_int, metavar="N", help="leave after N records")
    run.add_argument("--print", action="store_true", help="write each record's value on standard output")
    run.add_argument("--print-key", action="store_true", help="write KEY<TAB>VALUE (a null key as null)")
    run.add_argument(
        "--print-offsets", action="store_true", help="write TOPIC PARTITION OFFSET (before the key and value if asked)"
    )
    records = run.add_mutually_exclusive_group()
    records.add_argument(
        "--bootstrap-server",
        metavar="HOST:PORT[,HOST:PORT]",
        help="the Kafka brokers to read records from (default: those registered under /brokers/ids; not "
        "zkcoord's coordinator nodes, which the bootstrap.servers property names)",
    )
    records.add_argument(
        "--source", metavar="SPEC", help="another record source: synthetic[:rate=N,...] or kafka:bootstrap=... "
    )
    run.add_argument("--trace", metavar="FILE", help="append trace events (JSON lines) here")
    run.add_argument(
        "--metrics-port",
        type=int,
        metavar="PORT",
        help="serve the member's Prometheus metrics at :PORT/metrics (zkcoord.metrics.port; docs/legacy.md)",
    )
    run.add_argument(
        "--metrics-host", metavar="ADDRESS", help="the address --metrics-port binds (zkcoord.metrics.host; 127.0.0.1)"
    )
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
