"""``zkcoord zk|topics|brokers``: an embedded ZooKeeper and zkcoord's ZooKeeper ACLs, and the topics and broker
registrations of the 0.8 layout.

Must not import another command family module; shared helpers come from ``zkcoord.cli.common``.
"""

import argparse
import sys

from zkcoord.cli.common import (
    EXIT_OK,
    UsageError,
    emit_json,
    interrupt_event,
    print_table,
    wait_until_set,
    zookeeper,
    zookeeper_option,
)
from zkcoord.clock import SystemClock
from zkcoord.zk import admin, layout
from zkcoord.zk.acl import set_tree_acls
from zkcoord.zk.credentials import zookeeper_security


def cmd_zk_start(args: argparse.Namespace) -> int:
    from zkcoord.zk.server import EmbeddedZooKeeper

    server = EmbeddedZooKeeper(port=args.port, data_dir=args.data_dir, host=args.host, tick_time_ms=args.tick_time)
    stop = interrupt_event()
    with server:
        print(f"ZooKeeper serving on {server.connect_string} (data {server.data_dir}); Ctrl-C stops it", flush=True)
        if args.data_dir is None:
            print(
                f"note: the data in {server.data_dir} is temporary and removed at exit; keep it with --data-dir DIR",
                file=sys.stderr,
                flush=True,
            )
        wait_until_set(stop)
    print("ZooKeeper stopped")
    return EXIT_OK


def cmd_zk_secure(args: argparse.Namespace) -> int:
    if zookeeper_security().credentials is None:
        raise UsageError(
            "changing ACLs needs ZooKeeper credentials: put -Djava.security.auth.login.config=FILE in $KAFKA_OPTS"
        )
    with zookeeper(args) as client:
        count = set_tree_acls(client, args.root, secure=not args.unsecure)
    print(f"Set {'open' if args.unsecure else 'secure'} ACLs on {count} znodes under {args.root}.")
    return EXIT_OK


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
        emit_json({t: {"partitions": len(p)} if isinstance(p, list) else {"error": str(p)} for t, p in topics.items()})
    else:
        print_table(
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
        wait_until_set(interrupt_event())
    return EXIT_OK


def register(commands) -> None:
    """Add ``zk``, ``topics`` and ``brokers`` to the ``zkcoord`` subcommands."""
    zk = commands.add_parser("zk", help="embedded ZooKeeper").add_subparsers(dest="action", required=True)
    start = zk.add_parser("start", help="run a standalone ZooKeeper until Ctrl-C")
    start.add_argument("--port", type=int, default=2181)
    start.add_argument("--host", default="127.0.0.1")
    start.add_argument(
        "--data-dir", help="keep the data here across runs (default: a temporary directory, removed at exit)"
    )
    start.add_argument("--tick-time", type=int, default=2000, metavar="MS", help="ZooKeeper tickTime")
    start.set_defaults(func=cmd_zk_start)
    secure = zk.add_parser(
        "secure", help="set Kafka's ACLs (creator all, world read) on every znode under zkcoord's root"
    )
    secure.add_argument("--root", default=layout.DEFAULT_ROOT, help=f"zkcoord's root (default {layout.DEFAULT_ROOT})")
    secure.add_argument("--unsecure", action="store_true", help="make them open again (world all)")
    zookeeper_option(secure)
    secure.set_defaults(func=cmd_zk_secure)

    topics = commands.add_parser("topics", help="topics in the 0.8 layout").add_subparsers(dest="action", required=True)
    create = topics.add_parser("create", help="create a topic")
    create.add_argument("name")
    create.add_argument("--partitions", type=int, required=True)
    create.add_argument("--replication-factor", type=int, default=1)
    zookeeper_option(create)
    create.set_defaults(func=cmd_topics_create)
    listing = topics.add_parser("list", help="list topics and partition counts")
    listing.add_argument("--json", action="store_true")
    zookeeper_option(listing)
    listing.set_defaults(func=cmd_topics_list)
    alter = topics.add_parser("alter", help="add partitions to a topic")
    alter.add_argument("--topic", required=True)
    alter.add_argument("--partitions", type=int, required=True)
    zookeeper_option(alter)
    alter.set_defaults(func=cmd_topics_alter)

    brokers = commands.add_parser("brokers", help="broker registrations").add_subparsers(dest="action", required=True)
    broker = brokers.add_parser("register", help="write a 0.8 broker registration under /brokers/ids")
    broker.add_argument("--id", type=int, required=True)
    broker.add_argument("--host", required=True)
    broker.add_argument("--port", type=int, required=True)
    broker.add_argument("--persistent", action="store_true", help="a persistent node instead of an ephemeral one")
    zookeeper_option(broker)
    broker.set_defaults(func=cmd_brokers_register)
