"""What the poll side consumes: how the consumer subscribed, the partitions it owns, the position it reads each
from and which it paused (Kafka's SubscriptionState).

Only the poll side's thread uses it; the worker never does. Pure: imports only zkcoord.errors and zkcoord.model;
must not import the worker or anything that does IO.
"""

from collections.abc import Iterable

from zkcoord.errors import IllegalStateError
from zkcoord.model import TopicPartition

TOPICS = "topics"
PATTERN = "pattern"
MANUAL = "manual"


class SubscriptionState:
    """The consumer's partitions and positions; ``kind`` is how it got them, None before it subscribed."""

    def __init__(self) -> None:
        self.kind: str | None = None  # TOPICS or PATTERN through the group, MANUAL through assign()
        self.assigned: set[TopicPartition] = set()
        self.positions: dict[TopicPartition, int] = {}
        self.paused: set[TopicPartition] = set()

    @property
    def in_group(self) -> bool:
        """Subscribed through the group (to topics or a pattern), not assigned by hand."""
        return self.kind in (TOPICS, PATTERN)

    def add(self, partitions: Iterable[TopicPartition]) -> None:
        self.assigned.update(partitions)

    def remove(self, partitions: Iterable[TopicPartition]) -> None:
        """Stop owning ``partitions``: their positions and pauses go with them."""
        partitions = list(partitions)
        self.assigned.difference_update(partitions)
        for partition in partitions:
            self.positions.pop(partition, None)
            self.paused.discard(partition)

    def clear(self) -> None:
        self.kind = None
        self.assigned.clear()
        self.positions.clear()
        self.paused.clear()

    def fetchable(self) -> list[TopicPartition]:
        """Assigned and not paused, sorted."""
        return sorted(tp for tp in self.assigned if tp not in self.paused)

    def assigned_partition(self, partition: TopicPartition) -> TopicPartition:
        """``partition`` as a TopicPartition; IllegalStateError when the consumer does not own it."""
        partition = TopicPartition(*partition)
        if partition not in self.assigned:
            raise IllegalStateError(f"{partition} is not assigned to this consumer")
        return partition
