"""One fsync round for every partition with appends waiting (zkcoord.log.syncer)."""

import os

import gevent
import pytest
from gevent.event import Event

from zkcoord.errors import LogStorageError
from zkcoord.log import LogConfig, PartitionLog
from zkcoord.log.fence import EpochFence
from zkcoord.log.syncer import RoundSyncer

GROUP = LogConfig(flush_policy="group", segment_bytes=4096, max_message_bytes=1024, index_interval_bytes=256)


class FakeAppender:
    """What the syncer needs of an appender: a descriptor to fsync, and the outcome back."""

    def __init__(self, fd: int):
        self.fd = fd
        self.outcomes: list[BaseException | None] = []
        self.finished = Event()

    def start_round(self) -> int | None:
        return self.fd

    def finish_round(self, error: BaseException | None) -> None:
        self.outcomes.append(error)
        self.finished.set()


def test_partitions_scheduled_together_share_one_round(tmp_path):
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


def test_a_failed_fsync_fails_only_its_partition(tmp_path):
    syncer = RoundSyncer(max_threads=2)
    good = os.open(tmp_path / "good", os.O_RDWR | os.O_CREAT)
    closed = os.open(tmp_path / "closed", os.O_RDWR | os.O_CREAT)
    os.close(closed)
    try:
        healthy, broken, invalid = FakeAppender(good), FakeAppender(closed), FakeAppender(-1)
        for appender in (healthy, broken, invalid):
            syncer.schedule(appender)
        assert all(appender.finished.wait(10) for appender in (healthy, broken, invalid))
        assert healthy.outcomes == [None]
        assert len(broken.outcomes) == 1 and isinstance(broken.outcomes[0], OSError)  # EBADF
        assert len(invalid.outcomes) == 1 and isinstance(invalid.outcomes[0], ValueError)  # not even a descriptor
    finally:
        os.close(good)
        syncer.close()


def test_appends_of_a_partition_whose_fsync_failed_get_the_error(tmp_path, monkeypatch):
    syncer = RoundSyncer()
    log = PartitionLog.open(tmp_path, GROUP, syncer=syncer)
    monkeypatch.setattr("zkcoord.log.syncer.os.fsync", lambda fd: (_ for _ in ()).throw(OSError(5, "EIO")))
    appends = [gevent.spawn(log.append, [(b"k", b"v")]) for _ in range(3)]
    gevent.joinall(appends, timeout=10)
    assert all(isinstance(append.exception, LogStorageError) for append in appends)
    with pytest.raises(LogStorageError, match="reopen the log"):
        log.append([(b"k", b"later")])
    monkeypatch.undo()
    log.close()
    syncer.close()
