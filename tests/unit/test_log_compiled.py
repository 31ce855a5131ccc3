"""The offsets loader's compiled steps (zkcoord/log/_compiled.c) against their Python counterparts.

Where the steps were not built, the loader is Python alone and these tests check that.
"""

import msgpack
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from record_strategies import INT64, group_metadata_values, offset_commit_values, records

from zkcoord.errors import CorruptRecordError
from zkcoord.log import PartitionLog, loader
from zkcoord.log import format as log_format
from zkcoord.log.format import Batch, LogFormatError, decode_entry, decode_records_in_python, encode_entry
from zkcoord.log.loader import apply_batches, load_batches, load_partition
from zkcoord.model import TopicPartition
from zkcoord.offsets.records import (
    GroupMetadataKey,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_key,
    decode_value,
    encode_key,
    encode_record,
    encode_value,
)
from zkcoord.offsets.store import CommittedOffset, OffsetStore

COMPILED = loader.apply_records is not None
# Few names, so that records overwrite and delete each other; of every msgpack width.
GROUPS = st.sampled_from(["g", "grüppe", "x" * 40])
TOPICS = st.sampled_from(["t", "y" * 300])
PARTITIONS = st.sampled_from([0, 128, 70_000, -33, -(2**31)])


def test_both_compiled_steps_are_used_or_neither():
    assert (log_format.compiled_decode_records is None) == (loader.apply_records is None)


def wide_int(value: int) -> bytes:
    """``value`` as a 64-bit msgpack int: valid, but not the smallest encoding."""
    return b"\xd3" + value.to_bytes(8, "big", signed=True)


def wide_str(text: str) -> bytes:
    data = text.encode()
    return b"\xdb" + len(data).to_bytes(4, "big") + data


def packed(value) -> bytes:
    return msgpack.packb(value, use_bin_type=True)


# ---- decoding an entry's records ---------------------------------------------------------------------------


def mutated(data: bytes, position: int, byte: int, cut: int) -> bytes:
    """``data`` with one byte changed, or cut short, or with a byte added."""
    if cut == 0:
        return data[: position % len(data)] + bytes([byte]) + data[position % len(data) + 1 :]
    return data[:-cut] if cut > 0 else data + bytes([byte])


@given(
    st.lists(st.tuples(st.binary(max_size=20), st.none() | st.binary(max_size=300)), min_size=1, max_size=8),
    st.integers(0, 3),
    st.integers(0, 2**16),
    st.integers(0, 255),
    st.integers(-1, 3),
    st.booleans(),
)
def test_the_compiled_records_decoder_returns_what_the_python_one_does_or_leaves_it_to_say_why_not(
    pairs, gap, position, byte, cut, damage
):
    records = [(index * (gap + 1), gap, key, value) for index, (key, value) in enumerate(pairs)]
    payload = packed(records)
    count, last_delta = len(records), records[-1][0]
    if damage:
        payload = mutated(payload, position, byte, cut)
        last_delta += position % 3 - 1
    try:
        expected = decode_records_in_python(payload, count, last_delta, 0)
    except LogFormatError:
        expected = None
    decoded = log_format.compiled_decode_records(payload, count, last_delta) if COMPILED else expected
    assert decoded is None or decoded == expected
    if not damage:
        assert decoded == expected == tuple(records)


@pytest.mark.parametrize(
    "records, reason",
    [
        ([(0, 0, "a str key", None)], "a record has no key"),
        ([(0, 0, b"k", 5)], "a record value is neither bytes nor nil"),
        ([(1, 0, b"k", None), (0, 0, b"k", None)], "record offset deltas are not increasing"),
        ([(0, 0, b"k", None), (0, 0, b"k", None)], "record offset deltas are not increasing"),
        ([(0, 0, b"k")], "a record is not"),
        ([(0, 1.5, b"k", None)], "a record's attributes are not an integer"),
    ],
)
def test_a_corrupt_record_is_reported_as_the_python_decoder_words_it(records, reason):
    with pytest.raises(LogFormatError, match=reason):
        decode_entry(encode_entry(0, 0, records), 0, 1 << 20)


def test_a_record_count_the_payload_cannot_hold_allocates_nothing_and_is_reported():
    payload = b"\xdd\xff\xff\xff\xff"  # an array of 2**32 - 1 records, and nothing else
    if COMPILED:
        assert log_format.compiled_decode_records(payload, 2**32 - 1, 5) is None
    with pytest.raises(LogFormatError, match="records do not decode"):
        decode_records_in_python(payload, 2**32 - 1, 5, 0)


# ---- applying records to the store -------------------------------------------------------------------------


@st.composite
def key_bytes(draw) -> bytes:
    """Key bytes as zkcoord writes them, in other valid encodings (Kafka's version 0, wider fields), or damaged."""
    group, topic, partition = draw(GROUPS), draw(TOPICS), draw(PARTITIONS)
    canonical = encode_key(OffsetCommitKey(group, topic, partition))
    return draw(
        st.sampled_from(
            [
                canonical,
                canonical,
                encode_key(GroupMetadataKey(group)),
                packed([0, group, topic, partition]),
                b"\x94\x01" + wide_str(group) + packed(topic) + packed(partition),
                b"\x94\x01" + packed(group) + packed(topic) + wide_int(partition),
                b"\x92\x02" + wide_str(group),
                canonical + b"\x00",
                canonical[:-1],
                encode_key(GroupMetadataKey(group)) + b"\x00",
                packed([2, group, topic, partition]),
                packed([5, group, topic, partition]),
                b"\x94\x01\xa1\xff" + packed(topic) + packed(partition),  # a group that is not UTF-8
                b"\x94\x01" + packed(group) + packed(topic) + packed(2**31),
            ]
        )
    )


