"""A small blocking client of the wire protocol, for tools (``coordinator status``), channels and benchmarks.

The protocol's side is a :class:`~zkcoord.wire.connection.ClientConnection`: responses are bounded and must
answer the requests in order. IO: plain sockets; under gevent's monkey-patching they cooperate like any other.
"""

from __future__ import annotations

import socket

from zkcoord.errors import ZkcoordError
from zkcoord.wire.connection import ClientConnection, ProtocolError

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
