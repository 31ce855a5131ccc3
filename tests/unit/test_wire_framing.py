"""Frames and headers of the wire protocol (wire-protocol.md §1, §2). Pure: no sockets."""

import struct
import tracemalloc

import msgpack
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from zkcoord.errors import ZkcoordError
from zkcoord.wire.framing import DEFAULT_MAX_REQUEST_BYTES, FrameDecoder, FrameError, encode_frame, error_frame

HEADER = {"api": "Heartbeat", "api_version": 0, "correlation_id": 7}


def pack(obj) -> bytes:
    return msgpack.packb(obj, use_bin_type=True)


def frame(body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + body


def decode_all(data: bytes, max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES) -> list[dict]:
    decoder = FrameDecoder(max_request_bytes)
    decoder.feed(data)
    messages = []
    while (message := decoder.next_message()) is not None:
        messages.append(message)
    return messages


def frame_error(data: bytes, max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES) -> FrameError:
    with pytest.raises(FrameError) as raised:
        decode_all(data, max_request_bytes)
    return raised.value


# ---- round trips -------------------------------------------------------------------------------------------

# Arrays decode as tuples, so the strategy builds tuples to compare round trips exactly.
msgpack_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=10)
    | st.binary(max_size=10),
    # Every nested map has a key of 7+ characters: real requests never come near the decoder's cap of one map
    # per 8 bytes of frame, which exists so a frame of empty maps cannot cost a million dicts.
    lambda inner: (
        st.lists(inner, max_size=4).map(tuple)
        | st.dictionaries(st.text(min_size=7, max_size=10), inner, min_size=1, max_size=4)
    ),
    max_leaves=12,
)
messages = st.builds(
    lambda extra, api, version, correlation_id: {
        **extra,
        "api": api,
        "api_version": version,
        "correlation_id": correlation_id,
    },
    st.dictionaries(st.text(max_size=8), msgpack_values, max_size=5),
    st.text(max_size=20),
    st.integers(-(2**63), 2**64 - 1),
    st.integers(-(2**31), 2**31 - 1),
)


@given(st.lists(messages, max_size=5))
def test_round_trip_of_several_frames_in_one_feed(batch):
    assert decode_all(b"".join(encode_frame(message) for message in batch)) == batch


@given(messages)
def test_round_trip_fed_byte_by_byte(message):
    data = encode_frame(message)
    decoder = FrameDecoder()
    for index in range(len(data) - 1):
        decoder.feed(data[index : index + 1])
        assert decoder.next_message() is None
    decoder.feed(data[-1:])
    assert decoder.next_message() == message
    assert decoder.next_message() is None
    assert decoder.buffered_bytes == 0


def test_partial_frame_waits_and_the_rest_stays_buffered():
    first, second = encode_frame({**HEADER, "correlation_id": 1}), encode_frame({**HEADER, "correlation_id": 2})
    decoder = FrameDecoder()
    decoder.feed(first + second[:5])
    assert decoder.next_message()["correlation_id"] == 1
    assert decoder.next_message() is None
    assert decoder.buffered_bytes == 5
    decoder.feed(second[5:])
    assert decoder.next_message()["correlation_id"] == 2


def test_a_half_sent_frame_costs_about_what_was_received_and_nothing_once_read():
    """Nothing is reserved for the announced length: the buffer grows with the bytes that come (within
    bytearray's 1/8 headroom) and gives its memory back once the frame is read."""
    whole = encode_frame({**HEADER, "padding": "x" * (DEFAULT_MAX_REQUEST_BYTES - 100)})
    half = len(whole) // 2
    decoder = FrameDecoder()
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        decoder.feed(whole[:4])
        assert decoder.next_message() is None
        assert tracemalloc.get_traced_memory()[0] - start < 1024
        for offset in range(4, half, 65536):
            decoder.feed(whole[offset : min(offset + 65536, half)])
            assert decoder.next_message() is None
        assert tracemalloc.get_traced_memory()[0] - start <= half * 1.15
        decoder.feed(whole[half:])
        message = decoder.next_message()
        assert len(message["padding"]) == DEFAULT_MAX_REQUEST_BYTES - 100
        del message
        assert tracemalloc.get_traced_memory()[0] - start < 1024
    finally:
        tracemalloc.stop()


def test_encode_frame_layout_spec_1():
    data = encode_frame({"s": "x", "b": b"x"})
    assert data[:4] == struct.pack(">I", len(data) - 4)
    # str as MessagePack str (0xa1), bytes as bin (0xc4): wire-protocol.md §1.
    assert data[4:] == b"\x82\xa1s\xa1x\xa1b\xc4\x01x"


