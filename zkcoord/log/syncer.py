"""One fsync round for every partition with appends waiting: the ``group`` flush policy across partitions.

Each round, every partition with appends waiting places them in its active segment and writes them out, under
its fence; then their fsyncs are issued side by side on native threads (a filesystem's journal commits
concurrent fsyncs together, while one after another each would wait for its own), which wake the hub once,
when the last is done; then each partition acknowledges its appends and leaves its fence. Appends that arrive
meanwhile wait for the next round.

A round never waits for one partition's locks while it holds another's: partitions whose append lock or
fence is held elsewhere (a flush, the cleaner, another node) wait for a later round, and only a round that
holds nothing waits for one. Otherwise two nodes could each hold a partition the other waits for, and one
busy partition would hold up the commits of all the others.

Where the compiled ``zkcoord.log._fsync`` was built, one thread issues a round's fsyncs through it, without the
GIL until all are done; else each fsync has a thread of its own, which needs the GIL again when its fsync
returns, and waits for the busy hub to let go of it.

One syncer serves all the partitions of a node (:class:`~zkcoord.runtime.durable.DurableLogs`): commits spread
over fifty partitions then cost one greenlet and one wake-up per round instead of one each per partition (a
task on gevent's thread pool cost the hub more than the rest of a partition's round). A partition opened on
its own gets a syncer of its own.
"""

from __future__ import annotations

import _queue  # the C queue: gevent's monkey-patching replaces queue.SimpleQueue, not this one
import os
from collections import deque
from typing import TYPE_CHECKING

import gevent
from gevent import monkey
from gevent.event import Event

if TYPE_CHECKING:
    from zkcoord.log.appender import Appender

try:
    from zkcoord.log._fsync import fsync_all
except ImportError:  # built where a C compiler is (setup.py)
    fsync_all = None

_start_thread, _allocate_lock = monkey.get_original("_thread", ["start_new_thread", "allocate_lock"])
MAX_FSYNC_THREADS = 32
BUSY = -1  # Appender.start_round's answer when a partition's locks are held elsewhere


class _Round:
    """The fsyncs of one round, counted down by the threads that make them."""

    __slots__ = ("done", "errors", "left", "lock")

    def __init__(self, count: int):
        self.errors: list[BaseException | None] = [None] * count
        self.left = count
        self.lock = _allocate_lock()
        self.done = Event()


class _Threads:
    """Native threads sharing a queue of fsyncs, and the hub's watcher they wake it through."""

    def __init__(self):
        self.jobs = _queue.SimpleQueue()
        self.finished: deque[_Round] = deque()
        self.count = 0
        self.wake = gevent.get_hub().loop.async_(ref=False)  # an idle syncer does not keep the hub running
        self.wake.start(self._on_wake)

    def grow(self, wanted: int) -> None:
        while self.count < wanted:
            _start_thread(_fsync_jobs, (self.jobs, self.finished, self.wake))
            self.count += 1

    def stop(self) -> None:
        """End the threads once they finished what was queued; the watcher goes when no round uses it."""
        for _ in range(self.count):
            self.jobs.put(None)
        self.count = 0

    def _on_wake(self) -> None:
        while self.finished:
            self.finished.popleft().done.set()


class RoundSyncer:
    """Runs the rounds of the appenders that :meth:`schedule` them, one round at a time."""

    def __init__(self, max_threads: int = MAX_FSYNC_THREADS):
        self._waiting: dict[Appender, None] = {}  # insertion-ordered: rounds start in the order appends came
        self._runner: gevent.Greenlet | None = None
        self._max_threads = max_threads
        self._threads: _Threads | None = None  # made with the first round, and again after close()
        self.rounds = 0

    def schedule(self, appender: Appender) -> None:
        """Make ``appender``'s waiting appends part of the next round."""
        self._waiting[appender] = None
        if self._runner is None:
            self._runner = gevent.spawn(self._run)

    def close(self) -> None:
        """Stop the threads once they finish what they have; a later round starts new ones."""
        threads, self._threads = self._threads, None
        if threads is not None:
            threads.stop()
            if self._runner is None:
                threads.wake.close()  # else the round in flight still needs it, and _sync closes it

    def _run(self) -> None:
        try:
            while self._waiting:
                appenders = list(self._waiting)
                self._waiting.clear()
                started = self._start(appenders)
                if started:
                    self._sync(started)
        finally:
            self._runner = None

    def _start(self, appenders: list[Appender]) -> list[tuple[Appender, int]]:
        """Start the round of every appender whose locks are free; the busy ones wait for the next round."""
        started: list[tuple[Appender, int]] = []
        busy: list[Appender] = []
        try:
            for appender in appenders:
                fd = appender.start_round(blocking=False)
                if fd == BUSY:
                    busy.append(appender)
                elif fd is not None:
                    started.append((appender, fd))
            if busy and not started:
                fd = busy[0].start_round(blocking=True)  # holding nothing else, it may wait
                appender = busy.pop(0)  # only now: killed while it waited, it stays waiting
                if fd is not None:
                    started.append((appender, fd))
        except BaseException as error:  # killed while starting: what started must still let go
            for appender, _ in started:
                appender.finish_round(error)
            raise
        finally:
            for appender in busy:
                self._waiting[appender] = None
        return started

    def _sync(self, started: list[tuple[Appender, int]]) -> None:
        round_ = _Round(len(started))
        threads = self._threads
        try:
            if threads is None:
                threads = self._threads = _Threads()
            fds = [fd for _, fd in started]
            if fsync_all is not None:
                threads.grow(1)
                threads.jobs.put((round_, 0, fds))
            else:
                threads.grow(min(len(fds), self._max_threads))
                for number, fd in enumerate(fds):
                    threads.jobs.put((round_, number, [fd]))
            threads.wake.ref = True  # the threads will wake the hub: it must wait for them
            try:
                round_.done.wait()
            finally:
                threads.wake.ref = False
        except BaseException as error:  # killed: the fsyncs still in flight cannot vouch for their rounds
            round_.errors = [error] * len(started)
            raise
        finally:  # each started round leaves its fence, whatever happened
            self.rounds += 1
            for (appender, _), error in zip(started, round_.errors, strict=True):
                appender.finish_round(error)
            if threads is not None and threads is not self._threads:
                threads.wake.close()  # closed while this round ran


def _fsync_jobs(jobs: _queue.SimpleQueue, finished: deque[_Round], wake) -> None:
    """A native thread's loop: fsync each job's descriptors; the last of a round hands it back to the hub."""
    while (job := jobs.get()) is not None:
        round_, first, fds = job
        try:
            errors = _fsync_many(fds)
        except BaseException as error:  # whatever it is, the round must still be counted down
            errors = [error] * len(fds)
        with round_.lock:
            round_.errors[first : first + len(fds)] = errors
            round_.left -= len(fds)
            last = round_.left == 0
        if last:
            finished.append(round_)
            wake.send()


def _fsync_many(fds: list[int]) -> list[BaseException | None]:
    if fsync_all is not None:
        try:
            return [OSError(code, os.strerror(code)) if code else None for code in fsync_all(fds)]
        except (TypeError, ValueError, OverflowError):
            pass  # not all descriptors: one by one, each fails alone
    errors: list[BaseException | None] = []
    for fd in fds:
        try:
            os.fsync(fd)
            errors.append(None)
        except (OSError, TypeError, ValueError, OverflowError) as error:
            errors.append(error)
    return errors
