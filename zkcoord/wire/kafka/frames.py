"""Kafka request and response frames through kio: the header that routes a request, its body, the answer.

A frame here is what follows Kafka's 4-byte size prefix. Every request header starts with api key, api version
and correlation id whatever its version, so a frame of an API or version kio does not know can still be answered
(ApiVersions' fallback) or refused; decoding anything else needs kio's schema, which also says whether the
version is flexible (request header v2 and response header v1, with tagged fields) or not.

Pure: imports only kio.
"""

from __future__ import annotations

import functools
import io
import struct
from dataclasses import dataclass

from kio.index import KioIndexError, load_request_schema, load_response_schema
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.serial import entity_reader, entity_writer
from kio.serial.readers import (
    read_compact_string_nullable,
    read_int16,
    read_int32,
    read_nullable_legacy_string,
    read_unsigned_varint,
)
from kio.serial.writers import compact_array_writer, legacy_array_writer
from kio.static.primitive import i32

from zkcoord.wire.kafka.versions import API_VERSIONS, kio_versions

_ROUTING = struct.Struct(">hhi")
SIZE = struct.Struct(">i")


class KafkaFrameError(ValueError):
    """A frame that cannot be read: the connection that sent it is closed (Kafka's broker does the same)."""


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None = None
    body_offset: int = _ROUTING.size  # where the body starts; known for versions kio knows and older ones
    known: bool = False  # whether kio has this API version's schema
    older: bool = False  # a version older than kio's oldest of a known API: its header read, its body opaque


@functools.cache
def request_schema(api_key: int, api_version: int) -> type | None:
    """kio's request class for this API version, or None when kio does not know it."""
    try:
        return load_request_schema(api_key, api_version)
    except KioIndexError:
        return None


def read_header(frame: bytes) -> RequestHeader:
    """The routing fields of any request, and its client id and body offset when kio knows the version."""
    if len(frame) < _ROUTING.size:
        raise KafkaFrameError(f"a request of {len(frame)} bytes is shorter than a request header")
    api_key, api_version, correlation_id = _ROUTING.unpack_from(frame)
    schema = request_schema(api_key, api_version)
    known_versions = kio_versions(api_key)
    older = schema is None and known_versions is not None and api_version < known_versions[0]
    if schema is None and not older:
        return RequestHeader(api_key, api_version, correlation_id)
    # Versions older than kio's (Kafka 4 dropped them) all predate flexible versions: request header v1.
    header_class = RequestHeaderV2 if schema is not None and schema.__flexible__ else RequestHeaderV1
    try:
        header, size = entity_reader(header_class)(frame, 0)
    except Exception as error:  # kio raises several kinds for truncated or malformed bytes
        raise KafkaFrameError(f"malformed request header: {error}") from None
    return RequestHeader(api_key, api_version, correlation_id, header.client_id, size, known=not older, older=older)


def read_body(header: RequestHeader, frame: bytes):
    """The request entity of ``frame``; KafkaFrameError when its bytes are not that request."""
    schema = request_schema(header.api_key, header.api_version)
    if schema is None:
        raise KafkaFrameError(f"api {header.api_key} v{header.api_version} has no schema here")
    try:
        body, size = entity_reader(schema)(frame, header.body_offset)
    except Exception as error:
        raise KafkaFrameError(f"malformed api {header.api_key} v{header.api_version} request: {error}") from None
    if header.body_offset + size != len(frame):
        raise KafkaFrameError(
            f"api {header.api_key} v{header.api_version} request has {len(frame) - header.body_offset - size} "
            "bytes after its body"
        )
    return body


@functools.cache
def response_schema(api_key: int, api_version: int) -> type:
    return load_response_schema(api_key, api_version)


def _response_header_class(api_key: int, flexible: bool) -> type:
    # ApiVersions answers with header v0 at every version: a client reads it before it knows what is flexible.
    return ResponseHeaderV1 if flexible and api_key != API_VERSIONS else ResponseHeaderV0


