"""The group core driven through its effects alone: requests in; replies, appends and timers out; append
outcomes and timer firings back in. No harness and no runtime: this module is the runtime, a small one.

Properties (hypothesis, random members joining, syncing, heartbeating, committing, leaving, time passing and
appends completing or failing in any order): every request is answered exactly once; a failed write changes
no cached offset; and once every append is written, replaying the records from an empty store rebuilds the
same settled groups (group-coordinator.md §9.4, §9.6; style habit 5).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from hypothesis import example, given, settings
from hypothesis import strategies as st

from zkcoord.config import build_config
from zkcoord.errors import ErrorCode
from zkcoord.group.config import CoordinatorConfig
from zkcoord.group.coordinator import GroupCoordinator
from zkcoord.group.effects import Append, Cancel, Reply, Schedule
from zkcoord.model import GroupState
from zkcoord.offsets.records import OffsetCommitKey
from zkcoord.offsets.store import OffsetStore
from zkcoord.wire import messages as m

GROUP = "g"  # offsets partition 0 of 1
MEMBERS = 3
CONFIG = {
    "group.min.session.timeout.ms": 10,
    "group.initial.rebalance.delay.ms": 20,
    "offsets.topic.num.partitions": 1,
    "offsets.retention.check.interval.ms": 10**9,
}
SESSION_MS = 300
E = ErrorCode


@dataclass
class Client:
    member_id: str = ""
    generation: int = -1
    leader: bool = False
    members: tuple = ()


@dataclass
class Driver:
    """Carries out the core's effects the way a runtime must, and keeps what the properties need."""

    core: GroupCoordinator
    now: int = 0
    next_id: itertools.count = field(default_factory=itertools.count)
    asked: dict = field(default_factory=dict)  # request id → request
    answered: dict = field(default_factory=dict)  # request id → response
    timers: dict = field(default_factory=dict)  # key → deadline
    in_flight: list = field(default_factory=list)  # appends not completed yet, oldest first
    written: list = field(default_factory=list)  # (base offset, records) of the appends written
    end_offset: int = 0
    clients: list = field(default_factory=lambda: [Client() for _ in range(MEMBERS)])
    by_request: dict = field(default_factory=dict)  # request id → client index

    def send(self, client: int | None, request: m.Request) -> int:
        request_id = next(self.next_id)
        self.asked[request_id] = request
        if client is not None:
            self.by_request[request_id] = client
        self.core.handle(request_id, request, self.now)
        self.run_effects()
        return request_id

    def run_effects(self) -> None:
        for effect in self.core.take_effects():
            if type(effect) is Reply:
                assert effect.request_id in self.asked, "a reply to a request nobody sent"
                assert effect.request_id not in self.answered, "a request answered twice"
                self.answered[effect.request_id] = effect.response
                self.learn(effect.request_id, effect.response)
            elif type(effect) is Append:
                self.in_flight.append(effect)
            elif type(effect) is Schedule:
                self.timers[effect.key] = effect.deadline_ms
            elif type(effect) is Cancel:
                self.timers.pop(effect.key, None)

    def learn(self, request_id: int, response: m.Response) -> None:
        """What a well-behaved client takes from its answers."""
        client = self.clients[self.by_request[request_id]] if request_id in self.by_request else None
        if client is None:
            return
        if type(response) is m.JoinGroupResponse:
            if response.error_code == E.MEMBER_ID_REQUIRED:
                client.member_id = response.member_id
            elif response.error_code == E.NONE:
                client.member_id = response.member_id
                client.generation = response.generation_id
                client.leader = response.leader == response.member_id
                client.members = tuple(member.member_id for member in response.members)
            elif response.error_code in (E.UNKNOWN_MEMBER_ID, E.FENCED_INSTANCE_ID):
                self.clients[self.by_request[request_id]] = Client()

    def complete_oldest(self, ok: bool) -> None:
        append = self.in_flight.pop(0)
        # Only commits are made to fail here: a failed fire-and-forget tombstone diverges by design (Kafka too).
        commit_only = all(type(key) is OffsetCommitKey and value is not None for key, value in append.records)
        if ok or not commit_only:
            base_offset = self.end_offset
            self.end_offset += len(append.records)
            self.written.append((base_offset, append.records))
            self.core.on_append_done(append.batch_id, None, base_offset, self.now)
        else:
            self.core.on_append_done(append.batch_id, E.NOT_LEADER_OR_FOLLOWER, -1, self.now)
        self.run_effects()

    def advance(self, ms: int) -> None:
        self.now += ms
        while True:
            due = [(deadline, key) for key, deadline in self.timers.items() if deadline < self.now]
            if not due:
                return
            key = min(due, key=lambda entry: entry[0])[1]
            del self.timers[key]
            self.core.on_timer(self.now, key)
            self.run_effects()

    def replayed_offsets(self) -> dict:
        store = OffsetStore()
        for base_offset, records in self.written:
            for key, value in records:
                store.apply(key, value, base_offset)
        return store


