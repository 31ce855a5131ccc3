"""What a comparison run does, as data: the variants, the scenarios' steps, and when a group counts as settled.

Pure: no processes, no ZooKeeper, no clock; the runner (zkcoord.compare.runner) carries the plans out and feeds
:class:`GroupView` the ``compare.*`` events it reads back from the members' traces, with the time.
"""

from collections.abc import Iterable
from dataclasses import dataclass, field

LEGACY = "legacy"

# Who runs the group's rebalance ...
ZOOKEEPER = "zookeeper"  # nobody: the 0.8.2 members among themselves, through ZooKeeper
ZKCOORD = "zkcoord"  # zkcoord's coordinator nodes
BROKER = "broker"  # the Kafka broker the records come from, with its own group coordinator
KAFKA4 = "kafka4"  # a Kafka 4 broker in KRaft mode of the run's own, its coordinator and its records' source
# ... and which consumer the members run.
LEGACY_MEMBER = "legacy"  # zkcoord.legacy.LegacyConsumer
CLIENT_MEMBER = "client"  # zkcoord.client.Consumer, zkcoord's protocol
RDKAFKA_MEMBER = "rdkafka"  # librdkafka (confluent-kafka), Kafka's protocol
JVM_MEMBER = "jvm"  # Kafka 0.8.2's own consumer, in a JVM: some of a legacy group's members (--jvm-members)
# Kafka's group protocols, for librdkafka members: JoinGroup/SyncGroup, or KIP-848's ConsumerGroupHeartbeat.
CLASSIC_PROTOCOL = "classic"
CONSUMER_PROTOCOL = "consumer"


@dataclass(frozen=True)
class Variant:
    """How the group coordinates: the 0.8.2 ZooKeeper protocol, or a coordinator with one client set-up."""

    name: str
    label: str
    strategy: str = "range"
    static: bool = False
    coordinator: str = ZKCOORD
    member: str = CLIENT_MEMBER
    # member-migration: how (WHOLE_GROUP or MEMBER_BY_MEMBER) members running ``successor`` replace ``member``'s
    migration: str | None = None
    successor: str | None = None
    group_protocol: str = CLASSIC_PROTOCOL

    @property
    def on_kafka4(self) -> bool:
        """Its group and records are on the Kafka 4 broker of the comparison, not on the run's source."""
        return self.coordinator == KAFKA4

    @property
    def legacy(self) -> bool:
        return self.coordinator == ZOOKEEPER

    @property
    def migrates(self) -> bool:
        return self.migration is not None

    @property
    def consumers(self) -> set[str]:
        """Every consumer its members run."""
        return {self.member} | ({self.successor} if self.successor else set())

    @property
    def reads_kafka(self) -> bool:
        """Its members read records only from the run's Kafka source (librdkafka has no synthetic source); the
        Kafka 4 variants bring their broker."""
        return not self.on_kafka4 and (RDKAFKA_MEMBER in self.consumers or self.coordinator == BROKER)


def _rdkafka_variants(prefix: str, coordinator: str, where: str) -> tuple[Variant, ...]:
    """Eager, cooperative and static librdkafka members on one coordinator."""
    common = {"coordinator": coordinator, "member": RDKAFKA_MEMBER}
    return (
        Variant(f"{prefix}-eager", f"librdkafka on {where}, eager (range)", **common),
        Variant(
            f"{prefix}-cooperative",
            f"librdkafka on {where}, cooperative-sticky",
            strategy="cooperative-sticky",
            **common,
        ),
        Variant(
            f"{prefix}-static",
            f"librdkafka on {where}, static members (range, group.instance.id)",
            static=True,
            **common,
        ),
    )


def _kafka4_variants() -> tuple[Variant, ...]:
    """librdkafka members on the comparison's Kafka 4 broker: the classic protocol, and KIP-848's (the broker's
    default assignor, ``uniform``), dynamic and static."""
    common = {"coordinator": KAFKA4, "member": RDKAFKA_MEMBER}
    kip848 = {"strategy": "uniform", "group_protocol": CONSUMER_PROTOCOL, **common}
    where = "librdkafka on a Kafka 4 broker (KRaft)"
    return (
        Variant("classic-kafka4", f"{where}, classic protocol, eager (range)", **common),
        Variant("kip848", f"{where}, KIP-848 consumer protocol, the broker's uniform assignor", **kip848),
        Variant(
            "kip848-static",
            f"{where}, KIP-848 consumer protocol, static members (group.instance.id)",
            static=True,
            **kip848,
        ),
    )


