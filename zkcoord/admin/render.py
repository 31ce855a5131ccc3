"""kafka-consumer-groups' text layout, and the JSON form of the same data, for ``zkcoord groups``.

Tables follow ConsumerGroupCommand's format strings: each column left-aligned to the larger of Kafka's
minimum width and its longest value, one space apart, "-" for an unknown value, a blank line before each
table. Trailing spaces are stripped. A legacy group is labelled "<group> (legacy)" wherever its id is printed.
A migrating or mixed group's tables have a KIND column (``legacy`` or ``coordinator``) before CONSUMER-ID, and a
line above them naming its phase and the store its readers use; ``list`` is zkcoord's own table (GROUP KIND STATE
PHASE READS-FROM).

Pure: builds strings and plain data from zkcoord.admin.model results; no IO. Must not import the client.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from zkcoord.admin.model import (
    LEGACY,
    MIGRATING,
    MIXED,
    GroupDescription,
    GroupListing,
    GroupOffsetsDescription,
    GroupResult,
    MemberDescription,
    MemberRemoval,
    Node,
    OffsetDeletion,
    OwnerMismatch,
    PartitionOffsetRow,
    ResetPlan,
    describe_error,
)
from zkcoord.errors import CoordinatorResponseError
from zkcoord.model import GroupState, TopicPartition

OVER_BOTH_STORES = (MIXED, MIGRATING)  # kinds whose members may be of both kinds
READERS = {
    "zookeeper": "its readers use ZooKeeper's offsets",
    "log": "its readers use the log's offsets",
    "max(zookeeper,log)": "its readers take the larger of ZooKeeper's and the log's offsets",
}

MISSING = "-"
OFFSETS_HEADER = (
    "GROUP",
    "TOPIC",
    "PARTITION",
    "CURRENT-OFFSET",
    "LOG-END-OFFSET",
    "LAG",
    "CONSUMER-ID",
    "HOST",
    "CLIENT-ID",
)


def label(group_id: str, kind: str) -> str:
    """The group as it appears in a GROUP column: a legacy group is marked ``(legacy)``."""
    return f"{group_id} (legacy)" if kind == LEGACY else group_id


def quoted(group_id: str, kind: str) -> str:
    """The group as it appears in a message: ``'g'`` or ``'g' (legacy)``."""
    return f"'{group_id}' (legacy)" if kind == LEGACY else f"'{group_id}'"


def _text(value: object) -> str:
    return MISSING if value is None else str(value)


def _line(widths: Sequence[int | None], values: Sequence[object]) -> str:
    """One Java ``%-Ns %-Ms ... %s`` line: a width None is the unpadded last column."""
    cells = [_text(v) if w is None else _text(v).ljust(w) for w, v in zip(widths, values, strict=True)]
    return " ".join(cells).rstrip()


def _width(minimum: int, values: Iterable[object]) -> int:
    return max([minimum, *(len(_text(v)) for v in values)])


def _with_kind(cells: Sequence, at: int, kind: object) -> list:
    """A mixed group's line: ``kind`` (a width, a header or a member's kind) inserted at column ``at``."""
    return [*cells[:at], kind, *cells[at:]]


# ---- list --------------------------------------------------------------------------------------------------


def list_lines(listings: Sequence[GroupListing]) -> list[str]:
    """``list``: GROUP KIND STATE PHASE READS-FROM, one line per group (a migrating group once)."""
    if not listings:
        return []
    header = ("GROUP", "KIND", "STATE", "PHASE", "READS-FROM")
    rows = [(g.group_id, g.kind, g.state, g.phase, g.reads_from or None) for g in listings]
    minimums = (15, 11, 19, 11)  # room for "coordinator", "CompletingRebalance", "LOG_PRIMARY"
    widths = [*(_width(minimum, (row[at] for row in rows)) for at, minimum in enumerate(minimums)), None]
    return [_line(widths, header)] + [_line(widths, row) for row in rows]


def unreachable_lines(unreachable: Sequence[str]) -> list[str]:
    """stderr lines for coordinator nodes that did not answer ``list``."""
    return [
        f"Error: coordinator unreachable: {why}; the coordinator groups it holds are not listed (a migrating group "
        "is, in state Unknown)"
        for why in unreachable
    ]


# ---- describe ----------------------------------------------------------------------------------------------


def migration_header(description: GroupDescription) -> str | None:
    """The line above a migrating group's table: its phase and the store its readers use (None: not migrating)."""
    if description.phase is None:
        return None
    what = "a mixed group" if description.kind == MIXED else "migrating"
    return (
        f"Consumer group '{description.group_id}' is {what}: phase {description.phase}; "
        f"{READERS[description.reads_from]}."
    )


