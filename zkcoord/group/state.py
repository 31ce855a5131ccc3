"""Group states and the transitions Kafka allows between them (group-coordinator.md §1.1).

The table is data so that docs and tests read the same thing the coordinator enforces.
"""

from zkcoord.errors import ZkcoordError
from zkcoord.model import GroupState

S = GroupState

VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    S.PREPARING_REBALANCE: frozenset({S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY}),
    S.COMPLETING_REBALANCE: frozenset({S.PREPARING_REBALANCE}),
    S.STABLE: frozenset({S.COMPLETING_REBALANCE}),
    S.EMPTY: frozenset({S.PREPARING_REBALANCE}),
    S.DEAD: frozenset({S.STABLE, S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE, S.EMPTY, S.DEAD}),
}
CAN_REBALANCE_STATES = frozenset({S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY})


class IllegalStateTransition(ZkcoordError):
    """A transition Kafka's GroupMetadata rejects with IllegalStateException: a coordinator bug, never input."""


def check_transition(group_id: str, current: GroupState, target: GroupState) -> None:
    """Raise :class:`IllegalStateTransition` unless ``current`` → ``target`` is allowed."""
    if current not in VALID_PREVIOUS_STATES[target]:
        raise IllegalStateTransition(f"group {group_id}: {current} -> {target} is not a valid transition")
