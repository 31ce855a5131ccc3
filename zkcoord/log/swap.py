"""Crash-safe replacement of a partition's closed segments by their cleaned copies.

The cleaner writes every new segment as ``<base>.log.cleaned`` (and its ``.index.cleaned``) and fsyncs
them; then it writes ``swap.json`` atomically. That file is the commit point:

* no ``swap.json``: the old segments were never touched; leftover ``*.cleaned`` files are deleted;
* ``swap.json`` present: every ``.cleaned`` file is renamed over its final name and every replaced
  segment not in the new set is deleted, which is idempotent, so an interrupted swap is rolled forward.

Either way the directory holds the old set or the new set, never a mix.
"""

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from zkcoord.errors import UnreadableLogStateError
from zkcoord.log.segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TEMPORARY_SUFFIX,
    fsync_directory,
    parse_segment_name,
    segment_name,
)

MANIFEST = "swap.json"
CLEANED = ".cleaned"


@dataclass(frozen=True)
class SwapPlan:
    replaces: tuple[int, ...]
    new: tuple[int, ...]


def cleaned_path(directory: Path, base_offset: int, suffix: str = LOG_SUFFIX) -> Path:
    return directory / (segment_name(base_offset)[: -len(LOG_SUFFIX)] + suffix + CLEANED)


def read_plan(directory: Path) -> SwapPlan | None:
    """The committed swap of ``directory``, None if there is none; UnreadableLogStateError if it does not parse."""
    try:
        data = (directory / MANIFEST).read_bytes()
    except FileNotFoundError:
        return None
    try:
        plan = json.loads(data)
        return SwapPlan(tuple(int(base) for base in plan["replaces"]), tuple(int(base) for base in plan["new"]))
    except (ValueError, KeyError, TypeError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise UnreadableLogStateError(
            f"{directory / MANIFEST} is not a swap plan ({type(exc).__name__}: {str(exc)[:200]}); the log will not "
            'open until it is repaired: see docs/offsets-log.md "Repairs"'
        ) from None


def commit_plan(directory: Path, plan: SwapPlan) -> None:
    """Make ``plan`` durable: from here on the swap is rolled forward, even after a crash."""
    temporary = directory / (MANIFEST + TEMPORARY_SUFFIX)
    with open(temporary, "w") as file:
        json.dump({"replaces": list(plan.replaces), "new": list(plan.new)}, file)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, directory / MANIFEST)
    fsync_directory(directory)


def apply_plan(directory: Path, plan: SwapPlan) -> None:
    """Rename the cleaned files into place and delete the replaced segments; safe to repeat."""
    for base in plan.new:
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX):
            source = cleaned_path(directory, base, suffix)
            if source.exists():
                os.replace(source, directory / (segment_name(base)[: -len(LOG_SUFFIX)] + suffix))
    for base in set(plan.replaces) - set(plan.new):
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(directory / (segment_name(base)[: -len(LOG_SUFFIX)] + suffix))
    fsync_directory(directory)
    os.unlink(directory / MANIFEST)
    fsync_directory(directory)


def discard_unfinished(directory: Path) -> list[Path]:
    """Delete ``*.cleaned`` files of a cleaning that never reached its commit point, and temporary files."""
    leftovers = sorted(path for path in directory.iterdir() if path.name.endswith((CLEANED, TEMPORARY_SUFFIX)))
    for path in leftovers:
        path.unlink()
    if leftovers:
        fsync_directory(directory)
    return [path for path in leftovers if path.name.endswith(CLEANED)]


def recover(directory: Path) -> str | None:
    """Finish or discard an interrupted cleaning; says what was done, or None if there was nothing."""
    plan = read_plan(directory)
    if plan is not None:
        apply_plan(directory, plan)
    leftovers = discard_unfinished(directory)
    if plan is not None:
        return f"completed an interrupted compaction (segments {list(plan.new)} replace {list(plan.replaces)})"
    if leftovers:
        return f"discarded {len(leftovers)} file(s) of an unfinished compaction"
    return None


def visible_segments(directory: Path) -> dict[int, Path]:
    """Segment files as they will be once any committed swap is applied (for read-only tools)."""
    segments = {base: path for path in directory.iterdir() if (base := parse_segment_name(path.name)) is not None}
    plan = read_plan(directory)
    if plan is not None:
        for base in plan.replaces:
            segments.pop(base, None)
        for base in plan.new:
            cleaned = cleaned_path(directory, base)
            segments[base] = cleaned if cleaned.exists() else directory / segment_name(base)
    return dict(sorted(segments.items()))
