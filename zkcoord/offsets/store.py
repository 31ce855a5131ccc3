"""The materialised view of one offsets-log partition: committed offsets and group records (§9.6, §9.8).

Records are applied in log order, as the loader reads them; the store answers which offsets and groups are
live and which tombstones offset retention must append (§7.6). Pure: must not import IO modules, gevent or
kazoo; time is an argument.
"""

from typing import NamedTuple

from zkcoord.model import GroupState, TopicPartition
from zkcoord.offsets.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    RecordError,
    RecordKey,
    RecordValue,
)
from zkcoord.offsets.retention import expired_offsets, view_of_loaded_group


class CommittedOffset(NamedTuple):
    """A committed offset as cached, with the log offset of the batch that wrote it (§7.3 step 5)."""

    offset: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int
    leader_epoch: int
    log_offset: int

    @classmethod
    def from_value(cls, value: OffsetCommitValue, log_offset: int) -> "CommittedOffset":
        """The cache entry for ``value``, written at ``log_offset``."""
        # OffsetCommitValue's fields are this tuple's first five, in order.
        return tuple.__new__(cls, (*value, log_offset))


def apply_offset_record(
    group_offsets: dict[TopicPartition, CommittedOffset],
    partition: TopicPartition,
    value: OffsetCommitValue | None,
    log_offset: int,
) -> None:
    """The one rule for an offset record, replayed or just written (§7.3 step 5, §9.6 step 4): the record at
    ``log_offset`` upserts (``value``) or deletes (None) ``partition``'s offset unless a record written later
    is cached. Equal log offsets come from one batch, where the later record wins; a higher cached one was
    written later (a transactional commit materialised out of log order, §7.4)."""
    cached = group_offsets.get(partition)
    if cached is not None and cached.log_offset > log_offset:
        return
    if value is None:
        if cached is not None:
            del group_offsets[partition]
    else:
        group_offsets[partition] = CommittedOffset.from_value(value, log_offset)


class OffsetStore:
    """Offsets per group and the latest metadata record per group, rebuilt from the offsets log."""

    __slots__ = ("offsets", "groups")

    def __init__(self) -> None:
        self.offsets: dict[str, dict[TopicPartition, CommittedOffset]] = {}
        self.groups: dict[str, GroupMetadataValue] = {}

    def apply(self, key: RecordKey, value: RecordValue | None, log_offset: int) -> None:
        """Upsert or delete one record (§9.6 step 4); ``value`` None is a tombstone."""
        if type(key) is OffsetCommitKey and (value is None or type(value) is OffsetCommitValue):
            self.apply_offset(*key, value, log_offset)
        elif type(key) is GroupMetadataKey and (value is None or type(value) is GroupMetadataValue):
            if value is None:
                # The group's offsets stay: they have keys of their own (§9.6 step 5, offsets-only groups).
                self.groups.pop(key.group, None)
            else:
                self.groups[key.group] = value
        else:
            raise RecordError(f"cannot apply a {type(key).__name__} with a {type(value).__name__}", log_offset)

    def apply_offset(
        self, group: str, topic: str, partition_index: int, value: OffsetCommitValue | None, log_offset: int
    ) -> None:
        """:meth:`apply` for an offset commit record, given the fields of its key."""
        partition = tuple.__new__(TopicPartition, (topic, partition_index))  # NamedTuple's own __new__ is slow
        group_offsets = self.offsets.get(group)
        if group_offsets is None:
            if value is None:
                return
            group_offsets = self.offsets[group] = {}
        apply_offset_record(group_offsets, partition, value, log_offset)
        if not group_offsets:
            del self.offsets[group]

    def offset(self, group: str, partition: TopicPartition) -> CommittedOffset | None:
        """The committed offset of ``group`` for ``partition``, if any."""
        group_offsets = self.offsets.get(group)
        return None if group_offsets is None else group_offsets.get(partition)

    def group_ids(self) -> set[str]:
        """Groups with a metadata record or with offsets."""
        return self.groups.keys() | self.offsets.keys()

    def expire(self, now_ms: int, retention_ms: int) -> list[tuple[RecordKey, None]]:
        """Drop expired offsets and the groups that become Dead (§7.6); return the tombstones to append."""
        tombstones: list[tuple[RecordKey, None]] = []
        for group in self.group_ids():
            view = view_of_loaded_group(self.groups.get(group))
            group_offsets = self.offsets.get(group, {})
            for partition in expired_offsets(view, group_offsets, now_ms, retention_ms):
                del group_offsets[partition]
                tombstones.append((OffsetCommitKey(group, partition.topic, partition.partition), None))
            if group_offsets:
                continue
            self.offsets.pop(group, None)
            if view.state == GroupState.EMPTY:
                self.groups.pop(group, None)
                # An offsets-only group (generation 0) never had a metadata record to delete.
                if view.generation > 0:
                    tombstones.append((GroupMetadataKey(group), None))
        tombstones.sort(key=_tombstone_order)
        return tombstones

    def __len__(self) -> int:
        """The number of live keys: one per committed offset and one per group record."""
        return len(self.groups) + sum(len(group_offsets) for group_offsets in self.offsets.values())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, OffsetStore):
            return NotImplemented
        return self.offsets == other.offsets and self.groups == other.groups

    def __repr__(self) -> str:
        return f"OffsetStore(offsets={self.offsets!r}, groups={self.groups!r})"


def _tombstone_order(tombstone: tuple[RecordKey, None]) -> tuple:
    """By group; a group's offsets (by topic, partition) before its metadata key, as Kafka appends them."""
    key = tombstone[0]
    if type(key) is OffsetCommitKey:
        return (key.group, 0, key.topic, key.partition)
    return (key.group, 1)
