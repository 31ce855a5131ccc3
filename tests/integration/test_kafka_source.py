"""The Kafka record source against a real Kafka 3.9 broker (the session's ``kafka`` fixture; docs/peers.md)."""

import socket
import time
import uuid

import pytest

from zkcoord.errors import OffsetOutOfRangeError, SourceError
from zkcoord.model import TopicPartition
from zkcoord.sources import Record, open_source


def produce(bootstrap: str, topic: str, partition: int, values: list[bytes], first_timestamp_ms: int = 1_000) -> None:
    """Keyed records (every third without a key) with timestamps the test can predict."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=0)
    try:
        for i, value in enumerate(values):
            key = None if i % 3 == 2 else b"key-%d" % i
            producer.send(topic, key=key, value=value, partition=partition, timestamp_ms=first_timestamp_ms + i)
        producer.flush(30)
    finally:
        producer.close()


def unique(name: str) -> str:
    """Topics and groups of the session's one broker differ by name."""
    return f"{name}-{uuid.uuid4().hex[:8]}"


def test_kafka_source_fetches_what_kafka_python_produced(kafka):
    from zkcoord.sources.kafka import KafkaSource

    kafka_bootstrap, events = kafka.bootstrap, unique("events")
    kafka.create_topic(events, 2)
    produce(kafka_bootstrap, events, 0, [b"zero-%d" % i for i in range(12)])
    produce(kafka_bootstrap, events, 1, [b"one-%d" % i for i in range(3)], first_timestamp_ms=5_000)
    p0, p1 = TopicPartition(events, 0), TopicPartition(events, 1)
    source = KafkaSource(kafka_bootstrap, client_id="zkcoord-test")
    try:
        assert source.spec == f"kafka:bootstrap={kafka_bootstrap},client_id=zkcoord-test"
        assert source.beginning_offsets([p0, p1]) == {p0: 0, p1: 0}
        assert source.end_offsets([p0, p1]) == {p0: 12, p1: 3}
        middle = source.fetch(p0, 4, 5)
        assert middle == [
            Record(events, 0, o, 1_000 + o, None if o % 3 == 2 else b"key-%d" % o, b"zero-%d" % o) for o in range(4, 9)
        ]
        assert [r.offset for r in source.fetch(p0, 9, 100)] == [9, 10, 11]
        assert [r.value for r in source.fetch(p1, 0, 100)] == [b"one-0", b"one-1", b"one-2"]
        assert [r.offset for r in source.fetch(p0, 2, 2)] == [2, 3]  # back to p0, seeking backwards
        assert source.fetch(p0, 12, 10) == []
        with pytest.raises(OffsetOutOfRangeError, match="past the end 12"):
            source.fetch(p0, 13, 10)
        with pytest.raises(OffsetOutOfRangeError, match="below the beginning 0"):
            source.fetch(p0, -1, 10)
        with pytest.raises(SourceError, match=f"no partition {events}-7"):
            source.fetch(TopicPartition(events, 7), 0, 10)
        with pytest.raises(SourceError, match="no partition missing-0"):
            source.end_offsets([TopicPartition("missing", 0)])
        rebuilt = open_source(source.spec)
        try:
            assert rebuilt.fetch(p0, 0, 12) == source.fetch(p0, 0, 12)
        finally:
            rebuilt.close()
    finally:
        source.close()
    with pytest.raises(SourceError, match="closed"):
        source.fetch(p0, 0, 1)


def test_kafka_source_sees_records_produced_after_it_reached_the_end(kafka):
    from zkcoord.sources.kafka import KafkaSource

    kafka_bootstrap, late = kafka.bootstrap, unique("late")
    kafka.create_topic(late, 1)
    produce(kafka_bootstrap, late, 0, [b"a", b"b"])
    partition = TopicPartition(late, 0)
    source = KafkaSource(kafka_bootstrap)
    try:
        assert [r.value for r in source.fetch(partition, 0, 10)] == [b"a", b"b"]
        assert source.fetch(partition, 2, 10) == []
        produce(kafka_bootstrap, late, 0, [b"c"], first_timestamp_ms=9_000)
        deadline = time.monotonic() + 10
        records = []
        while not records and time.monotonic() < deadline:
            records = source.fetch(partition, 2, 10)
        assert [(r.offset, r.value, r.timestamp_ms) for r in records] == [(2, b"c", 9_000)]
        assert source.end_offsets([partition]) == {partition: 3}
    finally:
        source.close()


