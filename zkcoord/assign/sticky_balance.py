"""The sticky assignment itself (Kafka 3.x ``AbstractStickyAssignor``): previous ownership resolved from every
member's claims, then the constrained algorithm when all members subscribe to the same topics, the general one
otherwise. ``zkcoord.assign.sticky`` wraps it into the sticky and cooperative-sticky assignors.

Pure: no IO, no clock, no gevent. Imports only zkcoord.assign.common, zkcoord.assign.java and zkcoord.model;
must not import the assignors (zkcoord.assign.sticky and .consumer import it).
"""

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from zkcoord.assign.common import MemberSubscription, known_partitions_per_topic, partition_key, sorted_partitions
from zkcoord.assign.java import java_string_key
from zkcoord.model import TopicPartition

log = logging.getLogger(__name__)

# Kafka's AbstractStickyAssignor.DEFAULT_GENERATION: a claim that carries no generation ranks below any that does.
DEFAULT_GENERATION = -1


# ---- sticky: claims of previous ownership ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Claim:
    """A member saying "I had these partitions at this generation"."""

    member_id: str
    partitions: tuple[TopicPartition, ...]
    generation: int | None


@dataclass(frozen=True, slots=True)
class Ownership:
    """Previous ownership after resolving every member's claims against each other."""

    owned: dict[str, list[TopicPartition]]  # member -> partitions it validly owned, sorted
    owner: dict[TopicPartition, str]  # partition -> that member
    previous: dict[TopicPartition, str]  # partition -> the best claimant of an older generation
    claimants: dict[TopicPartition, set[str]]  # partition -> every member that claimed it, any generation


def _resolve_claims(claims: Sequence[Claim], known: Mapping[str, int]) -> Ownership:
    """Per partition, the claim of the highest generation wins (no generation ranks as -1). Two members
    claiming one partition at that same generation cancel each other out: neither owns it (Kafka 3.x
    AbstractStickyAssignor's partitionsWithMultiplePreviousOwners). The best claim of an older generation
    becomes the partition's previous owner, which the general algorithm prefers when moving it back
    (AbstractStickyAssignor's prevAssignment / ConsumerGenerationPair)."""
    by_partition: dict[TopicPartition, dict[str, int]] = {}
    for claim in claims:
        generation = DEFAULT_GENERATION if claim.generation is None else claim.generation
        for partition in claim.partitions:
            if 0 <= partition.partition < known.get(partition.topic, 0):
                by_partition.setdefault(partition, {})[claim.member_id] = generation
    owned: dict[str, list[TopicPartition]] = {claim.member_id: [] for claim in claims}
    owner: dict[TopicPartition, str] = {}
    previous: dict[TopicPartition, str] = {}
    for partition in sorted_partitions(by_partition):
        generations = by_partition[partition]
        ranked = sorted(generations.items(), key=lambda item: (-item[1], java_string_key(item[0])))
        top = ranked[0][1]
        at_top = [member_id for member_id, generation in ranked if generation == top]
        if len(at_top) == 1:
            owner[partition] = at_top[0]
            owned[at_top[0]].append(partition)
        else:
            log.warning(
                "partition claimed by several members in one generation partition=%s generation=%s members=%s",
                partition,
                top,
                ",".join(at_top),
            )
        older = [member_id for member_id, generation in ranked if generation < top]
        if older:
            previous[partition] = older[0]
    return Ownership(owned, owner, previous, {p: set(g) for p, g in by_partition.items()})


# ---- sticky: the balanced case (every member subscribes to the same topics) -----------------------------


def _constrained_assign(
    known: Mapping[str, int], member_ids: Sequence[str], owned: Mapping[str, list[TopicPartition]]
) -> dict[str, list[TopicPartition]]:
    """Kafka 3.x AbstractStickyAssignor.constrainedAssign. Every member ends with minQuota or maxQuota
    partitions and exactly ``total % members`` of them with maxQuota. Members first keep what they owned, up to
    maxQuota while maxQuota slots remain, else up to minQuota; the rest is dealt round-robin to members under
    minQuota, then one each to members at minQuota until the maxQuota slots are used up.

    ``member_ids`` come in Java string order (Kafka walks a HashMap here; a fixed order keeps the result
    independent of the input order)."""
    total = sum(known.values())
    min_quota, expected_over_min = divmod(total, len(member_ids))
    max_quota = min_quota + (1 if expected_over_min else 0)
    over_min = 0
    assignment: dict[str, list[TopicPartition]] = {member_id: [] for member_id in member_ids}
    under_min: list[str] = []
    at_min: list[str] = []
    for member_id in member_ids:
        owned_now = owned.get(member_id, [])
        if len(owned_now) < min_quota:
            assignment[member_id].extend(owned_now)
            under_min.append(member_id)
        elif len(owned_now) >= max_quota and over_min < expected_over_min:
            over_min += 1
            if over_min == expected_over_min:
                at_min.clear()
            assignment[member_id].extend(owned_now[:max_quota])
        else:
            assignment[member_id].extend(owned_now[:min_quota])
            if over_min < expected_over_min:
                at_min.append(member_id)
    kept = {partition for partitions in assignment.values() for partition in partitions}
    unassigned = [
        TopicPartition(topic, number)
        for topic, count in known.items()
        for number in range(count)
        if TopicPartition(topic, number) not in kept
    ]
    # Round-robin over the members under minQuota (Kafka's LinkedList iterator, restarted at each lap); once
    # none is left, one partition each to the members at minQuota, in member order.
    cursor = 0
    for partition in unassigned:
        if cursor < len(under_min):
            member_id = under_min[cursor]
            cursor += 1
        elif not under_min:
            if not at_min:
                # Kafka throws IllegalStateException here; the quotas make it unreachable.
                raise RuntimeError("sticky assignor: partitions left but every member is at maxQuota")
            member_id = at_min.pop(0)
        else:
            member_id = under_min[0]
            cursor = 1
        assignment[member_id].append(partition)
        if len(assignment[member_id]) == min_quota and member_id in under_min:
            cursor -= 1
            under_min.remove(member_id)
            at_min.append(member_id)
    return assignment


