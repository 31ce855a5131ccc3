"""The offsets-log codec (group-coordinator.md §9.2, §9.3; zkcoord's msgpack layout of Kafka's versions)."""

import re

import msgpack
import msgspec
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from record_strategies import (
    group_metadata_keys,
    group_metadata_values,
    member_metadata,
    offset_commit_keys,
    offset_commit_values,
    records,
)

from zkcoord.errors import ZkcoordError
from zkcoord.offsets.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    RecordError,
    decode_canonical_keys,
    decode_key,
    decode_offset_commit,
    decode_offset_value_v1,
    decode_offset_value_v3,
    decode_value,
    encode_key,
    encode_record,
    encode_value,
)

OFFSET_KEY = OffsetCommitKey("g", "t", 0)
GROUP_KEY = GroupMetadataKey("g")
MEMBER = MemberMetadata("m-1", "instance-1", "client", "/127.0.0.1", 300000, 10000, b"\x01sub", b"\x02assign")
GROUP_VALUE = GroupMetadataValue("consumer", 5, "range", "m-1", 1000, (MEMBER,))
MEMBER_FIELDS = ["m-1", "instance-1", "client", "/127.0.0.1", 300000, 10000, b"\x01sub", b"\x02assign"]


def pack(obj) -> bytes:
    return msgpack.packb(obj, use_bin_type=True)


def decode_record(key_bytes: bytes, value_bytes: bytes | None, offset: int | None = None):
    key = decode_key(key_bytes, offset)
    return key, decode_value(key, value_bytes, offset)


# ---- round trips (§9.3) ------------------------------------------------------------------------------


@given(offset_commit_keys | group_metadata_keys)
def test_key_round_trip(key):
    assert decode_key(encode_key(key)) == key


@given(records())
def test_record_round_trip_spec_9_3(record):
    key, value = record
    assert decode_record(*encode_record(key, value)) == (key, value)


@given(offset_commit_values)
@example(OffsetCommitValue(2**63 - 1, "😀", -(2**63), 2**63 - 1))
@example(OffsetCommitValue(-(2**63), "", 0, leader_epoch=2**31 - 1))
def test_offset_commit_value_round_trip_at_int_bounds(value):
    assert decode_value(OFFSET_KEY, encode_value(value)) == value


@given(group_metadata_values)
@example(GroupMetadataValue("", -(2**31), None, None, -1))
@example(GroupMetadataValue("😀", 2**31 - 1, "ü", "m", 2**63 - 1, (MEMBER, MEMBER)))
def test_group_metadata_value_round_trip(value):
    assert decode_value(GROUP_KEY, encode_value(value)) == value


def test_tombstone_is_none_both_ways_spec_9_2():
    assert encode_value(None) is None
    assert encode_record(OFFSET_KEY, None) == (encode_key(OFFSET_KEY), None)
    assert decode_value(OFFSET_KEY, None) is None
    assert decode_value(GROUP_KEY, None) is None


# ---- exact layouts: what other implementations must read and write ----------------------------------


def test_key_layouts_spec_9_3():
    assert encode_key(OffsetCommitKey("g", "t", 3)) == pack([1, "g", "t", 3])
    assert encode_key(GroupMetadataKey("g")) == pack([2, "g"])


def test_offset_commit_value_is_v3_without_expiry_spec_7_3():
    value = OffsetCommitValue(5, "meta", 1000, leader_epoch=7)
    assert encode_value(value) == pack([3, 5, 7, "meta", 1000])


def test_offset_commit_value_is_v1_with_explicit_expiry_spec_7_3():
    value = OffsetCommitValue(5, "meta", 1000, expire_timestamp=2000)
    assert encode_value(value) == pack([1, 5, "meta", 1000, 2000])


def test_v1_and_v3_decode_to_the_same_fields_spec_9_3():
    assert decode_value(OFFSET_KEY, pack([1, 5, "m", 1000, 2000])) == OffsetCommitValue(5, "m", 1000, 2000, -1)
    assert decode_value(OFFSET_KEY, pack([3, 5, 9, "m", 1000])) == OffsetCommitValue(5, "m", 1000, -1, 9)


