"""The fault campaign's schedule: drawn from the seed alone, and within the bounds the runner relies on."""

from hypothesis import given, settings
from hypothesis import strategies as st

from zkcoord.faults import schedule
from zkcoord.faults.schedule import FAULT_KINDS, Shape, draw_schedule, hold_range, targets

SHAPE = Shape(
    nodes=["node-1", "node-2", "node-3"],
    legacy_members=["legacy-0", "legacy-1"],
    client_members=["client-0", "client-1"],
    migration_steps=4,
    session_timeout_ms=4000,
    rdkafka_members=["rdkafka-0", "rdkafka-1"],
    mixed_legacy_members=["mixed-legacy-0"],
    mixed_client_members=["mixed-client-0"],
)


def test_a_seed_gives_the_same_schedule_every_time_and_seeds_differ():
    assert draw_schedule(7, SHAPE) == draw_schedule(7, SHAPE)
    assert len({draw_schedule(seed, SHAPE) for seed in range(20)}) == 20


def test_the_campaigns_shape_gets_as_many_faults_as_it_asks_for():
    assert all(len(draw_schedule(seed, SHAPE).faults) >= SHAPE.faults[0] for seed in range(300))


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2**32), concurrent=st.integers(1, 3), window_ms=st.integers(12_000, 40_000))
def test_faults_stay_within_their_bounds(seed, concurrent, window_ms):
    shape = Shape(**{**SHAPE.__dict__, "max_concurrent": concurrent, "window_ms": window_ms})
    faults = draw_schedule(seed, shape).faults
    assert len(faults) <= shape.faults[1]
    for fault in faults:
        assert fault.target in targets(fault.kind, shape)
        low, high = hold_range(fault.kind, shape.session_timeout_ms)
        assert fault.at_ms >= 1000 and fault.healed_ms <= window_ms
        assert fault.hold_ms <= high and (fault.hold_ms >= low or fault.healed_ms == window_ms)
    for instant in range(0, window_ms, 50):
        active = [f for f in faults if f.at_ms <= instant <= f.healed_ms]
        assert len(active) <= concurrent
        assert len({f.target for f in active}) == len(active), "two faults on one target at once"


def test_a_session_expiry_outlasts_the_session_and_a_partition_from_zookeeper_does_not():
    session_ms = SHAPE.session_timeout_ms
    assert hold_range(schedule.SESSION_EXPIRY, session_ms)[0] > session_ms
    assert hold_range(schedule.PARTITION_ZK, session_ms)[1] < session_ms


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32), steps=st.integers(1, 6))
def test_the_migration_walks_one_step_at_a_time_within_its_steps(seed, steps):
    moves = draw_schedule(seed, Shape(**{**SHAPE.__dict__, "migration_steps": steps})).moves
    applied = 0
    assert [m.at_ms for m in moves] == sorted(m.at_ms for m in moves)
    for move in moves:
        assert move.to == applied + (1 if move.direction == schedule.UP else -1)
        assert 0 <= move.to <= steps
        applied = move.to


def test_only_the_kinds_asked_for_are_drawn_and_a_run_without_steps_does_not_migrate():
    shape = Shape(**{**SHAPE.__dict__, "migration_steps": 0})
    kinds = {fault.kind for seed in range(50) for fault in draw_schedule(seed, shape, [schedule.PAUSE_NODE]).faults}
    assert kinds == {schedule.PAUSE_NODE}
    assert all(draw_schedule(seed, shape).moves == () for seed in range(10))
    assert {f.kind for seed in range(200) for f in draw_schedule(seed, SHAPE).faults} == set(FAULT_KINDS)


def test_member_faults_hit_every_member_kind_and_zookeeper_faults_only_what_has_a_zookeeper_link():
    hit = {(f.kind, f.target) for seed in range(300) for f in draw_schedule(seed, SHAPE).faults}
    members = [
        *SHAPE.legacy_members,
        *SHAPE.client_members,
        *SHAPE.rdkafka_members,
        *SHAPE.mixed_legacy_members,
        *SHAPE.mixed_client_members,
    ]
    for kind in schedule.MEMBER_KINDS:
        assert {target for k, target in hit if k == kind} == set(members)
    zookeeper_targets = {target for kind, target in hit if kind in schedule.ZK_CLIENT_KINDS}
    assert zookeeper_targets == {*SHAPE.nodes, *SHAPE.legacy_members, *SHAPE.mixed_legacy_members}


def test_a_campaign_without_librdkafka_members_never_targets_one():
    without = Shape(**{**SHAPE.__dict__, "rdkafka_members": ()})
    targets_hit = {f.target for seed in range(200) for f in draw_schedule(seed, without).faults}
    assert not any(target.startswith("rdkafka") for target in targets_hit)


def test_a_campaign_without_a_mixed_group_never_targets_one_of_its_members():
    without = Shape(**{**SHAPE.__dict__, "mixed_legacy_members": (), "mixed_client_members": ()})
    assert not any(f.target.startswith("mixed") for seed in range(200) for f in draw_schedule(seed, without).faults)
