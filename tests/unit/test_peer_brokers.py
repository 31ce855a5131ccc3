"""The real brokers' configurations (no JVM): the 3.9 broker on ZooKeeper, the Kafka 4 broker in KRaft mode."""

import base64

from zkcoord.peers.broker import KafkaBroker
from zkcoord.peers.kraft import KraftBroker, random_cluster_id


def test_a_kraft_broker_is_its_own_controller_on_a_listener_it_does_not_advertise(tmp_path):
    broker = KraftBroker(port=9100, controller_port=9101, data_dir=tmp_path, overrides={"num.io.threads": "1"})
    properties = broker.properties()
    assert properties["process.roles"] == "broker,controller"
    assert properties["controller.quorum.voters"] == "1@127.0.0.1:9101"
    assert properties["listeners"] == "PLAINTEXT://127.0.0.1:9100,CONTROLLER://127.0.0.1:9101"
    assert properties["advertised.listeners"] == "PLAINTEXT://127.0.0.1:9100" == broker.listener
    assert properties["group.coordinator.rebalance.protocols"] == "classic,consumer"
    assert properties["offsets.topic.replication.factor"] == "1"
    assert properties["num.io.threads"] == "1"  # an override wins
    assert "zookeeper.connect" not in properties and broker.bootstrap == "127.0.0.1:9100"


def test_the_zookeeper_broker_registers_under_its_id_and_takes_overrides(tmp_path):
    overrides = {"zookeeper.session.timeout.ms": "9000"}
    broker = KafkaBroker("127.0.0.1:2181/kafka", port=9200, broker_id=3, data_dir=tmp_path, overrides=overrides)
    properties = broker.properties()
    assert properties["broker.id"] == "3" and properties["zookeeper.connect"] == "127.0.0.1:2181/kafka"
    assert properties["listeners"] == properties["advertised.listeners"] == "PLAINTEXT://127.0.0.1:9200"
    assert properties["log.message.downconversion.enable"] == "true"  # 0.8.2 fetches v0 messages
    assert properties["zookeeper.session.timeout.ms"] == "9000"


def test_cluster_ids_are_kafka_uuids_that_no_command_line_reads_as_an_option():
    for _ in range(500):
        cluster_id = random_cluster_id()
        assert len(cluster_id) == 22 and not cluster_id.startswith("-")
        assert len(base64.urlsafe_b64decode(cluster_id + "==")) == 16