def test_v1_with_no_expiry_reads_as_no_expiry_spec_9_3():
    value = decode_value(OFFSET_KEY, pack([1, 5, "m", 1000, -1]))
    assert value == OffsetCommitValue(5, "m", 1000)
    assert encode_value(value) == pack([3, 5, -1, "m", 1000])  # rewritten as v3


def test_expiry_and_leader_epoch_together_are_refused():
    # v1 has no leader epoch field; Kafka would drop the epoch, zkcoord refuses to lose it.
    with pytest.raises(RecordError, match="expire_timestamp and a leader_epoch"):
        encode_value(OffsetCommitValue(5, "", 1000, expire_timestamp=2000, leader_epoch=3))


def test_group_metadata_value_layout_spec_9_3():
    assert encode_value(GROUP_VALUE) == pack([3, "consumer", 5, "range", "m-1", 1000, [MEMBER_FIELDS]])
    empty = GroupMetadataValue("consumer", 6, None, None, 2000)
    assert encode_value(empty) == pack([3, "consumer", 6, None, None, 2000, []])


def test_offset_commit_key_v0_is_read_as_v1_spec_9_3():
    assert decode_key(pack([0, "g", "t", 3])) == OffsetCommitKey("g", "t", 3)
    assert encode_key(decode_key(pack([0, "g", "t", 3]))) == pack([1, "g", "t", 3])


# ---- versions and errors ---------------------------------------------------------------------------


@pytest.mark.parametrize("version", [3, 7, -1, 2**40])
def test_unknown_key_version_names_offset_and_version(version):
    with pytest.raises(RecordError) as caught:
        decode_key(pack([version, "g"]), offset=42)
    assert str(caught.value) == f"record at offset 42: unknown key version {version}"
    assert caught.value.offset == 42
    assert caught.value.reason == f"unknown key version {version}"


@pytest.mark.parametrize("version", [0, 2, 4, 9])  # zkcoord only writes (and reads) v1 and v3
def test_unknown_offset_commit_value_version(version):
    with pytest.raises(RecordError) as caught:
        decode_value(OFFSET_KEY, pack([version, 5, "m", 1000]), offset=42)
    assert str(caught.value) == f"record at offset 42: unknown offset commit value version {version}"


@pytest.mark.parametrize("version", [0, 1, 2, 4, 9])
def test_unknown_group_metadata_value_version(version):
    with pytest.raises(RecordError) as caught:
        decode_value(GROUP_KEY, pack([version, "consumer", 1, None, None, 0, []]), offset=7)
    assert str(caught.value) == f"record at offset 7: unknown group metadata value version {version}"


def test_record_error_without_offset_and_its_bases():
    error = RecordError("unknown key version 7")
    assert str(error) == "unknown key version 7"
    assert error.offset is None
    assert isinstance(error, ZkcoordError)
    assert isinstance(error, ValueError)


def test_wrong_value_type_for_key_on_decode():
    with pytest.raises(RecordError, match="offset commit value v3 must have 5 elements, got 7"):
        decode_value(OFFSET_KEY, encode_value(GROUP_VALUE), offset=1)
    with pytest.raises(RecordError, match="group metadata value v3 must have 7 elements, got 5"):
        decode_value(GROUP_KEY, encode_value(OffsetCommitValue(5, "", 1000)), offset=1)


def test_wrong_value_type_for_key_on_encode():
    with pytest.raises(RecordError, match="OffsetCommitKey needs a OffsetCommitValue"):
        encode_record(OFFSET_KEY, GROUP_VALUE)
    with pytest.raises(RecordError, match="GroupMetadataKey needs a GroupMetadataValue"):
        encode_record(GROUP_KEY, OffsetCommitValue(5, "", 1000))


