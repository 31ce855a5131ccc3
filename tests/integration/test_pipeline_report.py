"""The rebalance report (zkcoord.pipeline.rebalance_report) on hand-made traces whose metrics are known by construction.

The session's Spark (conftest) serves the whole module; the runs below are tiny and each comment says why a number
is what it is.
W is [10 000, 20 000] ms in every measured run.
"""

import json
import math
import os
import subprocess
import sys
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from spark_support import small_jobs_env

from zkcoord.pipeline import __main__ as pipeline_main
from zkcoord.pipeline import rebalance_report
from zkcoord.pipeline.rebalance_report import EVENT_SCHEMA, ReportInputError, read_events, run
from zkcoord.pipeline.report_html import render_report
from zkcoord.pipeline.report_metrics import compute
from zkcoord.pipeline.report_summary import HEADLINE_METRICS, METRICS, old_new_ratio, ratio_rows, terminal_table
from zkcoord.pipeline.spark import local_driver_memory

RUN_ID = "run-1"
MEASURE_MS, DRAIN_MS, END_MS = 10_000, 18_000, 20_000


class RunTrace:
    """The events of one scenario run: the runner's and each member instance's."""

    def __init__(self, scenario: str, variant: str):
        self.scenario, self.variant = scenario, variant
        self.events: list[dict] = []

    def _add(self, event_type: str, time_ms: int, member: str, instance: str | None, fields: dict) -> None:
        self.events.append(
            {
                "schema": "zkcoord.trace/1",
                "type": f"compare.{event_type}",
                "time_ms": time_ms,
                "group": "g",
                "member": member,
                "run": RUN_ID,
                "scenario": self.scenario,
                "variant": self.variant,
                "instance": instance,
                **fields,
            }
        )

    def runner(self, event_type: str, time_ms: int, instance: str | None = None, **fields) -> "RunTrace":
        self._add(event_type, time_ms, "runner", instance, fields)
        return self

    def member(self, instance: str, event_type: str, time_ms: int, **fields) -> "RunTrace":
        self._add(event_type, time_ms, instance.split("#")[0], instance, fields)
        return self

    def assignment(self, instance: str, time_ms: int, *partitions: tuple[str, int]) -> "RunTrace":
        return self.member(instance, "assignment", time_ms, partitions=[list(pair) for pair in partitions])

    def processed(self, instance: str, time_ms: int, partition: int, first: int, last: int) -> "RunTrace":
        return self.member(
            instance, "processed", time_ms, topic="t", partition=partition, first_offset=first, last_offset=last
        )

    def measured(self, partitions: dict[int, int] | None = None, counters: dict | None = None) -> "RunTrace":
        """The runner's frame: run, phases, the topic ``t`` with two partitions, and ``produced``/``counters``."""
        self.runner("run", 0, members=2, partitions={"t": 2}, rate=10, cost_ms=1, label="test")
        self.runner("phase", 0, phase="warmup").runner("topic", 0, topic="t", partitions=2)
        self.runner("phase", MEASURE_MS, phase="measure").runner("phase", DRAIN_MS, phase="drain")
        for partition, end_offset in (partitions or {}).items():
            self.runner("produced", DRAIN_MS, topic="t", partition=partition, end_offset=end_offset)
        if counters is not None:
            self.runner("counters", END_MS, coordinator_requests_by_api={}, **counters)
        return self.runner("phase", END_MS, phase="end")