def test_string_and_bin_stay_apart_when_decoded():
    (message,) = decode_all(encode_frame({**HEADER, "metadata": b"\x00\xff", "name": "é"}))
    assert message["metadata"] == b"\x00\xff"
    assert message["name"] == "é"


def test_frame_of_exactly_max_request_bytes_is_accepted_spec_1():
    body = pack({**HEADER, "pad": "x" * 100})
    assert decode_all(frame(body), max_request_bytes=len(body)) == [{**HEADER, "pad": "x" * 100}]


def test_extra_keys_of_any_type_are_kept_for_the_request_layer_to_ignore():
    (message,) = decode_all(frame(pack({**HEADER, 5: "five", (1, 2): None})))
    assert message[5] == "five"


# ---- bad frames (§1) ---------------------------------------------------------------------------------------


def test_zero_length_spec_1():
    error = frame_error(b"\x00\x00\x00\x00")
    assert error.correlation_id == -1
    assert error.message == "frame length 0 is not allowed"


def test_too_long_is_refused_from_the_prefix_alone_spec_1():
    decoder = FrameDecoder()
    decoder.feed(struct.pack(">I", 2_000_000))  # no body at all: the decoder must not wait for it
    with pytest.raises(FrameError) as raised:
        decoder.next_message()
    assert raised.value.correlation_id == -1
    assert raised.value.message == "frame length 2000000 exceeds max.request.bytes 1048576"


def test_max_request_bytes_is_configurable():
    body = pack(HEADER)
    error = frame_error(frame(body), max_request_bytes=len(body) - 1)
    assert f"exceeds max.request.bytes {len(body) - 1}" in error.message


@pytest.mark.parametrize(
    "body",
    [
        b"\xc1",  # a byte MessagePack never uses
        pack(HEADER)[:-1],  # truncated
        pack(HEADER) + b"\x00",  # a second object after the map
        pack(HEADER) + pack(HEADER),
        b"\x81\xa3api\xa2\xff\xfe",  # str that is not UTF-8
        b"\x81\x81\x00\x00\x00",  # a map as a map key
        b"\xdd\xff\xff\xff\xff",  # an array announcing 2**32 - 1 items in 5 bytes
        b"\x91" * 5000,  # nested deeper than the unpacker's stack
    ],
    ids=["reserved-byte", "truncated", "trailing-byte", "two-maps", "bad-utf8", "map-key", "huge-array", "deep"],
)
def test_bytes_that_are_not_one_msgpack_map_spec_1(body):
    error = frame_error(frame(body))
    assert error.correlation_id == -1
    assert "MessagePack" in error.message or "maps" in error.message


@pytest.mark.parametrize("value", [[HEADER], 7, "api", None, b"\x00", True, 1.5], ids=repr)
def test_msgpack_that_is_not_a_map_spec_1(value):
    error = frame_error(frame(pack(value)))
    assert error.correlation_id == -1
    assert error.message.startswith("frame is not a MessagePack map")


def test_a_frame_full_of_tiny_maps_is_refused_before_it_costs_memory():
    error = frame_error(frame(b"\xdc\xff\xff" + b"\x80" * 0xFFFF))
    assert "maps" in error.message


# ---- bad headers (§2) --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "message", "correlation_id"),
    [
        ({"api": None}, "header field 'api' is missing", 7),
        ({"api": 5}, "header field 'api' must be a str, got 5", 7),
        ({"api": b"Heartbeat"}, "header field 'api' must be a str", 7),
        ({"api_version": None}, "header field 'api_version' is missing", 7),
        ({"api_version": "0"}, "header field 'api_version' must be an int", 7),
        ({"api_version": 0.0}, "header field 'api_version' must be an int", 7),
        ({"api_version": True}, "header field 'api_version' must be an int", 7),
        ({"correlation_id": None}, "header field 'correlation_id' is missing", -1),
        ({"correlation_id": "7"}, "header field 'correlation_id' must be an int32", -1),
        ({"correlation_id": 2**31}, "header field 'correlation_id' must be an int32", -1),
        ({"correlation_id": -(2**31) - 1}, "header field 'correlation_id' must be an int32", -1),
        ({"correlation_id": True}, "header field 'correlation_id' must be an int32", -1),
    ],
)
def test_invalid_header_field_spec_2(change, message, correlation_id):
    header = {key: value for key, value in {**HEADER, **change}.items() if value is not None}
    error = frame_error(frame(pack(header)))
    assert error.message.startswith(message)
    assert error.correlation_id == correlation_id


def test_explicit_nil_header_field_counts_as_missing_spec_2():
    error = frame_error(frame(pack({**HEADER, "api_version": None})))
    assert error.message == "header field 'api_version' is missing"


