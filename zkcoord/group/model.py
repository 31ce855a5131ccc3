"""The in-memory group and member of Kafka's classic coordinator (group-coordinator.md §0.3).

Mutable bookkeeping only: membership, protocol votes, the leader, the persisted-record view. What a
request does with them lives in :mod:`zkcoord.group.coordinator`. Pure: must not import IO modules.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from zkcoord.group.state import check_transition
from zkcoord.model import GroupState, TopicPartition
from zkcoord.offsets.records import GroupMetadataValue, MemberMetadata
from zkcoord.offsets.retention import UNKNOWN_STATE_TIMESTAMP, GroupView, topics_of_subscriptions
from zkcoord.offsets.store import CommittedOffset

Protocols = tuple[tuple[str, bytes], ...]


@dataclass(eq=False)
class Member:
    """One member; ``awaiting_join``/``awaiting_sync`` hold the request id of a parked request."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    assignment: bytes = b""
    awaiting_join: int | None = None
    awaiting_sync: int | None = None
    is_new: bool = False
    is_leaving: bool = False

    def metadata(self, protocol: str | None) -> bytes:
        """This member's metadata for ``protocol`` (b"" if it does not list it)."""
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""

    def protocol_names(self) -> list[str]:
        """The names this member lists, each once: a JoinGroup may repeat one, Kafka keeps them as a set."""
        return list(dict.fromkeys(name for name, _ in self.protocols))

    def vote(self, candidates: set[str]) -> str:
        """The first protocol of this member's preference list that every member supports (MM ``vote``)."""
        return next(name for name, _ in self.protocols if name in candidates)


