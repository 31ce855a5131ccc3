"""Committed offsets of the groups (group-coordinator.md §7.1–§7.6, §7.10): commit, fetch, delete, expire.

Owns OffsetCommit's checks and its write (:class:`CommitWrite`), OffsetFetch, OffsetDelete and its tombstones
(:class:`OffsetDeleteWrite`), offset expiry, and removing a group with its offsets. A commit or a delete
changes the cached offsets only once its records are in the log, through the rule replay uses
(:func:`zkcoord.offsets.store.apply_offset_record`); expiry and group removal change the cache first and
append their tombstones fire-and-forget, as Kafka does (§9.4, Appendix C.6, C.7).

Pure: must not import gevent, kazoo, sockets, threads or a clock.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from zkcoord.errors import ErrorCode
from zkcoord.group.model import Group
from zkcoord.group.rebalance import schedule_session
from zkcoord.model import GroupState, TopicPartition
from zkcoord.offsets.records import NO_EXPIRE_TIMESTAMP, GroupMetadataKey, OffsetCommitKey, OffsetCommitValue
from zkcoord.offsets.retention import expired_offsets
from zkcoord.offsets.store import CommittedOffset, apply_offset_record
from zkcoord.wire.messages import (
    OffsetCommitRequest,
    OffsetCommitRequestTopic,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetFetchResponsePartition,
    OffsetFetchResponseTopic,
    PartitionResult,
    TopicResult,
)

if TYPE_CHECKING:
    from zkcoord.group.coordinator import GroupCoordinator

E = ErrorCode
S = GroupState
OFFSET_EXPIRY_KEY = ("offset-expiry",)


# ---- OffsetCommit (§7.1–§7.3) ----------------------------------------------------------------------------------


def handle_offset_commit(core: GroupCoordinator, request_id: int, request: OffsetCommitRequest, now_ms: int) -> None:
    errors: dict[TopicPartition, int] = {}
    commits: dict[TopicPartition, tuple[int, str]] = {}
    for topic in request.topics:
        for partition in topic.partitions:
            tp = TopicPartition(topic.name, partition.partition_index)
            if not core.partition_exists(tp):
                errors[tp] = E.UNKNOWN_TOPIC_OR_PARTITION
            else:
                commits[tp] = (partition.committed_offset, partition.committed_metadata or "")

    def answer(group_error: ErrorCode | None = None) -> None:
        if group_error is not None:
            errors.update(dict.fromkeys(commits, group_error))
        core.effects.reply(request_id, commit_response(request.topics, errors))

    if not commits:
        return answer()
    group_id = request.group_id
    if group_id is None:
        return answer(E.INVALID_GROUP_ID)
    if (error := core.group_status(group_id)) is not None:
        return answer(error)
    group = core.groups.get(group_id)
    generation, member_id = request.generation_id, request.member_id
    if group is None:
        if generation >= 0:
            # A zombie cannot recreate an expired group (§10.4).
            return answer(E.ILLEGAL_GENERATION)
        group = core.new_group(group_id, now_ms)
    if group.is_dead():
        return answer(E.COORDINATOR_NOT_AVAILABLE)
    if group.is_static_member_fenced(member_id, request.group_instance_id):
        return answer(E.FENCED_INSTANCE_ID)
    if not (generation < 0 and (group.state == S.EMPTY or group_id in core.mixed)):
        member = group.members.get(member_id)
        if member is None:
            return answer(E.UNKNOWN_MEMBER_ID)
        if generation != group.generation:
            return answer(E.ILLEGAL_GENERATION)
        if group.state == S.COMPLETING_REBALANCE:
            return answer(E.REBALANCE_IN_PROGRESS)
        schedule_session(core, group, member, now_ms)
    _store_offsets(core, request_id, request, group, commits, errors, now_ms)


def _store_offsets(
    core: GroupCoordinator,
    request_id: int,
    request: OffsetCommitRequest,
    group: Group,
    commits: dict[TopicPartition, tuple[int, str]],
    errors: dict[TopicPartition, int],
    now_ms: int,
) -> None:
    """§7.3: validate metadata sizes, mark pending, append one batch; the cache changes only once it is written.

    ``if_greater`` (docs/protocol.md, for backfills): a partition whose cached offset is at least the one
    committed, or that has a commit in flight, is left alone and answered 0.
    """
    limit = core.config.offset_metadata_max_bytes
    valid = {}
    for tp, (offset, metadata) in commits.items():
        if _metadata_too_long(metadata, limit):
            errors[tp] = E.OFFSET_METADATA_TOO_LARGE
        elif request.if_greater and _has_offset_at_least(group, tp, offset):
            errors[tp] = E.NONE
        else:
            valid[tp] = (offset, metadata)
    if not valid:
        return core.effects.reply(request_id, commit_response(request.topics, errors))
    retention = request.retention_time_ms
    expire = NO_EXPIRE_TIMESTAMP if retention in (None, -1) else now_ms + retention
    values = {tp: OffsetCommitValue(offset, metadata, now_ms, expire) for tp, (offset, metadata) in valid.items()}
    group.pending_offsets.update(values.keys())
    records = tuple((OffsetCommitKey(group.group_id, tp.topic, tp.partition), value) for tp, value in values.items())
    core.effects.append(group.partition, records, CommitWrite(request_id, request.topics, group, values, errors))


def _metadata_too_long(metadata: str, limit: int) -> bool:
    """§0.2: Kafka compares the metadata's length in UTF-16 code units, not bytes."""
    if 2 * len(metadata) <= limit:  # a character is one or two code units: no need to count them
        return False
    return len(metadata.encode("utf-16-le")) // 2 > limit


