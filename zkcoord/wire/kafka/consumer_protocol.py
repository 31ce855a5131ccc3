"""Kafka's embedded consumer protocol through kio: a Kafka client's subscription and assignment bytes.

A Kafka consumer's JoinGroup metadata and SyncGroup assignment are ``ConsumerProtocolSubscription`` and
``ConsumerProtocolAssignment`` behind an int16 version, as Kafka's ``ConsumerProtocol`` writes them; zkcoord's
own clients send msgpack maps (:mod:`zkcoord.wire.consumer_protocol`). A msgpack map never starts with a zero
byte and Kafka's version (0 to 3) always does, so :func:`read_subscription` reads either and
:func:`encode_assignment_like` answers a member in the encoding its subscription used.

Pure: imports only kio and zkcoord.wire.
"""

from __future__ import annotations

import io
import struct

from kio.schema.consumer_protocol_assignment.v0.data import ConsumerProtocolAssignment
from kio.schema.consumer_protocol_assignment.v0.data import TopicPartition as AssignedTopic
from kio.schema.consumer_protocol_subscription import v0, v1, v2, v3
from kio.serial import entity_reader, entity_writer

from zkcoord.model import TopicPartition
from zkcoord.wire import consumer_protocol
from zkcoord.wire.consumer_protocol import Assignment, ConsumerProtocolError, Subscription

_VERSION = struct.Struct(">h")
_SUBSCRIPTIONS = (v0.ConsumerProtocolSubscription, v1.ConsumerProtocolSubscription, v2.ConsumerProtocolSubscription)
_SUBSCRIPTIONS += (v3.ConsumerProtocolSubscription,)


def is_kafka_encoded(data: bytes) -> bool:
    """Whether embedded-protocol bytes are Kafka's (an int16 version first) rather than a msgpack map."""
    return data[:1] == b"\x00"


def decode_kafka_subscription(data: bytes) -> Subscription:
    """A Kafka client's subscription; a version newer than 3 is read through v3's fields, as Kafka does."""
    if len(data) < _VERSION.size:
        raise ConsumerProtocolError(f"subscription: {len(data)} bytes, shorter than its version")
    (version,) = _VERSION.unpack_from(data)
    if version < 0:
        raise ConsumerProtocolError(f"subscription: version {version} is not a consumer protocol version")
    schema = _SUBSCRIPTIONS[min(version, len(_SUBSCRIPTIONS) - 1)]
    try:
        entity, _ = entity_reader(schema)(memoryview(bytes(data)), _VERSION.size)
    except Exception as error:  # kio raises whatever its readers hit on short or malformed bytes
        raise ConsumerProtocolError(f"subscription: not Kafka's v{version} ({type(error).__name__})") from None
    return Subscription(topics=tuple(entity.topics), user_data=entity.user_data)


def encode_kafka_assignment(assignment: Assignment) -> bytes:
    """``ConsumerProtocolAssignment`` v0, which every Kafka client reads."""
    by_topic: dict[str, list[int]] = {}
    for partition in sorted(assignment.assigned_partitions):
        by_topic.setdefault(partition.topic, []).append(partition.partition)
    entity = ConsumerProtocolAssignment(
        assigned_partitions=tuple(AssignedTopic(topic=t, partitions=tuple(ps)) for t, ps in sorted(by_topic.items())),
        user_data=assignment.user_data,
    )
    buffer = io.BytesIO()
    buffer.write(_VERSION.pack(0))
    entity_writer(ConsumerProtocolAssignment)(buffer, entity)
    return buffer.getvalue()


def decode_kafka_assignment(data: bytes) -> Assignment:
    """A Kafka client's assignment (any version is read through v0's fields, which every later one starts with)."""
    if len(data) < _VERSION.size or _VERSION.unpack_from(data)[0] < 0:
        raise ConsumerProtocolError(f"assignment: {data[:2]!r} is not a consumer protocol version")
    try:
        entity, _ = entity_reader(ConsumerProtocolAssignment)(memoryview(bytes(data)), _VERSION.size)
    except Exception as error:  # kio raises whatever its readers hit on short or malformed bytes
        raise ConsumerProtocolError(f"assignment: not Kafka's ({type(error).__name__})") from None
    partitions = tuple(TopicPartition(t.topic, p) for t in entity.assigned_partitions for p in t.partitions)
    return Assignment(assigned_partitions=partitions, user_data=entity.user_data)


def read_assignment(data: bytes) -> Assignment:
    """SyncGroup's assignment bytes in either encoding (nothing when empty); raises ConsumerProtocolError."""
    if not data:
        return Assignment(())
    if is_kafka_encoded(data):
        return decode_kafka_assignment(data)
    return consumer_protocol.decode_assignment(data)


def read_subscription(data: bytes) -> Subscription:
    """A member's subscription in either encoding; raises ConsumerProtocolError."""
    if is_kafka_encoded(data):
        return decode_kafka_subscription(data)
    return consumer_protocol.decode_subscription(data)


def encode_assignment_like(subscription_data: bytes, assignment: Assignment) -> bytes:
    """``assignment`` in the encoding the member's ``subscription_data`` used."""
    if is_kafka_encoded(subscription_data):
        return encode_kafka_assignment(assignment)
    return consumer_protocol.encode_assignment(assignment)
