"""Harness for legacy groups on a real ZooKeeper: expected ownership and convergence checks."""

from collections.abc import Collection, Mapping

from kazoo.client import KazooClient

from zkcoord.assign.legacy import group_assignment
from zkcoord.model import TopicPartition
from zkcoord.zk.admin import GroupSnapshot, read_group


def expected_owners(strategy: str, snapshot: GroupSnapshot) -> dict[TopicPartition, str]:
    """What the pure assignor says every partition's owner thread should be, for this group view."""
    decided = group_assignment(strategy, snapshot.members, snapshot.partitions)
    return {TopicPartition(t, p): thread for thread, claims in decided.items() for t, p in claims}


def converged(
    client: KazooClient, group: str, strategy: str = "range", members: Collection[str] | None = None
) -> GroupSnapshot | None:
    """The group's snapshot if ownership is exclusive, complete and equal to the pure assignor's, else None."""
    snapshot = read_group(client, group)
    if members is not None and set(snapshot.members) != set(members):
        return None
    if snapshot.problems() or snapshot.owners != expected_owners(strategy, snapshot):
        return None
    return snapshot


ASSIGNMENT_EVENTS = frozenset({"legacy.assignment", "client.assignment"})


def ownership_overlaps(
    events: list[dict], killed: Mapping[str, float] | None = None
) -> list[tuple[TopicPartition, str, str]]:
    """Partitions two members believed they owned at the same instant, from ``legacy.assignment`` or
    ``client.assignment`` events (``assignment`` maps a thread id or a member name to ``[[topic, partition], ...]``).

    Each member's belief is over-approximated: an assignment counts from just before it was switched
    in (``monotonic_before``) until just after the next switch (``monotonic_after``). No overlap among
    these widened intervals proves no overlap of the real ones. ``killed`` maps a member to the
    ``time.monotonic()`` moment it was killed: a belief held then ends there, as the process did.
    """
    killed = killed or {}
    intervals: dict[TopicPartition, list[tuple[float, float, str]]] = {}
    by_member: dict[str, list[dict]] = {}
    for event in events:
        if event["type"] in ASSIGNMENT_EVENTS:
            by_member.setdefault(event["member"], []).append(event)
    for member, changes in by_member.items():
        changes.sort(key=lambda e: e["monotonic_before"])
        kill = killed.get(member)
        for current, following in zip(changes, [*changes[1:], None], strict=True):
            start = current["monotonic_before"]
            end = following["monotonic_after"] if following else float("inf")
            if kill is not None and start <= kill < end:
                end = kill
            for claims in current["assignment"].values():
                for topic, partition in claims:
                    intervals.setdefault(TopicPartition(topic, partition), []).append((start, end, member))
    overlaps = []
    for tp, spans in intervals.items():
        for i, (start, end, holder) in enumerate(spans):
            for other_start, other_end, other in spans[i + 1 :]:
                if other != holder and other_start < end and start < other_end:
                    overlaps.append((tp, holder, other))
    return overlaps
