"""The fault campaign's data plane for its librdkafka group: one real Kafka broker, and each run's topic on it.

The broker serves the whole campaign from a chroot of its own on the campaign's ZooKeeper, so a ZooKeeper
restart hits it too. A run's nodes never read that chroot: the run registers the broker as broker 0 in its own
chroot, with the broker's real address, and the run's topic in ``/brokers/topics`` there, so the nodes' gateways
forward the librdkafka members' data requests to it and their OffsetCommits find the topic.
"""

import shutil
from pathlib import Path

from zkcoord.compare.production import KafkaProduction, kafka_spec
from zkcoord.config import parse_bootstrap_servers
from zkcoord.peers.broker import KafkaBroker
from zkcoord.testing.kafka_broker import KafkaEndpoint
from zkcoord.testing.zookeeper import fresh_chroot
from zkcoord.zk import admin
from zkcoord.zk.client import started_client

BROKER_HEAP_MB = 128  # a few hundred records a second: the machine's cores go to the runs
# The log cleaner's dedupe buffer takes 128 MB by default; the broker compacts no more than its offsets topic.
SMALL_HEAP_PROPERTIES = {"log.cleaner.dedupe.buffer.size": str(8 * 1024 * 1024)}
BROKER_ID = 0


def campaign_broker(zookeeper_root: str, data_dir: Path) -> KafkaBroker:
    """A Kafka broker (not started) in a fresh chroot of ``zookeeper_root`` (no chroot), its data and log in
    ``data_dir``."""
    shutil.rmtree(data_dir, ignore_errors=True)  # an earlier campaign's data belongs to another cluster id
    chroot = fresh_chroot(zookeeper_root, prefix="kafka")
    return KafkaBroker(
        chroot, broker_id=BROKER_ID, data_dir=data_dir, heap_mb=BROKER_HEAP_MB, overrides=SMALL_HEAP_PROPERTIES
    )


def endpoint(broker: KafkaBroker) -> KafkaEndpoint:
    return KafkaEndpoint(broker.zookeeper_connect, broker.bootstrap)


def register_data_plane(run_connect: str, kafka: KafkaEndpoint | None) -> None:
    """Register broker 0 in a run's chroot: the campaign's broker, or an address nothing is asked at when the
    run has no librdkafka group (the other groups read the synthetic source)."""
    host, port = parse_bootstrap_servers(kafka.bootstrap)[0] if kafka is not None else ("localhost", 9092)
    with started_client(run_connect) as client:
        admin.register_broker(client, BROKER_ID, host, port, timestamp_ms=1, persistent=True)


def kafka_production(kafka: KafkaEndpoint, rate: float) -> KafkaProduction:
    """Records into the broker at ``rate`` a second per partition, once started on a run's topic."""
    return KafkaProduction(kafka_spec(kafka), rate, kafka)


def create_run_topic(production: KafkaProduction, run_connect: str, topic: str, partitions: int) -> None:
    """``topic`` on the broker (Kafka's admin API), and in the run's chroot where the nodes look topics up."""
    production.create_topics({topic: partitions})
    with started_client(run_connect) as client:
        admin.create_topic(client, topic, partitions)
