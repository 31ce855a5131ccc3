"""The pure migration core: phase order, the stored state's codec, regressions, and the runner's plans."""

import json
import textwrap

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zkcoord.migration.phases import (
    LOG,
    MAX,
    RULES,
    ZK,
    Comparison,
    GroupFacts,
    KafkaCopy,
    LegacyMember,
    MigrationState,
    MigrationStateError,
    NodeAck,
    Phase,
    compare,
    compare_stores,
    decode_state,
    encode_state,
    members_behind,
    not_acknowledged,
    read_offset,
    regressions,
)
from zkcoord.migration.runner import DOWN, UP, ZERO, MigrationError, Runner, load_steps

STEPS = load_steps(opt_in=True)
NAMES = [step.name for step in STEPS]


def test_the_shipped_steps_walk_the_phases_in_order():
    assert NAMES == ["0001_dual_commit", "0002_backfill_log", "0003_read_from_log", "0004_stop_zk_commits",
                     "0005_copy_to_kafka"]  # fmt: skip
    assert [step.phase for step in STEPS] == [
        Phase.DUAL_WRITE, Phase.DUAL_WRITE, Phase.LOG_PRIMARY, Phase.LOG_ONLY, Phase.LOG_ONLY,
    ]  # fmt: skip
    assert [step.opt_in for step in STEPS] == [False, False, False, False, True]  # the copy to Kafka changes no phase
    assert [step.name for step in load_steps()] == NAMES[:4]  # a program walking every step stays on zkcoord
    assert all(step.description and not step.description.endswith(":") for step in STEPS)


@pytest.mark.parametrize("start", list(Phase))
@pytest.mark.parametrize("target", list(Phase))
def test_phases_change_one_at_a_time_and_every_change_bumps_the_epoch(start, target):
    """style.md: migration has no skipped phase."""
    state = MigrationState(phase=start, epoch=4)
    if start == target:
        assert state.with_phase(target, 1) is state
    elif abs(start - target) == 1:
        changed = state.with_phase(target, 1)
        assert (changed.phase, changed.epoch, changed.updated_ms) == (target, 5, 1)
    else:
        with pytest.raises(MigrationStateError, match="one at a time"):
            state.with_phase(target, 1)


states = st.builds(
    MigrationState,
    phase=st.sampled_from(list(Phase)),
    epoch=st.integers(0, 2**40),
    applied=st.lists(st.text(min_size=1, max_size=20), max_size=5).map(tuple),
    pending=st.none() | st.tuples(st.text(min_size=1, max_size=20), st.sampled_from(["up", "down"])),
    updated_ms=st.integers(0, 2**45),
    kafka_copy=st.none() | st.builds(KafkaCopy, st.text(max_size=30), st.text(max_size=30)),
)


@given(states)
def test_the_stored_state_round_trips(state):
    assert decode_state("/x", encode_state(state)) == state


@given(st.binary(max_size=200))
def test_foreign_bytes_in_the_state_znode_raise_only_the_state_error(data):
    """Corrupt or foreign data gets a clear error and nothing else (guide: bad input)."""
    try:
        decode_state("/zkcoord/migration/groups/g", data)
    except MigrationStateError as error:
        assert "/zkcoord/migration/groups/g" in str(error)


@pytest.mark.parametrize(
    "obj, problem",
    [
        ({"version": 1, "phase": "HALF", "epoch": 1}, "unknown phase"),
        ({"version": 1, "phase": "DUAL_WRITE", "epoch": -1}, "epoch"),
        ({"version": 1, "phase": "DUAL_WRITE", "epoch": True}, "epoch"),
        ({"phase": "DUAL_WRITE", "epoch": 1}, "no version"),
        ({"version": 1, "phase": "DUAL_WRITE", "epoch": 1, "applied": "0001"}, "applied"),
        (
            {"version": 1, "phase": "DUAL_WRITE", "epoch": 1, "pending": {"step": "x", "direction": "sideways"}},
            "pending",
        ),
        ({"version": 1, "phase": "LOG_ONLY", "epoch": 3, "kafka_copy": {"cluster_id": 7}}, "kafka_copy"),
    ],
)
def test_state_fields_are_checked(obj, problem):
    with pytest.raises(MigrationStateError, match=problem):
        decode_state("/p", json.dumps(obj).encode())


