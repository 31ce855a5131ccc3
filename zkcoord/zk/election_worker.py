"""The partition election's worker: one greenlet on the kazoo client's hub that runs the election's steps.

Watches, the session's state listener and timers only enqueue a wake-up; the worker runs one step for all
that are queued, one step at a time. A session lost (SUSPENDED or LOST) while a step waits on ZooKeeper
interrupts it: the next step, which the listener queued, resigns before anything else
(:class:`~zkcoord.zk.election.PartitionElection`). Must not import the log, the runtime or the server.
"""

import logging
import time
from collections.abc import Callable

import gevent
import gevent.event
import gevent.queue
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import ConnectionLoss

from zkcoord.zk.nodes import CALL_TIMEOUT_S, DISCONNECTED, RETRY_DELAY_S

log = logging.getLogger(__name__)

_LOSS_STATES = (KazooState.SUSPENDED, KazooState.LOST)
_WAKE = object()
_STOP = object()


class SessionInterrupted(Exception):
    """The session was lost while the worker waited on ZooKeeper; it resigns before anything else."""


class ElectionWorker:
    """Runs ``step()`` whenever woken, and ``shut_down()`` once on :meth:`stop`, on a greenlet of its own."""

    def __init__(self, client: KazooClient, node_id: int, step: Callable[[], None], shut_down: Callable[[], None]):
        self.client = client
        self.node_id = node_id
        self._step = step
        self._shut_down = shut_down
        self._events: gevent.queue.Queue = gevent.queue.Queue()
        self._loss = gevent.event.Event()  # set by the state listener; the step resigns everything first
        self._greenlet: gevent.Greenlet | None = None
        self._wake_at: float | None = None
        self._stopped = True

    def start(self) -> None:
        if self._greenlet is not None:
            raise RuntimeError("the election is already running")
        self._stopped = False
        self._events = gevent.queue.Queue()
        self._loss.clear()
        self.client.add_listener(self._on_state)
        self._greenlet = gevent.spawn(self._run)
        self._events.put(_WAKE)

    def stop(self, timeout: float) -> None:
        """Have the worker shut down after its current step, and wait for it (kill it after ``timeout``)."""
        worker = self._greenlet
        if worker is None:
            return
        if gevent.getcurrent() is worker:
            raise RuntimeError("stop() from an election callback would wait for itself")
        self._events.put(_STOP)
        worker.join(timeout)
        if not worker.dead:
            log.warning("partition election did not stop in time node=%d timeout_s=%.0f", self.node_id, timeout)
            worker.kill()
        self._greenlet = None
        self._stopped = True
        self.client.remove_listener(self._on_state)

    def wake(self) -> None:
        """Run another step. Safe from any greenlet of the client's hub."""
        self._events.put(_WAKE)

    def wake_in(self, delay_s: float) -> None:
        """Queue a wake-up ``delay_s`` from now, unless one is already due by then."""
        due = time.monotonic() + max(delay_s, 0.0)
        if self._wake_at is not None and self._wake_at <= due and self._wake_at > time.monotonic():
            return
        self._wake_at = due
        gevent.spawn_later(max(delay_s, 0.0), self._events.put, _WAKE)

    def take_loss(self) -> bool:
        """Whether the session was lost since the last call (then the step resigns everything)."""
        if not self._loss.is_set():
            return False
        self._loss.clear()
        return True

    def check_loss(self) -> None:
        """Raise :class:`SessionInterrupted` if the session was lost during this step."""
        if self._loss.is_set():
            raise SessionInterrupted()

    def wait(self, result):
        """The result of an async kazoo call, unless the session is lost first (SessionInterrupted)."""
        if not result.ready():
            gevent.wait([result, self._loss], timeout=CALL_TIMEOUT_S, count=1)
        self.check_loss()
        if not result.ready():
            raise ConnectionLoss(f"no answer from ZooKeeper within {CALL_TIMEOUT_S:.0f}s")
        return result.get()

    # -- kazoo callbacks: enqueue only --------------------------------------------------------------

    def _on_state(self, state: str) -> None:
        if state in _LOSS_STATES:
            self._loss.set()
        self._events.put(_WAKE)

    def on_watch(self, _event) -> None:
        if not self._stopped:
            self._events.put(_WAKE)

    # -- the greenlet -------------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            items = [self._events.get()]
            while not self._events.empty():
                items.append(self._events.get_nowait())
            if _STOP in items:
                self._stopped = True
                self._shut_down()
                return
            try:
                self._step()
            except SessionInterrupted:
                pass  # the listener queued a wake-up: the next step resigns
            except DISCONNECTED as error:
                log.debug("partition election step interrupted node=%d error=%r", self.node_id, error)
                self.wake_in(RETRY_DELAY_S)
            except Exception:
                log.exception("partition election step failed, retrying node=%d", self.node_id)
                self.wake_in(RETRY_DELAY_S)