def unreachable_notices(description: GroupDescription) -> list[str]:
    """stderr lines for a group whose coordinator did not answer: what is unknown because of it."""
    if description.unreachable is None:
        return []
    if description.kind == LEGACY:
        return [
            f"Error: coordinator unreachable: {description.unreachable}; a coordinator group "
            f"'{description.group_id}', if there is one, is not shown"
        ]
    who = quoted(description.group_id, description.kind)
    lines = [f"Error: the coordinator of consumer group {who} could not be asked: {description.unreachable}"]
    if description.reads_from == "log" and description.phase is not None:
        frozen = "frozen since LOG_ONLY" if description.phase == "LOG_ONLY" else "mirrored behind the log"
        lines.append(
            f"Its readers use the log, whose offsets are unknown: CURRENT-OFFSET is '-'; ZooKeeper's offsets "
            f"({frozen}) are not what they read."
        )
    elif description.reads_from == "max(zookeeper,log)":
        lines.append(
            "CURRENT-OFFSET is ZooKeeper's alone, a lower bound: its readers take the larger of it and the log's, "
            "which is unknown."
        )
    lines.append("Its coordinator members and state are unknown.")
    return lines


def state_notice(description: GroupDescription) -> str | None:
    """Kafka's stderr line for a group that is empty or rebalancing (``shouldPrintMemberState``)."""
    who = quoted(description.group_id, description.kind)
    if description.state == GroupState.EMPTY:
        return f"\nConsumer group {who} has no active members."
    if description.state in (GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE):
        return f"\nWarning: Consumer group {who} is rebalancing."
    return None


def mismatch_notices(description: GroupDescription) -> list[str]:
    """stderr lines for a mixed group's coordinator members whose owner znodes and assignment differ."""
    return [_mismatch_notice(description, mismatch) for mismatch in description.mismatches]


def _mismatch_notice(description: GroupDescription, mismatch: OwnerMismatch) -> str:
    who = f"Warning: coordinator member {mismatch.member_id} of consumer group '{description.group_id}'"
    if mismatch.consumer_id is None:
        return f"{who} is not registered in ZooKeeper; it is assigned {format_assignment(mismatch.assigned or ())}."
    owned = format_assignment(mismatch.owned)
    if mismatch.assigned is None:
        gone = "has no coordinator answering" if description.coordinator is None else "is gone from the coordinator"
        return f"{who} {gone}; its registration {mismatch.consumer_id} still owns {owned} until a node releases it."
    return (
        f"{who} is assigned {format_assignment(mismatch.assigned)} but the owner znodes give its thread "
        f"{mismatch.consumer_id}-0 {owned}."
    )


def offsets_lines(result: GroupOffsetsDescription) -> list[str]:
    """``--describe --offsets``: GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG [KIND] CONSUMER-ID HOST
    CLIENT-ID."""
    if not result.rows:
        return []
    group = label(result.description.group_id, result.description.kind)
    rows = result.rows
    widths = [
        _width(15, [group]),
        _width(15, (r.topic for r in rows)),
        10,
        15,
        15,
        15,
        _width(15, (r.consumer_id for r in rows)),
        _width(15, (r.host for r in rows)),
        None,
    ]
    header = OFFSETS_HEADER
    lines = [(group, *_row_values(r)) for r in rows]
    if result.description.kind in OVER_BOTH_STORES:
        kind_at = OFFSETS_HEADER.index("CONSUMER-ID")
        widths = _with_kind(widths, kind_at, _width(4, (r.kind for r in rows)))
        header = _with_kind(header, kind_at, "KIND")
        lines = [_with_kind(line, kind_at, r.kind) for line, r in zip(lines, rows, strict=True)]
    return ["", _line(widths, header)] + [_line(widths, line) for line in lines]


def _row_values(row: PartitionOffsetRow) -> tuple:
    return (
        row.topic,
        row.partition,
        row.current_offset,
        row.log_end_offset,
        row.lag,
        row.consumer_id,
        row.host,
        row.client_id,
    )


def format_assignment(partitions: Iterable[TopicPartition]) -> str:
    """``topic(0,1), other(2)`` sorted by topic, or "-"."""
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    if not by_topic:
        return MISSING
    return ", ".join(f"{topic}({','.join(str(p) for p in sorted(ps))})" for topic, ps in sorted(by_topic.items()))


