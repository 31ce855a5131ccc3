"""The ZooKeeper reads a node's JoinGroups share (:class:`zkcoord.server.steps.ReadRounds`): a burst of callers costs
a read or two, and nobody gets the answer of a read that started before it asked."""

import gevent
from gevent.event import Event

from zkcoord.server.steps import ReadRounds

CALLERS = 100
BOUND_S = 10.0


class HeldReads:
    """A read that answers how many reads had started, once released."""

    def __init__(self):
        self.started = 0
        self.release = Event()

    def __call__(self, key: str):
        self.started += 1
        started = self.started
        self.release.wait()
        self.release = Event()
        return (key, started)


def test_callers_of_a_burst_share_the_read_that_starts_after_them():
    reads = HeldReads()
    rounds = ReadRounds(reads)
    first = gevent.spawn(rounds.get, "g")
    gevent.idle()  # the first read runs, held
    burst = [gevent.spawn(rounds.get, "g") for _ in range(CALLERS)]
    gevent.idle()
    reads.release.set()  # the first read answers; the burst's read starts
    gevent.idle()
    reads.release.set()
    gevent.joinall([first, *burst], timeout=BOUND_S)
    assert first.value == ("g", 1)
    assert [each.value for each in burst] == [("g", 2)] * CALLERS
    assert reads.started == 2


def test_a_failed_read_fails_its_round_only_and_other_keys_read_apart():
    failures = iter([LookupError("no"), None])

    def read(key):
        error = next(failures) if key == "bad" else None
        if error is not None:
            raise error
        return key

    rounds = ReadRounds(read)
    failed, other = gevent.spawn(rounds.get, "bad"), gevent.spawn(rounds.get, "good")
    gevent.joinall([failed, other], timeout=BOUND_S)
    assert isinstance(failed.exception, LookupError) and other.value == "good"
    assert rounds.get("bad") == "bad"
