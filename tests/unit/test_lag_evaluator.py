"""Burrow's lag evaluation (zkcoord.lag): one constructed window per status, the group rules, the windows built
from polls, and hypothesis properties of the rules (docs/lag.md)."""

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zkcoord.lag import (
    Commit,
    GroupStatus,
    LagWindows,
    PartitionObservation,
    PartitionStatus,
    PartitionWindow,
    WindowConfig,
    evaluate_group,
    group_status,
    partition_status,
    report,
)
from zkcoord.model import TopicPartition

CONFIG = WindowConfig()
MINUTE = 60_000
TP = TopicPartition("orders", 0)


def window(offsets, ends, step_ms=MINUTE) -> PartitionWindow:
    """Commits of ``offsets`` one ``step_ms`` apart from 0, each seen with the log end of the same index."""
    built = PartitionWindow()
    for i, (offset, end) in enumerate(zip(offsets, ends, strict=True)):
        built = built.with_log_end(end, CONFIG).with_commit(offset, i * step_ms, CONFIG)
    return built


def last_ms(w: PartitionWindow) -> int:
    return w.commits[-1].timestamp_ms


# ---- one window per status -------------------------------------------------------------------------------------


def test_caught_up_is_ok_whatever_came_before():
    w = window([10, 10, 10], [50, 60, 10])
    assert partition_status(w, last_ms(w) + 10 * MINUTE, CONFIG) == PartitionStatus.OK


def test_lag_that_grows_while_offsets_advance_is_warn():
    w = window([10, 20, 30, 40], [50, 65, 80, 95])
    assert [c.lag for c in w.commits] == [40, 45, 50, 55]
    assert partition_status(w, last_ms(w), CONFIG) == PartitionStatus.WARN


def test_lag_that_shrinks_once_is_ok():
    w = window([10, 20, 30, 40], [50, 65, 60, 95])
    assert partition_status(w, last_ms(w), CONFIG) == PartitionStatus.OK


def test_commits_of_one_offset_with_lag_are_stall():
    w = window([10, 10, 10], [50, 50, 60])
    assert partition_status(w, last_ms(w), CONFIG) == PartitionStatus.STALL


def test_no_commit_for_longer_than_the_window_spans_is_stop():
    w = window([10, 20, 30], [50, 60, 70])  # spans 2 minutes
    assert partition_status(w, last_ms(w) + 2 * MINUTE, CONFIG) == PartitionStatus.WARN
    assert partition_status(w, last_ms(w) + 2 * MINUTE + 1, CONFIG) == PartitionStatus.STOP


def test_stop_waits_while_a_log_end_of_the_window_was_reached():
    w = window([10, 20, 30], [30, 60, 70])  # the first log end (30) is the last commit: caught up recently
    assert partition_status(w, last_ms(w) + 10 * MINUTE, CONFIG) != PartitionStatus.STOP


def test_an_offset_lower_than_the_one_before_is_rewind_until_it_is_passed_again():
    w = window([100, 120, 40], [200, 200, 200])
    assert partition_status(w, last_ms(w), CONFIG) == PartitionStatus.REWIND
    recovered = w.with_log_end(200, CONFIG).with_commit(130, last_ms(w) + MINUTE, CONFIG)
    assert partition_status(recovered, last_ms(recovered), CONFIG) == PartitionStatus.OK


def test_one_commit_shows_no_trend_but_can_stop():
    w = window([10], [50])
    assert partition_status(w, last_ms(w), CONFIG) == PartitionStatus.OK
    assert partition_status(w, last_ms(w) + 1, CONFIG) == PartitionStatus.STOP


def test_allowed_lag_counts_as_none():
    w = window([10, 10, 10], [15, 15, 15])
    assert partition_status(w, last_ms(w), CONFIG) == PartitionStatus.STALL
    assert partition_status(w, last_ms(w), WindowConfig(allowed_lag=5)) == PartitionStatus.OK


# ---- the window -------------------------------------------------------------------------------------------------


def test_the_window_keeps_the_newest_intervals_commits():
    w = window(list(range(15)), [100] * 15)
    assert [c.offset for c in w.commits] == list(range(5, 15))
    assert len(w.log_ends) == 10


def test_a_commit_within_min_distance_replaces_the_previous_and_keeps_its_time():
    config = WindowConfig(min_distance_ms=MINUTE)
    w = PartitionWindow().with_commit(10, 0, config).with_commit(20, MINUTE - 1, config)
    assert w.commits == (Commit(20, 0, 0),)
    assert w.with_commit(30, MINUTE, config).commits[-1].timestamp_ms == MINUTE


