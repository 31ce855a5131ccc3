"""The consumer group leader's partition assignors: range, roundrobin, sticky and cooperative-sticky.

What the elected leader of a "consumer" group runs between JoinGroup and SyncGroup, following Apache Kafka
3.x's client assignors (``RangeAssignor``, ``RoundRobinAssignor``, ``StickyAssignor``,
``CooperativeStickyAssignor`` and their ``AbstractStickyAssignor``). ``assign`` answers every member's
:class:`~zkcoord.wire.consumer_protocol.Assignment` from the members' subscriptions and the partition count of
each topic; ``assignor_for`` and ``rebalance_protocol`` pick assignors and the rebalance protocol the way
``partition.assignment.strategy`` does in Kafka. docs/assignors.md says when to choose which.

Sticky user data (the bytes in ``Subscription.user_data``), msgpack maps written at version 0 and read like the
consumer protocol (any version >= 0, unknown keys ignored):

* ``sticky``: ``{version: 0, partitions: [{topic, partitions: [int32]}], generation: int32 | nil}`` -- the
  member's last assignment and the generation it came with (Kafka StickyAssignor's ConsumerUserData). In the
  eager protocol a member revokes everything before it rejoins, so its ``owned_partitions`` are empty and this
  is the only place its previous assignment survives.
* ``cooperative-sticky``: ``{version: 0, generation: int32}`` -- the generation of the member's last
  assignment (-1 before the first); the partitions travel in ``owned_partitions``.

Bytes that do not decode count as "no previous assignment" (sticky) or generation -1 (cooperative-sticky), as
in Kafka: one member's garbage must not fail the whole group's rebalance.

Pure: no IO, no clock, no gevent. Imports only msgpack, zkcoord.errors, zkcoord.model, zkcoord.assign.java and
zkcoord.wire.consumer_protocol; must not import the client, the coordinator or anything that does IO.
"""

import abc
import logging
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from zkcoord.assign.java import java_string_key
from zkcoord.errors import ConfigError
from zkcoord.model import TopicPartition
from zkcoord.wire.consumer_protocol import (
    Assignment,
    ConsumerProtocolError,
    Subscription,
    decoded_partitions,
    is_int32,
    pack_map,
    partitions_by_topic,
    unpack_map,
)

log = logging.getLogger(__name__)

EAGER = "eager"
COOPERATIVE = "cooperative"

RANGE = "range"
ROUNDROBIN = "roundrobin"
STICKY = "sticky"
COOPERATIVE_STICKY = "cooperative-sticky"

# Kafka's AbstractStickyAssignor.DEFAULT_GENERATION: a claim that carries no generation ranks below any that does.
DEFAULT_GENERATION = -1
STICKY_USER_DATA_VERSION = 0


@dataclass(frozen=True, slots=True)
class MemberSubscription:
    """One group member as the leader sees it in the JoinGroup response."""

    member_id: str
    group_instance_id: str | None
    subscription: Subscription


@dataclass(frozen=True, slots=True)
class StickyUserData:
    """What a sticky member remembers: its last assignment and that assignment's generation."""

    partitions: tuple[TopicPartition, ...]
    generation: int | None = None


# ---- sticky user data codecs ----------------------------------------------------------------------------


def _decoded_generation(message: dict, what: str) -> int | None:
    generation = message.get("generation")
    if generation is not None and not is_int32(generation):
        raise ConsumerProtocolError(f"{what}: generation must be an int32 or nil")
    return generation


def encode_sticky_user_data(user_data: StickyUserData) -> bytes:
    """``{version: 0, partitions: [{topic, partitions}], generation}``, topics in first-seen order."""
    what = "sticky user data"
    partitions = partitions_by_topic(user_data.partitions, "partitions", what)
    if user_data.generation is not None and not is_int32(user_data.generation):
        raise ConsumerProtocolError(f"{what}: generation must be an int32 or None")
    message = {
        "version": STICKY_USER_DATA_VERSION,
        "partitions": partitions,
        "generation": user_data.generation,
    }
    return pack_map(message, what)


def decode_sticky_user_data(data: bytes) -> StickyUserData:
    """Read sticky user data; raises :class:`ConsumerProtocolError` for anything else."""
    what = "sticky user data"
    message = unpack_map(data, what)
    partitions = decoded_partitions(message.get("partitions"), "partitions", what)
    return StickyUserData(partitions, _decoded_generation(message, what))


def encode_cooperative_user_data(generation: int) -> bytes:
    """``{version: 0, generation}`` (Kafka CooperativeStickyAssignor's COOPERATIVE_STICKY_ASSIGNOR_USER_DATA_V0)."""
    if not is_int32(generation):
        raise ConsumerProtocolError("cooperative-sticky user data: generation must be an int32")
    return pack_map({"version": STICKY_USER_DATA_VERSION, "generation": generation}, "cooperative-sticky user data")


def decode_cooperative_user_data(data: bytes) -> int:
    """The generation in cooperative-sticky user data; raises :class:`ConsumerProtocolError` if it has none."""
    what = "cooperative-sticky user data"
    generation = _decoded_generation(unpack_map(data, what), what)
    if generation is None:
        raise ConsumerProtocolError(f"{what}: generation is missing")
    return generation


