"""The embedded consumer protocol (wire-protocol.md §4): what a member's subscription and assignment bytes hold.

These are msgpack maps carried opaquely by JoinGroup (``protocols[].metadata``) and SyncGroup (``assignment``)
when ``protocol_type`` is "consumer". Writers emit version 0. Readers follow Kafka's ConsumerProtocol: any
version >= 0 is read through its v0 fields and unknown keys are ignored, so newer clients stay readable.
Whatever bytes a decoder is given, it either returns or raises :class:`ConsumerProtocolError`.

Pure: imports only msgpack, zkcoord.errors and zkcoord.model; no IO, no gevent.
"""

from dataclasses import dataclass

import msgpack

from zkcoord.errors import ZkcoordError
from zkcoord.model import TopicPartition

CONSUMER_PROTOCOL_VERSION = 0

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
# Malformed msgpack, trailing data (ExtraData), too deep nesting (StackError), invalid UTF-8, non-str map
# keys, and input that is not bytes at all.
_UNPACK_ERRORS = (msgpack.UnpackException, ValueError, TypeError, OverflowError)
_PACK_ERRORS = (ValueError, TypeError, OverflowError)


class ConsumerProtocolError(ZkcoordError, ValueError):
    """Subscription or assignment bytes (or a value to encode) that do not follow wire-protocol.md §4."""


@dataclass(frozen=True, slots=True)
class Subscription:
    """What a member asks for: its topics, and the partitions it owns now (for cooperative assignors)."""

    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[TopicPartition, ...] = ()


@dataclass(frozen=True, slots=True)
class Assignment:
    """What the leader hands a member."""

    assigned_partitions: tuple[TopicPartition, ...]
    user_data: bytes | None = None


# ---- encoding ------------------------------------------------------------------------------------------