def _has_offset_at_least(group: Group, tp: TopicPartition, offset: int) -> bool:
    """True when ``tp`` has a commit in flight (its outcome is unknown) or a cached offset ≥ ``offset``."""
    if tp in group.pending_offsets:
        return True
    cached = group.offsets.get(tp)
    return cached is not None and cached.offset >= offset


@dataclass(frozen=True)
class CommitWrite:
    """An OffsetCommit's records: once written, applied to the cache and answered; answered with the error if not."""

    request_id: int
    topics: tuple[OffsetCommitRequestTopic, ...]
    group: Group
    values: dict[TopicPartition, OffsetCommitValue]
    errors: dict[TopicPartition, int]

    def finish(self, core: GroupCoordinator, error: ErrorCode | None, base_offset: int, now_ms: int) -> None:
        group = self.group
        for tp, value in self.values.items():
            # A partition deleted meanwhile (its pending count cleared) is not re-added.
            if _settle_pending(group.pending_offsets, tp) and error is None:
                apply_offset_record(group.offsets, tp, value, base_offset)
        code = E.NONE if error is None else core.offset_write_error(error)
        self.errors.update(dict.fromkeys(self.values, code))
        core.effects.reply(self.request_id, commit_response(self.topics, self.errors))


def _settle_pending(pending: Counter, tp: TopicPartition) -> bool:
    """Count one commit of ``tp`` as no longer in flight; False when nothing was pending (it was deleted)."""
    if pending[tp] <= 0:
        return False
    pending[tp] -= 1
    if pending[tp] <= 0:
        del pending[tp]
    return True


def commit_response(topics: Iterable[OffsetCommitRequestTopic], errors: Mapping[TopicPartition, int]):
    """OffsetCommit's per-partition answer, in request order."""
    return OffsetCommitResponse(
        topics=tuple(
            TopicResult(
                name=topic.name,
                partitions=tuple(
                    PartitionResult(
                        partition_index=partition.partition_index,
                        error_code=errors.get(TopicPartition(topic.name, partition.partition_index), 0),
                    )
                    for partition in topic.partitions
                ),
            )
            for topic in topics
        )
    )


# ---- OffsetFetch (§7.5) ----------------------------------------------------------------------------------------


def handle_offset_fetch(core: GroupCoordinator, request_id: int, request: OffsetFetchRequest, now_ms: int) -> None:
    group_id = request.group_id
    if group_id is None:
        return core.effects.reply(request_id, OffsetFetchResponse(error_code=E.INVALID_GROUP_ID))
    if (error := core.group_status(group_id)) is not None:
        return core.effects.reply(request_id, OffsetFetchResponse(error_code=error))
    group = core.groups.get(group_id)
    offsets = {} if group is None or group.is_dead() else group.offsets
    if request.topics is None:
        wanted: dict[str, list[int]] = {}
        for tp in sorted(offsets):
            wanted.setdefault(tp.topic, []).append(tp.partition)
    else:
        wanted = {topic.name: list(topic.partition_indexes) for topic in request.topics}
    topics = tuple(
        OffsetFetchResponseTopic(
            name=name, partitions=tuple(_fetched(offsets.get(TopicPartition(name, index)), index) for index in indexes)
        )
        for name, indexes in wanted.items()
    )
    core.effects.reply(request_id, OffsetFetchResponse(error_code=E.NONE, topics=topics))


def _fetched(committed: CommittedOffset | None, index: int) -> OffsetFetchResponsePartition:
    return OffsetFetchResponsePartition(
        partition_index=index,
        committed_offset=-1 if committed is None else committed.offset,
        metadata="" if committed is None else committed.metadata,
        error_code=E.NONE,
    )


# ---- OffsetDelete (§7.10) --------------------------------------------------------------------------------------


