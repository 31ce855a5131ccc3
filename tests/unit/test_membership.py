"""The pure membership core against the pure coordinator, on a virtual clock (no IO, no sleeps)."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zkcoord.assign.consumer import assignor_for
from zkcoord.errors import FencedInstanceIdError, RebalanceInProgressError
from zkcoord.membership import GroupMember, MembershipConfig, MemberState, Reconcile
from zkcoord.membership.requests import commit_topics
from zkcoord.membership.states import MEMBER_TRANSITIONS, IllegalMemberTransition, check_member_transition
from zkcoord.model import TopicPartition
from zkcoord.testing.membership import MembershipSimulation
from zkcoord.wire.codec import read_response
from zkcoord.wire.consumer_protocol import Assignment, encode_assignment

TOPICS = {"t": 12}
STRATEGIES = ["range", "roundrobin", "sticky", "cooperative-sticky"]


def group_of(count, strategy="range", **options):
    sim = MembershipSimulation(TOPICS)
    members = [sim.add(f"m{i}", strategies=(strategy,), **options) for i in range(count)]
    sim.run_until_settled()
    return sim, members


def test_transition_table_rejects_what_it_does_not_list():
    check_member_transition(MemberState.STABLE, MemberState.PREPARE_REVOCATION)
    with pytest.raises(IllegalMemberTransition):
        check_member_transition(MemberState.UNJOINED, MemberState.STABLE)
    assert all(
        MemberState.LEFT in targets for state, targets in MEMBER_TRANSITIONS.items() if state != MemberState.LEFT
    )


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_members_joining_one_by_one_share_every_partition_exclusively(strategy):
    sim = MembershipSimulation(TOPICS)
    for i in range(4):
        sim.add(f"m{i}", strategies=(strategy,))
        sim.run_until_settled()  # run() checks exclusive ownership after every member step
    assert sorted(len(m.owned) for m in sim.live) == [3, 3, 3, 3]


def test_eager_member_revokes_everything_before_it_rejoins():
    sim, (first,) = group_of(1)
    sim.add("m1")
    sim.run_until_settled()
    kinds = [kind for kind, _ in first.callbacks]
    assert kinds == ["assigned", "revoked", "assigned"]
    assert first.callbacks[1][1] == tuple(sorted(sim.all_partitions()))  # eager: all of them go


def test_cooperative_join_moves_only_what_must_move_and_keeps_the_rest_owned():
    sim, members = group_of(2, "cooperative-sticky")
    before = {m.name: set(m.owned) for m in members}
    start = len(sim.ownership_timeline)
    sim.add("m2", strategies=("cooperative-sticky",))
    sim.run_until_settled()
    for member in members:
        kept = before[member.name] & member.owned
        # Kept partitions were owned at every instant of the rebalance: never in a revocation.
        revoked = {tp for kind, tps in member.callbacks if kind == "revoked" for tp in tps}
        assert not kept & revoked
        assert len(before[member.name] - member.owned) == 2  # 6 → 4: only the two that must move
    # Never more than the 4 moving partitions without an owner, at any instant of the rebalance.
    assert all(len(owners) >= 8 for owners in sim.ownership_timeline[start:])


def test_static_member_restart_within_the_session_is_not_a_rebalance():
    sim, members = group_of(3, instance_id=None)
    sim = MembershipSimulation(TOPICS)
    members = [sim.add(f"m{i}", instance_id=f"instance-{i}") for i in range(3)]
    sim.run_until_settled()
    generation = members[0].core.generation
    assignment = {m.name: set(m.owned) for m in members}
    bounced = members[1]
    bounced.close(sim.harness.now)  # static: no LeaveGroup (KIP-345)
    sim.run(500)
    restarted = sim.add("m1-again", instance_id="instance-1")
    sim.run_until_settled()
    assert {m.core.generation for m in sim.live} == {generation}
    assert restarted.owned == assignment["m1"]
    assert [m.owned for m in sim.live if m is not restarted] == [assignment["m0"], assignment["m2"]]


def test_slow_revocation_callback_keeps_the_member_alive():
    """A revocation that takes longer than the session: heartbeats go on meanwhile (HEARTBEAT_STATES)."""
    sim, members = group_of(2, session_timeout_ms=1000, callback_ms=2500)
    ids = {m.core.member_id for m in members}
    sim.add("m2", session_timeout_ms=1000, callback_ms=2500)
    sim.run_until_settled(limit_ms=20000)
    assert ids <= {m.core.member_id for m in sim.live}
    assert not any(kind == "lost" for m in members for kind, _ in m.callbacks)


def test_member_that_stops_polling_leaves_and_its_partitions_are_lost_then_rejoins():
    sim, (stuck, other) = group_of(2, max_poll_interval_ms=2000)
    stuck.polling = False
    sim.run(2500)
    assert stuck.core.state == MemberState.UNJOINED
    assert stuck.owned == set() and ("lost", tuple(sorted(stuck.callbacks[-1][1]))) == stuck.callbacks[-1]
    sim.run(1000)
    assert other.owned == sim.all_partitions()
    stuck.polling = True
    sim.run_until_settled()
    assert len(stuck.owned) == 6


def test_second_consumer_with_the_same_instance_id_fences_the_first():
    sim, (first,) = group_of(1, instance_id="only")
    sim.add("impostor", instance_id="only")
    # Until its next heartbeat is answered 82 the fenced member still believes it owns its partitions: a
    # duplicated group.instance.id is a misconfiguration KIP-345 detects, it cannot prevent the overlap.
    sim.run(1000, check=False)
    assert isinstance(first.fatal, FencedInstanceIdError)
    assert first.core.state == MemberState.FATAL


def test_session_expiry_of_a_crashed_member_hands_its_partitions_over():
    sim, (survivor, crashed) = group_of(2, session_timeout_ms=1000)
    crashed.crash()
    took = sim.run_until_settled()
    assert survivor.owned == sim.all_partitions()
    assert 1000 <= took < 3000


@pytest.mark.parametrize("instance_id", [None, "resumed"])
def test_a_member_resumed_after_its_session_reads_nothing_until_the_coordinator_ends_its_session(instance_id):
    """A pause past the session (the process takes no step): the other member gets everything; the resumed one
    reads none of its partitions from its first step, before any answer, and reports them lost once the
    coordinator says it expired the member."""
    sim, (other,) = group_of(1, session_timeout_ms=1000)
    paused = sim.add("paused", instance_id=instance_id, session_timeout_ms=1000)
    sim.run_until_settled()
    paused.paused = True
    sim.run_until_settled()  # the coordinator expired it
    assert other.owned == sim.all_partitions()
    held = set(paused.owned)
    paused.paused = False
    paused.step(sim.harness.now)  # resumed: its first step, before any answer from the coordinator
    sim.check_exclusive()
    assert paused.reading(sim.harness.now) == set() and paused.owned == held and paused.callbacks[-1][0] != "lost"
    sim.run_until_settled()  # run() checks that no partition is read by both meanwhile
    assert ("lost", tuple(sorted(held))) in paused.callbacks
    assert paused.owned and other.owned


operations = st.lists(
    st.tuples(st.sampled_from(["join", "close", "crash", "run", "stall"]), st.integers(0, 7)), min_size=1, max_size=12
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(strategy=st.sampled_from(STRATEGIES), steps=operations, callback_ms=st.sampled_from([0, 150, 700]))
def test_ownership_is_exclusive_and_complete_under_random_churn(strategy, steps, callback_ms):
    sim = MembershipSimulation({"t": 7, "u": 3})
    counter = 0
    options = {"strategies": (strategy,), "session_timeout_ms": 1000, "heartbeat_interval_ms": 100}
    for operation, pick in steps:
        live = sim.live
        if operation == "join" or not live:
            counter += 1
            sim.add(f"m{counter}", callback_ms=callback_ms, **options)
        elif operation == "close":
            live[pick % len(live)].close(sim.harness.now)
        elif operation == "crash":
            live[pick % len(live)].crash()
        elif operation == "stall":
            sim.run(pick * 100)
        sim.run(50)  # every step checks exclusive ownership
    if sim.live:
        sim.run_until_settled(limit_ms=30000)
        owned = [tp for m in sim.live for tp in m.owned]
        assert sorted(owned) == sorted(sim.all_partitions())


def test_the_leader_rejoins_when_a_subscribed_topic_gains_partitions():
    """Kafka's leader compares each metadata refresh with the counts it assigned; others only follow."""
    sim, members = group_of(3, metadata_max_age_ms=500)
    generation = members[0].core.generation
    sim.run(2000)  # refreshes without a change: no rebalance
    assert {m.core.generation for m in members} == {generation}
    sim.harness.set_topics({"t": 18})
    sim.topics = {"t": 18}
    sim.run_until_settled()
    assert {m.core.generation for m in members} == {generation + 1}
    assert sorted(len(m.owned) for m in members) == [6, 6, 6]


