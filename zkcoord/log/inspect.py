"""Read-only inspection of partition directories, for ``zkcoord log verify`` and ``log dump``.

Nothing here writes, locks or repairs: a live coordinator may own the directory. Every segment is read
to its end, every entry's length and checksum checked and every record decoded. A bad entry in the newest
segment is a torn or corrupt tail (opening the log would cut it) unless a valid entry follows it (then
opening stops); in an older segment it is corruption (loading would stop). ``swap.json`` and
``leader-epoch`` are read too; whatever the files hold is reported, never raised.
"""

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from zkcoord.errors import UnreadableLogStateError
from zkcoord.log import swap
from zkcoord.log.config import LogConfig
from zkcoord.log.fence import EPOCH_FILE, read_stored_epoch
from zkcoord.log.format import Batch, LogFormatError
from zkcoord.log.segment import ScanProblem, check_batches, find_valid_entry, parse_segment_name
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
    valid_after: tuple[int, int] | None = None  # (position, base offset) of a valid entry after ``problem``


@dataclass(frozen=True)
class Problem:
    """One thing wrong in a partition directory; ``position`` and ``offset`` when it is inside a segment."""

    kind: str
    path: Path
    reason: str
    position: int | None = None
    offset: int | None = None

    @classmethod
    def in_segment(cls, kind: str, problem: ScanProblem) -> "Problem":
        return cls(kind, problem.path, problem.reason, problem.position, problem.offset)

    def __str__(self) -> str:
        where = "" if self.position is None else f" at byte {self.position}"
        where += "" if self.offset is None else f" (offset {self.offset})"
        return f"{self.kind}: {self.path}{where}: {self.reason}"


TORN_TAIL, CORRUPT_TAIL, CORRUPT_ACTIVE, CORRUPT_SEGMENT = (
    "torn tail",
    "corrupt tail",
    "corrupt active segment",
    "corrupt segment",
)
BAD_RECORD, BAD_SWAP_PLAN, BAD_LEADER_EPOCH = "bad record", "bad swap plan", "bad leader epoch"


@dataclass(frozen=True)
class PartitionSummary:
    directory: Path
    segments: tuple[SegmentSummary, ...]
    pending_swap: bool
    other_problems: tuple[Problem, ...] = ()  # records, swap.json, leader-epoch
    leader_epoch: int | None = None

    @property
    def problems(self) -> list[Problem]:
        """Every problem found: bad entries (by kind, see above), bad records and bad state files."""
        found = []
        for number, segment in enumerate(self.segments):
            problem = segment.problem
            if problem is None:
                continue
            if number < len(self.segments) - 1:
                found.append(Problem.in_segment(CORRUPT_SEGMENT, problem))
            elif segment.valid_after is not None:
                position, offset = segment.valid_after
                reason = f"{problem.reason}; a valid entry follows at byte {position} (offset {offset})"
                found.append(Problem(CORRUPT_ACTIVE, problem.path, reason, problem.position, problem.offset))
            else:
                found.append(Problem.in_segment(TORN_TAIL if problem.torn else CORRUPT_TAIL, problem))
        return found + list(self.other_problems)

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
    """Check every entry and record of every segment and the directory's state files, calling ``visit`` for
    each valid batch in log order. Nothing raises for what the files hold: it is reported as a problem."""
    config = config or LogConfig()
    other: list[Problem] = []
    try:
        segments = swap.visible_segments(directory)
        pending_swap = swap.read_plan(directory) is not None
    except UnreadableLogStateError as exc:
        other.append(Problem(BAD_SWAP_PLAN, directory / swap.MANIFEST, str(exc)))
        segments = {base: path for path in directory.iterdir() if (base := parse_segment_name(path.name)) is not None}
        segments, pending_swap = dict(sorted(segments.items())), False
    leader_epoch = None
    try:
        leader_epoch = read_stored_epoch(directory)
    except UnreadableLogStateError as exc:
        other.append(Problem(BAD_LEADER_EPOCH, directory / EPOCH_FILE, str(exc)))
    summaries = []
    newest = max(segments, default=None)
    for base, path in segments.items():
        summary, bad_records = _scan_segment(path, base, base == newest, config, visit)
        summaries.append(summary)
        other.extend(bad_records)
    return PartitionSummary(directory, tuple(summaries), pending_swap, tuple(other), leader_epoch)


def _scan_segment(
    path: Path, base: int, newest: bool, config: LogConfig, visit: Callable[[Path, Batch], None] | None
) -> tuple[SegmentSummary, list[Problem]]:
    batches = records = 0
    next_offset = base
    problem = valid_after = None
    bad_records = []
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        try:
            for position, batch in check_batches(fd, base, size, config.max_message_bytes, config.load_buffer_bytes):
                batches += 1
                records += len(batch.records)
                next_offset = batch.next_offset
                bad_records.extend(_bad_records(path, position, batch))
                if visit is not None:
                    visit(path, batch)
        except LogFormatError as exc:
            problem = ScanProblem.of(exc, path, next_offset)
            if newest:  # as opening the log judges it: a tail to cut, or damage before valid entries
                valid_after = find_valid_entry(
                    fd, exc.position + 1, size, next_offset, config.max_message_bytes, config.load_buffer_bytes
                )
    finally:
        os.close(fd)
    return SegmentSummary(path, base, size, batches, records, next_offset, problem, valid_after), bad_records


def _bad_records(path: Path, position: int, batch: Batch) -> Iterator[Problem]:
    """Records of a verified entry whose key or value does not decode (loading stops at such a survivor)."""
    for offset, key_bytes, value_bytes in batch.entries():
        try:
            decode_value(decode_key(key_bytes, offset), value_bytes, offset)
        except RecordError as exc:
            yield Problem(BAD_RECORD, path, exc.reason, position, offset)


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
