"""A member-migration run's figures from its compare.* events, and a JVM member's records as such events (pure)."""

from zkcoord.compare.figures import migration_figures


def event(kind, time_ms, instance=None, **fields):
    return {"type": kind, "time_ms": time_ms, "instance": instance, **fields}


def processed(time_ms, instance, partition, first, last):
    return event(
        "compare.processed", time_ms, instance, topic="t", partition=partition, first_offset=first, last_offset=last
    )


def test_figures_count_double_owners_duplicates_in_the_window_and_the_longest_wait_of_a_partition():
    events = [
        event("compare.assignment", 0, "a#1", partitions=[["t", 0], ["t", 1]]),
        processed(10, "a#1", 0, 0, 9),
        processed(20, "a#1", 0, 0, 4),  # processed twice before the window: not the migration's doing
        event("compare.phase", 100, phase="measure"),
        processed(150, "a#1", 1, 0, 9),
        event("compare.assignment", 200, "b#1", partitions=[["t", 1]]),  # a still owns t-1 until 2000
        processed(1200, "b#1", 1, 8, 12),  # 8 and 9 again
        event("compare.assignment", 2000, "a#1", partitions=[["t", 0]]),
        processed(2100, "a#1", 0, 10, 12),  # t-0 waited 2080 ms since 20
        event("compare.phase", 3000, phase="end"),
        processed(9000, "a#1", 0, 13, 13),  # after the window
    ]
    figures = migration_figures(events)
    assert figures.owned_twice == 1 and figures.violations == 2  # and a#1 went back on t-0 at 20
    assert figures.records_duplicated == 2
    assert figures.longest_pause_ms == 2080


def test_a_jvm_member_s_printed_records_become_runs_of_consecutive_offsets():
    from zkcoord.compare.jvm_member import record_runs

    printed = b"started\nrecord t 0 5 a\nrecord t 0 6 b c\nrecord t 1 6 \nrecord t 0 7 d\nrecord t 0 9 e\nstopped\n"
    assert record_runs(printed) == [("t", 0, 5, 6), ("t", 1, 6, 6), ("t", 0, 7, 7), ("t", 0, 9, 9)]