def handle_offset_delete(core: GroupCoordinator, request_id: int, request: OffsetDeleteRequest, now_ms: int) -> None:
    """§7.10 (GC ``handleDeleteOffsets``, KA ``handleOffsetDeleteRequest``): drop committed offsets of a group.

    Unlike Kafka (acks 0, answered at once, cache changed first), the tombstones are a durable append and the
    answer waits for it; the cache drops the offsets only once it succeeded, so a failed delete can be retried
    (docs/protocol.md).
    """
    group_id = request.group_id
    if not group_id:
        return core.effects.reply(request_id, OffsetDeleteResponse(error_code=E.INVALID_GROUP_ID))
    if (error := core.group_status(group_id)) is not None:
        return core.effects.reply(request_id, OffsetDeleteResponse(error_code=error))
    group = core.groups.get(group_id)
    if group is None or group.is_dead():
        # The partition is owned (checked above), so the group does not exist: 69, not 16.
        return core.effects.reply(request_id, OffsetDeleteResponse(error_code=E.GROUP_ID_NOT_FOUND))
    requested = list(
        dict.fromkeys(
            TopicPartition(topic.name, partition.partition_index)
            for topic in request.topics
            for partition in topic.partitions
        )
    )
    errors: dict[TopicPartition, int] = {}
    known = []
    for tp in requested:
        if core.partition_exists(tp):
            known.append(tp)
        else:
            # Kafka's API layer answers 3 before the coordinator sees the partition.
            errors[tp] = E.UNKNOWN_TOPIC_OR_PARTITION
    if group.state == S.EMPTY:
        eligible = known
    elif group.protocol_type == "consumer":
        # Kafka's cached subscription of the current generation; unknown (None) counts as subscribed.
        subscribed = group.subscribed_topics
        eligible = []
        for tp in known:
            if subscribed is None or tp.topic in subscribed:
                errors[tp] = E.GROUP_SUBSCRIBED_TO_TOPIC
            else:
                eligible.append(tp)
    else:
        return core.effects.reply(request_id, OffsetDeleteResponse(error_code=E.NON_EMPTY_GROUP))
    # A commit still in flight gets a tombstone too: it is in the log before this batch.
    doomed = [tp for tp in eligible if tp in group.offsets or tp in group.pending_offsets]
    write = OffsetDeleteWrite(request_id, group, requested, errors, tuple(eligible), tuple(doomed))
    if not doomed:
        return write.finish(core, None, -1, now_ms)
    core.effects.append(group.partition, _offset_tombstones(group.group_id, doomed), write)


@dataclass(frozen=True)
class OffsetDeleteWrite:
    """OffsetDelete's tombstones: once written, applied to the cache and answered; answered with the error if not."""

    request_id: int
    group: Group
    requested: list[TopicPartition]
    errors: dict[TopicPartition, int]
    eligible: tuple[TopicPartition, ...]
    doomed: tuple[TopicPartition, ...]

    def finish(self, core: GroupCoordinator, error: ErrorCode | None, base_offset: int, now_ms: int) -> None:
        group = self.group
        if error is not None:
            self.errors.update(dict.fromkeys(self.eligible, core.offset_write_error(error)))
        else:
            for tp in self.doomed:
                apply_offset_record(group.offsets, tp, None, base_offset)
            self.errors.update(dict.fromkeys(self.eligible, E.NONE))
            if self.eligible and core.groups.get(group.group_id) is group:
                drop_if_emptied(core, group)
        by_topic: dict[str, list[PartitionResult]] = {}
        for tp in self.requested:
            by_topic.setdefault(tp.topic, []).append(
                PartitionResult(partition_index=tp.partition, error_code=self.errors[tp])
            )
        topics = tuple(TopicResult(name=name, partitions=tuple(entries)) for name, entries in by_topic.items())
        core.effects.reply(self.request_id, OffsetDeleteResponse(error_code=E.NONE, topics=topics))


# ---- removing groups and expiring offsets (§7.6, §7.9) ----------------------------------------------------------


def drop_if_emptied(core: GroupCoordinator, group: Group) -> None:
    """GMM ``cleanupGroupMetadata``: an Empty group left without offsets goes Dead and leaves the cache."""
    if group.state == S.EMPTY and not group.offsets and not group.pending_offsets:
        remove_group(core, group, ())


def remove_group(core: GroupCoordinator, group: Group, partitions: Iterable[TopicPartition]) -> None:
    """Drop ``group`` from the cache and append tombstones fire-and-forget (§9.4)."""
    group.transition_to(S.DEAD, group.state_timestamp)
    del core.groups[group.group_id]
    tombstones = _offset_tombstones(group.group_id, partitions)
    group.offsets.clear()
    # An offsets-only group (generation 0) never had a metadata record to delete.
    if group.generation > 0:
        tombstones += ((GroupMetadataKey(group.group_id), None),)
    if tombstones:
        core.append_fire_and_forget(group, tombstones, "tombstones")


def expire_offsets(core: GroupCoordinator, now_ms: int) -> int:
    """One pass of GMM ``cleanupGroupMetadata``; returns how many offsets expired."""
    expired_count = 0
    retention_ms = core.config.offsets_retention_ms
    for group in list(core.groups.values()):
        expired = expired_offsets(group.retention_view(), group.offsets, now_ms, retention_ms)
        for tp in expired:
            del group.offsets[tp]
        expired_count += len(expired)
        if group.state == S.EMPTY and not group.offsets and not group.pending_offsets:
            remove_group(core, group, sorted(expired))
        elif expired:
            core.append_fire_and_forget(
                group, _offset_tombstones(group.group_id, sorted(expired)), "expired offset tombstones"
            )
    return expired_count


def _offset_tombstones(group_id: str, partitions: Iterable[TopicPartition]) -> tuple:
    return tuple((OffsetCommitKey(group_id, tp.topic, tp.partition), None) for tp in partitions)
