"""JoinGroup and LeaveGroup (group-coordinator.md §2.1–§2.6, §3, §6): who is a member of a group.

Owns the checks of a JoinGroup, new members (KIP-394's MEMBER_ID_REQUIRED ids included), known members
rejoining, static members (KIP-345) replacing their old member id, and LeaveGroup's removals. What a join
sets in motion (the delayed join, the new generation) is :mod:`zkcoord.group.rebalance`'s.

Pure: must not import gevent, kazoo, sockets, threads or a clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from zkcoord.errors import ErrorCode
from zkcoord.group.config import NEW_MEMBER_JOIN_TIMEOUT_MS
from zkcoord.group.model import Group, Member, Protocols
from zkcoord.group.rebalance import (
    answer_join,
    answer_sync,
    cancel_session,
    current_generation_response,
    maybe_complete_join,
    metadata_record,
    pending_member_key,
    prepare_rebalance,
    remove_member_and_update_group,
    schedule_session,
)
from zkcoord.model import GroupState
from zkcoord.wire.messages import (
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    MemberResponse,
    SyncGroupResponse,
)

if TYPE_CHECKING:
    from zkcoord.group.coordinator import GroupCoordinator

E = ErrorCode
S = GroupState


def handle_join_group(core: GroupCoordinator, request_id: int, request: JoinGroupRequest, now_ms: int) -> None:
    group_id = request.group_id
    member_id = request.member_id

    def refuse(error: ErrorCode, answered_id: str = member_id, message: str | None = None) -> None:
        core.effects.reply(
            request_id, JoinGroupResponse(error_code=error, member_id=answered_id, error_message=message)
        )

    if not group_id:
        return refuse(E.INVALID_GROUP_ID)
    if (error := core.group_status(group_id)) is not None:
        return refuse(error)
    config = core.config
    if not (config.group_min_session_timeout_ms <= request.session_timeout_ms <= config.group_max_session_timeout_ms):
        return refuse(E.INVALID_SESSION_TIMEOUT)
    group = core.groups.get(group_id)
    if member_id == "":
        if group is None:
            # Created before the later checks, so it stays cached (Empty) even if this join fails (§2.2 step 3).
            group = core.new_group(group_id, now_ms)
    elif group is None:
        return refuse(E.UNKNOWN_MEMBER_ID)
    if not _accept_joining_member(core, group, member_id):
        member = group.members.get(member_id)
        if member is not None:
            group.remove(member_id)
            cancel_session(core, group, member_id)
        refuse(E.GROUP_MAX_SIZE_REACHED, "")
    elif member_id == "":
        _join_unknown_member(core, group, request_id, request, now_ms)
    else:
        _join_known_member(core, group, request_id, request, now_ms)
    if group.state == S.PREPARING_REBALANCE:
        maybe_complete_join(core, group, now_ms)


def _accept_joining_member(core: GroupCoordinator, group: Group, member_id: str) -> bool:
    """§2.2 step 4 (GC ``acceptJoiningMember``), with the request's member id."""
    max_size = core.config.group_max_size
    member = group.members.get(member_id)
    if group.state in (S.EMPTY, S.DEAD):
        return True
    if group.state == S.PREPARING_REBALANCE:
        # At most len(members) are parked: the count (a pass over the members) only when that could reach the bound.
        return (
            (member is not None and member.awaiting_join is not None)
            or len(group.members) < max_size
            or group.awaiting_join_count() < max_size
        )
    return member is not None or len(group.members) < max_size


def _protocols(request: JoinGroupRequest) -> Protocols:
    return tuple((protocol.name, protocol.metadata) for protocol in request.protocols)


def _join_unknown_member(
    core: GroupCoordinator, group: Group, request_id: int, request: JoinGroupRequest, now_ms: int
) -> None:
    """§2.3 (GC ``doUnknownJoinGroup``)."""
    if group.is_dead():
        return core.effects.reply(request_id, JoinGroupResponse(error_code=E.COORDINATOR_NOT_AVAILABLE))
    protocols = _protocols(request)
    if not group.supports_protocols(request.protocol_type, [name for name, _ in protocols]):
        return core.effects.reply(request_id, JoinGroupResponse(error_code=E.INCONSISTENT_GROUP_PROTOCOL))
    instance_id = request.group_instance_id
    new_id = core.new_member_id(instance_id if instance_id is not None else request.client_id)
    if instance_id is not None and instance_id in group.static_members:
        _replace_static_member(core, group, instance_id, new_id, protocols, request_id, now_ms)
    elif instance_id is None:
        # KIP-394: hand out the id and wait for the member to come back with it; the state stays as it is.
        group.pending_members.add(new_id)
        core.effects.schedule(pending_member_key(group.group_id, new_id), now_ms + request.session_timeout_ms)
        core.effects.reply(request_id, JoinGroupResponse(error_code=E.MEMBER_ID_REQUIRED, member_id=new_id))
    else:
        _add_member_and_rebalance(core, group, new_id, request_id, request, protocols, now_ms)


