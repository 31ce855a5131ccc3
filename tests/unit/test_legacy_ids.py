"""A group's ZooKeeper consumers for JoinGroup's check: kept by watches (LegacyIds), and reads that miss shared by
the JoinGroups waiting for them, each still seeing a read begun after it asked (FreshReads)."""

import gevent
import gevent.event
import pytest
from kazoo.exceptions import NoNodeError
from kazoo.protocol.states import EventType, KeeperState, WatchedEvent

from zkcoord.server.legacy_ids import FreshReads, LegacyIds, group_of_ids_path
from zkcoord.zk.layout import ids_path


class FakeZooKeeper:
    """The kazoo calls LegacyIds makes, with ZooKeeper's one-shot watches; ``set_ids`` changes a group's ids."""

    def __init__(self):
        self.ids: dict[str, list[str]] = {}  # path → children; no key: no znode
        self.connected = True
        self.reads = 0
        self.during_next_read = None
        self._child_watches: dict[str, set] = {}
        self._exists_watches: dict[str, set] = {}

    def get_children(self, path, watch):
        self.reads += 1
        if self.during_next_read is not None:
            change, self.during_next_read = self.during_next_read, None
            change()
        if path not in self.ids:
            raise NoNodeError(path)
        self._child_watches.setdefault(path, set()).add(watch)
        return list(self.ids[path])

    def exists(self, path, watch):
        self._exists_watches.setdefault(path, set()).add(watch)
        return {} if path in self.ids else None

    def set_ids(self, group: str, ids: list[str]) -> None:
        path = ids_path(group)
        created = path not in self.ids
        self.ids[path] = ids
        fired = self._exists_watches.pop(path, set()) if created else self._child_watches.pop(path, set())
        kind = EventType.CREATED if created else EventType.CHILD
        for watch in fired:
            watch(WatchedEvent(kind, KeeperState.CONNECTED, path))

    def reset_session(self) -> None:
        """As kazoo does when a session ends: every watch is called once with a path-less event, then dropped."""
        fired = set().union(*self._child_watches.values(), *self._exists_watches.values())
        self._child_watches.clear()
        self._exists_watches.clear()
        for watch in fired:
            watch(WatchedEvent(EventType.NONE, KeeperState.EXPIRED_SESSION, None))


def test_ids_are_read_once_then_kept_until_their_watch_fires():
    zk = FakeZooKeeper()
    zk.set_ids("g", ["c-1"])
    legacy = LegacyIds(lambda: zk)
    assert [legacy.ids("g") for _ in range(3)] == [["c-1"]] * 3
    assert zk.reads == 1

    zk.set_ids("g", [])
    assert legacy.ids("g") == [] and legacy.ids("g") == []
    assert zk.reads == 2


def test_a_group_without_an_ids_znode_is_kept_until_the_znode_is_created():
    zk = FakeZooKeeper()
    legacy = LegacyIds(lambda: zk)
    assert legacy.ids("g") == [] and legacy.ids("g") == []
    assert zk.reads == 1

    zk.set_ids("g", ["c-2", "c-1"])
    assert legacy.ids("g") == ["c-1", "c-2"]


def test_ids_read_while_a_watch_fired_are_not_kept():
    zk = FakeZooKeeper()
    zk.set_ids("g", ["c-1"])
    legacy = LegacyIds(lambda: zk)
    legacy.ids("h")  # watched
    zk.during_next_read = lambda: zk.set_ids("h", ["c-9"])  # its event arrives while g's read is under way
    assert legacy.ids("g") == ["c-1"]
    assert legacy.ids("g") == ["c-1"]
    assert zk.reads == 3


def test_nothing_is_answered_from_memory_while_disconnected():
    zk = FakeZooKeeper()
    legacy = LegacyIds(lambda: zk)
    legacy.ids("g")
    zk.connected = False
    legacy.ids("g")
    legacy.ids("g")
    assert zk.reads == 3


def test_a_session_reset_forgets_every_group():
    zk = FakeZooKeeper()
    legacy = LegacyIds(lambda: zk)
    legacy.ids("g")
    legacy.ids("h")
    zk.reset_session()
    legacy.ids("g")
    legacy.ids("h")
    assert zk.reads == 4


def test_the_least_recently_asked_group_is_forgotten_first():
    zk = FakeZooKeeper()
    legacy = LegacyIds(lambda: zk, max_groups=2)
    for group in ("a", "b", "a", "c"):  # "b" is the least recently asked when "c" comes
        legacy.ids(group)
    assert zk.reads == 3
    legacy.ids("a")
    legacy.ids("c")
    assert zk.reads == 3
    legacy.ids("b")
    assert zk.reads == 4


@pytest.mark.parametrize(
    ("path", "group"),
    [
        ("/consumers/g/ids", "g"),
        ("/consumers/a.b-c_1/ids", "a.b-c_1"),
        ("/consumers/g/ids/c-1", None),
        ("/consumers/g/owners", None),
        ("/consumers//ids", None),
        ("/brokers/ids", None),
    ],
)
def test_group_of_ids_path(path, group):
    assert group_of_ids_path(path) == group


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