# ---- groups -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("statuses", "expected"),
    [
        ([], GroupStatus.OK),
        ([PartitionStatus.OK, PartitionStatus.OK], GroupStatus.OK),
        ([PartitionStatus.OK, PartitionStatus.WARN], GroupStatus.WARN),
        ([PartitionStatus.WARN, PartitionStatus.STOP], GroupStatus.ERR),
        ([PartitionStatus.STALL], GroupStatus.ERR),
        ([PartitionStatus.REWIND, PartitionStatus.OK], GroupStatus.ERR),
    ],
)
def test_the_group_is_its_worst_partition_with_stop_stall_rewind_as_err(statuses, expected):
    assert group_status(statuses) == expected


def test_an_unknown_group_and_one_whose_commits_expired_are_notfound():
    assert evaluate_group("g", None, 0, CONFIG).status == GroupStatus.NOTFOUND
    config = WindowConfig(expire_group_ms=10 * MINUTE)
    windows = {TP: window([10, 20], [30, 40])}
    assert evaluate_group("g", windows, 10 * MINUTE, config).status != GroupStatus.NOTFOUND
    assert evaluate_group("g", windows, 11 * MINUTE + 1, config).status == GroupStatus.NOTFOUND


def test_a_live_group_never_ages_out_the_commits_of_a_partition_nobody_commits():
    config = WindowConfig(expire_group_ms=10 * MINUTE)
    windows = LagWindows(config)
    orphaned = TopicPartition("old", 0)
    for minute in range(20):
        windows.observe(
            "g",
            {
                TP: PartitionObservation(100 * minute, 100 * minute, owned=True),
                orphaned: PartitionObservation(5, 1000 + minute, owned=False),
            },
            minute * MINUTE,
        )
    lag = windows.evaluate("g", 19 * MINUTE)
    old = next(p for p in lag.partitions if p.partition == orphaned)
    assert (old.status, old.current_lag, old.end) == (PartitionStatus.STOP, 1014, Commit(5, 995, 0))
    assert lag.status == GroupStatus.ERR


def test_a_poll_is_a_commit_when_the_offset_moved_or_a_live_member_owns_the_partition():
    windows = LagWindows()
    for minute, (offset, owned) in enumerate([(10, False), (10, False), (10, True), (12, False), (12, False)]):
        windows.observe("g", {TP: PartitionObservation(offset, 50, owned)}, minute * MINUTE)
    lag = windows.evaluate("g", 4 * MINUTE)
    assert (lag.partitions[0].start, lag.partitions[0].end) == (Commit(10, 40, 0), Commit(12, 38, 3 * MINUTE))
    assert lag.partitions[0].complete == 0.3
    windows.observe("g", None, 5 * MINUTE)
    assert windows.evaluate("g", 5 * MINUTE).status == GroupStatus.NOTFOUND


@pytest.mark.parametrize(("watch_s", "first_commit_s"), [(30, 45), (5, 1)])
def test_observations_between_the_commits_of_a_healthy_member_add_none(watch_s, first_commit_s):
    """A member catching up (150 records/s consumed, 100 produced) that commits every minute, watched more often:
    once its window holds two commits a minute apart (before, one commit is STOP as in Burrow), it is OK."""
    windows = LagWindows()
    statuses = set()
    for now_s in range(0, 4 * 60, watch_s):
        committed_at = first_commit_s + (now_s - first_commit_s) // 60 * 60 if now_s >= first_commit_s else 0
        windows.observe(
            "g", {TP: PartitionObservation(1000 + 150 * committed_at, 100_000 + 100 * now_s, True)}, now_s * 1000
        )
        if now_s >= 2 * 60:
            statuses.add(windows.evaluate("g", now_s * 1000).partitions[0].status)
    assert statuses == {PartitionStatus.OK}


def test_a_live_member_that_does_not_move_commits_once_per_commit_interval():
    windows = LagWindows(WindowConfig(commit_interval_ms=MINUTE))
    for second in range(0, 121, 20):
        windows.observe("g", {TP: PartitionObservation(10, 50, True)}, second * 1000)
    lag = windows.evaluate("g", 120_000)
    assert [c.timestamp_ms for c in windows._groups["g"][TP].commits] == [0, MINUTE, 2 * MINUTE]
    assert lag.partitions[0].status == PartitionStatus.STALL


