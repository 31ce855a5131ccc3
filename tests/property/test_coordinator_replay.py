"""Records are the source of truth: what a coordinator holds in a settled group is what replaying its log rebuilds.

A generated workload (dynamic two-step joins, static joins and restarts, leader and follower SyncGroups,
heartbeats, simple and member OffsetCommits, LeaveGroups, DeleteGroups, time passing, reloads) drives
``zkcoord.testing.CoordinatorHarness``; then the partition is unloaded and loaded again (§9.6, §9.7), and the
groups are compared with what they were. "§" numbers point to /work/shared/specs/group-coordinator.md.

* A group that is Stable or Empty must come back unchanged (§9.4: the in-memory state of a settled group
  changes only after a successful append; §9.3: every SyncGroup writes the whole group), except an Empty
  group at generation 0 with no offsets, which never had a record (§2.3 step 5, §9.3) and so is absent.
* A group in PreparingRebalance or CompletingRebalance is not compared member by member: its in-memory
  generation is not persisted (§10.5). It must come back Stable or Empty (§9.6 step 5), or not at all if it
  never had a record and holds no offsets, with the offsets it had, at no later generation (an earlier one if
  it was CompletingRebalance), and as it was the last time it was seen settled.
* Replaying the same log twice gives the same groups (§9.6), and so does replaying the log as compaction
  leaves it, with or without the tombstones (§9.8).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from coordinator_requests import commit, delete, hb, identity, join4, leave, sync
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zkcoord.testing import CoordinatorHarness

CONFIG = {
    "group.min.session.timeout.ms": 10,
    "group.max.session.timeout.ms": 600000,
    "group.initial.rebalance.delay.ms": 50,
    "group.max.size": 6,
    "offsets.topic.num.partitions": 1,
}
PARTITION = 0
GROUPS = ("alpha", "beta")
INSTANCES = ("inst-1", "inst-2", "inst-3")
CLIENTS = ("client-a", "client-b", "client-c")
PROTOCOL_SETS = (
    (("range", b"r1"),),
    (("range", b"r2"),),
    (("roundrobin", b"x1"), ("range", b"r1")),
    (("range", b"r3"), ("roundrobin", b"x2")),
)
SESSIONS = (60, 300, 1200, 20000)
REBALANCES = (100, 400, 1500)
TOPICS = ("t0", "t1")
COMMIT_METADATA = ("", "meta", "ünïcode")

STABLE, EMPTY = "Stable", "Empty"
SETTLED = (STABLE, EMPTY)
MEMBER_ID_REQUIRED = 79

# ---- the workload ----------------------------------------------------------------------------------------

group_ids = st.sampled_from(GROUPS + GROUPS[:1])  # alpha twice as often as beta
picks = st.integers(0, 15)  # which member id to use, modulo the candidates of the moment
generation_modes = st.sampled_from(("current", "current", "current", "stale", "next"))
join_fields = st.tuples(
    st.integers(0, len(PROTOCOL_SETS) - 1),
    st.sampled_from((0, 1, 2, 3, 3, 3)),  # mostly sessions that outlive the workload's time steps
    st.integers(0, len(REBALANCES) - 1),
    st.integers(0, len(CLIENTS) - 1),
)
# -1: the broker's retention; else an explicit one, written as an offset value v1 with an expire timestamp (§9.3).
retentions = st.sampled_from((-1, -1, 86_400_000))
offset_lists = st.lists(
    st.tuples(st.sampled_from(TOPICS), st.integers(0, 2), st.integers(0, 10_000), st.sampled_from(COMMIT_METADATA)),
    min_size=1,
    max_size=3,
)

# Reaching Stable takes joins, time past the initial delay and a leader SyncGroup at the current generation, in
# that order, with nothing disruptive in between; the weights make that common enough.
WEIGHTED_OPERATIONS = (
    (6, st.tuples(st.just("join_new"), group_ids, join_fields, st.just(True))),
    (1, st.tuples(st.just("join_new"), group_ids, join_fields, st.just(False))),  # leaves a pending member
    (2, st.tuples(st.just("join_known"), group_ids, picks, join_fields)),
    (4, st.tuples(st.just("join_static"), group_ids, st.sampled_from(INSTANCES), join_fields)),
    (1, st.tuples(st.just("sync_leader"), group_ids, generation_modes, st.integers(0, 255), st.booleans())),
    (1, st.tuples(st.just("sync"), group_ids, picks, generation_modes)),
    (5, st.tuples(st.just("sync_all"), group_ids, st.integers(0, 255))),
    (1, st.tuples(st.just("heartbeat"), group_ids, picks, generation_modes)),
    (3, st.tuples(st.just("heartbeat_all"), group_ids)),
    (4, st.tuples(st.just("rejoin_all"), group_ids)),
    (6, st.tuples(st.just("settle"), group_ids, st.integers(0, 255))),
    (2, st.tuples(st.just("commit_simple"), group_ids, offset_lists, retentions)),
    (2, st.tuples(st.just("commit_member"), group_ids, picks, generation_modes, offset_lists, retentions)),
    (1, st.tuples(st.just("leave"), group_ids, picks, st.booleans())),
    (1, st.tuples(st.just("delete"), group_ids)),
    (5, st.tuples(st.just("advance"), st.sampled_from((51, 60, 120, 250)))),
    (2, st.tuples(st.just("advance"), st.integers(1, 700))),
    (1, st.tuples(st.just("reload"))),
)
WORKLOAD = st.tuples(
    st.lists(
        st.one_of([strategy for weight, strategy in WEIGHTED_OPERATIONS for _ in range(weight)]),
        min_size=20,
        max_size=50,
    ),
    # Often end settled, so that the final comparison covers Stable groups with members.
    st.lists(st.tuples(st.just("settle"), group_ids, st.integers(0, 255)), max_size=2),
).map(lambda parts: parts[0] + parts[1])
REPLAY_SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@dataclass
class Driver:
    """Sends the generated operations; remembers every member id it was given, to reuse stale ones too."""

    h: CoordinatorHarness
    seen_ids: dict[str, list[str]] = field(default_factory=lambda: {g: [] for g in GROUPS})
    handles: list = field(default_factory=list)

    def send(self, request: dict):
        handle = self.h.send(request)
        self.handles.append(handle)
        return handle

    def _remember(self, group: str, member_id: str) -> None:
        if member_id and member_id not in self.seen_ids[group]:
            self.seen_ids[group].append(member_id)

    def candidates(self, group: str) -> list[str]:
        snapshot = self.h.group(group)
        live = [] if snapshot is None else list(snapshot.members) + sorted(snapshot.pending_members)
        return live + [member_id for member_id in self.seen_ids[group] if member_id not in live]

    def pick(self, group: str, index: int) -> str:
        candidates = self.candidates(group)
        return candidates[index % len(candidates)] if candidates else "never-seen-member"

    def instance_of(self, group: str, member_id: str) -> str | None:
        snapshot = self.h.group(group)
        if snapshot is None or member_id not in snapshot.members:
            return None
        return snapshot.members[member_id].group_instance_id

    def generation(self, group: str, mode: str) -> int:
        snapshot = self.h.group(group)
        current = 0 if snapshot is None else snapshot.generation
        return {"current": current, "stale": current - 1, "next": current + 1}[mode]

    def join(self, group: str, member_id: str, instance: str | None, fields) -> object:
        protocols, session, rebalance, client = fields
        request = join4(
            member_id,
            PROTOCOL_SETS[protocols],
            instance,
            SESSIONS[session],
            REBALANCES[rebalance],
            group=group,
        )
        request["client_id"] = CLIENTS[client]
        return self.send(request)

    def _sync(self, group: str, member_id: str, mode: str) -> None:
        generation = self.generation(group, mode)
        self.send(sync(member_id, generation, None, self.instance_of(group, member_id), group=group))

    def _heartbeat(self, group: str, member_id: str, mode: str) -> None:
        self.send(hb(member_id, self.generation(group, mode), self.instance_of(group, member_id), group=group))

    def run(self, operation: tuple) -> None:
        kind = operation[0]
        if kind == "join_new":
            _, group, fields, second_step = operation
            first = self.join(group, "", None, fields)
            if first.done and first.response["error_code"] == MEMBER_ID_REQUIRED:
                self._remember(group, first.response["member_id"])
                if second_step:
                    self.join(group, first.response["member_id"], None, fields)
        elif kind == "join_known":
            _, group, index, fields = operation
            member_id = self.pick(group, index)
            self.join(group, member_id, self.instance_of(group, member_id), fields)
        elif kind == "join_static":
            _, group, instance, fields = operation
            self.join(group, "", instance, fields)
        elif kind == "sync_leader":
            _, group, mode, salt, with_assignments = operation
            snapshot = self.h.group(group)
            leader = None if snapshot is None else snapshot.leader
            if leader is None:
                return
            members = list(snapshot.members) if with_assignments else []
            # Some members get nothing (stored as b"", §4.2), and one id that is not a member is ignored.
            assignments = {m: bytes([salt, i]) for i, m in enumerate(members) if (salt + i) % 3}
            if with_assignments:
                assignments["not-a-member"] = b"ignored"
            instance = snapshot.members[leader].group_instance_id
            self.send(sync(leader, self.generation(group, mode), assignments, instance, group=group))
        elif kind == "sync_all":
            # The leader's SyncGroup with an assignment for everyone, then every other member's (§4.2).
            _, group, salt = operation
            self.run(("sync_leader", group, "current", salt, True))
            snapshot = self.h.group(group)
            for member_id in [] if snapshot is None else list(snapshot.members):
                if member_id != snapshot.leader:
                    self._sync(group, member_id, "current")
        elif kind == "settle":
            # Well-behaved clients for a while: rejoin on a rebalance, sync on a new generation, heartbeat.
            _, group, salt = operation
            for step in (60, 60, 120, 250, 600, 600, 60, 60, 60, 60):
                snapshot = self.h.group(group)
                if snapshot is None or snapshot.state in SETTLED:
                    break
                if snapshot.state == "CompletingRebalance":
                    self.run(("sync_all", group, salt))
                else:
                    self.run(("rejoin_all", group))
                    self.run(("heartbeat_all", group))
                    self.h.advance(step)
        elif kind == "rejoin_all":
            # What clients do on REBALANCE_IN_PROGRESS: every member not parked in JoinGroup rejoins, unchanged.
            _, group = operation
            snapshot = self.h.group(group)
            for member_id, m in [] if snapshot is None else snapshot.members.items():
                if not m.awaiting_join:
                    request = join4(
                        member_id,
                        m.protocols,
                        m.group_instance_id,
                        m.session_timeout_ms,
                        m.rebalance_timeout_ms,
                        group=group,
                    )
                    request["client_id"] = m.client_id
                    self.send(request)
        elif kind == "heartbeat_all":
            _, group = operation
            snapshot = self.h.group(group)
            for member_id in [] if snapshot is None else list(snapshot.members):
                self._heartbeat(group, member_id, "current")
        elif kind == "sync":
            _, group, index, mode = operation
            self._sync(group, self.pick(group, index), mode)
        elif kind == "heartbeat":
            _, group, index, mode = operation
            self._heartbeat(group, self.pick(group, index), mode)
        elif kind == "commit_simple":
            _, group, entries, retention = operation
            self.send(commit("", -1, _offsets(entries), group=group, retention_time_ms=retention))
        elif kind == "commit_member":
            _, group, index, mode, entries, retention = operation
            member_id = self.pick(group, index)
            generation = self.generation(group, mode)
            instance = self.instance_of(group, member_id)
            self.send(
                commit(member_id, generation, _offsets(entries), instance, group=group, retention_time_ms=retention)
            )
        elif kind == "leave":
            _, group, index, by_instance = operation
            member_id = self.pick(group, index)
            instance = self.instance_of(group, member_id)
            if by_instance and instance is not None:
                self.send(leave(identity("", instance), group=group))  # admin removal of a static member (§3.5)
            else:
                self.send(leave(identity(member_id, instance), group=group))
        elif kind == "delete":
            self.send(delete(operation[1]))
        elif kind == "advance":
            self.h.advance(operation[1])
        elif kind == "reload":
            return
        else:  # pragma: no cover - the strategies above make no other kind
            raise AssertionError(kind)
        for group in GROUPS:
            snapshot = self.h.group(group)
            if snapshot is not None:
                for member_id in list(snapshot.members) + sorted(snapshot.pending_members):
                    self._remember(group, member_id)


def _offsets(entries) -> dict[tuple[str, int], tuple[int, str]]:
    return {(topic, partition): (offset, metadata) for topic, partition, offset, metadata in entries}


# ---- projections ---------------------------------------------------------------------------------------------

FRESH_GROUP = {
    "state": EMPTY,
    "generation": 0,
    "protocol_type": None,
    "protocol_name": None,
    "leader": None,
    "member_order": [],
    "members": {},
    "static_members": {},
}


def _metadata(protocols, protocol_name) -> bytes:
    return next((metadata for name, metadata in protocols if name == protocol_name), b"")


def group_projection(snapshot) -> dict:
    """What a group record persists (§9.3 "What is written"), read from a live or a loaded group."""
    if snapshot is None:
        return FRESH_GROUP
    return {
        "state": snapshot.state,
        "generation": snapshot.generation,
        "protocol_type": snapshot.protocol_type,
        "protocol_name": snapshot.protocol_name,
        "leader": snapshot.leader,
        # The order of members is the record's order; it decides later tie-breaks and leader hand-overs.
        "member_order": list(snapshot.members),
        "members": {
            member_id: (
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.session_timeout_ms,
                m.rebalance_timeout_ms,
                m.assignment,
                _metadata(m.protocols, snapshot.protocol_name),
            )
            for member_id, m in snapshot.members.items()
        },
        "static_members": dict(snapshot.static_members),
    }


def offsets_projection(snapshot) -> dict:
    if snapshot is None:
        return {}
    return {tp: (o.offset, o.metadata, o.commit_timestamp, o.expire_timestamp) for tp, o in snapshot.offsets.items()}


def projection(snapshot) -> dict | None:
    if snapshot is None:
        return None
    return {**group_projection(snapshot), "offsets": offsets_projection(snapshot)}


def loaded_view(snapshot) -> dict | None:
    """A loaded group in full, but for log positions (which compaction is free to change)."""
    if snapshot is None:
        return None
    return {
        **projection(snapshot),
        "state_timestamp": snapshot.state_timestamp,
        "subscribed_topics": snapshot.subscribed_topics,
        "protocols": {member_id: m.protocols for member_id, m in snapshot.members.items()},
        "pending": (snapshot.pending_members, snapshot.pending_sync),
    }


def snapshots(h) -> dict:
    return {group: h.group(group) for group in GROUPS}


# ---- the checks ------------------------------------------------------------------------------------------------


def reload_and_check(h, last_settled: dict) -> None:
    """Unload and load the partition; every group must be what its records say (see the module docstring)."""
    live = snapshots(h)
    h.unload(PARTITION)
    h.load(PARTITION)
    reloaded = snapshots(h)
    for group in GROUPS:
        before, after = live[group], reloaded[group]
        context = f"group {group}: before {before}, after {after}"
        if after is not None:
            assert after.state in SETTLED, context  # §9.6 step 5: nothing transient survives a load
            assert not after.pending_members and not after.pending_sync, context
        if before is None:
            assert after is None, context
        elif before.state in SETTLED:
            if before.generation == 0 and not before.members and not before.offsets:
                assert after is None, context  # never had a record, holds no offsets: nothing to load
            else:
                assert projection(after) == projection(before), context
        else:
            # §10.5: a generation that never reached a persisted SyncGroup is lost; offsets are not.
            assert offsets_projection(after) == offsets_projection(before), context
            if after is not None:
                assert after.generation <= before.generation, context
                if before.state == "CompletingRebalance":
                    assert after.generation < before.generation, context
            assert group_projection(after) == last_settled[group], context


def settled_projections(h, last_settled: dict) -> None:
    """Remember each group as it was last seen Stable or Empty (absent: as if it never had a record)."""
    for group, snapshot in snapshots(h).items():
        if snapshot is None:
            last_settled[group] = FRESH_GROUP
        elif snapshot.state in SETTLED:
            last_settled[group] = group_projection(snapshot)


def drive(workload, check_reloads: bool = True) -> CoordinatorHarness:
    h = CoordinatorHarness(CONFIG, {PARTITION})
    driver = Driver(h)
    last_settled = {group: FRESH_GROUP for group in GROUPS}
    for operation in workload:
        if operation[0] == "reload" and check_reloads:
            reload_and_check(h, last_settled)
        else:
            driver.run(operation)
        settled_projections(h, last_settled)
    if check_reloads:
        reload_and_check(h, last_settled)
    return h


def compacted(records, keep_tombstones: bool = True) -> list:
    """The log as the cleaner leaves it (§9.8): the last record of each key, in log order."""
    last = {}
    for position, (key, _value) in enumerate(records):
        last[(type(key), key)] = position
    kept = sorted(last.values())
    return [records[i] for i in kept if keep_tombstones or records[i][1] is not None]


def load_into_new_harness(records) -> CoordinatorHarness:
    h = CoordinatorHarness(CONFIG, ())
    for record in records:
        h.append_records(PARTITION, [record])
    h.load(PARTITION)
    return h


# ---- the properties ---------------------------------------------------------------------------------------------


@REPLAY_SETTINGS
@given(WORKLOAD)
def test_settled_groups_survive_a_reload_unchanged(workload):
    """§9.4, §9.6, §10.5: settled groups reload unchanged; transient ones reload as last settled."""
    drive(workload)


@REPLAY_SETTINGS
@given(WORKLOAD)
def test_replaying_the_log_twice_gives_the_same_groups(workload):
    """§9.6: a load is a pure function of the log; loading writes nothing."""
    h = drive(workload, check_reloads=False)
    h.unload(PARTITION)
    h.load(PARTITION)
    first = snapshots(h)
    log_length = len(h.records(PARTITION))
    h.unload(PARTITION)
    h.load(PARTITION)
    second = snapshots(h)
    assert second == first
    assert {g: list(s.members) for g, s in second.items() if s} == {g: list(s.members) for g, s in first.items() if s}
    assert len(h.records(PARTITION)) == log_length


@REPLAY_SETTINGS
@given(WORKLOAD, st.booleans())
def test_a_compacted_log_loads_the_same_groups(workload, keep_tombstones):
    """§9.8: the loader gives the same groups whether or not superseded records (or, once they are old enough,
    tombstones) are still in the log."""
    h = drive(workload, check_reloads=False)
    records = h.records(PARTITION)
    h.unload(PARTITION)
    h.load(PARTITION)
    full = {group: loaded_view(snapshot) for group, snapshot in snapshots(h).items()}
    cleaned = load_into_new_harness(compacted(records, keep_tombstones))
    assert {group: loaded_view(snapshot) for group, snapshot in snapshots(cleaned).items()} == full


def test_compacted_keeps_the_last_record_of_each_key_in_log_order():
    """The helper the compaction property relies on."""
    from zkcoord.offsets.records import GroupMetadataKey, OffsetCommitKey, OffsetCommitValue

    a, b, g = OffsetCommitKey("g", "t", 0), OffsetCommitKey("g", "t", 1), GroupMetadataKey("g")
    log = [(a, OffsetCommitValue(1, "", 0)), (g, None), (b, OffsetCommitValue(2, "", 0)), (a, None)]
    assert compacted(log) == [log[1], log[2], log[3]]
    assert compacted(log, keep_tombstones=False) == [log[2]]


def test_a_simple_workload_reaches_stable_and_reloads():
    """A fixed workload through the same driver: the property tests above do exercise settled groups."""
    workload = [
        ("join_new", "alpha", (0, 3, 1, 0), True),
        ("join_static", "alpha", "inst-1", (2, 3, 1, 1)),
        ("advance", 60),  # the initial delay is extended once for the second new member (§2.7 step 3)
        ("advance", 60),
        ("sync_leader", "alpha", "current", 7, True),
        ("sync", "alpha", 1, "current"),
        ("commit_member", "alpha", 0, "current", [("t0", 0, 42, "meta")], -1),
        ("commit_simple", "beta", [("t1", 1, 5, "")], 86_400_000),
        ("reload",),
        ("join_static", "alpha", "inst-1", (2, 3, 1, 2)),  # a static restart on the Stable fast path (§3.3)
        ("reload",),
    ]
    h = drive(workload[:-2])
    restarted_before = h.group("alpha").static_members["inst-1"]
    h = drive(workload)
    alpha, beta = h.group("alpha"), h.group("beta")
    assert alpha.static_members["inst-1"] != restarted_before  # the restart got a new member id, and it was loaded
    assert alpha.state == STABLE and alpha.generation == 1 and len(alpha.members) == 2
    assert set(alpha.static_members) == {"inst-1"}
    # §3.3: the restart re-keys the same member record, so it keeps its first client id (and timeouts).
    assert {m.client_id for m in alpha.members.values()} == {"client-a", "client-b"}
    assert [o.offset for o in alpha.offsets.values()] == [42]
    assert beta.state == EMPTY and beta.generation == 0 and beta.protocol_type is None
    [beta_offset] = beta.offsets.values()
    assert beta_offset.offset == 5 and beta_offset.expire_timestamp == beta_offset.commit_timestamp + 86_400_000
