"""Black-box acceptance tests: the scenarios of /work/shared/specs/coordinator-scenarios.md.

Each test is named after its scenario (S01, S03, ... S115) and drives ``zkcoord.testing.CoordinatorHarness``
with exactly the wire-protocol request maps (builders in coordinator_requests.py). "§" numbers point to
/work/shared/specs/group-coordinator.md. Time is virtual: ``h.advance(ms)`` fires timers with now > deadline.

Out of scope, and so not tested here (listed in docs/protocol.md): TxnOffsetCommit (S87), the
single-error LeaveGroup v0-v2 form (part of S75), leader epochs in OffsetCommit (part of S81) and JoinGroup
v0-v3 (a JOIN3 of a new dynamic member runs as the two-step join, see ``join3``).
"""

import re

import msgpack
import pytest
from coordinator_requests import (
    ALL,
    COORDINATOR_LOAD_IN_PROGRESS,
    COORDINATOR_NOT_AVAILABLE,
    CORRUPT_MESSAGE,
    FENCED_INSTANCE_ID,
    G_PARTITION,
    GROUP_MAX_SIZE_REACHED,
    ILLEGAL_GENERATION,
    INCONSISTENT_GROUP_PROTOCOL,
    INITIAL_DELAY,
    INVALID_COMMIT_OFFSET_SIZE,
    INVALID_SESSION_TIMEOUT,
    MEMBER_ID_REQUIRED,
    NON_EMPTY_GROUP,
    NONE,
    NOT_COORDINATOR,
    OTHER,
    OTHER_PARTITION,
    PS,
    REBALANCE,
    REBALANCE_IN_PROGRESS,
    STATES,
    UNKNOWN_MEMBER_ID,
    UNKNOWN_SERVER_ERROR,
    UUID_PATTERN,
    Fetched,
    G,
    assert_joined,
    commit,
    commit_errors,
    delete,
    deleted,
    describe,
    described,
    described_state,
    error,
    fetch,
    fetched,
    fetched_offset,
    fx_one,
    fx_pending,
    fx_static,
    fx_three,
    fx_two,
    hb,
    identity,
    join3,
    join4,
    leave,
    leave_errors,
    list_groups,
    listed,
    member_instances,
    new_harness,
    parked,
    pending_id,
    reply,
    sync,
)

from zkcoord.model import TopicPartition
from zkcoord.offsets.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
)

TOPIC_0 = TopicPartition("topic", 0)
FOO_0 = TopicPartition("foo", 0)
FOO_1 = TopicPartition("foo", 1)
RETENTION_MS = 60_000
# One-minute retention; the periodic expiry pass is pushed out of the way so only explicit passes run.
RETENTION_CONFIG = {"offsets.retention.minutes": 1, "offsets.retention.check.interval.ms": 10**9}


@pytest.fixture
def h():
    return new_harness()


def state(h, group: str = G) -> str | None:
    snapshot = h.group(group)
    return None if snapshot is None else snapshot.state


def consumer_subscription(*topics: str) -> bytes:
    """A member's metadata for protocol type "consumer" (wire-protocol.md §4)."""
    return msgpack.packb(
        {"version": 0, "topics": list(topics), "user_data": None, "owned_partitions": []}, use_bin_type=True
    )


def loaded_member(member_id: str, session: int = 500, assignment: bytes = b"") -> MemberMetadata:
    return MemberMetadata(member_id, None, "clientId", "/127.0.0.1", 500, session, b"", assignment)


# ===========================================================================================================
# A. Routing, validation and loading
# ===========================================================================================================


@pytest.fixture
def loading(h):
    """S01's given: the partition of O ("otherGroup") is loading."""
    h.start_loading(OTHER_PARTITION)
    return h


def test_S01_join_while_loading_is_load_in_progress(loading):
    """§0.4 step 3: the loading check comes before the ownership check (14, not 16)."""
    dynamic = reply(loading.send(join4("memberId", group=OTHER)))
    assert dynamic["error_code"] == COORDINATOR_LOAD_IN_PROGRESS
    assert dynamic["member_id"] == "memberId"  # §2.2 step 1: echoed
    static = loading.send(join4("memberId", instance="groupInstanceId", group=OTHER))
    assert error(static) == COORDINATOR_LOAD_IN_PROGRESS


def test_S01_sync_while_loading_is_rebalance_in_progress(loading):
    """§4.2 step 1: SyncGroup answers 27, not 14, while loading."""
    assert error(loading.send(sync("memberId", 1, group=OTHER))) == REBALANCE_IN_PROGRESS


def test_S01_commit_while_loading_is_load_in_progress(loading):
    handle = loading.send(commit("memberId", 1, {("foo", 0): 15}, group=OTHER))
    assert commit_errors(handle) == {TopicPartition("foo", 0): COORDINATOR_LOAD_IN_PROGRESS}


def test_S01_heartbeat_while_loading_is_none(loading):
    """§5.1 step 1: heartbeats are answered blindly NONE while loading."""
    assert error(loading.send(hb("memberId", 1, group=OTHER))) == NONE


def test_S01_describe_while_loading(loading):
    assert described(loading.send(describe(OTHER)), OTHER)["error_code"] == COORDINATOR_LOAD_IN_PROGRESS
    # G's partition is not loading.
    entry = described(loading.send(describe(G)))
    assert entry["error_code"] == NONE


def test_S01_list_while_loading_returns_groups_with_load_in_progress(h):
    """§7.8: error 14 if any partition is loading, but the cached groups are listed anyway."""
    pending_id(h)  # creates G, Empty, with no protocol type yet: a pending member is not a member (§0.3)
    h.start_loading(OTHER_PARTITION)
    handle = h.send(list_groups())
    assert error(handle) == COORDINATOR_LOAD_IN_PROGRESS
    assert listed(handle) == [(G, "", "Empty")]


def test_S01_delete_while_loading_is_load_in_progress(loading):
    assert deleted(loading.send(delete(OTHER))) == {OTHER: COORDINATOR_LOAD_IN_PROGRESS}


def test_S01_describe_after_the_load_completes(loading):
    loading.load(OTHER_PARTITION)
    entry = described(loading.send(describe(OTHER)), OTHER)
    assert entry["error_code"] == NONE
    assert entry["group_state"] == "Dead"


@pytest.mark.parametrize("session", [9, 600001])
def test_S03_session_timeout_out_of_bounds(h, session):
    response = reply(h.send(join4("", session=session)))
    assert response["error_code"] == INVALID_SESSION_TIMEOUT
    # No member id is handed out; the check comes before the group lookup (§2.2 step 2).
    assert response["member_id"] == ""
    assert response["generation_id"] == -1 and response["leader"] == "" and response["members"] == []
    assert h.group(G) is None


def test_S05_known_member_id_on_a_group_that_does_not_exist(h):
    assert error(h.send(join4("memberId"))) == UNKNOWN_MEMBER_ID
    assert error(h.send(join4("memberId", instance="groupInstanceId"))) == UNKNOWN_MEMBER_ID
    assert h.group(G) is None  # §2.2 step 3: no group is created
    entry = described(h.send(describe(G)))
    assert entry["error_code"] == NONE
    assert entry["group_state"] == "Dead"


def test_S07_protocol_type_mismatch(h):
    a = pending_id(h)
    assert parked(h.send(join4(a)))
    response = reply(join3(h, protocol_type="connect"))
    assert response["error_code"] == INCONSISTENT_GROUP_PROTOCOL
    assert response["member_id"] == ""  # §2.3 step 2: checked before any id is handed out
    assert h.group(G).pending_members == frozenset()


def test_S09_unknown_member_id_in_an_existing_group(h):
    a = pending_id(h)
    joined = h.send(join4(a))
    h.advance(INITIAL_DELAY + 1)
    assert_joined(joined, 1)
    assert error(join3(h, "memberId")) == UNKNOWN_MEMBER_ID
    assert set(h.group(G).members) == {a}