def legacy_bounce(*, gap: bool = True) -> RunTrace:
    trace = RunTrace("rolling-bounce", "legacy").measured(
        {0: 300, 1: 200}, {"zk_reads": 120, "zk_writes": 40, "coordinator_requests": 0}
    )
    trace.runner("step", 11_800, step=1, name="bounce m00").runner("member", 12_100, "m00#1", event="closed")
    trace.runner("member", 12_200, "m00#2", event="started").runner("step", 15_000, step=2, name="wait")
    # m00 rebalances 3 times in W over two instances, m01 twice; the rebalances at 1 000 are before W.
    for instance, times in {
        "m00#1": (1_000, 10_900, 11_900),
        "m00#2": (13_500,),
        "m01#1": (1_000, 10_950, 12_050),
    }.items():
        for time_ms in times:
            trace.member(instance, "rebalance", time_ms, generation=None)
    # t-1 moves from m00 to m01 at the same instant (no gap); t-0 is unowned from 12 000 to 13 500 and returns to m00.
    trace.assignment("m00#1", 1_000, ("t", 0), ("t", 1)).assignment("m01#1", 1_000)
    trace.assignment("m00#1", 11_000, ("t", 0)).assignment("m01#1", 11_000, ("t", 1))
    trace.assignment("m00#1", 12_000).assignment("m00#2", 13_500, ("t", 0))
    # t-0: 50..99 twice before W (no duplicate in W), 100..199 twice within W; t-1: 0..49 twice, 120..129 missed.
    trace.processed("m00#1", 5_000, 0, 0, 99).processed("m00#1", 9_000, 0, 50, 149)
    trace.processed("m00#1", 10_200, 1, 0, 49).processed("m00#1", 11_200, 0, 150, 199)
    trace.processed("m00#2", 14_000, 0, 100, 199).processed("m00#2", 14_500, 0, 200, 299)
    # m01's longest pause is 12 500 - 10 500; m00's is 1 000 (the gap between its two instances does not count).
    trace.processed("m01#1", 10_500, 1, 0, 79).processed("m01#1", 12_500, 1, 80, 119)
    if not gap:
        trace.processed("m01#1", 12_600, 1, 120, 129)
    return trace.processed("m01#1", 13_000, 1, 130, 199)


def eager_kill() -> RunTrace:
    trace = RunTrace("rolling-bounce", "eager").measured(
        {0: 300, 1: 200}, {"zk_reads": 10, "zk_writes": 0, "coordinator_requests": 500}
    )
    trace.runner("step", 11_900, step=1, name="kill m00").runner("member", 12_000, "m00#1", event="killed")
    trace.runner("step", 14_900, step=2, name="add a partition").runner("topic", 15_000, topic="t", partitions=3)
    # Generation 1 before W, 2 and 3 in W.
    for instance, generation, time_ms in (("m00#1", 1, 1_000), ("m01#1", 1, 1_000), ("m00#1", 2, 11_000)):
        trace.member(instance, "rebalance", time_ms, generation=generation)
    trace.member("m01#1", "rebalance", 11_000, generation=2).member("m01#1", "rebalance", 12_500, generation=3)
    # The kill ends m00's t-0 at 12 000; m01 revokes t-1 at 12 000 and takes both back at 12 500 (one move, t-0);
    # t-2 exists from 15 000 and is unowned until 16 000.
    trace.assignment("m00#1", 1_000, ("t", 0)).assignment("m01#1", 1_000, ("t", 1))
    trace.assignment("m01#1", 12_000).assignment("m01#1", 12_500, ("t", 0), ("t", 1))
    trace.assignment("m01#1", 16_000, ("t", 0), ("t", 1), ("t", 2))
    trace.processed("m00#1", 10_500, 0, 0, 149).processed("m01#1", 10_100, 1, 0, 199)
    return trace.processed("m01#1", 13_000, 0, 0, 299)


def static_bounce() -> RunTrace:
    trace = RunTrace("rolling-bounce", "static").measured(
        {0: 300, 1: 200}, {"zk_reads": None, "zk_writes": None, "coordinator_requests": 300}
    )
    trace.runner("step", 11_500, step=1, name="bounce m00").runner("member", 12_100, "m00#1", event="closed")
    trace.runner("member", 12_200, "m00#2", event="started")
    # Only generation 1, re-reported in W by the restarted static member: no rebalance.
    trace.member("m00#1", "rebalance", 1_000, generation=1).member("m01#1", "rebalance", 1_000, generation=1)
    trace.member("m00#2", "rebalance", 14_000, generation=1)
    trace.assignment("m00#1", 1_000, ("t", 0)).assignment("m01#1", 1_000, ("t", 1))
    trace.assignment("m00#1", 12_000).assignment("m00#2", 14_000, ("t", 0))
    trace.processed("m01#1", 11_000, 1, 0, 99).processed("m01#1", 13_000, 1, 100, 199)
    return trace.processed("m00#2", 15_000, 0, 0, 299)


