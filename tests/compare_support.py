"""A comparison run's traces read back, and the report's counts (docs/compare.md, "The report's metrics")
recomputed from them without Spark, for the comparison tests."""

import json
from collections.abc import Callable
from pathlib import Path

from zkcoord.compare.history import check_history


def events(out: Path, scenario: str, variant: str) -> list[dict]:
    """Every event of one run (all its files), in time order."""
    found = []
    for path in sorted((out / "traces" / scenario / variant).glob("*.jsonl")):
        found += [json.loads(line) for line in path.read_text().splitlines()]
    return sorted(found, key=lambda e: e["time_ms"])


def of_type(found: list[dict], kind: str) -> list[dict]:
    return [e for e in found if e["type"] == kind]


def window(found: list[dict]) -> tuple[int, int]:
    phases = {e["phase"]: e["time_ms"] for e in of_type(found, "compare.phase")}
    return phases["measure"], phases["end"]


def rebalances_in_window(found: list[dict]) -> int:
    """``rebalances`` of a coordinator variant: generations in the window above the last one before it."""
    opened, closed = window(found)
    rebalances = of_type(found, "compare.rebalance")
    before = max((e["generation"] for e in rebalances if e["time_ms"] < opened), default=0)
    inside = [e for e in rebalances if opened <= e["time_ms"] <= closed]
    return len({e["generation"] for e in inside if e["generation"] > before})


def partitions_moved(found: list[dict]) -> int:
    """``partitions_moved``: acquisitions in the window by a member other than the partition's previous owner."""
    opened, closed = window(found)
    held: dict[str, set] = {}
    owner: dict[tuple, str] = {}
    moved = 0
    for e in of_type(found, "compare.assignment"):
        now = {tuple(tp) for tp in e["partitions"]}
        for tp in now - held.get(e["instance"], set()):
            moved += opened <= e["time_ms"] <= closed and owner.get(tp, e["member"]) != e["member"]
            owner[tp] = e["member"]
        held[e["instance"]] = now
    return moved


def processed_offsets(found: list[dict]) -> dict[tuple[str, int], set[int]]:
    """Every offset some member processed, per partition."""
    processed: dict[tuple[str, int], set[int]] = {}
    for e in of_type(found, "compare.processed"):
        processed.setdefault((e["topic"], e["partition"]), set()).update(range(e["first_offset"], e["last_offset"] + 1))
    return processed


def emptied_while_staying(found: list[dict]) -> int:
    """Assignments that took everything from an instance which went on to own partitions again."""
    assignments = of_type(found, "compare.assignment")
    return sum(
        1
        for n, e in enumerate(assignments)
        if not e["partitions"] and any(later["instance"] == e["instance"] for later in assignments[n + 1 :])
    )


def not_back_on_their_partitions(found: list[dict], members: int) -> list[str]:
    """The bounced static members ``m00``... whose second instance was not given, at once and only, what their first
    held last: [] when each came back to its partitions."""
    owned: dict[str, list] = {}  # each instance's non-empty assignments, in order
    for e in of_type(found, "compare.assignment"):
        if e["partitions"]:
            owned.setdefault(e["instance"], []).append(e["partitions"])
    return [
        member
        for member in (f"m{n:02d}" for n in range(members))
        if not owned.get(f"{member}#1") or owned.get(f"{member}#2") != [owned[f"{member}#1"][-1]]
    ]


def checked_run(found: list[dict], end_offsets: Callable[[str], dict[int, int]]) -> dict[int, int]:
    """Assert the history checker passes one run (no violation, commits acknowledged, nothing lost or missed) and its
    records are the broker's; returns what was produced, ``{partition: log end}``, each partition given records."""
    report = check_history(found)
    assert report.violations == [], report.violations
    assert report.acknowledged_commits > 0 and report.lost == 0 and report.missed == 0
    (run,) = of_type(found, "compare.run")
    (topic,) = run["partitions"]
    produced = {e["partition"]: e["end_offset"] for e in of_type(found, "compare.produced")}
    assert produced == end_offsets(topic) and all(end > 0 for end in produced.values())
    return produced
