"""``compare run --scenario member-migration`` small: a legacy group moved to coordinator members one member at a
time through a mixed DUAL_WRITE group, against the whole group stopped, migrated and started again.

Issue 20: no partition is ever owned twice, and the run's figures (records duplicated, the longest time a
partition waited) agree with the traces, recomputed here without Spark or the history checker's code.
"""

import collections
import json
from pathlib import Path

import pytest

from zkcoord.compare.history import check_history
from zkcoord.compare.runner import CompareOptions, compare_run
from zkcoord.compare.scenarios import Workload

MEMBERS = 2
VARIANTS = ("whole-group", "member-by-member")
pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def compared(tmp_path_factory, zk_server):
    out = tmp_path_factory.mktemp("compare-migration")
    options = CompareOptions(
        out=out,
        scenarios=["member-migration"],
        variants=list(VARIANTS),
        workload=Workload(members=MEMBERS, partitions=2 * MEMBERS, session_timeout_ms=5000),
        rate=10.0,
        duration_s=1.0,
        zookeeper=zk_server,
        node_properties={"group.initial.rebalance.delay.ms": 0},
    )
    results = compare_run(options, say=lambda line: None)
    assert [(r["variant"], r["status"]) for r in results] == [(v, "ok") for v in VARIANTS], results
    return out, {r["variant"]: r["figures"] for r in results}


def events(out: Path, variant: str) -> list[dict]:
    found = []
    for path in sorted((out / "traces" / "member-migration" / variant).glob("*.jsonl")):
        found += [json.loads(line) for line in path.read_text().splitlines()]
    return sorted(found, key=lambda e: e["time_ms"])


def owners_over_time(found: list[dict]) -> list[dict[str, frozenset]]:
    """After each assignment or member event: every live instance's partitions."""
    owned: dict[str, frozenset] = {}
    seen = []
    for e in found:
        if e["type"] == "compare.assignment":
            owned[e["instance"]] = frozenset(map(tuple, e["partitions"]))
        elif e["type"] == "compare.member" and e["event"] in ("closed", "killed"):
            owned.pop(e["instance"], None)
        else:
            continue
        seen.append(dict(owned))
    return seen


@pytest.mark.parametrize("variant", VARIANTS)
def test_no_partition_is_owned_twice_and_every_record_is_processed(compared, variant):
    out, figures = compared
    report = check_history(events(out, variant))
    assert report.violations == [] and report.missed == 0 and report.lost == 0
    assert figures[variant]["owned_twice"] == 0 and figures[variant]["violations"] == 0


def test_legacy_and_coordinator_members_owned_partitions_side_by_side_only_member_by_member(compared):
    out, _ = compared
    legacy = {f"m{n:02d}#1" for n in range(MEMBERS)}
    for variant, mixed in (("whole-group", False), ("member-by-member", True)):
        found = events(out, variant)
        steps = [e["name"] for e in found if e["type"] == "compare.step"]
        side_by_side = any(
            {i for i, tps in owned.items() if tps} & legacy and {i for i, tps in owned.items() if tps} - legacy
            for owned in owners_over_time(found)
        )
        assert side_by_side == mixed, (variant, steps)
    steps = [e["name"] for e in events(out, "member-by-member") if e["type"] == "compare.step"]
    assert steps == ["migrate up --to 0001_dual_commit"] + [f"replace m0{n} by m0{n + MEMBERS}" for n in range(MEMBERS)]


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_figures_agree_with_the_traces(compared, variant):
    out, figures = compared
    found = events(out, variant)
    phases = {e["phase"]: e["time_ms"] for e in found if e["type"] == "compare.phase"}
    opened, closed = phases["measure"], phases["end"]
    processed = [e for e in found if e["type"] == "compare.processed"]
    every, before = collections.Counter(), collections.Counter()
    for e in processed:
        for offset in range(e["first_offset"], e["last_offset"] + 1):
            every[e["topic"], e["partition"], offset] += 1
            before[e["topic"], e["partition"], offset] += e["time_ms"] < opened
    duplicated = sum(1 for key, count in every.items() if count > 1 and before[key] < 2)
    last_seen: dict = {}
    longest = 0
    for e in processed:
        if e["time_ms"] > closed:
            continue
        key = (e["topic"], e["partition"])
        if key in last_seen and e["time_ms"] >= opened:
            longest = max(longest, e["time_ms"] - last_seen[key])
        last_seen[key] = e["time_ms"]
    assert figures[variant]["records_duplicated"] == duplicated
    assert figures[variant]["longest_pause_ms"] == longest
    assert longest > 0  # every partition changed hands in the window
