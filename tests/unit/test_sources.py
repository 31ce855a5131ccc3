"""Record sources (docs/sources.md): the synthetic source's properties and spec strings, in process.

The Kafka source against a real Kafka-protocol broker is tests/integration/test_kafka_source.py.
"""

import dataclasses
import sys
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zkcoord.clock import ManualClock
from zkcoord.errors import OffsetOutOfRangeError, SourceError
from zkcoord.model import TopicPartition
from zkcoord.sources import Record, RecordSource, SyntheticSource, build_records, open_source

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
