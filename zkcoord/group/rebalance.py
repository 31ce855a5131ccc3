"""The rebalance engine of the classic protocol (group-coordinator.md §2.7–§2.9, §4.5, §5.2–§5.4).

Owns what happens between requests: preparing a rebalance, the initial and regular delayed join, completing
the join (new generation, leader, answers to the parked JoinGroups), the pending-sync deadline, answering
parked SyncGroups, and members leaving through a session expiry or a removal. The request handlers of
:mod:`zkcoord.group.join`, :mod:`zkcoord.group.sync` and :mod:`zkcoord.group.offsets` call in here; the
coordinator routes due timers here (:func:`on_timer`).

Pure: must not import gevent, kazoo, sockets, threads or a clock.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from zkcoord.errors import ErrorCode
from zkcoord.group.model import Group, Member
from zkcoord.model import GroupState
from zkcoord.offsets.records import GroupMetadataKey
from zkcoord.wire.messages import JoinGroupResponse, JoinGroupResponseMember, SyncGroupResponse

if TYPE_CHECKING:
    from zkcoord.group.coordinator import GroupCoordinator

log = logging.getLogger(__name__)

E = ErrorCode
S = GroupState


# ---- timer keys ------------------------------------------------------------------------------------------------


def session_key(group_id: str, member_id: str) -> tuple:
    return ("session", group_id, member_id)


def pending_member_key(group_id: str, member_id: str) -> tuple:
    return ("pending", group_id, member_id)


def join_key(group_id: str) -> tuple:
    return ("join", group_id)


def sync_key(group_id: str) -> tuple:
    return ("sync", group_id)


def on_timer(core: GroupCoordinator, now_ms: int, key: tuple) -> None:
    """Route a due timer of a group to its handler; a timer of a group no longer cached does nothing."""
    group = core.groups.get(key[1])
    if group is None:
        return
    kind = key[0]
    if kind == "session":
        on_session_expired(core, group, key[2], now_ms)
    elif kind == "pending":
        on_pending_member_expired(core, group, key[2], now_ms)
    elif kind == "join":
        on_join_due(core, group, now_ms)
    elif kind == "sync":
        on_pending_sync_expired(core, group, now_ms)


# ---- answers ---------------------------------------------------------------------------------------------------


def current_generation_response(group: Group, member: Member, with_members: bool) -> JoinGroupResponse:
    members = (
        tuple(
            JoinGroupResponseMember(
                member_id=other.member_id,
                group_instance_id=other.group_instance_id,
                metadata=other.metadata(group.protocol_name),
            )
            for other in group.members.values()
        )
        if with_members
        else ()
    )
    return JoinGroupResponse(
        error_code=E.NONE,
        generation_id=group.generation,
        protocol_type=group.protocol_type,
        protocol_name=group.protocol_name,
        leader=group.leader_id or "",
        member_id=member.member_id,
        members=members,
    )


def answer_join(core: GroupCoordinator, member: Member, response: JoinGroupResponse) -> None:
    """Answer ``member``'s parked JoinGroup with ``response``; it is no longer parked."""
    request_id, member.awaiting_join = member.awaiting_join, None
    core.effects.reply(request_id, response)


def answer_sync(core: GroupCoordinator, member: Member, response: SyncGroupResponse) -> None:
    """Answer ``member``'s parked SyncGroup with ``response``; it is no longer parked."""
    request_id, member.awaiting_sync = member.awaiting_sync, None
    core.effects.reply(request_id, response)


# ---- sessions --------------------------------------------------------------------------------------------------


def schedule_session(core: GroupCoordinator, group: Group, member: Member, now_ms: int, timeout_ms: int | None = None):
    timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
    core.effects.schedule(session_key(group.group_id, member.member_id), now_ms + timeout)


def cancel_session(core: GroupCoordinator, group: Group, member_id: str) -> None:
    core.effects.cancel(session_key(group.group_id, member_id))


