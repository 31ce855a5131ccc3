"""A group's offsets in zkcoord's log against the same group's on a Kafka cluster (pure: no IO, no clock).

Step 0005 copies a LOG_ONLY group's committed offsets into a Kafka cluster's group coordinator (up) and
copies back what was committed there meanwhile (down). Both directions follow one rule, :func:`plan_copy`:
write where the destination lacks the partition or holds a smaller offset; where the destination is ahead,
write nothing and refuse, unless the operator asked to rewind (never a silent regression); leave partitions
that only the destination holds alone. :func:`pair_offsets` is ``migrate verify``'s comparison of the two.

Must not import kafka-python, kazoo, sockets or the clock.
"""

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from zkcoord.migration.phases import GroupFacts, KafkaCopy

Partition = tuple[str, int]
ZKCOORD, KAFKA = "zkcoord", "Kafka"
INACTIVE_GROUP_STATES = frozenset({"Empty", "Dead"})  # kafka-consumer-groups --reset-offsets accepts only these


class Side(enum.Enum):
    """Which store is ahead on one partition."""

    MATCH = "match"
    ZKCOORD_AHEAD = "zkcoord_ahead"  # a consumer of the Kafka cluster would go back
    KAFKA_AHEAD = "kafka_ahead"  # committed on Kafka since the copy: `migrate down` copies it back
    ONLY_ZKCOORD = "only_zkcoord"
    ONLY_KAFKA = "only_kafka"


@dataclass(frozen=True)
class OffsetPair:
    topic: str
    partition: int
    zkcoord: int | None
    kafka: int | None

    @property
    def status(self) -> Side:
        if self.kafka is None:
            return Side.ONLY_ZKCOORD
        if self.zkcoord is None:
            return Side.ONLY_KAFKA
        if self.zkcoord == self.kafka:
            return Side.MATCH
        return Side.KAFKA_AHEAD if self.kafka > self.zkcoord else Side.ZKCOORD_AHEAD

    @property
    def kafka_minus_zkcoord(self) -> int | None:
        return None if self.zkcoord is None or self.kafka is None else self.kafka - self.zkcoord


def pair_offsets(zkcoord: Mapping[Partition, int], kafka: Mapping[Partition, int]) -> list[OffsetPair]:
    """Every partition either side holds, ordered by topic and partition."""
    return [OffsetPair(t, p, zkcoord.get((t, p)), kafka.get((t, p))) for t, p in sorted(set(zkcoord) | set(kafka))]


def behind_on_kafka(rows: Iterable[OffsetPair]) -> list[OffsetPair]:
    """Partitions where a consumer of the Kafka cluster would start before zkcoord's committed offset."""
    return [row for row in rows if row.status in (Side.ZKCOORD_AHEAD, Side.ONLY_ZKCOORD)]


@dataclass(frozen=True)
class CopyPlan:
    """What copying ``source`` over ``destination`` writes, and what it must not touch without a rewind."""

    writes: dict[Partition, int]
    rewinds: tuple[Partition, ...]  # writes that lower the destination's offset (only when asked to rewind)
    ahead: tuple[Partition, ...]  # the destination is ahead and was left alone: the copy is refused


def plan_copy(source: Mapping[Partition, int], destination: Mapping[Partition, int], rewind: bool = False) -> CopyPlan:
    """The partitions to write so that ``destination`` holds ``source``'s offsets, never lowering one unless
    ``rewind``; partitions only ``destination`` holds are not touched."""
    ahead = sorted(p for p, offset in source.items() if p in destination and destination[p] > offset)
    writes = {p: offset for p, offset in sorted(source.items()) if destination.get(p, -1) < offset}
    if rewind:
        writes.update((p, source[p]) for p in ahead)
        return CopyPlan(dict(sorted(writes.items())), tuple(ahead), ())
    return CopyPlan(writes, (), tuple(ahead))


def ahead_reasons(
    plan: CopyPlan,
    source: Mapping[Partition, int],
    destination: Mapping[Partition, int],
    names: tuple[str, str],
    hint: str,
) -> list[str]:
    """One line naming the partitions (up to three) where the destination is ahead of the source."""
    if not plan.ahead:
        return []
    source_name, destination_name = names
    shown = ", ".join(
        f"{t}-{p} ({destination_name} {destination[(t, p)]}, {source_name} {source[(t, p)]})" for t, p in plan.ahead[:3]
    )
    more = f" and {len(plan.ahead) - 3} more" if len(plan.ahead) > 3 else ""
    return [
        f"{len(plan.ahead)} partition(s) are ahead on {destination_name}: {shown}{more}; copying {source_name}'s "
        f"offsets would move them back, so nothing was copied; {hint}"
    ]


def busy_group_reasons(group: str, bootstrap: str, state: str, members: Iterable[str]) -> list[str]:
    """Why the Kafka group cannot take a simple commit now (kafka-consumer-groups --reset-offsets' rule)."""
    if state in INACTIVE_GROUP_STATES:
        return []
    listed = sorted(members)
    shown = ", ".join(listed[:5]) + (f" and {len(listed) - 5} more" if len(listed) > 5 else "")
    return [
        f"group {group} on the Kafka cluster at {bootstrap} is not inactive (state {state}"
        + (f", members {shown}" if shown else "")
        + "): offsets can only be copied if the group is inactive, as kafka-consumer-groups --reset-offsets "
        "requires; stop its consumers first"
    ]


def live_members_reasons(facts: GroupFacts, why: str) -> list[str]:
    """One line naming the group's live zkcoord members of either protocol (up to five) and ``why`` they are in
    the way."""
    names = sorted([m.consumer_id for m in facts.legacy_members] + list(facts.coordinator_members))
    if not names:
        return []
    more = f" and {len(names) - 5} more" if len(names) > 5 else ""
    return [f"the group has live members on zkcoord ({', '.join(names[:5])}{more}); {why}"]


def other_cluster_reasons(recorded: KafkaCopy | None, target: KafkaCopy) -> list[str]:
    """Why ``target`` is not the cluster the group's offsets were copied to (empty when it is, or none was)."""
    if recorded is None or recorded.cluster_id == target.cluster_id:
        return []
    return [
        f"the group's offsets were copied to the Kafka cluster {recorded.cluster_id} (at {recorded.bootstrap}), not "
        f"to {target.cluster_id} (at {target.bootstrap}): pass --target-bootstrap-server {recorded.bootstrap}"
    ]