# ===========================================================================================================
# B. Member id required (KIP-394) and pending members
# ===========================================================================================================


def test_S11_two_step_dynamic_join(h):
    request = join4("")
    first = reply(h.send(request))
    assert first["correlation_id"] == request["correlation_id"]
    assert first["error_code"] == MEMBER_ID_REQUIRED
    m = first["member_id"]
    assert re.fullmatch(f"clientId-{UUID_PATTERN}", m), m
    assert first["generation_id"] == -1
    assert first["leader"] == ""
    group = h.group(G)
    assert group.state == "Empty"
    assert group.pending_members == frozenset({m})
    assert group.members == {}

    second = h.send(join4(m))
    h.advance(INITIAL_DELAY + 1)
    response = assert_joined(second, 1, leader=m, member_id=m)
    assert response["protocol_type"] == "consumer"
    assert response["protocol_name"] == "range"
    assert response["members"] == [{"member_id": m, "group_instance_id": None, "metadata": b""}]
    group = h.group(G)
    assert group.state == "CompletingRebalance"
    assert group.pending_members == frozenset()


def test_S13_a_pending_member_that_never_returns_leaves_a_stable_group_untouched(h):
    a = fx_one(h)
    b = pending_id(h)
    group = h.group(G)
    assert group.state == "Stable"
    assert group.pending_members == frozenset({b})
    h.advance(300)
    assert error(h.send(hb(a, 1))) == NONE
    h.advance(300)
    group = h.group(G)
    assert group.pending_members == frozenset()
    assert set(group.members) == {a}
    assert group.state == "Stable"
    assert group.generation == 1


def test_S15_a_pending_members_timeout_unblocks_the_rebalance(h):
    """§2.8 / §5.4: the pending timer (session timeout of C's first join, 100 ms) re-checks join completion."""
    fx = fx_pending(h)
    h.advance(120)
    group = h.group(G)
    assert group.state == "CompletingRebalance"
    assert set(group.members) == {fx.a, fx.b}
    assert group.pending_members == frozenset()
    assert error(fx.a_join) == NONE
    assert error(fx.b_join) == NONE


@pytest.mark.parametrize(
    "probe",
    [
        pytest.param(lambda m: hb(m, 0), id="heartbeat"),
        pytest.param(lambda m: sync(m, 0), id="sync"),
        pytest.param(lambda m: commit(m, 0, {TOPIC_0: 0}), id="commit"),
    ],
)
def test_S17_pending_members_are_not_real_members(h, probe):
    """§5.4: requests from a pending id get 25 and do not extend its pending timer (500 ms from t=0)."""
    m = pending_id(h)
    h.advance(400)
    handle = h.send(probe(m))
    if handle.response is not None and "topics" in handle.response:
        assert commit_errors(handle) == {TOPIC_0: UNKNOWN_MEMBER_ID}
    else:
        assert error(handle) == UNKNOWN_MEMBER_ID
    assert h.group(G).pending_members == frozenset({m})
    h.advance(101)  # t=501: past the deadline set at t=0, not one set at t=400
    assert h.group(G).pending_members == frozenset()
    assert error(h.send(join4(m))) == UNKNOWN_MEMBER_ID


# ===========================================================================================================
# C. group.max.size = 4
# ===========================================================================================================


def test_S19_cap_applied_at_the_second_join(h):
    """§2.2 step 4: acceptJoiningMember with num_members_awaiting_join in PreparingRebalance."""
    ids = [pending_id(h) for _ in range(5)]
    assert h.group(G).state == "Empty"
    joins = [h.send(join4(m)) for m in ids]
    assert all(parked(handle) for handle in joins[:4])
    fifth = reply(joins[4])
    assert fifth["error_code"] == GROUP_MAX_SIZE_REACHED
    assert fifth["member_id"] == ""
    h.advance(INITIAL_DELAY + 1)
    h.advance(INITIAL_DELAY + 1)
    for m, handle in zip(ids[:4], joins[:4], strict=True):
        assert_joined(handle, 1, leader=ids[0], member_id=m)
    assert h.group(G).state == "CompletingRebalance"

    rejoins = [h.send(join4(m)) for m in ids]
    for m, handle in zip(ids[:4], rejoins[:4], strict=True):
        assert_joined(handle, 1, leader=ids[0], member_id=m)
    assert error(rejoins[4]) == GROUP_MAX_SIZE_REACHED
    group = h.group(G)
    assert set(group.members) == set(ids[:4])
    assert group.state == "CompletingRebalance"


def test_S21_cap_with_static_members(h):
    instances = [f"instance-id-{i}" for i in range(1, 6)]
    joins = [join3(h, instance=instance) for instance in instances]
    assert all(parked(handle) for handle in joins[:4])
    assert error(joins[4]) == GROUP_MAX_SIZE_REACHED
    h.advance(INITIAL_DELAY + 1)
    h.advance(INITIAL_DELAY + 1)
    members = [assert_joined(handle, 1)["member_id"] for handle in joins[:4]]

    rejoins = [join3(h, m, instance=instance) for m, instance in zip(members, instances[:4], strict=True)]
    rejoins.append(join3(h, "", instance=instances[4]))
    for m, handle in zip(members, rejoins[:4], strict=True):
        assert_joined(handle, 1, member_id=m)
    assert error(rejoins[4]) == GROUP_MAX_SIZE_REACHED
    group = h.group(G)
    assert set(group.static_members) == set(instances[:4])


def test_S23_the_last_rejoiners_are_dropped_when_the_group_is_over_the_cap(h):
    ids = [f"clientId-member-{i}" for i in range(1, 7)]
    record = GroupMetadataValue("consumer", 1, "range", ids[0], 0, tuple(loaded_member(m) for m in ids))
    h.append_records(G_PARTITION, [(GroupMetadataKey(G), record)])
    h.load(G_PARTITION)
    # §9.6 step 5 (onGroupLoaded): a loaded group larger than group.max.size starts a rebalance.
    assert h.group(G).state == "PreparingRebalance"

    joins = [join3(h, m) for m in ids]
    for handle in joins[4:]:
        response = reply(handle)
        assert response["error_code"] == GROUP_MAX_SIZE_REACHED
        assert response["member_id"] == ""
    assert set(h.group(G).members) == set(ids[:4])
    if not all(handle.done for handle in joins[:4]):
        h.advance(REBALANCE + 1)
    for m, handle in zip(ids[:4], joins[:4], strict=True):
        assert_joined(handle, 2, member_id=m)
    group = h.group(G)
    assert group.state == "CompletingRebalance"
    assert group.generation == 2


# ===========================================================================================================
# D. Initial rebalance delay
# ===========================================================================================================


def test_S25_a_newcomer_during_the_delay_extends_it(h):
    """§2.7 step 3: the deadline at 50 is extended to 101 because B joined during the delay."""
    a_join = join3(h, rebalance=150)
    h.advance(49)
    b_join = join3(h, rebalance=150)
    h.advance(2)
    h.advance(26)  # t=77
    assert parked(a_join) and parked(b_join)
    h.advance(25)  # t=102
    a = assert_joined(a_join, 1)
    b = assert_joined(b_join, 1)
    assert a["leader"] == b["leader"] == a["member_id"]


def test_S27_the_initial_delay_does_not_end_early(h):
    """DJ InitialDelayedJoin.tryComplete = false: the only member waits out the whole delay."""
    a = pending_id(h)
    joined = h.send(join4(a))
    assert parked(joined)
    h.advance(INITIAL_DELAY)  # now == deadline: not yet (timers fire when now > deadline)
    assert parked(joined)
    assert h.group(G).state == "PreparingRebalance"
    h.advance(1)
    assert_joined(joined, 1, leader=a, member_id=a)


# ===========================================================================================================
# E. Generations, leader and follower rejoin, SyncGroup
# ===========================================================================================================