def legacy_cold_start() -> RunTrace:
    """No topic event, steps, records or counters; ends without an ``end`` phase (its last event closes W)."""
    trace = RunTrace("cold-start", "legacy").runner("phase", MEASURE_MS, phase="measure")
    trace.member("m00#1", "rebalance", 10_500, generation=None).assignment("m00#1", 10_500, ("t", 0))
    return trace.member("m00#1", "committed", END_MS, offsets=[["t", 0, 0]], error=None)


def unmeasured() -> RunTrace:
    trace = RunTrace("kill", "cooperative").runner("phase", 0, phase="warmup")
    return trace.assignment("m00#1", 1_000, ("t", 0))


def write_traces(root, *traces: RunTrace) -> str:
    """``root/traces/<scenario>/<variant>/<runner or instance>.jsonl``, as ``zkcoord compare run`` writes them."""
    for trace in traces:
        for event in trace.events:
            directory = root / "traces" / event["scenario"] / event["variant"]
            directory.mkdir(parents=True, exist_ok=True)
            with open(
                directory / f"{event['instance'] if event['member'] != 'runner' else 'runner'}.jsonl", "a"
            ) as out:
                out.write(json.dumps(event) + "\n")
    return str(root)


EXPECTED_SUMMARY = {
    ("rolling-bounce", "legacy"): {
        "rebalances": 3,
        "time_to_stable_ms": 1_700,  # step 1 starts at 11 800, its last assignment is at 13 500
        "partitions_moved": 1,
        "unowned_partition_s": 1.5,
        "pause_max_ms": 2_000,
        "pause_p50_ms": 1_500.0,
        "records_processed": 690,
        "records_processed_in_window": 490,  # 200 of them before W
        "records_duplicated": 150,
        "records_missed": 10,
        "zk_reads": 120,
        "zk_writes": 40,
        "coordinator_requests": 0,
        "window_ms": 10_000,
        "window_start_ms": MEASURE_MS,
    },
    ("rolling-bounce", "eager"): {
        "rebalances": 2,
        "time_to_stable_ms": 1_100,  # step 2: 14 900 to the assignment with t-2 at 16 000
        "partitions_moved": 1,
        "unowned_partition_s": 2.0,  # t-0 and t-1 0.5 s each, t-2 1 s after it appeared
        "pause_max_ms": 2_900,
        "pause_p50_ms": 2_900.0,  # m00 processed once in W: left out
        "records_processed": 650,
        "records_processed_in_window": 650,
        "records_duplicated": 150,
        "records_missed": 0,
        "zk_reads": 10,
        "zk_writes": 0,
        "coordinator_requests": 500,
        "window_ms": 10_000,
        "window_start_ms": MEASURE_MS,
    },
    ("rolling-bounce", "static"): {
        "rebalances": 0,
        "time_to_stable_ms": 2_500,
        "partitions_moved": 0,
        "unowned_partition_s": 2.0,
        "pause_max_ms": 2_000,
        "pause_p50_ms": 2_000.0,
        "records_processed": 500,
        "records_processed_in_window": 500,
        "records_duplicated": 0,
        "records_missed": 0,
        "zk_reads": None,
        "zk_writes": None,
        "coordinator_requests": 300,
        "window_ms": 10_000,
        "window_start_ms": MEASURE_MS,
    },
    ("cold-start", "legacy"): {
        "rebalances": 1,
        "time_to_stable_ms": 0,
        "partitions_moved": 0,
        "unowned_partition_s": 0.0,
        "pause_max_ms": None,
        "pause_p50_ms": None,
        "records_processed": 0,
        "records_processed_in_window": 0,
        "records_duplicated": 0,
        "records_missed": 0,
        "zk_reads": None,
        "zk_writes": None,
        "coordinator_requests": None,
        "window_ms": 10_000,
        "window_start_ms": MEASURE_MS,
    },
}


