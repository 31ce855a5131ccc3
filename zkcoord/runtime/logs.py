"""Where a runtime writes the core's records: the writer interface, and the in-memory log tests run on.

A :class:`LogWriter` appends a batch of records to an offsets partition and reports the outcome through
``done(error, base_offset)``, now or later; one partition's batches complete in the order they were appended.
``open`` replays a partition's records into an :class:`~zkcoord.offsets.store.OffsetStore` before its groups
are loaded. The durable log (:mod:`zkcoord.runtime.durable`) and :class:`MemoryLog` implement it.

Pure: no IO, no clock.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from typing import NamedTuple, Protocol

from zkcoord.errors import ErrorCode
from zkcoord.offsets.records import RecordKey, RecordValue, decode_key, decode_value, encode_record
from zkcoord.offsets.store import OffsetStore

AppendDone = Callable[[ErrorCode | None, int], None]  # (error or None, base offset)
Records = Iterable[tuple[RecordKey, RecordValue | None]]


class LogWriter(Protocol):
    def append(self, partition: int, records: Records, timestamp_ms: int, done: AppendDone) -> None:
        """Append ``records`` as one batch; call ``done`` once, now or later (in append order per partition)."""

    def open(self, partition: int, epoch: int | None) -> OffsetStore:
        """Take ``partition`` (as leader of ``epoch``) and replay its records; raises the log's errors."""

    def close(self, partition: int) -> None:
        """Make what was appended durable and let ``partition`` go; later appends to it fail."""


class _HeldAppend(NamedTuple):
    partition: int
    records: list[tuple[RecordKey, RecordValue | None]]
    done: AppendDone


class MemoryLog:
    """Offsets partitions as lists of encoded batches; appends can be made to fail or held in flight."""

    def __init__(self) -> None:
        self._batches: dict[int, list[tuple[int, list[tuple[bytes, bytes | None]]]]] = {}
        self._next_offset: dict[int, int] = {}
        self.failure: ErrorCode | None = None  # every later append fails with it
        self.holding = False  # later appends wait in :attr:`held` until completed or released
        self.held: deque[_HeldAppend] = deque()

    # -- LogWriter -----------------------------------------------------------------------------------------------

    def append(self, partition: int, records: Records, timestamp_ms: int, done: AppendDone) -> None:
        records = list(records)
        if self.holding:
            self.held.append(_HeldAppend(partition, records, done))
        elif self.failure is not None:
            done(self.failure, -1)
        else:
            done(None, self.write(partition, records))

    def open(self, partition: int, epoch: int | None = None) -> OffsetStore:
        store = OffsetStore()
        for base_offset, batch in self._batches.get(partition, []):
            for delta, (key_bytes, value_bytes) in enumerate(batch):
                key = decode_key(key_bytes, base_offset + delta)
                # The cache keeps the batch's base offset (§7.3 step 5), as a live commit does.
                store.apply(key, decode_value(key, value_bytes, base_offset + delta), base_offset)
        return store

    def close(self, partition: int) -> None:
        """Nothing to flush: every batch is kept."""

    # -- test controls -------------------------------------------------------------------------------------------

    def write(self, partition: int, records: Records) -> int:
        """Append ``records`` to ``partition`` as one batch now; returns its base offset."""
        encoded = [encode_record(key, value) for key, value in records]
        base_offset = self._next_offset.get(partition, 0)
        self._batches.setdefault(partition, []).append((base_offset, encoded))
        self._next_offset[partition] = base_offset + len(encoded)
        return base_offset

    def complete_held(self, error: ErrorCode | None = None) -> None:
        """Complete the oldest held append: written, or failed with ``error``. What its outcome appends is not held."""
        held = self.held.popleft()
        holding, self.holding = self.holding, False
        try:
            if error is None:
                held.done(None, self.write(held.partition, held.records))
            else:
                held.done(error, -1)
        finally:
            self.holding = holding

    def release(self) -> None:
        """Stop holding and complete every held append successfully, oldest first."""
        self.holding = False
        while self.held:
            held = self.held.popleft()
            held.done(None, self.write(held.partition, held.records))

    def records(self, partition: int) -> list[tuple[RecordKey, RecordValue | None]]:
        """Every record appended to ``partition``, decoded, in log order."""
        decoded = []
        for base_offset, batch in self._batches.get(partition, []):
            for delta, (key_bytes, value_bytes) in enumerate(batch):
                key = decode_key(key_bytes, base_offset + delta)
                decoded.append((key, decode_value(key, value_bytes, base_offset + delta)))
        return decoded