WHOLE_GROUP = "whole-group"
MEMBER_BY_MEMBER = "member-by-member"


def _migration_variants(successor: str, prefix: str, what: str) -> tuple[Variant, ...]:
    """A legacy group moved to ``successor`` members: all stopped at once, or one member at a time."""
    common = {"member": LEGACY_MEMBER, "successor": successor}
    return (
        Variant(
            f"{prefix}{WHOLE_GROUP}",
            f"legacy members all stopped, the group put in DUAL_WRITE, {what} all started",
            migration=WHOLE_GROUP,
            **common,
        ),
        Variant(
            f"{prefix}{MEMBER_BY_MEMBER}",
            f"legacy members replaced one at a time by {what} in the DUAL_WRITE (mixed) group",
            migration=MEMBER_BY_MEMBER,
            **common,
        ),
    )


VARIANTS = {
    variant.name: variant
    for variant in (
        Variant(LEGACY, "ZooKeeper 0.8.2 (range)", coordinator=ZOOKEEPER, member=LEGACY_MEMBER),
        Variant("eager", "coordinator, eager (range, dynamic members)"),
        Variant("static", "coordinator, static members (range, group.instance.id)", static=True),
        Variant("cooperative", "coordinator, cooperative-sticky", strategy="cooperative-sticky"),
        *_rdkafka_variants("kafka", BROKER, "Kafka's own coordinator"),
        *_rdkafka_variants("rdkafka", ZKCOORD, "zkcoord's Kafka listener"),
        *_kafka4_variants(),
        *_migration_variants(CLIENT_MEMBER, "", "coordinator members"),
        *_migration_variants(RDKAFKA_MEMBER, "rdkafka-", "librdkafka members through zkcoord's Kafka listener"),
    )
}

SCENARIOS = (
    "cold-start",
    "scale-up",
    "scale-down",
    "rolling-bounce",
    "kill",
    "session-expiry",
    "coordinator-failover",
    "partition-change",
    "member-migration",
)
MIGRATION_STEP = "0001_dual_commit"  # the step that puts a group in DUAL_WRITE, where it may be mixed


def baseline(variant: str) -> str | None:
    """The variant whose run of the same scenario the report divides ``variant``'s by (None: it is a baseline):
    the legacy group, or for a member-by-member migration the whole-group stop of the same members."""
    if variant.endswith(MEMBER_BY_MEMBER):
        return variant.removesuffix(MEMBER_BY_MEMBER) + WHOLE_GROUP
    return None if variant == LEGACY or variant.endswith(WHOLE_GROUP) else LEGACY


@dataclass(frozen=True)
class Action:
    """One thing the runner does to the group: ``kind`` on ``target`` (a member name, or a topic).

    Kinds: ``start``, ``close`` (clean), ``restart`` (close, ``hold_ms`` down, start again), ``kill`` (SIGKILL),
    ``pause`` (SIGSTOP for ``hold_ms``, then SIGCONT), ``kill-coordinator`` (SIGKILL the group's coordinator
    node), ``add-partitions`` (``count`` more partitions for topic ``target``); for a migration ``migrate``
    (``migrate up --to`` step ``target``), ``await-partitions`` (until member ``target`` owns some and the group
    has settled), ``start-together`` and ``close-together`` (every member of ``members`` at once, as a
    deployment's stop and start). A started member runs ``consumer`` (None: the variant's ``member``).
    """

    kind: str
    target: str | None = None
    hold_ms: int = 0
    count: int = 0
    members: tuple[str, ...] = ()
    consumer: str | None = None


@dataclass(frozen=True)
class Step:
    name: str
    actions: tuple[Action, ...]


@dataclass(frozen=True)
class Plan:
    """Members started (and settled) before the window opens, then the steps, each waited on until settled."""

    scenario: str
    initial_members: tuple[str, ...]
    steps: tuple[Step, ...]
    coordinator_nodes: int = 1


@dataclass(frozen=True)
class Workload:
    """The shape of a run: members, topics × partitions, the change size ``k``, the timings, and at most how many
    members a rolling bounce bounces (0: every one; fewer samples the pause of each bounce in a large group in less
    time)."""

    members: int = 6
    partitions: int = 12
    topics: int = 1
    k: int = 2
    downtime_ms: int = 1000
    session_timeout_ms: int = 6000
    bounces: int = 0

    def member_names(self, count: int, first: int = 0) -> tuple[str, ...]:
        return tuple(f"m{n:02d}" for n in range(first, first + count))