def members_lines(description: GroupDescription, verbose: bool) -> list[str]:
    """``--describe --members``: GROUP [KIND] CONSUMER-ID [GROUP-INSTANCE-ID] HOST CLIENT-ID #PARTITIONS
    [ASSIGNMENT]. GROUP-INSTANCE-ID appears when some member has one, as in Kafka."""
    members = description.members
    if not members:
        return []
    group = label(description.group_id, description.kind)
    with_instance = any(m.group_instance_id for m in members)
    widths = [
        _width(15, [group]),
        _width(15, (m.member_id for m in members)),
        _width(17, (m.group_instance_id or "" for m in members)),
        _width(15, (m.host for m in members)),
        _width(15, (m.client_id for m in members)),
        15,
    ]
    if not with_instance:
        del widths[2]
    if verbose:
        widths.append(None)

    def cells(values: tuple, assignment: str) -> tuple:
        values = values if with_instance else values[:2] + values[3:]
        return (*values, assignment) if verbose else values

    header = cells(("GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS"), "ASSIGNMENT")
    lines = [cells(_member_values(group, m), format_assignment(m.assignment)) for m in members]
    if description.kind in OVER_BOTH_STORES:
        widths = _with_kind(widths, 1, _width(4, (m.kind for m in members)))
        header = _with_kind(header, 1, "KIND")
        lines = [_with_kind(line, 1, m.kind) for line, m in zip(lines, members, strict=True)]
    return ["", _line(widths, header)] + [_line(widths, line) for line in lines]


def _member_values(group: str, member: MemberDescription) -> tuple:
    return (
        group,
        member.member_id,
        member.group_instance_id or "",
        member.host,
        member.client_id,
        len(member.assignment),
    )


def coordinator_text(node: Node | None) -> str:
    return MISSING if node is None else str(node)


def state_lines(description: GroupDescription) -> list[str]:
    """``--describe --state``: GROUP COORDINATOR (ID) ASSIGNMENT-STRATEGY STATE #MEMBERS. Kafka pads GROUP to
    the coordinator column's width (at least 25) and COORDINATOR (ID) to 25; so does this."""
    coordinator = coordinator_text(description.coordinator)
    widths = [max(25, len(coordinator)), 25, 20, 15, None]
    values = (
        label(description.group_id, description.kind),
        coordinator,
        description.protocol or ("" if description.kind != LEGACY else MISSING),
        description.state,
        len(description.members),
    )
    return ["", _line(widths, ("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"))] + [
        _line(widths, values)
    ]


# ---- changes -----------------------------------------------------------------------------------------------


def reset_lines(plans: Sequence[ResetPlan]) -> list[str]:
    """``--reset-offsets``: Kafka's fixed ``%-30s %-30s %-10s %-15s`` GROUP TOPIC PARTITION NEW-OFFSET table."""
    rows = [
        (label(plan.group_id, plan.kind), tp.topic, tp.partition, offset)
        for plan in plans
        for tp, offset in sorted(plan.offsets.items())
    ]
    if not rows:
        return []
    widths = [30, 30, 10, 15]
    return ["", _line(widths, ("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"))] + [_line(widths, r) for r in rows]


def delete_lines(results: Sequence[GroupResult]) -> tuple[list[str], list[str]]:
    """``--delete``: (stdout lines, stderr lines) with Kafka's sentences."""
    done = ", ".join(f"'{label(r.group_id, r.kind)}'" for r in results if r.error is None)
    failed = [r for r in results if r.error is not None]
    if not failed:
        return [f"Deletion of requested consumer groups ({done}) was successful."], []
    errors = ["Error: Deletion of some consumer groups failed:"] + [
        f"* Group '{label(r.group_id, r.kind)}' could not be deleted due to: {describe_error(r.error)}" for r in failed
    ]
    out = ["", f"These consumer groups were deleted successfully: {done}"] if done else []
    return out, errors


def _status(error: CoordinatorResponseError | None) -> str:
    return "Successful" if error is None else f"Error: {error}"


def delete_offsets_lines(deletion: OffsetDeletion, topics: Sequence[str]) -> list[str]:
    """``--delete-offsets``: Kafka's sentence (sic) and its ``%-30s %-15s %-15s`` TOPIC PARTITION STATUS table."""
    lines = []
    if not any(deletion.partitions.values()):
        group = label(deletion.group_id, deletion.kind)
        lines.append(f"Request succeed for deleting offsets with topic {', '.join(topics)} group {group}")
    widths = [30, 15, 15]
    lines += ["", _line(widths, ("TOPIC", "PARTITION", "STATUS"))]
    for tp, error in sorted(deletion.partitions.items()):
        lines.append(_line(widths, (tp.topic, tp.partition, _status(error))))
    return lines