# ---- ordering helpers -----------------------------------------------------------------------------------


def _member_key(member: MemberSubscription) -> tuple:
    """Kafka's AbstractPartitionAssignor.MemberInfo order (KIP-345): static members first, by
    group.instance.id; then dynamic members by member id. The trailing member id only breaks a tie Kafka
    leaves open (two members naming the same instance id), so the result never depends on input order."""
    if member.group_instance_id is not None:
        return (0, java_string_key(member.group_instance_id), java_string_key(member.member_id))
    return (1, b"", java_string_key(member.member_id))


def _partition_key(partition: TopicPartition) -> tuple[bytes, int]:
    return (java_string_key(partition.topic), partition.partition)


def _sorted_partitions(partitions: Iterable[TopicPartition]) -> list[TopicPartition]:
    return sorted(partitions, key=_partition_key)


def _known_partitions_per_topic(
    partitions_per_topic: Mapping[str, int], members: Sequence[MemberSubscription]
) -> dict[str, int]:
    """Topics some member subscribes to and the cluster knows, in Java string order (Kafka builds
    partitionsPerTopic from the subscribed topics only)."""
    subscribed = {topic for member in members for topic in member.subscription.topics}
    known = {topic: max(int(partitions_per_topic[topic]), 0) for topic in subscribed if topic in partitions_per_topic}
    return {topic: known[topic] for topic in sorted(known, key=java_string_key)}


def _checked_members(members: Sequence[MemberSubscription]) -> list[MemberSubscription]:
    seen: set[str] = set()
    for member in members:
        if member.member_id in seen:
            raise ValueError(f"member {member.member_id!r} appears twice")
        seen.add(member.member_id)
    return list(members)


def _assignments(partitions_by_member: Mapping[str, Iterable[TopicPartition]]) -> dict[str, Assignment]:
    return {
        member_id: Assignment(tuple(_sorted_partitions(partitions)))
        for member_id, partitions in partitions_by_member.items()
    }


# ---- the assignor interface -----------------------------------------------------------------------------


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


class RangeAssignor(ConsumerAssignor):
    """Per topic: partitions in numeric order split into contiguous ranges over the topic's subscribers in
    MemberInfo order; the first ``n % members`` subscribers get one extra (Kafka RangeAssignor)."""

    name = RANGE

    def assign(
        self, partitions_per_topic: Mapping[str, int], members: Sequence[MemberSubscription], generation: int
    ) -> dict[str, Assignment]:
        members = _checked_members(members)
        known = _known_partitions_per_topic(partitions_per_topic, members)
        result: dict[str, list[TopicPartition]] = {member.member_id: [] for member in members}
        ordered = sorted(members, key=_member_key)
        for topic, count in known.items():
            subscribers = [member.member_id for member in ordered if topic in member.subscription.topics]
            per_member, with_extra = divmod(count, len(subscribers))
            for index, member_id in enumerate(subscribers):
                start = per_member * index + min(index, with_extra)
                length = per_member + (1 if index < with_extra else 0)
                result[member_id].extend(TopicPartition(topic, number) for number in range(start, start + length))
        return _assignments(result)


class RoundRobinAssignor(ConsumerAssignor):
    """All subscribed topic-partitions, sorted, dealt in turn to the members in MemberInfo order; a member
    not subscribed to a partition's topic is skipped for that partition (Kafka RoundRobinAssignor)."""

    name = ROUNDROBIN

    def assign(
        self, partitions_per_topic: Mapping[str, int], members: Sequence[MemberSubscription], generation: int
    ) -> dict[str, Assignment]:
        members = _checked_members(members)
        known = _known_partitions_per_topic(partitions_per_topic, members)
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
        return _assignments(result)


# ---- sticky: claims of previous ownership ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Claim:
    """A member saying "I had these partitions at this generation"."""

    member_id: str
    partitions: tuple[TopicPartition, ...]
    generation: int | None


@dataclass(frozen=True, slots=True)
class _Ownership:
    """Previous ownership after resolving every member's claims against each other."""

    owned: dict[str, list[TopicPartition]]  # member -> partitions it validly owned, sorted
    owner: dict[TopicPartition, str]  # partition -> that member
    previous: dict[TopicPartition, str]  # partition -> the best claimant of an older generation
    claimants: dict[TopicPartition, set[str]]  # partition -> every member that claimed it, any generation


def _resolve_claims(claims: Sequence[_Claim], known: Mapping[str, int]) -> _Ownership:
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
    for partition in _sorted_partitions(by_partition):
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
    return _Ownership(owned, owner, previous, {p: set(g) for p, g in by_partition.items()})


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
        return min(moved_back, key=_partition_key)  # Kafka takes a HashSet's first; any is valid


