"""The history checker: clean histories pass, planted violations are caught, recovery is measured."""

from hypothesis import given
from hypothesis import strategies as st

from zkcoord.compare.history import check_history, summary_table
from zkcoord.model import TopicPartition

T0 = TopicPartition("t", 0)


def assigned(instance, time_ms, *partitions):
    return {"type": "compare.assignment", "instance": instance, "time_ms": time_ms, "partitions": list(partitions)}


def processed(instance, time_ms, first, last, partition=0):
    return {
        "type": "compare.processed",
        "instance": instance,
        "time_ms": time_ms,
        "topic": "t",
        "partition": partition,
        "first_offset": first,
        "last_offset": last,
    }


def committed(instance, time_ms, offset, error=None, partition=0):
    return {
        "type": "compare.committed",
        "instance": instance,
        "time_ms": time_ms,
        "offsets": [["t", partition, offset]],
        "error": error,
    }


def produced(time_ms, end_offset, partition=0):
    return {
        "type": "compare.produced",
        "instance": None,
        "time_ms": time_ms,
        "topic": "t",
        "partition": partition,
        "end_offset": end_offset,
    }


def member(instance, time_ms, event):
    return {"type": "compare.member", "instance": instance, "time_ms": time_ms, "event": event}


def fault(kind, time_ms, event, target="a#1"):
    return {
        "type": "compare.fault",
        "instance": None,
        "time_ms": time_ms,
        "fault": kind,
        "target": target,
        "event": event,
    }


def handover():
    """a reads 0..9 and commits 10, hands t-0 over to b, which goes on from 10 to the end."""
    return [
        assigned("a#1", 1000, ["t", 0]),
        processed("a#1", 1100, 0, 4),
        processed("a#1", 1200, 5, 9),
        committed("a#1", 1300, 10),
        assigned("a#1", 2000),
        assigned("b#1", 2100, ["t", 0]),
        processed("b#1", 2200, 10, 19),
        committed("b#1", 2300, 20),
        produced(2400, 20),
    ]


def kinds(report):
    return [(v.kind, v.partition) for v in report.violations]


def test_a_clean_handover_passes():
    report = check_history(handover())
    assert report.violations == []
    assert (report.acknowledged_commits, report.lost, report.regressions, report.missed) == (2, 0, 0, 0)
    assert report.duplicates == 0 and report.max_duplicates == {T0: 0}


def test_events_are_read_in_time_order_whatever_the_file_order():
    assert check_history(list(reversed(handover()))).violations == []


def test_two_owners_at_once_is_a_violation():
    events = [*handover(), assigned("c#1", 1500, ["t", 0])]
    report = check_history(events)
    assert ("double-owner", T0) in kinds(report)
    assert any("a#1 and c#1" in v.detail for v in report.violations)


def test_an_overlap_within_the_handover_slack_is_not_a_violation():
    events = [e | {"time_ms": 1950} if e == assigned("b#1", 2100, ["t", 0]) else e for e in handover()]
    assert check_history(events, handover_slack_ms=100).violations == []
    assert kinds(check_history(events, handover_slack_ms=20)) == [("double-owner", T0)]


def test_a_killed_instance_owns_nothing_from_its_kill_though_it_never_said_so():
    events = [
        assigned("a#1", 1000, ["t", 0]),
        processed("a#1", 1100, 0, 9),
        member("a#1", 1500, "killed"),
        assigned("b#1", 7000, ["t", 0]),
        processed("b#1", 7100, 10, 19),
        produced(8000, 20),
    ]
    assert check_history(events).violations == []
    assert ("double-owner", T0) in kinds(check_history([e for e in events if e["type"] != "compare.member"]))


def test_a_paused_instance_owns_again_from_its_resumption_until_it_gives_up():
    events = [
        assigned("a#1", 1000, ["t", 0]),
        member("a#1", 1500, "paused"),
        assigned("b#1", 7000, ["t", 0]),
        member("a#1", 9000, "resumed"),
        assigned("a#1", 9500),
    ]
    (violation,) = check_history(events).violations
    assert violation.kind == "double-owner" and "500 ms" in violation.detail and violation.time_ms == 9000


def test_a_paused_instance_that_gives_up_as_it_resumes_never_owned_twice():
    """The runner stamps ``resumed`` after SIGCONT: the member's release may be stamped first."""
    events = [
        assigned("a#1", 1000, ["t", 0]),
        member("a#1", 1500, "paused"),
        assigned("b#1", 7000, ["t", 0]),
        assigned("a#1", 8999),
        member("a#1", 9000, "resumed"),
    ]
    assert check_history(events).violations == []


def test_a_reader_starting_below_an_acknowledged_commit_lost_it():
    events = [e | {"first_offset": 6} if e == processed("b#1", 2200, 10, 19) else e for e in handover()]
    report = check_history(events)
    assert report.lost == 1
    (lost,) = [v for v in report.violations if v.kind == "lost-commit"]
    assert lost.partition == T0 and "b#1 started at 6 below the acknowledged 10" in lost.detail


