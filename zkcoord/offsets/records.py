"""Keys and values of zkcoord's offsets log (group-coordinator.md §9.2, §9.3), and their msgpack codec.

The record types and version numbers are Kafka's ``__consumer_offsets`` ones, so docs can map to the spec,
but each key or value is one msgpack array whose first element is its version instead of Kafka's binary
struct. Encoders and decoders check every field against the schema; whatever bytes a decoder is given, it
either returns a record or raises :class:`RecordError`, never anything else.

Pure: imports only msgpack, msgspec and zkcoord.errors; no IO, no gevent, no clock.
"""

from collections.abc import Callable
from dataclasses import dataclass
from sys import intern
from typing import Annotated, Literal, NamedTuple

import msgpack
import msgspec

from zkcoord.errors import ZkcoordError

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_METADATA_VALUE_VERSION = 3
NO_EXPIRE_TIMESTAMP = -1
NO_LEADER_EPOCH = -1

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
# What msgpack raises for malformed input: bad format, truncation, trailing data (ExtraData), too deep
# nesting (StackError), invalid UTF-8, unhashable or non-str map keys, and input that is not bytes at all.
_UNPACK_ERRORS = (msgpack.UnpackException, ValueError, TypeError, OverflowError)
_PACK_ERRORS = (ValueError, TypeError, OverflowError)


class RecordError(ZkcoordError, ValueError):
    """A key or value that does not follow the offsets-log schema; ``offset`` is its log offset if known."""

    def __init__(self, message: str, offset: int | None = None):
        self.reason = message
        self.offset = offset
        super().__init__(message if offset is None else f"record at offset {offset}: {message}")


class OffsetCommitKey(NamedTuple):
    """Key of a committed offset: one per (group, topic, partition)."""

    group: str
    topic: str
    partition: int


class GroupMetadataKey(NamedTuple):
    """Key of a group's metadata record."""

    group: str


class OffsetCommitValue(NamedTuple):
    """A committed offset; -1 means no per-offset expiry (``expire_timestamp``) or no ``leader_epoch``."""

    offset: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = NO_EXPIRE_TIMESTAMP
    leader_epoch: int = NO_LEADER_EPOCH


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    """One member of a group record; ``subscription`` is its metadata for the group's chosen protocol."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    """A group's persisted state: written by SyncGroup and when the group becomes Empty (§9.3)."""

    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[MemberMetadata, ...] = ()


RecordKey = OffsetCommitKey | GroupMetadataKey
RecordValue = OffsetCommitValue | GroupMetadataValue


# ---- schemas: checked before encoding, and consulted to explain why a decode failed --------------------


def _is_version(value: object) -> bool:
    return type(value) is int


def _is_str(value: object) -> bool:
    return type(value) is str


def _is_nullable_str(value: object) -> bool:
    return value is None or type(value) is str


def _is_int32(value: object) -> bool:
    return type(value) is int and _INT32_MIN <= value <= _INT32_MAX


def _is_int64(value: object) -> bool:
    return type(value) is int and _INT64_MIN <= value <= _INT64_MAX


def _is_bytes(value: object) -> bool:
    return type(value) is bytes


def _is_array(value: object) -> bool:
    return type(value) is tuple


_VERSION = ("version", (_is_version, "an int"))
_STR = (_is_str, "a str")
_NULLABLE_STR = (_is_nullable_str, "a str or nil")
_INT32 = (_is_int32, "an int32")
_INT64 = (_is_int64, "an int64")
_BYTES = (_is_bytes, "bytes")

_Schema = tuple[tuple[str, tuple[Callable[[object], bool], str]], ...]

_OFFSET_COMMIT_KEY: _Schema = (_VERSION, ("group", _STR), ("topic", _STR), ("partition", _INT32))
_GROUP_METADATA_KEY: _Schema = (_VERSION, ("group", _STR))
_OFFSET_COMMIT_VALUE_V3: _Schema = (
    _VERSION,
    ("offset", _INT64),
    ("leader_epoch", _INT32),
    ("metadata", _STR),
    ("commit_timestamp", _INT64),
)
_OFFSET_COMMIT_VALUE_V1: _Schema = (
    _VERSION,
    ("offset", _INT64),
    ("metadata", _STR),
    ("commit_timestamp", _INT64),
    ("expire_timestamp", _INT64),
)
_GROUP_METADATA_VALUE_V3: _Schema = (
    _VERSION,
    ("protocol_type", _STR),
    ("generation", _INT32),
    ("protocol", _NULLABLE_STR),
    ("leader", _NULLABLE_STR),
    ("current_state_timestamp", _INT64),
    ("members", (_is_array, "an array")),
)
_MEMBER: _Schema = (
    ("member_id", _STR),
    ("group_instance_id", _NULLABLE_STR),
    ("client_id", _STR),
    ("client_host", _STR),
    ("rebalance_timeout", _INT32),
    ("session_timeout", _INT32),
    ("subscription", _BYTES),
    ("assignment", _BYTES),
)


