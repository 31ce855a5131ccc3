"""The VerifiableConsumer checker on small hand-made traces: clean runs pass, each broken invariant is found."""

import json

from zkcoord.model import TopicPartition
from zkcoord.testing.legacy import ownership_overlaps
from zkcoord.testing.verifiable import (
    CommitAhead,
    Gap,
    Overlap,
    Unconsumed,
    UnownedConsumption,
    assignments,
    check_group,
    read_traces,
    rebalance_transitions,
)
from zkcoord.trace import make_event

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def assigned(member, moment, *partitions, generation=1):
    return make_event(
        "client.assignment",
        int(moment * 1000),
        "g",
        member,
        assignment={member: [list(tp) for tp in partitions]},
        generation=generation,
        member_id=f"{member}-id",
        monotonic_before=moment,
        monotonic_after=moment + 0.001,
    )


def consumed(member, moment, tp, first, last):
    return make_event(
        "client.consumed",
        int(moment * 1000),
        "g",
        member,
        topic=tp.topic,
        partition=tp.partition,
        first_offset=first,
        last_offset=last,
        monotonic=moment,
    )


def committed(member, moment, tp, offset, error=None):
    return make_event(
        "client.committed", int(moment * 1000), "g", member, offsets=[[tp.topic, tp.partition, offset]], error=error
    )


def state(member, time_ms, to, previous="STABLE", generation=1):
    return make_event(
        "client.state", time_ms, "g", member, state=to, previous=previous, generation=generation, member_id=member
    )


def handover(end=10):
    """a owns t-0 and consumes 0..5, commits 6, hands over; b starts at 6, commits 6 first, consumes to the end."""
    return [
        assigned("a", 1.0, T0),
        consumed("a", 1.1, T0, 0, 2),
        consumed("a", 1.2, T0, 3, 5),
        committed("a", 1.3, T0, 6),
        assigned("a", 2.0),
        assigned("b", 2.5, T0, generation=2),
        committed("b", 2.6, T0, 6),  # auto-commit of the start position, before b consumed anything
        consumed("b", 2.7, T0, 6, end - 1),
        committed("b", 2.8, T0, end),
    ]


def test_a_clean_handover_passes():
    report = check_group(handover(), {T0: 10})
    assert report.ok, report.summary()
    assert (report.expected_records, report.consumed_records, report.distinct_records) == (10, 10, 10)
    assert report.duplicates == 0
    assert report.commits == 3
    assert report.members == ("a", "b")
    assert report.generations == (1, 2)


def test_a_commit_past_the_position_is_found():
    events = [assigned("a", 1.0, T0), consumed("a", 1.1, T0, 0, 4), committed("a", 1.2, T0, 7)]
    report = check_group(events, {T0: 5})
    assert report.commit_violations == (CommitAhead("a", T0, 7, 5, 1200),)
    assert not report.ok
    assert "a committed t-0@7 ahead of its position 5" in report.summary()


def test_a_commit_before_consuming_may_not_pass_where_anybody_had_reached():
    events = handover()
    events[6] = committed("b", 2.6, T0, 8)  # b claims 8 before consuming; a had reached 6
    report = check_group(events, {T0: 10})
    assert [(v.member, v.committed, v.position) for v in report.commit_violations] == [("b", 8, 6)]


def test_a_commit_before_consuming_is_bounded_by_what_was_consumed_before_it_not_after():
    # b commits 10 before anybody consumed past 5, a consumes 6..9 later: still ahead.
    events = [
        assigned("a", 1.0, T0),
        consumed("a", 1.1, T0, 0, 5),
        assigned("a", 1.5),
        assigned("b", 2.0, T0),
        committed("b", 2.1, T0, 10),
        assigned("b", 2.2),
        assigned("a", 3.0, T0),
        consumed("a", 3.1, T0, 6, 9),
    ]
    report = check_group(events, {T0: 10})
    assert [(v.member, v.committed, v.position) for v in report.commit_violations] == [("b", 10, 6)]


def test_failed_commits_are_counted_not_checked():
    events = [assigned("a", 1.0, T0), consumed("a", 1.1, T0, 0, 4), committed("a", 1.2, T0, 99, error="Rebalance")]
    report = check_group(events, {T0: 5})
    assert report.ok
    assert (report.commits, report.failed_commits) == (0, 1)


def test_a_hole_in_consumption_is_a_gap():
    events = [assigned("a", 1.0, T0), consumed("a", 1.1, T0, 0, 3), consumed("a", 1.2, T0, 6, 9)]
    report = check_group(events, {T0: 10})
    assert report.gaps == (Gap(T0, 4, 5),)
    assert report.unconsumed == ()
    assert report.distinct_records == 8
    assert "t-0: offsets 4..5 never consumed" in report.summary()


def test_a_missing_tail_and_an_unread_partition_are_unconsumed():
    events = [assigned("a", 1.0, T0, T1), consumed("a", 1.1, T0, 0, 6)]
    report = check_group(events, {T0: 10, T1: 3})
    assert report.unconsumed == (Unconsumed(T0, 7, 10), Unconsumed(T1, 0, 3))
    assert report.gaps == ()
    assert report.expected_records == 13