def test_S29_an_unchanged_followers_rejoin_does_not_rebalance(h):
    a, b = fx_two(h)
    response = assert_joined(join3(h, b), 2, leader=a, member_id=b)
    assert response["members"] == []
    group = h.group(G)
    assert group.state == "CompletingRebalance"
    assert group.generation == 2


def test_S31_follower_syncs_first_and_waits(h):
    a, b = fx_two(h)
    follower = h.send(sync(b, 2))
    assert parked(follower)
    leader = reply(h.send(sync(a, 2, {a: bytes([0]), b: bytes([1])})))
    assert leader["error_code"] == NONE
    assert leader["assignment"] == bytes([0])
    assert error(follower) == NONE
    assert reply(follower)["assignment"] == bytes([1])
    assert h.group(G).state == "Stable"


def test_S33_sync_from_unknown_group(h):
    assert error(h.send(sync("memberId", 1))) == UNKNOWN_MEMBER_ID


def test_S33_sync_from_unknown_member(h):
    fx_one(h)
    assert error(h.send(sync("blah", 1))) == UNKNOWN_MEMBER_ID


def test_S33_sync_from_illegal_generation(h):
    a = pending_id(h)
    joined = h.send(join4(a))
    h.advance(INITIAL_DELAY + 1)
    assert_joined(joined, 1)
    assert h.group(G).state == "CompletingRebalance"
    assert error(h.send(sync(a, 2, {a: b""}))) == ILLEGAL_GENERATION


def test_S35_the_leader_never_syncs_and_the_follower_is_told_to_rejoin(h):
    """§4.3: the leader's session (or the sync timer) removes it; the parked follower SyncGroup gets 27."""
    a, b = fx_two(h)
    follower = h.send(sync(b, 2))
    assert parked(follower)
    h.advance(600)
    assert error(follower) == REBALANCE_IN_PROGRESS
    assert a not in h.group(G).members


# ===========================================================================================================
# F. Heartbeats and sessions
# ===========================================================================================================


def test_S37_heartbeat_unknown_group(h):
    assert error(h.send(hb("memberId", -1))) == UNKNOWN_MEMBER_ID


def test_S37_heartbeat_unknown_member_in_existing_group(h):
    fx_one(h)
    assert error(h.send(hb("memberId", 1))) == UNKNOWN_MEMBER_ID


def test_S37_heartbeat_illegal_generation(h):
    a = fx_one(h)
    assert error(h.send(hb(a, 2))) == ILLEGAL_GENERATION


def test_S37_valid_heartbeat(h):
    a = fx_one(h)
    assert error(h.send(hb(a, 1))) == NONE


def test_S39_heartbeat_while_completing_rebalance_is_none(h):
    """§5.1 step 4: NONE in CompletingRebalance (GCT testHeartbeatRebalanceInProgress)."""
    a = pending_id(h)
    joined = h.send(join4(a))
    h.advance(INITIAL_DELAY + 1)
    assert_joined(joined, 1)
    assert h.group(G).state == "CompletingRebalance"
    assert error(h.send(hb(a, 1))) == NONE


def test_S41_session_expiry(h):
    a = fx_one(h)
    h.advance(600)
    assert error(h.send(hb(a, 1))) == UNKNOWN_MEMBER_ID
    group = h.group(G)
    assert group.state == "Empty"
    assert group.generation == 2
    assert group.members == {}


# S43 refers to S42 (even-numbered, not in the file); it is GCT testCommitMaintainsSession, whose session timeout
# is 1000: with 500 the second probe, 1100 ms after the first, could not succeed. Session 1000 is used here.
def test_S43_commits_keep_the_session_alive(h):
    a = fx_one(h, session=1000)
    h.advance(500)
    assert commit_errors(h.send(commit(a, 1, {TOPIC_0: 0}))) == {TOPIC_0: NONE}
    h.advance(600)
    assert error(h.send(hb(a, 1))) == NONE


def test_S43_without_the_commit_the_session_expires(h):
    a = fx_one(h, session=1000)
    h.advance(500)
    h.advance(600)
    assert error(h.send(hb(a, 1))) == UNKNOWN_MEMBER_ID


def test_S45_new_member_timeout_versus_session_timeout(h):
    """§5.3: after its first join completes, only the session timeout (305 s) applies, not the 300 s limit."""
    joined = join3(h, session=305000)
    h.advance(INITIAL_DELAY + 1)
    m = assert_joined(joined, 1)["member_id"]
    assert error(h.send(sync(m, 1, {m: b""}))) == NONE
    h.advance(300100)
    group = h.group(G)
    assert m in group.members
    assert group.state == "Stable"
    h.advance(305100)
    group = h.group(G)  # may be gone: the periodic expiry pass removes an Empty group without offsets
    assert group is None or m not in group.members
    assert error(h.send(hb(m, 1))) == UNKNOWN_MEMBER_ID


def test_S47_members_that_joined_in_the_last_rebalance_expire_after_join(h):
    fx_two(h)
    h.advance(REBALANCE + 1)
    group = h.group(G)
    assert group.state == "Empty"
    assert group.members == {}


def test_S47_members_that_joined_in_the_last_rebalance_expire_after_sync(h):
    a, b = fx_two(h)
    follower = h.send(sync(b, 2))
    assert error(h.send(sync(a, 2, {a: b"", b: b""}))) == NONE
    assert error(follower) == NONE
    h.advance(REBALANCE + 1)
    group = h.group(G)
    assert group.state == "Empty"
    assert group.members == {}


# ===========================================================================================================
# G. Sync timeout (pending-sync timer, 2.8.1+)
# ===========================================================================================================


def test_S49_nobody_syncs(h):
    """§4.5: the pending-sync timer removes every member that did not send SyncGroup."""
    members = fx_three(h)
    h.advance(250)
    for m in members:
        assert error(h.send(hb(m, 1))) == NONE
    h.advance(251)
    for m in members:
        assert error(h.send(hb(m, 1))) == UNKNOWN_MEMBER_ID
    group = h.group(G)
    assert group.state == "Empty"
    assert group.generation == 2


def test_S51_the_leader_never_syncs(h):
    m1, m2, m3 = fx_three(h)
    h.advance(250)
    for m in (m1, m2, m3):
        assert error(h.send(hb(m, 1))) == NONE
    syncs = [h.send(sync(m2, 1)), h.send(sync(m3, 1))]
    assert all(parked(handle) for handle in syncs)
    h.advance(251)
    assert [error(handle) for handle in syncs] == [REBALANCE_IN_PROGRESS, REBALANCE_IN_PROGRESS]
    assert error(h.send(hb(m1, 1))) == UNKNOWN_MEMBER_ID
    assert error(h.send(hb(m2, 1))) == REBALANCE_IN_PROGRESS
    assert error(h.send(hb(m3, 1))) == REBALANCE_IN_PROGRESS


# ===========================================================================================================
# H. Static membership (KIP-345)
# ===========================================================================================================


def static_first_member(h) -> str:
    """S53: a static member's first join (no 79, even on v4+); returns its member id."""
    joined = h.send(join4("", instance="groupInstanceId"))
    assert parked(joined)  # not answered 79 at once: it waits for the initial delay
    h.advance(INITIAL_DELAY + 1)
    m = assert_joined(joined, 1)["member_id"]
    assert re.fullmatch(f"groupInstanceId-{UUID_PATTERN}", m), m
    return m


def test_S53_a_static_member_never_gets_member_id_required(h):
    m = static_first_member(h)
    group = h.group(G)
    assert group.static_members == {"groupInstanceId": m}
    assert group.pending_members == frozenset()


def test_S55_known_instance_with_its_member_id_during_completing_rebalance(h):
    m = static_first_member(h)
    assert_joined(join3(h, m, instance="groupInstanceId"), 1, member_id=m)
    assert h.group(G).state == "CompletingRebalance"
    handle = h.send(sync(m, 1, {m: b""}, instance="groupInstanceId", ptype="consumer", pname="range"))
    assert error(handle) == NONE
    assert h.group(G).state == "Stable"


