"""The history checker: proves a comparison or fault run's ``compare.*`` trace events (docs/traces.md) safe.

Pure: it takes the events as dicts and returns a :class:`HistoryReport`; it reads no file and no clock, and
imports nothing but the model and the table printer. docs/faults.md states every rule and why it holds.
"""

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from zkcoord.model import TopicPartition
from zkcoord.tables import format_table

HANDOVER_SLACK_MS = 250
NEVER = float("inf")


@dataclass(frozen=True)
class Violation:
    kind: str  # double-owner, lost-commit, regression, missed
    partition: TopicPartition
    detail: str
    time_ms: int


@dataclass(frozen=True)
class Ownership:
    """One instance's continuous ownership of one partition: from ``start_ms`` until ``end_ms`` (exclusive)."""

    instance: str
    partition: TopicPartition
    start_ms: int
    end_ms: float


@dataclass
class HistoryReport:
    violations: list[Violation] = field(default_factory=list)
    acknowledged_commits: int = 0
    lost: int = 0
    regressions: int = 0
    duplicates: int = 0  # records processed more than once
    max_duplicates: dict[TopicPartition, int] = field(default_factory=dict)  # extra processings of one record
    missed: int = 0
    faults_injected: Counter = field(default_factory=Counter)  # fault kind -> injections
    recovery_ms: dict[str, int | None] = field(default_factory=dict)  # fault kind -> ms, None if never

    def to_json(self) -> dict:
        """The report as JSON values (per-partition figures are left out), for :meth:`from_json`."""
        return {
            "violations": [
                {"kind": v.kind, "partition": list(v.partition), "detail": v.detail, "time_ms": v.time_ms}
                for v in self.violations
            ],
            "acknowledged_commits": self.acknowledged_commits,
            "lost": self.lost,
            "regressions": self.regressions,
            "duplicates": self.duplicates,
            "missed": self.missed,
            "faults_injected": dict(self.faults_injected),
            "recovery_ms": self.recovery_ms,
        }

    @classmethod
    def from_json(cls, data: dict) -> "HistoryReport":
        violations = [
            Violation(v["kind"], TopicPartition(*v["partition"]), v["detail"], v["time_ms"]) for v in data["violations"]
        ]
        counts = {key: data[key] for key in ("acknowledged_commits", "lost", "regressions", "duplicates", "missed")}
        return cls(
            violations=violations,
            faults_injected=Counter(data["faults_injected"]),
            recovery_ms=dict(data["recovery_ms"]),
            **counts,
        )


def check_history(events: Iterable[dict], handover_slack_ms: int = HANDOVER_SLACK_MS) -> HistoryReport:
    """Checks one run's events (all files of one scenario and variant, in any order)."""
    ordered = sorted(events, key=lambda e: e["time_ms"])
    ownerships = ownership_intervals(ordered)
    processed = _processed_by_ownership(ordered, ownerships, handover_slack_ms)
    report = HistoryReport()
    live = live_ownerships(ordered, ownerships)
    _check_exclusive_ownership(live, handover_slack_ms, report)
    _check_acknowledged_commits(ordered, processed, handover_slack_ms, report)
    _check_regressions(processed, report)
    _check_coverage(ordered, report)
    _measure_recovery(ordered, live, report)
    report.violations.sort(key=lambda v: v.time_ms)
    return report


def ownership_intervals(ordered: Sequence[dict]) -> list[Ownership]:
    """Every instance's continuous ownerships, from ``compare.assignment`` events.

    An ownership starts at the assignment event that first lists the partition and ends at the instance's next
    assignment event without it, or at the runner's ``killed`` or ``closed`` event for the instance (the process
    is gone). A paused instance keeps its ownership: on ``resumed`` it may act on it before it learns otherwise.
    """
    held: dict[str, dict[TopicPartition, int]] = {}
    found: list[Ownership] = []

    def end(instance: str, partitions: Iterable[TopicPartition], at_ms: int) -> None:
        for tp in list(partitions):
            found.append(Ownership(instance, tp, held[instance].pop(tp), at_ms))

    for event in ordered:
        if event["type"] == "compare.assignment":
            owned = held.setdefault(event["instance"], {})
            now = {TopicPartition(t, p) for t, p in event["partitions"]}
            end(event["instance"], owned.keys() - now, event["time_ms"])
            for tp in now - owned.keys():
                owned[tp] = event["time_ms"]
        elif event["type"] == "compare.member" and event["event"] in ("killed", "closed"):
            gone = event["instance"]
            end(gone, held.get(gone, {}).keys(), event["time_ms"])
    for instance, owned in held.items():
        end(instance, owned.keys(), NEVER)
    return found


