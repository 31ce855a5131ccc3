"""The consumer's background worker: every coordinator request, on a gevent hub of its own in a native thread.

A greenlet cannot preempt CPU-bound user code, so the worker does not share the caller's hub: it runs in a
:class:`~zkcoord.zk.session.HubThread`, and the GIL's switch interval keeps its heartbeats going while the caller
computes. It drives the pure :class:`~zkcoord.membership.GroupMember`: commands from the poll side arrive on one
queue (run in the worker's greenlet, in order), and events for the poll side leave through ``on_event`` (the
second queue, owned by the consumer). Responses on a connection come back in request order (wire-protocol.md §1).

IO: gevent sockets (with TLS and SASL as the config's security properties say), kazoo (only to discover nodes
from ZooKeeper). Everything here runs on the worker's hub.
"""

import collections
import logging
from collections.abc import Callable
from typing import Any

import gevent
import gevent.event
from gevent import socket

from zkcoord.client.config import ConsumerConfig
from zkcoord.config import parse_bootstrap_servers
from zkcoord.errors import SaslAuthenticationFailedError, ZkcoordError
from zkcoord.membership import Completed, GroupMember, Send
from zkcoord.membership.effects import ANY_NODE
from zkcoord.model import Address
from zkcoord.wire.codec import read_response
from zkcoord.wire.connection import ClientConnection, ProtocolError
from zkcoord.wire.messages import Response
from zkcoord.zk.nodes import discover_nodes
from zkcoord.zk.session import HubThread, ThreadResult, make_kazoo_client

log = logging.getLogger(__name__)

RECEIVE_BYTES = 65536


class NoNodesError(ZkcoordError):
    """Neither bootstrap.servers nor zookeeper.connect named a reachable coordinator node."""


class _Connection:
    """One connection to one node; requests are answered in order, each with its tag."""

    def __init__(self, worker: "Worker", resolve: Callable[[], Address], name: str):
        self._worker = worker
        self._resolve = resolve
        self.name = name
        self.address: Address | None = None
        self._socket: socket.socket | None = None
        self._outbox: list[bytes] = []
        self._protocol = ClientConnection(worker.client_id)
        self._deadlines: collections.deque[int] = collections.deque()  # of the requests waiting, oldest first
        self._connecting: gevent.Greenlet | None = None
        self._reader: gevent.Greenlet | None = None
        self.closed = False

    def send(self, api: str, fields: dict, tag: tuple, timeout_ms: int, now_ms: int) -> None:
        frame = self._protocol.request(api, fields, (api, tag))
        self._deadlines.append(now_ms + timeout_ms)
        if self._socket is None:
            self._outbox.append(frame)
            if self._connecting is None:
                self._connecting = gevent.spawn(self._connect)
            return
        try:
            self._socket.sendall(frame)
        except OSError as error:
            self.close(f"send failed: {error}")

    def overdue(self, now_ms: int) -> bool:
        return bool(self._deadlines) and self._deadlines[0] < now_ms

    def next_deadline_ms(self) -> int | None:
        return self._deadlines[0] if self._deadlines else None

    def _connect(self) -> None:
        try:
            self.address = self._resolve()
            sock = self._worker.connect(self.address, timeout=self._worker.config.request_timeout_ms / 1000)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.settimeout(None)
            for frame in self._outbox:
                sock.sendall(frame)
        except SaslAuthenticationFailedError as error:  # no retry mends credentials: the consumer stops
            self._worker.authentication_failed(error)
            self.close(f"authentication failed: {error}")
            return
        except (OSError, ZkcoordError) as error:
            self.close(f"cannot connect: {error}")
            return
        self._outbox.clear()
        self._socket = sock
        self._reader = gevent.spawn(self._read)

    def _read(self) -> None:
        try:
            while True:
                data = self._socket.recv(RECEIVE_BYTES)
                if not data:
                    self.close("closed by the node")
                    return
                self._protocol.feed(data)
                while (answered := self._protocol.next_response()) is not None:
                    (api, tag), response = answered
                    self._deadlines.popleft()
                    self._worker.answer(tag, read_response(api, response))
        except OSError as error:
            self.close(f"read failed: {error}")
        except ProtocolError as error:
            self.close(str(error))

    def close(self, reason: str) -> None:
        if self.closed:
            return
        self.closed = True
        if self._socket is not None:
            self._socket.close()
        if self._reader is not None and self._reader is not gevent.getcurrent():
            self._reader.kill(block=False)
        log.debug("connection %s %s closed: %s", self.name, self.address, reason)
        pending = self._protocol.abandon()
        self._deadlines.clear()
        self._worker.connection_closed(self, reason)
        for _, tag in pending:
            self._worker.answer(tag, None)


