"""Rebuild an :class:`OffsetStore` from a partition of the offsets log (group-coordinator §9.6).

The latest record per key wins and a tombstone deletes. Where the compiled steps were built (setup.py),
the loader first applies every record in log order to the store in C (:func:`apply_batches`); it gives up
on the first key or offset value that does not decode, and the partition is read again by
:func:`load_batches`. That one keeps only the last ``(value, offset)`` per key bytes while reading (no
decoding, column-wise in C), then decodes the survivors: all at once in C (msgspec) when every key is in
the bytes zkcoord writes, else one by one. Keys that differ in bytes but mean the same thing (offset-commit
key v0 and v1) are resolved by log offset. Each key is checked, and the surviving value of each key; an
unknown record type or version stops the load with a RecordError naming its offset (a bad record that a
later one overwrote is no error).

The store remembers each entry's record offset; offsets of one batch are consecutive, so comparing them
orders commits exactly as comparing batch base offsets does (§7.3 step 5).
"""

import gc
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import closing, contextmanager
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

try:
    from zkcoord.log._compiled import apply_records
except ImportError:  # built only where setup.py found a C compiler
    apply_records = None

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


@contextmanager
def _no_collection() -> Iterator[None]:
    """Millions of long-lived tuples: generational scans would cost more than the load itself."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def apply_batches(batches: Iterable[Batch], progress: Callable[[int], None] | None = None) -> LoadResult | None:
    """Replay ``batches`` (in log order) into a new store with the compiled steps, every record as it comes;
    None if they were not built, or on the first record they refuse (read again with :func:`load_batches`)."""
    if apply_records is None:
        return None
    started = time.perf_counter()
    offsets: dict[str, dict[TopicPartition, CommittedOffset]] = {}
    group_values: dict[str, tuple[bytes, int]] = {}  # group -> its latest metadata record's value and offset
    partitions: dict[bytes, TopicPartition] = {}
    metadatas: dict[str, str] = {}
    batch_count = record_count = byte_count = 0
    with _no_collection():
        for batch in batches:
            records = batch.records
            dicts = (offsets, group_values, partitions, metadatas)
            if not apply_records(*dicts, records, batch.base_offset, CommittedOffset, TopicPartition):
                return None
            batch_count += 1
            record_count += len(records)
            byte_count += batch.size
            if progress is not None:
                progress(batch.size)
        store = OffsetStore()
        store.offsets = offsets
        for group, (value_bytes, log_offset) in group_values.items():
            try:
                store.groups[group] = decode_value(GroupMetadataKey(group), value_bytes, log_offset)
            except RecordError:
                return None
    return LoadResult(store, batch_count, record_count, byte_count, time.perf_counter() - started)


def load_batches(batches: Iterable[Batch], progress: Callable[[int], None] | None = None) -> LoadResult:
    """Replay ``batches`` (in log order) into a new store, without the compiled steps."""
    started = time.perf_counter()
    latest: dict[bytes, tuple[bytes | None, int]] = {}  # key -> (value, offset): one dict insert per record
    batch_count = record_count = byte_count = 0
    with _no_collection():
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
    return LoadResult(store, batch_count, record_count, byte_count, time.perf_counter() - started)


def _decode_canonical_survivors(latest: dict[bytes, tuple[bytes | None, int]]) -> OffsetStore | None:
    """The store, when every surviving key is in the exact form zkcoord writes and every value decodes; else None
    (then :func:`_decode_survivors` decodes them one by one and names the first bad record).

    Distinct canonical keys are distinct records, so each survivor is applied as it is and a tombstone has
    nothing to delete. Equal topic partitions and metadata strings are stored once.
    """
    keys = decode_canonical_keys(list(latest))
    if keys is None:
        return None
    store = OffsetStore()
    offsets, groups = store.offsets, store.groups
    partitions: dict[tuple[str, int], TopicPartition] = {}
    metadatas: dict[str, str] = {}
    new = tuple.__new__
    for key, (value_bytes, log_offset) in zip(keys, latest.values(), strict=True):
        if value_bytes is None:
            continue
        if type(key) is not CanonicalOffsetKey:
            try:
                groups[key.group] = decode_value(GroupMetadataKey(key.group), value_bytes, log_offset)
            except RecordError:
                return None
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
            partition = partitions[topic_partition] = new(TopicPartition, topic_partition)
        group_offsets = offsets.get(key.group)
        if group_offsets is None:
            group_offsets = offsets[key.group] = {}
        group_offsets[partition] = new(
            CommittedOffset,
            (
                offset,
                metadatas.setdefault(metadata, metadata),
                commit_timestamp,
                expire_timestamp,
                leader_epoch,
                log_offset,
            ),
        )
    return store


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
    """Replay a whole partition; corrupt older segments are skipped only if the log's config says so.

    A log the compiled steps give up on is read a second time, by :func:`load_batches`, which reports no
    progress: the bar is full by then."""
    started = time.perf_counter()
    skipped_before = len(partition.skipped)
    try:
        with closing(partition.read()) as batches:
            result = apply_batches(batches, progress)
        if result is None:
            # Read again from the start: the corrupt segments it skips are the ones to report.
            skipped_before = len(partition.skipped)
            result = load_batches(partition.read())
    except RecordError as exc:
        raise CorruptRecordError(
            f"{partition.directory}: {exc}; the partition cannot be loaded: find the record with "
            '`zkcoord log verify` (docs/offsets-log.md "Repairs")'
        ) from None
    skipped = tuple(partition.skipped[skipped_before:])
    seconds = time.perf_counter() - started
    return LoadResult(result.store, result.batches, result.records, result.bytes, seconds, skipped)


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
