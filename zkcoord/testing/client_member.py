"""One consumer-group member as a process, for tests that bounce, kill and restart members.

``python -m zkcoord.testing.client_member --zookeeper CONNECT --group G --topic T --source SPEC --trace FILE``
runs a :class:`~zkcoord.client.Consumer` in a poll loop with auto-commit, appends its trace events to ``FILE``
and prints ``ready`` once subscribed. SIGTERM (or SIGINT) closes it cleanly: a final commit, the revocation
callbacks, and a LeaveGroup for dynamic members only (a static member sends none, KIP-345). SIGKILL is the
test's way of crashing it; SIGUSR1 writes every thread's stack to stderr (for a test that finds it hung).
``--processing-ms-per-record`` makes each poll cost time, like real work.
``--start-on-stdin`` prints ``waiting`` once imported and joins only when a line arrives on stdin: a test can
start a replacement ahead and restart a static member well within its session, whatever the interpreter's
start-up costs on a busy machine.

Imports the client, the sources and the trace writer; nothing of the coordinator.
"""

import argparse
import faulthandler
import logging
import signal
import sys
import threading
import time
from collections.abc import Sequence

from zkcoord.client import Consumer
from zkcoord.sources import open_source
from zkcoord.trace import JsonLinesTraceWriter

log = logging.getLogger(__name__)
READY = "ready"
WAITING = "waiting"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m zkcoord.testing.client_member", description=__doc__.split("\n")[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--zookeeper", help="discover coordinator nodes from this ZooKeeper connect string")
    where.add_argument("--bootstrap-server", help="coordinator nodes host:port[,host:port]")
    parser.add_argument("--group", required=True)
    parser.add_argument("--topic", required=True, action="append", help="repeat for several topics")
    parser.add_argument("--instance-id", help="group.instance.id: a static member")
    parser.add_argument("--strategy", default="range", help="partition.assignment.strategy")
    parser.add_argument("--source", required=True, help="record source spec (zkcoord.sources.open_source)")
    parser.add_argument("--trace", required=True, help="append trace events (JSON lines) to this file")
    parser.add_argument("--processing-ms-per-record", type=float, default=0.0)
    parser.add_argument("--session-timeout-ms", type=int, default=10000)
    parser.add_argument("--heartbeat-interval-ms", type=int, default=3000)
    parser.add_argument("--max-poll-interval-ms", type=int, default=300000)
    parser.add_argument("--max-poll-records", type=int, default=500)
    parser.add_argument("--auto-commit-interval-ms", type=int, default=1000)
    parser.add_argument("--retry-backoff-ms", type=int, default=100)
    parser.add_argument("--auto-offset-reset", default="earliest", choices=("earliest", "latest", "none"))
    parser.add_argument("--client-id", default="client-member")
    parser.add_argument("--log-level", default="WARNING")
    parser.add_argument("--start-on-stdin", action="store_true", help="print 'waiting', join once a line arrives")
    return parser.parse_args(argv)


def consumer_config(args: argparse.Namespace) -> dict:
    config = {
        "group_id": args.group,
        "group_instance_id": args.instance_id,
        "client_id": args.client_id,
        "partition_assignment_strategy": args.strategy,
        "session_timeout_ms": args.session_timeout_ms,
        "heartbeat_interval_ms": args.heartbeat_interval_ms,
        "max_poll_interval_ms": args.max_poll_interval_ms,
        "max_poll_records": args.max_poll_records,
        "enable_auto_commit": True,
        "auto_commit_interval_ms": args.auto_commit_interval_ms,
        "auto_offset_reset": args.auto_offset_reset,
        "retry_backoff_ms": args.retry_backoff_ms,
    }
    if args.zookeeper:
        config["zookeeper_connect"] = args.zookeeper
    else:
        config["bootstrap_servers"] = args.bootstrap_server
    return config


def run(args: argparse.Namespace, stop: threading.Event) -> int:
    if args.start_on_stdin:
        print(WAITING, flush=True)
        if not sys.stdin.readline() or stop.is_set():  # EOF: the test gave up on this member
            return 0
    source = open_source(args.source)
    writer = JsonLinesTraceWriter(args.trace)
    consumer = None
    try:
        consumer = Consumer(source=source, trace=writer, **consumer_config(args))
        consumer.subscribe(args.topic)
        print(READY, flush=True)
        per_record_s = args.processing_ms_per_record / 1000
        while not stop.is_set():
            batch = consumer.poll(timeout_ms=100)
            count = sum(len(records) for records in batch.values())
            if count and per_record_s:
                time.sleep(count * per_record_s)
    finally:
        if consumer is not None:
            consumer.close()  # commits (auto-commit is on), revokes, leaves if dynamic
        writer.close()
        source.close()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    return run(args, stop)


if __name__ == "__main__":
    sys.exit(main())
