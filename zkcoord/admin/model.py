"""What the admin client returns, its errors, and the pure rules kafka-consumer-groups applies to them.

Owns the result dataclasses, ``GroupAdminError`` (Kafka's per-code exceptions are ``zkcoord.errors``'), the
describe-offsets row rule (ConsumerGroupCommand ``collectGroupsOffsets``), the reset-offsets plan
(``prepareOffsetsToReset`` and ``checkOffsetsRange``) and Kafka's reset CSV. Pure: no IO; must not import
kazoo, sockets, the CLI or the renderer.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from zkcoord.errors import (
    CoordinatorResponseError,
    ErrorCode,
    GroupIdNotFoundError,
    GroupNotEmptyError,
    error_for,
)
from zkcoord.model import GroupState, TopicPartition
from zkcoord.zk.layout import BridgeState

log = logging.getLogger(__name__)

COORDINATOR = "coordinator"
LEGACY = "legacy"
MIXED = "mixed"  # a group with the bridge: legacy and coordinator members share it (docs/mixed-groups.md)
MIGRATING = "migrating"  # a group with a migration state and no bridge: one group over both stores
UNKNOWN_STATE = "Unknown"  # the state of a group whose coordinator did not answer (Kafka's ConsumerGroupState.UNKNOWN)
KINDS = (COORDINATOR, LEGACY)  # the order results come in when a group id exists in both places

S = GroupState
GROUP_STATES = (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE, S.STABLE, S.DEAD, S.EMPTY)  # Kafka's listing order
REBALANCING_STATES = frozenset({S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE})
INACTIVE_STATES = frozenset({S.EMPTY, S.DEAD})  # reset-offsets and alter need one of these (Kafka's rule)
CONSUMER_PROTOCOL_TYPES = frozenset({"consumer", ""})  # ListConsumerGroups keeps only these


# ---- errors ------------------------------------------------------------------------------------------------


class GroupAdminError(CoordinatorResponseError):
    """An admin request refused without a Kafka error of its own (ZooKeeper unreachable, a group in use)."""


class InvalidResetError(GroupAdminError):
    """A reset that cannot be planned: no committed offset to shift, no log-end offset, a bad CSV line."""


class ClusterUnreachableError(GroupAdminError):
    """No broker of a Kafka-protocol cluster answered (``--bootstrap-server``): a connection error."""


class ZooKeeperUnreachableError(GroupAdminError):
    """ZooKeeper did not answer in time (``--zookeeper``): a connection error."""


def commit_failure(group_id: str, failed: Mapping[TopicPartition, int]) -> CoordinatorResponseError:
    """The error an offset commit with failed partitions (``{partition: code}``) raises: the first one's."""
    _, code = min(failed.items())
    names = ", ".join(str(tp) for tp in sorted(failed))
    return error_for(code, f"{error_for(code)} (committing offsets of group '{group_id}' for {names})")


def offset_delete_refusal(group_id: str, code: int) -> CoordinatorResponseError | None:
    """Kafka's exception for OffsetDelete refused as a whole with ``code`` (None: no such refusal), with
    kafka-consumer-groups' messages."""
    if code == ErrorCode.NON_EMPTY_GROUP:
        return GroupNotEmptyError(
            f"Deleting offsets of a consumer group '{group_id}' is forbidden if the group is not empty."
        )
    if code == ErrorCode.GROUP_ID_NOT_FOUND:
        return GroupIdNotFoundError(f"Consumer group '{group_id}' does not exist.")
    if code == ErrorCode.UNSUPPORTED_VERSION:
        return error_for(code, "The coordinator does not support OffsetDelete (UNSUPPORTED_VERSION).")
    return None


def describe_error(error: BaseException) -> str:
    """``Class: message``, as Kafka prints an exception's ``toString``."""
    return f"{type(error).__name__}: {error}"


# ---- results -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Node:
    node_id: int
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port} ({self.node_id})"


@dataclass(frozen=True)
class GroupListing:
    group_id: str
    kind: str  # COORDINATOR, LEGACY, or for a group with a migration state MIXED or MIGRATING
    state: str
    protocol_type: str = "consumer"
    phase: str | None = None  # the migration phase (None: not migrating)
    reads_from: str = ""  # the store the group's readers use: "zookeeper", "log" or "max(zookeeper,log)"


@dataclass(frozen=True)
class GroupsOverview:
    """Every group found, and the coordinator nodes that did not answer (each with why): their groups are missing
    from ``listings`` unless a migration state names them, and then their state is ``Unknown``."""

    listings: tuple[GroupListing, ...]
    unreachable: tuple[str, ...] = ()