def test_partitions_are_topic_partitions():
    sim, members = group_of(1)
    assert all(isinstance(tp, TopicPartition) for tp in members[0].owned)


def test_a_member_waiting_for_its_coordinator_does_not_ask_to_be_woken_at_once():
    """Past deadlines that wait for an input (here: a heartbeat due, no coordinator) must not make the worker spin."""
    sim, (member,) = group_of(1)
    now = sim.harness.now + 5000
    member.core.coordinator_lost(now, "test")
    member.core.tick(now)
    assert member.core.next_wakeup_ms(now) > now


def _answer(member, now, api, response):
    """Answer the member's pending ``api`` request with the map a node would send, read as the worker reads it."""
    (send,) = [s for s in member.take_sends() if s.api == api]
    member.on_response(send.tag, read_response(api, response), now)


def _stable_member(instance=None):
    """A member STABLE in generation 1 that sent a heartbeat at 400 ms, not yet answered (driven by hand)."""
    config = MembershipConfig("g", instance, 3000, 300, 60000, 100, 30000, 300000)
    member = GroupMember(config, [assignor_for("range")], 0)
    member.subscribe(["t"], now_ms=0)
    member.tick(0)
    _answer(member, 0, "FindCoordinator", {"error_code": 0, "node_id": 1, "host": "h1", "port": 1})
    joined = {"error_code": 0, "member_id": "m", "generation_id": 1, "protocol_name": "range", "leader": "x"}
    _answer(member, 1, "JoinGroup", {**joined, "members": []})
    _answer(member, 2, "SyncGroup", {"error_code": 0, "assignment": encode_assignment(Assignment((("t", 0),)))})
    (event,) = [e for e in member.take_events() if isinstance(e, Reconcile)]
    member.ack(event.event_id, 3)
    member.tick(400)
    return member