def live_ownerships(ordered: Sequence[dict], ownerships: list[Ownership]) -> list[Ownership]:
    """The parts of ``ownerships`` outside their instance's pauses (``paused`` to ``resumed``): a stopped process
    can neither process nor commit, so its stale belief harms no one until it resumes."""
    pauses: dict[str, list[tuple[int, float]]] = {}
    for event in ordered:
        if event["type"] == "compare.member" and event["event"] == "paused":
            pauses.setdefault(event["instance"], []).append((event["time_ms"], NEVER))
        elif event["type"] == "compare.member" and event["event"] == "resumed" and pauses.get(event["instance"]):
            paused_ms, _ = pauses[event["instance"]][-1]
            pauses[event["instance"]][-1] = (paused_ms, event["time_ms"])
    live = []
    for ownership in ownerships:
        start_ms = ownership.start_ms
        for paused_ms, resumed_ms in pauses.get(ownership.instance, []):
            if paused_ms < ownership.end_ms and resumed_ms > start_ms:
                if paused_ms > start_ms:
                    live.append(replace(ownership, start_ms=start_ms, end_ms=paused_ms))
                start_ms = resumed_ms
        if start_ms < ownership.end_ms:
            live.append(replace(ownership, start_ms=start_ms))
    return live


def _check_exclusive_ownership(ownerships: list[Ownership], slack_ms: int, report: HistoryReport) -> None:
    by_partition: dict[TopicPartition, list[Ownership]] = {}
    for ownership in ownerships:
        by_partition.setdefault(ownership.partition, []).append(ownership)
    for tp, spans in by_partition.items():
        for i, one in enumerate(spans):
            for other in spans[i + 1 :]:
                overlap = min(one.end_ms, other.end_ms) - max(one.start_ms, other.start_ms)
                if one.instance != other.instance and overlap > slack_ms:
                    since = max(one.start_ms, other.start_ms)
                    detail = f"{one.instance} and {other.instance} both owned it for {_ms(overlap)}"
                    report.violations.append(Violation("double-owner", tp, detail, since))


def _processed_by_ownership(
    ordered: Sequence[dict], ownerships: list[Ownership], slack_ms: int
) -> dict[Ownership, list[dict]]:
    """Each ``compare.processed`` event under the ownership it belongs to: the latest of its instance's on its
    partition that began before it (records finishing within the slack after a revocation still count)."""
    found: dict[Ownership, list[dict]] = {o: [] for o in ownerships}
    by_holder: dict[tuple[str, TopicPartition], list[Ownership]] = {}
    for ownership in sorted(ownerships, key=lambda o: o.start_ms):
        by_holder.setdefault((ownership.instance, ownership.partition), []).append(ownership)
    for event in ordered:
        if event["type"] != "compare.processed":
            continue
        spans = by_holder.get((event["instance"], TopicPartition(event["topic"], event["partition"])), [])
        began = [o for o in spans if o.start_ms <= event["time_ms"] <= o.end_ms + slack_ms]
        if began:
            found[began[-1]].append(event)
    return found


def _check_acknowledged_commits(
    ordered: Sequence[dict], processed: dict[Ownership, list[dict]], slack_ms: int, report: HistoryReport
) -> None:
    """A reader's first offset on a partition is at least every offset acknowledged before its ownership began
    (more than the slack before: within it, the order of two processes' stamps is unknown). Of one instance's
    commits only its last acknowledged one counts: a client may set its own offset back (librdkafka retries an
    auto-commit refused with NOT_COORDINATOR after the newer commit of its revocation), which re-reads records and
    loses none."""
    acknowledged: dict[TopicPartition, list[tuple[int, str, int]]] = {}
    for event in ordered:
        if event["type"] == "compare.committed" and event["error"] is None:
            report.acknowledged_commits += 1
            for topic, partition, offset in event["offsets"]:
                entry = (event["time_ms"], event["instance"], offset)
                acknowledged.setdefault(TopicPartition(topic, partition), []).append(entry)
    for ownership, reads in processed.items():
        if not reads:
            continue
        before = ownership.start_ms - slack_ms
        last_by_instance = {i: o for t, i, o in acknowledged.get(ownership.partition, []) if t < before}
        highest = max(last_by_instance.values(), default=None)
        start = reads[0]["first_offset"]
        if highest is not None and start < highest:
            report.lost += 1
            detail = f"{ownership.instance} started at {start} below the acknowledged {highest}"
            report.violations.append(Violation("lost-commit", ownership.partition, detail, reads[0]["time_ms"]))