@dataclass(eq=False)
class Group:
    """One group of an owned offsets partition, with its committed offsets."""

    group_id: str
    partition: int
    state: GroupState
    state_timestamp: int
    protocol_type: str | None = None
    protocol_name: str | None = None
    generation: int = 0
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)
    pending_members: set[str] = field(default_factory=set)
    pending_sync: set[str] = field(default_factory=set)
    supported_protocols: Counter = field(default_factory=Counter)
    new_member_added: bool = False
    initial_join: bool = False  # the running delayed join is Kafka's InitialDelayedJoin (never completes early)
    initial_join_delay_ms: int = 0  # the running InitialDelayedJoin's delay and the time it may still extend by
    initial_join_remaining_ms: int = 0
    sync_generation: int = 0  # the generation whose members the pending-sync timer waits for
    subscribed_topics: frozenset[str] | None = None
    offsets: dict[TopicPartition, CommittedOffset] = field(default_factory=dict)
    pending_offsets: Counter = field(default_factory=Counter)  # partition → commits in flight

    # -- state ---------------------------------------------------------------------------------------

    def transition_to(self, target: GroupState, now_ms: int) -> None:
        check_transition(self.group_id, self.state, target)
        self.state = target
        self.state_timestamp = now_ms

    def is_dead(self) -> bool:
        return self.state == GroupState.DEAD

    # -- membership ------------------------------------------------------------------------------------

    def add(self, member: Member, join_request_id: int | None) -> None:
        """Add ``member`` (GM ``add``); the first member sets the protocol type, a leaderless group gets a leader."""
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self.supported_protocols.update(member.protocol_names())
        member.awaiting_join = join_request_id

    def remove(self, member_id: str) -> Member | None:
        """Drop a member, its static mapping and pending sync; pick a new leader if it led (GM ``remove``)."""
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        self.supported_protocols.subtract(member.protocol_names())
        self.supported_protocols += Counter()  # drops the names nobody lists any more
        if member.group_instance_id is not None and self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        self.pending_sync.discard(member_id)
        if self.leader_id == member_id:
            # Kafka takes "any" remaining member (hash-map order); zkcoord takes the longest-standing one.
            self.leader_id = next(iter(self.members), None)
        return member

    def update_protocols(self, member: Member, protocols: Protocols, join_request_id: int | None) -> None:
        """Replace a member's protocols and parked JoinGroup (GM ``updateMember``)."""
        self.supported_protocols.subtract(member.protocol_names())
        member.protocols = protocols
        self.supported_protocols.update(member.protocol_names())
        self.supported_protocols += Counter()
        member.awaiting_join = join_request_id

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> Member:
        """Re-key the member of ``instance_id`` from ``old_id`` to ``new_id`` (GM ``replaceStaticMember``).

        The caller answers the old id's parked requests first (82); this only moves the bookkeeping.
        """
        member = self.members.pop(old_id)
        member.member_id = new_id
        self.members[new_id] = member
        if self.leader_id == old_id:
            self.leader_id = new_id
        if old_id in self.pending_sync:
            # The restarted instance inherits the old id's duty to sync, instead of a later eviction of a
            # member id that no longer exists forcing a needless rebalance.
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        self.static_members[instance_id] = new_id
        return member

    def awaiting_join_count(self) -> int:
        return sum(1 for member in self.members.values() if member.awaiting_join is not None)

    def all_members_joined(self) -> bool:
        """§2.8: every member is parked in JoinGroup and no MEMBER_ID_REQUIRED id is outstanding."""
        # Asked at every rejoin: stopping at the first member still out keeps a rebalance of n members from
        # costing n² steps (a count each time made 1,000 rejoins a million).
        return not self.pending_members and all(member.awaiting_join is not None for member in self.members.values())

    def is_static_member_fenced(self, member_id: str, instance_id: str | None) -> bool:
        """§3.2: the instance is mapped to another member id."""
        if instance_id is None:
            return False
        mapped = self.static_members.get(instance_id)
        return mapped is not None and mapped != member_id

    def rebalance_timeout_ms(self) -> int:
        return max((member.rebalance_timeout_ms for member in self.members.values()), default=0)

    # -- protocols --------------------------------------------------------------------------------------

    def supports_protocols(self, protocol_type: str, names: list[str]) -> bool:
        """§2.3 step 2 (GM ``supportsProtocols``): may a member with these protocols join?"""
        if self.state == GroupState.EMPTY:
            return bool(protocol_type) and bool(names)
        size = len(self.members)
        return protocol_type == self.protocol_type and any(self.supported_protocols[name] == size for name in names)

    def candidate_protocols(self) -> set[str]:
        size = len(self.members)
        return {name for name, count in self.supported_protocols.items() if count == size}

    def select_protocol(self) -> str:
        """§2.5: the protocol with most first-choice votes among those every member lists.

        Kafka breaks ties in hash-map order; zkcoord prefers, among the tied, the earliest in the preference
        list of the longest-standing member, so the choice is deterministic and documented.
        """
        candidates = self.candidate_protocols()
        votes = Counter(member.vote(candidates) for member in self.members.values())
        best = max(votes.values())
        tied = {name for name, count in votes.items() if count == best}
        first_member = next(iter(self.members.values()))
        ordered = [name for name in first_member.protocol_names() if name in tied]
        return ordered[0] if ordered else min(tied)

    def compute_subscribed_topics(self) -> frozenset[str] | None:
        """§7.6: topics the members subscribe to with the chosen protocol; None when unknown."""
        return topics_of_subscriptions(
            self.protocol_type,
            self.protocol_name,
            [member.metadata(self.protocol_name) for member in self.members.values()],
        )

    # -- views --------------------------------------------------------------------------------------------

    def retention_view(self) -> GroupView:
        return GroupView(
            protocol_type=self.protocol_type,
            state=self.state,
            current_state_timestamp=self.state_timestamp,
            generation=self.generation,
            subscribed_topics=self.subscribed_topics,
            pending=frozenset(self.pending_offsets),
        )

    def metadata_record(self, assignments: dict[str, bytes] | None = None) -> GroupMetadataValue:
        """The group-metadata value to persist (§9.3 "What is written"), with ``assignments`` or the stored ones."""
        members = tuple(
            MemberMetadata(
                member_id=member.member_id,
                group_instance_id=member.group_instance_id,
                client_id=member.client_id,
                client_host=member.client_host,
                rebalance_timeout=member.rebalance_timeout_ms,
                session_timeout=member.session_timeout_ms,
                subscription=member.metadata(self.protocol_name),
                assignment=member.assignment if assignments is None else assignments.get(member.member_id, b""),
            )
            for member in self.members.values()
        )
        return GroupMetadataValue(
            protocol_type=self.protocol_type or "",
            generation=self.generation,
            protocol=self.protocol_name,
            leader=self.leader_id,
            current_state_timestamp=self.state_timestamp,
            members=members,
        )

    @classmethod
    def from_record(cls, group_id: str, partition: int, record: GroupMetadataValue | None, now_ms: int) -> Group:
        """A group as loaded (§9.6 step 5): Stable with members, Empty without, or a fresh Empty offsets-only group."""
        if record is None:
            return cls(group_id, partition, GroupState.EMPTY, UNKNOWN_STATE_TIMESTAMP)
        if not record.members:
            return cls(
                group_id,
                partition,
                GroupState.EMPTY,
                record.current_state_timestamp,
                # "" is how a record stores "no protocol type" (§9.3); an Empty group reads it back as none.
                protocol_type=record.protocol_type or None,
                generation=record.generation,
                subscribed_topics=frozenset() if record.protocol_type == "consumer" else None,
            )
        group = cls(
            group_id,
            partition,
            GroupState.STABLE,
            record.current_state_timestamp,
            protocol_type=record.protocol_type,
            protocol_name=record.protocol,
            generation=record.generation,
        )
        for value in record.members:
            member = Member(
                member_id=value.member_id,
                group_instance_id=value.group_instance_id,
                client_id=value.client_id,
                client_host=value.client_host,
                rebalance_timeout_ms=value.rebalance_timeout,
                session_timeout_ms=value.session_timeout,
                protocol_type=record.protocol_type,
                protocols=((record.protocol or "", value.subscription),),
                assignment=value.assignment,
            )
            group.add(member, None)
            if value.group_instance_id is not None:
                group.static_members[value.group_instance_id] = value.member_id
        group.leader_id = record.leader if record.leader in group.members else group.leader_id
        group.subscribed_topics = group.compute_subscribed_topics()
        return group