@pytest.fixture(scope="module")
def tables(spark, tmp_path_factory):
    root = write_traces(
        tmp_path_factory.mktemp("report"),
        legacy_bounce(),
        eager_kill(),
        static_bounce(),
        legacy_cold_start(),
        unmeasured(),
    )
    return compute(read_events(spark, [os.path.join(root, "traces")]).cache())


def rows_by_key(frame, *key: str) -> dict:
    rows = frame.collect()
    if len(key) == 1:
        return {row[key[0]]: row.asDict() for row in rows}
    return {tuple(row[column] for column in key): row.asDict() for row in rows}


def test_summary_has_every_metric_of_each_measured_run(tables):
    summary = rows_by_key(tables.summary, "scenario", "variant")
    assert set(summary) == set(EXPECTED_SUMMARY)  # the run without a measure phase is left out
    for key, expected in EXPECTED_SUMMARY.items():
        assert summary[key] == {"scenario": key[0], "variant": key[1], **expected}, key
    counts = [column for column in METRICS if column not in ("unowned_partition_s", "pause_p50_ms")]
    assert all(isinstance(summary[key][column], int | None) for key in summary for column in counts)


def test_members_hold_each_members_counts_and_longest_pause(tables):
    members = rows_by_key(tables.members.where("variant = 'legacy' and scenario = 'rolling-bounce'"), "member")
    assert members["m00"] == {
        "scenario": "rolling-bounce",
        "variant": "legacy",
        "member": "m00",
        "instances": 2,
        "rebalances": 3,
        "processed_in_window": 4,
        "records_processed": 500,
        "longest_pause_ms": 1_000,
    }
    assert (members["m01"]["instances"], members["m01"]["rebalances"], members["m01"]["longest_pause_ms"]) == (
        1,
        2,
        2_000,
    )


def test_steps_span_until_the_next_step_or_drain(tables):
    steps = rows_by_key(tables.steps.where("scenario = 'rolling-bounce' and variant = 'legacy'"), "step")
    assert steps[1] == {
        "scenario": "rolling-bounce",
        "variant": "legacy",
        "step": 1,
        "name": "bounce m00",
        "start_ms": 11_800,
        "end_ms": 15_000,
        "assignments": 2,
        "last_assignment_ms": 13_500,
        "time_to_stable_ms": 1_700,
    }
    assert (steps[2]["end_ms"], steps[2]["assignments"], steps[2]["time_to_stable_ms"]) == (DRAIN_MS, 0, 0)


def test_ownership_ends_at_a_drop_a_kill_or_the_end_of_the_window(tables):
    ownership = tables.ownership.where("scenario = 'rolling-bounce' and variant = 'eager'").collect()
    intervals = {(row.partition, row.member, row.instance, row.start_ms, row.end_ms) for row in ownership}
    assert intervals == {
        (0, "m00", "m00#1", 1_000, 12_000),  # killed at 12 000
        (0, "m01", "m01#1", 12_500, END_MS),
        (1, "m01", "m01#1", 1_000, 12_000),  # dropped by the empty assignment
        (1, "m01", "m01#1", 12_500, END_MS),
        (2, "m01", "m01#1", 16_000, END_MS),
    }


