"""Rebuild an :class:`OffsetStore` from a partition of the offsets log (group-coordinator §9.6).

The latest record per key wins and a tombstone deletes, so the loader first keeps only the last
``(value, offset)`` per key bytes while reading (no decoding, column-wise in C), then decodes the
survivors: all at once in C (msgspec) when every key is in the bytes zkcoord writes, else one by one. Keys
that differ in bytes but mean the same thing (offset-commit key v0 and v1) are resolved by log offset.
Each key is checked, and the surviving value of each key; an unknown record type or version stops the
load with a RecordError naming its offset.

The store remembers each entry's record offset; offsets of one batch are consecutive, so comparing them
orders commits exactly as comparing batch base offsets does (§7.3 step 5).
"""

import gc
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from zkcoord.errors import CorruptRecordError, LogError
from zkcoord.log.format import HEADER_SIZE, Batch
from zkcoord.log.partition import PartitionLog
from zkcoord.log.segment import ScanProblem
from zkcoord.model import TopicPartition
from zkcoord.offsets.records import (
    NO_EXPIRE_TIMESTAMP,
    NO_LEADER_EPOCH,
    CanonicalOffsetKey,
    GroupMetadataKey,
    OffsetCommitKey,
    RecordError,
    RecordKey,
    decode_canonical_keys,
    decode_key,
    decode_offset_commit,
    decode_offset_value_v1,
    decode_offset_value_v3,
    decode_value,
    encode_record,
    is_canonical_key,
)
from zkcoord.offsets.store import CommittedOffset, OffsetStore

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LoadResult:
    store: OffsetStore
    batches: int
    records: int
    bytes: int
    seconds: float
    skipped: tuple[ScanProblem, ...] = field(default=())

    @property
    def records_per_second(self) -> float:
        return self.records / self.seconds if self.seconds else float("inf")

    def __str__(self) -> str:
        return (
            f"loaded {self.records} records in {self.batches} batches ({self.bytes} bytes) in {self.seconds:.3f}s "
            f"= {self.records_per_second:,.0f} records/s; {len(self.store)} live keys"
        )


def load_batches(batches: Iterable[Batch], progress: Callable[[int], None] | None = None) -> LoadResult:
    """Replay ``batches`` (in log order) into a new store."""
    started = time.perf_counter()
    latest: dict[bytes, tuple[bytes | None, int]] = {}  # key -> (value, offset): one dict insert per record
    batch_count = record_count = byte_count = 0
    collecting = gc.isenabled()
    gc.disable()  # millions of long-lived tuples: generational scans would cost more than the load itself
    try:
        for batch in batches:
            deltas, _, keys, values = zip(*batch.records, strict=True)
            base = batch.base_offset
            offsets = range(base, base + len(deltas)) if batch.last_offset_delta == len(deltas) - 1 else None
            latest.update(zip(keys, zip(values, offsets or map(base.__add__, deltas), strict=True), strict=True))
            batch_count += 1
            record_count += len(batch.records)
            byte_count += batch.size
            if progress is not None:
                progress(batch.size)
        store = _decode_canonical_survivors(latest)
        if store is None:
            store = _decode_survivors(latest)
    finally:
        if collecting:
            gc.enable()
    return LoadResult(store, batch_count, record_count, byte_count, time.perf_counter() - started)


def _decode_canonical_survivors(latest: dict[bytes, tuple[bytes | None, int]]) -> OffsetStore | None:
    """The store, when every surviving key is in the exact form zkcoord writes and every value decodes; else None
    (then :func:`_decode_survivors` decodes them one by one and names the first bad record)."""
    built = build_offsets(latest, CommittedOffset, TopicPartition)
    if built is None:
        return None
    store = OffsetStore()
    store.offsets, group_records = built
    for group, value_bytes, log_offset in group_records:
        try:
            store.groups[group] = decode_value(GroupMetadataKey(group), value_bytes, log_offset)
        except RecordError:
            return None
    return store