def test_a_hung_coordinator_is_given_up_after_a_session_even_with_a_heartbeat_in_flight():
    member = _stable_member()
    member.take_sends()
    for now in range(500, 4000, 100):
        member.polled(now)
        member.tick(now)
    assert member.coordinator is None


def test_a_coordinator_found_again_within_the_session_gets_the_same_generations_heartbeats():
    member = _stable_member()
    _answer(member, 400, "Heartbeat", {"error_code": 0})  # sent at 400: the session lasts until 3400
    member.coordinator_lost(500, "closed by the node")
    member.tick(3000)
    _answer(member, 3000, "FindCoordinator", {"error_code": 0, "node_id": 2, "host": "h2", "port": 2})
    member.tick(3300)
    assert [s.api for s in member.take_sends()] == ["Heartbeat"]
    assert member.generation == 1 and member.owned


def _reconciles(member):
    return [e for e in member.take_events() if isinstance(e, Reconcile)]


def _doubtful_member(instance=None):
    """A member whose session is in doubt at 3001: nothing it sent since the SyncGroup (at 1) was answered."""
    member = _stable_member(instance)  # the heartbeat sent at 400 is never answered
    member.take_events()
    member.take_sends()
    member.tick(3000)
    assert not member.session_in_doubt(3000)
    member.tick(3001)
    assert member.session_in_doubt(3001)
    return member


