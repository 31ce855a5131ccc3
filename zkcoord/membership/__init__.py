"""Client-side group membership as a pure state machine (no IO); ``zkcoord.client`` runs it."""

from zkcoord.membership.effects import Completed, Fatal, MembershipConfig, Reconcile, Send, Transition
from zkcoord.membership.member import GroupMember
from zkcoord.membership.states import CoordinatorState, MemberState

__all__ = [
    "Completed",
    "CoordinatorState",
    "Fatal",
    "GroupMember",
    "MemberState",
    "MembershipConfig",
    "Reconcile",
    "Send",
    "Transition",
]