def test_a_store_that_says_when_it_was_written_decides_what_is_a_commit():
    windows = LagWindows(WindowConfig(commit_interval_ms=MINUTE))
    for minute, write_id in enumerate([7, 7, 7, 8]):  # a live owner that wrote its unchanged offset once more
        windows.observe("g", {TP: PartitionObservation(10, 50, True, write_id)}, minute * MINUTE)
    assert [c.timestamp_ms for c in windows._groups["g"][TP].commits] == [0, 3 * MINUTE]
    again = LagWindows.from_json(windows.to_json(), windows.config)
    again.observe("g", {TP: PartitionObservation(10, 50, True, 8)}, 9 * MINUTE)
    assert again.evaluate("g", 9 * MINUTE).partitions[0].status == PartitionStatus.STOP


def test_a_commit_seen_without_a_log_end_is_dropped_and_its_lag_unknown():
    windows = LagWindows()
    windows.observe("g", {TP: PartitionObservation(10, 50, True)}, 0)
    windows.observe("g", {TP: PartitionObservation(20, None, True)}, MINUTE)
    lag = windows.evaluate("g", MINUTE)
    assert (lag.partitions[0].end, lag.partitions[0].log_end) == (Commit(10, 40, 0), None)
    assert report.table_rows(lag) == [("g", "orders", 0, 10, "-", "-", "STOP")]
    windows.observe("g", {TP: PartitionObservation(20, 60, True)}, 2 * MINUTE)
    assert windows.evaluate("g", 2 * MINUTE).partitions[0].end == Commit(20, 40, 2 * MINUTE)


def test_groups_no_longer_listed_are_forgotten_and_one_created_again_starts_anew():
    windows = LagWindows()
    windows.observe("g", {TP: PartitionObservation(5000, 5000, True)}, 0, on_coordinator=True)
    windows.observe("other", {TP: PartitionObservation(1, 1, True)}, 0)
    assert windows.coordinator_groups(0) == {"g"}
    windows.retain(["other"])
    assert (windows.coordinator_groups(0), windows.evaluate("g", 0).status) == (set(), GroupStatus.NOTFOUND)
    windows.observe("g", {TP: PartitionObservation(0, 5100, True)}, MINUTE)
    assert windows.evaluate("g", MINUTE).partitions[0].start == Commit(0, 5100, MINUTE)
    assert set(windows.to_json()["groups"]) == {"g", "other"}


def test_a_coordinator_group_is_remembered_until_it_expires():
    windows = LagWindows(WindowConfig(expire_group_ms=10 * MINUTE))
    windows.observe("g", {TP: PartitionObservation(5, 5, False)}, 0, on_coordinator=True)
    again = LagWindows.from_json(windows.to_json(), windows.config)
    assert (again.coordinator_groups(10 * MINUTE), again.coordinator_groups(11 * MINUTE)) == ({"g"}, set())


def test_the_state_goes_through_json_unchanged():
    windows = LagWindows()
    for minute, offset in enumerate([10, 10, 20, 5]):
        windows.observe("g", {TP: PartitionObservation(offset, 60 + minute, True)}, minute * MINUTE)
    again = LagWindows.from_json(windows.to_json())
    assert again.evaluate("g", 9 * MINUTE) == windows.evaluate("g", 9 * MINUTE)
    with pytest.raises(ValueError, match="not a lag state"):
        LagWindows.from_json({"version": 1, "groups": {"g": [{"topic": "t"}]}})


# ---- properties -------------------------------------------------------------------------------------------------

offsets = st.integers(min_value=0, max_value=1_000)
histories = st.lists(st.tuples(offsets, st.integers(0, 200), st.integers(1, 5 * MINUTE)), min_size=1, max_size=25)


def built(history, config=CONFIG) -> PartitionWindow:
    """Commits of ``history`` ((offset, lead of the log end over it, time since the previous commit))."""
    w, now = PartitionWindow(), 0
    for offset, lead, gap in history:
        now += gap
        w = w.with_log_end(offset + lead, config).with_commit(offset, now, config)
    return w


@given(histories, st.integers(0, 10 * MINUTE))
def test_no_current_lag_is_always_ok(history, wait):
    w = built(history)
    w = w.with_log_end(w.commits[-1].offset, CONFIG)
    assert partition_status(w, last_ms(w) + wait, CONFIG) == PartitionStatus.OK


