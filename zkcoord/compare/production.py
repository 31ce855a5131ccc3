"""Where a comparison run's records come from: the synthetic source, or a real Kafka broker fed by the runner.

Both give the members a source spec (``zkcoord.sources.open_source``), create and grow the run's topics, and
say at the drain up to which offset each partition has records. The synthetic source's logs grow on the clock
and its topics are written straight into ZooKeeper. On Kafka the broker creates and grows the topics (Kafka's
admin API, so ``/brokers/topics`` is Kafka's own) and a producer thread of the runner writes ``rate`` records a
second into every partition from the moment it sees it until the drain.
"""

import contextlib
import logging
import threading
import time
from collections.abc import Iterable
from typing import Protocol

from kazoo.client import KazooClient

from zkcoord.errors import SourceError
from zkcoord.model import TopicPartition
from zkcoord.sources import SyntheticSource, open_source
from zkcoord.sources.base import parse_spec
from zkcoord.testing.kafka_broker import KafkaEndpoint
from zkcoord.zk import admin
from zkcoord.zk.client import started_client

log = logging.getLogger(__name__)

SYNTHETIC = "synthetic"
KAFKA = "kafka"
PRODUCE_TICK_S = 0.05
# The producer learns of partitions added during a run through its metadata refresh.
PRODUCER_METADATA_MAX_AGE_MS = 1000


class ProductionError(SourceError):
    """The runner could not write the workload's records into Kafka."""


class RunContext(Protocol):
    """Where the runs happen: their ZooKeeper (on Kafka, the broker's chroot), and the broker when there is one."""

    kafka: KafkaEndpoint | None

    def zookeeper(self) -> contextlib.AbstractContextManager[KazooClient]: ...


def source_kind(spec: str) -> str:
    """``synthetic`` or ``kafka``; :class:`SourceError` for any other spec, or a synthetic one with settings."""
    kind, options = parse_spec(spec)
    if kind not in (SYNTHETIC, KAFKA):
        raise SourceError(f"source {spec!r}: a comparison reads 'synthetic' or 'kafka:bootstrap=HOST:PORT'")
    if kind == SYNTHETIC and options:
        raise SourceError(f"source {spec!r}: the comparison's synthetic source takes no settings (use --rate)")
    if kind == KAFKA and not options.get("bootstrap"):
        raise SourceError(f"source {spec!r}: bootstrap=HOST:PORT[,HOST:PORT] is required")
    return kind


def kafka_endpoint(spec: str, zk_connect: str) -> KafkaEndpoint:
    """The broker of a ``kafka:`` spec, checked to be registered in ``zk_connect`` (its chroot included)."""
    endpoint = KafkaEndpoint(zk_connect, parse_spec(spec)[1]["bootstrap"])
    cluster = endpoint.broker_addresses()
    with started_client(zk_connect) as client:
        registrations = admin.read_brokers(client)
    registered = {(broker.host, broker.port) for broker in registrations}
    if not cluster & registered:
        raise SourceError(
            f"the Kafka brokers at {endpoint.bootstrap} ({sorted(cluster)}) are not registered in ZooKeeper "
            f"{zk_connect} ({sorted(registered) or 'no broker'}): give --zookeeper the broker's zookeeper.connect, "
            "chroot included (0.8.2 members find brokers and topics under /brokers of their chroot)"
        )
    return endpoint


def kafka_spec(endpoint: KafkaEndpoint) -> str:
    """The source spec of the records of ``endpoint``'s broker."""
    return f"{KAFKA}:bootstrap={endpoint.bootstrap}"


def open_production(spec: str, rate: float, run: RunContext):
    """The production of a spec :func:`source_kind` accepted."""
    if run.kafka is None:
        return SyntheticProduction(rate, run)
    return KafkaProduction(spec, rate, run.kafka)


class SyntheticProduction:
    """Logs that grow at ``rate`` from the moment this is made; topics written straight into ZooKeeper."""

    def __init__(self, rate: float, run: RunContext):
        self._source = SyntheticSource(rate_per_partition=rate)
        self._run = run
        self.spec = self._source.spec

    def create_topics(self, topics: dict[str, int]) -> None:
        with self._run.zookeeper() as client:
            for topic, count in topics.items():
                admin.create_topic(client, topic, count)

    def add_partitions(self, topic: str, total: int) -> None:
        with self._run.zookeeper() as client:
            admin.alter_topic_partitions(client, topic, total)

    def start(self, topics: Iterable[str]) -> None:
        """Nothing to start: the logs grow on the clock."""

    def stop(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """Each partition's log end now (the logs go on growing; members need process no further)."""
        return self._source.end_offsets(partitions)

    def close(self) -> None:
        self._source.close()


class KafkaProduction:
    """Records written into a real broker at ``rate`` per partition by a thread, read back through KafkaSource.

    Record ``n`` of a partition (counted from when the producer first saw the partition) has the value
    ``<topic>:<partition>:<n>`` and no key. The producer is idempotent, so the broker holds each record sent
    once; the end offsets at the drain come from the broker.
    """

    def __init__(self, spec: str, rate: float, endpoint: KafkaEndpoint):
        self._source = open_source(spec)  # lists the end offsets at the drain
        self.spec = self._source.spec
        self.rate = rate
        self._endpoint = endpoint
        self._topics: list[str] = []
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._producer = None
        self._failure: Exception | None = None

    def create_topics(self, topics: dict[str, int]) -> None:
        for topic, count in topics.items():
            self._endpoint.create_topic(topic, count)

    def add_partitions(self, topic: str, total: int) -> None:
        self._endpoint.add_partitions(topic, total)

    def start(self, topics: Iterable[str]) -> None:
        """Produce into every partition of ``topics`` (those added later too) until :meth:`stop`."""
        from kafka import KafkaProducer

        self._topics = list(topics)
        self._producer = KafkaProducer(
            bootstrap_servers=self._endpoint.bootstrap.split(","),
            client_id="zkcoord-compare",
            linger_ms=20,
            metadata_max_age_ms=PRODUCER_METADATA_MAX_AGE_MS,
        )
        self._thread = threading.Thread(target=self._produce, name="compare-producer", daemon=True)
        self._thread.start()

    def _produce(self) -> None:
        first_seen: dict[tuple[str, int], float] = {}
        sent: dict[tuple[str, int], int] = {}
        try:
            while not self._stopping.wait(PRODUCE_TICK_S):
                now = time.monotonic()
                for topic in self._topics:
                    for partition in sorted(self._producer.partitions_for(topic)):
                        key = (topic, partition)
                        due = int(self.rate * (now - first_seen.setdefault(key, now)))
                        for number in range(sent.get(key, 0), due):
                            value = f"{topic}:{partition}:{number}".encode()
                            self._producer.send(topic, value=value, partition=partition).add_errback(self._failed)
                        sent[key] = max(due, sent.get(key, 0))
        except Exception as error:  # the run fails at the drain, saying why
            self._failed(error)

    def _failed(self, error: Exception) -> None:
        if self._failure is None:
            log.error("producing the comparison's records failed: %s", error)
            self._failure = error
            self._stopping.set()

    def stop(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """Stop producing, wait until the broker has every record sent, and return its log-end offsets."""
        self._stop_producing()
        if self._failure is not None:
            raise ProductionError(f"producing into {self._endpoint.bootstrap} failed: {self._failure}")
        return self._source.end_offsets(partitions)

    def _stop_producing(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(30)
            self._producer.flush(30)

    def close(self) -> None:
        self._stop_producing()
        if self._producer is not None:
            self._producer.close(timeout=10)
        self._source.close()
