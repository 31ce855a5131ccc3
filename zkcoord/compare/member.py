"""One member of a comparison run, as a process: ``python -m zkcoord.compare.member SPEC_JSON``.

Runs a legacy 0.8.2 member (LegacyConsumer, one stream) or a coordinator member (zkcoord.client.Consumer) on
the run's source (synthetic, or a Kafka broker), or on the broker a librdkafka consumer
(zkcoord.compare.rdkafka_member) or Kafka 0.8.2's own consumer in a JVM (zkcoord.compare.jvm_member),
processes every record at ``cost_ms`` each, and appends its trace to ``trace``: its own
``legacy.*``/``client.*``/``rdkafka.*`` events and the ``compare.*`` events derived from them (docs/traces.md),
every line tagged with the run, scenario, variant and instance. Prints ``ready`` once started; a ``close`` line
on stdin (or SIGTERM) closes it cleanly, as an operator's restart would; the runner
SIGKILLs or SIGSTOPs it for the crash and session-expiry scenarios.
"""

import contextlib
import json
import logging
import signal
import sys
import threading
import time

from zkcoord.compare.member_trace import CompareTrace, now_ms
from zkcoord.compare.scenarios import JVM_MEMBER, LEGACY_MEMBER, RDKAFKA_MEMBER
from zkcoord.sources import open_source
from zkcoord.trace import JsonLinesTraceWriter

log = logging.getLogger(__name__)
READY = "ready"
POLL_TIMEOUT_MS = 100


REBALANCE_MAX_RETRIES = 10


def legacy_member_config(
    group: str,
    zk_connect: str,
    member: str,
    session_timeout_ms: int,
    auto_commit_interval_ms: int,
    rebalance_backoff_ms: int = 200,
) -> dict:
    """A legacy member's 0.8.2 properties: auto-commit, quick rebalance retries, from the log's beginning."""
    return {
        "group.id": group,
        "zookeeper.connect": zk_connect,
        "consumer.id": member,
        "zookeeper.session.timeout.ms": session_timeout_ms,
        "rebalance.backoff.ms": rebalance_backoff_ms,
        "rebalance.max.retries": REBALANCE_MAX_RETRIES,
        "auto.commit.enable": True,
        "auto.commit.interval.ms": auto_commit_interval_ms,
        "auto.offset.reset": "smallest",
    }


def client_member_config(
    group: str,
    bootstrap: list[tuple[str, int]],
    member: str,
    strategy: str,
    static: bool,
    session_timeout_ms: int,
    heartbeat_interval_ms: int,
    auto_commit_interval_ms: int,
) -> dict:
    """A coordinator member's settings (zkcoord.client.Consumer), a static member's instance id its name."""
    config = {
        "bootstrap_servers": ",".join(f"{host}:{port}" for host, port in bootstrap),
        "group_id": group,
        "client_id": member,
        "partition_assignment_strategy": strategy,
        "session_timeout_ms": session_timeout_ms,
        "heartbeat_interval_ms": heartbeat_interval_ms,
        "enable_auto_commit": True,
        "auto_commit_interval_ms": auto_commit_interval_ms,
        "auto_offset_reset": "earliest",
        "metadata_max_age_ms": heartbeat_interval_ms,  # a partition-count change is seen as fast
    }
    if static:
        config["group_instance_id"] = member
    return config


class ClientMember:
    """A zkcoord.client.Consumer in a poll loop: each poll's records processed partition by partition."""

    def __init__(self, spec: dict, source, trace: CompareTrace, stop: threading.Event):
        from zkcoord.client import Consumer

        self.trace = trace
        self.cost_s = spec["cost_ms"] / 1000
        self.consumer = Consumer(*spec["topics"], source=source, trace=trace, **spec["config"])
        self.stop = stop
        self.failed = False

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="poll", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._poll_until_stopped()
        except Exception:
            log.exception("the member failed")
            self.failed = True
            self.stop.set()

    def _poll_until_stopped(self) -> None:
        while not self.stop.is_set():
            batch = self.consumer.poll(timeout_ms=POLL_TIMEOUT_MS)
            for (topic, partition), records in batch.items():
                if self.cost_s:
                    time.sleep(self.cost_s * len(records))
                self.trace.processed(topic, partition, records[0].offset, records[-1].offset, now_ms())

    def close(self) -> None:
        """Stop polling (``stop`` is set), then close: the poll side owns the consumer."""
        self._thread.join()
        self.consumer.close()  # commits (auto-commit), revokes, leaves unless static


class LegacyMember:
    """A LegacyConsumer with one stream per topic, each iterated record by record in a thread of its own.

    Each record is reported as processed right after its work: 0.8.2 moves the consumed offset when the
    stream hands a record out, so an auto-commit may cover it before it is done, and a report held back for
    a batch would be lost with the process in a crash although the next owner starts after it.
    """

    failed = False  # the stream never raises: 0.8.2 members keep trying

    def __init__(self, spec: dict, source, trace: CompareTrace, stop: threading.Event):
        from zkcoord.legacy.consumer import LegacyConsumer

        self.trace = trace
        self.cost_s = spec["cost_ms"] / 1000
        topics = {topic: 1 for topic in spec["topics"]}
        self.consumer = LegacyConsumer(spec["config"], topics=topics, trace=trace, source=source)
        self.consumer.start()
        self._threads = [
            threading.Thread(target=self._run, args=(streams[0],), name=f"stream-{topic}", daemon=True)
            for topic, streams in self.consumer.streams().items()
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def _run(self, stream) -> None:
        for record in stream:  # ends when the consumer closes
            if self.cost_s:
                time.sleep(self.cost_s)
            self.trace.processed(record.topic, record.partition, record.offset, record.offset, now_ms())

    def close(self) -> None:
        """Close (which ends the stream), then let the last record's report out."""
        self.consumer.close()
        for thread in self._threads:
            thread.join(timeout=10)


def run_member(spec: dict, stop: threading.Event) -> bool:
    """Start the member of ``spec``, print ``ready``, process until ``stop``, close; False if it failed."""
    writer = JsonLinesTraceWriter(spec["trace"])
    trace = CompareTrace(writer, spec)
    with contextlib.ExitStack() as resources:
        resources.callback(writer.close)
        if spec["kind"] == RDKAFKA_MEMBER:
            from zkcoord.compare.rdkafka_member import RdkafkaMember

            member = RdkafkaMember(spec, trace, stop)  # reads Kafka itself
        elif spec["kind"] == JVM_MEMBER:
            from zkcoord.compare.jvm_member import JvmMember

            member = JvmMember(spec, trace, stop)  # reads Kafka itself
        else:
            source = open_source(spec["source"])
            resources.callback(source.close)
            member = (LegacyMember if spec["kind"] == LEGACY_MEMBER else ClientMember)(spec, source, trace, stop)
        member.start()
        print(READY, flush=True)
        stop.wait()
        member.close()
    return not member.failed


def main(argv: list[str]) -> int:
    logging.basicConfig(
        level=logging.WARNING, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    spec = json.loads(argv[0])
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())

    def read_commands() -> None:
        for line in sys.stdin:
            if line.strip() == "close":
                break
        stop.set()  # a closed stdin (the runner is gone) closes the member too

    threading.Thread(target=read_commands, name="commands", daemon=True).start()
    return 0 if run_member(spec, stop) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
