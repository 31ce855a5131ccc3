"""The epoch fence of a shared partition directory: a deposed leader's log cannot write once a newer epoch
has claimed the directory (architecture.md "Storage across nodes")."""

import fcntl
import os
import subprocess
import sys
import textwrap
import threading
import time

import gevent
import pytest

from zkcoord.errors import FencedLeaderError, LogInUseError
from zkcoord.log import LogConfig, PartitionLog
from zkcoord.log.cleaner import _CleanedWriter, clean
from zkcoord.log.fence import EPOCH_FILE, LOCK_FILE, EpochFence

SMALL = LogConfig(segment_bytes=1024, max_message_bytes=1024, index_interval_bytes=256)
POLICIES = ["always", "group", "never"]


def config(policy: str) -> LogConfig:
    return LogConfig(flush_policy=policy, segment_bytes=1024, max_message_bytes=1024, index_interval_bytes=256)


def replay(partition: PartitionLog) -> list[tuple[int, bytes, bytes | None]]:
    return [entry for batch in partition.read() for entry in batch.entries()]


def files(directory) -> dict[str, int]:
    """Name and size of every file but the locks, to show a refused write changed nothing."""
    return {
        name: os.path.getsize(directory / name) for name in sorted(os.listdir(directory)) if name not in (LOCK_FILE,)
    }


def open_fenced(directory, epoch: int, policy: str = "always") -> PartitionLog:
    return PartitionLog.open(directory, config(policy), fence=EpochFence(directory, epoch))


@pytest.mark.parametrize("policy", POLICIES)
def test_a_newer_epoch_fences_the_old_leader(tmp_path, policy):
    old = open_fenced(tmp_path, 1, policy)
    old.append([(b"k", b"by epoch 1")])
    old.flush()
    new = open_fenced(tmp_path, 2, policy)
    assert replay(new) == [(0, b"k", b"by epoch 1")]
    before = files(tmp_path)

    with pytest.raises(FencedLeaderError, match="epoch 2 has claimed") as error:
        old.append([(b"k", b"by the deposed leader")])
    assert error.value.error_code.name == "NOT_LEADER_OR_FOLLOWER"
    with pytest.raises(FencedLeaderError):  # and every later append
        old.append([(b"k", b"again")])
    assert files(tmp_path) == before

    assert new.append([(b"k", b"by epoch 2")]).base_offset == 1
    old.close()  # flushes nothing: the log has failed
    new.close()
    with open_fenced(tmp_path, 2, policy) as reopened:
        assert replay(reopened) == [(0, b"k", b"by epoch 1"), (1, b"k", b"by epoch 2")]


def test_concurrent_group_appends_all_fail_when_fenced(tmp_path):
    old = open_fenced(tmp_path, 1, "group")
    old.append([(b"k", b"kept")])
    with open_fenced(tmp_path, 2, "group") as new:
        before = files(tmp_path)
        appends = [gevent.spawn(old.append, [(b"k%d" % n, b"lost")]) for n in range(5)]
        gevent.joinall(appends, timeout=10)
        assert all(isinstance(append.exception, FencedLeaderError) for append in appends)
        assert files(tmp_path) == before
        assert replay(new) == [(0, b"k", b"kept")]
    old.close()


def test_roll_and_flush_are_fenced(tmp_path):
    old = open_fenced(tmp_path, 1, "never")
    old.append([(b"k", b"v")])
    with open_fenced(tmp_path, 2):
        before = files(tmp_path)
        with pytest.raises(FencedLeaderError):
            old.roll()
        with pytest.raises(FencedLeaderError):
            old.flush()
        assert files(tmp_path) == before
    old.close()