def _join_known_member(
    core: GroupCoordinator, group: Group, request_id: int, request: JoinGroupRequest, now_ms: int
) -> None:
    """§2.4 (GC ``doJoinGroup``)."""
    member_id = request.member_id
    instance_id = request.group_instance_id

    def answer(error: ErrorCode, message: str | None = None) -> None:
        core.effects.reply(request_id, JoinGroupResponse(error_code=error, member_id=member_id, error_message=message))

    if group.is_dead():
        return answer(E.COORDINATOR_NOT_AVAILABLE)
    protocols = _protocols(request)
    if not group.supports_protocols(request.protocol_type, [name for name, _ in protocols]):
        return answer(E.INCONSISTENT_GROUP_PROTOCOL)
    if member_id in group.pending_members and member_id not in group.members:
        if instance_id is not None:
            # Kafka 2.8 throws IllegalStateException here: a pending id is dynamic by construction.
            return answer(E.UNKNOWN_SERVER_ERROR, "a pending member id is dynamic")
        return _add_member_and_rebalance(core, group, member_id, request_id, request, protocols, now_ms)
    if group.is_static_member_fenced(member_id, instance_id):
        return answer(E.FENCED_INSTANCE_ID)
    member = group.members.get(member_id)
    if member is None or (instance_id is not None and instance_id not in group.static_members):
        return answer(E.UNKNOWN_MEMBER_ID)
    if group.state == S.PREPARING_REBALANCE:
        group.update_protocols(member, protocols, request_id)
    elif group.state == S.COMPLETING_REBALANCE:
        if member.protocols == protocols:
            is_leader = member_id == group.leader_id
            core.effects.reply(request_id, current_generation_response(group, member, with_members=is_leader))
        else:
            group.update_protocols(member, protocols, request_id)
            prepare_rebalance(core, group, now_ms)
    elif group.state == S.STABLE:
        if member_id == group.leader_id or member.protocols != protocols:
            # The leader may force a rebalance, e.g. after a topic metadata change (§2.4 step 6).
            group.update_protocols(member, protocols, request_id)
            prepare_rebalance(core, group, now_ms)
        else:
            core.effects.reply(request_id, current_generation_response(group, member, with_members=False))
    else:
        answer(E.UNKNOWN_MEMBER_ID)


def _add_member_and_rebalance(
    core: GroupCoordinator,
    group: Group,
    member_id: str,
    request_id: int,
    request: JoinGroupRequest,
    protocols: Protocols,
    now_ms: int,
) -> None:
    """§2.6 (GC ``addMemberAndRebalance``)."""
    instance_id = request.group_instance_id
    member = Member(
        member_id=member_id,
        group_instance_id=instance_id,
        client_id=request.client_id,
        client_host=request.client_host,
        rebalance_timeout_ms=request.rebalance_timeout_ms,
        session_timeout_ms=request.session_timeout_ms,
        protocol_type=request.protocol_type,
        protocols=protocols,
        is_new=True,
    )
    # Evaluated before the rebalance starts: the member that moves an Empty group does not set it (§2.6 step 2).
    if group.state == S.PREPARING_REBALANCE and group.generation == 0:
        group.new_member_added = True
    group.add(member, request_id)
    schedule_session(core, group, member, now_ms, NEW_MEMBER_JOIN_TIMEOUT_MS)
    if instance_id is not None:
        group.static_members[instance_id] = member_id
    else:
        group.pending_members.discard(member_id)
        core.effects.cancel(pending_member_key(group.group_id, member_id))
    if group.state in (S.EMPTY, S.STABLE, S.COMPLETING_REBALANCE):
        prepare_rebalance(core, group, now_ms)


