"""A real comparison run (ZooKeeper, node and member processes) and the PySpark report over its traces.

Issue "Done when": a rolling bounce of 10 static members is 0 rebalances on the coordinator against the legacy
group's count, side by side; the report's numbers agree with the traces (two metrics recomputed here without
Spark); no record is left unprocessed.
"""

import collections
import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from spark_support import small_jobs_env

from zkcoord.compare.history import check_history
from zkcoord.compare.runner import CompareOptions, compare_run
from zkcoord.compare.scenarios import Workload

MEMBERS = 6
pytestmark = pytest.mark.timeout(900)  # two runs of 6 bounces each, then a Spark job


@pytest.fixture(scope="module")
def compared(tmp_path_factory, zk_server):
    out = tmp_path_factory.mktemp("compare")
    options = CompareOptions(
        out=out,
        scenarios=["rolling-bounce"],
        variants=["legacy", "static"],
        workload=Workload(members=MEMBERS, partitions=2 * MEMBERS, downtime_ms=500, session_timeout_ms=5000),
        rate=10.0,
        duration_s=1.0,
        zookeeper=zk_server,
        node_properties={"group.initial.rebalance.delay.ms": 0},
    )
    results = compare_run(options, say=lambda line: None)
    assert [(r["variant"], r["status"]) for r in results] == [("legacy", "ok"), ("static", "ok")], results
    return out


@pytest.fixture(scope="module")
def report(compared, tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    command = [sys.executable, "-m", "zkcoord.pipeline", "rebalance-report", "--in", str(compared), "--out", str(out)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, env=small_jobs_env())
    assert result.returncode == 0, result.stdout + result.stderr
    rows = pq.read_table(out / "summary.parquet").to_pylist()
    return {row["variant"]: row for row in rows}, result.stdout, out


def events(directory: Path, variant: str) -> list[dict]:
    found = []
    for path in sorted((directory / "traces" / "rolling-bounce" / variant).glob("*.jsonl")):
        found += [json.loads(line) for line in path.read_text().splitlines()]
    return found


def window(found: list[dict]) -> tuple[int, int]:
    phases = {e["phase"]: e["time_ms"] for e in found if e["type"] == "compare.phase"}
    return phases["measure"], phases["end"]


def test_the_run_writes_tagged_traces_and_a_manifest(compared):
    manifest = json.loads((compared / "compare.json").read_text())
    assert {(r["scenario"], r["variant"], r["status"]) for r in manifest["runs"]} == {
        ("rolling-bounce", "legacy", "ok"),
        ("rolling-bounce", "static", "ok"),
    }
    for variant in ("legacy", "static"):
        found = events(compared, variant)
        assert all(e["schema"] == "zkcoord.trace/1" and e["variant"] == variant for e in found)
        steps = [e["name"] for e in found if e["type"] == "compare.step"]
        assert steps == [f"bounce m{n:02d}" for n in range(MEMBERS)]
        starts = collections.Counter(
            e["member"] for e in found if e["type"] == "compare.member" and e["event"] == "started"
        )
        assert starts == {f"m{n:02d}": 2 for n in range(MEMBERS)}  # every member bounced once


def test_the_history_checker_finds_no_violation_in_either_group(compared):
    for variant in ("legacy", "static"):
        report = check_history(events(compared, variant))
        assert report.violations == [], report.violations
        assert report.acknowledged_commits > 0 and report.lost == 0


def test_static_members_bounce_without_a_rebalance_where_the_legacy_group_rebalances_each_time(report):
    summary, terminal, _ = report
    assert summary["static"]["rebalances"] == 0
    assert summary["legacy"]["rebalances"] >= MEMBERS  # every bounce moves the others' partitions at least once
    assert summary["legacy"]["partitions_moved"] > 0 and summary["static"]["partitions_moved"] == 0
    assert "rolling-bounce" in terminal and "static" in terminal


def test_no_record_is_left_unprocessed(report):
    summary, _, _ = report
    assert summary["legacy"]["records_missed"] == 0 and summary["static"]["records_missed"] == 0
    assert summary["legacy"]["records_processed"] > 0


def test_the_report_agrees_with_the_traces_recomputed_without_spark(compared, report):
    """Rebalances (docs/compare.md) and records processed, straight from the JSON lines."""
    summary, _, out = report
    for variant in ("legacy", "static"):
        found = events(compared, variant)
        opened, closed = window(found)
        rebalances = [e for e in found if e["type"] == "compare.rebalance"]
        inside = [e for e in rebalances if opened <= e["time_ms"] <= closed]
        if variant == "legacy":
            expected = max(collections.Counter(e["member"] for e in inside).values(), default=0)
        else:
            before = max((e["generation"] for e in rebalances if e["time_ms"] < opened), default=0)
            expected = len({e["generation"] for e in inside if e["generation"] > before})
        assert summary[variant]["rebalances"] == expected
        processed = sum(e["last_offset"] - e["first_offset"] + 1 for e in found if e["type"] == "compare.processed")
        assert summary[variant]["records_processed"] == processed
    html = (out / "report.html").read_text()
    assert "data:image/png;base64" in html and "rolling-bounce" in html
