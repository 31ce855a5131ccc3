"""The on-disk entry codec: one batch of records, framed with its length and a CRC.

Pure: bytes in, batches out. Must not import gevent, os or any IO module. docs/offsets-log.md is the
format's public description; keep the two in step.

Entry layout (big-endian)::

    length             uint32   bytes that follow this field
    crc                uint32   CRC-32 (zlib) of every byte after this field
    magic              uint8    format version, 1
    attributes         uint8    reserved, 0
    base_offset        int64    offset of the batch's first record
    timestamp          int64    create time of the batch, ms since the epoch
    record_count       uint32
    last_offset_delta  uint32   offset of the last record − base_offset (kept when compaction drops records)
    records            msgpack array of [offset_delta, attributes, key (bin), value (bin or nil)]
"""

import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import msgpack

MAGIC = 1
_HEADER = struct.Struct(">IIBBqqII")
HEADER_SIZE = _HEADER.size
_LENGTH = struct.Struct(">I")
_LENGTH_AND_CRC = struct.Struct(">II")
_HEADER_AFTER_CRC = struct.Struct(">BBqqII")
# Bytes counted by `length` before the records: crc .. last_offset_delta.
_FIXED_AFTER_LENGTH = HEADER_SIZE - _LENGTH.size
_INT64 = (-(1 << 63), (1 << 63) - 1)

_pack = msgpack.Packer(use_bin_type=True).pack

Record = tuple[int, int, bytes, bytes | None]
"""``(offset_delta, attributes, key, value)``; a ``None`` value is a tombstone."""


class LogFormatError(ValueError):
    """Bytes that are not a valid entry. ``torn`` means the bytes simply end too early.

    ``position`` is where the entry starts in the buffer given to :func:`decode_entry`.
    """

    def __init__(self, reason: str, position: int, torn: bool = False):
        self.reason = reason
        self.position = position
        self.torn = torn
        super().__init__(f"{'torn' if torn else 'corrupt'} entry at byte {position}: {reason}")


@dataclass(frozen=True, slots=True)
class Batch:
    """One decoded entry. ``size`` is its length on disk, header included."""

    base_offset: int
    timestamp_ms: int
    last_offset_delta: int
    records: tuple[Record, ...]
    size: int

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    def entries(self) -> list[tuple[int, bytes, bytes | None]]:
        """``(offset, key, value)`` of each record."""
        return [(self.base_offset + delta, key, value) for delta, _, key, value in self.records]


def encode_entry(base_offset: int, timestamp_ms: int, records: Sequence[Record]) -> bytes:
    """Frame ``records`` (offset deltas strictly increasing from 0 or more) as one entry."""
    if not records:
        raise ValueError("an entry holds at least one record")
    body = _HEADER_AFTER_CRC.pack(MAGIC, 0, base_offset, timestamp_ms, len(records), records[-1][0]) + _pack(records)
    return _LENGTH_AND_CRC.pack(len(body) + 4, zlib.crc32(body)) + body


def encode_records(base_offset: int, timestamp_ms: int, pairs: Sequence[tuple[bytes, bytes | None]]) -> bytes:
    """An entry of consecutive offsets from ``base_offset``, one per ``(key, value)``."""
    return encode_entry(base_offset, timestamp_ms, [(delta, 0, key, value) for delta, (key, value) in enumerate(pairs)])


def read_length(buffer: bytes | memoryview, position: int) -> int:
    """Total size of the entry starting at ``position``, or -1 if its length field is incomplete."""
    if len(buffer) - position < _LENGTH.size:
        return -1
    return _LENGTH.size + _LENGTH.unpack_from(buffer, position)[0]


def decode_entry(buffer: bytes | memoryview, position: int, max_entry_bytes: int) -> Batch:
    """Decode the entry at ``position``; anything invalid raises :class:`LogFormatError` only."""
    available = len(buffer) - position
    if available < _LENGTH.size:
        raise LogFormatError(f"{available} bytes where a {_LENGTH.size}-byte length was expected", position, True)
    (length,) = _LENGTH.unpack_from(buffer, position)
    size = _LENGTH.size + length
    if length < _FIXED_AFTER_LENGTH or size > max_entry_bytes:
        raise LogFormatError(f"length {length} is outside [{_FIXED_AFTER_LENGTH}, {max_entry_bytes - 4}]", position)
    if size > available:
        raise LogFormatError(f"entry of {size} bytes but only {available} remain", position, True)
    _, crc, magic, _, base_offset, timestamp_ms, count, last_delta = _HEADER.unpack_from(buffer, position)
    body = buffer[position + 8 : position + size]
    if zlib.crc32(body) != crc:
        raise LogFormatError("checksum mismatch", position)
    if magic != MAGIC:
        raise LogFormatError(f"unknown magic {magic}", position)
    if base_offset < 0 or base_offset + last_delta > _INT64[1]:
        raise LogFormatError(f"base offset {base_offset} out of range", position)
    records = _decode_records(buffer[position + HEADER_SIZE : position + size], count, last_delta, position)
    return Batch(base_offset, timestamp_ms, last_delta, records, size)


def _decode_records(payload: bytes | memoryview, count: int, last_delta: int, position: int) -> tuple[Record, ...]:
    if compiled_decode_records is not None:
        records = compiled_decode_records(payload, count, last_delta)
        if records is not None:
            return records
    return decode_records_in_python(payload, count, last_delta, position)


def decode_records_in_python(
    payload: bytes | memoryview, count: int, last_delta: int, position: int
) -> tuple[Record, ...]:
    """The records of an entry, checked; :class:`LogFormatError` says what is wrong with them.

    ``zkcoord/log/_compiled.c`` returns the same for the records it accepts and None for any other."""
    try:
        records = msgpack.unpackb(payload, raw=False, use_list=False, strict_map_key=True)
    except Exception as exc:  # msgpack raises many types for bad input; all mean "not our records"
        raise LogFormatError(f"records do not decode: {exc}", position) from None
    if type(records) is not tuple or len(records) != count or count == 0:
        raise LogFormatError(f"expected {count} records", position)
    # Checked column by column so that the loops run in C: loading is dominated by this check. A record
    # that is not a 4-element array fails the transposition or the column types below.
    try:
        deltas, attributes, keys, values = zip(*records, strict=True)
    except (TypeError, ValueError):
        raise LogFormatError("a record is not [offset_delta, attributes, key, value]", position) from None
    if not (last_delta == count - 1 and deltas == tuple(range(count))) and not _increasing(deltas, last_delta):
        raise LogFormatError(f"record offset deltas are not increasing integers from ≥ 0 to {last_delta}", position)
    if attributes.count(0) != count and set(map(type, attributes)) != {int}:
        raise LogFormatError("a record's attributes are not an integer", position)
    if set(map(type, keys)) != {bytes}:
        raise LogFormatError("a record has no key", position)
    if not set(map(type, values)) <= _VALUE_TYPES:
        raise LogFormatError("a record value is neither bytes nor nil", position)
    return records


def _increasing(deltas: tuple, last_delta: int) -> bool:
    """Deltas left with gaps by compaction: strictly increasing integers from ≥ 0, ending at ``last_delta``."""
    return (
        set(map(type, deltas)) == {int}
        and deltas[0] >= 0
        and deltas[-1] == last_delta
        and all(map(int.__lt__, deltas, deltas[1:]))
    )


_VALUE_TYPES = {bytes, type(None)}


try:
    from zkcoord.log._compiled import decode_records as compiled_decode_records
except ImportError:  # built only where setup.py found a C compiler
    compiled_decode_records = None