@dataclass(frozen=True)
class MemberDescription:
    """A member as DescribeGroups shows it; for a legacy group, one registration under ``ids`` (kind LEGACY)."""

    member_id: str
    group_instance_id: str | None
    client_id: str | None
    host: str | None
    assignment: tuple[TopicPartition, ...] = ()
    kind: str = COORDINATOR


def ordered_members(members: Iterable[MemberDescription]) -> tuple[MemberDescription, ...]:
    """Members in a stable order (docs/admin.md): by ``group.instance.id``, then member id."""
    return tuple(sorted(members, key=lambda m: (m.group_instance_id or "", m.member_id)))


@dataclass(frozen=True)
class OwnerMismatch:
    """A coordinator member of a mixed group whose owner znodes (those naming its thread) are not the partitions
    the coordinator assigned it: expected during a rebalance, a fault when it lasts."""

    member_id: str
    consumer_id: str | None  # its 0.8.2 consumer id (None: not registered in ZooKeeper)
    owned: tuple[TopicPartition, ...]
    assigned: tuple[TopicPartition, ...] | None  # None: the coordinator no longer has the member


@dataclass(frozen=True)
class GroupDescription:
    group_id: str
    kind: str
    state: str
    protocol_type: str
    protocol: str  # the assignment strategy ("" unless Stable, as DescribeGroups answers)
    members: tuple[MemberDescription, ...]
    coordinator: Node | None  # None for a legacy group
    mismatches: tuple[OwnerMismatch, ...] = ()  # only a mixed group has any
    phase: str | None = None  # the migration phase (None: not migrating)
    reads_from: str = ""  # the store the group's readers use (see GroupListing)
    unreachable: str | None = None  # why the group's coordinator could not be asked (None: it answered, or none)

    @property
    def is_inactive(self) -> bool:
        return self.state in INACTIVE_STATES


def coordinator_group(
    group_id: str,
    group: Mapping,
    assignment: Callable[[Mapping], tuple[TopicPartition, ...]],
    coordinator: Node | None,
) -> GroupDescription:
    """A coordinator group from its DescribeGroups answer (Kafka's field names, whichever protocol carried it);
    ``assignment(member)`` reads a member's partitions, which only a "consumer" group's members have."""
    consumer = group["protocol_type"] == "consumer"
    members = tuple(
        MemberDescription(
            member["member_id"],
            member.get("group_instance_id"),
            member.get("client_id"),
            member.get("client_host"),
            assignment(member) if consumer else (),
        )
        for member in group.get("members") or []
    )
    return GroupDescription(
        group_id,
        COORDINATOR,
        group["group_state"],
        group["protocol_type"] or "",
        group.get("protocol_data") or "",
        ordered_members(members),
        coordinator,
    )


def mixed_group(
    legacy: GroupDescription, coordinator: GroupDescription | None, bridge: BridgeState | None
) -> GroupDescription:
    """One description of a mixed group from its two halves. Legacy members are the registrations the bridge
    does not hold, with the partitions their owner znodes give them; coordinator members are the coordinator's,
    with its assignment, and the bridge's registrations the coordinator no longer has, with their owner znodes
    (they hold those partitions until a node releases them). The group rebalances while its coordinator half
    does; otherwise it is Stable with members, Empty without. Without a bridge (a migrating group outside
    DUAL_WRITE) the halves are put side by side: kind MIGRATING, no owner znodes compared."""
    if bridge is None:
        return _side_by_side(legacy, coordinator)
    owned = {member.member_id: member.assignment for member in legacy.members}  # by consumer id
    consumer_ids = {member.member_id: member.consumer_id for member in bridge.members}
    legacy_members = [member for member in legacy.members if member.member_id not in bridge.consumer_ids]
    coordinator_members = list(coordinator.members) if coordinator is not None else []
    mismatches = []
    for member in coordinator_members:
        consumer_id = consumer_ids.get(member.member_id)
        held = owned.get(consumer_id, ()) if consumer_id is not None else ()
        if set(held) != set(member.assignment):
            mismatches.append(OwnerMismatch(member.member_id, consumer_id, held, member.assignment))
    present = {member.member_id for member in coordinator_members}
    for departed in (member for member in bridge.members if member.member_id not in present):
        held = owned.get(departed.consumer_id, ())
        coordinator_members.append(MemberDescription(departed.member_id, departed.instance_id, None, None, held))
        mismatches.append(OwnerMismatch(departed.member_id, departed.consumer_id, held, None))
    members = ordered_members(legacy_members) + ordered_members(coordinator_members)
    node = coordinator.coordinator if coordinator is not None else None
    state = _merged_state(members, coordinator)
    return GroupDescription(
        legacy.group_id, MIXED, state, "consumer", bridge.strategy, members, node, tuple(mismatches)
    )


