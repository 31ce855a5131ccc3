"""The admin APIs of the group core (group-coordinator.md §7.7–§7.9): DescribeGroups, ListGroups, DeleteGroups.

Pure: must not import gevent, kazoo, sockets, threads or a clock.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from zkcoord.errors import ErrorCode
from zkcoord.group.offsets import remove_group
from zkcoord.model import GroupState
from zkcoord.wire.messages import (
    DeletableGroupResult,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribedGroup,
    DescribedGroupMember,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ListedGroup,
    ListGroupsRequest,
    ListGroupsResponse,
)

if TYPE_CHECKING:
    from zkcoord.group.coordinator import GroupCoordinator

E = ErrorCode
S = GroupState


def handle_describe_groups(
    core: GroupCoordinator, request_id: int, request: DescribeGroupsRequest, now_ms: int
) -> None:
    groups = tuple(_describe(core, group_id) for group_id in request.groups)
    core.effects.reply(request_id, DescribeGroupsResponse(groups=groups))


def _describe(core: GroupCoordinator, group_id: str | None) -> DescribedGroup:
    if group_id is None:
        return DescribedGroup(error_code=E.INVALID_GROUP_ID, group_id=group_id)
    if (error := core.group_status(group_id)) is not None:
        return DescribedGroup(error_code=error, group_id=group_id)
    group = core.groups.get(group_id)
    if group is None:
        return DescribedGroup(error_code=E.NONE, group_id=group_id, group_state=S.DEAD)
    # Only a Stable group shows metadata and assignments (§7.7).
    stable = group.state == S.STABLE
    members = tuple(
        DescribedGroupMember(
            member_id=member.member_id,
            group_instance_id=member.group_instance_id,
            client_id=member.client_id,
            client_host=member.client_host,
            member_metadata=member.metadata(group.protocol_name) if stable else b"",
            member_assignment=member.assignment if stable else b"",
        )
        for member in group.members.values()
    )
    return DescribedGroup(
        error_code=E.NONE,
        group_id=group_id,
        group_state=group.state,
        protocol_type=group.protocol_type or "",
        protocol_data=(group.protocol_name or "") if stable else "",
        members=members,
    )


def handle_list_groups(core: GroupCoordinator, request_id: int, request: ListGroupsRequest, now_ms: int) -> None:
    if not core.active or core.suspended:
        return core.effects.reply(request_id, ListGroupsResponse(error_code=E.COORDINATOR_NOT_AVAILABLE))
    states = set(request.states_filter or ())
    # Every group here is a classic one (KIP-848's consumer groups are not served); types match in any case.
    types = {group_type.lower() for group_type in request.types_filter or ()}
    groups = tuple(
        ListedGroup(group_id=group.group_id, protocol_type=group.protocol_type or "", group_state=group.state)
        for group in core.groups.values()
        if (not states or group.state in states) and (not types or "classic" in types)
    )
    error = E.COORDINATOR_LOAD_IN_PROGRESS if core.loading else E.NONE
    core.effects.reply(request_id, ListGroupsResponse(error_code=error, groups=groups))


def handle_delete_groups(core: GroupCoordinator, request_id: int, request: DeleteGroupsRequest, now_ms: int) -> None:
    results = tuple(
        DeletableGroupResult(group_id=group_id, error_code=_delete_group(core, group_id))
        for group_id in dict.fromkeys(request.groups_names)
    )
    core.effects.reply(request_id, DeleteGroupsResponse(results=results))


def _delete_group(core: GroupCoordinator, group_id: str | None) -> ErrorCode:
    if group_id is None:
        return E.INVALID_GROUP_ID
    if (error := core.group_status(group_id)) is not None:
        return error
    group = core.groups.get(group_id)
    if group is None or group.is_dead():
        return E.GROUP_ID_NOT_FOUND
    if group.state != S.EMPTY:
        return E.NON_EMPTY_GROUP
    remove_group(core, group, sorted(group.offsets))
    group.pending_offsets.clear()
    return E.NONE
