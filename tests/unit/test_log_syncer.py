"""One fsync round for every partition with appends waiting (zkcoord.log.syncer)."""

import errno
import os

import gevent
import pytest
from gevent.event import Event

from zkcoord.errors import LogStorageError
from zkcoord.log import LogConfig, PartitionLog
from zkcoord.log import syncer as syncer_module
from zkcoord.log.fence import EpochFence
from zkcoord.log.syncer import RoundSyncer

GROUP = LogConfig(flush_policy="group", segment_bytes=4096, max_message_bytes=1024, index_interval_bytes=256)


class FakeAppender:
    """What the syncer needs of an appender: a descriptor to fsync, and the outcome back."""

    def __init__(self, fd: int):
        self.fd = fd
        self.outcomes: list[BaseException | None] = []
        self.finished = Event()

    def start_round(self, blocking: bool = True) -> int | None:
        return self.fd

    def finish_round(self, error: BaseException | None) -> None:
        self.outcomes.append(error)
        self.finished.set()


def test_partitions_scheduled_together_share_one_round(tmp_path, fsyncs):
    syncer = RoundSyncer(max_threads=4)
    logs = [
        PartitionLog.open(tmp_path / f"p{n}", GROUP, fence=EpochFence(tmp_path / f"p{n}", 1), syncer=syncer)
        for n in range(6)
    ]
    try:
        appends = [gevent.spawn(log.append, [(b"k", b"v%d" % n)]) for n, log in enumerate(logs) for _ in range(3)]
        gevent.joinall(appends, timeout=10, raise_error=True)
        assert syncer.rounds == 1  # 18 appends over 6 partitions (more than the threads): one round
        assert [log.fsync_count for log in logs] == [1] * 6
        assert sorted(append.value.base_offset for append in appends[:3]) == [0, 1, 2]
    finally:
        for log in logs:
            log.close()
        syncer.close()
    for n in range(6):  # durable: a reopen reads every append
        with PartitionLog.open(tmp_path / f"p{n}", GROUP) as reopened:
            assert [value for batch in reopened.read() for _, _, value in batch.entries()] == [b"v%d" % n] * 3


@pytest.fixture(params=["python"] + (["compiled"] if syncer_module.fsync_all is not None else []))
def fsyncs(request, monkeypatch):
    """Each way a round's fsyncs can run: on Python threads, and through fsync_all where it was built."""
    if request.param == "python":
        monkeypatch.setattr(syncer_module, "fsync_all", None)
    return request.param


def test_a_failed_fsync_fails_only_its_partition(tmp_path, fsyncs):
    syncer = RoundSyncer(max_threads=2)
    good = os.open(tmp_path / "good", os.O_RDWR | os.O_CREAT)
    closed = os.open(tmp_path / "closed", os.O_RDWR | os.O_CREAT)
    os.close(closed)
    try:
        healthy, broken, invalid = FakeAppender(good), FakeAppender(closed), FakeAppender("not a descriptor")
        for appender in (healthy, broken, invalid):
            syncer.schedule(appender)
        assert all(appender.finished.wait(10) for appender in (healthy, broken, invalid))
        assert healthy.outcomes == [None]
        assert len(broken.outcomes) == 1 and isinstance(broken.outcomes[0], OSError)  # EBADF
        assert len(invalid.outcomes) == 1 and isinstance(invalid.outcomes[0], TypeError)
    finally:
        os.close(good)
        syncer.close()


def test_appends_of_a_partition_whose_fsync_failed_get_the_error(tmp_path, monkeypatch, fsyncs):
    syncer = RoundSyncer()
    log = PartitionLog.open(tmp_path, GROUP, syncer=syncer)
    if fsyncs == "compiled":
        monkeypatch.setattr(syncer_module, "fsync_all", lambda fds: [errno.EIO] * len(fds))
    else:
        monkeypatch.setattr("zkcoord.log.syncer.os.fsync", lambda fd: (_ for _ in ()).throw(OSError(errno.EIO, "EIO")))
    appends = [gevent.spawn(log.append, [(b"k", b"v")]) for _ in range(3)]
    gevent.joinall(appends, timeout=10)
    assert all(isinstance(append.exception, LogStorageError) for append in appends)
    with pytest.raises(LogStorageError, match="reopen the log"):
        log.append([(b"k", b"later")])
    monkeypatch.undo()
    log.close()
    syncer.close()