def _check_regressions(processed: dict[Ownership, list[dict]], report: HistoryReport) -> None:
    for ownership, reads in processed.items():
        for previous, current in zip(reads, reads[1:], strict=False):
            if current["first_offset"] <= previous["last_offset"]:
                report.regressions += 1
                detail = f"{ownership.instance} processed {current['first_offset']} after {previous['last_offset']}"
                report.violations.append(Violation("regression", ownership.partition, detail, current["time_ms"]))


def _check_coverage(ordered: Sequence[dict], report: HistoryReport) -> None:
    """Every produced record ``0..end_offset-1`` processed at least once (as the report's ``records_missed``);
    records processed more than once are counted, not violations."""
    ranges: dict[TopicPartition, list[tuple[int, int]]] = {}
    ends: dict[TopicPartition, tuple[int, int]] = {}
    for event in ordered:
        if event["type"] == "compare.processed":
            tp = TopicPartition(event["topic"], event["partition"])
            ranges.setdefault(tp, []).append((event["first_offset"], event["last_offset"] + 1))
        elif event["type"] == "compare.produced":
            tp = TopicPartition(event["topic"], event["partition"])
            ends[tp] = (max(event["end_offset"], ends.get(tp, (0, 0))[0]), event["time_ms"])
    for tp in sorted(ranges.keys() | ends.keys()):
        end_offset, produced_ms = ends.get(tp, (0, 0))
        coverage = _coverage(ranges.get(tp, []), end_offset)
        for first, last, count in coverage:
            if count == 0 and first < end_offset:
                report.missed += last - first
                detail = f"records {first}..{last - 1} were produced and never processed"
                report.violations.append(Violation("missed", tp, detail, produced_ms))
            elif count >= 2:
                report.duplicates += last - first
        report.max_duplicates[tp] = max((count - 1 for _, _, count in coverage if count >= 2), default=0)


def _coverage(ranges: list[tuple[int, int]], end_offset: int) -> list[tuple[int, int, int]]:
    """``[first, last)`` runs of offsets from 0 with how many ranges cover each run."""
    changes: Counter = Counter({0: 0, end_offset: 0})
    for first, stop in ranges:
        changes[first] += 1
        changes[stop] -= 1
    points = sorted(changes)
    runs, count = [], 0
    for point, following in zip(points, points[1:], strict=False):
        count += changes[point]
        if point >= 0:
            runs.append((point, following, count))
    return runs


def _measure_recovery(ordered: Sequence[dict], ownerships: list[Ownership], report: HistoryReport) -> None:
    """Per fault kind: from its last ``healed`` until every partition was processed by its one live owner
    (``live`` holds no killed, closed or paused instance's ownership)."""
    healed: dict[str, int] = {}
    for event in ordered:
        if event["type"] == "compare.fault":
            if event["event"] == "injected":
                report.faults_injected[event["fault"]] += 1
            elif event["event"] == "healed":
                healed[event["fault"]] = event["time_ms"]
    partitions = {o.partition for o in ownerships}
    reads = [e for e in ordered if e["type"] == "compare.processed"]
    for kind, healed_ms in healed.items():
        recovered: dict[TopicPartition, int] = {}
        for event in reads:
            tp = TopicPartition(event["topic"], event["partition"])
            if event["time_ms"] < healed_ms or tp in recovered:
                continue
            owners = {o.instance for o in ownerships if o.partition == tp and o.start_ms <= event["time_ms"] < o.end_ms}
            if owners == {event["instance"]}:
                recovered[tp] = event["time_ms"]
        done = partitions and recovered.keys() == partitions
        report.recovery_ms[kind] = max(recovered.values()) - healed_ms if done else None


def summary_table(reports: Sequence[HistoryReport]) -> str:
    """Issue 18's table, one row per fault kind over several runs' reports (a run counts under every kind it
    injected, ``none`` if it injected none)."""
    rows: dict[str, list] = {}
    for report in reports:
        for kind in report.faults_injected or {"none": 0}:
            row = rows.setdefault(kind, [kind, 0, 0, 0, 0, []])
            row[1] += 1
            row[2] += report.faults_injected.get(kind, 0)
            row[3] += len(report.violations)
            row[4] += report.lost
            if kind in report.recovery_ms:
                row[5].append(report.recovery_ms[kind])
    for row in rows.values():
        row[5] = "-" if not row[5] else "never" if None in row[5] else max(row[5])
    header = ("fault", "runs", "injected", "violations", "acked lost", "longest recovery ms")
    return format_table(header, [rows[kind] for kind in sorted(rows)])


def _ms(duration: float) -> str:
    return "ever after" if duration == NEVER else f"{int(duration)} ms"
