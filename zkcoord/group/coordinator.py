"""Kafka's classic group coordinator as a deterministic state machine (group-coordinator.md §0–§7, §9.4–§9.7).

Typed requests come in with a request id and ``now_ms`` (:meth:`GroupCoordinator.handle`); handlers change
memory and queue effects (:mod:`zkcoord.group.effects`): replies, record appends, timers. A runtime
(:mod:`zkcoord.runtime`) carries the effects out and reports back: an append's outcome through
:meth:`~GroupCoordinator.on_append_done`, a due timer through :meth:`~GroupCoordinator.on_timer`. State that
must be durable changes only once its records are written (§9.4). Replaying the appended records
(:meth:`~GroupCoordinator.load_partition`) rebuilds every group as Kafka's loader does.

The handlers live by concept, as Kafka splits them: :mod:`~zkcoord.group.join` (JoinGroup, LeaveGroup),
:mod:`~zkcoord.group.rebalance` (the rebalance between requests), :mod:`~zkcoord.group.sync` (SyncGroup,
Heartbeat), :mod:`~zkcoord.group.offsets` (commit, fetch, delete, expire) and :mod:`~zkcoord.group.admin`.
This module holds the state they share and the entry points.

Pure: must not import gevent, kazoo, sockets, threads or a clock.
"""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from zkcoord.assign.java import java_string_hash
from zkcoord.errors import ErrorCode
from zkcoord.group import admin, join, offsets, rebalance, sync
from zkcoord.group.config import CoordinatorConfig
from zkcoord.group.effects import Effect, Effects, Records, TimerKey
from zkcoord.group.model import Group
from zkcoord.model import GroupState, TopicPartition
from zkcoord.offsets.store import OffsetStore
from zkcoord.wire import messages as m
from zkcoord.wire.limits import group_id_too_long

log = logging.getLogger(__name__)

E = ErrorCode
S = GroupState

# §9.5: how an append error reaches the client, for a group-metadata write and for an offset commit.
GROUP_WRITE_ERRORS: Mapping[ErrorCode, ErrorCode] = {
    E.UNKNOWN_TOPIC_OR_PARTITION: E.COORDINATOR_NOT_AVAILABLE,
    E.NOT_ENOUGH_REPLICAS: E.COORDINATOR_NOT_AVAILABLE,
    E.NOT_ENOUGH_REPLICAS_AFTER_APPEND: E.COORDINATOR_NOT_AVAILABLE,
    E.NOT_LEADER_OR_FOLLOWER: E.NOT_COORDINATOR,
    E.KAFKA_STORAGE_ERROR: E.NOT_COORDINATOR,
    E.REQUEST_TIMED_OUT: E.REBALANCE_IN_PROGRESS,
    E.MESSAGE_TOO_LARGE: E.UNKNOWN_SERVER_ERROR,
    E.RECORD_LIST_TOO_LARGE: E.UNKNOWN_SERVER_ERROR,
    E.INVALID_FETCH_SIZE: E.UNKNOWN_SERVER_ERROR,
}
OFFSET_COMMIT_ERRORS: Mapping[ErrorCode, ErrorCode] = {
    **GROUP_WRITE_ERRORS,
    E.REQUEST_TIMED_OUT: E.REQUEST_TIMED_OUT,
    E.MESSAGE_TOO_LARGE: E.INVALID_COMMIT_OFFSET_SIZE,
    E.RECORD_LIST_TOO_LARGE: E.INVALID_COMMIT_OFFSET_SIZE,
    E.INVALID_FETCH_SIZE: E.INVALID_COMMIT_OFFSET_SIZE,
}

_HANDLERS: dict[type, Callable] = {
    m.JoinGroupRequest: join.handle_join_group,
    m.SyncGroupRequest: sync.handle_sync_group,
    m.HeartbeatRequest: sync.handle_heartbeat,
    m.LeaveGroupRequest: join.handle_leave_group,
    m.OffsetCommitRequest: offsets.handle_offset_commit,
    m.OffsetFetchRequest: offsets.handle_offset_fetch,
    m.DescribeGroupsRequest: admin.handle_describe_groups,
    m.ListGroupsRequest: admin.handle_list_groups,
    m.DeleteGroupsRequest: admin.handle_delete_groups,
    m.OffsetDeleteRequest: offsets.handle_offset_delete,
}


def mapped_append_error(error: ErrorCode, table: Mapping[ErrorCode, ErrorCode]) -> ErrorCode:
    """§9.5: the error a client gets for an append that failed with ``error``; others pass through."""
    return table.get(error, error)


@functools.lru_cache(maxsize=65536)
def partition_for(group_id: str, num_partitions: int) -> int:
    """§9.1 / wire-protocol §6: ``kafka_abs(java_string_hash(group_id)) % num_partitions``."""
    code = java_string_hash(group_id)
    return (0 if code == -(2**31) else abs(code)) % num_partitions


def random_member_id(prefix: str) -> str:
    """Kafka's member-id format: ``<client id or instance id>-<UUID4>`` (§0.3)."""
    return f"{prefix}-{uuid.uuid4()}"


