"""A raw-socket client of the wire protocol (wire-protocol.md §1, §2), for tests.

Imports nothing from zkcoord on purpose: it builds frames from the document alone, so a test passing with it
shows that the server follows the document, not merely that it agrees with its own codec.

Sockets: the stdlib ``socket`` by default (a server in another process or thread). When the server runs on the
test's own gevent hub (started in the test's thread, without monkey-patching), pass
``socket_module=gevent.socket``: a plain blocking recv would stop that hub, and with it the server it waits for.
"""

import itertools
import socket
import struct
import time

import msgpack

_LENGTH = struct.Struct(">I")


def frame_bytes(obj: object) -> bytes:
    """Any msgpack-able object as one frame: 4-byte big-endian length, then the msgpack bytes."""
    body = msgpack.packb(obj, use_bin_type=True)
    return _LENGTH.pack(len(body)) + body


class WireClient:
    """One connection to a coordinator. ``send`` fills the header (api_version 0, a fresh correlation_id,
    client_id) unless the fields override it; ``receive`` returns the next response map, in arrival order."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        client_id: str | None = "wire-test-client",
        timeout: float = 5.0,
        socket_module=socket,
    ):
        self.client_id = client_id
        self._sock = socket_module.create_connection((host, port), timeout=timeout)
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._buffer = bytearray()
        self._correlation_ids = itertools.count(1)
        self._closed_by_peer = False

    def __enter__(self) -> "WireClient":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def send(self, api: str, **fields) -> int:
        """Send one request; returns its correlation_id. ``fields`` may override api_version, correlation_id,
        client_id; a field given as None is sent as nil, a field not given is absent."""
        correlation_id = fields.pop("correlation_id") if "correlation_id" in fields else next(self._correlation_ids)
        message = {"api": api, "api_version": 0, "correlation_id": correlation_id, "client_id": self.client_id}
        message.update(fields)
        self.send_raw(frame_bytes(message))
        return correlation_id

    def send_raw(self, data: bytes) -> None:
        self._sock.sendall(data)

    def receive(self, timeout: float = 5.0) -> dict:
        """The next response map. TimeoutError if none is complete in time; ConnectionError if the peer closed."""
        deadline = time.monotonic() + timeout
        while True:
            if len(self._buffer) >= _LENGTH.size:
                (length,) = _LENGTH.unpack_from(self._buffer)
                end = _LENGTH.size + length
                if len(self._buffer) >= end:
                    body = bytes(self._buffer[_LENGTH.size : end])
                    del self._buffer[:end]
                    return msgpack.unpackb(body, raw=False, strict_map_key=False)
            if self._closed_by_peer:
                raise ConnectionError(f"connection closed by peer with {len(self._buffer)} bytes of a frame unread")
            if not self._read(deadline):
                raise TimeoutError(f"no complete response within {timeout}s")

    def call(self, api: str, *, receive_timeout: float = 5.0, **fields) -> dict:
        """Send one request and return its response, checking that the correlation ids match."""
        correlation_id = self.send(api, **fields)
        response = self.receive(receive_timeout)
        if response.get("correlation_id") != correlation_id:
            raise AssertionError(f"sent correlation_id {correlation_id}, got a response for {response!r}")
        return response

    def closed_by_peer(self, timeout: float = 5.0) -> bool:
        """True once the peer closed the connection (within ``timeout``); bytes read meanwhile stay receivable."""
        deadline = time.monotonic() + timeout
        while not self._closed_by_peer:
            if not self._read(deadline):
                return False
        return True

    def half_close(self) -> None:
        """Stop sending (TCP FIN) but keep reading: the server answers what it has read, then closes."""
        self._sock.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self._sock.close()

    def _read(self, deadline: float) -> bool:
        """Read once into the buffer; False if nothing came before ``deadline``."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        self._sock.settimeout(remaining)
        try:
            data = self._sock.recv(65536)
        except TimeoutError:
            return False
        except OSError:  # reset or aborted: closed as far as the caller is concerned
            data = b""
        if data:
            self._buffer += data
        else:
            self._closed_by_peer = True
        return True
