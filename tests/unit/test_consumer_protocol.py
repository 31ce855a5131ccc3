"""The embedded consumer protocol: subscription and assignment bytes (wire-protocol.md §4)."""

import re

import msgpack
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from zkcoord.errors import ZkcoordError
from zkcoord.model import TopicPartition
from zkcoord.wire.consumer_protocol import (
    Assignment,
    ConsumerProtocolError,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)

topics = st.text(max_size=8) | st.sampled_from(["orders", "😀", ""])
partition_lists = st.lists(
    st.builds(TopicPartition, topics, st.integers(-(2**31), 2**31 - 1)), max_size=10, unique=True
).map(tuple)
user_data = st.none() | st.binary(max_size=16)
subscriptions = st.builds(Subscription, st.lists(topics, max_size=5).map(tuple), user_data, partition_lists)
assignments = st.builds(Assignment, partition_lists, user_data)


def pack(obj) -> bytes:
    return msgpack.packb(obj, use_bin_type=True)


def grouped_by_topic(partitions: tuple[TopicPartition, ...]) -> tuple[TopicPartition, ...]:
    """The order the codec gives back: topics in first-seen order, each topic's partitions in order."""
    topic_order = list(dict.fromkeys(partition.topic for partition in partitions))
    return tuple(sorted(partitions, key=lambda partition: topic_order.index(partition.topic)))


# ---- round trips and layout ------------------------------------------------------------------------


@given(subscriptions)
def test_subscription_round_trip(subscription):
    decoded = decode_subscription(encode_subscription(subscription))
    assert decoded == Subscription(
        subscription.topics, subscription.user_data, grouped_by_topic(subscription.owned_partitions)
    )


@given(assignments)
def test_assignment_round_trip(assignment):
    decoded = decode_assignment(encode_assignment(assignment))
    assert decoded == Assignment(grouped_by_topic(assignment.assigned_partitions), assignment.user_data)


def test_subscription_layout_groups_partitions_per_topic_in_first_seen_order():
    subscription = Subscription(
        ("b", "a"),
        b"\x00data",
        (TopicPartition("b", 1), TopicPartition("a", 0), TopicPartition("b", 0)),
    )
    assert encode_subscription(subscription) == pack(
        {
            "version": 0,
            "topics": ["b", "a"],
            "user_data": b"\x00data",
            "owned_partitions": [{"topic": "b", "partitions": [1, 0]}, {"topic": "a", "partitions": [0]}],
        }
    )


def test_subscription_defaults_layout():
    assert encode_subscription(Subscription(("t",))) == pack(
        {"version": 0, "topics": ["t"], "user_data": None, "owned_partitions": []}
    )


def test_assignment_layout():
    assignment = Assignment((TopicPartition("t", 2), TopicPartition("u", 0), TopicPartition("t", 1)), None)
    assert encode_assignment(assignment) == pack(
        {
            "version": 0,
            "assigned_partitions": [{"topic": "t", "partitions": [2, 1]}, {"topic": "u", "partitions": [0]}],
            "user_data": None,
        }
    )


def test_repeated_topic_entries_are_read_in_order():
    data = pack(
        {
            "version": 0,
            "assigned_partitions": [
                {"topic": "t", "partitions": [1]},
                {"topic": "u", "partitions": [0]},
                {"topic": "t", "partitions": [0]},
            ],
            "user_data": None,
        }
    )
    assert decode_assignment(data).assigned_partitions == (
        TopicPartition("t", 1),
        TopicPartition("u", 0),
        TopicPartition("t", 0),
    )


# ---- forward compatibility (Kafka's ConsumerProtocol reads later versions through their v0 fields) ----


@pytest.mark.parametrize("version", [0, 1, 3, 2**40])
def test_later_versions_with_extra_keys_are_read(version):
    data = pack(
        {
            "version": version,
            "topics": ["a"],
            "user_data": b"u",
            "owned_partitions": [{"topic": "a", "partitions": [0], "epoch": 9}],
            "rack_id": "r1",
            "generation": 5,
        }
    )
    assert decode_subscription(data) == Subscription(("a",), b"u", (TopicPartition("a", 0),))
    assignment = pack({"version": version, "assigned_partitions": [], "user_data": None, "error": 3})
    assert decode_assignment(assignment) == Assignment(())


def test_absent_optional_fields_read_as_nil():
    # wire-protocol.md §2: an absent key means nil.
    assert decode_subscription(pack({"version": 0, "topics": ["a"]})) == Subscription(("a",))
    assert decode_subscription(pack({"version": 0, "topics": [], "owned_partitions": None})) == Subscription(())
    assert decode_assignment(pack({"version": 0, "assigned_partitions": []})) == Assignment(())


# ---- malformed input -------------------------------------------------------------------------------