def test_kafka_source_reads_a_partition_added_after_it_read_the_topic(kafka):
    """A legacy member owns a new partition as soon as ZooKeeper lists it, before kafka-python's metadata
    cache would have learnt of it."""
    from zkcoord.sources.kafka import KafkaSource

    grown = unique("grown")
    kafka.create_topic(grown, 1)
    source = KafkaSource(kafka.bootstrap)
    try:
        assert source.end_offsets([TopicPartition(grown, 0)]) == {TopicPartition(grown, 0): 0}
        kafka.add_partitions(grown, 2)
        produce(kafka.bootstrap, grown, 1, [b"new"])
        assert [r.value for r in source.fetch(TopicPartition(grown, 1), 0, 10)] == [b"new"]
    finally:
        source.close()


def test_records_of_one_partition_are_not_held_up_by_fetches_of_idle_ones(kafka):
    """A reader going round its partitions, as a member does: new records come within a round or two."""
    from zkcoord.sources.kafka import KafkaSource

    topic = unique("rounds")
    kafka.create_topic(topic, 3)
    partitions = [TopicPartition(topic, p) for p in range(3)]
    source = KafkaSource(kafka.bootstrap)
    try:
        for partition in partitions:
            assert source.fetch(partition, 0, 10) == []
        for round_trip in range(5):
            produce(kafka.bootstrap, topic, 0, [b"r%d" % round_trip])
            rounds, records = 0, []
            while not records and rounds < 20:  # with the broker holding idle fetches 500 ms, rounds ran to hundreds
                rounds += 1
                for partition in partitions:
                    fetched = source.fetch(partition, round_trip if partition.partition == 0 else 0, 10)
                    records += fetched if partition.partition == 0 else []
            assert [r.value for r in records] == [b"r%d" % round_trip], f"after {rounds} rounds"
    finally:
        source.close()


def test_kafka_source_reports_an_unreachable_cluster():
    import kafka

    from zkcoord.sources.kafka import KafkaSource

    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    fast = {"bootstrap_timeout_ms": 500} if kafka.__version__ >= "3" else {"api_version_auto_timeout_ms": 500}
    with pytest.raises(SourceError, match=f"kafka source 127.0.0.1:{port}"):
        KafkaSource(f"127.0.0.1:{port}", **fast)


def test_a_legacy_stream_reads_a_kafka_topic_from_the_zookeeper_offsets(kafka):
    """0.8.2 end to end: ownership and offsets in ZooKeeper, topic metadata and records from the real broker."""
    from kazoo.client import KazooClient
    from legacy_support import FAST

    from zkcoord.errors import ConsumerTimeoutError
    from zkcoord.legacy.consumer import LegacyConsumer
    from zkcoord.sources.kafka import KafkaSource
    from zkcoord.zk import layout

    topic, group = unique("legacy"), unique("g")
    kafka.create_topic(topic, 2)
    for partition in (0, 1):
        produce(kafka.bootstrap, topic, partition, [b"%d-%d" % (partition, i) for i in range(5)])
    zk = KazooClient(hosts=kafka.zk_connect)
    zk.start(timeout=15)
    zk.create(layout.offset_path(group, topic, 0), b"2", makepath=True)
    source = KafkaSource(kafka.bootstrap)
    config = {**FAST, "zookeeper.session.timeout.ms": 6000, "group.id": group, "zookeeper.connect": kafka.zk_connect}
    config.update({"consumer.id": "k", "rebalance.max.retries": 10})
    seen = []
    try:
        with LegacyConsumer(
            config, topics={topic: 1}, source=source, auto_offset_reset="smallest", consumer_timeout_ms=500
        ) as consumer:
            with pytest.raises(ConsumerTimeoutError):
                for record in consumer.streams()[topic][0]:
                    seen.append(record.value)
            consumer.commit()
        assert sorted(seen) == [b"0-2", b"0-3", b"0-4", b"1-0", b"1-1", b"1-2", b"1-3", b"1-4"]
        assert [zk.get(layout.offset_path(group, topic, p))[0] for p in (0, 1)] == [b"5", b"5"]
    finally:
        source.close()
        zk.stop()
        zk.close()