def _replace_static_member(
    core: GroupCoordinator,
    group: Group,
    instance_id: str,
    new_id: str,
    protocols: Protocols,
    request_id: int,
    now_ms: int,
) -> None:
    """§3.3 (GC ``updateStaticMemberAndRebalance``): a known instance restarts with a new member id."""
    old_id = group.static_members[instance_id]
    leader_before = group.leader_id
    old_member = group.members[old_id]
    if old_member.awaiting_join is not None:
        answer_join(core, old_member, JoinGroupResponse(error_code=E.FENCED_INSTANCE_ID, member_id=old_id))
    if old_member.awaiting_sync is not None:
        answer_sync(core, old_member, SyncGroupResponse(error_code=E.FENCED_INSTANCE_ID))
    cancel_session(core, group, old_id)
    member = group.replace_static_member(instance_id, old_id, new_id)
    schedule_session(core, group, member, now_ms)
    group.update_protocols(member, protocols, request_id)
    if group.state == S.COMPLETING_REBALANCE:
        # The leader may be assigning to the old id: always rebalance.
        prepare_rebalance(core, group, now_ms)
    elif group.state == S.STABLE:
        if group.select_protocol() != group.protocol_name:
            prepare_rebalance(core, group, now_ms)
        else:
            # The no-rebalance fast path of §3.3: persist the new id, then answer; revert on failure.
            replacement = StaticReplacementWrite(group, member, instance_id, old_id, group.generation, leader_before)
            core.effects.append(group.partition, metadata_record(group), replacement)


@dataclass(frozen=True)
class StaticReplacementWrite:
    """The record of a static member's new id (§3.3): answer its JoinGroup once written, revert if not."""

    group: Group
    member: Member
    instance_id: str
    old_id: str
    generation: int
    leader_before: str | None

    def finish(self, core: GroupCoordinator, error: ErrorCode | None, base_offset: int, now_ms: int) -> None:
        group, member = self.group, self.member
        new_id = member.member_id
        if core.groups.get(group.group_id) is not group or group.members.get(new_id) is not member:
            return
        request_id = member.awaiting_join
        member.awaiting_join = None
        # The leader as it was before the replacement, possibly the old id (Appendix C.3).
        leader = self.leader_before or ""
        if error is None:
            if request_id is not None:
                response = JoinGroupResponse(
                    error_code=E.NONE,
                    generation_id=self.generation,
                    protocol_type=group.protocol_type,
                    protocol_name=group.protocol_name,
                    member_id=new_id,
                    leader=leader,
                )
                core.effects.reply(request_id, response)
            return
        # Kafka 2.8 reads the "old" protocols after the update, so the reverted member keeps the new ones
        # (§3.3 step 2, Appendix C.11).
        cancel_session(core, group, new_id)
        reverted = group.replace_static_member(self.instance_id, new_id, self.old_id)
        schedule_session(core, group, reverted, now_ms)
        if request_id is not None:
            response = JoinGroupResponse(
                error_code=core.group_write_error(error),
                generation_id=group.generation,
                protocol_type=group.protocol_type,
                protocol_name=group.protocol_name,
                leader=leader,
            )
            core.effects.reply(request_id, response)


# ---- LeaveGroup (§6) -------------------------------------------------------------------------------------------


def handle_leave_group(core: GroupCoordinator, request_id: int, request: LeaveGroupRequest, now_ms: int) -> None:
    group_id = request.group_id
    if not group_id:
        return core.effects.reply(request_id, LeaveGroupResponse(error_code=E.INVALID_GROUP_ID))
    if (error := core.group_status(group_id)) is not None:
        return core.effects.reply(request_id, LeaveGroupResponse(error_code=error))
    group = core.groups.get(group_id)
    if group is not None and group.is_dead():
        return core.effects.reply(request_id, LeaveGroupResponse(error_code=E.COORDINATOR_NOT_AVAILABLE))
    results = []
    for identity in request.members:
        member_id, instance_id = identity.member_id, identity.group_instance_id
        code = E.UNKNOWN_MEMBER_ID if group is None else _leave(core, group, member_id, instance_id, now_ms)
        results.append(MemberResponse(member_id=member_id, group_instance_id=instance_id, error_code=code))
    core.effects.reply(request_id, LeaveGroupResponse(error_code=E.NONE, members=tuple(results)))


def _leave(core: GroupCoordinator, group: Group, member_id: str, instance_id: str | None, now_ms: int) -> ErrorCode:
    """§6.2 step 4 for one identity."""
    if member_id != "" and group.is_static_member_fenced(member_id, instance_id):
        return E.FENCED_INSTANCE_ID
    if member_id in group.pending_members and member_id not in group.members:
        group.pending_members.discard(member_id)
        core.effects.cancel(pending_member_key(group.group_id, member_id))
        if group.state == S.PREPARING_REBALANCE:
            maybe_complete_join(core, group, now_ms)
        return E.NONE
    mapped = group.static_members.get(instance_id) if instance_id is not None else None
    target = group.members.get(mapped if mapped is not None else member_id)
    if target is None:
        return E.UNKNOWN_MEMBER_ID
    target.is_leaving = True
    remove_member_and_update_group(core, group, target, now_ms)
    return E.NONE