def test_decode_value_needs_a_record_key():
    with pytest.raises(RecordError, match="not a record key"):
        decode_value("g", pack([3, 5, -1, "", 1000]))


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (pack([1, "g", "t", True]), "partition must be an int32, got True"),  # bool is not an int
        (pack([1, "g", "t", 2**31]), "partition must be an int32"),
        (pack([1, "g", "t", -(2**31) - 1]), "partition must be an int32"),
        (pack([1, "g", "t", 1.0]), "partition must be an int32"),
        (pack([1, None, "t", 0]), "group must be a str, got None"),
        (pack([1, b"g", "t", 0]), "group must be a str, got b'g'"),
        (pack([1, "g", "t"]), "must have 4 elements, got 3"),
        (pack([1, "g", "t", 0, 0]), "must have 4 elements, got 5"),
        (pack([0, "g", 5, 0]), "offset commit key v0: topic must be a str"),
        (pack([2, "g", "extra"]), "group metadata key must have 2 elements, got 3"),
        (pack([2, 5]), "group must be a str, got 5"),
        (pack([]), "key must be a non-empty array"),
        (pack({"version": 1}), "key must be a non-empty array"),
        (pack("g"), "key must be a non-empty array"),
        (pack([True, "g"]), "unknown key version True"),
        (pack(["1", "g"]), "unknown key version '1'"),
        (pack([1, "g", "t", 0]) + b"\x00", "not valid msgpack"),  # trailing data
        (pack([1, "g", "t", 0])[:-1], "not valid msgpack"),  # truncated
        (b"", "not valid msgpack"),
        (b"\x92\xa1\xff\x00", "not valid msgpack"),  # invalid UTF-8
    ],
)
def test_malformed_keys(data, reason):
    with pytest.raises(RecordError, match=re.escape(reason)):
        decode_key(data, offset=3)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (pack([3, 2**63, -1, "", 0]), "offset must be an int64"),
        (pack([3, 0, 2**31, "", 0]), "leader_epoch must be an int32"),
        (pack([3, 0, -1, None, 0]), "metadata must be a str, got None"),  # metadata is not nullable
        (pack([3, 0, -1, "", False]), "commit_timestamp must be an int64, got False"),
        (pack([3, 0, -1, ""]), "must have 5 elements, got 4"),
        (pack([1, 0, "", 0, 2**64 - 1]), "expire_timestamp must be an int64"),
        (pack([1, 0, "", 0]), "offset commit value v1 must have 5 elements, got 4"),
        (pack({"offset": 0}), "must be a non-empty array"),
    ],
)
def test_malformed_offset_commit_values(data, reason):
    with pytest.raises(RecordError, match=re.escape(reason)):
        decode_value(OFFSET_KEY, data)


def _member(**changes):
    fields = dict(
        zip(
            [
                "member_id",
                "group_instance_id",
                "client_id",
                "client_host",
                "rebalance_timeout",
                "session_timeout",
                "subscription",
                "assignment",
            ],
            MEMBER_FIELDS,
            strict=True,
        )
    )
    fields.update(changes)
    return list(fields.values())


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (pack([3, None, 1, None, None, 0, []]), "protocol_type must be a str, got None"),  # not nullable
        (pack([3, "c", 2**31, None, None, 0, []]), "generation must be an int32"),
        (pack([3, "c", 1, 5, None, 0, []]), "protocol must be a str or nil, got 5"),
        (pack([3, "c", 1, None, b"m", 0, []]), "leader must be a str or nil"),
        (pack([3, "c", 1, None, None, 2**63, []]), "current_state_timestamp must be an int64"),
        (pack([3, "c", 1, None, None, 0, None]), "members must be an array, got None"),
        (pack([3, "c", 1, None, None, 0, {}]), "members must be an array"),
        (pack([3, "c", 1, None, None, 0]), "must have 7 elements, got 6"),
        (pack([3, "c", 1, None, None, 0, [], 0]), "must have 7 elements, got 8"),
        (pack([3, "c", 1, "r", "m", 0, ["m"]]), "member 0 must be an array"),
        (pack([3, "c", 1, "r", "m", 0, [MEMBER_FIELDS[:7]]]), "member 0 must have 8 elements, got 7"),
        (pack([3, "c", 1, "r", "m", 0, [MEMBER_FIELDS, _member(member_id=None)]]), "member 1: member_id must be"),
        (pack([3, "c", 1, "r", "m", 0, [_member(group_instance_id=5)]]), "group_instance_id must be a str or nil"),
        (pack([3, "c", 1, "r", "m", 0, [_member(client_host=None)]]), "client_host must be a str"),
        (pack([3, "c", 1, "r", "m", 0, [_member(session_timeout=True)]]), "session_timeout must be an int32"),
        (pack([3, "c", 1, "r", "m", 0, [_member(rebalance_timeout=2**31)]]), "rebalance_timeout must be an int32"),
        (pack([3, "c", 1, "r", "m", 0, [_member(subscription="s")]]), "subscription must be bytes"),
        (pack([3, "c", 1, "r", "m", 0, [_member(assignment=None)]]), "assignment must be bytes, got None"),
    ],
)
def test_malformed_group_metadata_values(data, reason):
    with pytest.raises(RecordError, match=re.escape(reason)):
        decode_value(GROUP_KEY, data)


