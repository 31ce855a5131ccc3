"""Small frozen value types shared by every layer: the package's floor, importing nothing of zkcoord."""

import enum
from typing import NamedTuple


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


class GroupState(str, enum.Enum):
    """A classic group's state under Kafka's names (group-coordinator.md §1.1); compares equal to the name."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    # As enum.StrEnum (3.11+) does: print and format as the name Kafka shows, not "GroupState.STABLE".
    __str__ = str.__str__
    __format__ = str.__format__


Address = tuple[str, int]  # (host, port) of a node