def _framed(header, entity) -> bytes:
    """``header`` then ``entity`` (kio entities) behind their 4-byte size."""
    buffer = io.BytesIO()
    buffer.write(b"\0\0\0\0")
    entity_writer(type(header))(buffer, header)
    entity_writer(type(entity))(buffer, entity)
    frame = buffer.getbuffer()
    SIZE.pack_into(frame, 0, len(frame) - SIZE.size)
    return bytes(frame)


def encode_response(correlation_id: int, response) -> bytes:
    """The size-prefixed frame of ``response`` (a kio response entity) answering ``correlation_id``."""
    header_class = _response_header_class(response.__api_key__, response.__flexible__)
    return _framed(header_class(correlation_id=i32(correlation_id)), response)


def encode_request(correlation_id: int, client_id: str | None, request) -> bytes:
    """The size-prefixed frame of ``request`` (a kio request entity): what a client sends (tests, the gateway's
    own upstream requests)."""
    header_class = RequestHeaderV2 if request.__flexible__ else RequestHeaderV1
    header = header_class(
        request_api_key=request.__api_key__,
        request_api_version=request.__version__,
        correlation_id=i32(correlation_id),
        client_id=client_id,
    )
    return _framed(header, request)


def read_response(api_key: int, api_version: int, frame: bytes):
    """``(correlation_id, entity)`` of a response frame to a request of this API version."""
    schema = response_schema(api_key, api_version)
    header_class = _response_header_class(api_key, schema.__flexible__)
    try:
        header, offset = entity_reader(header_class)(frame, 0)
        body, _ = entity_reader(schema)(frame, offset)
    except Exception as error:
        raise KafkaFrameError(f"malformed api {api_key} v{api_version} response: {error}") from None
    return header.correlation_id, body


def response_array(api_key: int, api_version: int, content, before: int, item_class: type) -> tuple[list, int, int]:
    """The items of the array that follows a response's header and ``before`` bytes of fixed-size fields in
    ``content`` (a response frame without its size), and the offsets where the array starts and ends: what follows
    it can be copied as it came, never read."""
    flexible = response_schema(api_key, api_version).__flexible__
    try:  # kio's readers answer (value, bytes read)
        start = entity_reader(_response_header_class(api_key, flexible))(content, 0)[1] + before
        items, end = read_array(content, start, item_class, flexible)
    except Exception as error:
        raise KafkaFrameError(f"malformed api {api_key} v{api_version} response: {error}") from None
    return items, start, end


def read_array(content, offset: int, item_class: type, flexible: bool) -> tuple[list, int]:
    """The items of an array of ``item_class`` entities at ``offset``, and the offset after it."""
    count, size = (read_unsigned_varint if flexible else read_int32)(content, offset)
    offset += size
    read_item = entity_reader(item_class)
    items = []
    for _ in range(count - 1 if flexible else count):  # a compact array counts one more (0: null)
        item, size = read_item(content, offset)
        items.append(item)
        offset += size
    return items, offset


def array_bytes(items: list, item_class: type, flexible: bool) -> bytes:
    """``items`` (kio entities of ``item_class``) encoded as an array of a message that is ``flexible`` or not."""
    buffer = io.BytesIO()
    (compact_array_writer if flexible else legacy_array_writer)(entity_writer(item_class))(buffer, items)
    return buffer.getvalue()


def produce_acks(header: RequestHeader, frame: bytes) -> int:
    """The ``acks`` of a Produce request: 0 means the client expects no response. Before v3 it is the body's
    first field; from v3 it follows the transactional id."""
    read_id = read_compact_string_nullable if header.api_version >= 9 else read_nullable_legacy_string
    try:
        size = read_id(frame, header.body_offset)[1] if header.api_version >= 3 else 0
        acks, _ = read_int16(frame, header.body_offset + size)
    except Exception as error:
        raise KafkaFrameError(f"malformed Produce request: {error}") from None
    return acks
