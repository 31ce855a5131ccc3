"""``zkcoord coordinator start|status``: run a coordinator node; show the nodes, leaders and groups of a cluster.

Must not import another command family module; shared helpers come from ``zkcoord.cli.common``.
"""

import argparse
import contextlib
import signal
import sys
from collections.abc import Callable

from zkcoord.cli.common import (
    EXIT_OK,
    EXIT_PROBLEM,
    EXIT_USAGE,
    client_security,
    command_config_option,
    emit_json,
    mark_interrupted,
    parse_key_values,
    print_table,
    read_properties,
    zk_connect,
    zookeeper,
    zookeeper_option,
)


def cmd_coordinator_start(args: argparse.Namespace) -> int:
    """Run one coordinator node until SIGTERM or Ctrl-C, then shut down gracefully."""
    import gevent
    import gevent.event

    from zkcoord.metrics_http import serve_metrics
    from zkcoord.server.config import node_config
    from zkcoord.server.node import CoordinatorNode, tune_garbage_collector

    properties: dict[str, object] = read_properties(args.config) if args.config else {}
    properties.update(parse_key_values(args.override or [], "--override"))
    config = node_config(properties)
    connect = zk_connect(args.zookeeper)
    node = CoordinatorNode(
        args.node_id,
        args.host,
        args.port,
        connect,
        args.log_dir,
        config,
        advertised_host=args.advertised_host,
        advertised_port=args.advertised_port,
        kafka_port=args.kafka_port,
    )
    stop = gevent.event.Event()
    gevent.signal_handler(signal.SIGTERM, stop.set)
    gevent.signal_handler(signal.SIGINT, lambda: (mark_interrupted(), stop.set()))
    with contextlib.ExitStack() as running:
        if args.metrics_port:  # probes answer from the start: alive, not ready while waiting for a predecessor
            metrics = serve_metrics(node.metrics.registry, args.host, args.metrics_port, readiness=node.readiness)
            running.callback(metrics.stop)
        starting = gevent.spawn(_error_of, node.start)
        gevent.wait([starting, stop], count=1)
        if not starting.ready():  # stopped while waiting, e.g. for a predecessor's registration to expire
            starting.kill()
            node.stop()
            return EXIT_OK
        if (failure := starting.get()) is not None:
            raise failure
        running.callback(node.stop)
        tune_garbage_collector()
        if node.kafka_port is not None:
            print(f"coordinator node {args.node_id} kafka listener on {args.host}:{node.kafka_port}", flush=True)
        print(f"coordinator node {args.node_id} serving on {args.host}:{node.port}", flush=True)
        stop.wait()
    return EXIT_OK


def _error_of(call: Callable[[], object]) -> Exception | None:
    """Run ``call``; its error returned, not raised, so that gevent's hub prints no traceback of it: ``zkcoord``
    reports it in one line."""
    try:
        call()
    except Exception as error:
        return error
    return None


def cmd_coordinator_status(args: argparse.Namespace) -> int:
    """Nodes, partition leaders and epochs from ZooKeeper; loading state and groups from each node."""
    from zkcoord.server.status import cluster_status

    connect = client_security(args.command_config).connector()
    with zookeeper(args) as client:
        status = cluster_status(client, args.root, create_connection=connect)
    # a registered node that does not answer is a connection error: shown, said on stderr, exit 2
    unreachable = [node for node in status["nodes"] if node["error"]]
    code = EXIT_USAGE if unreachable else EXIT_OK
    if not status["nodes"]:  # most often a mistyped --root or chroot, which would read as an idle cluster
        print(f"error: no coordinator node is registered under {args.root}", file=sys.stderr)
        code = EXIT_PROBLEM
    for node in unreachable:
        print(
            f"error: node {node['node_id']} at {node['host']}:{node['port']} did not answer ({node['error']}): its "
            "loading state and groups are unknown",
            file=sys.stderr,
        )
    if args.json:
        emit_json(status)
        return code
    if not status["nodes"]:
        return code
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
    print_table(rows, ("NODE", "ADDRESS", "PARTITIONS", "LOADING", "GROUPS", "ERROR"))
    print()
    leaders = [(p["partition"], p["leader"], p["epoch"]) for p in status["partitions"]]
    print_table(leaders, ("PARTITION", "LEADER", "EPOCH"))
    return code


def register(commands) -> None:
    """Add ``coordinator`` and its actions to the ``zkcoord`` subcommands."""
    coordinator = commands.add_parser("coordinator", help="broker-side group coordinator nodes")
    actions = coordinator.add_subparsers(dest="action", required=True)
    start = actions.add_parser("start", help="run one coordinator node until SIGTERM")
    start.add_argument("--node-id", type=int, required=True, help="this node's id (unique)")
    start.add_argument("--host", default="127.0.0.1", help="address to bind and advertise")
    start.add_argument("--port", type=int, default=9092, help="wire-protocol port (0: any free port)")
    start.add_argument("--advertised-host", help="host clients are told to connect to (default: --host)")
    start.add_argument(
        "--advertised-port",
        type=int,
        help="port clients are told to connect to, e.g. a proxy's (default: --port)",
    )
    start.add_argument(
        "--kafka-port",
        type=int,
        help="serve Kafka's protocol on this port (0: any free port; docs/kafka-protocol.md); same as listeners=",
    )
    start.add_argument("--log-dir", required=True, help="offsets log directory (shared by all nodes)")
    start.add_argument("--config", metavar="FILE", help="Kafka-style properties file")
    start.add_argument(
        "--override", action="append", metavar="KEY=VALUE", help="a property that beats --config (repeatable)"
    )
    start.add_argument("--metrics-port", type=int, help="serve Prometheus metrics at :PORT/metrics")
    zookeeper_option(start)
    start.set_defaults(func=cmd_coordinator_start)

    status = actions.add_parser("status", help="nodes, partition leaders, groups per node")
    status.add_argument("--root", default="/zkcoord", help="zkcoord's ZooKeeper root")
    status.add_argument("--json", action="store_true", help="print JSON")
    command_config_option(status)
    zookeeper_option(status)
    status.set_defaults(func=cmd_coordinator_status)