def test_error_type():
    assert issubclass(ConsumerProtocolError, ZkcoordError)
    assert issubclass(ConsumerProtocolError, ValueError)


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        ({"topics": ["a"]}, "version must be an int >= 0, got None"),
        ({"version": -1, "topics": ["a"]}, "version must be an int >= 0, got -1"),
        ({"version": True, "topics": ["a"]}, "version must be an int >= 0, got True"),
        ({"version": "0", "topics": ["a"]}, "version must be an int >= 0"),
        ({"version": 0}, "topics must be an array of str, got None"),
        ({"version": 0, "topics": "a"}, "topics must be an array of str"),
        ({"version": 0, "topics": ["a", 1]}, "topics must be an array of str"),
        ({"version": 0, "topics": [b"a"]}, "topics must be an array of str"),
        ({"version": 0, "topics": [], "user_data": "text"}, "user_data must be bin or nil"),
        ({"version": 0, "topics": [], "owned_partitions": {}}, "owned_partitions must be an array"),
        ({"version": 0, "topics": [], "owned_partitions": [["a", [0]]]}, "owned_partitions entries must be maps"),
        ({"version": 0, "topics": [], "owned_partitions": [{"partitions": [0]}]}, "owned_partitions topic must be"),
        (
            {"version": 0, "topics": [], "owned_partitions": [{"topic": "a", "partitions": [True]}]},
            "partitions of owned_partitions topic 'a' must be an array of int32",
        ),
        (
            {"version": 0, "topics": [], "owned_partitions": [{"topic": "a", "partitions": [2**31]}]},
            "must be an array of int32",
        ),
        ({"version": 0, "topics": [], "owned_partitions": [{"topic": "a"}]}, "must be an array of int32, got None"),
        (["version", 0], "subscription must be a map"),
    ],
)
def test_malformed_subscriptions(message, reason):
    with pytest.raises(ConsumerProtocolError, match=re.escape(reason)):
        decode_subscription(pack(message))


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        ({"version": 0}, "assigned_partitions must be an array, got None"),
        ({"version": 0, "assigned_partitions": None}, "assigned_partitions must be an array"),
        ({"version": 0, "assigned_partitions": [{"topic": 1, "partitions": []}]}, "topic must be a str, got 1"),
        ({"version": 0, "assigned_partitions": [], "user_data": 5}, "user_data must be bin or nil, got 5"),
        ({"version": -3, "assigned_partitions": []}, "version must be an int >= 0"),
        ("assignment", "assignment must be a map"),
    ],
)
def test_malformed_assignments(message, reason):
    with pytest.raises(ConsumerProtocolError, match=re.escape(reason)):
        decode_assignment(pack(message))


def test_trailing_and_truncated_data_are_rejected():
    data = encode_subscription(Subscription(("a",)))
    for bad in (data + b"\x00", data[:-1], b""):
        with pytest.raises(ConsumerProtocolError, match="not valid msgpack"):
            decode_subscription(bad)


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (Subscription(["a"]), "topics must be a tuple of str"),
        (Subscription(("a", None)), "topics must be a tuple of str"),
        (Subscription(("a",), "text"), "user_data must be bytes or None"),
        (Subscription(("a",), None, [TopicPartition("a", 0)]), "owned_partitions must be a tuple"),
        (Subscription(("a",), None, (("a", "0"),)), "owned_partitions must hold (topic, int32 partition) pairs"),
        (Subscription(("a",), None, (TopicPartition("a", 2**31),)), "(topic, int32 partition) pairs"),
        (Subscription(("\udc80",)), "cannot encode subscription"),
        (Assignment((TopicPartition("a", True),)), "assigned_partitions must hold (topic, int32 partition)"),
        (Assignment((), bytearray(b"x")), "user_data must be bytes or None"),
    ],
)
def test_encoders_validate(value, reason):
    encode = encode_subscription if isinstance(value, Subscription) else encode_assignment
    with pytest.raises(ConsumerProtocolError, match=re.escape(reason)):
        encode(value)


def test_encoders_need_their_own_type():
    with pytest.raises(ConsumerProtocolError, match="not a Subscription"):
        encode_subscription(Assignment(()))
    with pytest.raises(ConsumerProtocolError, match="not an Assignment"):
        encode_assignment(Subscription(()))


# ---- arbitrary input only ever raises ConsumerProtocolError (style.md §6) ---------------------------


def _decode_both(data) -> None:
    for decode, encode in ((decode_subscription, encode_subscription), (decode_assignment, encode_assignment)):
        try:
            decoded = decode(data)
        except ConsumerProtocolError:
            continue
        assert decode(encode(decoded)) == decoded  # what decodes is valid


@given(st.binary(max_size=200))
@example(b"\xc1")
@example(b"\x81\x90\x00")  # map with an array as key
@example(b"\x81" * 5000)  # nesting deeper than the unpacker's stack
def test_random_bytes_only_raise_consumer_protocol_error(data):
    _decode_both(data)


msgpack_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats()
    | st.text(max_size=6)
    | st.binary(max_size=6),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.sampled_from(["topic", "partitions", "x"]), children, max_size=3)
    ),
    max_leaves=15,
)


@given(
    st.fixed_dictionaries(
        {},
        optional={
            "version": st.integers(-2, 3) | msgpack_values,
            "topics": st.lists(topics, max_size=3) | msgpack_values,
            "assigned_partitions": msgpack_values,
            "owned_partitions": msgpack_values,
            "user_data": user_data | msgpack_values,
            "other": msgpack_values,
        },
    )
)
def test_random_maps_only_raise_consumer_protocol_error(message):
    _decode_both(pack(message))


@pytest.mark.parametrize("data", ["a str", 5, None])
def test_non_bytes_input_raises_consumer_protocol_error(data):
    with pytest.raises(ConsumerProtocolError):
        decode_subscription(data)
    with pytest.raises(ConsumerProtocolError):
        decode_assignment(data)
