"""A small blocking client of the wire protocol, for tools (``coordinator status``) and benchmarks.

IO: plain sockets; under gevent's monkey-patching they cooperate like any other socket.
"""

from __future__ import annotations

import itertools
import socket

import msgpack

from zkcoord.errors import ZkcoordError
from zkcoord.wire.framing import encode_frame


class WireClientError(ZkcoordError):
    """The coordinator closed the connection or did not answer in time."""


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
        self._buffer = bytearray()
        self._correlation = itertools.count(1)

    def send(self, api: str, **fields) -> int:
        correlation_id = next(self._correlation)
        request = {"api": api, "api_version": 0, "correlation_id": correlation_id, "client_id": self.client_id}
        self._socket.sendall(encode_frame({**request, **fields}))
        return correlation_id

    def receive(self) -> dict:
        """The next response frame."""
        while True:
            if len(self._buffer) >= 4:
                length = int.from_bytes(self._buffer[:4], "big")
                if len(self._buffer) >= 4 + length:
                    body = bytes(self._buffer[4 : 4 + length])
                    del self._buffer[: 4 + length]
                    return msgpack.unpackb(body, raw=False)
            data = self._socket.recv(65536)
            if not data:
                raise WireClientError(f"{self.address[0]}:{self.address[1]} closed the connection")
            self._buffer += data

    def call(self, api: str, **fields) -> dict:
        correlation_id = self.send(api, **fields)
        response = self.receive()
        if response.get("correlation_id") != correlation_id:
            raise WireClientError(f"expected correlation id {correlation_id}, got {response.get('correlation_id')}")
        return response

    def close(self) -> None:
        self._socket.close()

    def __enter__(self) -> WireConnection:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