def on_session_expired(core: GroupCoordinator, group: Group, member_id: str, now_ms: int) -> None:
    """§5.2: a new member is removed; a parked one survives; anyone else is removed."""
    member = group.members.get(member_id)
    if group.is_dead() or member is None:
        return
    if not member.is_new and (member.awaiting_join is not None or member.awaiting_sync is not None):
        return
    log.info("session expired group=%s member=%s", group.group_id, member_id)
    remove_member_and_update_group(core, group, member, now_ms)


def on_pending_member_expired(core: GroupCoordinator, group: Group, member_id: str, now_ms: int) -> None:
    """§5.4: drop the MEMBER_ID_REQUIRED id and see whether the join can complete."""
    if member_id in group.pending_members and member_id not in group.members:
        group.pending_members.discard(member_id)
        if group.state == S.PREPARING_REBALANCE:
            maybe_complete_join(core, group, now_ms)


def remove_member_and_update_group(core: GroupCoordinator, group: Group, member: Member, now_ms: int) -> None:
    """GC ``removeMemberAndUpdateGroup``: a parked JoinGroup gets 25, then rebalance or re-check the join."""
    if member.awaiting_join is not None:
        answer_join(core, member, JoinGroupResponse(error_code=E.UNKNOWN_MEMBER_ID))
    group.remove(member.member_id)
    cancel_session(core, group, member.member_id)
    if group.state in (S.STABLE, S.COMPLETING_REBALANCE):
        prepare_rebalance(core, group, now_ms)
    elif group.state == S.PREPARING_REBALANCE:
        maybe_complete_join(core, group, now_ms)


# ---- the join phase (§2.7–§2.9) --------------------------------------------------------------------------------


def prepare_rebalance(core: GroupCoordinator, group: Group, now_ms: int) -> None:
    """GC ``prepareRebalance``: cancel the sync phase, then start the initial or the regular delayed join."""
    if group.state == S.COMPLETING_REBALANCE:
        propagate_sync_error(core, group, E.REBALANCE_IN_PROGRESS, now_ms)
    core.effects.cancel(sync_key(group.group_id))
    group.pending_sync.clear()
    if group.state == S.EMPTY:
        delay = core.config.group_initial_rebalance_delay_ms
        remaining = max(group.rebalance_timeout_ms() - delay, 0)
        group.transition_to(S.PREPARING_REBALANCE, now_ms)
        _schedule_initial_join(core, group, now_ms, delay, remaining)
    else:
        group.transition_to(S.PREPARING_REBALANCE, now_ms)
        _schedule_join(core, group, now_ms)
        maybe_complete_join(core, group, now_ms)


def _schedule_join(core: GroupCoordinator, group: Group, now_ms: int) -> None:
    """The regular delayed join: completes at the deadline, or earlier once everyone joined (§2.7 step 4)."""
    core.effects.schedule(join_key(group.group_id), now_ms + group.rebalance_timeout_ms())
    group.initial_join = False


def _schedule_initial_join(core: GroupCoordinator, group: Group, now_ms: int, delay: int, remaining: int) -> None:
    """§2.7 step 3 (DJ ``InitialDelayedJoin``): never completes early; extended while new members arrive."""
    core.effects.schedule(join_key(group.group_id), now_ms + delay)
    group.initial_join = True
    group.initial_join_delay_ms = delay
    group.initial_join_remaining_ms = remaining


def on_join_due(core: GroupCoordinator, group: Group, now_ms: int) -> None:
    remaining = group.initial_join_remaining_ms
    if group.initial_join and group.new_member_added and remaining != 0:
        group.new_member_added = False
        next_delay = min(core.config.group_initial_rebalance_delay_ms, remaining)
        _schedule_initial_join(core, group, now_ms, next_delay, max(remaining - group.initial_join_delay_ms, 0))
    else:
        complete_join(core, group, now_ms)


def maybe_complete_join(core: GroupCoordinator, group: Group, now_ms: int) -> None:
    if (
        group.state == S.PREPARING_REBALANCE
        and not group.initial_join
        and join_key(group.group_id) in core.effects.deadlines
        and group.all_members_joined()
    ):
        complete_join(core, group, now_ms)


