"""``zkcoord legacy run``'s console consumer, in process: record and count formats, finding the brokers in their
registrations, and the stream readers over fake streams (the real member and broker: tests/integration/
test_legacy_run.py)."""

import pytest

from zkcoord.cli.common import UsageError
from zkcoord.cli.legacy import broker_bootstrap
from zkcoord.errors import CommitFailedError, ConsumerTimeoutError, SourceError
from zkcoord.legacy.console import StreamReaders, format_counts, format_record
from zkcoord.model import TopicPartition
from zkcoord.sources import Record
from zkcoord.zk.layout import BrokerRegistration, decode_broker_registration

WAIT_S = 10.0


def record(partition: int, offset: int, key: bytes | None = b"k") -> Record:
    return Record("t", partition, offset, 0, key, b"v%d" % offset)


def test_record_formats():
    assert format_record(record(1, 7)) == b"v7"  # ConsoleConsumer's default: the value alone
    assert format_record(record(1, 7), key=True) == b"k\tv7"
    assert format_record(record(1, 7, key=None), key=True) == b"null\tv7"
    assert format_record(record(1, 7), value=False, offsets=True) == b"t 1 7"
    assert format_record(record(1, 7), key=True, offsets=True) == b"t 1 7\tk\tv7"


def test_counts_format_lists_each_partition():
    counts = {TopicPartition("t", 1): 4, TopicPartition("t", 0): 3}
    assert format_counts(counts) == "Consumed 7 messages (t-0: 3, t-1: 4)"
    assert format_counts({}) == "Consumed 0 messages"
    assert format_counts(counts, so_far=True) == "Consumed 7 messages so far (t-0: 3, t-1: 4)"


def test_broker_registrations_give_their_connection_strings():
    v5 = (
        b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},'
        b'"endpoints":["PLAINTEXT://127.0.0.1:39092"],"jmx_port":-1,"host":"127.0.0.1","timestamp":"1",'
        b'"port":39092,"version":5}'
    )
    brokers = [
        decode_broker_registration(0, v5),
        BrokerRegistration(1, "::1", 9093),
        BrokerRegistration(2, None, -1, endpoints=("SSL://s:9094",)),  # no PLAINTEXT listener: not reachable
    ]
    assert [b.connection_string for b in brokers] == ["127.0.0.1:39092", "[::1]:9093", None]
    assert broker_bootstrap(brokers, "zk:2181/kafka") == "127.0.0.1:39092,[::1]:9093"


def test_no_reachable_broker_says_what_to_do():
    with pytest.raises(UsageError) as none:
        broker_bootstrap([], "zk:2181/kafka")
    assert "no broker is registered under /brokers/ids in zk:2181/kafka" in str(none.value)
    for way_out in ("zkcoord kafka start --zookeeper zk:2181/kafka", "--bootstrap-server", "--source synthetic"):
        assert way_out in str(none.value)
    with pytest.raises(UsageError, match=r"has a PLAINTEXT host \(broker ids 2\)"):
        broker_bootstrap([BrokerRegistration(2, None, -1)], "zk:2181/kafka")


class FakeConsumer:
    """streams() and seek() of a LegacyConsumer over lists of records, ending with an optional exception."""

    def __init__(self, *streams, refuse_seek=False):
        self._streams = [FakeStream(n, records) for n, records in enumerate(streams)]
        self.refuse_seek = refuse_seek
        self.seeks: list[tuple[TopicPartition, int]] = []
        self.closed = False

    def streams(self):
        return {"t": self._streams}

    def seek(self, partition, offset):
        if self.refuse_seek:
            raise CommitFailedError(f"does not own {partition}")
        self.seeks.append((partition, offset))

    def close(self):
        self.closed = True


class FakeStream:
    def __init__(self, number, items):
        self.thread_id = f"g_m-{number}"
        self._items = iter(items)
        self.taken = 0

    def __iter__(self):
        return self

    def __next__(self):
        item = next(self._items)
        if isinstance(item, Exception):
            raise item
        self.taken += 1
        return item


def read_all(consumer, max_records=None):
    handed_on = []
    readers = StreamReaders(consumer, handed_on.append, max_records=max_records).start()
    assert readers.stop.wait(WAIT_S)
    readers.close()
    return readers, handed_on


def test_readers_hand_on_every_record_and_stop_when_every_stream_ended():
    consumer = FakeConsumer(
        [record(0, o) for o in range(5)],
        [record(1, 0), ConsumerTimeoutError("idle")],  # consumer.timeout.ms without a record ends a stream
    )
    readers, handed_on = read_all(consumer)
    assert sorted((r.partition, r.offset) for r in handed_on) == [(0, 0), (0, 1), (0, 2), (0, 3), (0, 4), (1, 0)]
    assert readers.counts() == {TopicPartition("t", 0): 5, TopicPartition("t", 1): 1}
    assert readers.failure is None and consumer.closed


def test_records_above_the_maximum_go_back_to_their_partition():
    streams = [[record(p, o) for o in range(10)] for p in range(3)]
    consumer = FakeConsumer(*streams)
    readers, handed_on = read_all(consumer, max_records=4)
    assert len(handed_on) == 4 and sum(readers.counts().values()) == 4
    for n, stream in enumerate(consumer._streams):  # what a stream took was handed on or given back: nothing lost
        mine = sorted(r.offset for r in handed_on if r.partition == n)
        given_back = [offset for partition, offset in consumer.seeks if partition.partition == n]
        assert mine == list(range(len(mine)))
        assert given_back in ([], [len(mine)]) and stream.taken == len(mine) + len(given_back)


def test_a_record_that_cannot_go_back_is_handed_on():
    consumer = FakeConsumer([record(0, o) for o in range(10)], [record(1, o) for o in range(10)], refuse_seek=True)
    readers, handed_on = read_all(consumer, max_records=3)
    assert 3 <= len(handed_on) <= 4  # one stream may take one record past the maximum: it stays consumed
    counts = readers.counts()
    assert all(stream.taken == counts.get(TopicPartition("t", n), 0) for n, stream in enumerate(consumer._streams))


def test_a_failing_stream_stops_the_readers_and_is_reported():
    failure = SourceError("broker gone")
    consumer = FakeConsumer([record(0, 0), failure], [record(1, o) for o in range(3)])
    readers, handed_on = read_all(consumer)
    assert readers.failure is failure and (0, 0) in {(r.partition, r.offset) for r in handed_on}
