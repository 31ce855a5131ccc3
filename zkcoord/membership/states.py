"""A consumer's states as a group member and as a coordinator user, and the transitions allowed between them.

The tables are data so that docs and tests read what :class:`~zkcoord.membership.member.GroupMember` enforces.
Pure: imports nothing but the standard library and zkcoord.errors.
"""

import enum

from zkcoord.errors import ZkcoordError


class MemberState(enum.Enum):
    """Where the member is in the classic group protocol (Kafka's consumer refactor names)."""

    UNJOINED = "UNJOINED"
    PREPARING_REBALANCE = "PREPARING_REBALANCE"  # JoinGroup sent
    COMPLETING_REBALANCE = "COMPLETING_REBALANCE"  # joined; SyncGroup (and for the leader, the assignment) under way
    ASSIGNING_PARTITIONS = "ASSIGNING_PARTITIONS"  # assignment received; the poll side runs its callbacks
    STABLE = "STABLE"
    PREPARE_REVOCATION = "PREPARE_REVOCATION"  # eager: a rebalance began; every owned partition must go first
    REVOKING_PARTITIONS = "REVOKING_PARTITIONS"  # the poll side commits and runs on_partitions_revoked
    PARTITIONS_REVOKED = "PARTITIONS_REVOKED"  # done; JoinGroup follows
    LEAVING = "LEAVING"
    LEFT = "LEFT"
    FATAL = "FATAL"


class CoordinatorState(enum.Enum):
    """Whether the member knows its group coordinator."""

    DOWN = "down"  # no group: manual assignment without group.id
    INITIALIZED = "initialized"
    COORDINATOR_DISCOVERY = "coordinator_discovery"
    STABLE = "stable"


S = MemberState
MEMBER_TRANSITIONS: dict[MemberState, frozenset[MemberState]] = {
    S.UNJOINED: frozenset({S.PREPARING_REBALANCE, S.LEFT, S.FATAL}),
    S.PREPARING_REBALANCE: frozenset({S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE, S.UNJOINED, S.LEAVING, S.FATAL}),
    S.COMPLETING_REBALANCE: frozenset({S.ASSIGNING_PARTITIONS, S.PREPARING_REBALANCE, S.UNJOINED, S.LEAVING, S.FATAL}),
    S.ASSIGNING_PARTITIONS: frozenset({S.STABLE, S.UNJOINED, S.LEAVING, S.FATAL}),
    # Cooperative members rejoin straight from STABLE and keep their partitions; eager ones revoke first.
    S.STABLE: frozenset({S.PREPARE_REVOCATION, S.PREPARING_REBALANCE, S.UNJOINED, S.LEAVING, S.FATAL}),
    S.PREPARE_REVOCATION: frozenset({S.REVOKING_PARTITIONS}),
    S.REVOKING_PARTITIONS: frozenset({S.PARTITIONS_REVOKED, S.UNJOINED, S.LEAVING, S.FATAL}),
    S.PARTITIONS_REVOKED: frozenset({S.PREPARING_REBALANCE, S.UNJOINED, S.LEAVING, S.FATAL}),
    S.LEAVING: frozenset(),
    S.LEFT: frozenset(),
    S.FATAL: frozenset(),
}
# Closing ends every state.
MEMBER_TRANSITIONS = {
    state: targets | {S.LEFT} if state != S.LEFT else targets for state, targets in MEMBER_TRANSITIONS.items()
}

# States in which the member holds a valid generation and so heartbeats (Kafka keeps heartbeating while the
# poll side runs its revocation callbacks: a slow on_partitions_revoked must not cost the session).
HEARTBEAT_STATES = frozenset(
    {S.ASSIGNING_PARTITIONS, S.STABLE, S.PREPARE_REVOCATION, S.REVOKING_PARTITIONS, S.PARTITIONS_REVOKED}
)


class IllegalMemberTransition(ZkcoordError):
    """A transition the member's table does not allow: a client bug, never input."""


def check_member_transition(current: MemberState, target: MemberState) -> None:
    if target not in MEMBER_TRANSITIONS[current]:
        raise IllegalMemberTransition(f"member state {current.name} -> {target.name} is not a valid transition")