def test_read_events_skips_bad_lines_other_schemas_types_and_files(spark, tmp_path):
    good = RunTrace("kill", "eager").runner("phase", MEASURE_MS, phase="measure").events[0]
    lines = [
        json.dumps(good),
        "not json at all",
        json.dumps({**good, "schema": "zkcoord.trace/2"}),
        json.dumps({**good, "type": "legacy.assignment"}),
        json.dumps({**good, "time_ms": "soon"}),
        '{"schema": "zkcoord.trace/1", "type": "compare.phase", "truncated',
        "",
    ]
    (tmp_path / "nested").mkdir()
    (tmp_path / "nested" / "runner.jsonl").write_text("\n".join(lines) + "\n")
    (tmp_path / "notes.json").write_text(json.dumps(good) + "\n")
    direct = tmp_path / "direct.log"
    direct.write_text(json.dumps({**good, "phase": "end"}) + "\n")
    phases = [row.phase for row in read_events(spark, [str(tmp_path), str(direct)]).collect()]
    assert sorted(phases) == ["end", "measure"]


def test_the_old_new_ratio_is_inf_only_when_new_is_0_and_blank_when_both_are():
    assert old_new_ratio(6, 3) == 2.0
    assert old_new_ratio(0, 3) == 0.0
    assert math.isinf(old_new_ratio(4, 0))
    assert old_new_ratio(0, 0) is None
    assert old_new_ratio(None, 3) is None
    summary = [
        {"scenario": "kill", "variant": variant, **dict.fromkeys(METRICS, value)}
        for variant, value in (("legacy", 4), ("eager", 2), ("static", 0))
    ] + [{"scenario": "scale-up", "variant": "eager", **dict.fromkeys(METRICS, 1)}]
    ratios = ratio_rows(summary)
    assert [(row["variant"], row["rebalances"]) for row in ratios] == [("eager", 2.0), ("static", math.inf)]
    table = terminal_table(summary).splitlines()
    assert table[0].split() == [
        "SCENARIO",
        "VARIANT",
        "REBALANCES",
        "PAUSE_MAX_MS",
        "PARTITIONS_MOVED",
        "RECORDS_DUPLICATED",
        "ZK_WRITES",
        "RECORDS_MISSED",
    ]
    static_ratios = next(line for line in table if line.startswith("kill") and "legacy / static" in line)
    assert static_ratios.split()[4:] == ["inf"] * len(HEADLINE_METRICS)


def test_the_terminal_marks_runs_that_did_not_finish_and_gives_them_no_ratio():
    summary = [
        {"scenario": "kill", "variant": variant, **dict.fromkeys(METRICS, value)}
        for variant, value in (("legacy", 4), ("eager", 2), ("static", 1))
    ]
    table = terminal_table(summary, {("kill", "eager")}).splitlines()
    assert table[2].split()[:3] == ["kill", "eager", "(INCOMPLETE)"]
    assert [line.split()[:4] for line in table if " / " in line and line.startswith("kill")] == [
        ["kill", "legacy", "/", "static"]
    ]
    assert table[-1].startswith("(old / new: above 1 the new rebalance did better;")


def test_a_member_by_member_migration_is_divided_by_the_whole_group_stop_of_its_own_members():
    summary = [
        {"scenario": "member-migration", "variant": variant, **dict.fromkeys(METRICS, value)}
        for variant, value in (("whole-group", 6), ("member-by-member", 3), ("rdkafka-member-by-member", 2))
    ]
    ratios = ratio_rows(summary)
    assert [(row["baseline"], row["variant"], row["rebalances"]) for row in ratios] == [
        ("whole-group", "member-by-member", 2.0)
    ]  # librdkafka's migration has no whole-group run of its own members here
    assert "whole-group / member-by-member" in terminal_table(summary)


