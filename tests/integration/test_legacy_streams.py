"""0.8.2 KafkaStreams of the legacy consumer on a real ZooKeeper (legacy-zk-protocol.md §2.2, §3.4, §5.1).

Records come from SyntheticSources whose logs do not grow on their own (rate 0, or a ManualClock
that only the test moves), so every count below is exact.
"""

import threading
import time

import pytest
from legacy_support import FAST, prepare_cluster

from zkcoord.clock import ManualClock
from zkcoord.errors import ConsumerTimeoutError, UnknownPartitionError
from zkcoord.legacy.consumer import WILDCARD_STREAMS, KafkaStream, LegacyConsumer
from zkcoord.model import TopicPartition
from zkcoord.sources import SyntheticSource
from zkcoord.testing.legacy import converged
from zkcoord.testing.zookeeper import wait_until
from zkcoord.zk import layout

QUIET_MS = 150  # consumer.timeout.ms: how long a stream waits before the test takes it as drained
# Nothing here tests session expiry: a longer session than FAST's keeps a loaded machine from dropping it.
SESSION = {"zookeeper.session.timeout.ms": 6000, "rebalance.max.retries": 10}


def member(connect, name, *, source, subscription=None, listener=None, **props) -> LegacyConsumer:
    """A fast-timing member ``g_<name>`` of group ``g`` reading ``source``; ``topics={"t": 1}`` by default."""
    config = {**FAST, **SESSION, "group.id": "g", "zookeeper.connect": connect, "consumer.id": name, **props}
    return LegacyConsumer(config, source=source, listener=listener, **(subscription or {"topics": {"t": 1}}))


def fixed_log(records: int) -> SyntheticSource:
    """Every partition holds exactly ``records`` records, now and later."""
    return SyntheticSource(rate_per_partition=0, initial_records=records, start_ms=0)


def drain(stream: KafkaStream) -> list[tuple[str, int, int]]:
    """Everything the stream yields until it is quiet for ``consumer.timeout.ms``."""
    seen = []
    try:
        for record in stream:
            seen.append((record.topic, record.partition, record.offset))
    except ConsumerTimeoutError:
        pass
    return seen


def records_of(topic: str, partition: int, start: int, stop: int) -> list[tuple[str, int, int]]:
    return [(topic, partition, offset) for offset in range(start, stop)]


def commit_in_zk(zk, partition: int, offset: int, topic: str = "t") -> None:
    zk.create(layout.offset_path("g", topic, partition), layout.encode_offset(offset), makepath=True)


def zk_offset(zk, partition: int, topic: str = "t") -> int | None:
    path = layout.offset_path("g", topic, partition)
    return int(zk.get(path)[0]) if zk.exists(path) else None


def test_streams_yield_exactly_their_threads_partitions_from_the_committed_offsets(zk, zk_connect):
    prepare_cluster(zk, {"t": 4})
    commit_in_zk(zk, 0, 5)
    commit_in_zk(zk, 2, 7)
    source = fixed_log(20)
    consumer = member(
        zk_connect,
        "a",
        subscription={"topics": {"t": 2}},
        source=source,
        auto_offset_reset="smallest",
        consumer_timeout_ms=QUIET_MS,
        fetch_message_max_records=4,
    )
    with consumer:
        streams = consumer.streams()
        assert list(streams) == ["t"]
        assert [s.thread_id for s in streams["t"]] == ["g_a-0", "g_a-1"]
        assert consumer.assignment() == {
            "g_a-0": [TopicPartition("t", 0), TopicPartition("t", 1)],
            "g_a-1": [TopicPartition("t", 2), TopicPartition("t", 3)],
        }
        results: dict[int, list] = {}
        readers = [threading.Thread(target=lambda i=i: results.update({i: drain(streams["t"][i])})) for i in (0, 1)]
        for reader in readers:
            reader.start()
        for reader in readers:
            reader.join(20)
        first, second = results[0], results[1]
        # Each thread gets its own partitions (range: g_a-0 → p0, p1; g_a-1 → p2, p3), from the committed
        # offset where there is one and from the beginning (smallest) where there is none.
        assert sorted(first) == records_of("t", 0, 5, 20) + records_of("t", 1, 0, 20)
        assert sorted(second) == records_of("t", 2, 7, 20) + records_of("t", 3, 0, 20)
        for seen in (first, second):
            for partition in {p for _, p, _ in seen}:
                offsets = [o for _, p, o in seen if p == partition]
                assert offsets == sorted(offsets)
        # Fairness: chunks of fetch.message.max.records alternate between the stream's partitions.
        assert [p for _, p, _ in first[:16]] == [0] * 4 + [1] * 4 + [0] * 4 + [1] * 4
        assert all(consumer.position(TopicPartition("t", p)) == 20 for p in range(4))
        consumer.commit()
        assert [zk_offset(zk, p) for p in range(4)] == [20, 20, 20, 20]