def _merged_state(members: tuple[MemberDescription, ...], coordinator: GroupDescription | None) -> str:
    """A group over both stores rebalances while its coordinator half does; else Stable with members, Empty without."""
    if coordinator is not None and coordinator.state in REBALANCING_STATES:
        return coordinator.state
    return GroupState.STABLE if members else GroupState.EMPTY


def _side_by_side(legacy: GroupDescription, coordinator: GroupDescription | None) -> GroupDescription:
    members = ordered_members(legacy.members) + (coordinator.members if coordinator is not None else ())
    protocol, node = (coordinator.protocol, coordinator.coordinator) if coordinator is not None else ("", None)
    state = _merged_state(members, coordinator)
    return GroupDescription(legacy.group_id, MIGRATING, state, "consumer", protocol, members, node)


@dataclass(frozen=True)
class OffsetAndMetadata:
    offset: int
    metadata: str = ""


@dataclass(frozen=True)
class GroupOffsets:
    """Committed offsets of one group in one place."""

    group_id: str
    kind: str
    offsets: Mapping[TopicPartition, OffsetAndMetadata]


@dataclass(frozen=True)
class PartitionOffsetRow:
    """One row of ``describe --offsets``; None prints as Kafka's "-"."""

    topic: str | None
    partition: int | None
    current_offset: int | None
    log_end_offset: int | None
    lag: int | None
    consumer_id: str | None
    host: str | None
    client_id: str | None
    kind: str | None = None  # the member's (None: no member has the partition)


@dataclass(frozen=True)
class GroupOffsetsDescription:
    description: GroupDescription
    rows: tuple[PartitionOffsetRow, ...]


@dataclass(frozen=True)
class GroupResult:
    """The outcome of a per-group operation (delete) in one place; ``error`` None means success."""

    group_id: str
    kind: str
    error: GroupAdminError | None = None


@dataclass(frozen=True)
class MemberRemoval:
    group_instance_id: str
    error: GroupAdminError | None = None


@dataclass(frozen=True)
class OffsetDeletion:
    group_id: str
    kind: str
    partitions: Mapping[TopicPartition, GroupAdminError | None]


@dataclass(frozen=True)
class ResetPlan:
    group_id: str
    kind: str
    offsets: Mapping[TopicPartition, int]
    executed: bool


@dataclass(frozen=True)
class ResetSpec:
    """One of kafka-consumer-groups' reset scenarios; build it with the class methods."""

    scenario: str  # "earliest", "latest", "offset", "shift", "file"
    value: int = 0
    plan: Mapping[TopicPartition, int] = field(default_factory=dict)

    @classmethod
    def to_earliest(cls) -> ResetSpec:
        return cls("earliest")

    @classmethod
    def to_latest(cls) -> ResetSpec:
        return cls("latest")

    @classmethod
    def to_offset(cls, offset: int) -> ResetSpec:
        return cls("offset", offset)

    @classmethod
    def shift_by(cls, shift: int) -> ResetSpec:
        return cls("shift", shift)

    @classmethod
    def from_plan(cls, plan: Mapping[TopicPartition, int]) -> ResetSpec:
        return cls("file", plan=dict(plan))


# ---- kafka-consumer-groups' rules -----------------------------------------------------------------------


def lag_of(current: int | None, log_end: int | None) -> int | None:
    """``getLag``: unknown without a committed offset (or -1) or without a log-end offset."""
    if current is None or current == -1 or log_end is None:
        return None
    return log_end - current