def complete_join(core: GroupCoordinator, group: Group, now_ms: int) -> None:
    """§2.9 (GC ``onCompleteJoin``)."""
    core.effects.cancel(join_key(group.group_id))
    if core.groups.get(group.group_id) is not group or group.state != S.PREPARING_REBALANCE:
        return
    for member in list(group.members.values()):
        if member.awaiting_join is None and member.group_instance_id is None:
            # Dynamic members that did not rejoin are dropped; static ones stay (KIP-345).
            member.is_leaving = True
            group.remove(member.member_id)
            cancel_session(core, group, member.member_id)
    if group.members and not _elect_joined_leader(group):
        # Only static non-rejoiners remain: wait another rebalance timeout for them (§2.9 step 3).
        _schedule_join(core, group, now_ms)
        return
    group.generation += 1
    group.pending_sync.clear()
    if not group.members:
        group.protocol_name = None
        group.transition_to(S.EMPTY, now_ms)
        group.subscribed_topics = frozenset() if group.protocol_type == "consumer" else None
        core.append_metadata_fire_and_forget(group, "empty group record")
        return
    group.protocol_name = group.select_protocol()
    group.subscribed_topics = group.compute_subscribed_topics()
    group.transition_to(S.COMPLETING_REBALANCE, now_ms)
    for member in group.members.values():
        if member.awaiting_join is not None:
            is_leader = member.member_id == group.leader_id
            answer_join(core, member, current_generation_response(group, member, with_members=is_leader))
        schedule_session(core, group, member, now_ms)
        member.is_new = False
        group.pending_sync.add(member.member_id)
    group.sync_generation = group.generation
    core.effects.schedule(sync_key(group.group_id), now_ms + group.rebalance_timeout_ms())


def _elect_joined_leader(group: Group) -> bool:
    """GM ``maybeElectNewJoinedLeader``: keep a rejoined leader, else promote any rejoined member."""
    leader = group.members.get(group.leader_id) if group.leader_id is not None else None
    if leader is None:
        return False
    if leader.awaiting_join is not None:
        return True
    for member in group.members.values():
        if member.awaiting_join is not None:
            group.leader_id = member.member_id
            return True
    return False


# ---- the sync phase (§4.5) -------------------------------------------------------------------------------------


def on_pending_sync_expired(core: GroupCoordinator, group: Group, now_ms: int) -> None:
    """§4.5: evict members that never sent SyncGroup, then rebalance."""
    if (
        group.generation != group.sync_generation
        or group.state not in (S.COMPLETING_REBALANCE, S.STABLE)
        or not group.pending_sync
    ):
        return
    for member_id in list(group.pending_sync):
        group.remove(member_id)
        cancel_session(core, group, member_id)
    prepare_rebalance(core, group, now_ms)


def sync_received(core: GroupCoordinator, group: Group, member_id: str) -> None:
    group.pending_sync.discard(member_id)
    if not group.pending_sync:
        core.effects.cancel(sync_key(group.group_id))


def propagate_sync_error(core: GroupCoordinator, group: Group, error: int, now_ms: int) -> None:
    """Clear assignments and answer parked SyncGroups with ``error`` (GC ``resetAndPropagateAssignmentError``)."""
    for member in group.members.values():
        member.assignment = b""
    propagate_assignment(core, group, error, now_ms)


def propagate_assignment(core: GroupCoordinator, group: Group, error: int, now_ms: int) -> None:
    for member in group.members.values():
        if member.awaiting_sync is None:
            continue
        if error == E.NONE:
            response = SyncGroupResponse(
                error_code=E.NONE,
                protocol_type=group.protocol_type,
                protocol_name=group.protocol_name,
                assignment=member.assignment,
            )
        else:
            response = SyncGroupResponse(error_code=error)
        answer_sync(core, member, response)
        schedule_session(core, group, member, now_ms)


def metadata_record(group: Group, assignments: dict[str, bytes] | None = None) -> tuple:
    """The group's metadata record as an append's one record."""
    return ((GroupMetadataKey(group.group_id), group.metadata_record(assignments)),)