def new_core() -> GroupCoordinator:
    numbers = itertools.count()
    core = GroupCoordinator(build_config(CoordinatorConfig, CONFIG), 0, new_member_id=lambda p: f"{p}-{next(numbers)}")
    core.load_partition(0, OffsetStore(), 0)
    return core


def join(driver: Driver, index: int) -> None:
    client = driver.clients[index]
    request = m.JoinGroupRequest(
        group_id=GROUP,
        session_timeout_ms=SESSION_MS,
        rebalance_timeout_ms=SESSION_MS,
        member_id=client.member_id,
        protocol_type="consumer",
        protocols=(m.JoinGroupRequestProtocol(name="range", metadata=b"sub"),),
        client_id=f"c{index}",
        client_host="/127.0.0.1",
    )
    driver.send(index, request)


def sync(driver: Driver, index: int) -> None:
    client = driver.clients[index]
    assignments = ()
    if client.leader:
        assignments = tuple(
            m.SyncGroupRequestAssignment(member_id=member_id, assignment=f"{member_id}@{client.generation}".encode())
            for member_id in client.members
        )
    request = m.SyncGroupRequest(
        group_id=GROUP, generation_id=client.generation, member_id=client.member_id, assignments=assignments
    )
    driver.send(index, request)


def heartbeat(driver: Driver, index: int) -> None:
    client = driver.clients[index]
    request = m.HeartbeatRequest(group_id=GROUP, generation_id=client.generation, member_id=client.member_id)
    driver.send(index, request)


def commit(driver: Driver, index: int, partition: int, offset: int) -> None:
    client = driver.clients[index]
    simple = not client.member_id or index == MEMBERS - 1  # the last client commits as an admin would
    partitions = (m.OffsetCommitRequestPartition(partition_index=partition, committed_offset=offset),)
    request = m.OffsetCommitRequest(
        group_id=GROUP,
        generation_id=-1 if simple else client.generation,
        member_id="" if simple else client.member_id,
        topics=(m.OffsetCommitRequestTopic(name="t", partitions=partitions),),
    )
    driver.send(index, request)


def leave(driver: Driver, index: int) -> None:
    client = driver.clients[index]
    driver.send(index, m.LeaveGroupRequest(group_id=GROUP, members=(m.MemberIdentity(member_id=client.member_id),)))
    driver.clients[index] = Client()


def delete_offset(driver: Driver, partition: int) -> None:
    topics = (
        m.OffsetDeleteRequestTopic(name="t", partitions=(m.OffsetDeleteRequestPartition(partition_index=partition),)),
    )
    driver.send(None, m.OffsetDeleteRequest(group_id=GROUP, topics=topics))


def rebalance(driver: Driver, joining: int) -> None:
    """A whole round as well-behaved clients run it: every member and ``joining`` more join, the join completes,
    everyone syncs and the appends are written, so that groups reach Stable often."""
    for index, client in enumerate(driver.clients):
        if client.member_id or index < joining:
            join(driver, index)
            if driver.clients[index].member_id and driver.clients[index].generation < 0:
                join(driver, index)  # the second step of KIP-394's join
    driver.advance(SESSION_MS + 1)
    for index, client in enumerate(driver.clients):
        if client.member_id:
            sync(driver, index)
    while driver.in_flight:
        driver.complete_oldest(True)


MEMBER = st.integers(0, MEMBERS - 1)
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("join"), MEMBER),
        st.tuples(st.just("sync"), MEMBER),
        st.tuples(st.just("heartbeat"), MEMBER),
        st.tuples(st.just("commit"), MEMBER, st.integers(0, 2), st.integers(0, 100)),
        st.tuples(st.just("leave"), MEMBER),
        st.tuples(st.just("rebalance"), st.integers(0, MEMBERS)),
        st.tuples(st.just("delete_offset"), st.integers(0, 2)),
        st.tuples(st.just("advance"), st.integers(1, 400)),
        st.tuples(st.just("complete"), st.booleans()),
    ),
    max_size=60,
)


