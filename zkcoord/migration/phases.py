"""Offset-migration phases of a group and the rules that follow from them (pure: no IO, no clock).

A group moves ZK_ONLY → DUAL_WRITE → LOG_PRIMARY → LOG_ONLY and back, one phase at a time. The phase
is stored in ZooKeeper (``zkcoord.zk.layout.migration_path``) with an epoch that grows on every change,
and it wins over a member's own ``offsets.storage``/``dual.commit.enabled`` (docs/migration.md). Who
writes and reads which store in each phase is :data:`RULES`, a table the docs and the tests read.

Must not import kazoo, gevent, sockets or the clock.
"""

import enum
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from zkcoord.errors import ZkcoordError


class Phase(enum.IntEnum):
    """Where a group's offsets live; the order is the order of migration."""

    ZK_ONLY = 0
    DUAL_WRITE = 1
    LOG_PRIMARY = 2
    LOG_ONLY = 3


ZK = "zookeeper"
LOG = "log"
MAX = "max"  # read both stores, take the larger offset (0.8.2's dual-commit fetch, §5.2)
MIRROR = "mirror"  # the coordinator copies each accepted commit into ZooKeeper, set-if-greater


@dataclass(frozen=True)
class StoreRule:
    """What one kind of participant does in a phase: where it commits (in order) and where it reads."""

    writes: tuple[str, ...]
    reads: str


@dataclass(frozen=True)
class PhaseRules:
    legacy_member: StoreRule
    client_member: StoreRule | None  # None: the coordinator refuses JoinGroup (offsets not in the log yet)
    coordinator_fetch: str  # how the coordinator answers OffsetFetch: LOG or MAX
    coordinator_mirror: bool  # whether the coordinator mirrors accepted commits into ZooKeeper
    mixed_members: bool = False  # whether legacy and coordinator members may share the group (zkcoord.bridge)


RULES: Mapping[Phase, PhaseRules] = {
    Phase.ZK_ONLY: PhaseRules(StoreRule((ZK,), ZK), None, MAX, True),
    Phase.DUAL_WRITE: PhaseRules(StoreRule((LOG, ZK), MAX), StoreRule((LOG, MIRROR), MAX), MAX, True, True),
    Phase.LOG_PRIMARY: PhaseRules(StoreRule((LOG, MIRROR), LOG), StoreRule((LOG, MIRROR), LOG), LOG, True),
    Phase.LOG_ONLY: PhaseRules(StoreRule((LOG,), LOG), StoreRule((LOG,), LOG), LOG, False),
}


class MigrationError(ZkcoordError):
    """A migration step or check that could not be carried out."""


class MigrationStateError(MigrationError):
    """A stored migration state that cannot be read, or a change to it that is not allowed."""


@dataclass(frozen=True)
class KafkaCopy:
    """The Kafka cluster step 0005 copied (or is copying) the group's offsets to."""

    cluster_id: str
    bootstrap: str


@dataclass(frozen=True)
class MigrationState:
    """A group's migration record: phase, epoch (grows on each change), steps applied, step under way, and where
    its offsets were copied out of zkcoord."""

    phase: Phase = Phase.ZK_ONLY
    epoch: int = 0
    applied: tuple[str, ...] = ()
    pending: tuple[str, str] | None = None  # (step, "up"|"down") begun but not finished
    updated_ms: int = 0
    kafka_copy: KafkaCopy | None = None

    def with_phase(self, phase: Phase, now_ms: int) -> "MigrationState":
        """One step along the phase order (or no change); skipping a phase is refused."""
        if phase == self.phase:
            return self
        if abs(int(phase) - int(self.phase)) != 1:
            raise MigrationStateError(f"cannot go from {self.phase.name} to {phase.name}: phases change one at a time")
        return replace(self, phase=phase, epoch=self.epoch + 1, updated_ms=now_ms)

    def with_kafka_copy(self, copy: KafkaCopy | None, now_ms: int) -> "MigrationState":
        """Record where the offsets were copied (None: nowhere, or copied back); the phase does not change."""
        return self if copy == self.kafka_copy else replace(self, kafka_copy=copy, updated_ms=now_ms)

    def begin(self, step: str, direction: str, now_ms: int) -> "MigrationState":
        return replace(self, pending=(step, direction), updated_ms=now_ms)

    def finish(self, step: str, direction: str, now_ms: int) -> "MigrationState":
        applied = tuple(s for s in self.applied if s != step)
        if direction == "up":
            applied += (step,)
        return replace(self, applied=applied, pending=None, updated_ms=now_ms)