def restart_static_leader(h) -> tuple[str, str, str]:
    """S57's given and first step: FX-STATIC, then "leader" restarts with member id ""; returns (L, F, L2)."""
    leader, follower = fx_static(h)
    response = assert_joined(join3(h, "", instance="leader", protocols=PS), 1)
    return leader, follower, response["member_id"]


def test_S57_a_restarted_static_leader_is_told_the_old_leader_id(h):
    """§3.3 Stable fast path: persist, then reply with the pre-replacement leader id (quirk C.3)."""
    leader, follower = fx_static(h)
    before = len(h.records(G_PARTITION))
    response = assert_joined(join3(h, "", instance="leader", protocols=PS), 1, leader=leader)
    new_leader = response["member_id"]
    assert new_leader != leader
    assert re.fullmatch(f"leader-{UUID_PATTERN}", new_leader), new_leader
    assert response["members"] == []
    group = h.group(G)
    assert group.state == "Stable"
    assert group.generation == 1
    assert group.static_members == {"leader": new_leader, "follower": follower}
    # The replacement was persisted with every member (§3.3 step 2, Stable, 1).
    records = h.records(G_PARTITION)[before:]
    assert [key for key, _ in records] == [GroupMetadataKey(G)]
    assert {m.member_id for m in records[0][1].members} == {new_leader, follower}


def test_S57_the_old_leader_id_is_fenced_on_join(h):
    leader, _, _ = restart_static_leader(h)
    assert error(join3(h, leader, instance="leader")) == FENCED_INSTANCE_ID


def test_S57_the_old_leader_id_is_fenced_on_sync(h):
    leader, _, _ = restart_static_leader(h)
    assert error(h.send(sync(leader, 1, {}, instance="leader"))) == FENCED_INSTANCE_ID


def test_S57_the_old_leader_id_without_instance_is_unknown_on_sync(h):
    leader, _, _ = restart_static_leader(h)
    assert error(h.send(sync(leader, 1, {}))) == UNKNOWN_MEMBER_ID


# S57's Δ3.x part (JoinGroup v9, skip_assignment) is not part of our protocol.


def test_S59_a_known_static_leader_rejoining_in_stable_forces_a_rebalance(h):
    """§2.4 step 6 (Stable: the leader rebalances even with identical metadata); §3.4: statics expire by session."""
    leader, follower = fx_static(h, session=250)
    joined = join3(h, leader, instance="leader", protocols=PS)
    h.advance(REBALANCE + 1)
    response = assert_joined(joined, 2, leader=leader, member_id=leader)
    assert member_instances(response) == {"leader"}
    group = h.group(G)
    assert group.state == "CompletingRebalance"
    assert "follower" not in group.static_members
    assert follower not in group.members


def test_S61_restart_with_a_protocol_change_that_changes_the_group_protocol(h):
    """§3.3 Stable: the selected protocol would change, so a rebalance; §2.5: the non-rejoined leader is replaced."""
    _, follower = fx_static(h, session=1000)
    joined = join3(h, "", instance="follower", protocols=[("roundrobin", b"")])
    h.advance(REBALANCE + 1)
    response = assert_joined(joined, 2)
    new_follower = response["member_id"]
    assert new_follower != follower
    assert response["leader"] == new_follower
    assert response["protocol_name"] == "roundrobin"
    assert member_instances(response) == {"leader", "follower"}
    assert h.group(G).state == "CompletingRebalance"


def test_S63_static_restart_whose_persist_fails(h):
    """§3.3 step 2, Stable, 3: revert on append failure; MESSAGE_TOO_LARGE maps to -1 (§9.5)."""
    leader, follower = fx_static(h)
    h.fail_appends("MESSAGE_TOO_LARGE")
    response = reply(join3(h, "", instance="follower", protocols=[("range", b"")]))
    h.fail_appends(None)
    assert response["error_code"] == UNKNOWN_SERVER_ERROR
    assert response["generation_id"] == 1
    assert response["member_id"] == ""
    assert response["protocol_type"] == "consumer"
    assert response["members"] == []
    assert response["leader"] == leader  # the pre-replacement leader id (§3.3)
    group = h.group(G)
    assert group.state == "Stable"
    assert group.static_members == {"leader": leader, "follower": follower}

    # Quirk C.11 (Scala 2.8.2): the reverted member kept the new protocols, so this rejoin is "unchanged".
    assert_joined(join3(h, follower, instance="follower", protocols=[("range", b"")]), 1, member_id=follower)
    assert error(h.send(sync(follower, 1, instance="follower"))) == NONE


def test_S65_unchanged_static_follower_with_a_known_id_in_stable(h):
    leader, follower = fx_static(h)
    response = assert_joined(join3(h, follower, instance="follower", protocols=PS), 1, leader=leader)
    assert response["member_id"] == follower
    assert response["members"] == []
    assert h.group(G).state == "Stable"


def test_S67_fencing_on_sync(h):
    fx_static(h)
    assert error(h.send(sync("invalid", 1, instance="leader"))) == FENCED_INSTANCE_ID


def test_S67_fencing_on_heartbeat(h):
    leader, _ = fx_static(h)
    assert error(h.send(hb(leader, 1))) == NONE
    assert error(h.send(hb("invalidMember", 1, instance="leader"))) == FENCED_INSTANCE_ID


def test_S67_fencing_on_commit(h):
    leader, _ = fx_static(h)
    assert commit_errors(h.send(commit(leader, 1, {TOPIC_0: 0}))) == {TOPIC_0: NONE}
    handle = h.send(commit("invalidMember", 1, {TOPIC_0: 0}, instance="leader"))
    assert commit_errors(handle) == {TOPIC_0: FENCED_INSTANCE_ID}


# S69: the scenario lists no clock steps between the rejoins; with none, L's session deadline (set at the
# gen-2 completion) and the replacement's rebalance deadline are both 1052 and the outcome depends on which
# timer fires first. GCT advances 1 ms after each rejoin; so does this test, which puts L's session first.
def test_S69_a_duplicate_instance_fences_the_old_members_parked_sync(h):
    leader, follower = fx_static(h)
    leader_join = join3(h, leader, instance="leader")
    h.advance(1)
    assert h.group(G).state == "PreparingRebalance"
    follower_join = join3(h, follower, instance="follower")
    h.advance(1)
    leader_response = assert_joined(leader_join, 2, leader=leader, member_id=leader)
    assert member_instances(leader_response) == {"leader", "follower"}
    follower_response = assert_joined(follower_join, 2, leader=leader, member_id=follower)
    assert follower_response["members"] == []

    old_sync = h.send(sync(follower, 2, instance="follower"))
    assert parked(old_sync)
    duplicate = join3(h, "", instance="follower")
    assert error(old_sync) == FENCED_INSTANCE_ID  # §3.3 step 1
    assert h.group(G).state == "PreparingRebalance"

    h.advance(INITIAL_DELAY + 1)
    h.advance(REBALANCE + 1)
    response = assert_joined(duplicate, 3)
    new_follower = response["member_id"]
    assert new_follower != follower
    assert response["leader"] == new_follower
    assert member_instances(response) == {"follower"}
    group = h.group(G)
    assert set(group.members) == {new_follower}
    assert group.state == "CompletingRebalance"


def test_S71_a_static_member_that_misses_the_rebalance_stays_in_the_leaders_list(h):
    """§2.9 step 1: static non-rejoiners are kept and listed to the leader."""
    leader, follower = fx_static(h, session=1000)
    newcomer = join3(h, "", instance="newMember", protocols=PS)
    assert h.group(G).state == "PreparingRebalance"
    leader_join = join3(h, leader, instance="leader", protocols=PS)
    h.advance(REBALANCE + 1)
    response = assert_joined(leader_join, 2, leader=leader, member_id=leader)
    assert member_instances(response) == {"leader", "follower", "newMember"}
    new_response = assert_joined(newcomer, 2, leader=leader)
    assert new_response["members"] == []
    group = h.group(G)
    assert group.state == "CompletingRebalance"
    assert follower in group.members