def run(ops) -> Driver:
    driver = Driver(new_core())
    for op in ops:
        kind = op[0]
        if kind == "complete":
            if driver.in_flight:
                driver.complete_oldest(op[1])
        elif kind == "advance":
            driver.advance(op[1])
        elif kind == "commit":
            commit(driver, *op[1:])
        elif kind == "delete_offset":
            delete_offset(driver, op[1])
        else:
            {"join": join, "sync": sync, "heartbeat": heartbeat, "leave": leave, "rebalance": rebalance}[kind](
                driver, op[1]
            )
        # A failed write changes no cached offset: the cache is always what the written records replay to.
        group = driver.core.groups.get(GROUP)
        if group is not None and not group.pending_offsets:
            assert group.offsets == driver.replayed_offsets().offsets.get(GROUP, {})
    while driver.in_flight:
        driver.complete_oldest(True)
    return driver


@settings(max_examples=300, deadline=None)
@given(OPS)
@example([("join", 0), ("join", 0), ("advance", 21), ("sync", 0), ("leave", 0)])  # a leader leaves mid-sync
@example([("join", 0), ("join", 0), ("join", 0)])  # a parked JoinGroup replaced by the next
def test_every_request_is_answered_once_and_a_replay_rebuilds_the_settled_group(ops):
    driver = run(ops)
    parked = {
        request_id
        for group in driver.core.groups.values()
        for member in group.members.values()
        for request_id in (member.awaiting_join, member.awaiting_sync)
        if request_id is not None
    }
    members = set(live.members) if (live := driver.core.groups.get(GROUP)) is not None else set()
    for request_id in set(driver.asked) - set(driver.answered) - parked:
        # As in Kafka's classic coordinator, two parked requests are dropped without an answer: a JoinGroup or
        # SyncGroup that a later one of the same member replaced (updateMember), and a parked SyncGroup whose
        # member was removed meanwhile (removeMemberAndUpdateGroup answers only a parked JoinGroup). Any other
        # request must be answered or still parked.
        request = driver.asked[request_id]
        assert type(request) in (m.JoinGroupRequest, m.SyncGroupRequest), request
        superseded = any(
            type(later) is type(request) and later.member_id == request.member_id
            for later_id, later in driver.asked.items()
            if later_id > request_id
        )
        removed = type(request) is m.SyncGroupRequest and request.member_id not in members
        assert superseded or removed, f"request {request_id} neither answered, parked, superseded nor removed"
    live = driver.core.groups.get(GROUP)
    rebuilt = new_core()
    rebuilt.groups.clear()
    rebuilt.owned.clear()
    rebuilt.load_partition(0, driver.replayed_offsets(), driver.now)
    again = rebuilt.groups.get(GROUP)
    if live is None or live.state not in (GroupState.STABLE, GroupState.EMPTY):
        return  # a group between generations is rebuilt as its last written generation, not as it is now
    if again is None:
        # Nothing was ever written for it: a group that only ever had joins in flight lives in memory alone.
        assert (live.state, live.generation, live.offsets) == (GroupState.EMPTY, 0, {})
        return
    assert again.offsets == live.offsets
    assert (again.generation, again.protocol_type) == (live.generation, live.protocol_type)
    if live.state == GroupState.STABLE:
        assert again.state == GroupState.STABLE
        assert (again.protocol_name, again.leader_id) == (live.protocol_name, live.leader_id)
        assert {i: (x.assignment, x.client_id, x.session_timeout_ms) for i, x in again.members.items()} == {
            i: (x.assignment, x.client_id, x.session_timeout_ms) for i, x in live.members.items()
        }


def test_a_commit_is_cached_only_once_written_and_answered_then():
    driver = Driver(new_core())
    commit(driver, MEMBERS - 1, 0, 42)
    (request_id,) = driver.asked
    assert request_id not in driver.answered and driver.core.groups[GROUP].offsets == {}
    driver.complete_oldest(True)
    assert driver.answered[request_id].topics[0].partitions[0].error_code == E.NONE
    assert [offset.offset for offset in driver.core.groups[GROUP].offsets.values()] == [42]


def test_a_failed_commit_is_answered_with_the_mapped_error_and_changes_nothing():
    driver = Driver(new_core())
    commit(driver, MEMBERS - 1, 0, 42)
    driver.complete_oldest(False)
    (response,) = driver.answered.values()
    assert response.topics[0].partitions[0].error_code == E.NOT_COORDINATOR
    assert driver.core.groups[GROUP].offsets == {} and not driver.written