def test_commit_writes_the_offset_after_the_last_record_handed_out(zk, zk_connect):
    prepare_cluster(zk, {"t": 1})
    consumer = member(zk_connect, "a", source=fixed_log(50), auto_offset_reset="smallest", auto_commit_enable=True)
    consumer.start()
    try:
        stream = consumer.streams()["t"][0]
        taken = [next(stream) for _ in range(7)]
        assert [r.offset for r in taken] == list(range(7))
        assert taken[3].value == b"t:0:3" and taken[3].key == b"0"
        assert consumer.position(TopicPartition("t", 0)) == 7  # fetched ahead, but only 7 consumed
        consumer.commit()
        assert zk_offset(zk, 0) == 7
        assert [next(stream).offset for _ in range(3)] == [7, 8, 9]
    finally:
        consumer.close()
    assert zk_offset(zk, 0) == 10  # auto.commit.enable: close commits what was handed out
    with pytest.raises(StopIteration):
        next(stream)


def test_after_a_join_each_stream_yields_only_from_its_new_partitions(zk, zk_connect):
    """The record fetched but not handed out when a partition moves is the new owner's first."""
    prepare_cluster(zk, {"t": 4})
    clock = ManualClock(1_000_000)
    source = SyntheticSource(rate_per_partition=1000, initial_records=10, clock=clock)
    settings = {
        "source": source,
        "auto_offset_reset": "smallest",
        "auto_commit_enable": True,  # the rebalance commits before it releases
        "auto_commit_interval_ms": 3_600_000,
        "consumer_timeout_ms": QUIET_MS,
        "fetch_message_max_records": 10,
    }
    first = member(zk_connect, "a", **settings).start()
    second = None
    try:
        a_stream = first.streams()["t"][0]
        a_seen = [(r.topic, r.partition, r.offset) for r in (next(a_stream) for _ in range(21))]
        # p0 and p1 whole, then the first record of p2; the rest of p2 waits in a_stream's chunk.
        assert a_seen == records_of("t", 0, 0, 10) + records_of("t", 1, 0, 10) + records_of("t", 2, 0, 1)
        second = member(zk_connect, "b", **settings).start()
        wait_until(lambda: converged(zk, "g", members=["g_a", "g_b"]), what="two members")
        assert first.owned_partitions() == {TopicPartition("t", 0), TopicPartition("t", 1)}
        b_stream = second.streams()["t"][0]
        assert a_stream.partitions() == [TopicPartition("t", 0), TopicPartition("t", 1)]
        assert b_stream.partitions() == [TopicPartition("t", 2), TopicPartition("t", 3)]
        assert drain(a_stream) == []  # nothing more of p2, although a_stream had fetched it
        assert sorted(drain(b_stream)) == records_of("t", 2, 1, 10) + records_of("t", 3, 0, 10)
        clock.advance(5)  # five new records on every partition
        assert sorted(drain(a_stream)) == records_of("t", 0, 10, 15) + records_of("t", 1, 10, 15)
        assert sorted(drain(b_stream)) == records_of("t", 2, 10, 15) + records_of("t", 3, 10, 15)
    finally:
        first.close()
        if second is not None:
            second.close()
    assert [zk_offset(zk, p) for p in range(4)] == [15, 15, 15, 15]


def test_streams_stop_before_the_rebalance_commits_and_releases(zk, zk_connect):
    """closeFetchers comes first (§3.4 step 3): from then on nothing is handed out, so the commit
    before release covers every record the member consumed."""
    prepare_cluster(zk, {"t": 2})
    during_revoke = []

    class DrainOnRevoke:
        def on_partitions_revoked(self, revoked):
            during_revoke.append(drain(first.streams()["t"][0]))

    settings = {"auto_offset_reset": "smallest", "auto_commit_enable": True, "consumer_timeout_ms": QUIET_MS}
    first = member(zk_connect, "a", source=fixed_log(10), listener=DrainOnRevoke(), **settings).start()
    try:
        assert next(first.streams()["t"][0]).offset == 0  # p0's chunk holds 1..9, not handed out
        with member(zk_connect, "b", source=fixed_log(10), **settings):
            wait_until(lambda: converged(zk, "g", members=["g_a", "g_b"]), what="two members")
            assert during_revoke[0] == []
            assert zk_offset(zk, 0) == 1  # committed before release: only what was handed out
    finally:
        first.close()


def test_consumer_timeout_raises_and_the_stream_stays_usable(zk, zk_connect):
    prepare_cluster(zk, {"t": 1})
    clock = ManualClock(0)
    source = SyntheticSource(rate_per_partition=1000, clock=clock)
    with member(zk_connect, "a", source=source, auto_offset_reset="smallest", consumer_timeout_ms=200) as consumer:
        stream = consumer.streams()["t"][0]
        started = time.monotonic()
        with pytest.raises(ConsumerTimeoutError, match="consumer.timeout.ms=200"):
            next(stream)
        assert 0.2 <= time.monotonic() - started < 2.0
        clock.advance(2)
        assert [next(stream).offset for _ in range(2)] == [0, 1]
        with pytest.raises(ConsumerTimeoutError):
            next(stream)


