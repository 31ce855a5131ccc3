"""Kafka's VerifiableConsumer invariants, checked over the ``client.*`` trace events of a whole group.

:func:`check_group` reads the events of many members (any order between members; each member's own events in
the order it wrote them) and returns a :class:`VerifiableReport`:

(a) committed ≤ position: a member never commits past what it consumed. Its position in a partition is the
    last offset it consumed there + 1, since it was last assigned the partition; before it consumed anything
    there it can only have committed where it started, which is where somebody's consumption had reached
    (``1 +`` the highest offset any member consumed before the member's previous event, by ``monotonic``).
(b) no gaps: every partition's consumption, all members together, covers its offsets from the start offset
    to the highest one consumed; a hole is a run of offsets nobody consumed below that.
(c) complete: every record below the end offset was consumed at least once. Records consumed more than once
    are counted (per partition and in total) and reported, not failed.
(d) exclusive ownership: no partition is owned by two members at one instant
    (:func:`~zkcoord.testing.legacy.ownership_overlaps`; a killed member's ownership ends at its kill), and
    a member consumes only partitions it owns.

Pure: reads files only in :func:`read_traces`. Imports zkcoord.model, zkcoord.trace, zkcoord.testing.legacy.
"""

import bisect
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from zkcoord.model import TopicPartition
from zkcoord.testing.legacy import ownership_overlaps
from zkcoord.trace import TRACE_SCHEMA, Event

REBALANCE_STATES = frozenset({"PREPARE_REVOCATION", "PREPARING_REBALANCE"})


@dataclass(frozen=True)
class CommitAhead:
    """(a) ``member`` committed ``committed`` for ``partition`` while its position was ``position``."""

    member: str
    partition: TopicPartition
    committed: int
    position: int
    time_ms: int

    def __str__(self) -> str:
        return f"{self.member} committed {self.partition}@{self.committed} ahead of its position {self.position}"


@dataclass(frozen=True)
class Gap:
    """(b) offsets ``first`` to ``last`` (inclusive) of ``partition`` were never consumed, though later ones were."""

    partition: TopicPartition
    first: int
    last: int

    def __str__(self) -> str:
        return f"{self.partition}: offsets {self.first}..{self.last} never consumed (later offsets were)"


@dataclass(frozen=True)
class Unconsumed:
    """(c) offsets ``first`` up to the end ``end`` (exclusive) of ``partition`` were never consumed."""

    partition: TopicPartition
    first: int
    end: int

    def __str__(self) -> str:
        return f"{self.partition}: offsets {self.first}..{self.end - 1} up to the end never consumed"


@dataclass(frozen=True)
class Overlap:
    """(d) ``first`` and ``second`` both believed they owned ``partition`` at one instant."""

    partition: TopicPartition
    first: str
    second: str

    def __str__(self) -> str:
        return f"{self.partition} owned by {self.first} and {self.second} at the same time"


@dataclass(frozen=True)
class UnownedConsumption:
    """(d) ``member`` consumed offsets ``first``..``last`` of ``partition`` without owning it."""

    member: str
    partition: TopicPartition
    first: int
    last: int

    def __str__(self) -> str:
        return f"{self.member} consumed {self.partition}@{self.first}..{self.last} without owning it"


