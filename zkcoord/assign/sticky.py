"""The sticky and cooperative-sticky assignors (Kafka's ``StickyAssignor`` and ``CooperativeStickyAssignor``) and
the user data they send with a subscription.

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

Pure: no IO, no clock, no gevent. Imports only zkcoord.assign.common, zkcoord.assign.sticky_balance,
zkcoord.model and zkcoord.wire.consumer_protocol; must not import zkcoord.assign.consumer (it imports this one).
"""

import abc
import logging
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from zkcoord.assign.common import (
    COOPERATIVE,
    EAGER,
    ConsumerAssignor,
    MemberSubscription,
    as_assignments,
    checked_members,
)
from zkcoord.assign.sticky_balance import DEFAULT_GENERATION, Claim, Ownership, sticky_assign
from zkcoord.model import TopicPartition
from zkcoord.wire.consumer_protocol import (
    Assignment,
    ConsumerProtocolError,
    decoded_partitions,
    is_int32,
    pack_map,
    partitions_by_topic,
    unpack_map,
)

log = logging.getLogger(__name__)

STICKY = "sticky"
COOPERATIVE_STICKY = "cooperative-sticky"
STICKY_USER_DATA_VERSION = 0


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


class _AbstractStickyAssignor(ConsumerAssignor):
    def __init__(self) -> None:
        self.generation = DEFAULT_GENERATION

    @abc.abstractmethod
    def _claim(self, member: MemberSubscription) -> Claim: ...

    def _sticky(
        self, partitions_per_topic: Mapping[str, int], members: Sequence[MemberSubscription]
    ) -> tuple[dict[str, list[TopicPartition]], Ownership]:
        members = checked_members(members)
        return sticky_assign(partitions_per_topic, members, [self._claim(member) for member in members])


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

    def _claim(self, member: MemberSubscription) -> Claim:
        subscription = member.subscription
        remembered = StickyUserData(())
        if subscription.user_data:
            try:
                remembered = decode_sticky_user_data(subscription.user_data)
            except ConsumerProtocolError as error:
                log.warning("ignoring sticky user data member=%s error=%s", member.member_id, error)
        partitions = subscription.owned_partitions or remembered.partitions
        return Claim(member.member_id, tuple(partitions), remembered.generation)

    def assign(
        self, partitions_per_topic: Mapping[str, int], members: Sequence[MemberSubscription], generation: int
    ) -> dict[str, Assignment]:
        assignment, _ = self._sticky(partitions_per_topic, members)
        return as_assignments(assignment)


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

    def _claim(self, member: MemberSubscription) -> Claim:
        subscription = member.subscription
        generation: int | None = None
        if subscription.user_data is not None:
            try:
                generation = decode_cooperative_user_data(subscription.user_data)
            except ConsumerProtocolError:
                # Kafka CooperativeStickyAssignor.memberData: unreadable user data means DEFAULT_GENERATION.
                generation = DEFAULT_GENERATION
        return Claim(member.member_id, tuple(subscription.owned_partitions), generation)

    def assign(
        self, partitions_per_topic: Mapping[str, int], members: Sequence[MemberSubscription], generation: int
    ) -> dict[str, Assignment]:
        assignment, ownership = self._sticky(partitions_per_topic, members)
        return as_assignments(_without_transfers(assignment, ownership))


def _without_transfers(
    assignment: Mapping[str, list[TopicPartition]], ownership: Ownership
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