class NotApplicable(ValueError):
    """The scenario has no meaning for the variant (a coordinator failover of a ZooKeeper group)."""


def plan(scenario: str, variant: Variant, workload: Workload, topics: Iterable[str]) -> Plan:
    """The steps of ``scenario`` for ``variant``; raises :class:`NotApplicable` or ValueError (unknown name)."""
    n, k = workload.members, workload.k
    everyone = workload.member_names(n)
    if scenario not in SCENARIOS:
        raise ValueError(f"unknown scenario {scenario!r}; one of {', '.join(SCENARIOS)}")
    if scenario in ("scale-down", "kill", "session-expiry", "rolling-bounce") and n < 2:
        raise ValueError(f"{scenario} needs at least 2 members")
    if workload.bounces < 0:
        raise ValueError(f"bounces {workload.bounces}: a count of members, 0 for every one")
    if scenario == "scale-down" and not 0 < k < n:
        raise ValueError(f"scale-down by {k} needs 0 < k < members ({n})")
    if (scenario == "member-migration") != variant.migrates:
        raise NotApplicable("member-migration runs the migration variants only, and they run nothing else")
    if scenario == "member-migration":
        return _migration_plan(variant, workload)
    if scenario == "cold-start":
        return Plan(scenario, (), (Step(f"start {n} members", tuple(Action("start", m) for m in everyone)),))
    if scenario == "scale-up":
        added = workload.member_names(k, first=n)
        return Plan(scenario, everyone, (Step(f"start {k} more members", tuple(Action("start", m) for m in added)),))
    if scenario == "scale-down":
        return Plan(scenario, everyone, (Step(f"close {k} members", tuple(Action("close", m) for m in everyone[-k:])),))
    if scenario == "rolling-bounce":
        down = workload.downtime_ms
        bounced = everyone[: workload.bounces or n]
        steps = tuple(Step(f"bounce {m}", (Action("restart", m, hold_ms=down),)) for m in bounced)
        return Plan(scenario, everyone, steps)
    if scenario == "kill":
        return Plan(scenario, everyone, (Step(f"SIGKILL {everyone[0]}", (Action("kill", everyone[0]),)),))
    if scenario == "session-expiry":
        hold = workload.session_timeout_ms * 3 // 2
        step = Step(f"SIGSTOP {everyone[0]} for {hold} ms", (Action("pause", everyone[0], hold_ms=hold),))
        return Plan(scenario, everyone, (step,))
    if scenario == "coordinator-failover":
        if variant.coordinator == ZOOKEEPER:
            raise NotApplicable("a ZooKeeper group has no coordinator to fail over")
        if variant.coordinator in (BROKER, KAFKA4):
            raise NotApplicable("the broker's coordinator is the run's only broker: killing it stops the records too")
        return Plan(scenario, everyone, (Step("SIGKILL the coordinator", (Action("kill-coordinator"),)),), 2)
    actions = tuple(Action("add-partitions", topic, count=k) for topic in topics)
    return Plan(scenario, everyone, (Step(f"add {k} partitions per topic", actions),))


def _migration_plan(variant: Variant, workload: Workload) -> Plan:
    """Legacy members moved to ``variant.successor`` members of the same number, in one of two ways."""
    n = workload.members
    legacy, successors = workload.member_names(n), workload.member_names(n, first=n)
    migrate = Action("migrate", MIGRATION_STEP)
    if variant.migration == WHOLE_GROUP:
        actions = (
            Action("close-together", members=legacy),
            migrate,
            Action("start-together", members=successors, consumer=variant.successor),
        )
        return Plan("member-migration", legacy, (Step("stop, migrate, start the whole group", actions),))
    steps = [Step(f"migrate up --to {MIGRATION_STEP}", (migrate,))]
    for old, new in zip(legacy, successors, strict=True):
        replace = (
            Action("start", new, consumer=variant.successor),
            Action("await-partitions", new),
            Action("close", old),
        )
        steps.append(Step(f"replace {old} by {new}", replace))
    return Plan("member-migration", legacy, tuple(steps))


LEGACY_GENERATION = -1  # a legacy member's rebalances have no generation


@dataclass
class _Instance:
    member: str
    live: bool = True
    owned: frozenset = frozenset()
    generation: int | None = None