@dataclass(frozen=True)
class VerifiableReport:
    """Figures and violations of one group's run; :attr:`ok` when there is no violation."""

    members: tuple[str, ...]
    partitions: int
    expected_records: int  # below the end offsets
    consumed_records: int  # every record returned by poll(), duplicates included
    distinct_records: int
    duplicates_by_partition: Mapping[TopicPartition, int]
    commits: int  # client.committed events without an error
    failed_commits: int
    joins: int  # member state changes into PREPARING_REBALANCE
    generations: tuple[int, ...]  # of the assignments members took
    commit_violations: tuple[CommitAhead, ...] = ()
    gaps: tuple[Gap, ...] = ()
    unconsumed: tuple[Unconsumed, ...] = ()
    overlaps: tuple[Overlap, ...] = ()
    unowned_consumption: tuple[UnownedConsumption, ...] = ()
    ignored_events: int = field(default=0)  # unreadable lines, other schemas

    @property
    def duplicates(self) -> int:
        return sum(self.duplicates_by_partition.values())

    @property
    def violations(self) -> list[str]:
        kinds = (self.commit_violations, self.gaps, self.unconsumed, self.overlaps, self.unowned_consumption)
        return [str(violation) for kind in kinds for violation in kind]

    @property
    def ok(self) -> bool:
        return not self.violations

    def summary(self, limit: int = 20) -> str:
        duplicated = sorted(self.duplicates_by_partition.items(), key=lambda item: (-item[1], item[0]))
        worst = ", ".join(f"{tp}:{count}" for tp, count in duplicated[:5] if count)
        spread = sum(1 for count in self.duplicates_by_partition.values() if count)
        lines = [
            f"members {len(self.members)}, partitions {self.partitions}, generations {list(self.generations)}, "
            f"joins {self.joins}",
            f"records: expected {self.expected_records}, consumed {self.consumed_records}, "
            f"distinct {self.distinct_records}, duplicates {self.duplicates} "
            f"in {spread} partitions" + (f" (most: {worst})" if worst else ""),
            f"commits: {self.commits} ok, {self.failed_commits} failed",
            f"(a) commits ahead of position: {len(self.commit_violations)}; (b) gaps: {len(self.gaps)}; "
            f"(c) unconsumed tails: {len(self.unconsumed)}; (d) overlaps: {len(self.overlaps)}, "
            f"consumed while not owned: {len(self.unowned_consumption)}",
        ]
        violations = self.violations
        lines += [f"  {text}" for text in violations[:limit]]
        if len(violations) > limit:
            lines.append(f"  ... and {len(violations) - limit} more")
        return "\n".join(lines)


def read_traces(paths: Iterable[str | Path]) -> tuple[list[Event], int]:
    """Events of JSON-lines traces, file after file, and how many lines were skipped.

    A killed member may leave a torn last line, and lines of another schema are not ours: both are skipped.
    """
    events, skipped = [], 0
    for path in paths:
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                skipped += 1
                continue
            if isinstance(event, dict) and event.get("schema") == TRACE_SCHEMA:
                events.append(event)
            else:
                skipped += 1
    return events, skipped