def build_offsets_in_python(
    latest: dict[bytes, tuple[bytes | None, int]],
    committed_type: type[CommittedOffset] = CommittedOffset,
    partition_type: type[TopicPartition] = TopicPartition,
) -> tuple[dict[str, dict[TopicPartition, CommittedOffset]], list[tuple[str, bytes, int]]] | None:
    """The store's offsets built from ``latest`` (key bytes -> the last ``(value, log offset)``), and the group
    records left to decode as ``(group, value bytes, log offset)``; None unless every key is in the exact bytes
    zkcoord writes and every offset value decodes. ``zkcoord/log/_survivors.c`` is the same, compiled.

    Distinct canonical keys are distinct records, so each survivor is stored as it is and a tombstone has
    nothing to delete. Equal topic partitions and metadata strings are stored once.
    """
    keys = decode_canonical_keys(list(latest))
    if keys is None:
        return None
    offsets: dict[str, dict[TopicPartition, CommittedOffset]] = {}
    group_records: list[tuple[str, bytes, int]] = []
    partitions: dict[tuple[str, int], TopicPartition] = {}
    metadatas: dict[str, str] = {}
    new = tuple.__new__
    for key, (value_bytes, log_offset) in zip(keys, latest.values(), strict=True):
        if value_bytes is None:
            continue
        if type(key) is not CanonicalOffsetKey:
            group_records.append((key.group, value_bytes, log_offset))
            continue
        try:
            _, offset, leader_epoch, metadata, commit_timestamp = decode_offset_value_v3(value_bytes)
            expire_timestamp = NO_EXPIRE_TIMESTAMP
        except ValueError:
            try:
                _, offset, metadata, commit_timestamp, expire_timestamp = decode_offset_value_v1(value_bytes)
            except ValueError:
                return None
            leader_epoch = NO_LEADER_EPOCH
        topic_partition = (key.topic, key.partition)
        partition = partitions.get(topic_partition)
        if partition is None:
            partition = partitions[topic_partition] = new(partition_type, topic_partition)
        group_offsets = offsets.get(key.group)
        if group_offsets is None:
            group_offsets = offsets[key.group] = {}
        group_offsets[partition] = new(
            committed_type,
            (
                offset,
                metadatas.setdefault(metadata, metadata),
                commit_timestamp,
                expire_timestamp,
                leader_epoch,
                log_offset,
            ),
        )
    return offsets, group_records


try:
    from zkcoord.log._survivors import build_offsets as compiled_build_offsets
except ImportError:  # built only where setup.py found a C compiler
    compiled_build_offsets = None
build_offsets = compiled_build_offsets or build_offsets_in_python


def _decode_survivors(latest: dict[bytes, tuple[bytes | None, int]]) -> OffsetStore:
    """Decode the last record of each key and apply it; logically equal keys are resolved by log offset.

    Offset keys in the form zkcoord writes (``[1, group, topic, partition]``) are applied at once. Any other
    key (group keys, version-0 or foreign encodings) may share its meaning with a differently encoded key,
    so those are resolved by log offset among themselves and against the canonical ones at the end.
    """
    store = OffsetStore()
    canonical_tombstones: dict[tuple[str, str, int], int] = {}
    others: dict = {}
    for key_bytes, (value_bytes, offset) in latest.items():
        if is_canonical_key(key_bytes):
            record = decode_offset_commit(key_bytes, value_bytes)
            if record is not None:
                store.apply_offset(*record, offset)
                if record[3] is None:
                    canonical_tombstones[record[:3]] = offset
                continue
        key = decode_key(key_bytes, offset)  # the exact record, or its RecordError
        value = decode_value(key, value_bytes, offset)
        known = others.get(key)
        if known is None or known[1] < offset:
            others[key] = (value, offset)
    for key, (value, offset) in others.items():
        if type(key) is OffsetCommitKey:
            committed = store.offset(key.group, TopicPartition(key.topic, key.partition))
            newest = max(-1 if committed is None else committed.log_offset, canonical_tombstones.get(key[:3], -1))
            if newest > offset:
                continue
        store.apply(key, value, offset)
    return store


def load_partition(partition: PartitionLog, progress: Callable[[int], None] | None = None) -> LoadResult:
    """Replay a whole partition; corrupt older segments are skipped only if the log's config says so."""
    skipped_before = len(partition.skipped)
    try:
        result = load_batches(partition.read(), progress)
    except RecordError as exc:
        raise CorruptRecordError(
            f"{partition.directory}: {exc}; the partition cannot be loaded: find the record with "
            '`zkcoord log verify` (docs/offsets-log.md "Repairs")'
        ) from None
    skipped = tuple(partition.skipped[skipped_before:])
    return LoadResult(result.store, result.batches, result.records, result.bytes, result.seconds, skipped)


def expire_offsets(partition: PartitionLog, store: OffsetStore, now_ms: int, retention_ms: int) -> list[RecordKey]:
    """Offset retention (§7.6): drop expired offsets (and Dead groups) from ``store`` and append their tombstones.

    The store changes first and whatever the append does (§9.4: tombstones are fire-and-forget); a lost
    tombstone is written again by a later pass only if the offset is still in a reloaded store.
    Returns the keys that expired.
    """
    tombstones = store.expire(now_ms, retention_ms)
    records = [encode_record(key, None) for key, _ in tombstones]
    try:
        for batch in _fitting_batches(records, partition.config.max_message_bytes):
            partition.append(batch, now_ms)
    except LogError as error:
        log.warning("could not append %d expiry tombstones to %s: %s", len(records), partition.directory, error)
    return [key for key, _ in tombstones]


def _fitting_batches(records: list[tuple[bytes, None]], max_entry_bytes: int) -> list[list[tuple[bytes, None]]]:
    """Split tombstones so that no batch outgrows ``message.max.bytes`` (a group may expire many offsets)."""
    budget = max_entry_bytes - HEADER_SIZE - 16
    batches: list[list[tuple[bytes, None]]] = []
    size = budget
    for record in records:
        cost = len(record[0]) + 16  # msgpack framing of [delta, attributes, key, nil] stays below this
        if size + cost > budget:
            batches.append([])
            size = 0
        batches[-1].append(record)
        size += cost
    return batches
