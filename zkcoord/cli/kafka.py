"""``zkcoord peers fetch`` and ``zkcoord kafka start|produce``: Apache Kafka's own jars (and the 0.8.2 member
driver built on them), a local broker from them, and Kafka's console producer.

``kafka start`` is a convenience for trying zkcoord on one machine, not a way to run Kafka in production.
Must not import another command family module; shared helpers come from ``zkcoord.cli.common``.
"""

import argparse
import subprocess
import sys

from zkcoord import peers
from zkcoord.cli.common import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    interrupt_event,
    wait_until_set,
    zk_connect,
    zookeeper_option,
)


def cmd_peers_fetch(args: argparse.Namespace) -> int:
    from zkcoord.peers import driver

    def progress(message: str) -> None:
        print(message, flush=True)

    failures = []
    for peer in peers.PEERS:
        try:
            folder = peers.fetch(peer, progress=progress)
        except peers.PeerUnavailableError as error:
            failures.append(str(error))
            continue
        print(f"{peer.artifact}: ready in {folder}")
    if peers.is_cached(peers.LEGACY_CONSUMER):  # the member driver compiles against the 0.8.2 jars
        try:
            print(f"{driver.SOURCE.name}: ready in {driver.compiled_driver(progress=progress)}")
        except peers.PeerUnavailableError as error:
            failures.append(str(error))
    for failure in failures:
        print(f"error: {failure}", file=sys.stderr)
    return EXIT_USAGE if failures else EXIT_OK


def cmd_kafka_start(args: argparse.Namespace) -> int:
    from zkcoord.peers.broker import KafkaBroker

    broker = KafkaBroker(
        zk_connect(args.zookeeper),
        port=args.port,
        host=args.host,
        broker_id=args.broker_id,
        data_dir=args.data_dir,
        heap_mb=args.heap_mb,
    )
    stop = interrupt_event()
    with broker:
        print(
            f"Kafka {peers.BROKER.artifact.rsplit(':', 1)[1]} broker {args.broker_id} serving PLAINTEXT://"
            f"{broker.bootstrap} on {broker.zookeeper_connect} (data {broker.data_dir}"
            + ("" if args.data_dir else ", removed at exit")
            + "); a local convenience, not a production broker; Ctrl-C stops it",
            flush=True,
        )
        wait_until_set(stop)
    print("Kafka broker stopped")
    return EXIT_OK


def cmd_kafka_produce(args: argparse.Namespace) -> int:
    """Kafka's own console producer from the cached 3.9 jars: one record per line of standard input."""
    from zkcoord.peers.jvm import java_command

    command = java_command(
        peers.BROKER,
        "kafka.tools.ConsoleProducer",
        ["--bootstrap-server", args.bootstrap_server, "--topic", args.topic],
        heap_mb=args.heap_mb,
    )
    code = subprocess.run(command, check=False).returncode
    if code in (0, EXIT_INTERRUPTED):  # Ctrl-C reaches both; the JVM exits 130 as zkcoord does
        return code
    print(f"error: Kafka's console producer exited with status {code} (its message is above)", file=sys.stderr)
    return EXIT_USAGE  # its bad arguments and unreachable brokers alike: no check of zkcoord's failed


def register(commands) -> None:
    """Add ``peers`` and ``kafka`` to the ``zkcoord`` subcommands."""
    peer_actions = commands.add_parser("peers", help="Apache Kafka's jars, resolved by Maven into a cache")
    actions = peer_actions.add_subparsers(dest="action", required=True)
    fetch = actions.add_parser(
        "fetch", help="resolve the 0.8.2 consumer and the 3.9 broker, compile the 0.8.2 member driver (once; cached)"
    )
    fetch.set_defaults(func=cmd_peers_fetch)

    kafka = commands.add_parser("kafka", help="a local Kafka 3.9 broker in ZooKeeper mode (a convenience)")
    kafka_actions = kafka.add_subparsers(dest="action", required=True)
    start = kafka_actions.add_parser("start", help="run one broker on ZooKeeper until Ctrl-C")
    start.add_argument("--port", type=int, default=9092)
    start.add_argument("--host", default="127.0.0.1", help="the listener's host, also what the broker registers")
    start.add_argument("--broker-id", type=int, default=0)
    start.add_argument("--data-dir", help="keep the logs here (default: a temporary directory, removed at exit)")
    start.add_argument("--heap-mb", type=int, default=512)
    zookeeper_option(start)
    start.set_defaults(func=cmd_kafka_start)
    produce = kafka_actions.add_parser("produce", help="send standard input's lines to a topic (Kafka's producer)")
    produce.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT[,HOST:PORT]")
    produce.add_argument("--topic", required=True)
    produce.add_argument("--heap-mb", type=int, default=256)
    produce.set_defaults(func=cmd_kafka_produce)
