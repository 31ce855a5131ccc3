"""One fsync round for every partition with appends waiting: the ``group`` flush policy across partitions.

Each round, every partition with appends waiting places them in its active segment and writes them out, under
its fence; then their fsyncs are issued side by side on native threads (a filesystem's journal commits
concurrent fsyncs together, while one after another each would wait for its own), which wake the hub once,
when the last is done; then each partition acknowledges its appends and leaves its fence. Appends that arrive
meanwhile wait for the next round.

One syncer serves all the partitions of a node (:class:`~zkcoord.runtime.durable.DurableLogs`): commits spread
over fifty partitions then cost one greenlet and one wake-up per round instead of one each per partition (a
task on gevent's thread pool cost the hub more than the rest of a partition's round). A partition opened on
its own gets a syncer of its own.
"""

from __future__ import annotations

import _queue  # the C queue: gevent's monkey-patching replaces queue.SimpleQueue, not this one
import logging
import os
from collections import deque
from typing import TYPE_CHECKING

import gevent
from gevent import monkey
from gevent.event import Event

if TYPE_CHECKING:
    from zkcoord.log.appender import Appender

log = logging.getLogger(__name__)

_start_thread, _allocate_lock = monkey.get_original("_thread", ["start_new_thread", "allocate_lock"])
MAX_FSYNC_THREADS = 32


class _Round:
    """The fsyncs of one round, counted down by the threads that make them."""

    __slots__ = ("done", "errors", "left", "lock")

    def __init__(self, count: int):
        self.errors: list[BaseException | None] = [None] * count
        self.left = count
        self.lock = _allocate_lock()
        self.done = Event()


class RoundSyncer:
    """Runs the rounds of the appenders that :meth:`schedule` them, one round at a time."""

    def __init__(self, max_threads: int = MAX_FSYNC_THREADS):
        self._waiting: dict[Appender, None] = {}  # insertion-ordered: rounds start in the order appends came
        self._runner: gevent.Greenlet | None = None
        self._max_threads = max_threads
        self._threads = 0
        self._jobs = _queue.SimpleQueue()
        self._finished: deque[_Round] = deque()
        self._wake = None  # the hub's async watcher the threads send to; made with the first thread
        self.rounds = 0

    def schedule(self, appender: Appender) -> None:
        """Make ``appender``'s waiting appends part of the next round."""
        self._waiting[appender] = None
        if self._runner is None:
            self._runner = gevent.spawn(self._run)

    def close(self) -> None:
        """Stop the threads once they finish what they have; a later round starts them again."""
        for _ in range(self._threads):
            self._jobs.put(None)
        self._threads = 0
        if self._runner is None and self._wake is not None:
            self._wake.close()
            self._wake = None

    def _run(self) -> None:
        try:
            while self._waiting:
                appenders = list(self._waiting)
                self._waiting.clear()
                started = [(appender, fd) for appender in appenders if (fd := appender.start_round()) is not None]
                if started:
                    self._sync(started)
        finally:
            self._runner = None

    def _sync(self, started: list[tuple[Appender, int]]) -> None:
        round_ = _Round(len(started))
        try:
            self._start_threads(len(started))
            for number, (_, fd) in enumerate(started):
                self._jobs.put((round_, number, fd))
            self._wake.ref = True  # the threads will wake the hub: it must wait for them
            try:
                round_.done.wait()
            finally:
                self._wake.ref = False
        except BaseException as error:  # killed: the fsyncs still in flight cannot vouch for their rounds
            round_.errors = [error] * len(started)
            raise
        finally:  # each started round leaves its fence, whatever happened
            self.rounds += 1
            for (appender, _), error in zip(started, round_.errors, strict=True):
                appender.finish_round(error)

    def _start_threads(self, wanted: int) -> None:
        if self._wake is None:
            self._wake = gevent.get_hub().loop.async_(ref=False)  # an idle syncer does not keep the hub running
            self._wake.start(self._on_wake)
        while self._threads < min(wanted, self._max_threads):
            _start_thread(_fsync_jobs, (self._jobs, self._finished, self._wake))
            self._threads += 1

    def _on_wake(self) -> None:
        while self._finished:
            self._finished.popleft().done.set()


def _fsync_jobs(jobs: _queue.SimpleQueue, finished: deque[_Round], wake) -> None:
    """A native thread's loop: fsync each job's descriptor; the last of a round hands it back to the hub."""
    while (job := jobs.get()) is not None:
        round_, number, fd = job
        try:
            os.fsync(fd)
        except BaseException as error:  # whatever it is, the round must still be counted down
            round_.errors[number] = error
        with round_.lock:
            round_.left -= 1
            last = round_.left == 0
        if last:
            finished.append(round_)
            wake.send()