class Worker:
    """Runs one :class:`GroupMember`; the poll side talks to it only through :meth:`submit` and ``on_event``."""

    def __init__(self, config: ConsumerConfig, member: GroupMember, clock, on_event: Callable[[Any], None]):
        self.config = config
        self.member = member
        self.client_id = config.client_id
        self._clock = clock
        self._on_event = on_event
        self._commands: collections.deque = collections.deque()
        self._hub: HubThread | None = None
        self._wake: gevent.event.Event | None = None
        self._loop: gevent.Greenlet | None = None
        self._connections: dict[str, _Connection] = {}
        # gevent's create_connection, with the TLS and SASL of the config's security properties on top
        self.connect = config.client_security.connector(socket.create_connection)
        self._nodes: list[Address] = (
            parse_bootstrap_servers(config.bootstrap_servers) if config.bootstrap_servers else []
        )
        self._node_index = 0
        self._zk = None
        self._stopped = False
        # The poll side writes the time of every poll() here; the loop hands it to the member when it runs, so a
        # poll costs no cross-thread wake-up (the member's max.poll.interval.ms deadline wakes the loop anyway).
        self.last_poll_ms: int | None = None
        self._applied_poll_ms: int | None = None
        self.completions: dict[int, Callable[[Completed], None]] = {}
        self.observers: list[Callable[[Any], None]] = []  # see every event in the worker thread (metrics, traces)

    # ---- poll side (any thread) ------------------------------------------------------------------------------

    def start(self, name: str) -> None:
        self._hub = HubThread(name).start()
        self._hub.call(self._setup)

    def submit(self, command: Callable[[GroupMember, int], None]) -> None:
        """Run ``command(member, now_ms)`` in the worker, after every command submitted before it."""
        self._hub.hub.loop.run_callback_threadsafe(self._enqueue, command)

    def wake(self) -> None:
        """Make the loop run now (e.g. to act on a new :attr:`last_poll_ms`); safe from any thread."""
        self._hub.hub.loop.run_callback_threadsafe(self._wake.set)

    def catch_up(self, timeout: float) -> None:
        """Let the member act on its clock now and return once what it decided (a loss) is on the poll side's
        queue; for the poll side, which must not hand out records meanwhile."""
        queued = ThreadResult()

        def tick(member: GroupMember, _: int) -> None:
            now = self._clock.now_ms()  # the poll side's clock reading is newer than this loop's
            member.tick(now)
            self._flush(now)
            queued.set()

        self.submit(tick)
        queued.get(timeout)

    def call(self, fn: Callable[[], Any], timeout: float = 30.0) -> Any:
        """Run ``fn()`` in the worker and return its result (for snapshots; never for network waits)."""
        return self._hub.call(fn, timeout=timeout)

    def stop(self, timeout: float = 10.0) -> None:
        if self._hub is None:
            return
        try:
            self._hub.call(self._shutdown, timeout=timeout)
        except TimeoutError:
            log.warning("consumer worker did not stop within %.1fs", timeout)
        self._hub.stop(timeout)

    # ---- worker thread ---------------------------------------------------------------------------------------

    def _setup(self) -> None:
        self._wake = gevent.event.Event()
        self._loop = gevent.spawn(self._run)

    def _enqueue(self, command) -> None:
        self._commands.append(command)
        self._wake.set()

    def _run(self) -> None:
        while not self._stopped:
            now = self._clock.now_ms()
            polled = self.last_poll_ms
            if polled is not None and polled != self._applied_poll_ms:
                self._applied_poll_ms = polled
                self.member.polled(polled)
            while self._commands:
                self._commands.popleft()(self.member, now)
            for connection in list(self._connections.values()):
                if connection.overdue(now):
                    connection.close("request timed out")
            self.member.tick(now)
            self._flush(now)
            wait_ms = self.member.next_wakeup_ms(now) - now
            deadlines = [c.next_deadline_ms() for c in self._connections.values()]
            wait_ms = min([wait_ms, *(d - now + 1 for d in deadlines if d is not None)])
            if not self._commands:
                self._wake.wait(max(wait_ms, 0) / 1000)
            self._wake.clear()

    def _flush(self, now_ms: int) -> None:
        """Send what the member queued, hand its events on; repeat while handling produced more."""
        while True:
            sends, events = self.member.take_sends(), self.member.take_events()
            if not sends and not events:
                return
            for send in sends:
                self._send(send, now_ms)
            for event in events:
                for observer in self.observers:
                    observer(event)
                if isinstance(event, Completed) and event.request_id in self.completions:
                    self.completions.pop(event.request_id)(event)
                else:
                    self._on_event(event)

    def _send(self, send: Send, now_ms: int) -> None:
        if send.target == ANY_NODE:
            connection = self._connection(ANY_NODE, self._next_node)
        else:
            coordinator = self.member.coordinator
            if coordinator is None:
                gevent.spawn(self.answer, send.tag, None)
                return
            address = (coordinator[1], coordinator[2])
            connection = self._connection(f"coordinator {address[0]}:{address[1]}", lambda: address)
        connection.send(send.api, send.fields, send.tag, send.timeout_ms, now_ms)

    def _connection(self, name: str, resolve: Callable[[], Address]) -> _Connection:
        connection = self._connections.get(name)
        if connection is None or connection.closed:
            if name != ANY_NODE:  # one coordinator connection at a time: drop the old coordinator's
                for old_name in [n for n in self._connections if n != ANY_NODE and n != name]:
                    self._connections.pop(old_name).close("coordinator moved")
            connection = self._connections[name] = _Connection(self, resolve, name)
        return connection

    def _next_node(self) -> Address:
        """A node for FindCoordinator and Metadata: the bootstrap list in turn, or ZooKeeper's live nodes."""
        if self.config.zookeeper_connect and not self.config.bootstrap_servers:
            if self._zk is None:
                self._zk = make_kazoo_client(self.config.zookeeper_connect, self.config.session_timeout_ms)
                self._zk.start(timeout=self.config.request_timeout_ms / 1000)
            self._nodes = discover_nodes(self._zk, self.config.zkcoord_root)
        if not self._nodes:
            raise NoNodesError(f"no coordinator node registered under {self.config.zkcoord_root}")
        self._node_index = (self._node_index + 1) % len(self._nodes)
        return self._nodes[self._node_index]

    def answer(self, tag: tuple, response: Response | None) -> None:
        self.member.on_response(tag, response, self._clock.now_ms())
        self._wake.set()

    def authentication_failed(self, error: SaslAuthenticationFailedError) -> None:
        log.error("credentials refused by a coordinator node client=%s error=%s", self.client_id, error)
        self.member.fail(error, self._clock.now_ms())
        self._wake.set()

    def connection_closed(self, connection: _Connection, reason: str) -> None:
        if self._connections.get(connection.name) is connection:
            del self._connections[connection.name]
        coordinator = self.member.coordinator
        if connection.name != ANY_NODE and coordinator is not None and connection.address == coordinator[1:]:
            self.member.coordinator_lost(self._clock.now_ms(), reason)
        self._wake.set()

    def _shutdown(self) -> None:
        self._stopped = True
        self._wake.set()
        for connection in list(self._connections.values()):
            connection.close("consumer closed")
        if self._zk is not None:
            self._zk.stop()
            self._zk.close()