def test_member_with_no_instance_id_is_valid():
    value = decode_value(GROUP_KEY, pack([3, "c", 1, "r", "m", 0, [_member(group_instance_id=None)]]))
    assert value.members[0].group_instance_id is None


# ---- encode validates too --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "reason"),
    [
        (OffsetCommitKey("g", "t", 2**31), "partition must be an int32"),
        (OffsetCommitKey("g", "t", True), "partition must be an int32, got True"),
        (OffsetCommitKey(None, "t", 0), "group must be a str"),
        (GroupMetadataKey(b"g"), "group must be a str"),
        (GroupMetadataKey("\ud800"), "cannot encode group metadata key"),  # lone surrogate: no UTF-8
        ("g", "not a record key"),
        (None, "not a record key"),
    ],
)
def test_encode_key_validates(key, reason):
    with pytest.raises(RecordError, match=re.escape(reason)):
        encode_key(key)


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (OffsetCommitValue(2**63, "", 0), "offset must be an int64"),
        (OffsetCommitValue(0, None, 0), "metadata must be a str, got None"),
        (OffsetCommitValue(0, "", 0, leader_epoch=2**31), "leader_epoch must be an int32"),
        (OffsetCommitValue(0, "", 0, expire_timestamp=2**63), "expire_timestamp must be an int64"),
        (GroupMetadataValue(None, 1, None, None, 0), "protocol_type must be a str"),
        (GroupMetadataValue("c", 1.5, None, None, 0), "generation must be an int32"),
        (GroupMetadataValue("c", 1, None, None, 0, [MEMBER]), "members must be a tuple"),
        (GroupMetadataValue("c", 1, None, None, 0, (MEMBER_FIELDS,)), "member 0 must be a MemberMetadata"),
        (
            GroupMetadataValue("c", 1, None, None, 0, (MemberMetadata("m", None, "c", "h", 1, 2, bytearray(), b""),)),
            "member 0: subscription must be bytes",
        ),
        (OFFSET_KEY, "not a record value"),
    ],
)
def test_encode_value_validates(value, reason):
    with pytest.raises(RecordError, match=re.escape(reason)):
        encode_value(value)


# ---- arbitrary input only ever raises RecordError (style.md §6) ----------------------------------


def _decode_everything(data: bytes) -> None:
    """Decode ``data`` as a key and as either value; anything but RecordError fails the test."""
    for attempt in (
        lambda: decode_key(data, 0),
        lambda: decode_value(OFFSET_KEY, data, 0),
        lambda: decode_value(GROUP_KEY, data, 0),
    ):
        try:
            decoded = attempt()
        except RecordError:
            continue
        # Whatever decodes is a valid record: it encodes, and reads back the same.
        if isinstance(decoded, OffsetCommitKey | GroupMetadataKey):
            assert decode_key(encode_key(decoded)) == decoded
        else:
            key = OFFSET_KEY if isinstance(decoded, OffsetCommitValue) else GROUP_KEY
            assert decode_value(key, encode_value(decoded)) == decoded


@given(st.binary(max_size=200))
@example(b"\xc1")  # never-used msgpack byte
@example(b"\xdd\xff\xff\xff\xff")  # array32 claiming 4 billion elements
@example(b"\x91" * 5000)  # nesting deeper than the unpacker's stack
@example(b"\xd4\xff\x00")  # timestamp ext of a wrong length
@example(b"\x81\x90\x00")  # map with an array as key
def test_random_bytes_only_raise_record_error(data):
    _decode_everything(data)


msgpack_objects = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats()
    | st.text(max_size=8)
    | st.binary(max_size=8),
    lambda children: st.lists(children, max_size=9) | st.dictionaries(st.text(max_size=4), children, max_size=4),
    max_leaves=20,
)