def test_a_claim_with_a_lower_epoch_is_refused(tmp_path):
    with open_fenced(tmp_path, 5) as partition:
        partition.append([(b"k", b"v")])
        with pytest.raises(FencedLeaderError, match="epoch 5 already has"):
            open_fenced(tmp_path, 4)
        with pytest.raises(FencedLeaderError):
            EpochFence(tmp_path, 3).claim()
    assert (tmp_path / EPOCH_FILE).read_text().strip() == "5"
    with pytest.raises(FencedLeaderError):  # the stored epoch outlives the process that wrote it
        open_fenced(tmp_path, 4)
    for epoch in (5, 5, 6):  # the same epoch may reopen; a newer one takes over
        with open_fenced(tmp_path, epoch) as partition:
            assert replay(partition) == [(0, b"k", b"v")]
    assert EpochFence(tmp_path, 6).stored_epoch() == 6


def test_fenced_and_unfenced_opens_exclude_each_other(tmp_path):
    # nodes share the directory; an unfenced open (an offline tool) must wait for all of them
    with open_fenced(tmp_path, 1), open_fenced(tmp_path, 2), pytest.raises(LogInUseError, match="coordinator nodes"):
        PartitionLog.open(tmp_path, SMALL)
    with PartitionLog.open(tmp_path, SMALL), pytest.raises(LogInUseError, match=str(os.getpid())):
        open_fenced(tmp_path, 3)


def test_compaction_of_a_deposed_leader_swaps_nothing(tmp_path):
    old = open_fenced(tmp_path, 1, "never")
    for number in range(40):
        old.append([(b"key-%d" % (number % 3), bytes(60))])
    old.roll()
    assert len(old.segments) > 2
    with open_fenced(tmp_path, 2) as new:
        before = files(tmp_path)
        with pytest.raises(FencedLeaderError):
            clean(old, now_ms=0)
        assert files(tmp_path) == before
        assert len(replay(new)) == 40
        result = clean(new, now_ms=0)  # the leader's own cleaner still works
        assert result is not None and result.records_kept < 40
        assert [key for _, key, _ in replay(new)][-3:] == [b"key-1", b"key-2", b"key-0"]
    old.close()


def test_a_swap_is_refused_when_the_new_leader_claims_during_the_pass(tmp_path, monkeypatch):
    old = open_fenced(tmp_path, 1, "never")
    for number in range(40):
        old.append([(b"key-%d" % (number % 3), bytes(60))])
    old.roll()
    finish = _CleanedWriter.finish
    new = []

    def finish_then_lose_the_partition(writer):
        segments = finish(writer)  # every .cleaned file is written: only the swap is left
        new.append(open_fenced(tmp_path, 2))
        return segments

    monkeypatch.setattr(_CleanedWriter, "finish", finish_then_lose_the_partition)
    with pytest.raises(FencedLeaderError):
        clean(old, now_ms=0)
    assert not (tmp_path / "swap.json").exists()
    assert len(replay(new[0])) == 40
    new[0].close()
    old.close()


def test_a_held_lock_delays_the_write_without_blocking_the_hub(tmp_path):
    partition = open_fenced(tmp_path, 1, "always")
    holder = os.open(tmp_path / LOCK_FILE, os.O_RDWR)
    fcntl.flock(holder, fcntl.LOCK_EX)  # another node, in the middle of its write
    released_at = []

    def release():
        released_at.append(time.monotonic())
        fcntl.flock(holder, fcntl.LOCK_UN)

    releaser = threading.Timer(0.3, release)  # a real thread: it must not need this hub
    releaser.start()
    try:
        append = gevent.spawn(partition.append, [(b"k", b"v")])
        ticks = []
        while not append.ready():  # a hub blocked in flock would not come back here before the release
            gevent.sleep(0.005)
            ticks.append(time.monotonic())
        assert append.get().base_offset == 0
    finally:
        releaser.join()
        os.close(holder)
    assert len([tick for tick in ticks if tick < released_at[0]]) >= 10
    partition.close()