def test_S73_static_non_rejoiners_hold_the_group_until_their_sessions_expire(h):
    """§2.9 step 3: with only static non-rejoiners left, another join timer starts; §3.4: they expire by session."""
    leader, follower = fx_static(h, session=1000)
    dynamic_join = join3(h, protocols=PS, session=1000)
    h.advance(REBALANCE + 1)
    response = assert_joined(dynamic_join, 2)
    d = response["member_id"]
    assert response["leader"] == d
    assert len(response["members"]) == 3
    group = h.group(G)
    assert group.state == "CompletingRebalance"
    assert set(group.static_members) == {"leader", "follower"}
    assert set(group.members) - set(group.static_members.values()) == {d}

    assert leave_errors(h.send(leave(follower))) == [NONE]
    assert h.group(G).state == "PreparingRebalance"

    h.advance(REBALANCE + 1)
    group = h.group(G)
    assert d not in group.members
    assert group.state == "PreparingRebalance"
    assert group.generation == 2
    assert set(group.members) == {leader}

    h.advance(REBALANCE + 1)
    group = h.group(G)
    assert group.state == "Empty"
    assert group.generation == 3
    assert group.leader is None
    assert group.members == {}


# ===========================================================================================================
# I. LeaveGroup
# ===========================================================================================================


def test_S75_leave_unknown_group(h):
    handle = h.send(leave("memberId"))
    assert error(handle) == NONE
    assert leave_errors(handle) == [UNKNOWN_MEMBER_ID]


# S75, v0-v2 single error_code form: out of scope (our LeaveGroup is the v3+ batch only).


def test_S75_leave_unknown_member_in_existing_group(h):
    a = pending_id(h)
    joined = h.send(join4(a))
    h.advance(INITIAL_DELAY + 1)
    assert_joined(joined, 1)
    handle = h.send(leave("consumerId"))
    assert error(handle) == NONE
    assert leave_errors(handle) == [UNKNOWN_MEMBER_ID]


def test_S75_valid_leave_empties_the_group_at_once(h):
    """§1.2 PreparingRebalance → Empty: the last member leaving completes the join at once, generation +1."""
    a = pending_id(h)
    joined = h.send(join4(a))
    h.advance(INITIAL_DELAY + 1)
    assert_joined(joined, 1)
    handle = h.send(leave(a))
    assert error(handle) == NONE
    assert leave_errors(handle) == [NONE]
    group = h.group(G)
    assert group.state == "Empty"
    assert group.generation == 2


def test_S77_batch_leave_of_static_members(h):
    fx_static(h)
    handle = h.send(leave(identity(instance="leader"), identity(instance="follower")))
    assert error(handle) == NONE
    assert leave_errors(handle) == [NONE, NONE]
    assert [(m["member_id"], m["group_instance_id"]) for m in reply(handle)["members"]] == [
        ("", "leader"),
        ("", "follower"),
    ]
    group = h.group(G)
    assert group.members == {}
    assert group.state == "Empty"


def test_S77_batch_leave_unknown_group(h):
    handle = h.send(leave(identity(instance="leader"), identity(instance="follower")))
    assert error(handle) == NONE
    assert leave_errors(handle) == [UNKNOWN_MEMBER_ID, UNKNOWN_MEMBER_ID]


def test_S77_batch_leave_with_a_fenced_instance(h):
    leader, follower = fx_static(h)
    handle = h.send(leave(identity(instance="leader"), identity("invalid-member", "follower")))
    assert leave_errors(handle) == [NONE, FENCED_INSTANCE_ID]
    assert set(h.group(G).members) == {follower}


def test_S77_batch_leave_with_an_unknown_instance(h):
    leader, follower = fx_static(h)
    handle = h.send(leave(identity(instance="unknown-instance"), identity(instance="follower")))
    assert leave_errors(handle) == [UNKNOWN_MEMBER_ID, NONE]
    assert set(h.group(G).members) == {leader}


# ===========================================================================================================
# J. Offsets
# ===========================================================================================================


def test_S79_simple_consumer_commit(h):
    """§7.2 step 2: a generation -1 commit creates the group Empty."""
    assert commit_errors(h.send(commit("", -1, {TOPIC_0: 0}))) == {TOPIC_0: NONE}
    group = h.group(G)
    assert group.state == "Empty"
    assert group.generation == 0
    assert group.protocol_type is None
    entry = described(h.send(describe(G)))
    assert entry["group_state"] == "Empty"
    assert entry["protocol_type"] == ""


def test_S81_round_trip_of_metadata(h):
    # S81's leader epoch: out of scope (our OffsetCommit carries no leader epoch); offset and metadata only.
    handle = h.send(commit("", -1, {TOPIC_0: (97, "some metadata")}))
    assert commit_errors(handle) == {TOPIC_0: NONE}
    result = h.send(fetch(G, [TOPIC_0]))
    assert error(result) == NONE
    assert fetched(result) == {TOPIC_0: Fetched(97, "some metadata", NONE)}


def test_S83_fetch_for_unknown_partition_of_unknown_group(h):
    handle = h.send(fetch(G, [TOPIC_0]))
    assert error(handle) == NONE
    assert fetched(handle) == {TOPIC_0: Fetched(-1, "", NONE)}


def test_S83_fetch_all_of_unknown_group(h):
    handle = h.send(fetch(G, ALL))
    assert error(handle) == NONE
    assert reply(handle)["topics"] == []


def test_S83_fetch_all_offsets(h):
    offsets = {TOPIC_0: 15, TopicPartition("topic", 1): 16, TopicPartition("other-topic", 0): 17}
    assert set(commit_errors(h.send(commit("", -1, offsets))).values()) == {NONE}
    handle = h.send(fetch(G, ALL))
    assert error(handle) == NONE
    assert fetched(handle) == {tp: Fetched(offset, "", NONE) for tp, offset in offsets.items()}


def test_S85_commit_during_preparing_rebalance_is_accepted(h):
    """§7.2 step 8 / §10.4: commits of the current generation are accepted in PreparingRebalance and refresh
    the session. B's rebalance timeout (2000) puts the join deadline (2051) after A's session deadline (551),
    so only the commit's refresh can keep A a member at t=651."""
    a = fx_one(h)
    newcomer = join3(h, rebalance=2000)
    assert parked(newcomer)
    assert h.group(G).state == "PreparingRebalance"
    h.advance(400)  # t=451
    assert commit_errors(h.send(commit(a, 1, {TOPIC_0: 5}))) == {TOPIC_0: NONE}
    assert fetched_offset(h, TOPIC_0) == 5
    h.advance(200)  # t=651: past A's original session deadline
    group = h.group(G)
    assert a in group.members
    assert group.state == "PreparingRebalance"


# S87 (TxnOffsetCommit validation): out of scope, TxnOffsetCommit is not part of our protocol.


def test_S89_fetch_does_not_see_a_commit_in_flight(h):
    """§7.3 step 6: the cache changes only when the append completes."""
    h.hold_appends()
    handle = h.send(commit("", -1, {TOPIC_0: 5}))
    assert parked(handle)
    assert h.held_appends == 1
    assert fetched_offset(h, TOPIC_0) == -1
    h.release_appends()
    assert commit_errors(handle) == {TOPIC_0: NONE}
    assert fetched_offset(h, TOPIC_0) == 5