class _GeneralAssignment:
    """Kafka 3.x AbstractStickyAssignor.generalAssign: keep every still-valid previous assignment, hand the
    rest to the least loaded subscriber, then move partitions from the most to the least loaded members until
    no move improves the balance -- reverting the moves if the balance score did not improve."""

    def __init__(
        self,
        known: Mapping[str, int],
        topics_of: Mapping[str, frozenset[str]],
        ownership: _Ownership,
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


def _sticky_assign(
    partitions_per_topic: Mapping[str, int], members: Sequence[MemberSubscription], claims: Sequence[_Claim]
) -> tuple[dict[str, list[TopicPartition]], _Ownership]:
    """Kafka AbstractStickyAssignor.assign: the constrained algorithm when every member subscribes to the same
    (known) topics, the general one otherwise. Returns the assignment and the resolved previous ownership."""
    known = _known_partitions_per_topic(partitions_per_topic, members)
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


class _AbstractStickyAssignor(ConsumerAssignor):
    def __init__(self) -> None:
        self.generation = DEFAULT_GENERATION

    @abc.abstractmethod
    def _claim(self, member: MemberSubscription) -> _Claim: ...

    def _sticky(
        self, partitions_per_topic: Mapping[str, int], members: Sequence[MemberSubscription]
    ) -> tuple[dict[str, list[TopicPartition]], _Ownership]:
        members = _checked_members(members)
        return _sticky_assign(partitions_per_topic, members, [self._claim(member) for member in members])


class StickyAssignor(_AbstractStickyAssignor):
    """Eager sticky (Kafka StickyAssignor): as balanced as possible, then as few moves as possible. The
    previous assignment comes from the sticky user data; ``owned_partitions``, when a member sends any, are
    used instead (with the user data's generation)."""

    name = STICKY

    def __init__(self) -> None:
        super().__init__()
        self.last_assignment: tuple[TopicPartition, ...] | None = None

    def subscription_user_data(self, topics: Collection[str]) -> bytes | None:
        if self.last_assignment is None:
            return None
        return encode_sticky_user_data(StickyUserData(self.last_assignment, self.generation))

    def on_assignment(self, assignment: Assignment, generation: int) -> None:
        self.last_assignment = tuple(assignment.assigned_partitions)
        self.generation = generation

    def _claim(self, member: MemberSubscription) -> _Claim:
        subscription = member.subscription
        remembered = StickyUserData(())
        if subscription.user_data:
            try:
                remembered = decode_sticky_user_data(subscription.user_data)
            except ConsumerProtocolError as error:
                log.warning("ignoring sticky user data member=%s error=%s", member.member_id, error)
        partitions = subscription.owned_partitions or remembered.partitions
        return _Claim(member.member_id, tuple(partitions), remembered.generation)

    def assign(
        self, partitions_per_topic: Mapping[str, int], members: Sequence[MemberSubscription], generation: int
    ) -> dict[str, Assignment]:
        assignment, _ = self._sticky(partitions_per_topic, members)
        return _assignments(assignment)


class CooperativeStickyAssignor(_AbstractStickyAssignor):
    """Cooperative sticky (Kafka CooperativeStickyAssignor): the sticky assignment, less every partition that
    would pass from one member to another in this round. Its owner, not finding it in its new assignment,
    revokes it and rejoins; the follow-up rebalance then hands it to the new owner."""

    name = COOPERATIVE_STICKY
    supported_protocols = (COOPERATIVE, EAGER)

    def subscription_user_data(self, topics: Collection[str]) -> bytes | None:
        return encode_cooperative_user_data(self.generation)

    def on_assignment(self, assignment: Assignment, generation: int) -> None:
        self.generation = generation

    def _claim(self, member: MemberSubscription) -> _Claim:
        subscription = member.subscription
        generation: int | None = None
        if subscription.user_data is not None:
            try:
                generation = decode_cooperative_user_data(subscription.user_data)
            except ConsumerProtocolError:
                # Kafka CooperativeStickyAssignor.memberData: unreadable user data means DEFAULT_GENERATION.
                generation = DEFAULT_GENERATION
        return _Claim(member.member_id, tuple(subscription.owned_partitions), generation)

    def assign(
        self, partitions_per_topic: Mapping[str, int], members: Sequence[MemberSubscription], generation: int
    ) -> dict[str, Assignment]:
        assignment, ownership = self._sticky(partitions_per_topic, members)
        return _assignments(_without_transfers(assignment, ownership))


def _without_transfers(
    assignment: Mapping[str, list[TopicPartition]], ownership: _Ownership
) -> dict[str, list[TopicPartition]]:
    """Kafka CooperativeStickyAssignor.adjustAssignment: hold back every partition that changes hands.

    A partition given to member m stays in m's assignment only when no other member claims it in its
    ``owned_partitions``, or m is its resolved owner (the one claim of the highest generation). This covers
    Kafka's partitionsTransferringOwnership (revoked from a current owner, or claimed twice in one generation)
    and its computePartitionsTransferringOwnership (added to m while revoked from another); it also holds back a
    partition an older-generation member still claims, which Kafka would hand over at once."""
    adjusted: dict[str, list[TopicPartition]] = {}
    for member_id, partitions in assignment.items():
        adjusted[member_id] = [
            partition
            for partition in partitions
            if ownership.owner.get(partition) == member_id
            or not (ownership.claimants.get(partition, set()) - {member_id})
        ]
    return adjusted


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