def test_an_instance_that_sets_its_own_commit_back_loses_nothing():
    """librdkafka retries an auto-commit refused with NOT_COORDINATOR after the newer commit of its revocation."""
    events = [
        assigned("a#1", 1000, ["t", 0]),
        processed("a#1", 1100, 0, 14),
        committed("a#1", 1300, 15),
        committed("a#1", 1350, 10),
        assigned("a#1", 2000),
        assigned("b#1", 2100, ["t", 0]),
        processed("b#1", 2200, 10, 19),
        produced(2400, 20),
    ]
    report = check_history(events)
    assert report.violations == [] and report.duplicates == 5


def test_another_instance_setting_a_commit_back_does_not_excuse_the_next_reader():
    events = [
        assigned("a#1", 1000, ["t", 0]),
        processed("a#1", 1100, 0, 14),
        committed("a#1", 1300, 15),
        committed("z#1", 1350, 10),
        assigned("a#1", 2000),
        assigned("b#1", 2100, ["t", 0]),
        processed("b#1", 2200, 10, 19),
        produced(2400, 20),
    ]
    assert kinds(check_history(events)) == [("lost-commit", T0)]


def test_a_failed_commit_is_not_acknowledged():
    events = [
        e | {"error": "NotCoordinator"}
        if e == committed("a#1", 1300, 10)
        else e | {"first_offset": 5}
        if e == processed("b#1", 2200, 10, 19)
        else e
        for e in handover()
    ]
    report = check_history(events)
    assert report.lost == 0 and report.acknowledged_commits == 1
    assert report.duplicates == 5 and report.max_duplicates == {T0: 1}


def test_processing_going_backwards_within_one_ownership_is_a_regression():
    events = [*handover(), processed("b#1", 2250, 15, 17)]
    report = check_history(events)
    assert report.regressions == 1 and kinds(report) == [("regression", T0)]
    assert report.duplicates == 3


def test_a_new_ownership_may_reread_what_the_last_one_did_not_commit():
    events = [
        assigned("a#1", 1000, ["t", 0]),
        processed("a#1", 1100, 0, 9),
        assigned("a#1", 2000),
        assigned("a#1", 3000, ["t", 0]),
        processed("a#1", 3100, 0, 9),
        produced(4000, 10),
    ]
    report = check_history(events)
    assert report.violations == [] and report.duplicates == 10 and report.max_duplicates == {T0: 1}


def test_a_produced_record_nobody_processed_is_missed():
    events = [e for e in handover() if e != processed("a#1", 1100, 0, 4)]
    report = check_history(events)
    assert report.missed == 5
    (missed,) = report.violations
    assert missed.kind == "missed" and "records 0..4" in missed.detail


def test_recovery_runs_from_the_last_heal_to_every_partition_processed_by_its_one_owner():
    events = [
        assigned("a#1", 1000, ["t", 0], ["t", 1]),
        fault("pause", 1500, "injected"),
        member("a#1", 1500, "paused"),
        fault("pause", 2000, "healed"),
        member("a#1", 2000, "resumed"),
        processed("a#1", 2300, 0, 3, partition=1),
        processed("a#1", 2600, 0, 3, partition=0),
        fault("partition", 3000, "injected"),
        fault("partition", 3500, "healed"),
        processed("a#1", 3600, 4, 5, partition=0),
    ]
    report = check_history(events)
    assert report.recovery_ms == {"pause": 600, "partition": None}  # t-1 was never processed after 3500
    assert report.faults_injected == {"pause": 1, "partition": 1}


def test_recovery_waits_for_exclusive_ownership():
    events = [
        assigned("a#1", 1000, ["t", 0]),
        fault("kill", 1500, "injected"),
        fault("kill", 1600, "healed"),
        assigned("b#1", 1700, ["t", 0]),
        processed("b#1", 1800, 0, 0),  # a#1 still holds t-0
        assigned("a#1", 1900),
        processed("b#1", 2000, 1, 1),
    ]
    assert check_history(events, handover_slack_ms=500).recovery_ms == {"kill": 400}


def test_the_summary_aggregates_runs_per_fault_kind():
    clean = check_history([*handover(), fault("kill", 1400, "injected"), fault("kill", 1500, "healed")])
    lost = check_history(
        [e | {"first_offset": 6} if e == processed("b#1", 2200, 10, 19) else e for e in handover()]
        + [fault("kill", 1400, "injected"), fault("kill", 1450, "healed")]
    )
    quiet = check_history(handover())
    lines = summary_table([clean, lost, quiet]).splitlines()
    assert lines[0].split()[:4] == ["fault", "runs", "injected", "violations"]
    assert lines[1].split() == ["kill", "2", "2", "1", "1", "750"]  # the rereading of 6..9 is no violation
    assert lines[2].split() == ["none", "1", "0", "0", "0", "-"]


@given(st.lists(st.tuples(st.integers(1, 5), st.booleans()), min_size=1, max_size=30))
def test_any_chain_of_clean_handovers_passes(batches):
    """Owners take turns; each commits what it read and the next starts there, rereading only uncommitted."""
    events, offset, time_ms = [], 0, 0
    for turn, (size, commits) in enumerate(batches):
        owner = f"m{turn % 3}#{turn}"
        events += [assigned(owner, time_ms + 10, ["t", 0]), processed(owner, time_ms + 20, offset, offset + size - 1)]
        offset += size
        if commits:
            events.append(committed(owner, time_ms + 30, offset))
        events += [assigned(owner, time_ms + 40)]
        time_ms += 1000
    report = check_history([*events, produced(time_ms, offset)])
    assert report.violations == [] and report.missed == 0