def remove_members_lines(group_id: str, removals: Sequence[MemberRemoval]) -> list[str]:
    """``remove-members`` (no Kafka CLI has it): GROUP GROUP-INSTANCE-ID STATUS."""
    widths = [_width(15, [group_id]), _width(17, (r.group_instance_id for r in removals)), None]
    return ["", _line(widths, ("GROUP", "GROUP-INSTANCE-ID", "STATUS"))] + [
        _line(widths, (group_id, r.group_instance_id, _status(r.error))) for r in removals
    ]


# ---- JSON --------------------------------------------------------------------------------------------------


def _partition(tp: TopicPartition) -> dict:
    return {"topic": tp.topic, "partition": tp.partition}


def _node(node: Node | None) -> dict | None:
    return None if node is None else {"id": node.node_id, "host": node.host, "port": node.port}


def _error(error: CoordinatorResponseError | None) -> str | None:
    return None if error is None else describe_error(error)


def listing_json(listing: GroupListing) -> dict:
    return {
        "group": listing.group_id,
        "kind": listing.kind,
        "state": listing.state,
        "protocol_type": listing.protocol_type,
        "phase": listing.phase,
        "reads_from": listing.reads_from or None,
    }


def _group_json(description: GroupDescription) -> dict:
    """The group, its kind and state; a migrating group's phase and readers' store, and why a coordinator that
    did not answer could not be asked, when there is one."""
    migration = {}
    if description.phase is not None:
        migration = {"phase": description.phase, "reads_from": description.reads_from}
    if description.unreachable is not None:
        migration["coordinator_unreachable"] = description.unreachable
    return {"group": description.group_id, "kind": description.kind, "state": description.state, **migration}


def _kind_json(description: GroupDescription, kind: str | None) -> dict:
    """A migrating or mixed group's member kind, on each of its rows and members (nothing for another group)."""
    return {"kind": kind} if description.kind in OVER_BOTH_STORES else {}


def _mismatches_json(description: GroupDescription) -> dict:
    """A mixed group's owner mismatches (nothing for another group)."""
    if description.kind != MIXED:
        return {}
    return {
        "owner_mismatches": [
            {
                "member_id": m.member_id,
                "consumer_id": m.consumer_id,
                "owned": [_partition(tp) for tp in sorted(m.owned)],
                "assigned": None if m.assigned is None else [_partition(tp) for tp in sorted(m.assigned)],
            }
            for m in description.mismatches
        ]
    }


def offsets_json(result: GroupOffsetsDescription) -> dict:
    keys = ("topic", "partition", "current_offset", "log_end_offset", "lag", "consumer_id", "host", "client_id")
    return {
        **_group_json(result.description),
        "coordinator": _node(result.description.coordinator),
        "offsets": [
            {**dict(zip(keys, _row_values(row), strict=True)), **_kind_json(result.description, row.kind)}
            for row in result.rows
        ],
        **_mismatches_json(result.description),
    }


def members_json(description: GroupDescription) -> dict:
    return {
        **_group_json(description),
        "members": [
            {
                **_kind_json(description, m.kind),
                "consumer_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "host": m.host,
                "client_id": m.client_id,
                "partitions": len(m.assignment),
                "assignment": [_partition(tp) for tp in sorted(m.assignment)],
            }
            for m in description.members
        ],
        **_mismatches_json(description),
    }


def state_json(description: GroupDescription) -> dict:
    return {
        **_group_json(description),
        "coordinator": _node(description.coordinator),
        "assignment_strategy": description.protocol or None,
        "protocol_type": description.protocol_type,
        "members": len(description.members),
    }


def reset_json(plan: ResetPlan) -> dict:
    return {
        "group": plan.group_id,
        "kind": plan.kind,
        "executed": plan.executed,
        "offsets": [{**_partition(tp), "new_offset": offset} for tp, offset in sorted(plan.offsets.items())],
    }


def delete_json(result: GroupResult) -> dict:
    deleted = result.error is None
    return {"group": result.group_id, "kind": result.kind, "deleted": deleted, "error": _error(result.error)}


def removal_json(group_id: str, removal: MemberRemoval) -> dict:
    return {
        "group": group_id,
        "group_instance_id": removal.group_instance_id,
        "removed": removal.error is None,
        "error": _error(removal.error),
    }


def deletion_json(deletion: OffsetDeletion) -> dict:
    return {
        "group": deletion.group_id,
        "kind": deletion.kind,
        "partitions": [
            {**_partition(tp), "deleted": error is None, "error": _error(error)}
            for tp, error in sorted(deletion.partitions.items())
        ],
    }
