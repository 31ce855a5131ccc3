"""Blocking calls to coordinator nodes, for tools and the legacy member: one connection, and a channel to a
group's coordinator (0.8.2's ``channelToOffsetManager``, Kafka's admin-client lookups).

:class:`WireConnection` is one socket whose protocol side is a :class:`~zkcoord.wire.connection.ClientConnection`
(responses bounded, checked against the requests' order). :class:`CoordinatorChannel` sends FindCoordinator to
any known node, then the request to the group's coordinator, again on 14/15/16 (and on an unreachable node)
with doubling backoff until a deadline. Connections are kept per address and dropped when they fail, so the
next call looks the coordinator up again.

IO: blocking sockets (cooperative under gevent when ``create_connection`` is gevent's). The sleep and clock
are parameters, so a gevent hub can pass its own. Must not import gevent, kazoo or the server.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable

from zkcoord.errors import ErrorCode, ZkcoordError, error_for, error_name
from zkcoord.model import Address
from zkcoord.wire.connection import ClientConnection, ProtocolError

log = logging.getLogger(__name__)

RETRIABLE = frozenset(
    {ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR}
)
INITIAL_BACKOFF_S = 0.05
MAX_BACKOFF_S = 1.0
PIPELINE_WINDOW = 64  # requests in flight on one connection
RECEIVE_BYTES = 65536


class WireClientError(ZkcoordError):
    """The coordinator closed the connection, broke the protocol or did not answer in time."""


class WireConnection:
    """One connection; :meth:`call` sends a request and waits for its response."""

    def __init__(
        self,
        host: str,
        port: int,
        client_id: str = "zkcoord",
        timeout: float = 10.0,
        create_connection=socket.create_connection,
    ):
        self.address = (host, port)
        self.client_id = client_id
        self._socket = create_connection(self.address, timeout=timeout)
        self._socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._protocol = ClientConnection(client_id)

    def send(self, api: str, **fields) -> None:
        """Send a request without waiting; :meth:`receive` gives the answers in the order they were sent."""
        self._socket.sendall(self._protocol.request(api, fields))

    def receive(self) -> dict:
        """The response to the oldest request not yet received."""
        while True:
            try:
                answered = self._protocol.next_response()
            except ProtocolError as error:
                raise WireClientError(f"{self.address[0]}:{self.address[1]}: {error}") from None
            if answered is not None:
                return answered[1]
            data = self._socket.recv(RECEIVE_BYTES)
            if not data:
                raise WireClientError(f"{self.address[0]}:{self.address[1]} closed the connection")
            self._protocol.feed(data)

    def call(self, api: str, **fields) -> dict:
        self.send(api, **fields)
        return self.receive()

    def close(self) -> None:
        self._socket.close()

    def __enter__(self) -> WireConnection:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


class Unreachable(Exception):
    """A node did not answer (refused, reset, timed out): try another or again later."""


def top_level_error(response: dict) -> int:
    return response.get("error_code", 0)


class CoordinatorChannel:
    """Calls to coordinator nodes: any node, or the coordinator of a group.

    ``addresses()`` gives the nodes to ask (bootstrap list or ZooKeeper discovery); ``unavailable(text)``
    and ``error_for(code, message)`` make the caller's exceptions for "nobody answered in time" and for a
    FindCoordinator error that is not retriable.
    """

    def __init__(
        self,
        addresses: Callable[[], list[Address]],
        client_id: str,
        request_timeout_ms: int,
        unavailable: Callable[[str], Exception] = ZkcoordError,
        error_for: Callable[[int, str | None], Exception] = error_for,
        sleep: Callable[[float], None] = time.sleep,
        create_connection=socket.create_connection,
        initial_backoff_s: float = INITIAL_BACKOFF_S,
        max_backoff_s: float = MAX_BACKOFF_S,
    ):
        self.addresses = addresses
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self._unavailable = unavailable
        self._error_for = error_for
        self._sleep = sleep
        self._create_connection = create_connection
        self.initial_backoff_s = initial_backoff_s
        self.max_backoff_s = max_backoff_s
        self._connections: dict[Address, WireConnection] = {}

    def clone(self) -> CoordinatorChannel:
        """A channel with the same settings and connections of its own: a channel is for one thread at a time."""
        return CoordinatorChannel(
            self.addresses,
            self.client_id,
            self.request_timeout_ms,
            self._unavailable,
            self._error_for,
            self._sleep,
            self._create_connection,
            self.initial_backoff_s,
            self.max_backoff_s,
        )

    def close(self) -> None:
        for connection in self._connections.values():
            connection.close()
        self._connections.clear()

    def deadline(self) -> float:
        return time.monotonic() + self.request_timeout_ms / 1000

    def backoff(self, previous: float | None = None) -> float:
        """The first backoff, or the one after ``previous`` (doubled up to the maximum)."""
        return self.initial_backoff_s if previous is None else min(2 * previous, self.max_backoff_s)

    def sleep(self, seconds: float) -> None:
        self._sleep(seconds)

    def call(self, address: Address, api: str, **fields) -> dict:
        """One request to one node; :class:`Unreachable` (and the connection dropped) if it does not answer."""
        try:
            connection = self._connections.get(address)
            if connection is None:
                connection = WireConnection(
                    *address,
                    client_id=self.client_id,
                    timeout=self.request_timeout_ms / 1000,
                    create_connection=self._create_connection,
                )
                self._connections[address] = connection
            return connection.call(api, **fields)
        except (OSError, WireClientError) as error:
            self.drop(address)
            raise Unreachable(f"{api} to {address[0]}:{address[1]}: {type(error).__name__}: {error}") from None

    def pipeline(self, address: Address, requests: list[tuple[str, dict]]) -> list[dict]:
        """Send requests to one node ahead of their answers (which come back in order), a window at a time
        so that neither side's socket buffers fill up while the other is not reading."""
        responses = []
        try:
            connection = self._connections.get(address)
            if connection is None:
                self.call(address, "ApiVersions")
                connection = self._connections[address]
            for start in range(0, len(requests), PIPELINE_WINDOW):
                window = requests[start : start + PIPELINE_WINDOW]
                for api, fields in window:
                    connection.send(api, **fields)
                responses += [connection.receive() for _ in window]
        except (OSError, WireClientError) as error:
            self.drop(address)
            raise Unreachable(f"pipeline to {address[0]}:{address[1]}: {type(error).__name__}: {error}") from None
        return responses

    def drop(self, address: Address) -> None:
        stale = self._connections.pop(address, None)
        if stale is not None:
            stale.close()

    def call_any_node(self, api: str, **fields) -> dict:
        """``api`` on the first node that answers, trying them all again with backoff until the deadline."""
        deadline = self.deadline()
        backoff = self.backoff()
        problems: list[str] = []
        while True:
            for address in self.addresses():
                try:
                    return self.call(address, api, **fields)
                except Unreachable as error:
                    problems.append(str(error))
            if time.monotonic() + backoff > deadline:
                detail = problems[-1] if problems else "no coordinator node is registered"
                raise self._unavailable(f"no coordinator node answered {api}: {detail}")
            self._sleep(backoff)
            backoff = self.backoff(backoff)

    def find_coordinator(self, group_id: str, deadline: float) -> tuple[int, Address]:
        """``(node_id, (host, port))`` of the group's coordinator, asking each known node in turn."""
        backoff = self.backoff()
        last = "no coordinator node is registered"
        while True:
            for address in self.addresses():
                try:
                    response = self.call(address, "FindCoordinator", key=group_id, key_type=0)
                except Unreachable as error:
                    last = str(error)
                    continue
                code = top_level_error(response)
                if code == 0:
                    return response["node_id"], (response["host"], response["port"])
                if code not in RETRIABLE:
                    raise self._error_for(code, response.get("error_message"))
                last = f"FindCoordinator at {address[0]}:{address[1]}: {error_name(code)}"
            if time.monotonic() + backoff > deadline:
                raise self._unavailable(
                    f"The coordinator of group '{group_id}' is not available after {self.request_timeout_ms} ms: {last}"
                )
            self._sleep(backoff)
            backoff = self.backoff(backoff)

    def call_coordinator(
        self,
        key: str,
        api: str,
        retriable: Callable[[dict], bool] = lambda r: top_level_error(r) in RETRIABLE,
        **fields,
    ) -> tuple[dict, tuple[int, Address]]:
        """Send to the coordinator of group ``key`` until the answer is not retriable.

        Returns ``(response, (node_id, address))``.
        """
        deadline = self.deadline()
        backoff = self.backoff()
        while True:
            node = self.find_coordinator(key, deadline)
            try:
                response = self.call(node[1], api, **fields)
            except Unreachable as error:
                last = str(error)
            else:
                if not retriable(response):
                    return response, node
                last = f"{api} at node {node[0]} ({node[1][0]}:{node[1][1]}): {response}"
            if time.monotonic() + backoff > deadline:
                raise self._unavailable(
                    f"{api} for group '{key}' was not answered by its coordinator within "
                    f"{self.request_timeout_ms} ms: {last}"
                )
            self._sleep(backoff)
            backoff = self.backoff(backoff)