def encode_state(state: MigrationState) -> bytes:
    """``{"version":1,"phase":"DUAL_WRITE","epoch":2,"applied":[...],"pending":null,"updated_ms":...}``, and
    ``"kafka_copy":{"cluster_id":...,"bootstrap":...}`` once the offsets were copied to a Kafka cluster."""
    obj = {
        "version": 1,
        "phase": state.phase.name,
        "epoch": state.epoch,
        "applied": list(state.applied),
        "pending": None if state.pending is None else {"step": state.pending[0], "direction": state.pending[1]},
        "updated_ms": state.updated_ms,
    }
    if state.kafka_copy is not None:
        obj["kafka_copy"] = {"cluster_id": state.kafka_copy.cluster_id, "bootstrap": state.kafka_copy.bootstrap}
    return json.dumps(obj, separators=(",", ":")).encode("utf-8")


def decode_state(where: str, data: bytes | None) -> MigrationState:
    """The state stored at ``where``; :class:`MigrationStateError` names what is wrong with foreign data."""
    try:
        obj = json.loads((data or b"").decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        raise MigrationStateError(f"{where}: not a migration state ({type(error).__name__}: {error})") from None
    if not isinstance(obj, dict) or not _is_int(obj.get("version")) or obj["version"] < 1:
        raise MigrationStateError(f"{where}: not a migration state (no version)")
    phase, epoch, applied = obj.get("phase"), obj.get("epoch"), obj.get("applied", [])
    if phase not in Phase.__members__:
        raise MigrationStateError(f"{where}: unknown phase {phase!r}")
    if not _is_int(epoch) or epoch < 0:
        raise MigrationStateError(f"{where}: epoch must be an integer ≥ 0, not {epoch!r}")
    if not isinstance(applied, list) or not all(isinstance(s, str) for s in applied):
        raise MigrationStateError(f"{where}: applied must be a list of step names")
    pending = obj.get("pending")
    if pending is not None:
        if not isinstance(pending, dict) or pending.get("direction") not in ("up", "down"):
            raise MigrationStateError(f"{where}: pending must be {{step, direction}}")
        pending = (str(pending.get("step")), pending["direction"])
    updated = obj.get("updated_ms", 0)
    copy = obj.get("kafka_copy")
    if copy is not None:
        if not isinstance(copy, dict) or not all(isinstance(copy.get(k), str) for k in ("cluster_id", "bootstrap")):
            raise MigrationStateError(f"{where}: kafka_copy must be {{cluster_id, bootstrap}}")
        copy = KafkaCopy(copy["cluster_id"], copy["bootstrap"])
    return MigrationState(Phase[phase], epoch, tuple(applied), pending, updated if _is_int(updated) else 0, copy)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# ---- offsets under two stores ----------------------------------------------------------------------------

NO_OFFSET = -1


def read_offset(rule: str, zk: int | None, log: int | None) -> int:
    """The committed offset a reader following ``rule`` sees (-1 for none)."""
    zk_offset = NO_OFFSET if zk is None else zk
    log_offset = NO_OFFSET if log is None else log
    if rule == ZK:
        return zk_offset
    if rule == LOG:
        return log_offset
    return max(zk_offset, log_offset)


class Comparison(enum.Enum):
    """One partition's ZooKeeper offset against its log offset (``migrate verify``)."""

    MATCH = "match"
    ZK_AHEAD = "zk_ahead"  # the log would rewind a reader that trusted it alone
    LOG_AHEAD = "log_ahead"  # ZooKeeper lags (write-behind, or commits that skip it)
    MISSING = "missing"  # in one store only


def compare(zk: int | None, log: int | None) -> Comparison:
    if zk is None or log is None:
        return Comparison.MISSING
    if zk == log:
        return Comparison.MATCH
    return Comparison.ZK_AHEAD if zk > log else Comparison.LOG_AHEAD


@dataclass(frozen=True)
class PartitionComparison:
    topic: str
    partition: int
    zk: int | None
    log: int | None

    @property
    def status(self) -> Comparison:
        return compare(self.zk, self.log)


def compare_stores(zk: Mapping[tuple[str, int], int], log: Mapping[tuple[str, int], int]) -> list[PartitionComparison]:
    """Every partition in either store, ordered by topic and partition."""
    return [PartitionComparison(t, p, zk.get((t, p)), log.get((t, p))) for t, p in sorted(set(zk) | set(log))]


def regressions(phase: Phase, rows: Iterable[PartitionComparison]) -> list[PartitionComparison]:
    """Partitions whose readers in ``phase`` would see an offset lower than one already committed.

    Readers of the log alone (LOG_PRIMARY, LOG_ONLY) regress where ZooKeeper is ahead or holds the only
    offset; readers of ZooKeeper alone (ZK_ONLY) where the log is ahead or holds the only offset. MAX
    readers never regress. In LOG_ONLY, ZooKeeper is no longer written, so only the first case counts.
    """
    reader = RULES[phase].legacy_member.reads
    if reader == MAX:
        return []

    def behind(row: PartitionComparison) -> bool:
        trusted, other = (row.log, row.zk) if reader == LOG else (row.zk, row.log)
        return other is not None and (trusted is None or trusted < other)

    return [row for row in rows if behind(row)]


# ---- who is live in a group ------------------------------------------------------------------------------


@dataclass(frozen=True)
class LegacyMember:
    """A live ``/consumers/<g>/ids`` member and the phase epoch it advertised it follows.

    ``advertised`` False: no advertisement, so a Kafka 0.8.2 JVM member, ZooKeeper only. ``epoch`` -1:
    a zkcoord member that started before the group had a migration state and follows its own config.
    """

    consumer_id: str
    advertised: bool = False
    epoch: int = -1

    @property
    def is_jvm(self) -> bool:
        return not self.advertised


@dataclass(frozen=True)
class NodeAck:
    """A coordinator node that caches the group's migration state, and the epoch it has applied.

    ``epoch`` -1: the group had no migration state when the node read it. ``unreadable``: why the node's
    acknowledgement could not be read (it then counts as not acknowledged).
    """

    node_id: str  # as named under the group's acknowledgements (a node id, unless someone wrote a foreign one)
    epoch: int = -1
    unreadable: str | None = None


@dataclass(frozen=True)
class GroupFacts:
    """What a step's checks look at: the state, the live members of each protocol, the stores compared, and
    the coordinator nodes that follow the group's state."""

    state: MigrationState
    legacy_members: tuple[LegacyMember, ...] = ()
    coordinator_members: tuple[str, ...] = ()
    stores: tuple[PartitionComparison, ...] = field(default=())
    nodes: tuple[NodeAck, ...] = ()


def members_behind(facts: GroupFacts) -> list[str]:
    """Why live legacy members do not yet follow the group's current phase (one line per member)."""
    reasons = []
    for member in facts.legacy_members:
        if member.is_jvm:
            reasons.append(
                f"member {member.consumer_id} has no zkcoord advertisement: a Kafka 0.8.2 JVM consumer, which "
                "commits only to ZooKeeper; stop it or replace it with zkcoord's legacy consumer"
            )
        elif member.epoch < facts.state.epoch:
            reasons.append(
                f"member {member.consumer_id} still follows phase epoch {member.epoch} (the group is at "
                f"{facts.state.phase.name}, epoch {facts.state.epoch}); wait for it to see the change or restart it"
            )
    return reasons


def not_acknowledged(facts: GroupFacts) -> list[str]:
    """Who has not yet acknowledged the group's current epoch (one line each): zkcoord legacy members that
    advertise an older one, and coordinator nodes whose applied epoch is another. JVM members cannot
    acknowledge and are not waited for (the phase rules treat them as ZooKeeper-only)."""
    current = facts.state.epoch
    reasons = members_behind(replace(facts, legacy_members=tuple(m for m in facts.legacy_members if not m.is_jvm)))
    for node in facts.nodes:
        if node.unreadable is not None:
            reasons.append(f"node {node.node_id}: its acknowledgement cannot be read ({node.unreadable})")
        elif node.epoch != current:
            reasons.append(
                f"node {node.node_id} still at epoch {node.epoch} (the group is at {facts.state.phase.name}, "
                f"epoch {current}): it may be paused or cut off from ZooKeeper; its acknowledgement goes with "
                "its ZooKeeper session if it stays away"
            )
    return reasons


def coordinator_members_present(facts: GroupFacts, why: str) -> list[str]:
    """One line naming live coordinator members (up to five) and ``why`` they are in the way."""
    if not facts.coordinator_members:
        return []
    listed = ", ".join(sorted(facts.coordinator_members)[:5])
    more = len(facts.coordinator_members) - 5
    return [f"the group has live coordinator members ({listed}{f' and {more} more' if more > 0 else ''}); {why}"]


def both_kinds_present(facts: GroupFacts, why: str) -> list[str]:
    """One line when the group has live members of both kinds (a mixed group), naming a few of each."""
    if not facts.legacy_members or not facts.coordinator_members:
        return []
    legacy = ", ".join(sorted(m.consumer_id for m in facts.legacy_members)[:3])
    coordinator = ", ".join(sorted(facts.coordinator_members)[:3])
    return [f"the group has legacy members ({legacy}) and coordinator members ({coordinator}); {why}"]


def store_problems(phase: Phase, facts: GroupFacts, hint: str) -> list[str]:
    """One line for the partitions that would regress for readers of ``phase``."""
    bad = regressions(phase, facts.stores)
    if not bad:
        return []
    shown = ", ".join(f"{r.topic}-{r.partition} (zk {_show(r.zk)}, log {_show(r.log)})" for r in bad[:3])
    more = f" and {len(bad) - 3} more" if len(bad) > 3 else ""
    return [f"{len(bad)} partition(s) would go backwards for {phase.name} readers: {shown}{more}; {hint}"]


def _show(offset: int | None) -> str:
    return "none" if offset is None else str(offset)