def _describe(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _problem(schema: _Schema, fields: object, what: str) -> str | None:
    """Why ``fields`` does not match ``schema``, or None if it does."""
    if type(fields) is not tuple:
        return f"{what} must be an array, got {_describe(fields)}"
    if len(fields) != len(schema):
        return f"{what} must have {len(schema)} elements, got {len(fields)}"
    for (name, (check, kind)), value in zip(schema, fields, strict=True):
        if not check(value):
            return f"{what}: {name} must be {kind}, got {_describe(value)}"
    return None


def _mismatch(schema: _Schema, fields: object, what: str, offset: int | None) -> RecordError:
    # Called once a decoder's fast path rejected ``fields``: the schema names the first bad element.
    return RecordError(_problem(schema, fields, what) or f"{what} does not match its schema", offset)


# ---- encoding ------------------------------------------------------------------------------------------


def _checked(schema: _Schema, fields: tuple, what: str) -> tuple:
    problem = _problem(schema, fields, what)
    if problem:
        raise RecordError(problem)
    return fields


def _pack(fields: tuple, what: str) -> bytes:
    try:
        return msgpack.packb(fields, use_bin_type=True)
    except _PACK_ERRORS as error:
        raise RecordError(f"cannot encode {what}: {error}") from error


def encode_key(key: RecordKey) -> bytes:
    """The bytes of a key: ``[1, group, topic, partition]`` or ``[2, group]``."""
    if type(key) is OffsetCommitKey:
        what = "offset commit key"
        fields = (OFFSET_COMMIT_KEY_VERSION, key.group, key.topic, key.partition)
        return _pack(_checked(_OFFSET_COMMIT_KEY, fields, what), what)
    if type(key) is GroupMetadataKey:
        what = "group metadata key"
        return _pack(_checked(_GROUP_METADATA_KEY, (GROUP_METADATA_KEY_VERSION, key.group), what), what)
    raise RecordError(f"not a record key: {_describe(key)}")


def _offset_commit_fields(value: OffsetCommitValue) -> tuple:
    if value.expire_timestamp == NO_EXPIRE_TIMESTAMP:
        fields = (OFFSET_COMMIT_VALUE_VERSION, value.offset, value.leader_epoch, value.metadata, value.commit_timestamp)
        return _checked(_OFFSET_COMMIT_VALUE_V3, fields, "offset commit value v3")
    # As Kafka (§7.3 step 4), an explicit expiry needs v1, which has no leader epoch. Kafka drops the epoch
    # silently; refusing keeps decode(encode(v)) == v, and our wire protocol never carries both.
    if value.leader_epoch != NO_LEADER_EPOCH:
        raise RecordError("offset commit value: no version holds both an expire_timestamp and a leader_epoch")
    fields = (
        OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY,
        value.offset,
        value.metadata,
        value.commit_timestamp,
        value.expire_timestamp,
    )
    return _checked(_OFFSET_COMMIT_VALUE_V1, fields, "offset commit value v1")


def _member_fields(member: object, what: str) -> tuple:
    if type(member) is not MemberMetadata:
        raise RecordError(f"{what} must be a MemberMetadata, got {_describe(member)}")
    fields = (
        member.member_id,
        member.group_instance_id,
        member.client_id,
        member.client_host,
        member.rebalance_timeout,
        member.session_timeout,
        member.subscription,
        member.assignment,
    )
    return _checked(_MEMBER, fields, what)


def _group_metadata_fields(value: GroupMetadataValue) -> tuple:
    what = "group metadata value v3"
    if type(value.members) is not tuple:
        raise RecordError(f"{what}: members must be a tuple, got {_describe(value.members)}")
    members = tuple(_member_fields(member, f"{what} member {index}") for index, member in enumerate(value.members))
    fields = (
        GROUP_METADATA_VALUE_VERSION,
        value.protocol_type,
        value.generation,
        value.protocol,
        value.leader,
        value.current_state_timestamp,
        members,
    )
    return _checked(_GROUP_METADATA_VALUE_V3, fields, what)


def encode_value(value: RecordValue | None) -> bytes | None:
    """The bytes of a value (v3, or v1 for an offset with an explicit expiry); None for a tombstone."""
    if value is None:
        return None
    if type(value) is OffsetCommitValue:
        return _pack(_offset_commit_fields(value), "offset commit value")
    if type(value) is GroupMetadataValue:
        return _pack(_group_metadata_fields(value), "group metadata value")
    raise RecordError(f"not a record value: {_describe(value)}")


_VALUE_TYPE_OF_KEY = {OffsetCommitKey: OffsetCommitValue, GroupMetadataKey: GroupMetadataValue}


def encode_record(key: RecordKey, value: RecordValue | None) -> tuple[bytes, bytes | None]:
    """Key and value bytes of one record; the value's type must match the key's, or be None (a tombstone)."""
    key_bytes = encode_key(key)
    expected = _VALUE_TYPE_OF_KEY[type(key)]
    if value is not None and type(value) is not expected:
        raise RecordError(f"{type(key).__name__} needs a {expected.__name__}, got {_describe(value)}")
    return key_bytes, encode_value(value)


# ---- decoding ------------------------------------------------------------------------------------------
# The loader decodes one key and one value per surviving key, so the usual path is one combined type check
# per record; the schemas above are consulted only to explain a failure.


# NamedTuple's generated __new__ costs several times tuple.__new__; decoders build checked fields directly.
_new = tuple.__new__


def _unpack_array(data: bytes, what: str, offset: int | None) -> tuple:
    try:
        fields = msgpack.unpackb(data, raw=False, strict_map_key=True, use_list=False)
    except _UNPACK_ERRORS as error:
        raise RecordError(f"{what} is not valid msgpack ({type(error).__name__}: {error})", offset) from error
    if type(fields) is not tuple or not fields:
        raise RecordError(f"{what} must be a non-empty array, got {_describe(fields)}", offset)
    return fields


def decode_key(data: bytes, offset: int | None = None) -> RecordKey:
    """Decode key bytes; offset commit keys of version 0 and 1 are read alike (§9.3)."""
    fields = _unpack_array(data, "key", offset)
    version = fields[0]
    if type(version) is int:
        if version == OFFSET_COMMIT_KEY_VERSION or version == 0:
            checked = _offset_key_fields(fields)
            if checked is not None:
                return _new(OffsetCommitKey, checked)
            raise _mismatch(_OFFSET_COMMIT_KEY, fields, f"offset commit key v{version}", offset)
        if version == GROUP_METADATA_KEY_VERSION:
            if len(fields) == 2 and type(fields[1]) is str:
                return GroupMetadataKey(fields[1])
            raise _mismatch(_GROUP_METADATA_KEY, fields, "group metadata key", offset)
    raise RecordError(f"unknown key version {_describe(version)}", offset)


def _offset_key_fields(fields: tuple) -> tuple[str, str, int] | None:
    """``(group, topic, partition)`` of an offset commit key's fields, or None if they do not fit."""
    if len(fields) == 4:
        _, group, topic, partition = fields
        if (
            type(group) is str
            and type(topic) is str
            and type(partition) is int
            and _INT32_MIN <= partition <= _INT32_MAX
        ):
            # Interned: a loaded store holds one copy of each group and topic name, not one per key.
            return intern(group), intern(topic), partition
    return None


def decode_offset_commit(key_data: bytes, value_data: bytes | None) -> tuple | None:
    """The loader's fast path: ``(group, topic, partition, value)`` of a valid offset commit record, else None.

    ``value`` is an OffsetCommitValue or None (a tombstone). None as a whole means "not a valid offset commit":
    decode with :func:`decode_key` and :func:`decode_value` for the record or its exact error.
    """
    try:
        key_fields = msgpack.unpackb(key_data, raw=False, strict_map_key=True, use_list=False)
        value_fields = (
            None if value_data is None else msgpack.unpackb(value_data, raw=False, strict_map_key=True, use_list=False)
        )
    except _UNPACK_ERRORS:
        return None
    if type(key_fields) is not tuple or not key_fields or type(key_fields[0]) is not int:
        return None
    if key_fields[0] not in (0, OFFSET_COMMIT_KEY_VERSION):
        return None
    key = _offset_key_fields(key_fields)
    if key is None:
        return None
    if value_fields is None:
        return (*key, None)
    value = _offset_value(value_fields) if type(value_fields) is tuple and value_fields else None
    return None if value is None else (*key, value)


_CANONICAL_KEY_PREFIXES = (
    bytes([0x94, OFFSET_COMMIT_KEY_VERSION]),  # msgpack fixarray of 4, then the version
    bytes([0x92, GROUP_METADATA_KEY_VERSION]),
)


def is_canonical_key(data: bytes) -> bool:
    """True for keys in the form zkcoord writes; any other form may equal a canonical key once decoded."""
    return data[:2] in _CANONICAL_KEY_PREFIXES


def canonical_key(data: bytes) -> bytes:
    """The bytes zkcoord writes for the key ``data`` stands for (``data`` itself if it does not decode).

    Compaction compares keys by these bytes, so a version-0 key and a version-1 key for the same offset are
    one key, as the loader reads them (§9.3); otherwise a v0 value could outlive a later v1 tombstone.
    """
    if is_canonical_key(data):
        return data
    try:
        return encode_key(decode_key(data))
    except RecordError:
        return data


def decode_value(key: RecordKey, data: bytes | None, offset: int | None = None) -> RecordValue | None:
    """Decode the value bytes of ``key``'s record; None (a tombstone) stays None."""
    if data is None:
        return None
    if type(key) is OffsetCommitKey:
        return _decode_offset_commit_value(_unpack_array(data, "offset commit value", offset), offset)
    if type(key) is GroupMetadataKey:
        return _decode_group_metadata_value(_unpack_array(data, "group metadata value", offset), offset)
    raise RecordError(f"not a record key: {_describe(key)}", offset)


def _decode_offset_commit_value(fields: tuple, offset: int | None) -> OffsetCommitValue:
    value = _offset_value(fields)
    if value is not None:
        return value
    version = fields[0]
    if type(version) is int and version == OFFSET_COMMIT_VALUE_VERSION:
        raise _mismatch(_OFFSET_COMMIT_VALUE_V3, fields, "offset commit value v3", offset)
    if type(version) is int and version == OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY:
        raise _mismatch(_OFFSET_COMMIT_VALUE_V1, fields, "offset commit value v1", offset)
    raise RecordError(f"unknown offset commit value version {_describe(version)}", offset)


def _offset_value(fields: tuple) -> OffsetCommitValue | None:
    """The value v3 or v1 ``fields`` (a non-empty tuple) stand for, or None if they do not fit."""
    version = fields[0]
    if len(fields) != 5 or type(version) is not int:
        return None
    if version == OFFSET_COMMIT_VALUE_VERSION:
        _, committed, leader_epoch, metadata, commit_timestamp = fields
        expire_timestamp = NO_EXPIRE_TIMESTAMP
        if type(leader_epoch) is not int or not _INT32_MIN <= leader_epoch <= _INT32_MAX:
            return None
    elif version == OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY:
        _, committed, metadata, commit_timestamp, expire_timestamp = fields
        leader_epoch = NO_LEADER_EPOCH
        if type(expire_timestamp) is not int or not _INT64_MIN <= expire_timestamp <= _INT64_MAX:
            return None
    else:
        return None
    if (
        type(committed) is int
        and _INT64_MIN <= committed <= _INT64_MAX
        and type(metadata) is str
        and type(commit_timestamp) is int
        and _INT64_MIN <= commit_timestamp <= _INT64_MAX
    ):
        return _new(OffsetCommitValue, (committed, metadata, commit_timestamp, expire_timestamp, leader_epoch))
    return None


def _decode_group_metadata_value(fields: tuple, offset: int | None) -> GroupMetadataValue:
    what = "group metadata value v3"
    version = fields[0]
    if type(version) is not int or version != GROUP_METADATA_VALUE_VERSION:
        raise RecordError(f"unknown group metadata value version {_describe(version)}", offset)
    if len(fields) == 7:
        _, protocol_type, generation, protocol, leader, current_state_timestamp, raw_members = fields
        if (
            type(protocol_type) is str
            and type(generation) is int
            and _INT32_MIN <= generation <= _INT32_MAX
            and (protocol is None or type(protocol) is str)
            and (leader is None or type(leader) is str)
            and type(current_state_timestamp) is int
            and _INT64_MIN <= current_state_timestamp <= _INT64_MAX
            and type(raw_members) is tuple
        ):
            members = []
            for index, raw_member in enumerate(raw_members):
                member = _decode_member(raw_member)
                if member is None:
                    raise _mismatch(_MEMBER, raw_member, f"{what} member {index}", offset)
                members.append(member)
            return GroupMetadataValue(
                protocol_type, generation, protocol, leader, current_state_timestamp, tuple(members)
            )
    raise _mismatch(_GROUP_METADATA_VALUE_V3, fields, what, offset)


def _decode_member(fields: object) -> MemberMetadata | None:
    if type(fields) is tuple and len(fields) == 8:
        member_id, instance_id, client_id, client_host, rebalance_timeout, session_timeout, subscription, assignment = (
            fields
        )
        if (
            type(member_id) is str
            and (instance_id is None or type(instance_id) is str)
            and type(client_id) is str
            and type(client_host) is str
            and type(rebalance_timeout) is int
            and _INT32_MIN <= rebalance_timeout <= _INT32_MAX
            and type(session_timeout) is int
            and _INT32_MIN <= session_timeout <= _INT32_MAX
            and type(subscription) is bytes
            and type(assignment) is bytes
        ):
            return MemberMetadata(
                member_id,
                instance_id,
                client_id,
                client_host,
                rebalance_timeout,
                session_timeout,
                subscription,
                assignment,
            )
    return None


# ---- bulk decoding for the loader ----------------------------------------------------------------------
# Loading a compacted log decodes one key and one value per live key, so per-record Python work is what
# limits it. These decoders check a key's or value's whole schema in C (msgspec); anything they refuse is
# decoded again by decode_key/decode_value above, which say exactly why it is not a record.

_Int32 = Annotated[int, msgspec.Meta(ge=_INT32_MIN, le=_INT32_MAX)]
_Int64 = Annotated[int, msgspec.Meta(ge=_INT64_MIN, le=_INT64_MAX)]


class CanonicalOffsetKey(msgspec.Struct, array_like=True, tag=OFFSET_COMMIT_KEY_VERSION, frozen=True, gc=False):
    """An offset commit key as :func:`decode_canonical_keys` returns it."""

    group: str
    topic: str
    partition: _Int32


class CanonicalGroupKey(msgspec.Struct, array_like=True, tag=GROUP_METADATA_KEY_VERSION, frozen=True, gc=False):
    """A group metadata key as :func:`decode_canonical_keys` returns it."""

    group: str


_decode_canonical_key = msgspec.msgpack.Decoder(CanonicalOffsetKey | CanonicalGroupKey).decode
_encode_canonical_key = msgspec.msgpack.Encoder().encode

decode_offset_value_v3 = msgspec.msgpack.Decoder(
    tuple[Literal[OFFSET_COMMIT_VALUE_VERSION], _Int64, _Int32, str, _Int64]
).decode
"""``(3, offset, leader_epoch, metadata, commit_timestamp)`` of v3 value bytes; ValueError for anything else."""
decode_offset_value_v1 = msgspec.msgpack.Decoder(
    tuple[Literal[OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY], _Int64, str, _Int64, _Int64]
).decode
"""``(1, offset, metadata, commit_timestamp, expire_timestamp)`` of v1 value bytes; ValueError for anything else."""


def decode_canonical_keys(keys: list[bytes]) -> list[CanonicalOffsetKey | CanonicalGroupKey] | None:
    """Each of ``keys`` decoded, if every one is exactly the bytes :func:`encode_key` writes for a record key;
    None if any is not (decode those with :func:`decode_key`, which also resolves other encodings).

    Checking that the keys encode back to themselves means that distinct bytes are distinct keys here.
    """
    try:
        decoded = list(map(_decode_canonical_key, keys))
    except ValueError:  # msgspec's DecodeError and ValidationError, and UnicodeDecodeError, are ValueErrors
        return None
    return decoded if list(map(_encode_canonical_key, decoded)) == keys else None
