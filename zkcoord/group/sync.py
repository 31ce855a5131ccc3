"""SyncGroup and Heartbeat (group-coordinator.md §4, §5.1): the leader's assignment, and members staying alive.

Owns the checks SyncGroup and Heartbeat share, parking followers' SyncGroups until the leader's assignment
is written, and that write (:class:`AssignmentWrite`): the assignment becomes the members' only once its
record is in the log, applied from that record.

Pure: must not import gevent, kazoo, sockets, threads or a clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from zkcoord.errors import ErrorCode
from zkcoord.group.model import Group, Member
from zkcoord.group.rebalance import (
    metadata_record,
    prepare_rebalance,
    propagate_assignment,
    propagate_sync_error,
    schedule_session,
    sync_received,
)
from zkcoord.model import GroupState
from zkcoord.offsets.records import GroupMetadataValue
from zkcoord.wire.messages import HeartbeatRequest, HeartbeatResponse, SyncGroupRequest, SyncGroupResponse

if TYPE_CHECKING:
    from zkcoord.group.coordinator import GroupCoordinator

E = ErrorCode
S = GroupState


def handle_sync_group(core: GroupCoordinator, request_id: int, request: SyncGroupRequest, now_ms: int) -> None:
    def answer(error: ErrorCode) -> None:
        core.effects.reply(request_id, SyncGroupResponse(error_code=error))

    group_id = request.group_id
    if not group_id:
        return answer(E.INVALID_GROUP_ID)
    if (error := core.group_status(group_id)) is not None:
        # While loading, 27 sends the member back to JoinGroup without a coordinator lookup (§4.2 step 1).
        return answer(E.REBALANCE_IN_PROGRESS if error == E.COORDINATOR_LOAD_IN_PROGRESS else error)
    group, member, error = current_member(core, request)
    if error is not None:
        return answer(error)
    member_id = member.member_id
    protocol_type, protocol_name = request.protocol_type, request.protocol_name
    if (protocol_type is not None and protocol_type != group.protocol_type) or (
        protocol_name is not None and protocol_name != group.protocol_name
    ):
        return answer(E.INCONSISTENT_GROUP_PROTOCOL)
    if group.state == S.EMPTY:
        answer(E.UNKNOWN_MEMBER_ID)
    elif group.state == S.PREPARING_REBALANCE:
        answer(E.REBALANCE_IN_PROGRESS)
    elif group.state == S.COMPLETING_REBALANCE:
        member.awaiting_sync = request_id
        sync_received(core, group, member_id)
        if member_id == group.leader_id:
            _store_assignment(core, group, {entry.member_id: entry.assignment for entry in request.assignments})
    else:
        sync_received(core, group, member_id)
        response = SyncGroupResponse(
            error_code=E.NONE,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            assignment=member.assignment,
        )
        core.effects.reply(request_id, response)
        schedule_session(core, group, member, now_ms)


def current_member(
    core: GroupCoordinator, request: SyncGroupRequest | HeartbeatRequest
) -> tuple[Group | None, Member | None, ErrorCode | None]:
    """The checks SyncGroup and Heartbeat share (§4.2 steps 2–3, §5.1 steps 2–3), in Kafka's order."""
    group = core.groups.get(request.group_id)
    member_id = request.member_id
    if group is None:
        return None, None, E.UNKNOWN_MEMBER_ID
    if group.is_dead():
        return group, None, E.COORDINATOR_NOT_AVAILABLE
    if group.is_static_member_fenced(member_id, request.group_instance_id):
        return group, None, E.FENCED_INSTANCE_ID
    member = group.members.get(member_id)
    if member is None:
        # Pending (MEMBER_ID_REQUIRED) ids are not members: they cannot sync or heartbeat (§5.4).
        return group, None, E.UNKNOWN_MEMBER_ID
    if request.generation_id != group.generation:
        return group, member, E.ILLEGAL_GENERATION
    return group, member, None


def _store_assignment(core: GroupCoordinator, group: Group, given: dict[str, bytes]) -> None:
    """§4.2 step 4: persist the leader's assignment; only then answer the parked SyncGroups."""
    assignments = {member_id: given.get(member_id, b"") for member_id in group.members}
    records = metadata_record(group, assignments)
    core.effects.append(group.partition, records, AssignmentWrite(group, group.generation, records[0][1]))


@dataclass(frozen=True)
class AssignmentWrite:
    """The leader's assignment in a group-metadata record: once written, it is applied and the group is Stable."""

    group: Group
    generation: int
    record: GroupMetadataValue

    def finish(self, core: GroupCoordinator, error: ErrorCode | None, base_offset: int, now_ms: int) -> None:
        group = self.group
        if (
            core.groups.get(group.group_id) is not group
            or group.state != S.COMPLETING_REBALANCE
            or group.generation != self.generation
        ):
            return
        if error is not None:
            propagate_sync_error(core, group, core.group_write_error(error), now_ms)
            prepare_rebalance(core, group, now_ms)
            return
        written = {member.member_id: member.assignment for member in self.record.members}
        for member_id, member in group.members.items():
            member.assignment = written.get(member_id, b"")
        propagate_assignment(core, group, E.NONE, now_ms)
        group.transition_to(S.STABLE, now_ms)


def handle_heartbeat(core: GroupCoordinator, request_id: int, request: HeartbeatRequest, now_ms: int) -> None:
    group_id = request.group_id
    if not group_id:
        return core.effects.reply(request_id, HeartbeatResponse(error_code=E.INVALID_GROUP_ID))
    if (error := core.group_status(group_id)) is not None:
        # "Respond blindly" while loading so members survive a failover (§5.1 step 1).
        code = E.NONE if error == E.COORDINATOR_LOAD_IN_PROGRESS else error
        return core.effects.reply(request_id, HeartbeatResponse(error_code=code))
    group, member, error = current_member(core, request)
    if error is not None:
        return core.effects.reply(request_id, HeartbeatResponse(error_code=error))
    if group.state == S.EMPTY:
        return core.effects.reply(request_id, HeartbeatResponse(error_code=E.UNKNOWN_MEMBER_ID))
    schedule_session(core, group, member, now_ms)
    code = E.REBALANCE_IN_PROGRESS if group.state == S.PREPARING_REBALANCE else E.NONE
    core.effects.reply(request_id, HeartbeatResponse(error_code=code))