@given(st.integers(-2, 10), st.lists(msgpack_objects, max_size=8))
def test_random_msgpack_arrays_only_raise_record_error(version, elements):
    data = msgpack.packb([version, *elements], use_bin_type=True)
    _decode_everything(data)


@given(records(), st.data())
def test_mutated_records_only_raise_record_error(record, data):
    for encoded in encode_record(*record):
        if encoded is None:
            continue
        position = data.draw(st.integers(0, len(encoded) - 1))
        replacement = data.draw(st.integers(0, 255))
        _decode_everything(encoded[:position] + bytes([replacement]) + encoded[position + 1 :])
        _decode_everything(encoded[:position])
        _decode_everything(encoded + data.draw(st.binary(min_size=1, max_size=3)))


@given(st.lists(member_metadata, min_size=1, max_size=3))
def test_member_order_is_kept(members):
    value = GroupMetadataValue("consumer", 1, "range", members[0].member_id, 0, tuple(members))
    assert decode_value(GROUP_KEY, encode_value(value)).members == tuple(members)


@pytest.mark.parametrize("data", ["a str", 5, 1.5, [1, "g", "t", 0]])
def test_non_bytes_input_raises_record_error(data):
    with pytest.raises(RecordError, match="not valid msgpack"):
        decode_key(data)
    with pytest.raises(RecordError, match="not valid msgpack"):
        decode_value(OFFSET_KEY, data)


@given(records())
def test_the_loaders_fast_path_agrees_with_the_full_decoders(record):
    key, value = record
    key_bytes, value_bytes = encode_record(key, value)
    fast = decode_offset_commit(key_bytes, value_bytes)
    if type(key) is OffsetCommitKey:
        assert fast == (key.group, key.topic, key.partition, decode_value(key, value_bytes))
    else:
        assert fast is None


@given(st.binary(max_size=64), st.none() | st.binary(max_size=64))
def test_the_loaders_fast_path_never_raises_and_never_accepts_what_the_decoders_refuse(key_bytes, value_bytes):
    fast = decode_offset_commit(key_bytes, value_bytes)
    if fast is not None:
        key = decode_key(key_bytes)
        assert fast == (*key, decode_value(key, value_bytes))


@given(st.lists(offset_commit_keys | group_metadata_keys, max_size=8))
def test_the_bulk_key_decoder_reads_every_key_zkcoord_writes(keys):
    decoded = decode_canonical_keys([encode_key(key) for key in keys])
    assert decoded is not None
    assert [tuple(msgspec.structs.astuple(fields)) for fields in decoded] == [tuple(key) for key in keys]


@given(st.lists(st.binary(max_size=24) | st.sampled_from([b"\x94\x00\xa1g\xa1t\x00", b"\x94\x01\xa1g\xa1t\xc3"])))
@example([b"\x94\x01\xa1g\xa1t\x00\x00"])  # trailing bytes
@example([b"\x94\x01\xd9\x01g\xa1t\x00"])  # a valid key in a longer encoding than zkcoord's
def test_the_bulk_key_decoder_takes_only_keys_in_zkcoords_own_bytes(keys):
    decoded = decode_canonical_keys(keys)
    if decoded is not None:
        assert [encode_key(decode_key(data)) for data in keys] == keys
        assert [tuple(msgspec.structs.astuple(fields)) for fields in decoded] == [tuple(decode_key(k)) for k in keys]


@given(offset_commit_values | st.binary(max_size=40))
def test_the_bulk_value_decoders_never_accept_what_decode_value_refuses(value):
    data = value if type(value) is bytes else encode_value(value)
    accepted = 0
    for decode in (decode_offset_value_v3, decode_offset_value_v1):
        try:
            fields = decode(data)
        except ValueError:
            continue
        accepted += 1
        expected = decode_value(OFFSET_KEY, data)
        version, offset, *rest = fields
        if version == 3:
            assert expected == OffsetCommitValue(offset, rest[1], rest[2], leader_epoch=rest[0])
        else:
            assert expected == OffsetCommitValue(offset, rest[0], rest[1], expire_timestamp=rest[2])
    assert accepted == 1 if type(value) is not bytes else accepted <= 1