@dataclass(frozen=True)
class LogOnlyWrite:
    """A fire-and-forget append (§9.4, Appendix C.6, C.7): an error is logged, nobody waits."""

    what: str
    group_id: str

    def finish(self, core: GroupCoordinator, error: ErrorCode | None, base_offset: int, now_ms: int) -> None:
        if error is not None:
            log.warning("append of %s failed group=%s error=%s", self.what, self.group_id, error.name)


class GroupCoordinator:
    """Every group of the offsets partitions this coordinator owns."""

    def __init__(
        self,
        config: CoordinatorConfig,
        now_ms: int = 0,
        new_member_id: Callable[[str], str] = random_member_id,
    ):
        self.config = config
        self.groups: dict[str, Group] = {}
        self.owned: set[int] = set()
        self.loading: set[int] = set()
        self.suspended: set[int] = set()  # led, but maybe no longer: answer 15 until ZooKeeper confirms or deposes
        self.active = True
        self.topics: dict[str, int] | None = None  # None: every topic is taken to exist
        self.new_member_id = new_member_id
        # Mixed groups (zkcoord.bridge): their 0.8.2 members commit outside the group protocol, as to 0.8.2's
        # brokers, so a commit without a generation is taken while the group has coordinator members.
        self.mixed: frozenset[str] = frozenset()
        self.effects = Effects()
        self.effects.schedule(offsets.OFFSET_EXPIRY_KEY, now_ms + config.offsets_retention_check_interval_ms)

    # -- entry points -----------------------------------------------------------------------------------------------

    @staticmethod
    def handles(request: m.Request) -> bool:
        """Whether ``request`` is a group request (else the runtime answers it: ApiVersions, Metadata ...)."""
        return type(request) in _HANDLERS

    def handle(self, request_id: int, request: m.GroupRequest, now_ms: int) -> None:
        """Handle one group request; its reply is queued now, or later for a parked or written request."""
        _HANDLERS[type(request)](self, request_id, request, now_ms)

    def on_append_done(self, batch_id: int, error: ErrorCode | None, base_offset: int, now_ms: int) -> None:
        """An append this core asked for was written at ``base_offset`` (``error`` None) or failed."""
        self.effects.completions.pop(batch_id).finish(self, error, base_offset, now_ms)

    def on_timer(self, now_ms: int, key: TimerKey) -> None:
        """The timer ``key`` is due; a key no longer live (moved or cancelled) does nothing."""
        if not self.effects.fired(key):
            return
        if key == offsets.OFFSET_EXPIRY_KEY:
            self.expire_offsets(now_ms)
            self.effects.schedule(key, now_ms + self.config.offsets_retention_check_interval_ms)
        else:
            rebalance.on_timer(self, now_ms, key)

    def take_effects(self) -> list[Effect]:
        return self.effects.take()

    # -- what the handlers share -------------------------------------------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.config.offsets_topic_num_partitions)

    def group_status(self, group_id: str) -> ErrorCode | None:
        """§0.4 validateGroupStatus after the id check: 15, then 14 (loading comes before ownership), then 16.

        A suspended partition answers 15 too: its state may be stale, so nothing is acknowledged from it.

        Every group request passes here, so an id longer than zkcoord's bound is refused here (24) before any
        group is created under it; a group stored before the bound existed can still be described, deleted or
        left to expire.
        """
        if not self.active:
            return E.COORDINATOR_NOT_AVAILABLE
        partition = self.partition_for(group_id)
        if partition in self.suspended:
            return E.COORDINATOR_NOT_AVAILABLE
        if partition in self.loading:
            return E.COORDINATOR_LOAD_IN_PROGRESS
        if partition not in self.owned:
            return E.NOT_COORDINATOR
        if group_id_too_long(group_id) and group_id not in self.groups:
            return E.INVALID_GROUP_ID
        return None

    def serves(self, group_id: str | None) -> bool:
        """Whether a request for ``group_id`` reaches its group (else it is answered 24, 15, 14 or 16)."""
        return bool(group_id) and self.group_status(group_id) is None

    def new_group(self, group_id: str, now_ms: int) -> Group:
        group = Group(group_id, self.partition_for(group_id), S.EMPTY, now_ms)
        self.groups[group_id] = group
        return group

    def partition_exists(self, tp: TopicPartition) -> bool:
        if self.topics is None:
            return True
        count = self.topics.get(tp.topic)
        return count is not None and 0 <= tp.partition < count

    @staticmethod
    def group_write_error(error: ErrorCode) -> ErrorCode:
        return mapped_append_error(error, GROUP_WRITE_ERRORS)

    @staticmethod
    def offset_write_error(error: ErrorCode) -> ErrorCode:
        return mapped_append_error(error, OFFSET_COMMIT_ERRORS)

    def append_fire_and_forget(self, group: Group, records: Records, what: str) -> None:
        self.effects.append(group.partition, records, LogOnlyWrite(what, group.group_id))

    def append_metadata_fire_and_forget(self, group: Group, what: str) -> None:
        self.append_fire_and_forget(group, rebalance.metadata_record(group), what)

    # -- offset expiry (§7.6) ---------------------------------------------------------------------------------------

    def expire_offsets(self, now_ms: int) -> int:
        """One pass of GMM ``cleanupGroupMetadata``; returns how many offsets expired."""
        return offsets.expire_offsets(self, now_ms)

    # -- topics (0.9 design: the coordinator watches partition counts) ----------------------------------------------

    def set_topics(self, topics: Mapping[str, int] | None, now_ms: int) -> list[str]:
        """Take the cluster's topic → partition count; rebalance groups whose subscribed topics changed.

        Returns the ids of the groups that started a rebalance.
        """
        before, self.topics = self.topics, None if topics is None else dict(topics)
        if before is None or topics is None:
            return []
        changed = {topic for topic in before.keys() | topics.keys() if before.get(topic) != topics.get(topic)}
        rebalanced = []
        for group in list(self.groups.values()):
            if group.state not in (S.STABLE, S.COMPLETING_REBALANCE) or group.protocol_type != "consumer":
                continue
            subscribed = group.subscribed_topics
            if subscribed is None or subscribed & changed:
                rebalance.prepare_rebalance(self, group, now_ms)
                rebalanced.append(group.group_id)
        return rebalanced

    def rebalance(self, group_id: str, now_ms: int) -> bool:
        """Make a Stable (or completing) group rebalance, as a metadata change would; False if it is not one."""
        group = self.groups.get(group_id)
        if group is None or group.state not in (S.STABLE, S.COMPLETING_REBALANCE):
            return False
        rebalance.prepare_rebalance(self, group, now_ms)
        return True

    # -- loading and unloading (§9.6, §9.7) -------------------------------------------------------------------------

    def begin_loading(self, partition: int) -> None:
        """Mark ``partition`` loading: its groups answer 14 (Sync 27, Heartbeat 0) until :meth:`load_partition`."""
        self.loading.add(partition)

    def load_partition(self, partition: int, store: OffsetStore, now_ms: int) -> int:
        """Build the groups of ``partition`` from a replayed store (§9.6 step 5); mark it owned. Returns #groups."""
        loaded = 0
        try:
            for group_id in sorted(store.group_ids()):
                if self.partition_for(group_id) != partition or group_id in self.groups:
                    continue
                group = Group.from_record(group_id, partition, store.groups.get(group_id), now_ms)
                group.offsets = dict(store.offsets.get(group_id, {}))
                self.groups[group_id] = group
                loaded += 1
                for member in group.members.values():
                    rebalance.schedule_session(self, group, member, now_ms)
                if len(group.members) > self.config.group_max_size:
                    rebalance.prepare_rebalance(self, group, now_ms)
        finally:
            # Even a failed load leaves the partition owned (Appendix C.8).
            self.loading.discard(partition)
            self.owned.add(partition)
        return loaded

    def suspend(self, partitions: set[int]) -> None:
        """This node may have lost ``partitions`` (a pause, a lost connection): answer 15 for them until
        :meth:`resume` or :meth:`unload_partition`. No timer fires while any partition is suspended."""
        self.suspended |= partitions & (self.owned | self.loading)

    def resume(self, partition: int) -> None:
        """ZooKeeper confirmed that this node still leads ``partition`` at the epoch it loaded."""
        self.suspended.discard(partition)

    def unload_partition(self, partition: int) -> int:
        """§9.7: every group of ``partition`` goes Dead; parked requests get NOT_COORDINATOR. Returns #groups."""
        self.suspended.discard(partition)
        self.owned.discard(partition)
        self.loading.discard(partition)
        unloaded = [group for group in self.groups.values() if group.partition == partition]
        for group in unloaded:
            previous = group.state
            group.transition_to(S.DEAD, group.state_timestamp)
            del self.groups[group.group_id]
            for member in group.members.values():
                if previous == S.PREPARING_REBALANCE and member.awaiting_join is not None:
                    response = m.JoinGroupResponse(error_code=E.NOT_COORDINATOR, member_id=member.member_id)
                    rebalance.answer_join(self, member, response)
                if previous in (S.STABLE, S.COMPLETING_REBALANCE) and member.awaiting_sync is not None:
                    rebalance.answer_sync(self, member, m.SyncGroupResponse(error_code=E.NOT_COORDINATOR))
                rebalance.cancel_session(self, group, member.member_id)
            for pending_id in group.pending_members:
                self.effects.cancel(rebalance.pending_member_key(group.group_id, pending_id))
            self.effects.cancel(rebalance.join_key(group.group_id))
            self.effects.cancel(rebalance.sync_key(group.group_id))
        return len(unloaded)

    def shutdown(self) -> None:
        """Stop serving: unload every partition (parked requests get 16); later requests get 15."""
        for partition in sorted(self.owned | self.loading):
            self.unload_partition(partition)
        self.active = False