def test_a_state_without_a_copy_to_kafka_encodes_as_before_and_recording_one_keeps_the_phase():
    state = MigrationState(Phase.LOG_ONLY, 3, ("0004_stop_zk_commits",))
    assert b"kafka_copy" not in encode_state(state)
    cluster = KafkaCopy("abc", "k:9092")
    copied = state.with_kafka_copy(cluster, 5)
    assert (copied.phase, copied.epoch, copied.kafka_copy, copied.updated_ms) == (Phase.LOG_ONLY, 3, cluster, 5)
    assert copied.with_kafka_copy(cluster, 9) is copied
    assert copied.with_kafka_copy(None, 9).kafka_copy is None


def test_a_later_version_with_extra_fields_is_read():
    data = json.dumps({"version": 2, "phase": "LOG_ONLY", "epoch": 3, "owner": "ops"}).encode()
    assert decode_state("/p", data) == MigrationState(Phase.LOG_ONLY, 3)


def test_the_rules_table_matches_the_documented_reads_and_writes():
    """docs/migration.md "Who reads and writes what"; legacy-zk-protocol.md §5.1/§5.2 for DUAL_WRITE."""
    assert RULES[Phase.ZK_ONLY].legacy_member.writes == (ZK,)
    assert RULES[Phase.DUAL_WRITE].legacy_member.writes == (LOG, ZK)  # log first, then ZooKeeper (§5.1)
    assert RULES[Phase.DUAL_WRITE].legacy_member.reads == MAX  # max of both (§5.2)
    assert RULES[Phase.ZK_ONLY].client_member is None  # JoinGroup refused
    assert [RULES[p].coordinator_mirror for p in Phase] == [True, True, True, False]
    assert [RULES[p].coordinator_fetch for p in Phase] == [MAX, MAX, LOG, LOG]
    assert [RULES[p].mixed_members for p in Phase] == [False, True, False, False]  # mixed groups: DUAL_WRITE only


@given(st.none() | st.integers(0, 100), st.none() | st.integers(0, 100))
def test_reading_the_max_is_never_below_either_store(zk, log):
    both = read_offset(MAX, zk, log)
    assert both >= read_offset(ZK, zk, log) and both >= read_offset(LOG, zk, log)
    assert both == max(-1 if zk is None else zk, -1 if log is None else log)


def test_regressions_depend_on_what_the_phase_reads():
    rows = compare_stores({("t", 0): 5, ("t", 1): 3, ("t", 3): 2}, {("t", 0): 4, ("t", 2): 1, ("t", 3): 2})
    assert [row.status for row in rows] == [
        Comparison.ZK_AHEAD,
        Comparison.MISSING,
        Comparison.MISSING,
        Comparison.MATCH,
    ]
    assert [(r.topic, r.partition) for r in regressions(Phase.LOG_PRIMARY, rows)] == [("t", 0), ("t", 1)]
    assert [(r.topic, r.partition) for r in regressions(Phase.ZK_ONLY, rows)] == [("t", 2)]
    assert regressions(Phase.DUAL_WRITE, rows) == []
    assert compare(3, 4) == Comparison.LOG_AHEAD


def test_members_behind_names_each_member_and_what_to_do():
    state = MigrationState(Phase.DUAL_WRITE, epoch=3)
    members = (LegacyMember("jvm-1"), LegacyMember("py-1", advertised=True, epoch=2), LegacyMember("py-2", True, 3))
    reasons = members_behind(GroupFacts(state, members))
    assert len(reasons) == 2
    assert "jvm-1" in reasons[0] and "JVM" in reasons[0] and "stop it or replace it" in reasons[0]
    assert "py-1" in reasons[1] and "epoch 2" in reasons[1]


def test_not_acknowledged_names_each_lagging_node_and_zkcoord_member_with_its_epoch():
    state = MigrationState(Phase.DUAL_WRITE, epoch=7)
    members = (LegacyMember("jvm-1"), LegacyMember("py-1", advertised=True, epoch=6), LegacyMember("py-2", True, 7))
    nodes = (NodeAck("1", 7), NodeAck("2", 6), NodeAck("3", -1), NodeAck("4", unreadable="not JSON"))
    reasons = not_acknowledged(GroupFacts(state, members, nodes=nodes))
    assert len(reasons) == 4, reasons  # a JVM member cannot acknowledge, so it is not waited for
    assert "py-1" in reasons[0] and "epoch 6" in reasons[0]
    assert reasons[1].startswith("node 2 still at epoch 6 (the group is at DUAL_WRITE, epoch 7)")
    assert reasons[2].startswith("node 3 still at epoch -1")
    assert reasons[3].startswith("node 4: its acknowledgement cannot be read (not JSON)")


