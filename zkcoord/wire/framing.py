"""Frames of the wire protocol (wire-protocol.md §1, §2): length prefix, one msgpack map, a valid header.

Sans-IO in the style of h11: bytes go in through :meth:`FrameDecoder.feed`, request maps come out of
:meth:`FrameDecoder.next_message`. Whatever bytes it is fed, the decoder either returns maps whose header is
valid or raises :class:`FrameError`, after which it is dead: the connection answers :func:`error_frame` and
closes. What a request's body must hold is zkcoord.wire.requests' business, not this module's.
:class:`ResponseDecoder` is the client's side of the same: bounded response frames with a correlation id.

Pure: imports only msgpack and zkcoord.errors; no IO, no gevent.
"""

import struct

import msgpack

from zkcoord.errors import ErrorCode, ZkcoordError

DEFAULT_MAX_REQUEST_BYTES = 1048576
# A response lists what the coordinator holds (every group, a big group's members): far more than a request.
DEFAULT_MAX_RESPONSE_BYTES = 64 * 1048576

_LENGTH = struct.Struct(">I")
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
# Malformed msgpack, trailing bytes (ExtraData), too deep nesting (StackError), invalid UTF-8, map keys that
# cannot be dict keys (a map inside a key), and limits exceeded.
_UNPACK_ERRORS = (msgpack.UnpackException, ValueError, TypeError, OverflowError, RecursionError)
# Every map of wire-protocol.md §3 takes more bytes than this on the wire, while a tiny map costs 1 to 3 bytes
# there and 64 to 232 in memory: the cap keeps a hostile frame's decoded size within a small multiple of its own.
_MIN_BYTES_PER_MAP = 8


class FrameError(ZkcoordError):
    """A frame that breaks wire-protocol.md §1 or §2's header rules; the connection must answer and close.

    ``correlation_id`` is the request's when it could be read as an int32, else -1.
    """

    def __init__(self, message: str, correlation_id: int = -1):
        super().__init__(message)
        self.message = message
        self.correlation_id = correlation_id


def _describe(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _is_int32(value: object) -> bool:
    return type(value) is int and _INT32_MIN <= value <= _INT32_MAX


class _TooManyMaps(Exception):
    pass


def _unpack(body: bytes, use_list: bool) -> object:
    maps_left = max(1, len(body) // _MIN_BYTES_PER_MAP)

    def count_map(value: dict) -> dict:
        nonlocal maps_left
        maps_left -= 1
        if maps_left < 0:
            raise _TooManyMaps
        return value

    try:
        # Requests' arrays come back as tuples: an empty tuple is a shared singleton, so a frame of empty arrays
        # costs nothing. Non-str map keys are allowed because unknown keys are to be ignored, not refused.
        return msgpack.unpackb(
            body,
            raw=False,
            use_list=use_list,
            strict_map_key=False,
            object_hook=count_map,
            max_str_len=len(body),
            max_bin_len=len(body),
            max_array_len=len(body),
            max_map_len=len(body),
            max_ext_len=len(body),
        )
    except _TooManyMaps:
        raise FrameError(
            f"frame holds more than {len(body) // _MIN_BYTES_PER_MAP} maps for its {len(body)} bytes"
        ) from None
    except _UNPACK_ERRORS as error:
        detail = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
        raise FrameError(f"frame is not valid MessagePack ({detail})") from error


def _checked_header(message: object) -> dict:
    if type(message) is not dict:
        raise FrameError(f"frame is not a MessagePack map, got {_describe(message)}")
    correlation_id = message.get("correlation_id")
    readable_id = correlation_id if _is_int32(correlation_id) else -1
    for field, expected, valid in (
        ("api", "a str", lambda value: type(value) is str),
        ("api_version", "an int", lambda value: type(value) is int),
        ("correlation_id", "an int32", _is_int32),
    ):
        if field not in message or message[field] is None:
            raise FrameError(f"header field {field!r} is missing", readable_id)
        if not valid(message[field]):
            raise FrameError(f"header field {field!r} must be {expected}, got {_describe(message[field])}", readable_id)
    return message


def _checked_response_header(message: object) -> dict:
    if type(message) is not dict:
        raise FrameError(f"frame is not a MessagePack map, got {_describe(message)}")
    if not _is_int32(message.get("correlation_id")):
        raise FrameError(
            f"header field 'correlation_id' must be an int32, got {_describe(message.get('correlation_id'))}"
        )
    return message


class FrameDecoder:
    """Turns the bytes of one connection into request maps with a valid header, one frame at a time.

    The length prefix is checked as soon as its 4 bytes are in, before the body is waited for or decoded.
    """

    _limit_name = "max.request.bytes"
    _use_list = False
    _checked = staticmethod(_checked_header)

    def __init__(self, max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES):
        if type(max_request_bytes) is not int or not 1 <= max_request_bytes <= 2**32 - 1:
            raise ValueError(f"max_request_bytes must be an int in [1, 2**32 - 1], got {max_request_bytes!r}")
        self.max_request_bytes = max_request_bytes
        self._buffer = bytearray()
        self._error: FrameError | None = None

    @property
    def error(self) -> FrameError | None:
        """The error that killed this decoder, or None while it is alive."""
        return self._error

    @property
    def buffered_bytes(self) -> int:
        """Bytes fed but not yet returned as a message."""
        return len(self._buffer)

    def feed(self, data: bytes) -> None:
        """Append received bytes; a dead decoder drops them (the connection is closing anyway)."""
        if self._error is None:
            self._buffer += data

    def next_message(self) -> dict | None:
        """The next request map, or None until more bytes are fed. Raises FrameError, now and on every later call."""
        if self._error is not None:
            raise self._error
        try:
            return self._next_message()
        except FrameError as error:
            self._error = error
            self._buffer = bytearray()
            raise

    def _next_message(self) -> dict | None:
        if len(self._buffer) < _LENGTH.size:
            return None
        (length,) = _LENGTH.unpack_from(self._buffer)
        if length == 0:
            raise FrameError("frame length 0 is not allowed")
        if length > self.max_request_bytes:
            raise FrameError(f"frame length {length} exceeds {self._limit_name} {self.max_request_bytes}")
        end = _LENGTH.size + length
        if len(self._buffer) < end:
            return None
        body = bytes(self._buffer[_LENGTH.size : end])
        del self._buffer[:end]
        return self._checked(_unpack(body, self._use_list))


class ResponseDecoder(FrameDecoder):
    """A client's decoder: response maps (arrays as lists) with an int32 correlation id, frames bounded too."""

    _limit_name = "the response limit"
    _use_list = True
    _checked = staticmethod(_checked_response_header)

    def __init__(self, max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES):
        super().__init__(max_response_bytes)


def encode_frame(message: dict) -> bytes:
    """4-byte big-endian length, then ``message`` as msgpack (bytes as bin, str as str).

    Raises msgpack's TypeError/ValueError/OverflowError for values msgpack cannot carry.
    """
    body = msgpack.packb(message, use_bin_type=True)
    return _LENGTH.pack(len(body)) + body


def error_frame(error: FrameError) -> dict:
    """The response sent for a bad frame, just before the connection is closed (wire-protocol.md §1)."""
    return {
        "correlation_id": error.correlation_id,
        "error_code": int(ErrorCode.INVALID_REQUEST),
        "error_message": error.message,
    }