@settings(max_examples=3)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 30),
            st.lists(st.tuples(st.integers(0, 35), st.integers(1, 8), st.booleans()), max_size=8),
        ),
        min_size=16,
        max_size=16,
    )
)
def test_duplicated_and_missed_records_match_a_count_per_offset(spark, cases):
    events, expected = [], {}
    for number, (end_offset, ranges) in enumerate(cases):
        trace = RunTrace(f"case-{number}", "legacy").runner("phase", MEASURE_MS, phase="measure")
        trace.runner("phase", END_MS, phase="end").runner(
            "produced", END_MS, topic="t", partition=0, end_offset=end_offset
        )
        covered, covered_before = Counter(), Counter()
        for first, length, before in ranges:
            trace.processed("m00#1", MEASURE_MS - 1 if before else MEASURE_MS, 0, first, first + length - 1)
            for offset in range(first, first + length):
                covered[offset] += 1
                covered_before[offset] += before
        duplicated = sum(1 for offset, count in covered.items() if count >= 2 and covered_before[offset] < 2)
        missed = sum(1 for offset in range(end_offset) if covered[offset] == 0)
        expected[trace.scenario] = (duplicated, missed)
        events.extend(trace.events)
    frame = spark.createDataFrame(
        [{field: event.get(field) for field in EVENT_SCHEMA.names} for event in events], EVENT_SCHEMA
    )
    summary = compute(frame).summary.select("scenario", "records_duplicated", "records_missed").collect()
    assert {row.scenario: (row.records_duplicated, row.records_missed) for row in summary} == expected


def test_the_report_page_escapes_names_and_embeds_its_plots():
    run = {**EXPECTED_SUMMARY[("rolling-bounce", "static")], "scenario": "<b>&", "variant": "static"}
    page = render_report(
        summary=[run],
        members=[{"scenario": "<b>&", "variant": "static", "longest_pause_ms": 2_000}],
        steps=[],
        ownership=[
            {"scenario": "<b>&", "variant": "static", "topic": "t", "partition": 0, "member": "m<0>"}
            | {"instance": "m<0>#1", "start_ms": 9_000, "end_ms": 12_000}
        ],
    )
    assert "<h2>&lt;b&gt;&amp;</h2>" in page and "<b>&" not in page and "m<0>" not in page
    assert page.count('src="data:image/png;base64,') == 2


def test_main_exits_1_when_records_were_missed_and_2_on_bad_input(monkeypatch, tmp_path, capsys):
    arguments = ["rebalance-report", "--in", str(tmp_path), "--out", str(tmp_path / "report")]
    rows = [
        {"scenario": "kill", "variant": "legacy", "records_missed": 0},
        {"scenario": "kill", "variant": "eager", "records_missed": 7},
    ]
    monkeypatch.setattr(rebalance_report, "run", lambda in_dir, out_dir, master, driver_memory: rows)
    assert pipeline_main.main(arguments) == 1
    assert capsys.readouterr().err.splitlines() == [
        "records missed: kill/eager: 7 produced records were never processed"
    ]
    rows[1]["records_missed"] = 0
    assert pipeline_main.main(arguments) == 0

    def refuse(in_dir, out_dir, master, driver_memory):
        raise ReportInputError(f"no compare.* events under {in_dir}")

    monkeypatch.setattr(rebalance_report, "run", refuse)
    assert pipeline_main.main(arguments) == 2
    assert (
        capsys.readouterr().err
        == f"python -m zkcoord.pipeline rebalance-report: no compare.* events under {tmp_path}\n"
    )


def test_runs_that_stopped_before_their_end_are_found_with_why(spark, tmp_path):
    interrupted = eager_kill()
    interrupted.events = [event for event in interrupted.events if event.get("phase") != "end"]
    interrupted.runner("phase", 19_000, phase="interrupted", reason="RunFailed: member m01#1 exited (1):")
    root = write_traces(tmp_path, legacy_bounce(), interrupted, legacy_cold_start())
    events = read_events(spark, [os.path.join(root, "traces")])
    assert rebalance_report._check_runs(events, root, console=lambda line: None) == {
        ("rolling-bounce", "eager"): "RunFailed: member m01#1 exited (1):",
        ("cold-start", "legacy"): rebalance_report.UNFINISHED,  # no end phase, and nothing said why
    }


