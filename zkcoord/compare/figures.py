"""What a member-migration run shows, from its ``compare.*`` events (docs/compare.md, "Migrating members"):
partitions owned twice, records processed twice, and the longest time a partition went unprocessed.

Pure: events in, figures out; the history checker (zkcoord.compare.history) finds the double owners.
"""

from collections.abc import Sequence
from dataclasses import asdict, dataclass

from zkcoord.compare.history import check_history


@dataclass(frozen=True)
class MigrationFigures:
    owned_twice: int  # partitions two instances owned at once (the history checker's double owners)
    violations: int  # everything the history checker found, double owners included
    records_duplicated: int  # records first processed a second time within the window (the report's definition)
    longest_pause_ms: int  # the longest time within the window between two processings of one partition

    def to_json(self) -> dict:
        return asdict(self)

    def describe(self) -> str:
        return (
            f"partitions owned twice {self.owned_twice}, records duplicated {self.records_duplicated}, "
            f"longest partition pause {self.longest_pause_ms} ms, violations {self.violations}"
        )


def window(events: Sequence[dict]) -> tuple[int, int]:
    """The run's window: ``compare.phase`` ``measure`` to ``end`` (the last event if the run stopped early)."""
    phases = {e["phase"]: e["time_ms"] for e in events if e["type"] == "compare.phase"}
    return phases["measure"], phases.get("end", max(e["time_ms"] for e in events))


def migration_figures(events: Sequence[dict]) -> MigrationFigures:
    """The figures of one run (all files of one scenario and variant); the run must have opened its window."""
    opened, closed = window(events)
    report = check_history(events)
    # Offsets already processed twice before the window are not the migration's doing.
    before = check_history([e for e in events if e["type"] == "compare.processed" and e["time_ms"] < opened])
    return MigrationFigures(
        owned_twice=len({v.partition for v in report.violations if v.kind == "double-owner"}),
        violations=len(report.violations),
        records_duplicated=report.duplicates - before.duplicates,
        longest_pause_ms=longest_partition_pause(events, opened, closed),
    )


def longest_partition_pause(events: Sequence[dict], opened: int, closed: int) -> int:
    """The largest gap between consecutive ``compare.processed`` events of one partition, by any instance, the
    later one in ``[opened, closed]``: how long a partition's records waited while it changed hands (a member's
    own pause, the report's ``pause_max_ms``, does not see a partition move to another member)."""
    times: dict[tuple[str, int], list[int]] = {}
    for event in events:
        if event["type"] == "compare.processed" and event["time_ms"] <= closed:
            times.setdefault((event["topic"], event["partition"]), []).append(event["time_ms"])
    longest = 0
    for found in times.values():
        found.sort()
        gaps = (later - earlier for earlier, later in zip(found, found[1:], strict=False) if later >= opened)
        longest = max(longest, *gaps, 0)
    return longest