def test_a_blocked_stream_ends_when_the_consumer_closes(zk, zk_connect):
    prepare_cluster(zk, {"t": 2})
    consumer = member(zk_connect, "a", source=fixed_log(0)).start()  # consumer.timeout.ms = -1: block
    stream = consumer.streams()["t"][0]
    outcome = []
    reader = threading.Thread(target=lambda: outcome.append(list(stream)))
    reader.start()
    time.sleep(0.1)
    assert reader.is_alive()
    consumer.close()
    reader.join(5)
    assert not reader.is_alive() and outcome == [[]]


@pytest.mark.parametrize(
    ("reset", "committed", "expected_start"),
    [("largest", None, 10), ("smallest", None, 0), ("smallest", 25, 0), ("largest", 25, 10), ("smallest", 4, 4)],
)
def test_auto_offset_reset_applies_without_a_valid_committed_offset(zk, zk_connect, reset, committed, expected_start):
    """§5.1: no offset, or one out of range, starts at the beginning (smallest) or the end (largest)."""
    prepare_cluster(zk, {"t": 1})
    if committed is not None:
        commit_in_zk(zk, 0, committed)
    clock = ManualClock(0)
    source = SyntheticSource(rate_per_partition=1000, initial_records=10, clock=clock)
    with member(zk_connect, "a", source=source, auto_offset_reset=reset, consumer_timeout_ms=QUIET_MS) as consumer:
        stream = consumer.streams()["t"][0]
        first = drain(stream)
        clock.advance(3)  # three more records
        assert first + drain(stream) == records_of("t", 0, expected_start, 13)
        consumer.commit()
    assert zk_offset(zk, 0) == 13


class LateMetadataLog(SyntheticSource):
    """A fixed log that does not know the ``unknown`` partitions, as brokers before a new partition's metadata
    reaches them."""

    def __init__(self, records: int, unknown: set[TopicPartition]):
        super().__init__(rate_per_partition=0, initial_records=records, start_ms=0)
        self.unknown = unknown

    def _check(self, partitions):
        for partition in partitions:
            if TopicPartition(*partition) in self.unknown:
                raise UnknownPartitionError(f"no partition {partition}")

    def beginning_offsets(self, partitions):
        self._check(partitions)
        return super().beginning_offsets(partitions)

    def end_offsets(self, partitions):
        self._check(partitions)
        return super().end_offsets(partitions)

    def fetch(self, partition, offset, max_records):
        self._check([partition])
        return super().fetch(partition, offset, max_records)


def test_a_partition_the_source_does_not_know_yet_is_asked_for_again_while_the_others_flow(zk, zk_connect, caplog):
    """0.8.2's leader finder keeps looking for a partition the brokers do not know yet (one just added): the
    stream goes on with its other partitions and reads that one once the source knows it."""
    prepare_cluster(zk, {"t": 2})
    source = LateMetadataLog(3, unknown={TopicPartition("t", 1)})
    with member(
        zk_connect,
        "a",
        source=source,
        auto_offset_reset="smallest",
        consumer_timeout_ms=QUIET_MS,
        refresh_leader_backoff_ms=20,
    ) as consumer:
        stream = consumer.streams()["t"][0]
        assert drain(stream) == records_of("t", 0, 0, 3)
        source.unknown.clear()
        assert drain(stream) == records_of("t", 1, 0, 3)
    assert caplog.text.count("the source does not know partition") == 1  # once, not at every retry


def test_seek_moves_the_stream(zk, zk_connect):
    prepare_cluster(zk, {"t": 1})
    with member(zk_connect, "a", source=fixed_log(30), auto_offset_reset="smallest") as consumer:
        stream = consumer.streams()["t"][0]
        assert [next(stream).offset for _ in range(3)] == [0, 1, 2]
        consumer.seek(TopicPartition("t", 0), 20)
        assert [next(stream).offset for _ in range(3)] == [20, 21, 22]


def test_wildcard_streams_share_every_matched_topic(zk, zk_connect):
    """createMessageStreamsByFilter: num_streams streams, each over whatever topics its thread owns."""
    prepare_cluster(zk, {"t1": 2, "t2": 1, "x": 1})
    subscription = {"whitelist": "t.*", "num_streams": 2}
    with member(
        zk_connect,
        "w",
        subscription=subscription,
        source=fixed_log(3),
        auto_offset_reset="smallest",
        consumer_timeout_ms=QUIET_MS,
    ) as consumer:
        streams = consumer.streams()
        assert list(streams) == [WILDCARD_STREAMS] and len(streams[WILDCARD_STREAMS]) == 2
        wait_until(lambda: len(consumer.owned_partitions()) == 3, what="t1 and t2 owned")
        seen = {stream.thread_id: sorted(drain(stream)) for stream in streams[WILDCARD_STREAMS]}
        owned = consumer.assignment()
        for thread, records in seen.items():
            assert records == sorted(r for tp in owned[thread] for r in records_of(tp.topic, tp.partition, 0, 3))
        assert sorted(r for records in seen.values() for r in records) == sorted(
            records_of("t1", 0, 0, 3) + records_of("t1", 1, 0, 3) + records_of("t2", 0, 0, 3)
        )