def test_main_exits_1_and_says_so_when_a_run_did_not_finish(monkeypatch, tmp_path, capsys):
    rows = [{"scenario": "kill", "variant": "eager", "records_missed": 0, "incomplete": "interrupted (SIGINT)"}]
    monkeypatch.setattr(rebalance_report, "run", lambda in_dir, out_dir, master, driver_memory: rows)
    assert pipeline_main.main(["rebalance-report", "--in", str(tmp_path), "--out", str(tmp_path / "report")]) == 1
    assert capsys.readouterr().err == (
        "incomplete: kill/eager did not finish (interrupted (SIGINT)); the report flags it\n"
    )


def test_run_refuses_input_without_compare_events_or_with_a_run_made_by_several_commands(spark, tmp_path):
    (tmp_path / "empty" / "traces").mkdir(parents=True)
    (tmp_path / "empty" / "traces" / "x.jsonl").write_text('{"schema": "zkcoord.trace/1", "type": "legacy.closed"}\n')
    with pytest.raises(ReportInputError, match="no compare"):
        run(str(tmp_path / "empty"), str(tmp_path / "out"), console=lambda line: None)
    resumed = static_bounce()  # another command's run, into the same directory: one comparison, widened
    for event in resumed.events:
        event["run"] = "run-2"
    root = write_traces(tmp_path / "widened", eager_kill(), resumed)
    events = read_events(spark, [os.path.join(root, "traces")])
    assert rebalance_report._check_runs(events, root, console=lambda line: None) == {}
    twice = eager_kill()  # the same scenario and variant from two commands: two comparisons mixed up
    for event in twice.events:
        event["run"] = "run-2"
    write_traces(tmp_path / "mixed", eager_kill(), twice)
    with pytest.raises(ReportInputError, match="several runs of rolling-bounce/eager"):
        run(str(tmp_path / "mixed"), str(tmp_path / "out"), console=lambda line: None)
    with pytest.raises(ReportInputError, match="no such directory"):
        run(str(tmp_path / "nowhere"), str(tmp_path / "out"), console=lambda line: None)


def test_local_mode_gives_the_only_executor_a_share_of_the_machines_memory(spark):
    # Spark's 1g default ran out of heap on the benchmark's 10M events.
    memory = spark.sparkContext.getConf().get("spark.driver.memory")
    assert memory == local_driver_memory() and 1 <= int(memory.removesuffix("g")) <= 8


@pytest.mark.soak  # make test: the import contract forbids gevent and kazoo to the jobs; the demo writes a report
def test_the_command_writes_the_report_without_importing_gevent_or_kazoo(tmp_path):
    in_dir = write_traces(tmp_path / "run", legacy_bounce(gap=False), eager_kill())
    out_dir = tmp_path / "report"
    # The child fails if anything imported gevent or kazoo by the time the command finished.
    command = (
        "import runpy, sys\n"
        "sys.argv = ['zkcoord.pipeline', *sys.argv[1:]]\n"
        "try:\n"
        "    runpy.run_module('zkcoord.pipeline', run_name='__main__')\n"
        "finally:\n"
        "    assert not {'gevent', 'kazoo'} & set(sys.modules), 'the pipeline imported gevent or kazoo'\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", command, "rebalance-report", "--in", in_dir, "--out", str(out_dir)],
        capture_output=True,
        text=True,
        timeout=110,
        env=small_jobs_env(),
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    for name in ("summary.parquet", "members.parquet", "steps.parquet"):
        assert (out_dir / name).is_dir()
    page = (out_dir / "report.html").read_text()
    assert all(f"<h2>{title}</h2>" in page for title in ("Rebalances and pauses", "Old ÷ new", "rolling-bounce"))
    assert page.count('src="data:image/png;base64,') == 2  # the one scenario's ownership timelines and pauses
    printed = result.stdout.splitlines()
    assert printed[0] == "starting Spark on local[*]" and printed[-1] == f"report: {out_dir / 'report.html'}"
    assert "legacy ÷ eager" in page
    assert any(line.split()[:3] == ["rolling-bounce", "legacy", "/"] for line in printed)