@st.composite
def value_bytes(draw) -> bytes | None:
    """Offset commit values in any valid encoding, group metadata values, and bytes that are neither."""
    value = draw(offset_commit_values)
    fields = msgpack.unpackb(encode_value(value))
    widened = b"\xdc\x00\x05" + b"".join(
        wide_int(field) if type(field) is int and draw(st.booleans()) else packed(field) for field in fields
    )
    return draw(
        st.sampled_from(
            [
                None,
                None,
                encode_value(value),
                encode_value(value),
                widened,
                encode_value(draw(group_metadata_values)),
                packed([3, draw(INT64), 2**31, "", draw(INT64)]),  # a leader epoch beyond int32
                packed([3, 2**63, 0, "", 0]),
                packed([3, 1.0, 0, "", 0]),
                packed([4, 1, 0, "", 0]),
                packed([3, 1, 0, "", 0, 0]),
                b"\x95\x03\x01\x01\xa1\xff\x01",  # metadata that is not UTF-8
                encode_value(value) + b"\xc0",
                encode_value(value)[:-1],
            ]
        )
    )


def batches_of(pairs: list[tuple[bytes, bytes | None]], sizes: list[int]) -> list[Batch]:
    batches, offset = [], 0
    while offset < len(pairs):
        chunk = pairs[offset : offset + sizes[len(batches) % len(sizes)]]
        batches.append(Batch(offset, 0, len(chunk) - 1, tuple((d, 0, *pair) for d, pair in enumerate(chunk)), 1))
        offset += len(chunk)
    return batches


def python_load(batches: list[Batch]) -> OffsetStore | None:
    try:
        return load_batches(batches).store
    except ValueError:  # RecordError: a surviving record that is not one
        return None


@given(st.lists(st.tuples(key_bytes(), value_bytes()), max_size=30), st.lists(st.integers(1, 10), min_size=1))
@example([(encode_key(OffsetCommitKey("g", "t", 0)), b"\x95\x03\x01\x01\xa1\xff\x01")], [1])
def test_applying_records_in_c_builds_what_the_python_loader_builds_or_gives_up(pairs, sizes):
    """Given up (None) is always allowed: the partition is then read again in Python."""
    for pair in pairs:  # one by one too, not only up to the first refusal of the lot
        applied = apply_batches(batches_of([pair], [1]))
        assert applied is None or applied.store == python_load(batches_of([pair], [1]))
    batches = batches_of(pairs, sizes)
    applied = apply_batches(batches)
    assert applied is None or applied.store == python_load(batches)


def replay_in_log_order(pairs: list[tuple[bytes, bytes | None]]) -> OffsetStore:
    store = OffsetStore()
    for offset, (key, value) in enumerate(pairs):
        decoded = decode_key(key, offset)
        store.apply(decoded, decode_value(decoded, value, offset), offset)
    return store


@given(
    st.lists(st.tuples(records(groups=GROUPS, topics=TOPICS, partitions=PARTITIONS), st.booleans()), max_size=60),
    st.lists(st.integers(1, 10), min_size=1),
)
def test_both_loaders_rebuild_what_replaying_each_record_in_log_order_builds(records_and_foreign, sizes):
    """Overwrites, tombstones and group records in batches of several records, some keys in Kafka's version 0."""
    pairs = [
        (packed([0, *key]), encode_record(key, value)[1])
        if foreign and type(key) is OffsetCommitKey
        else encode_record(key, value)
        for (key, value), foreign in records_and_foreign
    ]
    batches = batches_of(pairs, sizes)
    expected = replay_in_log_order(pairs)
    assert load_batches(batches).store == expected
    applied = apply_batches(batches)
    if COMPILED:
        assert applied is not None and applied.store == expected
        assert (applied.batches, applied.records) == (len(batches), len(pairs))
    else:
        assert applied is None


def test_a_log_the_compiled_steps_give_up_on_is_read_again_in_python(tmp_path):
    """A bad value that a later record overwrote is not an error (only survivors are decoded); a bad survivor is
    named by its offset."""
    commit = encode_record(OffsetCommitKey("g", "t", 0), OffsetCommitValue(5, "", 1_000))
    bad_value = packed([3, 1, 2**31, "", 0])
    with PartitionLog.open(tmp_path) as partition:
        partition.append([(commit[0], bad_value), commit])
        assert apply_batches(partition.read()) is None
        assert load_partition(partition).store.offsets == {
            "g": {TopicPartition("t", 0): CommittedOffset(5, "", 1_000, -1, -1, 1)}
        }
        partition.append([(encode_key(OffsetCommitKey("g", "t", 2)), bad_value)])
        with pytest.raises(CorruptRecordError, match="record at offset 2: "):
            load_partition(partition)
