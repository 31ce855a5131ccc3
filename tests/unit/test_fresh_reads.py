"""FreshReads: concurrent JoinGroups share ZooKeeper reads, and each still sees a read begun after it asked."""

import gevent
import gevent.event
import pytest

from zkcoord.server.steps import FreshReads


class HeldReads:
    """A read function whose calls wait until the test releases them, one at a time, in order."""

    def __init__(self):
        self.calls: list[str] = []
        self._releases: list[gevent.event.AsyncResult] = []

    def __call__(self, key: str) -> str:
        self.calls.append(key)
        release = gevent.event.AsyncResult()
        self._releases.append(release)
        return release.get()

    def release(self, index: int, value: object) -> None:
        gevent.idle()  # every greenlet that can run has reached its wait
        if isinstance(value, Exception):
            self._releases[index].set_exception(value)
        else:
            self._releases[index].set(value)
        gevent.idle()


def ask(reads: FreshReads, key: str) -> gevent.Greenlet:
    caller = gevent.spawn(reads.get, key)
    gevent.idle()  # the caller has asked, and a read it began has begun
    return caller


def test_callers_during_a_read_share_the_one_queued_behind_it_and_get_its_value():
    held = HeldReads()
    reads = FreshReads(held)
    first = ask(reads, "g")
    later = [ask(reads, "g") for _ in range(5)]
    assert held.calls == ["g"]

    held.release(0, "before the others asked")
    assert first.get(timeout=1) == "before the others asked"
    assert not any(caller.ready() for caller in later)  # the running read may have begun before they asked
    assert held.calls == ["g", "g"]

    held.release(1, "after they asked")
    assert [caller.get(timeout=1) for caller in later] == ["after they asked"] * 5
    assert held.calls == ["g", "g"]


def test_a_caller_after_a_read_ended_reads_again():
    held = HeldReads()
    reads = FreshReads(held)
    first = ask(reads, "g")
    held.release(0, ["c-1"])
    assert first.get(timeout=1) == ["c-1"]

    second = ask(reads, "g")
    held.release(1, [])
    assert second.get(timeout=1) == []
    assert held.calls == ["g", "g"]


def test_a_failed_read_fails_every_caller_waiting_for_it_and_the_next_caller_reads_again():
    held = HeldReads()
    reads = FreshReads(held)
    running = ask(reads, "g")
    queued = [ask(reads, "g"), ask(reads, "g")]
    held.release(0, "fine")
    held.release(1, ConnectionError("lost"))
    assert running.get(timeout=1) == "fine"
    for caller in queued:
        with pytest.raises(ConnectionError):
            caller.get(timeout=1)

    again = ask(reads, "g")
    held.release(2, "back")
    assert again.get(timeout=1) == "back"


def test_keys_are_read_independently():
    held = HeldReads()
    reads = FreshReads(held)
    one, other = ask(reads, "a"), ask(reads, "b")
    assert held.calls == ["a", "b"]
    held.release(1, "b's")
    held.release(0, "a's")
    assert (one.get(timeout=1), other.get(timeout=1)) == ("a's", "b's")
