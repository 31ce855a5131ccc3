"""Real Kafka brokers for tests, with Kafka's own admin for topics (docs/peers.md).

``kafka_cluster(zookeeper_root)`` starts one 3.9 broker in a fresh chroot of that ZooKeeper and yields a
:class:`TestKafka`: its ``zk_connect`` (with the chroot) is where groups that read this broker live, because a
0.8.2 member reads ``/brokers`` in its own chroot; tests share it and differ by group name. ``kraft_cluster()``
starts one Kafka 4 broker in KRaft mode, which has no ZooKeeper (``zk_connect`` is None). Topics are created and
grown through the broker (kafka-python's admin client), so ``/brokers/topics`` is written by Kafka.
:class:`KafkaEndpoint` is the same helpers for a broker started elsewhere (the comparison runner's).
"""

import contextlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from zkcoord.peers.broker import BrokerProcess, KafkaBroker
from zkcoord.peers.kraft import KraftBroker
from zkcoord.testing.zookeeper import fresh_chroot, wait_until
from zkcoord.zk import layout
from zkcoord.zk.client import started_client


@dataclass(frozen=True)
class KafkaEndpoint:
    """A running broker as its clients see it: where it serves and the ZooKeeper chroot it registered in (None
    for a KRaft broker)."""

    zk_connect: str | None
    bootstrap: str

    def create_topic(self, topic: str, partitions: int) -> None:
        """Create ``topic`` with one replica per partition and wait until every partition has a leader."""
        from kafka.admin import NewTopic

        with self._admin() as admin:
            admin.create_topics([NewTopic(topic, partitions, 1)], timeout_ms=30_000)
        self._wait_for_leaders(topic, partitions)

    def add_partitions(self, topic: str, total: int) -> None:
        """Grow ``topic`` to ``total`` partitions (Kafka's CreatePartitions)."""
        from kafka.admin import NewPartitions

        with self._admin() as admin:
            admin.create_partitions({topic: NewPartitions(total)}, timeout_ms=30_000)
        self._wait_for_leaders(topic, total)

    def produce(self, topic: str, values: Iterable[bytes], partition: int | None = None, key: bytes | None = None):
        """Send ``values`` to ``topic`` (to ``partition``, else by kafka-python's partitioner) and flush."""
        from kafka import KafkaProducer

        # A short metadata age: a partition just added reaches the producer within the wait below.
        producer = KafkaProducer(bootstrap_servers=self.bootstrap, linger_ms=5, acks=1, metadata_max_age_ms=200)
        try:
            if partition is not None:
                wait_until(
                    lambda: partition in producer.partitions_for(topic),
                    timeout=30,
                    what=f"the producer to learn of {topic}-{partition}",
                )
            for value in values:
                producer.send(topic, key=key, value=value, partition=partition)
            producer.flush(30)
        finally:
            producer.close()

    def end_offsets(self, topic: str) -> dict[int, int]:
        """Each partition's log-end offset, from the broker."""
        from kafka import KafkaConsumer
        from kafka import TopicPartition as KafkaPartition

        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, group_id=None)
        try:
            partitions = [KafkaPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
            return {tp.partition: offset for tp, offset in consumer.end_offsets(partitions).items()}
        finally:
            consumer.close()

    def broker_addresses(self) -> set[tuple[str, int]]:
        """``(host, port)`` of every broker of the cluster that answers at ``bootstrap``."""
        with self._admin() as admin:
            return {(broker["host"], broker["port"]) for broker in admin.describe_cluster()["brokers"]}

    @contextlib.contextmanager
    def _admin(self):
        from kafka.admin import KafkaAdminClient

        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, client_id="zkcoord-admin")
        try:
            yield admin
        finally:
            admin.close()

    def _wait_for_leaders(self, topic: str, partitions: int) -> None:
        """Until every partition has a leader: in ZooKeeper, the controller's state znode; in KRaft, the metadata
        the broker serves."""
        what = f"every partition of {topic} to have a leader"
        if self.zk_connect is None:
            with self._admin() as admin:
                wait_until(lambda: _leaders_in_metadata(admin, topic) >= partitions, timeout=30, what=what)
            return
        with started_client(self.zk_connect) as client:

            def led() -> bool:
                for partition in range(partitions):
                    path = layout.partition_state_path(topic, partition)
                    if client.exists(path) is None or json.loads(client.get(path)[0]).get("leader", -1) < 0:
                        return False
                return True

            wait_until(led, timeout=30, what=what)


def _leaders_in_metadata(admin, topic: str) -> int:
    """How many partitions of ``topic`` have a leader in the broker's metadata."""
    (described,) = admin.describe_topics([topic])
    return sum(1 for partition in described["partitions"] if partition["leader_id"] >= 0)


@dataclass(frozen=True)
class TestKafka(KafkaEndpoint):
    """One broker started for tests, and the process that runs it."""

    __test__ = False  # not a pytest test class, despite the name

    broker: BrokerProcess


@contextlib.contextmanager
def kafka_cluster(zookeeper_root: str, heap_mb: int = 256) -> Iterator[TestKafka]:
    """One broker in a fresh chroot of ``zookeeper_root`` (a connect string without a chroot), for the block."""
    chroot = fresh_chroot(zookeeper_root, prefix="kafka")
    with KafkaBroker(chroot, heap_mb=heap_mb) as broker:
        yield TestKafka(zk_connect=chroot, bootstrap=broker.bootstrap, broker=broker)


@contextlib.contextmanager
def kraft_cluster(heap_mb: int = 256, overrides: dict[str, str] | None = None) -> Iterator[TestKafka]:
    """One Kafka 4 broker in KRaft mode (``overrides``: server properties), for the block."""
    with KraftBroker(heap_mb=heap_mb, overrides=overrides) as broker:
        yield TestKafka(zk_connect=None, bootstrap=broker.bootstrap, broker=broker)