def check_group(
    events: Iterable[Event],
    end_offsets: Mapping[TopicPartition, int],
    start_offsets: Mapping[TopicPartition, int] | None = None,
    killed: Mapping[str, float] | None = None,
    ignored_events: int = 0,
) -> VerifiableReport:
    """Check invariants (a)–(d) of the module docstring for the partitions of ``end_offsets``.

    ``start_offsets`` default to 0; ``killed`` maps a killed member to its kill's ``time.monotonic()``.
    """
    events = [e for e in events if str(e.get("type", "")).startswith("client.")]
    ends = {TopicPartition(*tp): end for tp, end in end_offsets.items()}
    starts = {tp: (start_offsets or {}).get(tp, 0) for tp in ends}
    by_member: dict[str, list[Event]] = {}
    for event in events:
        by_member.setdefault(event["member"], []).append(event)

    consumed: dict[TopicPartition, list[tuple[int, int]]] = {tp: [] for tp in ends}
    # (monotonic, last offset) of every consumption, for the bound of a commit made before consuming
    reached: dict[TopicPartition, list[tuple[float, int]]] = {}
    for event in events:
        if event["type"] == "client.consumed":
            tp = TopicPartition(event["topic"], event["partition"])
            consumed.setdefault(tp, []).append((event["first_offset"], event["last_offset"]))
            reached.setdefault(tp, []).append((event["monotonic"], event["last_offset"]))
    reached_by = {tp: _running_highest(moments) for tp, moments in reached.items()}

    commit_violations, unowned, commits, failed, joins, generations = [], [], 0, 0, 0, set()
    for member, stream in by_member.items():
        owned: set[TopicPartition] = set()
        position: dict[TopicPartition, int] = {}  # since the partition was last assigned to this member
        moment = float("-inf")  # monotonic stamp of this member's latest stamped event
        for event in stream:
            kind = event["type"]
            if kind == "client.assignment":
                now = {TopicPartition(t, p) for claims in event["assignment"].values() for t, p in claims}
                for tp in now - owned:
                    position.pop(tp, None)
                owned = now
                moment = max(moment, event["monotonic_after"])
                if event["generation"] >= 0:  # -1: partitions lost, no generation
                    generations.add(event["generation"])
            elif kind == "client.consumed":
                tp = TopicPartition(event["topic"], event["partition"])
                if tp not in owned:
                    unowned.append(UnownedConsumption(member, tp, event["first_offset"], event["last_offset"]))
                position[tp] = event["last_offset"] + 1
                moment = max(moment, event["monotonic"])
            elif kind == "client.committed":
                if event.get("error"):
                    failed += 1
                    continue
                commits += 1
                for topic, number, offset in event["offsets"]:
                    tp = TopicPartition(topic, number)
                    bound = position.get(tp)
                    if bound is None:
                        bound = _reached_before(reached_by.get(tp), moment, starts.get(tp, 0))
                    if offset > bound:
                        commit_violations.append(CommitAhead(member, tp, offset, bound, event["time_ms"]))
            elif kind == "client.state" and event["state"] == "PREPARING_REBALANCE":
                joins += 1

    gaps, unconsumed, duplicates, distinct_total, consumed_total, expected = [], [], {}, 0, 0, 0
    for tp in sorted(ends):
        start, end = starts[tp], ends[tp]
        expected += max(end - start, 0)
        ranges = sorted(consumed.get(tp, []))
        consumed_total += sum(last - first + 1 for first, last in ranges)
        covered, next_needed = 0, start  # walk merged ranges from the start offset
        for first, last in ranges:
            first, last = max(first, start), min(last, end - 1)
            if first > last:
                continue
            if first > next_needed:
                gaps.append(Gap(tp, next_needed, first - 1))
                next_needed = first
            if last >= next_needed:
                covered += last - next_needed + 1
                next_needed = last + 1
        if next_needed < end:
            unconsumed.append(Unconsumed(tp, next_needed, end))
        distinct_total += covered
        in_range = sum(max(min(last, end - 1) - max(first, start) + 1, 0) for first, last in ranges)
        duplicates[tp] = in_range - covered

    overlaps = tuple(Overlap(*found) for found in ownership_overlaps(events, killed))
    return VerifiableReport(
        members=tuple(sorted(by_member)),
        partitions=len(ends),
        expected_records=expected,
        consumed_records=consumed_total,
        distinct_records=distinct_total,
        duplicates_by_partition=duplicates,
        commits=commits,
        failed_commits=failed,
        joins=joins,
        generations=tuple(sorted(generations)),
        commit_violations=tuple(commit_violations),
        gaps=tuple(gaps),
        unconsumed=tuple(unconsumed),
        overlaps=overlaps,
        unowned_consumption=tuple(unowned),
        ignored_events=ignored_events,
    )


def _running_highest(moments: list[tuple[float, int]]) -> tuple[list[float], list[int]]:
    """Stamps in order, and the highest offset consumed up to each."""
    moments.sort()
    highest, running = -1, []
    for _, last in moments:
        highest = max(highest, last)
        running.append(highest)
    return [stamp for stamp, _ in moments], running


def _reached_before(reached: tuple[list[float], list[int]] | None, moment: float, start: int) -> int:
    """1 + the highest offset consumed by anyone at or before ``moment`` (``start`` if none was)."""
    if reached is None:
        return start
    stamps, running = reached
    index = bisect.bisect_right(stamps, moment)
    return max(start, running[index - 1] + 1) if index else start


def rebalance_transitions(events: Iterable[Event], members: Iterable[str], since_ms: int, until_ms: int) -> list[Event]:
    """``client.state`` changes of ``members`` into a rebalance (eager revocation or a join) within the window."""
    names = set(members)
    return [
        e
        for e in events
        if e["type"] == "client.state"
        and e["member"] in names
        and e["state"] in REBALANCE_STATES
        and since_ms <= e["time_ms"] <= until_ms
    ]


def assignments(events: Iterable[Event]) -> dict[str, list[tuple[float, int, frozenset[TopicPartition]]]]:
    """Every member's ``client.assignment`` history: ``(monotonic_after, generation, partitions)``, in order."""
    history: dict[str, list[tuple[float, int, frozenset[TopicPartition]]]] = {}
    for event in events:
        if event["type"] == "client.assignment":
            owned = frozenset(TopicPartition(t, p) for claims in event["assignment"].values() for t, p in claims)
            history.setdefault(event["member"], []).append((event["monotonic_after"], event["generation"], owned))
    for changes in history.values():
        changes.sort(key=lambda change: change[0])
    return history
