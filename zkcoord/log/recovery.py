"""Opening a partition directory: its lock, its segments, and the repair of an interrupted write.

Opening recovers: an interrupted compaction is finished or discarded (:mod:`zkcoord.log.swap`), the newest
segment is verified entry by entry and a torn or corrupt tail is cut (and reported); damage with a valid entry
after it is not a tail and stops the open with :class:`CorruptLogError` (docs/offsets-log.md "Recovery on
open"). Older segments were fsynced when they were rolled, so they are only checked as they are read.

No gevent: :class:`RecoveryReport` is read by offline tools too.
"""

import contextlib
import dataclasses
import fcntl
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from zkcoord.errors import CorruptLogError, LogInUseError
from zkcoord.log import swap
from zkcoord.log.config import LogConfig
from zkcoord.log.segment import ScanProblem, Segment, find_valid_entry, fsync_directory, segment_name

log = logging.getLogger(__name__)

LOCK_FILE = ".lock"
_SHARED_HOLDER = b"coordinator nodes (fenced)"
ACTIVE_SEGMENT_HINT = (
    "nothing was changed; inspect it with `zkcoord log verify` and `zkcoord log dump`, restore the partition, or "
    "set log.recovery.skip.corrupt.segments=true (--skip-corrupt) to cut the newest segment there, losing what follows"
)


@dataclass(frozen=True)
class RecoveryReport:
    """What opening a partition had to repair."""

    directory: Path
    truncated: ScanProblem | None = None
    bytes_cut: int = 0
    compaction: str | None = None

    def __str__(self) -> str:
        parts = []
        if self.compaction:
            parts.append(self.compaction)
        if self.truncated:
            parts.append(f"cut {self.bytes_cut} bytes after the last valid entry: {self.truncated}")
        return f"{self.directory}: " + ("; ".join(parts) or "clean")


def lock_directory(directory: Path, shared: bool = False) -> int:
    fd = os.open(directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
        os.close(fd)
        holder = f"process {holder}" if holder.isdigit() else holder or "another process"
        raise LogInUseError(f"{directory} is in use by {holder}; stop it first") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, _SHARED_HOLDER if shared else str(os.getpid()).encode(), 0)
    return fd


def release_directory(segments: list[Segment], lock_fd: int) -> None:
    """Close the segments, then the directory lock."""
    for segment in segments:
        segment.close()
    with contextlib.suppress(OSError):
        os.close(lock_fd)


def open_segments(directory: Path, config: LogConfig) -> list[Segment]:
    """The directory's visible segments, oldest first, the newest writable (one empty at 0 in a new directory)."""
    bases = sorted(swap.visible_segments(directory))
    if not bases:
        bases = [0]
    segments = [
        Segment(directory / segment_name(base), base, base == bases[-1], config.index_interval_bytes) for base in bases
    ]
    fsync_directory(directory)
    return segments


def recover_segments(
    directory: Path, segments: list[Segment], config: LogConfig, compaction: str | None
) -> tuple[RecoveryReport, list[ScanProblem]]:
    """Load (or rebuild) the closed segments' indexes and cut a torn tail off the active one.

    Returns what was repaired and the damage cut under ``log.recovery.skip.corrupt.segments``.
    """
    for segment in segments[:-1]:
        if not segment.load_index():
            segment.rebuild_index_from_headers()
            segment.write_index_file()
    active = segments[-1]
    skipped: list[ScanProblem] = []
    valid, next_offset, problem = active.scan(config.max_message_bytes, config.load_buffer_bytes)
    cut = active.size - valid
    if problem is not None:
        problem = _refuse_to_cut_valid_entries(active, problem, config, skipped)
        active.truncate(valid)
    active.next_offset = next_offset
    report = RecoveryReport(directory, problem, cut, compaction)
    if problem is not None or compaction:
        log.warning("recovered %s", report)
    return report, skipped


def _refuse_to_cut_valid_entries(
    active: Segment, problem: ScanProblem, config: LogConfig, skipped: list[ScanProblem]
) -> ScanProblem:
    """Raise CorruptLogError if a valid entry follows the bad one: that is damage, not a torn tail.

    Cutting there would drop entries that were written (and maybe acknowledged) after it and serve
    rewound offsets. Only ``log.recovery.skip.corrupt.segments`` lets recovery cut them, reported.
    """
    found = find_valid_entry(
        active.fd,
        problem.position + 1,
        active.size,
        problem.offset,
        config.max_message_bytes,
        config.load_buffer_bytes,
    )
    if found is None:
        return problem
    damage = dataclasses.replace(
        problem,
        reason=f"{problem.reason}; a valid entry follows at byte {found[0]} (offset {found[1]}), "
        "so this is damage, not a torn tail",
        torn=False,
    )
    if not config.skip_corrupt_segments:
        raise CorruptLogError(damage, hint=ACTIVE_SEGMENT_HINT)
    log.error("cutting a damaged active segment and the valid entries after it: %s", damage)
    skipped.append(damage)
    return damage