APPEND_ERROR_MAPPING = [
    ("NOT_LEADER_OR_FOLLOWER", NOT_COORDINATOR),
    ("NOT_ENOUGH_REPLICAS", COORDINATOR_NOT_AVAILABLE),
    ("NOT_ENOUGH_REPLICAS_AFTER_APPEND", COORDINATOR_NOT_AVAILABLE),
    ("UNKNOWN_TOPIC_OR_PARTITION", COORDINATOR_NOT_AVAILABLE),
    ("MESSAGE_TOO_LARGE", INVALID_COMMIT_OFFSET_SIZE),
    ("RECORD_LIST_TOO_LARGE", INVALID_COMMIT_OFFSET_SIZE),
    ("INVALID_FETCH_SIZE", INVALID_COMMIT_OFFSET_SIZE),
    ("CORRUPT_MESSAGE", CORRUPT_MESSAGE),
]


@pytest.mark.parametrize(("append_error", "expected"), APPEND_ERROR_MAPPING)
def test_S89_append_errors_are_mapped_and_the_cache_is_unchanged(h, append_error, expected):
    """§7.3 step 5 / §9.5 (offset commit column)."""
    h.fail_appends(append_error)
    assert commit_errors(h.send(commit("", -1, {TOPIC_0: 5}))) == {TOPIC_0: expected}
    assert fetched_offset(h, TOPIC_0) == -1
    h.fail_appends(None)
    assert commit_errors(h.send(commit("", -1, {TOPIC_0: 3}))) == {TOPIC_0: NONE}
    h.fail_appends(append_error)
    assert commit_errors(h.send(commit("", -1, {TOPIC_0: 5}))) == {TOPIC_0: expected}
    assert fetched_offset(h, TOPIC_0) == 3


@pytest.mark.parametrize(("append_error", "expected"), APPEND_ERROR_MAPPING)
def test_S89_held_append_completing_with_an_error_is_mapped(h, append_error, expected):
    h.hold_appends()
    handle = h.send(commit("", -1, {TOPIC_0: 5}))
    assert parked(handle)
    h.complete_held_append(append_error)
    assert commit_errors(handle) == {TOPIC_0: expected}
    assert fetched_offset(h, TOPIC_0) == -1


def test_S89_first_commit_fails_second_succeeds(h):
    """GMT testOffsetCommitFailureWithAnotherPending: the cache holds the second commit."""
    h.hold_appends()
    first = h.send(commit("", -1, {TOPIC_0: 5}))
    second = h.send(commit("", -1, {TOPIC_0: 6}))
    assert h.held_appends == 2
    h.complete_held_append("NOT_ENOUGH_REPLICAS")
    assert commit_errors(first) == {TOPIC_0: COORDINATOR_NOT_AVAILABLE}
    assert parked(second)
    assert fetched_offset(h, TOPIC_0) == -1
    h.complete_held_append()
    assert commit_errors(second) == {TOPIC_0: NONE}
    assert fetched_offset(h, TOPIC_0) == 6


def test_S89_first_commit_succeeds_second_fails(h):
    """GMT testOffsetCommitWithAnotherPending, failure variant: the cache keeps the first commit."""
    h.hold_appends()
    first = h.send(commit("", -1, {TOPIC_0: 5}))
    second = h.send(commit("", -1, {TOPIC_0: 6}))
    h.complete_held_append()
    assert commit_errors(first) == {TOPIC_0: NONE}
    assert fetched_offset(h, TOPIC_0) == 5
    h.complete_held_append("NOT_LEADER_OR_FOLLOWER")
    assert commit_errors(second) == {TOPIC_0: NOT_COORDINATOR}
    assert fetched_offset(h, TOPIC_0) == 5


# ===========================================================================================================
# K. Describe, List, Delete, OffsetDelete
# ===========================================================================================================


def joined_single_member(h) -> str:
    """One dynamic member after its join: generation 1, CompletingRebalance, no SyncGroup yet."""
    a = pending_id(h)
    joined = h.send(join4(a))
    h.advance(INITIAL_DELAY + 1)
    assert_joined(joined, 1, leader=a)
    return a


def listed_count(h, *states: str) -> int:
    handle = h.send(list_groups(*states))
    assert error(handle) == NONE
    return len(listed(handle))


def test_S91_list_includes_stable_groups(h):
    fx_one(h)
    handle = h.send(list_groups())
    assert error(handle) == NONE
    assert listed(handle) == [(G, "consumer", "Stable")]


def test_S91_list_includes_rebalancing_groups(h):
    joined_single_member(h)
    handle = h.send(list_groups())
    assert error(handle) == NONE
    assert listed(handle) == [(G, "consumer", "CompletingRebalance")]


def test_S91_list_with_a_state_filter(h):
    a = joined_single_member(h)
    assert listed_count(h, "CompletingRebalance") == 1
    for other in STATES:
        if other != "CompletingRebalance":
            assert listed_count(h, other) == 0, other
    assert error(h.send(sync(a, 1, {a: b""}))) == NONE
    assert listed_count(h, "Stable") == 1
    assert leave_errors(h.send(leave(a))) == [NONE]
    assert listed_count(h, "Empty") == 1
    for other in STATES:
        if other != "Empty":
            assert listed_count(h, other) == 0, other


def test_every_group_is_a_classic_one_to_a_type_filter(h):
    fx_one(h)
    classic = {**list_groups(), "types_filter": ["Classic"]}  # Kafka's types match in any case
    assert len(listed(h.send(classic))) == 1
    assert listed(h.send({**list_groups(), "types_filter": ["consumer"]})) == []
    assert len(listed(h.send({**list_groups(), "types_filter": []}))) == 1


def test_S93_delete_non_empty_group(h):
    joined_single_member(h)
    assert deleted(h.send(delete(G))) == {G: NON_EMPTY_GROUP}


def test_S93_delete_empty_group(h):
    a = joined_single_member(h)
    assert leave_errors(h.send(leave(a))) == [NONE]
    assert deleted(h.send(delete(G))) == {G: NONE}
    assert h.group(G) is None


def test_S93_delete_empty_group_with_stored_offsets(h):
    a = fx_one(h)
    assert commit_errors(h.send(commit(a, 1, {TOPIC_0: 0}))) == {TOPIC_0: NONE}
    assert leave_errors(h.send(leave(a))) == [NONE]
    assert deleted(h.send(delete(G))) == {G: NONE}
    assert described_state(h) == "Dead"
    assert fetched_offset(h, TOPIC_0) == -1


# ===========================================================================================================
# L. State machine and protocol logic (reached through the protocol)
# ===========================================================================================================


def test_S95_allowed_transitions_are_taken(h):
    """§1.1/§1.2, observed step by step through h.group(G).state."""
    a = pending_id(h)
    assert state(h) == "Empty"
    a_join = h.send(join4(a))
    assert state(h) == "PreparingRebalance"  # Empty → PreparingRebalance
    h.advance(INITIAL_DELAY + 1)
    assert_joined(a_join, 1)
    assert state(h) == "CompletingRebalance"  # PreparingRebalance → CompletingRebalance
    assert error(h.send(sync(a, 1, {a: b""}))) == NONE
    assert state(h) == "Stable"  # CompletingRebalance → Stable
    b_join = join3(h)
    assert state(h) == "PreparingRebalance"  # Stable → PreparingRebalance
    assert_joined(join3(h, a), 2)
    b = assert_joined(b_join, 2)["member_id"]
    assert state(h) == "CompletingRebalance"
    assert leave_errors(h.send(leave(b))) == [NONE]
    assert state(h) == "PreparingRebalance"  # CompletingRebalance → PreparingRebalance
    assert leave_errors(h.send(leave(a))) == [NONE]
    assert state(h) == "Empty"  # PreparingRebalance → Empty
    assert deleted(h.send(delete(G))) == {G: NONE}
    assert state(h) is None  # Empty → Dead, then removed from the cache
    assert described_state(h) == "Dead"


