"""Random interleavings of commits, restarts, phase changes and lagging watches never regress an offset.

The real step modules of ``migrations/`` and the real rules of ``zkcoord.migration.phases`` run against an
in-memory world: one partition, its ZooKeeper and log offsets, a coordinator whose view of the phase and
whose write-behind mirror lag, and one owner at a time (a zkcoord legacy member whose view of the phase
lags too, a 0.8.2 JVM member that only knows ZooKeeper, a coordinator client member, or, once step 0005
copied the group to a Kafka cluster, a consumer of that cluster). A step waits for the coordinator and the
zkcoord member to acknowledge each phase it writes, as the runner does; an acknowledgement that does not
come in time leaves the step under way, still lagging. Hypothesis interleaves everything, including a crash
between the two writes of a dual commit and the group's consumers stopping for the copy. The property
(issue: "never loses or regresses an offset"): whoever takes the partition over reads at least the last
offset a commit acknowledged.
"""

from dataclasses import dataclass, field

from hypothesis import event, given, settings
from hypothesis import strategies as st

from zkcoord.migration.kafka_target import KafkaGroup
from zkcoord.migration.phases import (
    LOG,
    MIRROR,
    RULES,
    ZK,
    GroupFacts,
    LegacyMember,
    MigrationState,
    Phase,
    compare_stores,
    read_offset,
)
from zkcoord.migration.runner import PhaseNotAcknowledged, load_steps

P = ("t", 0)
STEPS = load_steps(opt_in=True)
COPY = next(step for step in STEPS if step.opt_in)
KAFKA = "kafka"  # the Kafka cluster's group coordinator, as a store


@dataclass
class Owner:
    kind: str  # "legacy", "jvm", "client" or "kafka"
    epoch: int  # the phase epoch a legacy member follows (adopted on start and by its watch)
    phase: Phase | None
    position: int = -1


@dataclass
class World:
    state: MigrationState = field(default_factory=MigrationState)
    zk: int | None = None
    log: int | None = None
    kafka: int | None = None
    coordinator_phase: Phase = Phase.ZK_ONLY  # what the coordinator's watch has delivered so far
    mirror: list[int] = field(default_factory=list)  # accepted commits not yet in ZooKeeper
    owner: Owner | None = None
    acknowledged: int = -1  # the highest offset a finished commit reported as stored
    applied: list[str] = field(default_factory=list)
    pending: tuple[str, str] | None = None
    log_trace: list[str] = field(default_factory=list)

    # -- stores, as the coordinator and ZooKeeper treat them ---------------------------------------------

    def commit_log(self, offset: int, if_greater: bool = False) -> None:
        if not if_greater or self.log is None or self.log < offset:
            self.log = offset
        if RULES[self.coordinator_phase].coordinator_mirror and not if_greater:  # backfills are not mirrored
            self.mirror.append(offset)

    def raise_zk(self, offset: int | None) -> None:
        if offset is not None and (self.zk is None or self.zk < offset):
            self.zk = offset

    def flush_mirror(self) -> None:
        for offset in self.mirror:
            self.raise_zk(offset)
        self.mirror.clear()

    def coordinator_fetch(self) -> int:
        return read_offset(RULES[self.coordinator_phase].coordinator_fetch, self.zk, self.log)

    # -- members -------------------------------------------------------------------------------------------

    def rule(self, owner: Owner):
        if owner.kind == "jvm":
            return (ZK,), ZK
        if owner.kind == KAFKA:
            return (KAFKA,), KAFKA
        if owner.kind == "client":
            # Whatever the phase, the coordinator stores the commit in the log (mirroring it when its view of
            # the phase says so, in commit_log) and answers fetches by its own rule.
            return (LOG,), RULES[self.coordinator_phase].coordinator_fetch
        rules = RULES[owner.phase].legacy_member
        return rules.writes, rules.reads

    def fetch(self, owner: Owner) -> int:
        _, reads = self.rule(owner)
        if owner.kind == "client":
            return self.coordinator_fetch()
        if reads == KAFKA:
            return read_offset(LOG, None, self.kafka)
        if reads == ZK:
            return read_offset(ZK, self.zk, None)
        return read_offset(reads, self.zk, self.log)


class ModelKafka:
    """The parts of ``KafkaTarget`` step 0005 uses: the Kafka cluster's coordinator, which takes a simple commit
    only while the group has no members there."""

    bootstrap = "kafka:9092"

    def __init__(self, world: World):
        self.world = world

    def cluster_id(self) -> str:
        return "model-cluster"

    def _member(self) -> bool:
        return self.world.owner is not None and self.world.owner.kind == KAFKA

    def describe_group(self, group: str) -> KafkaGroup:
        return KafkaGroup("Stable", ("kafka-1",)) if self._member() else KafkaGroup("Empty")

    def offsets(self, group: str):
        return {} if self.world.kafka is None else {P: self.world.kafka}

    def commit(self, group: str, offsets):
        if self._member():
            return {p: "UnknownMemberIdError" for p in offsets}
        for offset in offsets.values():
            self.world.kafka = offset
        return {}