def _heartbeat_in_doubt(member, now):
    """Let the member find its coordinator again (it gives it up after a session, and asks at once) and send a
    heartbeat at ``now``."""
    member.tick(now)
    assert member.coordinator is None
    _answer(member, now, "FindCoordinator", {"error_code": 0, "node_id": 2, "host": "h2", "port": 2})
    member.tick(now)
    (heartbeat,) = [s for s in member.take_sends() if s.api == "Heartbeat"]
    return heartbeat


@pytest.mark.parametrize("instance", [None, "static-1"])
def test_a_member_unanswered_for_a_session_holds_its_partitions_in_doubt_and_a_confirmation_resumes_it(instance):
    """A coordinator failover longer than the session: the member reads nothing (the poll side asks
    session_in_doubt) but loses nothing; the new coordinator's answer at the same generation resumes it, no
    rebalance, no callback."""
    member = _doubtful_member(instance)
    assert member.owned == {TopicPartition("t", 0)} and member.generation == 1 and member.state == MemberState.STABLE
    assert not _reconciles(member)
    heartbeat = _heartbeat_in_doubt(member, 3100)
    assert heartbeat.fields["generation_id"] == 1 and member.session_in_doubt(3100)
    member.on_response(heartbeat.tag, read_response("Heartbeat", {"error_code": 0}), 3150)
    assert not member.session_in_doubt(3150) and not member.session_in_doubt(6099)
    assert not _reconciles(member) and member.generation == 1 and member.state == MemberState.STABLE


@pytest.mark.parametrize("code", [22, 25])  # ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID
def test_a_member_in_doubt_told_its_generation_is_over_loses_its_partitions_then_rejoins(code):
    """The paused member's case: the coordinator expired it, so its partitions are lost (no commit), then it joins."""
    member = _doubtful_member()
    heartbeat = _heartbeat_in_doubt(member, 3100)
    member.on_response(heartbeat.tag, read_response("Heartbeat", {"error_code": code}), 3150)
    (event,) = _reconciles(member)
    assert event.lost == (TopicPartition("t", 0),) and event.owned == () and not event.revoked
    assert member.generation == -1 and not member.session_in_doubt(3150)
    assert not [s for s in member.take_sends() if s.api == "JoinGroup"]  # not before on_partitions_lost ran
    member.ack(event.event_id, 3200)
    (join,) = [s for s in member.take_sends() if s.api == "JoinGroup"]
    assert join.fields["member_id"] == ("" if code == 25 else "m")


def test_a_member_in_doubt_told_of_a_rebalance_revokes_as_the_protocol_says():
    member = _doubtful_member()
    heartbeat = _heartbeat_in_doubt(member, 3100)
    member.on_response(heartbeat.tag, read_response("Heartbeat", {"error_code": 27}), 3150)
    assert not member.session_in_doubt(3150)  # the coordinator still had the member at 3100
    (event,) = _reconciles(member)
    assert event.revoked == (TopicPartition("t", 0),) and event.run_revoked and not event.lost


def test_a_commit_the_coordinator_takes_in_doubt_confirms_the_session():
    """OffsetCommit checks the generation and member id and renews the session: a commit answered 0 is proof."""
    member = _doubtful_member()
    member.tick(3100)
    _answer(member, 3100, "FindCoordinator", {"error_code": 0, "node_id": 2, "host": "h2", "port": 2})
    member.take_sends()
    member.request(7, "OffsetCommit", {"topics": commit_topics({TopicPartition("t", 0): (5, None)})}, 3200, 60000)
    (commit,) = [s for s in member.take_sends() if s.api == "OffsetCommit"]
    assert commit.fields["generation_id"] == 1
    member.on_response(commit.tag, read_response("OffsetCommit", _commit_answer(0)), 3250)
    assert not member.session_in_doubt(3250) and member.session_in_doubt(6200)
    assert not _reconciles(member)