def group_in(h, wanted: str) -> None:
    a = pending_id(h)
    joined = h.send(join4(a))
    if wanted == "PreparingRebalance":
        return
    h.advance(INITIAL_DELAY + 1)
    assert_joined(joined, 1)
    if wanted == "CompletingRebalance":
        return
    assert error(h.send(sync(a, 1, {a: b""}))) == NONE
    if wanted == "Stable":
        return
    assert leave_errors(h.send(leave(a))) == [NONE]


@pytest.mark.parametrize("live_state", ["Empty", "PreparingRebalance", "CompletingRebalance", "Stable"])
def test_S95_unload_moves_every_live_state_to_dead(h, live_state):
    """§1.2: Stable/PreparingRebalance/CompletingRebalance/Empty → Dead on unload; §9.7: then NOT_COORDINATOR."""
    group_in(h, live_state)
    assert state(h) == live_state
    h.unload(G_PARTITION)
    assert state(h) in (None, "Dead")
    assert described(h.send(describe(G)))["error_code"] == NOT_COORDINATOR


def test_S95_sync_never_makes_an_empty_or_preparing_group_stable(h):
    """Rejected: Empty → Stable (SyncGroup on Empty is 25) and PreparingRebalance → Stable (27), §4.2 step 4."""
    a = pending_id(h)
    assert error(h.send(sync(a, 0, {a: b""}))) == UNKNOWN_MEMBER_ID
    assert state(h) == "Empty"
    h.send(join4(a))
    assert state(h) == "PreparingRebalance"
    assert error(h.send(sync(a, 0, {a: b""}))) == REBALANCE_IN_PROGRESS
    assert state(h) == "PreparingRebalance"


def test_S95_a_preparing_group_does_not_restart_its_rebalance(h):
    """canRebalance is false in PreparingRebalance: a newcomer does not push the join deadline (551) back."""
    a = fx_one(h)
    b_join = join3(h)  # t=51: Stable → PreparingRebalance, deadline 51 + 500
    h.advance(300)
    assert error(h.send(hb(a, 1))) == REBALANCE_IN_PROGRESS
    c_join = join3(h)  # t=351
    assert parked(b_join) and parked(c_join)
    h.advance(201)  # t=552
    b = assert_joined(b_join, 2)["member_id"]
    c = assert_joined(c_join, 2)["member_id"]
    group = h.group(G)
    assert set(group.members) == {b, c}  # A did not rejoin: evicted at the deadline
    assert group.state == "CompletingRebalance"


def test_S97_an_empty_group_accepts_any_non_empty_type_and_list(h):
    assert error(h.send(join4("", [("foo", b"")], protocol_type="anything"))) == MEMBER_ID_REQUIRED
    assert h.group(G).state == "Empty"
    # §2.3 step 2: an empty protocol type or an empty list is rejected even by an Empty group.
    assert error(h.send(join4("", [("foo", b"")], protocol_type=""))) == INCONSISTENT_GROUP_PROTOCOL
    assert error(h.send(join4("", [], protocol_type="anything"))) == INCONSISTENT_GROUP_PROTOCOL


def test_S97_protocol_compatibility_counts_every_current_member(h):
    """§2.3 step 2: some requested protocol must be listed by every member (probes answer 79 if accepted)."""
    m = pending_id(h)
    assert parked(h.send(join4(m, PS)))
    assert h.group(G).state == "PreparingRebalance"

    def probe(protocols, protocol_type="consumer") -> int:
        return error(h.send(join4("", [(name, b"") for name in protocols], protocol_type=protocol_type)))

    assert probe(["roundrobin", "foo"]) == MEMBER_ID_REQUIRED
    assert probe(["range", "foo"]) == MEMBER_ID_REQUIRED
    assert probe(["foo", "bar"]) == INCONSISTENT_GROUP_PROTOCOL

    assert parked(join3(h, protocols=[("roundrobin", b""), ("blah", b"")]))
    assert len(h.group(G).members) == 2
    assert probe(["roundrobin", "foo"]) == MEMBER_ID_REQUIRED
    assert probe(["roundrobin", "foo"], protocol_type="invalid_type") == INCONSISTENT_GROUP_PROTOCOL
    assert probe(["range", "foo"]) == INCONSISTENT_GROUP_PROTOCOL


def test_S97_a_sole_stable_member_cannot_switch_to_a_new_protocol_list(h):
    """Quirk C.4: the member's own old protocols are counted."""
    a = fx_one(h)
    assert error(h.send(join4(a, [("foo", b"")]))) == INCONSISTENT_GROUP_PROTOCOL
    group = h.group(G)
    assert group.state == "Stable"
    assert group.generation == 1


def test_S99_offsets_are_not_expired_right_after_the_group_empties_nor_during_a_rebalance():
    """§7.6 (a): the Empty clock starts at the transition; (d): nothing expires while rebalancing."""
    h = new_harness(**RETENTION_CONFIG)
    subscribed = [("range", consumer_subscription("foo"))]
    a_join = join3(h, protocols=subscribed, session=120000)
    h.advance(INITIAL_DELAY + 1)
    a = assert_joined(a_join, 1)["member_id"]
    assert error(h.send(sync(a, 1, {a: b""}))) == NONE
    assert commit_errors(h.send(commit(a, 1, {FOO_0: 37}))) == {FOO_0: NONE}
    h.advance(RETENTION_MS + 1)

    assert leave_errors(h.send(leave(a))) == [NONE]
    assert state(h) == "Empty"
    h.expire_offsets()
    assert fetched_offset(h, FOO_0) == 37

    b_join = join3(h, protocols=subscribed)
    assert state(h) == "PreparingRebalance"
    h.expire_offsets()
    assert fetched_offset(h, FOO_0) == 37
    assert not any(key == OffsetCommitKey(G, "foo", 0) and value is None for key, value in h.records(G_PARTITION))

    # Control: once Empty for the whole retention, the offset does expire.
    assert parked(b_join)
    (b,) = h.group(G).members
    assert leave_errors(h.send(leave(b))) == [NONE]
    h.advance(INITIAL_DELAY + 1)
    assert state(h) == "Empty"
    h.advance(RETENTION_MS + 1)
    h.expire_offsets()
    assert fetched_offset(h, FOO_0) == -1


def test_S101_replacement_fences_a_parked_join(h):
    """§3.3 step 1 (GMT testReplaceGroupInstance): the old id's parked JoinGroup gets 82; the leader moves."""
    leader, _ = fx_static(h)
    old_join = join3(h, leader, instance="leader", protocols=PS)  # Stable leader rejoin: rebalance, parked
    assert parked(old_join)
    assert state(h) == "PreparingRebalance"
    new_join = join3(h, "", instance="leader", protocols=PS)
    response = reply(old_join)
    assert response["error_code"] == FENCED_INSTANCE_ID
    assert response["member_id"] == leader
    assert parked(new_join)
    group = h.group(G)
    (new_leader,) = [m for m, member in group.members.items() if member.group_instance_id == "leader"]
    assert new_leader != leader
    assert group.leader == new_leader
    assert group.static_members["leader"] == new_leader


def test_S101_replacement_fences_a_parked_sync(h):
    """§3.3 step 1: the leader's SyncGroup, parked while its append is in flight, gets 82."""
    leader_join = join3(h, instance="leader", protocols=PS)
    follower_join = join3(h, instance="follower", protocols=PS)
    h.advance(INITIAL_DELAY + 1)
    h.advance(REBALANCE + 1)
    leader = assert_joined(leader_join, 1)["member_id"]
    follower = assert_joined(follower_join, 1, leader=leader)["member_id"]
    h.hold_appends()
    leader_sync = h.send(sync(leader, 1, {leader: b"L", follower: b"F"}))
    assert parked(leader_sync)
    new_join = join3(h, "", instance="leader", protocols=PS)
    assert error(leader_sync) == FENCED_INSTANCE_ID
    assert parked(new_join)
    group = h.group(G)
    assert group.leader == group.static_members["leader"] != leader
    assert group.state == "PreparingRebalance"  # §3.3 step 2: CompletingRebalance always rebalances
    # §4.2: the stale append's completion must not make the group Stable (state and generation re-checked).
    h.release_appends()
    assert state(h) == "PreparingRebalance"


