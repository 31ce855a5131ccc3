"""One connection of the wire protocol, for either role, without IO (h11's shape): bytes in, messages and
bytes to send out. Every socket of zkcoord reads through one of these, so every read is bounded.

:class:`ServerConnection` turns received bytes into request maps with a valid header (wire-protocol.md §1, §2)
and answers them in the order they were read, each response frame led by its request's correlation id; a bad
frame kills it, after :meth:`~ServerConnection.error` gave the frame to send before closing.
:class:`ClientConnection` numbers the requests it frames, and hands back each response with the tag its
request was sent with, checking that responses come in request order (§1); a bad or unexpected frame raises
:class:`ProtocolError` and kills it.

Pure: imports only zkcoord.wire.framing and zkcoord.errors; no IO, no gevent.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable
from typing import Any

from zkcoord.errors import ZkcoordError
from zkcoord.wire.framing import (
    DEFAULT_MAX_REQUEST_BYTES,
    DEFAULT_MAX_RESPONSE_BYTES,
    FrameDecoder,
    FrameError,
    ResponseDecoder,
    encode_frame,
    error_frame,
)

_INT32_MAX = 2**31 - 1


class ProtocolError(ZkcoordError):
    """The peer broke the wire protocol (a bad frame, an answer nobody asked for); the connection is dead."""


class ServerConnection:
    """The server's side: requests in, their responses out, in the order the requests came.

    It also keeps the connection's read deadline (times in ms from any monotonic clock): with nothing of a
    request read, ``max_idle_ms`` after the last request or answer (or the start); once a frame's first byte
    is in, ``read_timeout_ms`` after it (or after the answer the server was busy with), however slowly the
    rest trickles in. None disables either.
    """

    def __init__(
        self,
        max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
        max_idle_ms: float | None = None,
        read_timeout_ms: float | None = None,
        now_ms: float = 0.0,
    ):
        self._decoder = FrameDecoder(max_request_bytes)
        self._unanswered: deque[int] = deque()
        self._max_idle_ms = max_idle_ms
        self._read_timeout_ms = read_timeout_ms
        self._idle_since_ms = now_ms
        self._frame_started_ms: float | None = None

    def feed(self, data: bytes, now_ms: float = 0.0) -> None:
        if data and self._frame_started_ms is None:
            self._frame_started_ms = now_ms
        self._decoder.feed(data)

    def next_request(self, now_ms: float = 0.0) -> dict | None:
        """The next request map (its header valid), or None until more bytes come. Raises FrameError."""
        message = self._decoder.next_message()
        if message is not None:
            self._unanswered.append(message["correlation_id"])
            self._idle_since_ms = now_ms
            # Bytes after this frame were already fed: the next frame has started.
            self._frame_started_ms = now_ms if self._decoder.buffered_bytes else None
        return message

    def read_deadline(self) -> tuple[float, str] | None:
        """``(deadline in ms, "idle" or "slow request")`` by which more must be read, or None for no bound."""
        if self._frame_started_ms is not None:
            if self._read_timeout_ms is None:
                return None
            return self._frame_started_ms + self._read_timeout_ms, "slow request"
        if self._max_idle_ms is None:
            return None
        return self._idle_since_ms + self._max_idle_ms, "idle"

    def respond(self, correlation_id: int, fields: dict, now_ms: float = 0.0) -> bytes:
        """The frame answering the oldest unanswered request; ``fields`` must be what msgpack can carry."""
        expected = self._unanswered[0] if self._unanswered else None
        if correlation_id != expected:
            raise RuntimeError(
                f"responses go in request order: expected correlation id {expected}, got {correlation_id}"
            )
        message = {"correlation_id": correlation_id}
        message.update((key, value) for key, value in fields.items() if key != "correlation_id")
        frame = encode_frame(message)
        self._unanswered.popleft()
        self._idle_since_ms = now_ms
        if self._frame_started_ms is not None:
            # The server did not read while the request was in hand (a JoinGroup may be parked for minutes):
            # the next frame's bytes were not late meanwhile.
            self._frame_started_ms = now_ms
        return frame

    def error(self, error: FrameError) -> bytes:
        """The frame answering a bad frame (wire-protocol.md §1): send it, then close."""
        return encode_frame(error_frame(error))

    @property
    def unanswered(self) -> int:
        return len(self._unanswered)


class ClientConnection:
    """The client's side: requests framed with correlation ids, responses matched to them in order."""

    def __init__(self, client_id: str, max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES):
        self.client_id = client_id
        self._decoder = ResponseDecoder(max_response_bytes)
        self._next_correlation_id = 1
        self._pending: deque[tuple[int, Any]] = deque()  # (correlation id, tag), oldest first
        self._error: ProtocolError | None = None

    def request(self, api: str, fields: dict, tag: Hashable | Any = None, api_version: int = 0) -> bytes:
        """The frame of one request; its response will come back from :meth:`next_response` with ``tag``."""
        correlation_id = self._next_correlation_id
        self._next_correlation_id = correlation_id + 1 if correlation_id < _INT32_MAX else 0  # an int32 on the wire
        header = {"api": api, "api_version": api_version, "correlation_id": correlation_id, "client_id": self.client_id}
        frame = encode_frame({**header, **fields})
        self._pending.append((correlation_id, tag))
        return frame

    def feed(self, data: bytes) -> None:
        self._decoder.feed(data)

    def next_response(self) -> tuple[Any, dict] | None:
        """``(tag, response map)`` of the oldest request, or None until more bytes come. Raises ProtocolError."""
        if self._error is not None:
            raise self._error
        try:
            response = self._decoder.next_message()
        except FrameError as error:
            raise self._fail(f"bad response frame: {error}") from None
        if response is None:
            return None
        if not self._pending:
            raise self._fail(f"a response nobody asked for (correlation id {response['correlation_id']})")
        correlation_id, tag = self._pending[0]
        if response["correlation_id"] != correlation_id:
            raise self._fail(f"expected correlation id {correlation_id}, got {response['correlation_id']}")
        self._pending.popleft()
        return tag, response

    def abandon(self) -> list[Any]:
        """The tags of the requests still waiting, oldest first, now never to be answered (the connection closes)."""
        tags = [tag for _, tag in self._pending]
        self._pending.clear()
        return tags

    @property
    def pending(self) -> int:
        return len(self._pending)

    def _fail(self, reason: str) -> ProtocolError:
        self._error = ProtocolError(reason)
        return self._error