class ModelContext:
    """The parts of ``StepContext`` the steps use, over the in-memory world."""

    def __init__(self, world: World, acknowledged: bool, allow_rewind: bool = False):
        self.world, self.group, self.allow_rewind = world, "g", allow_rewind
        self.acknowledged = acknowledged  # whether the coordinator and the member acknowledge within the timeout

    @property
    def state(self) -> MigrationState:
        return self.world.state

    def phase_is(self, phase: Phase) -> list[str]:
        return [] if self.state.phase == phase else [f"at {self.state.phase.name}"]

    def mixed(self) -> bool:
        return False  # one member of one kind at a time here; mixed groups: test_mixed_group_model.py

    def facts(self, stores: bool = True) -> GroupFacts:
        owner = self.world.owner
        legacy, clients = (), ()
        if owner is not None and owner.kind == "legacy":
            legacy = (LegacyMember("legacy-1", advertised=True, epoch=owner.epoch),)
        elif owner is not None and owner.kind == "jvm":
            legacy = (LegacyMember("jvm-1"),)
        elif owner is not None and owner.kind == "client":
            clients = ("client-1",)
        rows = compare_stores(self.zk_offsets(), self.log_offsets()) if stores else ()
        return GroupFacts(self.state, legacy, clients, tuple(rows))

    def zk_offsets(self):
        return {} if self.world.zk is None else {P: self.world.zk}

    def log_offsets(self):
        return {} if self.world.log is None else {P: self.world.log}

    def set_phase(self, phase: Phase) -> None:
        self.world.state = self.state.with_phase(phase, 0)
        self.wait_for_acks()

    def wait_for_acks(self) -> None:
        """The runner's wait: either both watches deliver (and acknowledge), or the step fails still lagging."""
        world, owner = self.world, self.world.owner
        legacy = owner if owner is not None and owner.kind == "legacy" else None
        if self.acknowledged:
            world.coordinator_phase = world.state.phase
            if legacy is not None:
                legacy.epoch, legacy.phase = world.state.epoch, world.state.phase
        elif world.coordinator_phase != world.state.phase or (legacy is not None and legacy.epoch != world.state.epoch):
            raise PhaseNotAcknowledged(self.group, world.state, 0, ["the model's watches lag"])

    def commit_to_log(self, offsets, if_greater: bool = True):
        for offset in offsets.values():
            self.world.commit_log(offset, if_greater=if_greater)
        return {}

    def raise_zk_to_log(self):
        self.world.raise_zk(self.world.log)

    def say(self, line: str) -> None:
        self.world.log_trace.append(line)

    def kafka(self) -> ModelKafka:
        return ModelKafka(self.world)

    def record_kafka_copy(self, copy) -> None:
        self.world.state = self.state.with_kafka_copy(copy, 0)


def migrate(world: World, direction: str, acknowledged: bool = True, to_kafka: bool = False) -> None:
    """One step up or down, as the runner does it: pre-check (refusal changes nothing), run and wait for the
    acknowledgements (a timeout leaves the step under way), post-check. ``to_kafka``: ``up --to`` the copy,
    which the runner plans only once every earlier step is applied."""
    names = [s.name for s in STEPS]
    if world.pending is not None:
        step = STEPS[names.index(world.pending[0])]
        direction = world.pending[1]
    elif direction == "up":
        todo = [s for s in STEPS if s.name not in world.applied and (to_kafka or not s.opt_in)]
        if not todo or (to_kafka and todo[0] is not COPY):
            return
        step = todo[0]
    else:
        if not world.applied:
            return
        step = STEPS[names.index(world.applied[-1])]
    ctx = ModelContext(world, acknowledged)
    if world.pending is None:
        if step.check(ctx, f"before_{direction}"):
            return
        world.pending = (step.name, direction)
    try:
        getattr(step.module, direction)(ctx)
        ctx.wait_for_acks()
    except PhaseNotAcknowledged:
        return  # stays under way; the next migrate action runs it again
    if step.check(ctx, f"after_{direction}"):
        return  # stays under way; the next migrate action runs it again
    world.pending = None
    if direction == "up":
        world.applied.append(step.name)
    else:
        world.applied.remove(step.name)


