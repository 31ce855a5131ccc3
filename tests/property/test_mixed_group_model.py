"""A mixed group as a model: the real bridge core's plans, carried out step by step among 0.8.2 members.

ZooKeeper (registrations, owner znodes, offsets), the coordinator's log of committed offsets and its write-behind
mirror into ZooKeeper are plain dictionaries. Two kinds of member share one topic of three partitions:

- a 0.8.2 member (legacy-zk-protocol.md §3.3–§3.5): on every registration change it stops fetching, commits to
  ZooKeeper, deletes its owner znodes, computes 0.8.2's assignment over the registrations it reads, claims,
  releases what it claimed on a conflict and backs off (up to ``rebalance.max.retries`` attempts), then fetches
  from the ZooKeeper offset, read once its claims succeeded (zkcoord's member does; the JVM reads it before it
  claims, 0.8.2's own stale-offset race of §3.4, left out here). Its registration and owner znodes are ephemeral,
  and a session ends with its process (a JVM that outlives its session keeps fetching until its next rebalance,
  §3.5, which breaks the first property in a group of 0.8.2 members alone);
- a coordinator member (eager): it stops fetching and commits to the log before it rejoins, fetches from
  max(ZooKeeper, log) once its SyncGroup answer came, and commits to the log.

The node carries out the plans of :mod:`zkcoord.bridge.core` one ZooKeeper write per step, in the order and with
the retries of :class:`zkcoord.server.bridge.MixedGroups` (JoinGroup: release; the leader's SyncGroup: handover
over every registration; each SyncGroup answer: the member's own handover; LeaveGroup and a member the core lost
for the grace: leave; the periodic check). A node failover cuts the plan under way at any step and loses the
mirror's queue; registrations and owner znodes of the bridge are persistent. Hypothesis interleaves everything;
each run allows only some kinds of disruption (swarm testing), so runs without them get further.

Properties, after every rule: no two members fetch one partition, and a member starts fetching a partition at
or after the highest offset anyone committed for it. Removing the flush before a release or the claims before a
handover makes the model fail (the mutation tests below).
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, Phase, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from zkcoord.assign.legacy import thread_id
from zkcoord.bridge import core
from zkcoord.model import TopicPartition
from zkcoord.server.bridge_plans import BridgeSettings

GROUP, TOPIC = "g", "t"
COUNTS = {TOPIC: 3}
PARTITIONS = tuple(TopicPartition(TOPIC, p) for p in range(COUNTS[TOPIC]))
BRIDGE = BridgeSettings()
LEGACY_RETRIES, LEGACY_BACKOFF_MS = 4, 2000  # 0.8.2's rebalance.max.retries and rebalance.backoff.ms
MAX_MEMBERS = 2  # of each kind, at a time
STEPS = st.integers(1, 12).map(lambda n: 13 - n)  # many steps at once unless hypothesis interleaves finer
DISRUPTIONS = ("0.8.2 members leave", "members leave", "members rejoin", "node fails over", "mirror writes")

Process = Iterator[None]  # a protocol under way: one ZooKeeper read or write per next()


class ClaimConflict(Exception):
    """An owner znode the bridge wants names another thread (``bridge_zk.ClaimConflict``)."""


def pick(data, candidates: dict):
    """One of ``candidates``, drawn by name so that a counterexample reads as names."""
    return candidates[data.draw(st.sampled_from(sorted(candidates)))]


@dataclass
class Legacy:
    consumer_id: str
    registry: tuple[TopicPartition, ...] = ()  # what its last successful attempt claimed
    pending: bool = True  # a registration change it has not rebalanced for yet
    rebalance: Process | None = None
    ready_at: int = 0  # a failed attempt backs off until then

    @property
    def thread(self) -> str:
        return thread_id(self.consumer_id, 0)


@dataclass
class Member:
    """A coordinator member; ``state``: idle (must join), joining (its JoinGroup at the node), parked (in the
    core's join or sync phase), syncing (its SyncGroup answer at the node) or fetching."""

    member_id: str
    consumer_id: str
    state: str = "joining"
    alive: bool = True


class MixedGroup(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.now = 0
        self.strategy = "range"
        self.ids = itertools.count(1)
        # ZooKeeper
        self.registrations: dict[str, dict[str, int]] = {}
        self.owners: dict[TopicPartition, str] = {}
        self.zk_offsets: dict[TopicPartition, int] = {}
        self.bridge_members: dict[str, str] = {}  # the bridge znode: consumer id → member id
        # the node: the log, its mirror into ZooKeeper, the core's group, the bridge's plans (in lock order)
        self.log: dict[TopicPartition, int] = {}
        self.mirror: list[tuple[TopicPartition, int]] = []
        self.group: dict[str, None] = {}  # the core's members, in join order (the first leads)
        self.phase = "stable"  # stable, joining or syncing
        self.generation = 0
        self.assignment: dict[str, tuple[TopicPartition, ...]] = {}
        self.plans: list[Process] = []
        self.checking: Process | None = None
        self.failovers = 0
        self.disruptions: set[str] = set()
        self.plans_ready_at = 0
        self.missing_since: dict[str, int] = {}
        self.unowned_since: int | None = None
        # members, and what the properties need
        self.legacy: dict[str, Legacy] = {}
        self.members: dict[str, Member] = {}
        self.fetching: dict[str, dict[TopicPartition, int]] = {}  # member → partition → position
        self.committed: Counter[TopicPartition] = Counter()  # the highest offset anyone committed

    @initialize(strategy=st.sampled_from(core.STRATEGIES), disruptions=st.sets(st.sampled_from(DISRUPTIONS)))
    def choose(self, strategy, disruptions):
        self.strategy, self.disruptions = strategy, disruptions

    # ---- fetching and committing --------------------------------------------------------------------------

    def start(self, who: str, tp: TopicPartition, offset: int) -> None:
        others = [other for other, positions in self.fetching.items() if tp in positions and other != who]
        assert not others, f"{who} starts fetching {tp} while {others} fetch it"
        assert offset >= self.committed[tp], f"{who} starts {tp} at {offset}, below the committed {self.committed[tp]}"
        self.fetching.setdefault(who, {})[tp] = offset
        event("a coordinator member fetches" if who in self.members else "a 0.8.2 member fetches")

    def stop(self, who: str, commit: Callable[[TopicPartition, int], None] | None) -> None:
        for tp, position in self.fetching.pop(who, {}).items():
            if commit is not None:
                commit(tp, position)

    def commit_zk(self, tp: TopicPartition, offset: int) -> None:
        """0.8.2's commit: a plain write."""
        self.zk_offsets[tp] = offset
        self.committed[tp] = max(self.committed[tp], offset)

    def commit_log(self, tp: TopicPartition, offset: int) -> None:
        self.log[tp] = offset
        self.mirror.append((tp, offset))
        self.committed[tp] = max(self.committed[tp], offset)

    def raise_zk(self, tp: TopicPartition, offset: int) -> None:
        """The node's writes into ZooKeeper (mirror and flush): set-if-greater."""
        self.zk_offsets[tp] = max(self.zk_offsets.get(tp, 0), offset)

    def registrations_changed(self) -> None:
        for member in self.legacy.values():
            member.pending = True

    # ---- the 0.8.2 member ---------------------------------------------------------------------------------

    def legacy_rebalance(self, member: Legacy) -> Process:
        """``syncedRebalance``: attempts of ``rebalance`` (§3.4), each step one ZooKeeper round."""
        for _ in range(LEGACY_RETRIES):
            self.stop(member.consumer_id, self.commit_zk)
            yield
            for tp in member.registry:
                if self.owners.get(tp) == member.thread:
                    del self.owners[tp]
            member.registry = ()
            yield
            wanted = core.assignments(self.strategy, self.registrations, COUNTS, [member.consumer_id])
            yield
            claimed, conflict = [], False
            for tp in wanted[member.consumer_id]:
                if self.owners.setdefault(tp, member.thread) == member.thread:
                    claimed.append(tp)
                else:
                    conflict = True
                yield
            if not conflict:
                member.registry = tuple(claimed)
                for tp in claimed:
                    self.start(member.consumer_id, tp, self.zk_offsets.get(tp, 0))
                return
            for tp in claimed:
                del self.owners[tp]
            member.ready_at = self.now + LEGACY_BACKOFF_MS
            yield

    def legacy_gone(self, member: Legacy, commit: bool) -> None:
        """The session ends: its ephemeral registration and owner znodes go."""
        self.stop(member.consumer_id, self.commit_zk if commit else None)
        del self.registrations[member.consumer_id], self.legacy[member.consumer_id]
        self.owners = {tp: thread for tp, thread in self.owners.items() if thread != member.thread}
        self.registrations_changed()

    # ---- the bridge (MixedGroups), one ZooKeeper write per step ---------------------------------------------

    def carry_out(self, plan: list) -> Iterator[None]:
        """``PlanRunner.carry_out``: the steps in order; a Handover ends the plan and is returned."""
        for step in plan:
            if isinstance(step, core.Flush):
                for tp in step.partitions:
                    if tp in self.log:
                        self.raise_zk(tp, self.log[tp])
            elif isinstance(step, core.Release):
                if self.owners.get(step.partition) == step.thread:
                    del self.owners[step.partition]
            elif isinstance(step, core.Claim):
                if self.owners.setdefault(step.partition, step.thread) != step.thread:
                    raise ClaimConflict(step)
            elif isinstance(step, core.Unregister):
                self.bridge_members.pop(step.consumer_id, None)
                if self.registrations.pop(step.consumer_id, None) is not None:
                    self.registrations_changed()
            else:
                return step
            yield
        return None

    def claimed(self, plan_of: Callable[[], list], still_wanted: Callable[[], bool]):
        """``PlanRunner.claimed``: retried with 0.8.2's back-off while a claim conflicts."""
        for _ in range(BRIDGE.max_retries + 1):
            if not still_wanted():
                return True, None
            try:
                return True, (yield from self.carry_out(plan_of()))
            except ClaimConflict:
                event("a bridge claim conflicts")
                self.plans_ready_at = self.now + BRIDGE.backoff_ms
                yield
        return False, None

    def join_plan(self, member: Member) -> Process:
        if member.consumer_id in self.bridge_members:
            yield from self.carry_out(core.release_plan(core.owned_by(self.owners, [member.consumer_id])))
        if member.member_id not in self.group:
            return
        if self.phase == "stable" and member.member_id != next(iter(self.group)):
            member.state = "syncing"  # the core answers the current generation: no rebalance
            self.plans.append(self.synced(member, self.assignment.get(member.member_id, ())))
            return
        if self.phase == "stable":
            self.rebalance()
        member.state = "parked"
        self.complete_join()

    def joined(self, generation: int) -> Process:
        """The join phase is over: ``_joined`` registers each member, then the leader's SyncGroup comes."""
        for member_id in list(self.group):
            member = self.members.get(member_id)
            if member is not None:
                self.bridge_members[member.consumer_id] = member_id
                if member.consumer_id not in self.registrations:
                    self.registrations[member.consumer_id] = {TOPIC: 1}
                    self.registrations_changed()
                yield
        if self.generation == generation and self.group and self.members[next(iter(self.group))].alive:
            self.plans.append(self.sync(generation))

    def sync(self, generation: int) -> Process:
        """The leader's SyncGroup: 0.8.2's assignment over every registration, claimed before the core has it."""

        def plan() -> list:
            consumers = {
                self.members[m].consumer_id: m for m in self.group if self.members[m].consumer_id in self.bridge_members
            }
            given = core.assignments(self.strategy, self.registrations, COUNTS, consumers)
            return core.handover_plan(given, consumers, core.owned_by(self.owners, self.bridge_members))

        done, handover = yield from self.claimed(plan, lambda: self.generation == generation)
        if not done:
            return self.rebalance()
        if handover is None or self.generation != generation:
            return
        self.phase = "stable"
        self.assignment = {m: handover.assignments.get(m, ()) for m in self.group}
        for member_id in self.group:
            member = self.members[member_id]
            if member.state == "parked" and member.alive:
                member.state = "syncing"
                self.plans.append(self.synced(member, self.assignment[member_id]))

    def synced(self, member: Member, partitions: tuple[TopicPartition, ...]) -> Process:
        """``MixedGroups._synced``: a SyncGroup answer goes out once its partitions' owner znodes name the member."""
        cid = member.consumer_id
        if cid not in self.bridge_members:
            member.state = "idle"
            return

        def plan() -> list:
            return core.handover_plan({cid: partitions}, {cid: member.member_id}, core.owned_by(self.owners, [cid]))

        done, _ = yield from self.claimed(plan, lambda: True)
        member.state = "idle"
        if not done:
            return self.rebalance()
        if member.alive and member.member_id in self.group:
            member.state = "fetching"
            for tp in partitions:
                self.start(member.member_id, tp, max(self.zk_offsets.get(tp, 0), self.log.get(tp, 0)))

    def left(self, consumer_id: str) -> Process:
        yield from self.carry_out(core.leave_plan(consumer_id, core.owned_by(self.owners, [consumer_id])))

    def check(self) -> Process:
        """``BridgeChecks.check``: release members the core lost for the grace, rebalance a stable group whose owner
        znodes are not what 0.8.2 now gives its coordinator members, poke."""
        for cid, member_id in list(self.bridge_members.items()):
            if member_id in self.group:
                self.missing_since.pop(cid, None)
                continue
            if self.now - self.missing_since.setdefault(cid, self.now) >= BRIDGE.release_grace_ms:
                yield from self.left(cid)
                self.missing_since.pop(cid, None)
        legacy = frozenset(self.registrations) - set(self.bridge_members)
        if self.phase == "stable":
            consumers = [
                self.members[m].consumer_id for m in self.group if self.members[m].consumer_id in self.bridge_members
            ]
            if core.out_of_date(core.assignments(self.strategy, self.registrations, COUNTS, consumers), self.owners):
                self.rebalance()
        if not (legacy and self.phase == "stable" and any(tp not in self.owners for tp in PARTITIONS)):
            self.unowned_since = None
        elif self.unowned_since is None:
            self.unowned_since = self.now
        elif self.now - self.unowned_since >= BRIDGE.legacy_window_ms + BRIDGE.backoff_ms:
            self.registrations_changed()  # the poke: a registration created and deleted
            self.unowned_since = self.now

    # ---- the core ----------------------------------------------------------------------------------------

    def rebalance(self) -> None:
        if self.phase == "joining":
            return
        self.generation += 1
        self.phase = "joining" if self.group else "stable"
        for member in self.members.values():
            if member.state == "parked":
                member.state = "idle"  # its JoinGroup or SyncGroup gets 27 and it rejoins

    def complete_join(self) -> None:
        if self.phase == "joining" and self.group and all(self.members[m].state == "parked" for m in self.group):
            self.phase = "syncing"
            self.plans.append(self.joined(self.generation))

    def remove(self, member: Member) -> None:
        del self.group[member.member_id], self.members[member.member_id]
        self.rebalance()
        self.complete_join()

    # ---- rules --------------------------------------------------------------------------------------------

    @precondition(lambda self: len(self.legacy) < MAX_MEMBERS)
    @rule(host=st.sampled_from(["host", "zz-host"]))
    def legacy_joins(self, host):
        consumer_id = f"{GROUP}_{host}-{next(self.ids)}"
        self.registrations[consumer_id] = {TOPIC: 1}
        self.legacy[consumer_id] = Legacy(consumer_id)
        self.registrations_changed()

    @precondition(lambda self: self.legacy and "0.8.2 members leave" in self.disruptions)
    @rule(data=st.data(), crash=st.booleans())
    def legacy_leaves(self, data, crash):
        """Shutdown commits first; a crash does not (its session expires)."""
        self.legacy_gone(pick(data, self.legacy), commit=not crash)

    def rebalancing(self) -> list[Legacy]:
        """0.8.2 members that can go on: a rebalance under way and not backing off, or one triggered."""
        return [m for m in self.legacy.values() if (m.ready_at <= self.now if m.rebalance else m.pending)]

    @precondition(lambda self: self.rebalancing())
    @rule(data=st.data(), steps=STEPS)
    def legacy_steps(self, data, steps):
        """A 0.8.2 member goes up to ``steps`` steps further in its rebalance (one ZooKeeper round each)."""
        member = pick(data, {m.consumer_id: m for m in self.rebalancing()})
        for _ in range(steps):
            if member.rebalance is None:
                if not member.pending:
                    return
                member.pending, member.rebalance = False, self.legacy_rebalance(member)
            if member.ready_at > self.now:
                return
            if next(member.rebalance, "done") == "done":
                member.rebalance = None

    @precondition(lambda self: sum(m.alive for m in self.members.values()) < MAX_MEMBERS)
    @rule()
    def member_joins(self):
        member_id = f"m{next(self.ids)}"
        member = self.members[member_id] = Member(member_id, core.consumer_id_for(GROUP, member_id, None))
        self.group[member_id] = None
        self.rebalance()
        self.plans.append(self.join_plan(member))

    def rejoining(self) -> list[Member]:
        """Members told to rejoin or that see a rebalance, and (when allowed) members that rejoin on their own."""
        voluntary = "members rejoin" in self.disruptions
        return [
            m
            for m in self.members.values()
            if m.alive and (m.state == "idle" or m.state == "fetching" and (voluntary or self.phase == "joining"))
        ]

    @precondition(lambda self: self.rejoining())
    @rule(data=st.data())
    def member_rejoins(self, data):
        """Eager: revoke (stop, commit to the log), then JoinGroup; also a member rejoining a stable group."""
        member = pick(data, {m.member_id: m for m in self.rejoining()})
        self.stop(member.member_id, self.commit_log)
        member.state = "joining"
        self.plans.append(self.join_plan(member))

    @precondition(lambda self: any(m.alive for m in self.members.values()) and "members leave" in self.disruptions)
    @rule(data=st.data(), crash=st.booleans())
    def member_leaves(self, data, crash):
        """LeaveGroup after revoking; a crashed member stays in the core until its session expires."""
        member = pick(data, {i: m for i, m in self.members.items() if m.alive})
        if crash:
            self.stop(member.member_id, None)
            member.alive = False
            return
        self.stop(member.member_id, self.commit_log)
        self.remove(member)
        self.plans.append(self.left(member.consumer_id))

    @precondition(lambda self: any(not m.alive for m in self.members.values()))
    @rule(data=st.data())
    def session_expires(self, data):
        """The core removes a crashed member; the bridge keeps its owner znodes for the grace."""
        self.remove(pick(data, {i: m for i, m in self.members.items() if not m.alive}))

    @precondition(lambda self: self.fetching)
    @rule(data=st.data(), records=st.integers(1, 3), commit=st.booleans())
    def consume(self, data, records, commit):
        who = data.draw(st.sampled_from(sorted(self.fetching)))
        for tp in self.fetching[who]:
            self.fetching[who][tp] += records
            if commit:
                (self.commit_log if who in self.members else self.commit_zk)(tp, self.fetching[who][tp])

    @precondition(lambda self: self.mirror and "mirror writes" in self.disruptions)
    @rule()
    def mirror_writes(self):
        self.raise_zk(*self.mirror.pop(0))

    @precondition(lambda self: self.plans and self.plans_ready_at <= self.now)
    @rule(steps=STEPS)
    def bridge_steps(self, steps):
        """The node carries out up to ``steps`` steps of its plans (one ZooKeeper write each)."""
        for _ in range(steps):
            if not self.plans or self.plans_ready_at > self.now:
                return
            if next(self.plans[0], "done") == "done":
                self.plans.pop(0)

    @precondition(lambda self: self.failovers < 2 and "node fails over" in self.disruptions)
    @rule()
    def node_fails_over(self):
        """The new leader: the old one's plans are cut, its mirror queue lost; the core's group is in the log."""
        self.failovers += 1
        if self.plans:
            event("a failover cuts a plan")
        self.plans, self.plans_ready_at, self.mirror = [], 0, []
        self.missing_since, self.unowned_since = {}, None
        for member in self.members.values():
            if member.state in ("joining", "parked", "syncing"):
                member.state = "idle"
        if self.phase != "stable":
            self.phase = "stable"
            self.rebalance()

    @rule(ms=st.sampled_from([500, 2000, 5000]))
    def time_passes(self, ms):
        """Back-offs and the grace run out; the node's periodic check comes (one at a time)."""
        self.now += ms
        if self.checking not in self.plans:
            self.checking = self.check()
            self.plans.append(self.checking)

    @invariant()
    def one_fetcher_per_partition(self):
        fetched = Counter(tp for positions in self.fetching.values() for tp in positions)
        assert all(count == 1 for count in fetched.values()), f"two members fetch one partition: {self.fetching}"


SETTINGS = dict(
    deadline=None,
    database=None,
    derandomize=True,
    phases=(Phase.generate, Phase.shrink),
    report_multiple_bugs=False,
    suppress_health_check=list(HealthCheck),
)
TestMixedGroup = MixedGroup.TestCase
TestMixedGroup.settings = settings(max_examples=400, stateful_step_count=80, **SETTINGS)


def counterexample() -> tuple[AssertionError, str]:
    """Run the model until hypothesis finds a failure: the error, and the shrunk steps that lead to it."""
    with pytest.raises(AssertionError) as failure:
        run_state_machine_as_test(MixedGroup, settings=settings(max_examples=1000, stateful_step_count=80, **SETTINGS))
    notes = getattr(failure.value, "__notes__", [])
    steps = [line for note in notes for line in note.splitlines() if line.startswith(("state.", "Draw"))]
    outcome = str(failure.value).splitlines()[0]
    return failure.value, "\n".join([*(step for step in steps if "one_fetcher" not in step), f"-> {outcome}"])


def test_handing_over_before_claiming_lets_two_members_fetch(monkeypatch):
    real = core.handover_plan

    def handover_first(given, member_ids, owned):
        *steps, handover = real(given, member_ids, owned)
        claims = [s for s in steps if isinstance(s, core.Claim)]
        return [*(s for s in steps if not isinstance(s, core.Claim)), handover, *claims]

    monkeypatch.setattr(core, "handover_plan", handover_first)
    error, steps = counterexample()
    print(steps)
    assert "fetch it" in str(error) or "fetch one partition" in str(error)


def test_releasing_without_flushing_regresses_an_offset(monkeypatch):
    real = core.release_plan
    monkeypatch.setattr(core, "release_plan", lambda owned: [s for s in real(owned) if not isinstance(s, core.Flush)])
    error, steps = counterexample()
    print(steps)
    assert "below the committed" in str(error)
