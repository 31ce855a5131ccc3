"""The consumer group leader's partition assignors: range, roundrobin, sticky and cooperative-sticky.

What the elected leader of a "consumer" group runs between JoinGroup and SyncGroup, following Apache Kafka
3.x's client assignors (``RangeAssignor``, ``RoundRobinAssignor``, ``StickyAssignor``,
``CooperativeStickyAssignor`` and their ``AbstractStickyAssignor``). ``assign`` answers every member's
:class:`~zkcoord.wire.consumer_protocol.Assignment` from the members' subscriptions and the partition count of
each topic; ``assignor_for`` and ``rebalance_protocol`` pick assignors and the rebalance protocol the way
``partition.assignment.strategy`` does in Kafka. docs/assignors.md says when to choose which.

This module holds range and roundrobin and chooses among all four; the sticky ones live in
``zkcoord.assign.sticky`` (their algorithm in ``zkcoord.assign.sticky_balance``), the interface in
``zkcoord.assign.common``. The names callers use are all importable from here.

Pure: no IO, no clock, no gevent. Imports only zkcoord.errors, zkcoord.model, zkcoord.wire.consumer_protocol and
the other zkcoord.assign modules; must not import the client, the coordinator or anything that does IO.
"""

from collections.abc import Mapping, Sequence

from zkcoord.assign.common import (
    COOPERATIVE,
    EAGER,
    ConsumerAssignor,
    MemberSubscription,
    as_assignments,
    checked_members,
    known_partitions_per_topic,
)
from zkcoord.assign.java import java_string_key
from zkcoord.assign.sticky import (
    COOPERATIVE_STICKY,
    STICKY,
    CooperativeStickyAssignor,
    StickyAssignor,
    StickyUserData,
    decode_cooperative_user_data,
    decode_sticky_user_data,
    encode_cooperative_user_data,
    encode_sticky_user_data,
)
from zkcoord.errors import ConfigError
from zkcoord.model import TopicPartition
from zkcoord.wire.consumer_protocol import Assignment

__all__ = [
    "ASSIGNOR_NAMES",
    "COOPERATIVE",
    "COOPERATIVE_STICKY",
    "EAGER",
    "RANGE",
    "ROUNDROBIN",
    "STICKY",
    "ConsumerAssignor",
    "CooperativeStickyAssignor",
    "MemberSubscription",
    "RangeAssignor",
    "RoundRobinAssignor",
    "StickyAssignor",
    "StickyUserData",
    "assignor_for",
    "decode_cooperative_user_data",
    "decode_sticky_user_data",
    "encode_cooperative_user_data",
    "encode_sticky_user_data",
    "rebalance_protocol",
]

RANGE = "range"
ROUNDROBIN = "roundrobin"


def _member_key(member: MemberSubscription) -> tuple:
    """Kafka's AbstractPartitionAssignor.MemberInfo order (KIP-345): static members first, by
    group.instance.id; then dynamic members by member id. The trailing member id only breaks a tie Kafka
    leaves open (two members naming the same instance id), so the result never depends on input order."""
    if member.group_instance_id is not None:
        return (0, java_string_key(member.group_instance_id), java_string_key(member.member_id))
    return (1, b"", java_string_key(member.member_id))


class RangeAssignor(ConsumerAssignor):
    """Per topic: partitions in numeric order split into contiguous ranges over the topic's subscribers in
    MemberInfo order; the first ``n % members`` subscribers get one extra (Kafka RangeAssignor)."""

    name = RANGE

    def assign(
        self, partitions_per_topic: Mapping[str, int], members: Sequence[MemberSubscription], generation: int
    ) -> dict[str, Assignment]:
        members = checked_members(members)
        known = known_partitions_per_topic(partitions_per_topic, members)
        result: dict[str, list[TopicPartition]] = {member.member_id: [] for member in members}
        ordered = sorted(members, key=_member_key)
        for topic, count in known.items():
            subscribers = [member.member_id for member in ordered if topic in member.subscription.topics]
            per_member, with_extra = divmod(count, len(subscribers))
            for index, member_id in enumerate(subscribers):
                start = per_member * index + min(index, with_extra)
                length = per_member + (1 if index < with_extra else 0)
                result[member_id].extend(TopicPartition(topic, number) for number in range(start, start + length))
        return as_assignments(result)


class RoundRobinAssignor(ConsumerAssignor):
    """All subscribed topic-partitions, sorted, dealt in turn to the members in MemberInfo order; a member
    not subscribed to a partition's topic is skipped for that partition (Kafka RoundRobinAssignor)."""

    name = ROUNDROBIN

    def assign(
        self, partitions_per_topic: Mapping[str, int], members: Sequence[MemberSubscription], generation: int
    ) -> dict[str, Assignment]:
        members = checked_members(members)
        known = known_partitions_per_topic(partitions_per_topic, members)
        result: dict[str, list[TopicPartition]] = {member.member_id: [] for member in members}
        ordered = sorted(members, key=_member_key)
        topics_of = [frozenset(member.subscription.topics) for member in ordered]
        cursor = 0  # Kafka's CircularIterator over the sorted members
        for topic, count in known.items():
            for number in range(count):
                # Someone subscribes to every known topic, so this stops within one lap.
                while topic not in topics_of[cursor]:
                    cursor = (cursor + 1) % len(ordered)
                result[ordered[cursor].member_id].append(TopicPartition(topic, number))
                cursor = (cursor + 1) % len(ordered)
        return as_assignments(result)


# ---- choosing assignors ---------------------------------------------------------------------------------

_ASSIGNORS: dict[str, type[ConsumerAssignor]] = {
    RANGE: RangeAssignor,
    ROUNDROBIN: RoundRobinAssignor,
    STICKY: StickyAssignor,
    COOPERATIVE_STICKY: CooperativeStickyAssignor,
}
ASSIGNOR_NAMES: tuple[str, ...] = tuple(_ASSIGNORS)

# Kafka's RebalanceProtocol ids: the highest id every assignor supports wins.
_PROTOCOL_RANK = {EAGER: 0, COOPERATIVE: 1}


def assignor_for(name: str) -> ConsumerAssignor:
    """A new assignor for ``name`` (sticky ones keep per-consumer state, so never share one)."""
    assignor_class = _ASSIGNORS.get(name)
    if assignor_class is None:
        raise ConfigError(f"unknown partition assignor {name!r}; valid names: {', '.join(ASSIGNOR_NAMES)}")
    return assignor_class()


def rebalance_protocol(assignors: Sequence[ConsumerAssignor]) -> str:
    """The highest protocol every assignor supports, as Kafka's ConsumerCoordinator picks it: COOPERATIVE only
    when all of them support it."""
    if not assignors:
        raise ConfigError("no partition assignor configured")
    common = set(assignors[0].supported_protocols)
    for assignor in assignors[1:]:
        common &= set(assignor.supported_protocols)
    if not common:
        names = ", ".join(assignor.name for assignor in assignors)
        raise ConfigError(f"partition assignors {names} have no rebalance protocol in common")
    return max(common, key=_PROTOCOL_RANK.__getitem__)
