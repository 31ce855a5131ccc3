"""Rebuild an :class:`OffsetStore` from a partition of the offsets log (group-coordinator §9.6).

The latest record per key wins and a tombstone deletes, so the loader first keeps only the last
``(value, offset)`` per key bytes while reading (no decoding), then decodes the survivors. Keys that
differ in bytes but mean the same thing (offset-commit key v0 and v1) are resolved by log offset.
Each key is checked, and the surviving value of each key; an unknown record type or version stops the
load with a RecordError naming its offset.

The store remembers each entry's record offset; offsets of one batch are consecutive, so comparing them
orders commits exactly as comparing batch base offsets does (§7.3 step 5).
"""

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from zkcoord.log.format import Batch
from zkcoord.log.partition import PartitionLog
from zkcoord.log.segment import ScanProblem
from zkcoord.offsets.records import decode_key, decode_value
from zkcoord.offsets.store import OffsetStore


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
    latest: dict[bytes, tuple[bytes | None, int]] = {}
    batch_count = record_count = byte_count = 0
    for batch in batches:
        base = batch.base_offset
        for delta, _, key, value in batch.records:
            latest[key] = (value, base + delta)
        batch_count += 1
        record_count += len(batch.records)
        byte_count += batch.size
        if progress is not None:
            progress(batch.size)

    resolved: dict = {}
    for key_bytes, (value_bytes, offset) in latest.items():
        key = decode_key(key_bytes, offset)
        value = decode_value(key, value_bytes, offset)
        known = resolved.get(key)
        if known is None or known[1] < offset:
            resolved[key] = (value, offset)
    store = OffsetStore()
    for key, (value, offset) in resolved.items():
        store.apply(key, value, offset)
    return LoadResult(store, batch_count, record_count, byte_count, time.perf_counter() - started)


def load_partition(partition: PartitionLog, progress: Callable[[int], None] | None = None) -> LoadResult:
    """Replay a whole partition; corrupt older segments are skipped only if the log's config says so."""
    skipped_before = len(partition.skipped)
    result = load_batches(partition.read(), progress)
    skipped = tuple(partition.skipped[skipped_before:])
    return LoadResult(result.store, result.batches, result.records, result.bytes, result.seconds, skipped)
