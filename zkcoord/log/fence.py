"""The epoch fence of a partition directory that several coordinator nodes share (architecture.md "Storage
across nodes").

ZooKeeper elects each offsets partition's leader with an epoch. The leader records its epoch in the
directory (``leader-epoch``) when it takes the partition over, and every write it makes checks that
epoch under an exclusive ``flock`` of ``leader.lock``: once a newer leader has claimed the directory, a
deposed leader that has not noticed yet cannot write a byte.

``flock`` belongs to an open file, not to a thread or a process: each fence opens the lock file once and
keeps it open until :meth:`EpochFence.close` (opening it for every write cost more than the write), so two
fences in one process exclude each other as two nodes do, and the lock may be taken on the hub while the
write and fsync it covers run on another thread. Greenlets sharing one fence share its open file, which
``flock`` cannot tell apart: a semaphore excludes them. A contended lock is waited for on gevent's thread
pool, so the hub keeps running meanwhile; or, asked not to block, the fence says it is busy. The epoch file is
opened and read under every lock: on NFS, opening it is what revalidates a name another node replaced.

Must not import the rest of the log (partition.py uses it) nor kazoo.
"""

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

import gevent
from gevent.lock import Semaphore

from zkcoord.errors import FencedLeaderError, UnreadableLogStateError

LOCK_FILE = "leader.lock"
EPOCH_FILE = "leader-epoch"


def _lock(fd: int, blocking: bool = True) -> bool:
    """Take an exclusive flock of ``fd``, waiting off the hub if another open file holds it (False at once
    instead, if not ``blocking``).

    If this raises, ``fd`` is closed: at once, or when a wait that cannot be interrupted ends.
    """
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        if not blocking:
            return False
    except BaseException:
        os.close(fd)
        raise
    try:
        waiting = gevent.get_hub().threadpool.spawn(fcntl.flock, fd, fcntl.LOCK_EX)
    except BaseException:
        os.close(fd)
        raise
    try:
        waiting.get()
    except BaseException:
        if waiting.ready():
            os.close(fd)
        else:
            # The pool thread goes on waiting; closing the descriptor after it returns releases what it took.
            waiting.rawlink(lambda _: os.close(fd))
        raise
    return True


def read_stored_epoch(directory: Path) -> int | None:
    """The epoch recorded in ``directory``, None if none; UnreadableLogStateError if it is not an int ≥ 0."""
    return _read_epoch(directory / EPOCH_FILE)


def _read_epoch(path: Path | str) -> int | None:
    # Plain system calls: read under every write's lock, where pathlib and a buffered file cost more than the read.
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        data = b""
        while chunk := os.read(fd, 4096):
            data += chunk
    finally:
        os.close(fd)
    text = data.decode(errors="replace").strip()
    if not text.isdigit() or not text.isascii():
        raise UnreadableLogStateError(
            f'{path} holds {data[:40]!r}, not a leader epoch; see docs/offsets-log.md "Repairs"'
        )
    return int(text)


class EpochFence:
    """The right of leader epoch ``epoch`` to write into ``directory``; see the module docstring."""

    def __init__(self, directory: str | os.PathLike, epoch: int):
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
            raise ValueError(f"a leader epoch is an int ≥ 0, not {epoch!r}")
        self.directory = Path(directory)
        self.epoch = epoch
        self._lock_path = self.directory / LOCK_FILE
        self._epoch_path = str(self.directory / EPOCH_FILE)
        self._lock_fd = -1
        self._holder = Semaphore()
        self._closed = False

    def __repr__(self) -> str:
        return f"EpochFence({str(self.directory)!r}, {self.epoch})"

    def stored_epoch(self) -> int | None:
        """The epoch recorded in the directory (None if no leader has claimed it); read without the lock."""
        return _read_epoch(self._epoch_path)

    def claim(self) -> None:
        """Record this epoch as the directory's leader; FencedLeaderError if a newer epoch already did."""
        self._lock(blocking=True)
        try:
            stored = self.stored_epoch()
            if stored is not None and stored > self.epoch:
                raise FencedLeaderError(
                    f"{self.directory}: cannot claim it with leader epoch {self.epoch}: epoch {stored} already has "
                    "(if ZooKeeper's data was reset, its epoch is behind the one on disk: run `zkcoord log "
                    'raise-epoch`, docs/offsets-log.md "Repairs")'
                )
            if stored != self.epoch:
                self._write_epoch()
        finally:
            self.release()

    def _write_epoch(self) -> None:
        temporary = self.directory / (EPOCH_FILE + ".tmp")
        with open(temporary, "w") as file:
            file.write(f"{self.epoch}\n")
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, self._epoch_path)
        fd = os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def guard(self) -> Iterator[None]:
        """Hold the directory's write lock while this epoch is still its leader; else FencedLeaderError.

        Everything written inside (and fsynced before leaving) is covered: a newer leader's :meth:`claim`
        waits for it, and this fence refuses every write after that claim.
        """
        self.acquire()
        try:
            yield
        finally:
            self.release()

    def acquire(self, blocking: bool = True) -> bool:
        """What :meth:`guard` does on entry, for a holder that spans calls; :meth:`release` ends it.

        Not ``blocking``, False at once (nothing held) if another greenlet or another open file holds the
        lock. On any error nothing is held.
        """
        if not self._lock(blocking):
            return False
        try:
            stored = self.stored_epoch()
            if stored != self.epoch:
                raise FencedLeaderError(
                    f"{self.directory}: leader epoch {self.epoch} is fenced: "
                    + (f"epoch {stored} has claimed the directory" if stored is not None else "no epoch is recorded")
                )
        except BaseException:
            self.release()
            raise
        return True

    def release(self) -> None:
        """Give back what :meth:`acquire` took."""
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)  # explicit: a forked child sharing this open file would keep it
        finally:
            self._holder.release()

    def close(self) -> None:
        """Close the lock file once its holder (if any) is done; the fence refuses every later write."""
        with self._holder:
            self._closed = True
            if self._lock_fd >= 0:
                os.close(self._lock_fd)
                self._lock_fd = -1

    def _lock(self, blocking: bool) -> bool:
        if not self._holder.acquire(blocking=blocking):
            return False
        try:
            if self._closed:
                raise FencedLeaderError(f"{self.directory}: the fence of leader epoch {self.epoch} is closed")
            if self._lock_fd < 0:
                self._lock_fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                locked = _lock(self._lock_fd, blocking)
            except BaseException:
                self._lock_fd = -1  # _lock closed it, or will once the wait it could not interrupt ends
                raise
        except BaseException:
            self._holder.release()
            raise
        if not locked:
            self._holder.release()
        return locked