def test_start_offsets_move_the_beginning():
    events = [assigned("a", 1.0, T0), consumed("a", 1.1, T0, 5, 9)]
    assert check_group(events, {T0: 10}, start_offsets={T0: 5}).ok
    assert check_group(events, {T0: 10}).gaps == (Gap(T0, 0, 4),)


def test_duplicates_are_counted_and_reported_but_not_failed():
    events = handover()
    # a was slow to commit: b starts again at 4 and re-reads 4 and 5
    events[5:] = [
        assigned("b", 2.5, T0, generation=2),
        consumed("b", 2.7, T0, 4, 9),
        committed("b", 2.8, T0, 10),
    ]
    events[3] = committed("a", 1.3, T0, 4)
    report = check_group(events, {T0: 10, T1: 0})
    assert report.ok, report.summary()
    assert report.duplicates == 2
    assert report.duplicates_by_partition == {T0: 2, T1: 0}
    assert report.consumed_records == 12 and report.distinct_records == 10
    assert "duplicates 2 in 1 partitions (most: t-0:2)" in report.summary()


def test_two_owners_at_once_overlap():
    events = [
        assigned("a", 1.0, T0),
        consumed("a", 1.1, T0, 0, 4),
        assigned("b", 1.5, T0),  # before a let go
        consumed("b", 1.6, T0, 5, 9),
        assigned("a", 2.0),
    ]
    report = check_group(events, {T0: 10})
    assert report.overlaps == (Overlap(T0, "a", "b"),)
    assert "t-0 owned by a and b at the same time" in report.summary()


def test_a_killed_members_ownership_ends_at_its_kill():
    # a dies owning t-0 (its trace ends there); b gets it after the session timeout
    events = [
        assigned("a", 1.0, T0),
        consumed("a", 1.1, T0, 0, 4),
        assigned("b", 5.0, T0),
        consumed("b", 5.1, T0, 5, 9),
    ]
    assert check_group(events, {T0: 10}).overlaps == (Overlap(T0, "a", "b"),)  # without the kill: forever
    assert check_group(events, {T0: 10}, killed={"a": 2.0}).ok
    # killed after b took over: a real overlap
    assert check_group(events, {T0: 10}, killed={"a": 6.0}).overlaps == (Overlap(T0, "a", "b"),)


def test_consuming_a_partition_not_owned_is_found():
    events = [assigned("a", 1.0, T0), consumed("a", 1.1, T0, 0, 9), consumed("a", 1.2, T1, 0, 2)]
    report = check_group(events, {T0: 10, T1: 3})
    assert report.unowned_consumption == (UnownedConsumption("a", T1, 0, 2),)


def test_the_legacy_checker_reads_client_and_legacy_assignments_alike():
    legacy = {
        "type": "legacy.assignment",
        "member": "c",
        "assignment": {"c-0": [["t", 0]]},
        "monotonic_before": 1.2,
        "monotonic_after": 1.201,
    }
    events = [assigned("a", 1.0, T0), legacy, assigned("a", 2.0)]
    assert ownership_overlaps(events) == [(T0, "a", "c")]
    assert ownership_overlaps(events, killed={"c": 1.5}) == [(T0, "a", "c")]
    assert ownership_overlaps([assigned("a", 1.0, T0), assigned("a", 2.0), legacy | {"monotonic_before": 2.5}]) == []


def test_read_traces_skips_a_torn_last_line(tmp_path):
    whole = tmp_path / "a.jsonl"
    torn = tmp_path / "b.jsonl"
    whole.write_text("".join(json.dumps(e) + "\n" for e in handover()[:5]))
    line = json.dumps(assigned("b", 2.5, T0))
    torn.write_text(line + "\n" + line[: len(line) // 2])
    events, skipped = read_traces([whole, torn])
    assert len(events) == 6 and skipped == 1
    assert [e["member"] for e in events] == ["a"] * 5 + ["b"]


def test_rebalance_transitions_and_assignment_history():
    events = [
        state("a", 100, "PREPARING_REBALANCE", previous="UNJOINED"),
        state("a", 200, "PREPARE_REVOCATION"),
        state("b", 250, "PREPARE_REVOCATION"),
        state("a", 300, "STABLE", previous="ASSIGNING_PARTITIONS"),
        *handover(),
    ]
    assert [e["time_ms"] for e in rebalance_transitions(events, ["a"], 150, 1000)] == [200]
    assert check_group(events, {T0: 10}).joins == 1
    history = assignments(events)
    assert [owned for _, _, owned in history["a"]] == [frozenset({T0}), frozenset()]
    assert history["b"] == [(2.501, 2, frozenset({T0}))]


def test_lost_partitions_have_no_generation():
    events = [*handover(), assigned("b", 3.0, generation=-1)]  # b lost t-0 (UNKNOWN_MEMBER_ID)
    assert check_group(events, {T0: 10}).generations == (1, 2)