@given(histories)
def test_right_after_a_commit_nothing_is_stopped(history):
    w = built(history)
    assert partition_status(w, last_ms(w), CONFIG) != PartitionStatus.STOP


@given(histories, st.integers(0, 10 * MINUTE), st.integers(-(10**12), 10**12))
def test_only_the_time_between_commits_matters(history, wait, shift):
    w = built(history)
    moved = PartitionWindow(tuple(Commit(c.offset, c.lag, c.timestamp_ms + shift) for c in w.commits), w.log_ends)
    assert partition_status(moved, last_ms(w) + wait + shift, CONFIG) == partition_status(w, last_ms(w) + wait, CONFIG)


@given(histories, st.integers(0, 10 * MINUTE))
def test_a_window_that_never_goes_back_is_never_rewind(history, wait):
    rising = sorted(history, key=lambda h: h[0])
    w = built(rising)
    assert partition_status(w, last_ms(w) + wait, CONFIG) != PartitionStatus.REWIND


@given(histories, st.integers(0, 10 * MINUTE))
def test_a_window_with_a_caught_up_commit_is_never_stall_or_warn(history, wait):
    w = built([*history[:-1], (history[-1][0], 0, history[-1][2])])
    w = w.with_log_end(w.commits[-1].offset + 1, CONFIG)
    assert partition_status(w, last_ms(w) + wait, CONFIG) not in (PartitionStatus.STALL, PartitionStatus.WARN)


@given(histories, st.integers(1, 12), st.integers(0, 3 * MINUTE))
def test_the_window_is_bounded_and_spaced_by_min_distance(history, intervals, min_distance):
    config = WindowConfig(intervals=intervals, min_distance_ms=min_distance)
    w = built(history, config)
    assert len(w.commits) <= intervals and len(w.log_ends) <= intervals
    assert all(b.timestamp_ms - a.timestamp_ms >= min_distance for a, b in zip(w.commits, w.commits[1:], strict=False))
    assert w.commits[-1].offset == history[-1][0]


@given(st.lists(histories, min_size=1, max_size=4), st.integers(0, 10 * MINUTE))
def test_the_group_status_follows_its_partitions(per_partition, wait):
    windows = {TopicPartition("t", i): built(h) for i, h in enumerate(per_partition)}
    now = max(last_ms(w) for w in windows.values()) + wait
    lag = evaluate_group("g", windows, now, CONFIG)
    statuses = {p.status for p in lag.partitions}
    if statuses & {PartitionStatus.STOP, PartitionStatus.STALL, PartitionStatus.REWIND}:
        assert lag.status == GroupStatus.ERR
    elif PartitionStatus.WARN in statuses:
        assert lag.status == GroupStatus.WARN
    else:
        assert lag.status == GroupStatus.OK
    assert lag.total_lag == sum(p.current_lag for p in lag.partitions)


# ---- what is shown ----------------------------------------------------------------------------------------------


def test_burrows_json_and_kafka_exporters_metrics_of_an_evaluation():
    windows = {TP: window([10, 10], [50, 50]), TopicPartition("orders", 1): window([5, 9], [9, 9])}
    lag = dataclasses.replace(evaluate_group("g", windows, MINUTE, CONFIG), members=2)
    document = report.group_json("local", lag, show_all=False)
    assert (document["status"], document["totallag"], document["complete"]) == ("ERR", 40, 0.0)
    assert [(p["partition"], p["status"], p["current_lag"]) for p in document["partitions"]] == [(0, "STALL", 40)]
    assert document["maxlag"]["end"] == {"offset": 10, "timestamp": MINUTE, "lag": 40}
    samples = {
        (family.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in report.metric_families([lag])
        for sample in family.samples
    }
    assert samples[("kafka_consumergroup_lag", (("consumergroup", "g"), ("partition", "0"), ("topic", "orders")))] == 40
    assert samples[("kafka_consumergroup_lag_sum", (("consumergroup", "g"), ("topic", "orders")))] == 40
    assert samples[("zkcoord_consumergroup_status", (("consumergroup", "g"), ("status", "ERR")))] == 1
    assert samples[("kafka_consumergroup_current_offset_sum", (("consumergroup", "g"), ("topic", "orders")))] == 19
    assert samples[("kafka_consumergroup_members", (("consumergroup", "g"),))] == 2