# ---- sticky: the general case (subscriptions differ) ----------------------------------------------------


class _PartitionMovements:
    """Kafka AbstractStickyAssignor.PartitionMovements: remembers which partitions moved between which members
    during one balance, so a move in the opposite direction moves back a partition that already moved instead
    of disturbing another one (keeps the result sticky)."""

    def __init__(self) -> None:
        self._by_topic: dict[str, dict[tuple[str, str], set[TopicPartition]]] = {}
        self._moves: dict[TopicPartition, tuple[str, str]] = {}

    def _remove(self, partition: TopicPartition) -> tuple[str, str]:
        pair = self._moves.pop(partition)
        pairs = self._by_topic[partition.topic]
        pairs[pair].discard(partition)
        if not pairs[pair]:
            del pairs[pair]
        if not pairs:
            del self._by_topic[partition.topic]
        return pair

    def _add(self, partition: TopicPartition, pair: tuple[str, str]) -> None:
        self._moves[partition] = pair
        self._by_topic.setdefault(partition.topic, {}).setdefault(pair, set()).add(partition)

    def move(self, partition: TopicPartition, old: str, new: str) -> None:
        if partition in self._moves:
            source, _ = self._remove(partition)
            if source != new:
                self._add(partition, (source, new))
        else:
            self._add(partition, (old, new))

    def partition_to_move(self, partition: TopicPartition, old: str, new: str) -> TopicPartition:
        pairs = self._by_topic.get(partition.topic)
        if pairs is None:
            return partition
        if partition in self._moves:
            old = self._moves[partition][0]
        moved_back = pairs.get((new, old))
        if not moved_back:
            return partition
        return min(moved_back, key=partition_key)  # Kafka takes a HashSet's first; any is valid