def test_a_commit_of_no_partition_confirms_nothing():
    """The coordinator answers an empty OffsetCommit without checking anything, as Kafka's API layer does."""
    member = _doubtful_member()
    member.tick(3100)
    _answer(member, 3100, "FindCoordinator", {"error_code": 0, "node_id": 2, "host": "h2", "port": 2})
    member.take_sends()
    member.request(7, "OffsetCommit", {"topics": []}, 3200, 60000)
    _answer(member, 3250, "OffsetCommit", {"topics": []})
    assert member.session_in_doubt(3250)


def _commit_answer(code):
    return {"topics": [{"name": "t", "partitions": [{"partition_index": 0, "error_code": code}]}]}


def _probing_member():
    """A member in doubt that knows the group's offset of its partition (fetched at 500: 42) and has found its
    coordinator again at 3100: a heartbeat (sent at 3100) and a probe commit of that offset (3101) are out."""
    member = _stable_member()
    member.request(5, "OffsetFetch", {"group_id": "g", "topics": [{"name": "t", "partition_indexes": [0]}]}, 500, 1000)
    offset = {"partition_index": 0, "committed_offset": 42, "metadata": "m", "error_code": 0}
    fetched = {"name": "t", "partitions": [offset]}
    _answer(member, 500, "OffsetFetch", {"error_code": 0, "topics": [fetched]})
    member.take_events()
    member.take_sends()
    member.tick(3001)
    assert member.session_in_doubt(3001)
    assert _sent(member, "OffsetCommit").fields["generation_id"] == 1  # to the coordinator about to be given up
    member.tick(3100)
    _answer(member, 3100, "FindCoordinator", {"error_code": 0, "node_id": 2, "host": "h2", "port": 2})
    member.tick(3101)
    return member


def _sent(member, api):
    (send,) = [s for s in member.take_sends() if s.api == api]
    return send


def test_a_member_in_doubt_is_not_confirmed_by_a_heartbeat_answered_blindly():
    """A coordinator loading the group answers Heartbeat 0 unchecked: the member stays in doubt, reads nothing,
    and has its generation checked by the probe commit, which a loading coordinator answers 14."""
    member = _probing_member()
    sends = member.take_sends()
    heartbeat, probe = (next(s for s in sends if s.api == api) for api in ("Heartbeat", "OffsetCommit"))
    assert probe.fields["generation_id"] == 1 and probe.fields["member_id"] == "m"
    assert probe.fields["topics"] == commit_topics({TopicPartition("t", 0): (42, "m")})
    member.on_response(heartbeat.tag, read_response("Heartbeat", {"error_code": 0}), 3150)
    member.on_response(probe.tag, read_response("OffsetCommit", _commit_answer(14)), 3150)
    assert member.session_in_doubt(3150) and not _reconciles(member) and member.generation == 1
    member.tick(3200)
    assert not [s for s in member.take_sends() if s.api == "OffsetCommit"]  # again after retry.backoff.ms
    member.tick(3201)
    assert _sent(member, "OffsetCommit").fields["topics"] == probe.fields["topics"]


def test_a_probe_commit_taken_ends_the_doubt_without_a_rebalance():
    member = _probing_member()
    probe = _sent(member, "OffsetCommit")
    member.on_response(probe.tag, read_response("OffsetCommit", _commit_answer(0)), 3150)
    assert not member.session_in_doubt(6100) and member.session_in_doubt(6101)  # the probe was sent at 3101
    assert not _reconciles(member) and member.generation == 1 and member.state == MemberState.STABLE


