"""Group states and the transitions Kafka allows between them (group-coordinator.md §1.1).

The table is data so that docs and tests read the same thing the coordinator enforces.
"""

from zkcoord.errors import ZkcoordError
from zkcoord.offsets.retention import COMPLETING_REBALANCE, DEAD, EMPTY, PREPARING_REBALANCE, STABLE

__all__ = ["COMPLETING_REBALANCE", "DEAD", "EMPTY", "PREPARING_REBALANCE", "STABLE", "VALID_PREVIOUS_STATES"]

VALID_PREVIOUS_STATES: dict[str, frozenset[str]] = {
    PREPARING_REBALANCE: frozenset({STABLE, COMPLETING_REBALANCE, EMPTY}),
    COMPLETING_REBALANCE: frozenset({PREPARING_REBALANCE}),
    STABLE: frozenset({COMPLETING_REBALANCE}),
    EMPTY: frozenset({PREPARING_REBALANCE}),
    DEAD: frozenset({STABLE, PREPARING_REBALANCE, COMPLETING_REBALANCE, EMPTY, DEAD}),
}
CAN_REBALANCE_STATES = frozenset({STABLE, COMPLETING_REBALANCE, EMPTY})


class IllegalStateTransition(ZkcoordError):
    """A transition Kafka's GroupMetadata rejects with IllegalStateException: a coordinator bug, never input."""


def check_transition(group_id: str, current: str, target: str) -> None:
    """Raise :class:`IllegalStateTransition` unless ``current`` → ``target`` is allowed."""
    if current not in VALID_PREVIOUS_STATES[target]:
        raise IllegalStateTransition(f"group {group_id}: {current} -> {target} is not a valid transition")