def test_a_node_ahead_of_the_state_has_not_acknowledged_it_either():
    """After the state was recreated (ZooKeeper restored from a backup), only the same epoch counts."""
    state = MigrationState(Phase.ZK_ONLY, epoch=0)
    assert not_acknowledged(GroupFacts(state, nodes=(NodeAck("1", 0),))) == []
    assert len(not_acknowledged(GroupFacts(state, nodes=(NodeAck("1", 3),)))) == 1


# ---- the runner's plans (no ZooKeeper: _plan only looks at the state) -------------------------------------


def plan(state: MigrationState, direction: str, to: str | None = None) -> list[tuple[str, str, bool]]:
    runner = Runner(zk=None, channel=None, steps=STEPS)
    return [(p.step.name, p.direction, p.resumed) for p in runner._plan(state, direction, to)]


def test_up_plans_every_step_not_applied_and_stops_at_to():
    assert [name for name, _, _ in plan(MigrationState(), UP)] == NAMES[:4]  # not the opt-in copy to Kafka
    assert [name for name, _, _ in plan(MigrationState(), UP, NAMES[1])] == NAMES[:2]
    assert plan(MigrationState(applied=tuple(NAMES[:2])), UP, NAMES[1]) == []


def test_the_opt_in_copy_to_kafka_runs_only_when_named_and_is_undone_first():
    at_log_only = MigrationState(Phase.LOG_ONLY, 3, tuple(NAMES[:4]))
    assert plan(at_log_only, UP) == []
    assert plan(at_log_only, UP, NAMES[4]) == [(NAMES[4], UP, False)]
    with pytest.raises(MigrationError, match="0005_copy_to_kafka runs only .* at DUAL_WRITE; 0004_stop_zk_commits not"):
        plan(MigrationState(Phase.DUAL_WRITE, 1, tuple(NAMES[:3])), UP, NAMES[4])
    begun = MigrationState(Phase.LOG_ONLY, 3, tuple(NAMES[:4]), pending=(NAMES[4], UP))
    assert plan(begun, UP) == [(NAMES[4], UP, True)]  # a plain `up` finishes a copy left under way
    copied = MigrationState(Phase.LOG_ONLY, 3, tuple(NAMES))
    assert plan(copied, UP) == [] and plan(copied, DOWN) == [(NAMES[4], DOWN, False)]
    assert [name for name, _, _ in plan(copied, DOWN, ZERO)] == list(reversed(NAMES))


def test_down_undoes_one_step_unless_told_where_to_stop():
    applied = MigrationState(Phase.LOG_PRIMARY, 3, tuple(NAMES[:3]))
    assert plan(applied, DOWN) == [(NAMES[2], DOWN, False)]
    assert [name for name, _, _ in plan(applied, DOWN, ZERO)] == list(reversed(NAMES[:3]))
    assert [name for name, _, _ in plan(applied, DOWN, NAMES[0])] == [NAMES[2], NAMES[1]]


def test_a_step_left_under_way_runs_again_first_in_its_direction():
    """Resumable after a crash at any point: the step under way is idempotent and is run again."""
    state = MigrationState(Phase.DUAL_WRITE, 1, (NAMES[0],), pending=(NAMES[1], UP))
    assert plan(state, UP) == [(NAMES[1], UP, True), (NAMES[2], UP, False), (NAMES[3], UP, False)]
    # Going down instead undoes the half-done step (its pre-check runs: it is a new decision).
    assert plan(state, DOWN) == [(NAMES[1], DOWN, False)]


def test_a_step_under_way_outside_the_plan_is_refused_with_what_to_do():
    state = MigrationState(Phase.LOG_PRIMARY, 2, tuple(NAMES[:2]), pending=(NAMES[2], UP))
    with pytest.raises(MigrationError, match="under way .*migrate up"):
        plan(state, UP, NAMES[0])


def test_unknown_steps_are_named():
    with pytest.raises(MigrationError, match="unknown step 'nope'"):
        plan(MigrationState(), UP, "nope")
    with pytest.raises(MigrationError, match="0099_gone"):
        plan(MigrationState(applied=("0099_gone",)), UP)


def test_a_migrations_dir_with_a_broken_step_is_a_clear_error(tmp_path):
    (tmp_path / "0001_half.py").write_text(
        textwrap.dedent('''
        """Half a step."""
        PHASE = 1
        def up(ctx): pass
    ''')
    )
    with pytest.raises(MigrationError, match="lacks down, check"):
        load_steps(tmp_path)
    (tmp_path / "0001_half.py").write_text("raise RuntimeError('boom')\n")
    with pytest.raises(MigrationError, match="boom"):
        load_steps(tmp_path)
    with pytest.raises(MigrationError, match="no migrations directory"):
        load_steps(tmp_path / "missing")