def test_a_write_killed_while_waiting_for_the_lock_does_not_keep_it(tmp_path):
    partition = open_fenced(tmp_path, 1, "always")
    holder = os.open(tmp_path / LOCK_FILE, os.O_RDWR)
    fcntl.flock(holder, fcntl.LOCK_EX)
    try:
        append = gevent.spawn(partition.append, [(b"k", b"abandoned")])
        gevent.sleep(0.05)
        append.kill(block=True, timeout=5)
        assert append.dead
    finally:
        fcntl.flock(holder, fcntl.LOCK_UN)
        os.close(holder)
    with gevent.Timeout(10):
        assert partition.append([(b"k", b"v")]).base_offset == 0
        EpochFence(tmp_path, 1).claim()  # nobody holds the lock any more
    partition.close()


def test_a_leader_in_another_process_fences_this_one(tmp_path):
    old = open_fenced(tmp_path, 1)
    old.append([(b"k", b"mine")])
    script = textwrap.dedent(
        f"""
        from zkcoord.log import LogConfig, PartitionLog
        from zkcoord.log.fence import EpochFence
        with PartitionLog.open({str(tmp_path)!r}, LogConfig(), fence=EpochFence({str(tmp_path)!r}, 2)) as log:
            log.append([(b"k", b"theirs")])
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)
    with pytest.raises(FencedLeaderError):
        old.append([(b"k", b"too late")])
    old.close()
    with open_fenced(tmp_path, 2) as new:
        assert replay(new) == [(0, b"k", b"mine"), (1, b"k", b"theirs")]


def test_without_a_fence_the_log_writes_no_fence_files(tmp_path):
    with PartitionLog.open(tmp_path, SMALL) as partition:
        partition.append([(b"k", b"v")])
    assert not (tmp_path / EPOCH_FILE).exists() and not (tmp_path / LOCK_FILE).exists()


def test_an_epoch_written_over_in_place_is_noticed(tmp_path):
    # A claim replaces the epoch file; an edit in place (same inode, same size, maybe the same coarse
    # modification time) must fence the leader all the same: the epoch is read under every lock.
    with open_fenced(tmp_path, 1, "always") as partition:
        partition.append([(b"k", b"v")])
        before = os.stat(tmp_path / EPOCH_FILE)
        with open(tmp_path / EPOCH_FILE, "r+") as file:
            file.write("2\n")
        os.utime(tmp_path / EPOCH_FILE, ns=(before.st_atime_ns, before.st_mtime_ns))
        after = os.stat(tmp_path / EPOCH_FILE)
        assert (after.st_ino, after.st_size, after.st_mtime_ns) == (before.st_ino, before.st_size, before.st_mtime_ns)
        with pytest.raises(FencedLeaderError, match="epoch 2 has claimed"):
            partition.append([(b"k", b"by the deposed leader")])


def test_greenlets_sharing_a_fence_exclude_each_other(tmp_path):
    # They share the fence's open lock file, which flock cannot tell apart.
    fence = EpochFence(tmp_path, 1)
    fence.claim()
    inside: list[str] = []

    def hold(name: str) -> None:
        with fence.guard():
            inside.append(f"{name} in")
            gevent.sleep(0)
            inside.append(f"{name} out")

    gevent.joinall([gevent.spawn(hold, "a"), gevent.spawn(hold, "b")], timeout=10, raise_error=True)
    assert inside == ["a in", "a out", "b in", "b out"]
    fence.close()


def test_closing_a_fence_waits_for_its_holder_and_refuses_later_writes(tmp_path):
    fence = EpochFence(tmp_path, 1)
    fence.claim()
    steps: list[str] = []

    def hold() -> None:
        with fence.guard():
            steps.append("holding")
            gevent.sleep(0)
            steps.append("released")

    holder = gevent.spawn(hold)
    gevent.sleep(0)  # the holder is inside
    fence.close()
    steps.append("closed")
    holder.join(10)
    assert steps == ["holding", "released", "closed"]
    with pytest.raises(FencedLeaderError, match="closed"):
        fence.acquire()
    EpochFence(tmp_path, 2).claim()  # and its lock is free