def test_correlation_id_is_read_from_a_map_whose_other_header_fields_are_bad_spec_1():
    assert frame_error(frame(pack({"correlation_id": -(2**31)}))).correlation_id == -(2**31)
    assert frame_error(frame(pack({"correlation_id": 2**31 - 1, "api": 1}))).correlation_id == 2**31 - 1


def test_client_id_is_not_a_frame_matter():
    # A bad client_id is a request-level 42 (zkcoord.wire.requests), not an error frame.
    assert decode_all(frame(pack({**HEADER, "client_id": 5}))) == [{**HEADER, "client_id": 5}]


def test_unknown_api_and_version_pass_framing():
    header = {"api": "NoSuchApi", "api_version": 99, "correlation_id": 1}
    assert decode_all(frame(pack(header))) == [header]


# ---- after an error ----------------------------------------------------------------------------------------


def test_decoder_is_dead_after_an_error():
    decoder = FrameDecoder()
    decoder.feed(b"\x00\x00\x00\x00" + encode_frame(HEADER))
    with pytest.raises(FrameError) as first:
        decoder.next_message()
    decoder.feed(encode_frame(HEADER))
    with pytest.raises(FrameError) as again:
        decoder.next_message()
    assert again.value is first.value
    assert decoder.error is first.value
    assert decoder.buffered_bytes == 0


def test_messages_before_a_bad_frame_come_out_first():
    decoder = FrameDecoder()
    decoder.feed(encode_frame(HEADER) + frame(b"\xc1"))
    assert decoder.next_message() == HEADER
    with pytest.raises(FrameError):
        decoder.next_message()


def test_error_frame_spec_1():
    assert error_frame(FrameError("header field 'api' is missing", 12)) == {
        "correlation_id": 12,
        "error_code": 42,
        "error_message": "header field 'api' is missing",
    }
    assert error_frame(FrameError("frame length 0 is not allowed"))["correlation_id"] == -1
    assert type(error_frame(FrameError("x"))["error_code"]) is int


def test_frame_error_is_a_zkcoord_error():
    assert issubclass(FrameError, ZkcoordError)


@pytest.mark.parametrize("limit", [0, -1, 2**32, 1.5])
def test_max_request_bytes_must_be_a_positive_uint32(limit):
    with pytest.raises(ValueError):
        FrameDecoder(limit)


# ---- whatever the bytes ------------------------------------------------------------------------------------


def feed_and_drain(chunks: list[bytes], max_request_bytes: int) -> list[dict]:
    """Messages until more bytes are needed or a FrameError; any other exception fails the test."""
    decoder = FrameDecoder(max_request_bytes)
    messages = []
    try:
        for chunk in chunks:
            decoder.feed(chunk)
            while (message := decoder.next_message()) is not None:
                messages.append(message)
    except FrameError as error:
        assert isinstance(error.correlation_id, int)
        assert -(2**31) <= error.correlation_id < 2**31
        assert error.message
        assert decoder.error is error
    return messages


def check_valid_headers(messages: list[dict]) -> None:
    for message in messages:
        assert type(message) is dict
        assert type(message["api"]) is str
        assert type(message["api_version"]) is int
        assert type(message["correlation_id"]) is int and -(2**31) <= message["correlation_id"] < 2**31


@given(st.lists(st.binary(max_size=64), max_size=6), st.integers(1, 128))
@example([b"\x00\x00\x00\x00"], 128)
@example([b"\x00\x00\x00\x01\xc1"], 128)
def test_any_bytes_give_messages_or_a_frame_error(chunks, max_request_bytes):
    check_valid_headers(feed_and_drain(chunks, max_request_bytes))


# Random bodies behind a correct length prefix reach the msgpack and header checks, which pure random bytes
# seldom do.
random_bodies = st.one_of(
    st.binary(min_size=1, max_size=80),
    msgpack_values.map(pack),
    st.dictionaries(
        st.sampled_from(["api", "api_version", "correlation_id", "client_id"]) | st.text(max_size=3),
        msgpack_values,
    ).map(pack),
    messages.map(pack).flatmap(lambda body: st.integers(1, len(body)).map(lambda cut: body[:cut])),
)


@given(st.lists(random_bodies.map(frame), min_size=1, max_size=4), st.data())
def test_framed_random_bodies_give_messages_or_a_frame_error(frames, data):
    stream = b"".join(frames)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=4)))
    chunks = [stream[start:end] for start, end in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
    check_valid_headers(feed_and_drain(chunks, DEFAULT_MAX_REQUEST_BYTES))
