"""The log ends a member's lag metric reads: asked of the source in the background, so a read never waits on it."""

import threading

import pytest

from zkcoord.errors import SourceError
from zkcoord.legacy.log_ends import LogEnds
from zkcoord.model import TopicPartition
from zkcoord.testing.zookeeper import wait_until

A0, A1 = TopicPartition("a", 0), TopicPartition("a", 1)


class SlowSource:
    """A source whose end_offsets waits until the test lets it answer (as a KafkaSource behind a fetch's lock)."""

    def __init__(self):
        self.ends: dict[TopicPartition, int] | SourceError = {A0: 7, A1: 9}
        self.asked: list[list[TopicPartition]] = []
        self.answer = threading.Event()

    def end_offsets(self, partitions):
        self.asked.append(list(partitions))
        assert self.answer.wait(10), "the test never let the source answer"
        if isinstance(self.ends, SourceError):
            raise self.ends
        return {tp: self.ends[tp] for tp in partitions}


@pytest.fixture
def source():
    source = SlowSource()
    yield source
    source.answer.set()  # a question still pending ends with the test


def test_a_read_answers_at_once_while_the_source_is_slow_and_the_next_one_has_its_answer(source):
    ends = LogEnds(source, "g_a")
    assert ends.read([A0, A1]) == {}  # nothing known yet, and the source has not answered
    wait_until(lambda: source.asked, timeout=10, what="the source to be asked")
    assert ends.read([A0]) == {}  # still pending: not asked twice
    assert source.asked == [[A0, A1]]
    source.answer.set()
    wait_until(lambda: ends.read([A0]) == {A0: 7}, timeout=10, what="the source's answer to be read")
    source.ends[A0] = 8
    wait_until(lambda: ends.read([A0]) == {A0: 8}, timeout=10, what="later reads to ask again")


def test_a_source_that_cannot_say_where_its_logs_end_leaves_no_stale_ends(source):
    ends = LogEnds(source, "g_a")
    source.answer.set()
    wait_until(lambda: ends.read([A0]) == {A0: 7}, timeout=10, what="the first answer")
    source.ends = SourceError("broker down")
    wait_until(lambda: ends.read([A0]) == {}, timeout=10, what="the failed answer to forget the ends")


def test_no_partitions_ask_nothing(source):
    assert LogEnds(source, "g_a").read([]) == {}
    assert source.asked == []