def take_over(world: World, kind: str) -> None:
    """A new owner starts: it reads the committed offset by its rule, which must not be below the last ack."""
    phase = world.state.phase
    owner = Owner(kind, world.state.epoch, phase)
    fetched = world.fetch(owner)
    assert fetched >= world.acknowledged, (
        f"{kind} member read {fetched} but {world.acknowledged} was acknowledged; {world}"
    )
    owner.position = max(fetched, 0)
    world.owner = owner


def allowed_kinds(world: World) -> list[str]:
    """Owners the runbook (docs/migration.md) and the coordinator's JoinGroup refusal allow now.

    A member that reads ZooKeeper alone (a JVM member; a zkcoord member while the group is ZK_ONLY) may
    start only when `migrate verify` shows no write-behind lag: the coordinator's mirror is behind by
    design, so commits made through the coordinator reach such a reader only once it has caught up.
    """
    zk_complete = read_offset(ZK, world.zk, None) >= read_offset("max", world.zk, world.log)
    reads_log = "0003_read_from_log" in world.applied or world.pending is not None
    if world.pending is not None and world.pending[0] == COPY.name:
        return []  # nobody starts while the copy is under way
    if COPY.name in world.applied:
        return [KAFKA]  # the group runs on the Kafka cluster now (docs/migration.md, step 5)
    kinds = []
    if RULES[world.state.phase].legacy_member.reads != ZK or zk_complete:
        kinds.append("legacy")
    if world.state.phase <= Phase.DUAL_WRITE and not reads_log and zk_complete:
        kinds.append("jvm")  # and never once the group reads from the log
    # The coordinator admits a client by its own view of the phase, which may lag the state's.
    if RULES[world.coordinator_phase].client_member is not None:
        kinds.append("client")
    return kinds


def commit(world: World, crash_after_first: bool) -> None:
    owner = world.owner
    writes, _ = world.rule(owner)
    offset = owner.position
    for index, target in enumerate(writes):
        if target == LOG:
            world.commit_log(offset)
        elif target == ZK:
            world.zk = offset  # the member's own write: updatePersistentPath (§5.1)
        elif target == MIRROR:
            pass  # the coordinator queued it when the log accepted it
        elif target == KAFKA:
            world.kafka = offset
        if crash_after_first and index == 0 and len(writes) > 1:
            world.owner = None
            return
    world.acknowledged = max(world.acknowledged, offset)


MEMBER_ACTIONS = ("consume", "commit", "crash_commit", "restart", "adopt")  # these start a member if none runs
ACTIONS = (*MEMBER_ACTIONS, "coordinator_adopt", "flush", "up", "down")
EXIT_ACTIONS = (*ACTIONS, "stop", "to_kafka")  # members stop, and the group is copied to Kafka


def catch_up(world: World) -> list[str]:
    """Let the mirror and the watches catch up and finish a copy left under way, as an operator does before
    starting members; then who may start."""
    world.flush_mirror()
    world.coordinator_phase = world.state.phase
    if world.pending is not None and world.pending[0] == COPY.name:
        migrate(world, world.pending[1])
    return allowed_kinds(world)


def play(data, world: World, actions: tuple[str, ...]) -> None:
    """Random actions on ``world``, then every newcomer allowed once everything caught up takes the partition
    over; ``take_over`` asserts that each reads at least the last acknowledged offset."""
    highest, copied = world.state.phase, False
    for _ in range(data.draw(st.integers(10, 80), label="length")):
        action = data.draw(st.sampled_from(actions), label="action")
        if action == "restart" or (world.owner is None and action in MEMBER_ACTIONS):
            # nobody may start until the mirror and the watches catch up, which they do in time
            kinds = allowed_kinds(world) or catch_up(world)
            take_over(world, data.draw(st.sampled_from(kinds), label="kind"))
        elif action == "consume":
            world.owner.position += data.draw(st.integers(1, 5), label="records")
        elif action in ("commit", "crash_commit"):
            commit(world, crash_after_first=action == "crash_commit")
        elif action == "adopt" and world.owner.kind == "legacy":
            world.owner.epoch, world.owner.phase = world.state.epoch, world.state.phase
        elif action == "coordinator_adopt":
            world.coordinator_phase = world.state.phase
        elif action == "flush":
            world.flush_mirror()
        elif action == "stop":
            world.owner = None  # a clean stop: every acknowledged commit is in its store
        elif action in ("up", "down", "to_kafka"):
            direction = "down" if action == "down" else "up"
            migrate(world, direction, data.draw(st.booleans(), label="acknowledged in time"), action == "to_kafka")
            highest = max(highest, world.state.phase)
            copied = copied or COPY.name in world.applied
    event(f"highest phase {highest.name}")
    if "to_kafka" in actions:
        event(f"copied to Kafka {copied}")
    # Once the watches and the mirror have caught up, every newcomer the phase allows finds the last ack.
    for kind in catch_up(world):
        take_over(world, kind)