@pytest.mark.parametrize("code", [22, 25])  # ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID
def test_a_probe_commit_refused_loses_the_partitions(code):
    member = _probing_member()
    probe = _sent(member, "OffsetCommit")
    member.on_response(probe.tag, read_response("OffsetCommit", _commit_answer(code)), 3150)
    (event,) = _reconciles(member)
    assert event.lost == (TopicPartition("t", 0),) and event.owned == () and not event.revoked
    assert member.generation == -1 and not member.session_in_doubt(3150)


def test_an_answer_read_after_a_pause_does_not_end_the_doubt():
    """The heartbeat sent at 400 is answered at once but read only after the pause: the coordinator heard the
    member at 400 at best, so it may have expired it at 3400; only a later answer tells, and nothing is lost yet.
    The member asks at once: here the coordinator answers that it expired it."""
    member = _stable_member()
    member.take_events()
    _answer(member, 6800, "Heartbeat", {"error_code": 0})
    assert member.session_in_doubt(6800) and member.owned and member.generation == 1
    assert not _reconciles(member)
    (heartbeat,) = member.take_sends()  # asked again at once, not a heartbeat.interval.ms later
    member.on_response(heartbeat.tag, read_response("Heartbeat", {"error_code": 25}), 6810)
    assert [e.lost for e in _reconciles(member)] == [(TopicPartition("t", 0),)]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(1, 4000), st.sampled_from(["tick", "ok", "ok", "gone"])), max_size=14))
def test_no_partition_is_read_after_a_session_unconfirmed_until_the_coordinator_confirms_it(steps):
    """Each step: time passes, then the member's clock runs, or the heartbeat in flight is answered (0 or
    UNKNOWN_MEMBER_ID). The poll side may read the member's partitions only before a session after the sending of
    the last request confirmed; the member gives them up only when the coordinator says so."""
    member = _stable_member()
    member.take_events()
    (heartbeat,) = member.take_sends()
    confirmed, now, in_flight = 1, 400, (heartbeat.tag, 400)  # the SyncGroup was sent at 1, the heartbeat at 400
    for elapsed, action in steps:
        now += elapsed
        if action != "tick" and in_flight is not None:
            (tag, sent), in_flight = in_flight, None
            code = 0 if action == "ok" else 25
            member.on_response(tag, read_response("Heartbeat", {"error_code": code}), now)
            if code:
                assert [e.lost for e in _reconciles(member)] == [(TopicPartition("t", 0),)]
                assert member.generation == -1 and not member.session_in_doubt(now)
                return
            confirmed = max(confirmed, sent)
        else:
            member.tick(now)
        sends = member.take_sends()
        while sends:
            send = sends.pop()
            if send.api == "Heartbeat":
                in_flight = (send.tag, now)
            elif send.api == "FindCoordinator":
                found = {"error_code": 0, "node_id": 1, "host": "h1", "port": 1}
                member.on_response(send.tag, read_response("FindCoordinator", found), now)
                sends += member.take_sends()
        if member.coordinator is None:
            in_flight = None  # given up after a session without an answer: a late answer is stale
        assert member.session_in_doubt(now) == (now >= confirmed + 3000), (now, confirmed)
        assert not _reconciles(member) and member.owned and member.generation == 1


def test_a_heartbeat_in_flight_does_not_make_the_worker_spin():
    member = _stable_member()
    assert member.next_wakeup_ms(450) > 450


def test_a_commit_during_a_rebalance_fails_fast_instead_of_queueing_behind_the_join():
    """Kafka's generationIfStable(): RebalanceInProgressError, not a commit parked behind JoinGroup."""
    member = _stable_member()
    _answer(member, 400, "Heartbeat", {"error_code": 27})
    (event,) = [e for e in member.take_events() if isinstance(e, Reconcile)]
    member.ack(event.event_id, 401)
    assert member.state == MemberState.PREPARING_REBALANCE
    member.take_events()
    member.request(7, "OffsetCommit", {"topics": []}, 402, 60000)
    assert not [s for s in member.take_sends() if s.api == "OffsetCommit"]
    (completed,) = member.take_events()
    assert isinstance(completed.error, RebalanceInProgressError)
