"""A fault run's schedule, drawn from its seed: which faults hit what, when, for how long, and when the migration
moves (pure: no IO, no clock; the same seed and shape give the same schedule on every machine).

Faults on one target never overlap, at most ``max_concurrent`` are active at once, and every fault is healed
before the window ends, so recovery is measured from one instant for the whole run. The migration of the legacy
group walks its steps up and down one at a time, starting from no step applied.
"""

import random
from collections.abc import Sequence
from dataclasses import dataclass

KILL_NODE = "kill-node"
PAUSE_NODE = "pause-node"
KILL_MEMBER = "kill-member"
PAUSE_MEMBER = "pause-member"
ZK_RESTART = "zk-restart"
SESSION_EXPIRY = "session-expiry"
PARTITION_ZK = "partition-zk"
PARTITION_CLIENTS = "partition-clients"
FULL_DISK = "full-disk"
SLOW_FSYNC = "slow-fsync"

FAULT_KINDS = (
    KILL_NODE,
    PAUSE_NODE,
    KILL_MEMBER,
    PAUSE_MEMBER,
    ZK_RESTART,
    SESSION_EXPIRY,
    PARTITION_ZK,
    PARTITION_CLIENTS,
    FULL_DISK,
    SLOW_FSYNC,
)
NODE_KINDS = frozenset({KILL_NODE, PAUSE_NODE, PARTITION_CLIENTS, SLOW_FSYNC})
MEMBER_KINDS = frozenset({KILL_MEMBER, PAUSE_MEMBER})
# A node or a legacy member (of the legacy or the mixed group): their ZooKeeper link (client and librdkafka
# members have none).
ZK_CLIENT_KINDS = frozenset({SESSION_EXPIRY, PARTITION_ZK})
ZOOKEEPER = "zookeeper"
LOG_DISK = "log-disk"  # the nodes share one log directory (docs/coordinator.md)
UP, DOWN = "up", "down"


@dataclass(frozen=True)
class Shape:
    """What a run is made of: the targets the nemesis may pick and the timings that bound its faults."""

    nodes: Sequence[str]
    legacy_members: Sequence[str]
    client_members: Sequence[str]
    migration_steps: int  # steps in the migrations directory
    session_timeout_ms: int
    rdkafka_members: Sequence[str] = ()  # librdkafka consumers, through the nodes' Kafka listeners
    mixed_legacy_members: Sequence[str] = ()  # the mixed group's 0.8.2 members (a ZooKeeper link each)
    mixed_client_members: Sequence[str] = ()  # the mixed group's coordinator members
    window_ms: int = 20_000
    faults: tuple[int, int] = (3, 6)  # how many per run, inclusive
    max_concurrent: int = 2
    migration_moves: tuple[int, int] = (3, 6)


@dataclass(frozen=True)
class Fault:
    """``kind`` hits ``target`` at ``at_ms`` (from the window's start) and is healed ``hold_ms`` later: a killed
    process is restarted then, a paused one continued, a cut link restored. ``delay_ms`` is a slow fsync's delay."""

    at_ms: int
    kind: str
    target: str
    hold_ms: int
    delay_ms: int = 0

    @property
    def healed_ms(self) -> int:
        return self.at_ms + self.hold_ms


@dataclass(frozen=True)
class MigrationMove:
    """At ``at_ms``, run ``migrate <direction> --to <to>``: one step up or down (``to`` None: no step applied)."""

    at_ms: int
    direction: str
    to: int  # steps applied afterwards


@dataclass(frozen=True)
class Schedule:
    seed: int
    faults: tuple[Fault, ...]
    moves: tuple[MigrationMove, ...]

    @property
    def kinds(self) -> set[str]:
        return {fault.kind for fault in self.faults}


def hold_range(kind: str, session_ms: int) -> tuple[int, int]:
    """How long a fault of ``kind`` lasts: a session expiry outlasts the session, a partition from ZooKeeper does
    not (so it tests a suspended session that comes back), pauses straddle the session timeout."""
    return {
        KILL_NODE: (0, 2000),
        KILL_MEMBER: (0, 2000),
        PAUSE_NODE: (500, 2 * session_ms),
        PAUSE_MEMBER: (500, 2 * session_ms),
        ZK_RESTART: (500, 3000),
        SESSION_EXPIRY: (3 * session_ms // 2, 2 * session_ms),
        PARTITION_ZK: (300, 2 * session_ms // 3),
        PARTITION_CLIENTS: (500, 3000),
        FULL_DISK: (1000, 4000),
        SLOW_FSYNC: (1000, 4000),
    }[kind]


def targets(kind: str, shape: Shape) -> list[str]:
    if kind in NODE_KINDS:
        return list(shape.nodes)
    if kind in MEMBER_KINDS:
        return [
            *shape.legacy_members,
            *shape.client_members,
            *shape.rdkafka_members,
            *shape.mixed_legacy_members,
            *shape.mixed_client_members,
        ]
    if kind in ZK_CLIENT_KINDS:
        return [*shape.nodes, *shape.legacy_members, *shape.mixed_legacy_members]
    return [LOG_DISK] if kind == FULL_DISK else [ZOOKEEPER]


def draw_schedule(seed: int, shape: Shape, kinds: Sequence[str] = FAULT_KINDS) -> Schedule:
    """The schedule of run ``seed``; ``kinds`` limits the faults the nemesis may choose from."""
    rng = random.Random(seed)
    faults: list[Fault] = []
    wanted = rng.randint(*shape.faults)
    for _ in range(wanted * 10):  # a draw that does not fit is dropped; enough tries for crowded shapes
        if len(faults) == wanted:
            break
        kind = rng.choice(list(kinds))
        target = rng.choice(targets(kind, shape))
        low, high = hold_range(kind, shape.session_timeout_ms)
        at_ms = rng.randrange(1000, shape.window_ms - low)
        hold_ms = min(rng.randint(low, high), shape.window_ms - at_ms)
        fault = Fault(at_ms, kind, target, hold_ms, rng.randint(200, 800) if kind == SLOW_FSYNC else 0)
        if _fits(fault, faults, shape.max_concurrent):
            faults.append(fault)
    return Schedule(seed, tuple(sorted(faults, key=lambda f: f.at_ms)), _draw_moves(rng, shape))


def _fits(fault: Fault, placed: list[Fault], max_concurrent: int) -> bool:
    overlapping = [f for f in placed if f.at_ms <= fault.healed_ms and fault.at_ms <= f.healed_ms]
    if any(f.target == fault.target for f in overlapping):
        return False
    # The most faults active at one instant is reached at the start of one of them.
    starts = [fault.at_ms] + [f.at_ms for f in overlapping if fault.at_ms <= f.at_ms <= fault.healed_ms]
    return all(1 + sum(f.at_ms <= t <= f.healed_ms for f in overlapping) <= max_concurrent for t in starts)


def _draw_moves(rng: random.Random, shape: Shape) -> tuple[MigrationMove, ...]:
    if shape.migration_steps == 0:
        return ()
    count = rng.randint(*shape.migration_moves)
    times = sorted(rng.sample(range(500, shape.window_ms, 250), count))
    moves, applied = [], 0
    for at_ms in times:
        up = applied == 0 or (applied < shape.migration_steps and rng.random() < 0.6)
        applied += 1 if up else -1
        moves.append(MigrationMove(at_ms, UP if up else DOWN, applied))
    return tuple(moves)
