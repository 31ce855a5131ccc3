"""Client-side group membership as a pure state machine (no IO); ``zkcoord.client`` runs it."""

from zkcoord.membership.member import Completed, Fatal, GroupMember, MembershipConfig, Reconcile, Send, Transition
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
