"""Read-only inspection of partition directories, for ``zkcoord log verify`` and ``log dump``.

Nothing here writes, locks or repairs: a live coordinator may own the directory. Every segment is read
to its end and every entry's length and checksum checked. A bad entry in the newest segment is a torn or
corrupt tail (opening the log would cut it); in an older segment it is corruption (loading would stop).
"""

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from zkcoord.log import swap
from zkcoord.log.config import LogConfig
from zkcoord.log.format import Batch, LogFormatError
from zkcoord.log.segment import ScanProblem, check_batches
from zkcoord.offsets.records import RecordError, decode_key, decode_value


@dataclass(frozen=True)
class SegmentSummary:
    path: Path
    base_offset: int
    size: int
    batches: int
    records: int
    next_offset: int
    problem: ScanProblem | None


@dataclass(frozen=True)
class PartitionSummary:
    directory: Path
    segments: tuple[SegmentSummary, ...]
    pending_swap: bool

    @property
    def problems(self) -> list[tuple[str, ScanProblem]]:
        """``(kind, problem)`` with kind "torn tail", "corrupt tail" or "corrupt segment"."""
        found = []
        for number, segment in enumerate(self.segments):
            if segment.problem is None:
                continue
            if number < len(self.segments) - 1:
                found.append(("corrupt segment", segment.problem))
            else:
                found.append(("torn tail" if segment.problem.torn else "corrupt tail", segment.problem))
        return found

    @property
    def records(self) -> int:
        return sum(segment.records for segment in self.segments)

    @property
    def batches(self) -> int:
        return sum(segment.batches for segment in self.segments)

    @property
    def bytes(self) -> int:
        return sum(segment.size for segment in self.segments)


def scan_partition(
    directory: Path, config: LogConfig | None = None, visit: Callable[[Path, Batch], None] | None = None
) -> PartitionSummary:
    """Check every entry of every segment, calling ``visit`` for each valid batch in log order."""
    config = config or LogConfig()
    summaries = []
    for base, path in swap.visible_segments(directory).items():
        batches = records = 0
        next_offset = base
        problem = None
        fd = os.open(path, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            for _, batch in check_batches(fd, base, size, config.max_message_bytes, config.load_buffer_bytes):
                batches += 1
                records += len(batch.records)
                next_offset = batch.next_offset
                if visit is not None:
                    visit(path, batch)
        except LogFormatError as exc:
            problem = ScanProblem.of(exc, path, next_offset)
        finally:
            os.close(fd)
        summaries.append(SegmentSummary(path, base, size, batches, records, next_offset, problem))
    return PartitionSummary(directory, tuple(summaries), swap.read_plan(directory) is not None)


def describe_records(batch: Batch) -> Iterator[dict]:
    """Each record of ``batch`` decoded for people: offset, key and value as plain data."""
    for offset, key_bytes, value_bytes in batch.entries():
        entry: dict = {"offset": offset}
        try:
            key = decode_key(key_bytes, offset)
            value = decode_value(key, value_bytes, offset)
        except RecordError as exc:
            entry["error"] = str(exc)
            entry["key_hex"] = key_bytes.hex()
            entry["value_hex"] = None if value_bytes is None else value_bytes.hex()
        else:
            entry["type"] = type(key).__name__
            entry["key"] = _plain(key)
            entry["value"] = None if value is None else _plain(value)
        yield entry


def _plain(value) -> object:
    if hasattr(value, "_asdict"):
        return {name: _plain(item) for name, item in value._asdict().items()}
    if hasattr(value, "__dataclass_fields__"):
        return {name: _plain(getattr(value, name)) for name in value.__dataclass_fields__}
    if isinstance(value, tuple):
        return [_plain(item) for item in value]
    if isinstance(value, bytes):
        return value.hex()
    return value
