"""What every consumer group assignor shares: the assignor interface, the member as the leader sees it, and
the orderings and checks all of them apply.

Pure: no IO, no clock, no gevent. Imports only zkcoord.assign.java, zkcoord.model and
zkcoord.wire.consumer_protocol; must not import the other assignor modules (they import this one).
"""

import abc
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from zkcoord.assign.java import java_string_key
from zkcoord.model import TopicPartition
from zkcoord.wire.consumer_protocol import Assignment, Subscription

EAGER = "eager"
COOPERATIVE = "cooperative"


@dataclass(frozen=True, slots=True)
class MemberSubscription:
    """One group member as the leader sees it in the JoinGroup response."""

    member_id: str
    group_instance_id: str | None
    subscription: Subscription


class ConsumerAssignor(abc.ABC):
    """One ``partition.assignment.strategy``. Instances belong to one consumer: sticky ones remember what
    that consumer was last given."""

    name: str
    supported_protocols: tuple[str, ...] = (EAGER,)

    def subscription_user_data(self, topics: Collection[str]) -> bytes | None:
        """The bytes this consumer puts in ``Subscription.user_data`` when it joins."""
        return None

    def on_assignment(self, assignment: Assignment, generation: int) -> None:
        """Called by the consumer with what SyncGroup gave it, and the generation it belongs to."""
        return None  # stateless by default; the sticky assignors remember what they got

    @abc.abstractmethod
    def assign(
        self, partitions_per_topic: Mapping[str, int], members: Sequence[MemberSubscription], generation: int
    ) -> dict[str, Assignment]:
        """member_id -> Assignment for every member (possibly empty). Topics missing from
        ``partitions_per_topic`` are ignored; a topic with n partitions has partitions 0..n-1."""


def partition_key(partition: TopicPartition) -> tuple[bytes, int]:
    """Java's order of topic-partitions: topic by ``String.compareTo``, then partition number."""
    return (java_string_key(partition.topic), partition.partition)


def sorted_partitions(partitions: Iterable[TopicPartition]) -> list[TopicPartition]:
    return sorted(partitions, key=partition_key)


def known_partitions_per_topic(
    partitions_per_topic: Mapping[str, int], members: Sequence[MemberSubscription]
) -> dict[str, int]:
    """Topics some member subscribes to and the cluster knows, in Java string order (Kafka builds
    partitionsPerTopic from the subscribed topics only)."""
    subscribed = {topic for member in members for topic in member.subscription.topics}
    known = {topic: max(int(partitions_per_topic[topic]), 0) for topic in subscribed if topic in partitions_per_topic}
    return {topic: known[topic] for topic in sorted(known, key=java_string_key)}


def checked_members(members: Sequence[MemberSubscription]) -> list[MemberSubscription]:
    """``members`` as a list; raises ValueError when a member id appears twice."""
    seen: set[str] = set()
    for member in members:
        if member.member_id in seen:
            raise ValueError(f"member {member.member_id!r} appears twice")
        seen.add(member.member_id)
    return list(members)


def as_assignments(partitions_by_member: Mapping[str, Iterable[TopicPartition]]) -> dict[str, Assignment]:
    """Every member's partitions as its :class:`Assignment`, partitions in Java order."""
    return {
        member_id: Assignment(tuple(sorted_partitions(partitions)))
        for member_id, partitions in partitions_by_member.items()
    }