@dataclass
class GroupView:
    """The group as its members' ``compare.*`` events describe it, and whether it is settled.

    Settled: the live instances' partitions are disjoint and cover every partition of ``topics``, every live
    instance has reported a rebalance (for the coordinator: all in one generation), and no assignment or
    rebalance event arrived for ``quiet_ms``.
    """

    topics: dict[str, int]
    legacy: bool
    quiet_ms: int = 1000
    instances: dict[str, _Instance] = field(default_factory=dict)
    last_change_ms: int = 0
    processed_up_to: dict[tuple[str, int], int] = field(default_factory=dict)

    def apply(self, event: dict) -> None:
        kind, name = event["type"], event.get("instance")
        if kind == "compare.member":
            if event["event"] == "started":
                self.instances[name] = _Instance(event["member"])
            elif event["event"] in ("closed", "killed") and name in self.instances:
                self.instances[name].live = False
            self.last_change_ms = max(self.last_change_ms, event["time_ms"])
        elif kind == "compare.topic":
            self.topics[event["topic"]] = event["partitions"]
        elif kind == "compare.processed":
            key = (event["topic"], event["partition"])
            self.processed_up_to[key] = max(self.processed_up_to.get(key, -1), event["last_offset"])
        elif kind in ("compare.assignment", "compare.rebalance") and name in self.instances:
            instance = self.instances[name]
            if kind == "compare.assignment":
                instance.owned = frozenset(tuple(tp) for tp in event["partitions"])
            else:
                instance.generation = LEGACY_GENERATION if event["generation"] is None else event["generation"]
            self.last_change_ms = max(self.last_change_ms, event["time_ms"])

    def live(self) -> list[_Instance]:
        return [instance for instance in self.instances.values() if instance.live]

    def problems(self, now_ms: int) -> list[str]:
        """Why the group is not settled at ``now_ms`` (empty: it is)."""
        live = self.live()
        found: list[str] = []
        if not live:
            return ["no live member"]
        owners: dict = {}
        for instance in live:
            for tp in instance.owned:
                owners.setdefault(tp, []).append(instance.member)
        wanted = {(topic, p) for topic, count in self.topics.items() for p in range(count)}
        if unowned := wanted - set(owners):
            found.append(f"{len(unowned)} partitions unowned, e.g. {sorted(unowned)[:3]}")
        if twice := sorted(tp for tp, members in owners.items() if len(members) > 1):
            found.append(f"{len(twice)} partitions owned twice, e.g. {[(tp, owners[tp]) for tp in twice[:3]]}")
        generations = {instance.generation for instance in live}
        if None in generations:
            found.append("a member has not finished its first rebalance")
        elif not self.legacy and len(generations - {LEGACY_GENERATION}) > 1:  # a mixed group's legacy members
            found.append(f"members in generations {sorted(generations)}")
        if now_ms - self.last_change_ms < self.quiet_ms:
            found.append(f"changed {now_ms - self.last_change_ms} ms ago")
        return found

    def behind(self, end_offsets: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        """Partitions whose records below their end offset are not all processed yet: how many are left."""
        left = {tp: end - 1 - self.processed_up_to.get(tp, -1) for tp, end in end_offsets.items()}
        return {tp: count for tp, count in left.items() if count > 0}


# The order in which a team moves through the variants, from a 0.8.2 ZooKeeper group to KIP-848's consumer protocol:
# the report lists them in it and says what changed at each step. It names variants before they exist, so that one
# added to VARIANTS later takes its place; a variant not named here comes after all of these.
MIGRATION_PATH = (
    LEGACY,
    # zkcoord's coordinator, the classic protocol: its own client, then librdkafka through its Kafka listener
    "eager",
    "cooperative",
    "static",
    "rdkafka-eager",
    "rdkafka-cooperative",
    "rdkafka-static",
    # the mixed group: legacy members replaced (member-migration only, beside the whole group stopped at once)
    WHOLE_GROUP,
    MEMBER_BY_MEMBER,
    f"rdkafka-{WHOLE_GROUP}",
    f"rdkafka-{MEMBER_BY_MEMBER}",
    # Kafka's own coordinator, the classic protocol
    "kafka-eager",
    "kafka-cooperative",
    "kafka-static",
    "classic-kafka4",
    # KIP-848's consumer protocol on a Kafka 4 broker
    "kip848",
    "kip848-static",
)