def offset_rows(
    description: GroupDescription,
    committed: Mapping[TopicPartition, int],
    end_offsets: Mapping[TopicPartition, int],
) -> tuple[PartitionOffsetRow, ...]:
    """``collectGroupsOffsets``: members with partitions (most partitions first), then committed partitions
    nobody is assigned, with "-" for consumer, host and client. Within a member, by topic and partition."""

    def row(tp: TopicPartition, member: MemberDescription | None) -> PartitionOffsetRow:
        current = committed.get(tp)
        end = end_offsets.get(tp)
        return PartitionOffsetRow(
            tp.topic,
            tp.partition,
            current,
            end,
            lag_of(current, end),
            member.member_id if member else None,
            member.host if member else None,
            member.client_id if member else None,
            member.kind if member else None,
        )

    rows: list[PartitionOffsetRow] = []
    assigned: set[TopicPartition] = set()
    with_partitions = [m for m in description.members if m.assignment]
    for member in sorted(with_partitions, key=lambda m: -len(m.assignment)):  # stable: ties keep member order
        for tp in sorted(set(member.assignment)):
            rows.append(row(tp, member))
            assigned.add(tp)
    rows.extend(row(tp, None) for tp in sorted(set(committed) - assigned))
    return tuple(rows)


def clamp_offsets(
    requested: Mapping[TopicPartition, int],
    start_offsets: Mapping[TopicPartition, int],
    end_offsets: Mapping[TopicPartition, int],
) -> dict[TopicPartition, int]:
    """``checkOffsetsRange``: above the log end → the log end; below the log start → the log start.
    Without a known start, the lower bound is 0."""
    clamped = {}
    for tp, offset in requested.items():
        end = end_offsets.get(tp)
        start = start_offsets.get(tp, 0)
        if end is not None and offset > end:
            log.warning("New offset (%d) is higher than latest offset for %s. Value will be set to %d", offset, tp, end)
            offset = end
        elif offset < start:
            log.warning(
                "New offset (%d) is lower than earliest offset for %s. Value will be set to %d", offset, tp, start
            )
            offset = start
        clamped[tp] = offset
    return clamped


def plan_reset(
    spec: ResetSpec,
    partitions: Iterable[TopicPartition],
    committed: Mapping[TopicPartition, int],
    start_offsets: Mapping[TopicPartition, int],
    end_offsets: Mapping[TopicPartition, int] | None,
) -> dict[TopicPartition, int]:
    """``prepareOffsetsToReset`` for one group. ``end_offsets`` None: no record source, log ends unknown.
    A from-file spec resets the partitions of its plan and ignores ``partitions``, as Kafka does."""
    ends = end_offsets or {}
    wanted = sorted(set(spec.plan) if spec.scenario == "file" else set(partitions))
    if spec.scenario == "earliest":
        return {tp: start_offsets.get(tp, 0) for tp in wanted}
    if spec.scenario == "latest":
        missing = [tp for tp in wanted if tp not in ends]
        if missing:
            raise InvalidResetError(
                f"Error getting ending offset of topic partition: {missing[0]}"
                + ("" if end_offsets is not None else " (no record source: pass --source to know log-end offsets)")
            )
        return {tp: ends[tp] for tp in wanted}
    if spec.scenario == "offset":
        return clamp_offsets(dict.fromkeys(wanted, spec.value), start_offsets, ends)
    if spec.scenario == "shift":
        requested = {}
        for tp in wanted:
            if tp not in committed:
                raise InvalidResetError(
                    f"Cannot shift offset for partition {tp} since there is no current committed offset"
                )
            requested[tp] = committed[tp] + spec.value
        return clamp_offsets(requested, start_offsets, ends)
    if spec.scenario == "file":
        return clamp_offsets({tp: spec.plan[tp] for tp in wanted}, start_offsets, ends)
    raise InvalidResetError(f"unknown reset scenario {spec.scenario!r}")


def parse_reset_csv(text: str, group_id: str | None = None) -> dict[TopicPartition, int]:
    """Kafka's reset plan CSV: ``topic,partition,offset`` lines, or ``group,topic,partition,offset`` (the
    lines of ``group_id`` are kept). Blank lines are skipped; anything else malformed is an error."""
    plan: dict[TopicPartition, int] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        fields = [part.strip() for part in line.split(",")]
        if len(fields) == 4:
            group, *fields = fields
            if group_id is not None and group != group_id:
                continue
        if len(fields) != 3 or not fields[0]:
            raise InvalidResetError(f"line {number} of the reset plan is not topic,partition,offset: {line!r}")
        topic, partition, offset = fields
        try:
            plan[TopicPartition(topic, int(partition))] = int(offset)
        except ValueError:
            raise InvalidResetError(f"line {number} of the reset plan has a non-integer partition or offset") from None
    return plan


def format_reset_csv(offsets: Mapping[TopicPartition, int]) -> str:
    """``--export``'s single-group form: ``topic,partition,offset`` lines."""
    return "".join(f"{tp.topic},{tp.partition},{offset}\n" for tp, offset in sorted(offsets.items()))