@settings(max_examples=400)
@given(st.data())
def test_interleavings_never_regress_an_offset(data):
    """Issue "Done when": a property test over commits, phase changes and restarts never loses or regresses."""
    world = World()
    take_over(world, "legacy")
    play(data, world, ACTIONS)


def walked_to_log_only(owner: str) -> World:
    """A group walked up every step (the watches keeping up) with ``owner`` committing 7, then ``owner`` running."""
    world = World()
    take_over(world, "legacy")
    world.owner.position = 7
    commit(world, crash_after_first=False)
    for _ in range(4):
        migrate(world, "up")
        world.owner.epoch, world.owner.phase = world.state.epoch, world.state.phase
    assert world.state.phase == Phase.LOG_ONLY and world.pending is None
    take_over(world, owner)
    return world


@settings(max_examples=300)
@given(st.data(), st.sampled_from(["legacy", "client"]))
def test_interleavings_around_the_copy_to_kafka_never_regress_an_offset(data, owner):
    """Issue 19 item 6: the copy to a Kafka cluster and back, with members stopping and starting on either side."""
    play(data, walked_to_log_only(owner), EXIT_ACTIONS)


def test_the_model_copies_to_kafka_and_back_without_losing_a_commit_made_on_kafka():
    world = walked_to_log_only("client")
    migrate(world, "up", to_kafka=True)
    assert COPY.name not in world.applied  # refused: a member still runs on zkcoord
    world.owner = None
    migrate(world, "up", to_kafka=True)
    assert world.applied[-1] == COPY.name and world.kafka == world.log == 7
    take_over(world, "kafka")
    world.owner.position = 12
    commit(world, crash_after_first=False)
    migrate(world, "down")
    assert COPY.name in world.applied  # refused: the consumer on Kafka still runs
    world.owner = None
    migrate(world, "down")
    assert COPY.name not in world.applied and world.log == 12
    take_over(world, "client")  # reads 12


def test_the_model_walks_every_step_up_and_back_down():
    """The same model, driven deliberately: a cooperative group reaches LOG_ONLY and returns to ZK_ONLY."""
    world = World()
    take_over(world, "legacy")
    world.owner.position = 7
    commit(world, crash_after_first=False)
    phases = []
    for direction in ["up"] * 4 + ["down"] * 4:
        migrate(world, direction)
        world.coordinator_phase = world.state.phase
        world.owner.epoch, world.owner.phase = world.state.epoch, world.state.phase
        world.flush_mirror()
        phases.append(world.state.phase.name)
        world.owner.position += 1
        commit(world, crash_after_first=False)
    assert phases == [
        "DUAL_WRITE", "DUAL_WRITE", "LOG_PRIMARY", "LOG_ONLY", "LOG_PRIMARY", "DUAL_WRITE", "DUAL_WRITE", "ZK_ONLY",
    ]  # fmt: skip
    assert world.zk == world.acknowledged == 15
    assert world.log == 14  # back in ZK_ONLY the last commit went to ZooKeeper alone


def test_a_zookeeper_only_member_blocks_reading_from_the_log():
    """docs/migration.md step 3: 0003 is refused while a member may commit to ZooKeeper only."""
    world = World()
    take_over(world, "jvm")
    migrate(world, "up")
    migrate(world, "up")
    world.owner.position = 9
    commit(world, crash_after_first=False)  # a JVM commit: ZooKeeper only, so the log falls behind
    migrate(world, "up")
    assert world.state.phase == Phase.DUAL_WRITE and "0003_read_from_log" not in world.applied


def test_a_client_after_a_step_down_finds_what_a_jvm_member_committed_to_zookeeper():
    """The issue's gap: after `migrate down` from LOG_PRIMARY a JVM member commits to ZooKeeper alone and stops,
    and a client member follows at once. The step returned only once the coordinator acknowledged DUAL_WRITE,
    so the client reads the larger of both stores; a step whose acknowledgement timed out is still under way,
    which admits no JVM member."""
    world = World()
    take_over(world, "legacy")
    for _ in range(3):
        migrate(world, "up")
    assert world.state.phase == world.coordinator_phase == Phase.LOG_PRIMARY
    world.owner.position = 5
    commit(world, crash_after_first=False)
    world.flush_mirror()

    migrate(world, "down", acknowledged=False)
    assert world.pending == ("0003_read_from_log", "down") and "jvm" not in allowed_kinds(world)
    migrate(world, "down")
    assert world.pending is None

    take_over(world, "jvm")
    world.owner.position = 9
    commit(world, crash_after_first=False)
    take_over(world, "client")
    assert world.owner.position == 9
