"""kazoo sessions that survive a blocked caller: a gevent hub of their own in a native thread.

A ZooKeeper session dies if nobody answers its pings for a session timeout. When user code holds the
caller's gevent hub (a CPU-bound handler, a blocking library), a kazoo client on that hub would be
starved and lose its session. :class:`HubThread` runs a second hub in a native thread: the kazoo
client (``SequentialGeventHandler``) lives there, and Python's GIL switching keeps its pings going
while the caller computes. Works whether or not the caller monkey-patched: thread and lock
primitives are taken from the unpatched ``_thread`` module.
"""

import collections
import contextlib
import logging
import queue
import time
from collections.abc import Callable
from typing import Any

import gevent
import gevent.event
import gevent.lock
from gevent import monkey
from kazoo.client import KazooClient
from kazoo.handlers.gevent import SequentialGeventHandler
from kazoo.retry import KazooRetry

from zkcoord.zk.acl import kazoo_client
from zkcoord.zk.credentials import UNSECURED, ZooKeeperSecurity

log = logging.getLogger(__name__)

_start_new_thread = monkey.get_original("_thread", "start_new_thread")
_allocate_lock = monkey.get_original("_thread", "allocate_lock")


class ThreadResult:
    """A one-shot result handed from one native thread to another."""

    def __init__(self):
        self._lock = _allocate_lock()
        self._lock.acquire()
        self._value: Any = None
        self._error: BaseException | None = None

    def set(self, value: Any = None, error: BaseException | None = None) -> None:
        self._value, self._error = value, error
        self._lock.release()

    def get(self, timeout: float | None = None) -> Any:
        if not self._lock.acquire(timeout=-1 if timeout is None else timeout):
            raise TimeoutError(f"no result within {timeout}s")
        self._lock.release()
        if self._error is not None:
            raise self._error
        return self._value


class ThreadQueue:
    """Items handed from any native thread to one consumer thread, which may wait for them with a timeout.

    Not ``_queue.SimpleQueue``: on CPython 3.11 its ``get(timeout=...)`` can block forever when a signal handler
    runs during the wait close to the deadline (it then waits with a negative time left, which means no limit), and a
    consumer's poll loop under a SIGTERM handler hung there. A native lock's ``acquire(timeout=...)`` handles signals
    correctly, so waiting is done on one: a doorbell rung by every put.
    """

    def __init__(self):
        self._items: collections.deque = collections.deque()  # append and popleft are atomic
        self._bell = _allocate_lock()
        self._bell.acquire()

    def put(self, item: Any) -> None:
        self._items.append(item)
        with contextlib.suppress(RuntimeError):  # already rung, not yet answered
            self._bell.release()

    def get(self, timeout: float = 0.0) -> Any:
        """The oldest item; waits up to ``timeout`` seconds for one, then raises ``queue.Empty``."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self._items.popleft()
            except IndexError:
                pass
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self._bell.acquire(timeout=remaining):
                raise queue.Empty


class HubThread:
    """A native thread running its own gevent hub; :meth:`call` runs a function there in a greenlet."""

    def __init__(self, name: str):
        self.name = name
        self.hub: gevent.hub.Hub | None = None
        self._stop: gevent.event.Event | None = None
        self._started = ThreadResult()
        self._finished = ThreadResult()

    def start(self) -> "HubThread":
        _start_new_thread(self._main, ())
        self._started.get(timeout=10)
        return self

    def _main(self) -> None:
        self.hub = gevent.get_hub()
        self._stop = gevent.event.Event()
        # Work arrives only from other threads; an active watcher keeps the idle loop from LoopExit.
        keepalive = self.hub.loop.async_()
        keepalive.start(lambda: None)
        self._started.set()
        try:
            self._stop.wait()
        finally:
            keepalive.close()
            self.hub.destroy(destroy_loop=True)
            self._finished.set()

    def submit(self, fn: Callable, *args: Any) -> ThreadResult:
        """Run ``fn(*args)`` in a new greenlet on this thread's hub; safe from any thread."""
        result = ThreadResult()

        def run():
            try:
                result.set(fn(*args))
            except BaseException as error:  # handed to the waiting caller, who re-raises it
                result.set(error=error)

        self.hub.loop.run_callback_threadsafe(gevent.spawn, run)
        return result

    def call(self, fn: Callable, *args: Any, timeout: float | None = None) -> Any:
        return self.submit(fn, *args).get(timeout)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the hub after its current callbacks; greenlets still waiting there are abandoned."""
        if self.hub is None:
            return
        self.hub.loop.run_callback_threadsafe(self._stop.set)
        try:
            self._finished.get(timeout)
        except TimeoutError:
            log.warning("hub thread %s did not stop within %.1fs", self.name, timeout)


class _WakeSocket:
    """The write end of the socket pair that wakes a kazoo connection, one byte per request; senders take turns.

    The pair buffers a few hundred bytes. With more requests issued at once (a JoinGroup each of a thousand members
    reads ZooKeeper), gevent lets only the first sender wait for room: the others fail, kazoo answers them
    ConnectionClosedError (kazoo issue 486), yet leaves their requests queued without the bytes that would send them,
    so every later request of the session waits behind them for ever. Taking turns makes each sender wait for room
    instead (the connection takes a byte per request it sends)."""

    def __init__(self, sock):
        self._sock = sock
        self._turn = gevent.lock.Semaphore()

    def send(self, data: bytes) -> int:
        with self._turn:
            return self._sock.send(data)

    def close(self) -> None:
        self._sock.close()


class _GeventHandler(SequentialGeventHandler):
    def create_socket_pair(self):
        read_end, write_end = super().create_socket_pair()
        return read_end, _WakeSocket(write_end)


def make_kazoo_client(connect: str, session_timeout_ms: int, security: ZooKeeperSecurity = UNSECURED) -> KazooClient:
    """A gevent kazoo client that reconnects forever; ``connect`` may end in a chroot; ``security`` gives its
    credentials and ACLs (:mod:`zkcoord.zk.acl`).

    Create it in the thread whose hub it will use.
    """
    handler = _GeventHandler()
    return kazoo_client(
        connect,
        security,
        timeout=session_timeout_ms / 1000.0,
        handler=handler,
        connection_retry=KazooRetry(max_tries=-1, delay=0.05, max_delay=1.0, sleep_func=handler.sleep_func),
    )
