"""Offset retention (group-coordinator.md §7.6): which committed offsets of a group have expired.

The rules read a :class:`GroupView`, so the offsets-log store (groups as loaded, §9.6 step 5) and the
coordinator's live state machine share them. Pure: time is an argument (``now_ms``); must not import IO
modules, gevent, kazoo, or the store (only its type, for annotations).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from zkcoord.model import GroupState, TopicPartition
from zkcoord.offsets.records import NO_EXPIRE_TIMESTAMP, GroupMetadataValue
from zkcoord.wire.consumer_protocol import ConsumerProtocolError, decode_subscription

if TYPE_CHECKING:
    from zkcoord.offsets.store import CommittedOffset

CONSUMER_PROTOCOL_TYPE = "consumer"
UNKNOWN_STATE_TIMESTAMP = -1
_STATE_NAMES = frozenset(state.value for state in GroupState)


@dataclass(frozen=True, slots=True)
class GroupView:
    """What retention needs to know of a group.

    ``protocol_type`` None means the group never had members (Kafka's ``None``); ``current_state_timestamp``
    -1 means unknown (a group loaded from an old record); ``subscribed_topics`` None means unknown;
    ``pending`` holds the partitions with an offset commit in flight.
    """

    protocol_type: str | None
    state: GroupState
    current_state_timestamp: int
    generation: int
    subscribed_topics: frozenset[str] | None
    pending: frozenset[TopicPartition] = frozenset()

    def __post_init__(self) -> None:
        if self.state not in _STATE_NAMES:
            raise ValueError(f"unknown group state {self.state!r}; expected one of {sorted(_STATE_NAMES)}")


def expired_offsets(
    view: GroupView, offsets: Mapping[TopicPartition, CommittedOffset], now_ms: int, retention_ms: int
) -> set[TopicPartition]:
    """The partitions whose offsets expire at ``now_ms`` (§7.6 cases (a)–(d)); pending ones never do."""
    # The order of the cases is Kafka's (GM removeExpiredOffsets): a group with a protocol type that is
    # Empty is case (a) even for "consumer"; "no protocol type" is case (c) in any state.
    if view.protocol_type is not None and view.state == GroupState.EMPTY:
        return _expired(offsets, view.pending, now_ms, retention_ms, view.current_state_timestamp, frozenset())
    if (
        view.protocol_type == CONSUMER_PROTOCOL_TYPE
        and view.subscribed_topics is not None
        and view.state == GroupState.STABLE
    ):
        return _expired(offsets, view.pending, now_ms, retention_ms, UNKNOWN_STATE_TIMESTAMP, view.subscribed_topics)
    if view.protocol_type is None:
        return _expired(offsets, view.pending, now_ms, retention_ms, UNKNOWN_STATE_TIMESTAMP, frozenset())
    return set()


def _expired(
    offsets: Mapping[TopicPartition, CommittedOffset],
    pending: frozenset[TopicPartition],
    now_ms: int,
    retention_ms: int,
    state_timestamp: int,
    subscribed: frozenset[str],
) -> set[TopicPartition]:
    """Offsets past retention, counted from ``state_timestamp`` or, when it is unknown, their commit time."""
    expired = set()
    for partition, committed in offsets.items():
        if partition in pending or partition.topic in subscribed:
            continue
        if committed.expire_timestamp != NO_EXPIRE_TIMESTAMP:
            # Old clients set a per-offset expiry; it overrides the group's clock (§7.6 (a)).
            if now_ms >= committed.expire_timestamp:
                expired.add(partition)
            continue
        since = committed.commit_timestamp if state_timestamp == UNKNOWN_STATE_TIMESTAMP else state_timestamp
        if now_ms - since >= retention_ms:
            expired.add(partition)
    return expired


def subscribed_topics(group: GroupMetadataValue) -> frozenset[str] | None:
    """Topics the members of a "consumer" group subscribe to (§7.6); None if unknown or not a consumer group."""
    return topics_of_subscriptions(
        group.protocol_type, group.protocol, [member.subscription for member in group.members]
    )


def topics_of_subscriptions(
    protocol_type: str | None, protocol: str | None, subscriptions: Iterable[bytes]
) -> frozenset[str] | None:
    """The union of the topics in ``subscriptions`` (wire-protocol §4); None if unknown or not a consumer group."""
    if protocol_type != CONSUMER_PROTOCOL_TYPE:
        return None
    subscriptions = list(subscriptions)
    if not subscriptions:
        return frozenset()
    if protocol is None:
        # Kafka parses only when a protocol was chosen (GM computeSubscribedTopics).
        return None
    topics: set[str] = set()
    for subscription in subscriptions:
        try:
            topics.update(decode_subscription(subscription).topics)
        except ConsumerProtocolError:
            return None
    return frozenset(topics)


def view_of_loaded_group(group: GroupMetadataValue | None) -> GroupView:
    """The group rebuilt from its latest metadata record, or from offsets alone when it has none (§9.6 step 5)."""
    if group is None:
        return GroupView(
            protocol_type=None,
            state=GroupState.EMPTY,
            current_state_timestamp=UNKNOWN_STATE_TIMESTAMP,
            generation=0,
            subscribed_topics=None,
        )
    # A record stores a missing protocol type as "" (§9.3). Kafka's GM loadGroup reads "" back as None, but
    # adding the first loaded member sets it to the members' protocol type, "" included. So a loaded Empty
    # group with "" has no protocol type (§7.6 case (c)); a Stable one has "" (case (d): nothing expires).
    if group.members:
        protocol_type: str | None = group.protocol_type
        state = GroupState.STABLE
    else:
        protocol_type = group.protocol_type or None
        state = GroupState.EMPTY
    return GroupView(
        protocol_type=protocol_type,
        state=state,
        current_state_timestamp=group.current_state_timestamp,
        generation=group.generation,
        subscribed_topics=subscribed_topics(group),
    )