def collect(log: PartitionLog, name: str, outcomes: dict, done: Event, expected: int) -> None:
    def called_back(error, base_offset):
        outcomes[name] = type(error).__name__ if error else base_offset
        if len(outcomes) == expected:
            done.set()

    log.submit([(b"k", b"v")], 0, called_back)


def test_two_nodes_whose_rounds_take_shared_partitions_in_opposite_orders_both_finish(tmp_path, monkeypatch):
    # X leads A and was deposed from B, Y the reverse; each still has an append waiting on both. A round that
    # waited for one partition's lock while holding another's would wait for the other node's round for ever.
    a, b = tmp_path / "A", tmp_path / "B"
    x, y = RoundSyncer(), RoundSyncer()
    logs = {
        "Y/A": PartitionLog.open(a, GROUP, fence=EpochFence(a, 1), syncer=y),
        "X/A": PartitionLog.open(a, GROUP, fence=EpochFence(a, 2), syncer=x),
        "X/B": PartitionLog.open(b, GROUP, fence=EpochFence(b, 1), syncer=x),
        "Y/B": PartitionLog.open(b, GROUP, fence=EpochFence(b, 2), syncer=y),
    }
    place = logs["X/A"]._appender._place_pending

    def place_then_yield():  # on two real nodes the rounds run at once; here X yields while it holds A
        place()
        gevent.sleep(0.01)

    monkeypatch.setattr(logs["X/A"]._appender, "_place_pending", place_then_yield)
    outcomes: dict[str, object] = {}
    done = Event()
    for name in ("X/A", "X/B", "Y/B", "Y/A"):
        collect(logs[name], name, outcomes, done, expected=4)
    try:
        assert done.wait(10), f"only {outcomes} were called back"
        assert outcomes == {"X/A": 0, "Y/B": 0, "X/B": "FencedLeaderError", "Y/A": "FencedLeaderError"}
    finally:
        for log in logs.values():
            log.close()
        x.close()
        y.close()


def test_a_partition_whose_fence_is_held_elsewhere_does_not_hold_up_the_others(tmp_path):
    syncer = RoundSyncer()
    logs = {
        name: PartitionLog.open(tmp_path / name, GROUP, fence=EpochFence(tmp_path / name, 1), syncer=syncer)
        for name in ("a", "b", "c")
    }
    held, release = Event(), Event()

    def hold_b():  # as the cleaner does while it swaps segments in
        with logs["b"].fenced():
            held.set()
            release.wait()

    holder = gevent.spawn(hold_b)
    held.wait(10)
    outcomes: dict[str, object] = {}
    done = Event()
    try:
        for name in ("b", "a", "c"):
            collect(logs[name], name, outcomes, done, expected=3)
        gevent.wait([holder], timeout=0.2)  # let rounds run: b's stays behind its fence
        assert outcomes == {"a": 0, "c": 0}
        release.set()
        assert done.wait(10)
        assert outcomes["b"] == 0
    finally:
        release.set()
        holder.join(10)
        for log in logs.values():
            log.close()
        syncer.close()


def test_a_round_that_fails_in_one_partition_lets_go_of_its_locks_and_the_others_go_on(tmp_path, monkeypatch):
    syncer = RoundSyncer()
    logs = {
        name: PartitionLog.open(tmp_path / name, GROUP, fence=EpochFence(tmp_path / name, 1), syncer=syncer)
        for name in ("a", "b", "c")
    }

    def broken():
        raise RuntimeError("a bug in one partition's round")

    monkeypatch.setattr(logs["b"]._appender, "_place_pending", broken)
    outcomes: dict[str, object] = {}
    done = Event()
    try:
        for name in ("a", "b", "c"):
            collect(logs[name], name, outcomes, done, expected=3)
        assert done.wait(10)
        assert outcomes == {"a": 0, "b": "LogStorageError", "c": 0}
        newer = EpochFence(tmp_path / "b", 2)
        claim = gevent.spawn(newer.claim)  # another node takes b over: b's lock is free
        assert claim.join(10) is None and claim.successful()
        newer.close()
    finally:
        for log in logs.values():
            log.close()
        syncer.close()