def _describe(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def is_int32(value: object) -> bool:
    return type(value) is int and _INT32_MIN <= value <= _INT32_MAX


def _checked_user_data(user_data: object, what: str) -> bytes | None:
    if user_data is not None and type(user_data) is not bytes:
        raise ConsumerProtocolError(f"{what}: user_data must be bytes or None, got {_describe(user_data)}")
    return user_data


def partitions_by_topic(partitions: object, field: str, what: str) -> list[dict]:
    """``[{topic, partitions}]`` with each topic once, topics and partitions in first-seen order."""
    if type(partitions) is not tuple:
        raise ConsumerProtocolError(f"{what}: {field} must be a tuple, got {_describe(partitions)}")
    by_topic: dict[str, list[int]] = {}
    for partition in partitions:
        if not (
            isinstance(partition, tuple)
            and len(partition) == 2
            and type(partition[0]) is str
            and is_int32(partition[1])
        ):
            raise ConsumerProtocolError(
                f"{what}: {field} must hold (topic, int32 partition) pairs, got {_describe(partition)}"
            )
        by_topic.setdefault(partition[0], []).append(partition[1])
    return [{"topic": topic, "partitions": numbers} for topic, numbers in by_topic.items()]


def pack_map(message: dict, what: str) -> bytes:
    """msgpack bytes of ``message``; ConsumerProtocolError (naming ``what``) if it cannot be encoded."""
    try:
        return msgpack.packb(message, use_bin_type=True)
    except _PACK_ERRORS as error:
        raise ConsumerProtocolError(f"cannot encode {what}: {error}") from error


def encode_subscription(subscription: Subscription) -> bytes:
    """``{version: 0, topics, user_data, owned_partitions: [{topic, partitions}]}``."""
    what = "subscription"
    if type(subscription) is not Subscription:
        raise ConsumerProtocolError(f"not a Subscription: {_describe(subscription)}")
    topics = subscription.topics
    if type(topics) is not tuple or not all(type(topic) is str for topic in topics):
        raise ConsumerProtocolError(f"{what}: topics must be a tuple of str, got {_describe(topics)}")
    message = {
        "version": CONSUMER_PROTOCOL_VERSION,
        "topics": topics,
        "user_data": _checked_user_data(subscription.user_data, what),
        "owned_partitions": partitions_by_topic(subscription.owned_partitions, "owned_partitions", what),
    }
    return pack_map(message, what)


def encode_assignment(assignment: Assignment) -> bytes:
    """``{version: 0, assigned_partitions: [{topic, partitions}], user_data}``."""
    what = "assignment"
    if type(assignment) is not Assignment:
        raise ConsumerProtocolError(f"not an Assignment: {_describe(assignment)}")
    message = {
        "version": CONSUMER_PROTOCOL_VERSION,
        "assigned_partitions": partitions_by_topic(assignment.assigned_partitions, "assigned_partitions", what),
        "user_data": _checked_user_data(assignment.user_data, what),
    }
    return pack_map(message, what)


# ---- decoding ------------------------------------------------------------------------------------------
# An absent optional field reads as nil, as in request bodies (wire-protocol.md §2).


def unpack_map(data: bytes, what: str) -> dict:
    """The versioned msgpack map in ``data`` (version >= 0); ConsumerProtocolError naming ``what`` otherwise."""
    try:
        message = msgpack.unpackb(data, raw=False, strict_map_key=True, use_list=False)
    except _UNPACK_ERRORS as error:
        raise ConsumerProtocolError(f"{what} is not valid msgpack ({type(error).__name__}: {error})") from error
    if type(message) is not dict:
        raise ConsumerProtocolError(f"{what} must be a map, got {_describe(message)}")
    version = message.get("version")
    # Kafka's ConsumerProtocol rejects only versions below 0; later ones must keep the v0 fields.
    if type(version) is not int or version < CONSUMER_PROTOCOL_VERSION:
        raise ConsumerProtocolError(f"{what}: version must be an int >= 0, got {_describe(version)}")
    return message


def _decoded_user_data(message: dict, what: str) -> bytes | None:
    user_data = message.get("user_data")
    if user_data is not None and type(user_data) is not bytes:
        raise ConsumerProtocolError(f"{what}: user_data must be bin or nil, got {_describe(user_data)}")
    return user_data


def decoded_partitions(entries: object, field: str, what: str) -> tuple[TopicPartition, ...]:
    """The ``[{topic, partitions}]`` array ``entries`` as topic-partitions; ConsumerProtocolError otherwise."""
    if type(entries) is not tuple:
        raise ConsumerProtocolError(f"{what}: {field} must be an array, got {_describe(entries)}")
    partitions: list[TopicPartition] = []
    for entry in entries:
        if type(entry) is not dict:
            raise ConsumerProtocolError(f"{what}: {field} entries must be maps, got {_describe(entry)}")
        topic = entry.get("topic")
        numbers = entry.get("partitions")
        if type(topic) is not str:
            raise ConsumerProtocolError(f"{what}: {field} topic must be a str, got {_describe(topic)}")
        if type(numbers) is not tuple or not all(is_int32(number) for number in numbers):
            raise ConsumerProtocolError(
                f"{what}: partitions of {field} topic {topic!r} must be an array of int32, got {_describe(numbers)}"
            )
        partitions.extend(TopicPartition(topic, number) for number in numbers)
    return tuple(partitions)


def decode_subscription(data: bytes) -> Subscription:
    """Read subscription bytes; ``owned_partitions`` come back grouped as they were sent."""
    what = "subscription"
    message = unpack_map(data, what)
    topics = message.get("topics")
    if type(topics) is not tuple or not all(type(topic) is str for topic in topics):
        raise ConsumerProtocolError(f"{what}: topics must be an array of str, got {_describe(topics)}")
    owned = message.get("owned_partitions")
    return Subscription(
        topics=topics,
        user_data=_decoded_user_data(message, what),
        owned_partitions=() if owned is None else decoded_partitions(owned, "owned_partitions", what),
    )


def decode_assignment(data: bytes) -> Assignment:
    """Read assignment bytes."""
    what = "assignment"
    message = unpack_map(data, what)
    return Assignment(
        assigned_partitions=decoded_partitions(message.get("assigned_partitions"), "assigned_partitions", what),
        user_data=_decoded_user_data(message, what),
    )