# ===========================================================================================================
# M. Log, loading, expiry
# ===========================================================================================================


def test_S103_offsets_without_a_group_record(h):
    offsets = {FOO_0: 23, FOO_1: 455, TopicPartition("bar", 0): 8}
    h.append_records(
        G_PARTITION,
        [
            (OffsetCommitKey(G, tp.topic, tp.partition), OffsetCommitValue(offset, "", 0))
            for tp, offset in offsets.items()
        ],
    )
    h.load(G_PARTITION)
    group = h.group(G)
    assert group.state == "Empty"
    assert group.generation == 0
    assert group.protocol_type is None
    for tp, offset in offsets.items():
        assert fetched_offset(h, tp) == offset


def test_S105_offset_record_followed_by_its_tombstone(h):
    h.append_records(
        G_PARTITION,
        [
            (OffsetCommitKey(G, "foo", 0), OffsetCommitValue(23, "", 0)),
            (OffsetCommitKey(G, "foo", 1), OffsetCommitValue(455, "", 0)),
            (OffsetCommitKey(G, "foo", 0), None),
        ],
    )
    h.load(G_PARTITION)
    assert fetched_offset(h, FOO_0) == -1
    assert fetched_offset(h, FOO_1) == 455
    assert set(h.group(G).offsets) == {FOO_1}


def group_record(generation: int = 1, members=("member",)) -> GroupMetadataValue:
    return GroupMetadataValue(
        "consumer", generation, "range", members[0] if members else None, 0, tuple(loaded_member(m) for m in members)
    )


def test_S105_group_record_followed_by_a_group_tombstone(h):
    h.append_records(G_PARTITION, [(GroupMetadataKey(G), group_record())])
    h.append_records(G_PARTITION, [(GroupMetadataKey(G), None)])
    h.load(G_PARTITION)
    assert h.group(G) is None
    assert described_state(h) == "Dead"


def test_S105_offsets_written_after_the_group_was_removed(h):
    h.append_records(G_PARTITION, [(GroupMetadataKey(G), group_record(generation=5))])
    h.append_records(G_PARTITION, [(GroupMetadataKey(G), None)])
    h.append_records(
        G_PARTITION,
        [
            (OffsetCommitKey(G, "foo", 0), OffsetCommitValue(23, "", 0)),
            (OffsetCommitKey(G, "foo", 1), OffsetCommitValue(455, "", 0)),
        ],
    )
    h.load(G_PARTITION)
    group = h.group(G)
    assert group.state == "Empty"
    assert group.generation == 0
    assert group.members == {}
    assert fetched_offset(h, FOO_0) == 23
    assert fetched_offset(h, FOO_1) == 455


def load_stable_group(h) -> str:
    m = "clientId-loaded"
    record = GroupMetadataValue("consumer", 935, "range", m, 0, (loaded_member(m, assignment=b"assigned"),))
    h.append_records(G_PARTITION, [(GroupMetadataKey(G), record)])
    h.load(G_PARTITION)
    return m


def test_S107_loaded_stable_group(h):
    m = load_stable_group(h)
    group = h.group(G)
    assert group.state == "Stable"
    assert group.generation == 935
    assert group.leader == m
    assert group.protocol_name == "range"
    assert group.protocol_type == "consumer"
    assert set(group.members) == {m}
    assert group.members[m].assignment == b"assigned"


def test_S107_a_loaded_members_session_starts_at_load_time(h):
    """§9.6 step 5 (onGroupLoaded): every member's session timer starts at load time."""
    h.advance(1000)
    m = load_stable_group(h)
    h.advance(499)
    assert set(h.group(G).members) == {m}
    h.advance(2)  # t=1501 > 1000 + 500
    group = h.group(G)
    assert group.members == {}
    assert group.state == "Empty"
    assert group.generation == 936


def test_S109_unloading_answers_parked_joins(h):
    a = pending_id(h)
    joined = h.send(join4(a))
    assert parked(joined)
    h.unload(G_PARTITION)
    assert error(joined) == NOT_COORDINATOR


def test_S109_unloading_answers_parked_syncs(h):
    _, b = fx_two(h)
    follower = h.send(sync(b, 2))
    assert parked(follower)
    h.unload(G_PARTITION)
    assert error(follower) == NOT_COORDINATOR


def test_S109_every_later_request_for_the_group_is_not_coordinator(h):
    a = fx_one(h)
    h.unload(G_PARTITION)
    assert error(h.send(join4(a))) == NOT_COORDINATOR
    assert error(h.send(join4(""))) == NOT_COORDINATOR
    assert error(h.send(sync(a, 1))) == NOT_COORDINATOR
    assert error(h.send(hb(a, 1))) == NOT_COORDINATOR
    assert commit_errors(h.send(commit(a, 1, {TOPIC_0: 1}))) == {TOPIC_0: NOT_COORDINATOR}
    assert error(h.send(fetch(G, [TOPIC_0]))) == NOT_COORDINATOR
    assert error(h.send(leave(a))) == NOT_COORDINATOR
    assert described(h.send(describe(G)))["error_code"] == NOT_COORDINATOR
    assert deleted(h.send(delete(G))) == {G: NOT_COORDINATOR}


def offset_tombstones(records) -> list[OffsetCommitKey]:
    return [key for key, value in records if isinstance(key, OffsetCommitKey) and value is None]


def commit_with_expiry(h) -> None:
    """A simple group with foo-0 expiring at now + 1 and foo-1 at now + 3 (OffsetCommit retention_time_ms)."""
    assert commit_errors(h.send(commit("", -1, {FOO_0: 1}, retention_time_ms=1))) == {FOO_0: NONE}
    assert commit_errors(h.send(commit("", -1, {FOO_1: 2}, retention_time_ms=3))) == {FOO_1: NONE}
    offsets = h.group(G).offsets
    assert offsets[FOO_0].expire_timestamp == h.now + 1
    assert offsets[FOO_1].expire_timestamp == h.now + 3


def test_S111_expiry_with_explicit_expire_timestamps(h):
    commit_with_expiry(h)
    before = len(h.records(G_PARTITION))
    h.advance(2)
    h.expire_offsets()
    assert fetched_offset(h, FOO_0) == -1
    assert fetched_offset(h, FOO_1) == 2
    assert h.group(G) is not None
    assert offset_tombstones(h.records(G_PARTITION)[before:]) == [OffsetCommitKey(G, "foo", 0)]


def test_S113_offsets_only_group(h):
    """§7.6 after removal: a group tombstone only if generation > 0; an offsets-only group has none."""
    commit_with_expiry(h)
    assert h.group(G).generation == 0
    before = len(h.records(G_PARTITION))
    h.advance(4)
    h.expire_offsets()
    new_records = h.records(G_PARTITION)[before:]
    assert sorted(offset_tombstones(new_records)) == [OffsetCommitKey(G, "foo", 0), OffsetCommitKey(G, "foo", 1)]
    assert not any(isinstance(key, GroupMetadataKey) for key, _ in new_records)
    assert h.group(G) is None
    assert described_state(h) == "Dead"


def test_S115_simple_consumer_retention():
    """§7.6 (c): no protocol type, so each offset expires R after its own commit timestamp."""
    h = new_harness(**RETENTION_CONFIG)
    h.advance(100)  # t0
    assert commit_errors(h.send(commit("", -1, {FOO_0: 5}))) == {FOO_0: NONE}
    h.advance(RETENTION_MS - 1)
    h.expire_offsets()
    assert fetched_offset(h, FOO_0) == 5
    h.advance(2)
    h.expire_offsets()
    assert fetched_offset(h, FOO_0) == -1
    assert h.group(G) is None
    assert described_state(h) == "Dead"