class _GeneralAssignment:
    """Kafka 3.x AbstractStickyAssignor.generalAssign: keep every still-valid previous assignment, hand the
    rest to the least loaded subscriber, then move partitions from the most to the least loaded members until
    no move improves the balance -- reverting the moves if the balance score did not improve."""

    def __init__(
        self,
        known: Mapping[str, int],
        topics_of: Mapping[str, frozenset[str]],
        ownership: Ownership,
    ) -> None:
        self.known = known
        self.partitions_of = {topic: [TopicPartition(topic, n) for n in range(count)] for topic, count in known.items()}
        self.member_key = {member_id: java_string_key(member_id) for member_id in topics_of}
        ordered_members = sorted(topics_of, key=self.member_key.__getitem__)
        self.subscribed = topics_of
        self.topics_of = {m: [t for t in known if t in topics_of[m]] for m in ordered_members}
        self.consumers_of = {t: [m for m in ordered_members if t in topics_of[m]] for t in known}
        self.max_size = {m: sum(known[t] for t in self.topics_of[m]) for m in ordered_members}
        self.previous = ownership.previous
        self.movements = _PartitionMovements()
        self.assignment: dict[str, list[TopicPartition]] = {m: [] for m in ordered_members}
        self.owner: dict[TopicPartition, str] = {}
        self.revocation_required = False
        for member_id in ordered_members:
            for partition in ownership.owned.get(member_id, []):
                if partition.topic in topics_of[member_id]:
                    self.assignment[member_id].append(partition)
                    self.owner[partition] = member_id
                else:
                    # The member unsubscribed from the topic: it must give the partition up.
                    self.revocation_required = True

    def _sorted_members(self) -> list[str]:
        return sorted(self.assignment, key=lambda m: (len(self.assignment[m]), self.member_key[m]))

    def _least_loaded_subscriber(self, topic: str) -> str | None:
        for member_id in self._sorted_members():
            if topic in self.subscribed[member_id]:
                return member_id
        return None

    def _is_balanced(self) -> bool:
        sizes = {member_id: len(partitions) for member_id, partitions in self.assignment.items()}
        if not sizes or min(sizes.values()) >= max(sizes.values()) - 1:
            return True
        for member_id in self._sorted_members():
            size = sizes[member_id]
            if size == self.max_size[member_id]:
                continue
            for topic in self.topics_of[member_id]:
                for partition in self.partitions_of[topic]:
                    other = self.owner.get(partition)
                    if other is not None and other != member_id and other in sizes and size < sizes[other]:
                        return False
        return True

    def _process_move(self, partition: TopicPartition, new: str) -> None:
        old = self.owner[partition]
        self.movements.move(partition, old, new)
        self.assignment[old].remove(partition)
        self.assignment[new].append(partition)
        self.owner[partition] = new

    def _reassign(self, partition: TopicPartition, new: str) -> None:
        actual = self.movements.partition_to_move(partition, self.owner[partition], new)
        self._process_move(actual, new)

    def _perform_reassignments(self, partitions: Sequence[TopicPartition]) -> bool:
        performed = False
        while True:
            modified = False
            for partition in partitions:
                if self._is_balanced():
                    break
                current = self.owner.get(partition)
                if current is None or current not in self.assignment:
                    continue
                size = len(self.assignment[current])
                previous = self.previous.get(partition)
                # Kafka moves a partition back to its previous owner whatever that owner subscribes to; it
                # must still subscribe to the topic here, or the result would be invalid.
                if (
                    previous is not None
                    and previous in self.assignment
                    and partition.topic in self.subscribed[previous]
                    and size > len(self.assignment[previous]) + 1
                ):
                    self._reassign(partition, previous)
                    performed = modified = True
                    continue
                for other in self.consumers_of[partition.topic]:
                    if other in self.assignment and size > len(self.assignment[other]) + 1:
                        target = self._least_loaded_subscriber(partition.topic)
                        if target is not None:
                            self._reassign(partition, target)
                            performed = modified = True
                        break
            if not modified:
                return performed

    def run(self) -> dict[str, list[TopicPartition]]:
        sorted_topics = sorted(self.known, key=lambda t: (len(self.consumers_of[t]), java_string_key(t)))
        sorted_partitions = [p for topic in sorted_topics for p in self.partitions_of[topic]]
        unassigned = [p for p in sorted_partitions if p not in self.owner]
        initializing = all(not partitions for partitions in self.assignment.values())

        for partition in unassigned:
            target = self._least_loaded_subscriber(partition.topic)
            if target is not None:
                self.assignment[target].append(partition)
                self.owner[partition] = target

        # Only partitions of topics with two or more subscribers, and members that could gain or lose a
        # partition, take part in balancing.
        movable_topics = {topic for topic, consumers in self.consumers_of.items() if len(consumers) >= 2}
        sorted_partitions = [p for p in sorted_partitions if p.topic in movable_topics]
        unassigned = [p for p in unassigned if p.topic in movable_topics]
        fixed: dict[str, list[TopicPartition]] = {}
        for member_id in list(self.assignment):
            partitions = self.assignment[member_id]
            if len(partitions) < self.max_size[member_id]:
                continue
            if any(p.topic in movable_topics for p in partitions):
                continue
            fixed[member_id] = self.assignment.pop(member_id)

        before = {member_id: list(partitions) for member_id, partitions in self.assignment.items()}
        owner_before = dict(self.owner)
        # With nothing to revoke for subscription changes, first try to balance by moving only new partitions.
        if not self.revocation_required:
            self._perform_reassignments(unassigned)
        performed = self._perform_reassignments(sorted_partitions)
        if not initializing and performed and _balance_score(self.assignment) >= _balance_score(before):
            self.assignment = before
            self.owner = owner_before
        self.assignment.update(fixed)
        return self.assignment


def _balance_score(assignment: Mapping[str, list[TopicPartition]]) -> int:
    """Kafka's getBalanceScore: the sum over all member pairs of their size difference (0 = perfect)."""
    sizes = sorted(len(partitions) for partitions in assignment.values())
    return sum(size * (2 * index - len(sizes) + 1) for index, size in enumerate(sizes))


def sticky_assign(
    partitions_per_topic: Mapping[str, int], members: Sequence[MemberSubscription], claims: Sequence[Claim]
) -> tuple[dict[str, list[TopicPartition]], Ownership]:
    """Kafka AbstractStickyAssignor.assign: the constrained algorithm when every member subscribes to the same
    (known) topics, the general one otherwise. Returns the assignment and the resolved previous ownership."""
    known = known_partitions_per_topic(partitions_per_topic, members)
    ownership = _resolve_claims(claims, known)
    if not members:
        return {}, ownership
    topics_of = {member.member_id: frozenset(t for t in member.subscription.topics if t in known) for member in members}
    member_ids = sorted(topics_of, key=java_string_key)
    # Kafka compares the raw subscriptions; comparing only topics the cluster knows lets a member that also
    # names a not-yet-created topic still get the balanced algorithm.
    if len(set(topics_of.values())) == 1:
        return _constrained_assign(known, member_ids, ownership.owned), ownership
    return _GeneralAssignment(known, topics_of, ownership).run(), ownership
