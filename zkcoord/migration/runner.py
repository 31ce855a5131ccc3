"""Applies the ordered steps of ``migrations/`` to a group, recording progress in ZooKeeper.

A step is a module ``NNNN_<what>.py`` with ``PHASE`` (the group's phase once it is applied), ``up(ctx)``,
``down(ctx)`` and ``check(ctx, when) -> [reason, ...]`` for ``when`` in ``before_up``, ``after_up``,
``before_down``, ``after_down``. The runner writes "step S under way" into the group's state before it
runs S and "S applied" (or removed) after S's post-condition holds, each by compare-and-set. Steps are
idempotent, so a run killed at any point is finished by running the same command again: the step under
way is run again first. A step with ``OPT_IN = True`` (leaving zkcoord for a Kafka cluster) runs only when
``--to`` names it or a later step: a plain ``migrate up`` stops before it.

IO: a kazoo client (any handler), a :class:`~zkcoord.channel.CoordinatorChannel` and, for steps that copy to
a Kafka cluster, a :class:`~zkcoord.migration.kafka_target.KafkaTarget`.
"""

import contextlib
import importlib.util
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from zkcoord.channel import CoordinatorChannel
from zkcoord.errors import ZkcoordError
from zkcoord.migration import store
from zkcoord.migration.kafka_target import KafkaTarget, TargetError
from zkcoord.migration.phases import (
    RULES,
    GroupFacts,
    KafkaCopy,
    MigrationError,
    MigrationState,
    Phase,
    compare_stores,
    not_acknowledged,
)
from zkcoord.migration.verify import describe_group, fetch_log_offsets
from zkcoord.wire.requests import partition_error_codes, simple_offset_commit
from zkcoord.zk import layout
from zkcoord.zk.offsets import GuardedWrite, read_group_offsets, write_offsets_if_greater

log = logging.getLogger(__name__)

UP, DOWN = "up", "down"
ZERO = "zero"  # ``--to zero``: no step applied
COMMIT_CHUNK = 1000  # partitions per backfill OffsetCommit
ACK_TIMEOUT_S = 30.0  # how long a step waits for live nodes and members to acknowledge a phase change
# Groups migrated at once by ``run_all``: their reads, state writes and commits are in flight together, so ZooKeeper
# and the node answer many groups per round trip and per fsync; at most this many times ``zk.offsets.BATCH`` reads.
WORKERS = 16
Partition = tuple[str, int]


class PhaseNotAcknowledged(MigrationError):
    """Live zkcoord nodes or members did not acknowledge the group's new epoch in time; the step stays under way."""

    def __init__(self, group: str, state: MigrationState, timeout_s: float, reasons: list[str]):
        self.group, self.reasons = group, reasons
        lines = "\n".join(f"  - {reason}" for reason in reasons)
        super().__init__(
            f"group {group}: phase {state.phase.name} (epoch {state.epoch}) not acknowledged within "
            f"{timeout_s:g} s (the step stays under way; run the command again):\n{lines}"
        )


class MigrationInterrupted(MigrationError):
    """The run was asked to stop (Ctrl-C) and stopped between two of its writes; ``state`` is the group's state then
    (None: it has none), which a rerun of the same command resumes from."""

    def __init__(self, group: str, state: MigrationState | None):
        self.group, self.state = group, state
        super().__init__(f"group {group}: interrupted at {describe_state(state)}")


def describe_state(state: MigrationState | None) -> str:
    """``DUAL_WRITE (epoch 1), 0002_backfill_log under way (up)``: the phase, and the step under way or last applied."""
    if state is None:
        return "ZK_ONLY (no migration state)"
    phase = f"{state.phase.name} (epoch {state.epoch})"
    if state.pending is not None:
        return f"{phase}, {state.pending[0]} under way ({state.pending[1]})"
    return f"{phase}, {state.applied[-1] if state.applied else 'no step'} applied"


class MigrationRefused(MigrationError):
    """A step's pre-condition does not hold; nothing was changed. ``reasons`` say why, one per line."""

    def __init__(self, group: str, step: str, direction: str, reasons: list[str]):
        self.group, self.step, self.direction, self.reasons = group, step, direction, reasons
        lines = "\n".join(f"  - {reason}" for reason in reasons)
        super().__init__(f"group {group}: refusing to run {step} {direction}:\n{lines}")


@dataclass(frozen=True)
class Step:
    name: str
    description: str  # what the step does going up: its docstring's first line
    phase: Phase
    module: ModuleType
    opt_in: bool = False  # run only when --to names it or a later step
    down_description: str = ""  # what undoing it does: the step's ``DOWN``

    def describe(self, direction: str) -> str:
        """What running the step in ``direction`` does."""
        if direction == DOWN:
            return self.down_description or f"Undo: {self.description}"
        return self.description

    def check(self, ctx: "StepContext", when: str) -> list[str]:
        return list(self.module.check(ctx, when))


def default_migrations_dir() -> Path:
    """The steps shipped with the package (``zkcoord/migrations``, a link to the repository's ``migrations/``)."""
    return Path(__file__).resolve().parent.parent / "migrations"


def load_steps(directory: str | Path | None = None, opt_in: bool = False) -> list[Step]:
    """Every ``NNNN_*.py`` step in ``directory``, in order; a malformed step is a :class:`MigrationError`.

    Opt-in steps only with ``opt_in`` (``zkcoord migrate`` asks for them): a program that walks every step, as
    the demo and the fault campaign do, walks the phases and stays on zkcoord."""
    directory = Path(directory) if directory is not None else default_migrations_dir()
    if not directory.is_dir():
        raise MigrationError(f"no migrations directory at {directory}")
    steps = []
    for path in sorted(directory.glob("[0-9][0-9][0-9][0-9]_*.py")):
        spec = importlib.util.spec_from_file_location(f"zkcoord_migration_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except Exception as error:
            raise MigrationError(f"cannot load migration step {path}: {type(error).__name__}: {error}") from error
        missing = [name for name in ("PHASE", "up", "down", "check") if not hasattr(module, name)]
        if missing:
            raise MigrationError(f"migration step {path} lacks {', '.join(missing)}")
        description = (module.__doc__ or path.stem).strip().splitlines()[0]
        optional = bool(getattr(module, "OPT_IN", False))
        if opt_in or not optional:
            undo = str(getattr(module, "DOWN", ""))
            steps.append(Step(path.stem, description, Phase(module.PHASE), module, optional, undo))
    if not steps:
        raise MigrationError(f"no migration steps (NNNN_<what>.py) in {directory}")
    return steps


@dataclass
class StepContext:
    """What a step sees: the group, its state, both offset stores, its live members; and what it may do."""

    group: str
    zk: KazooClient
    channel: CoordinatorChannel
    root: str
    state: MigrationState
    version: int
    now_ms: Callable[[], int]
    allow_rewind: bool = False
    say: Callable[[str], None] = print
    progress: Callable[[int, str], Callable[[int], None]] = lambda total, what: lambda n: None
    ack_timeout_s: float = ACK_TIMEOUT_S
    target: KafkaTarget | None = None
    legacy_strategy: str = "range"  # 0.8.2's partition.assignment.strategy of the group's legacy members
    stop: threading.Event = field(default_factory=threading.Event)  # set: stop at the next safe point

    def stop_if_asked(self) -> None:
        """:class:`MigrationInterrupted` once the run was asked to stop: called where stopping leaves the stored
        state as a rerun expects it (between writes, in waits)."""
        if self.stop.is_set():
            raise MigrationInterrupted(self.group, self.state)

    # -- reading ------------------------------------------------------------------------------------------

    def facts(self, stores: bool = True) -> GroupFacts:
        rows = compare_stores(self.zk_offsets(), self.log_offsets()) if stores else []
        return GroupFacts(
            self.state,
            tuple(store.live_legacy_members(self.zk, self.root, self.group)),
            tuple(self.coordinator_members()),
            tuple(rows),
            tuple(store.node_acks(self.zk, self.root, self.group)),
        )

    def zk_offsets(self) -> dict[Partition, int]:
        return read_group_offsets(self.zk, self.group).offsets

    def log_offsets(self) -> dict[Partition, int]:
        return fetch_log_offsets(self.channel, self.group)

    def coordinator_members(self) -> list[str]:
        described = describe_group(self.channel, self.group)
        return sorted(member["member_id"] for member in described.get("members") or [])

    def kafka(self) -> KafkaTarget:
        """The Kafka cluster a step copies to; :class:`TargetError` when none was given."""
        if self.target is None:
            raise TargetError(
                f"group {self.group}: copying to Kafka needs the cluster: pass --target-bootstrap-server HOST:PORT"
            )
        return self.target

    def mixed(self) -> bool:
        """Whether the group is a mixed group (it has the bridge of its coordinator members into 0.8.2's)."""
        return store.read_bridge(self.zk, self.root, self.group) is not None

    def phase_is(self, phase: Phase) -> list[str]:
        """A check's reason when the group is not at ``phase`` (empty when it is)."""
        return [] if self.state.phase == phase else [f"the group is at {self.state.phase.name}, not {phase.name}"]

    # -- changing -----------------------------------------------------------------------------------------

    def set_phase(self, phase: Phase) -> None:
        """Move the group to ``phase`` (one step along the order), then wait until it is acknowledged (also
        when the group is there already: a rerun after a timeout waits again)."""
        changed = self.state.with_phase(phase, self.now_ms())
        if changed is not self.state:
            mixed_before, mixed_after = RULES[self.state.phase].mixed_members, RULES[phase].mixed_members
            if mixed_before == mixed_after:
                self.version = store.write_state(self.zk, self.root, self.group, changed, self.version)
            else:  # the mixed-group bridge comes and goes with the phase, atomically
                strategy = self.legacy_strategy if mixed_after else None
                self.version = store.write_state_and_bridge(
                    self.zk, self.root, self.group, changed, self.version, strategy
                )
            self.state = changed
            self.say(f"group {self.group}: phase {phase.name} (epoch {changed.epoch})")
        self.wait_for_acks()

    def record_kafka_copy(self, copy: KafkaCopy | None) -> None:
        """Write into the group's state where its offsets are copied to (None: nowhere), by compare-and-set."""
        changed = self.state.with_kafka_copy(copy, self.now_ms())
        if changed is not self.state:
            self.version = store.write_state(self.zk, self.root, self.group, changed, self.version)
            self.state = changed

    def wait_for_acks(self) -> None:
        """Wait (bounded) until every live zkcoord node and legacy member that follows the group acknowledged
        its current epoch; :class:`PhaseNotAcknowledged` names those that did not."""
        deadline = time.monotonic() + self.ack_timeout_s
        while True:
            members = store.live_legacy_members(self.zk, self.root, self.group)
            nodes = store.node_acks(self.zk, self.root, self.group)
            behind = not_acknowledged(GroupFacts(self.state, tuple(members), nodes=tuple(nodes)))
            if not behind:
                return
            if time.monotonic() > deadline:
                raise PhaseNotAcknowledged(self.group, self.state, self.ack_timeout_s, behind)
            self.stop.wait(0.1)
            self.stop_if_asked()

    def commit_to_log(self, offsets: dict[Partition, int], if_greater: bool = True) -> dict[Partition, int]:
        """Simple commits (generation -1) of ``offsets``; ``if_greater`` leaves a larger log offset alone.

        Returns the per-partition error codes that are not 0 (empty when everything was accepted).
        """
        errors: dict[Partition, int] = {}
        items = sorted(offsets.items())
        advance = self.progress(len(items), f"{self.group}: backfill")
        for start in range(0, len(items), COMMIT_CHUNK):
            self.stop_if_asked()
            chunk = items[start : start + COMMIT_CHUNK]
            response, _ = self.channel.call_coordinator(
                self.group,
                "OffsetCommit",
                retriable=lambda r: _all_retriable(partition_error_codes(r)),
                **simple_offset_commit(self.group, dict(chunk), if_greater=if_greater),
            )
            errors.update({p: code for p, code in partition_error_codes(response).items() if code})
            advance(len(chunk))
        return errors

    def raise_zk_to_log(self) -> GuardedWrite:
        """Bring ZooKeeper up to the log wherever it is behind (set-if-greater: never lowers an offset)."""
        written = write_offsets_if_greater(self.zk, self.group, self.log_offsets())
        if written.written:
            self.say(f"group {self.group}: raised {len(written.written)} ZooKeeper offset(s) to the log's")
        if written.failed:
            shown = ", ".join(f"{t}-{p}: {why}" for (t, p), why in sorted(written.failed.items())[:3])
            raise MigrationError(f"group {self.group}: {len(written.failed)} ZooKeeper offset(s) not raised: {shown}")
        return written


_RETRIABLE = frozenset({14, 15, 16})


def _all_retriable(codes: dict[Partition, int]) -> bool:
    return bool(codes) and set(codes.values()) <= _RETRIABLE


# ---- planning and running --------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlannedStep:
    step: Step
    direction: str
    resumed: bool = False  # the step was under way when a previous run stopped


@dataclass
class GroupStatus:
    group: str
    state: MigrationState | None
    steps: list[Step]
    legacy_jvm_members: int = 0  # registrations without a zkcoord advertisement: Kafka 0.8.2 JVM consumers
    legacy_zkcoord_members: int = 0
    coordinator_members: int | None = 0  # None: no coordinator answered

    @property
    def legacy_members(self) -> int:
        return self.legacy_jvm_members + self.legacy_zkcoord_members

    @property
    def phase(self) -> Phase:
        return Phase.ZK_ONLY if self.state is None else self.state.phase

    @property
    def applied(self) -> list[str]:
        return [] if self.state is None else list(self.state.applied)

    @property
    def next_step(self) -> str | None:
        return next((s.name for s in self.steps if s.name not in self.applied), None)


@dataclass
class RunResult:
    group: str
    done: list[PlannedStep] = field(default_factory=list)
    state: MigrationState | None = None


class Runner:
    """``migrate status|plan|up|down`` for one group at a time."""

    def __init__(
        self,
        zk: KazooClient,
        channel: CoordinatorChannel,
        steps: list[Step],
        root: str = layout.DEFAULT_ROOT,
        now_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
        say: Callable[[str], None] = print,
        progress: Callable[[int, str], Callable[[int], None]] | None = None,
        ack_timeout_s: float = ACK_TIMEOUT_S,
        target: KafkaTarget | None = None,
        legacy_strategy: str = "range",
        stop: threading.Event | None = None,
    ):
        self.zk, self.channel, self.steps, self.root = zk, channel, steps, root
        self.legacy_strategy = legacy_strategy
        self.stop = stop or threading.Event()  # set (by Ctrl-C): every run stops at its next safe point
        self.now_ms, self.say = now_ms, say
        self.progress = progress or (lambda total, what: lambda n: None)
        self.ack_timeout_s = ack_timeout_s
        self.target = target

    def groups(self) -> list[str]:
        """Groups to consider for ``--all``: every ZooKeeper group, and every group with a migration state."""
        found = set()
        for path in (layout.CONSUMERS_PATH, layout.migration_groups_path(self.root)):
            with contextlib.suppress(NoNodeError):
                found.update(self.zk.get_children(path))
        return sorted(found)

    def status(self, group: str, members: bool = True) -> GroupStatus:
        state, _ = store.read_state(self.zk, self.root, group)
        status = GroupStatus(group, state, self.steps)
        if members:
            legacy = store.live_legacy_members(self.zk, self.root, group)
            status.legacy_jvm_members = sum(member.is_jvm for member in legacy)
            status.legacy_zkcoord_members = len(legacy) - status.legacy_jvm_members
            members = None  # unknown without a coordinator, which a group in ZK_ONLY does not need
            if self.channel.addresses():
                try:
                    members = self._context(group, state or MigrationState(), 0).coordinator_members()
                except ZkcoordError as error:
                    log.info("coordinator members of group %s unknown: %s", group, error)
            status.coordinator_members = None if members is None else len(members)
        return status

    def plan(self, group: str, direction: str, to: str | None = None) -> list[PlannedStep]:
        """The steps ``up``/``down`` would run, in order (a step left under way first)."""
        state, _ = store.read_state(self.zk, self.root, group)
        return self._plan(state or MigrationState(), direction, to)

    def _plan(self, state: MigrationState, direction: str, to: str | None) -> list[PlannedStep]:
        names = [s.name for s in self.steps]
        by_name = {s.name: s for s in self.steps}
        if to is not None and to != ZERO and to not in by_name:
            raise MigrationError(f"unknown step {to!r}; steps are: {', '.join(names)} (or {ZERO})")
        recorded = list(state.applied) + ([state.pending[0]] if state.pending else [])
        unknown = [name for name in recorded if name not in by_name]
        if unknown:
            raise MigrationError(f"recorded steps {', '.join(unknown)} are not in the migrations directory")
        applied = set(state.applied)
        if state.pending is not None:
            # A step under way is half done: going up it still has to run, going down it has to be undone.
            (applied.discard if direction == UP else applied.add)(state.pending[0])
        end = None if to is None else 0 if to == ZERO else names.index(to) + 1
        if to is None and direction == UP:  # a plain `up` stops before the first opt-in step not yet begun
            begun = applied | ({state.pending[0]} if state.pending else set())
            end = next((i for i, s in enumerate(self.steps) if s.opt_in and s.name not in begun), None)
        if direction == UP:
            chosen = [n for n in names[: len(names) if end is None else end] if n not in applied]
        else:
            in_order = [n for n in names if n in applied]
            keep = set(in_order[:-1] if end is None else names[:end])
            chosen = [n for n in reversed(in_order) if n not in keep]
        if state.pending is not None and state.pending[0] not in chosen:
            name, way = state.pending
            raise MigrationError(
                f"step {name} is under way ({way}) since a previous run stopped; finish it with "
                f"`migrate {way}` first, or undo it with `migrate {DOWN if way == UP else UP}`"
            )
        if direction == UP:
            _refuse_opt_in_after_other_steps(chosen, by_name, state)
        return [PlannedStep(by_name[n], direction, resumed=state.pending == (n, direction)) for n in chosen]

    def run(
        self, group: str, direction: str, to: str | None = None, dry_run: bool = False, allow_rewind: bool = False
    ) -> RunResult:
        """Apply the plan; :class:`MigrationRefused` when a pre-condition fails (nothing of that step done)."""
        state, version = store.read_state(self.zk, self.root, group)
        ctx = self._context(group, state or MigrationState(), version, allow_rewind)
        result = RunResult(group, state=state)
        for planned in self._plan(ctx.state, direction, to):
            if self.stop.is_set():
                raise MigrationInterrupted(group, state if ctx.version == store.NO_VERSION else ctx.state)
            step, way = planned.step, planned.direction
            if not planned.resumed:
                reasons = step.check(ctx, f"before_{way}")
                if reasons:
                    raise MigrationRefused(group, step.name, way, reasons)
            if dry_run:
                result.done.append(planned)
                self.say(f"group {group}: would run {step.name} {way}: {step.describe(way)}")
                break  # later steps' checks depend on this one's effect
            self._write(ctx, ctx.state.begin(step.name, way, self.now_ms()))
            getattr(step.module, way)(ctx)
            ctx.wait_for_acks()  # a step that left the phase alone still reports done only once it is followed
            reasons = step.check(ctx, f"after_{way}")
            if reasons:
                lines = "\n".join(f"  - {reason}" for reason in reasons)
                raise MigrationError(
                    f"group {group}: {step.name} {way} ran but its post-condition does not hold yet "
                    f"(the step stays under way; run the command again):\n{lines}"
                )
            self._write(ctx, ctx.state.finish(step.name, way, self.now_ms()))
            result.done.append(planned)
            self.say(f"group {group}: {step.name} {way} done ({step.describe(way)})")
        result.state = ctx.state
        return result

    def run_all(
        self,
        groups: list[str],
        direction: str,
        to: str | None = None,
        dry_run: bool = False,
        allow_rewind: bool = False,
        workers: int = WORKERS,
    ) -> Iterator[tuple[str, RunResult | MigrationError]]:
        """:meth:`run` for each group, up to ``workers`` groups at once; yields ``(group, result or the group's
        MigrationError)`` in the order of ``groups``.

        Each group's steps, checks and state writes happen in the same order as with :meth:`run` (a group is one
        run on one thread); only different groups overlap, which is safe because a step reads and changes its own
        group alone. The kazoo client is shared (it is thread-safe, and its session pipelines the threads'
        requests); each thread has a channel of its own (a channel is not)."""
        local = threading.local()
        own_runners: list[Runner] = []

        def run_one(group: str) -> RunResult | MigrationError:
            runner = getattr(local, "runner", None)
            if runner is None:
                runner = local.runner = self._with_channel(self.channel.clone())
                own_runners.append(runner)
            try:
                return runner.run(group, direction, to, dry_run=dry_run, allow_rewind=allow_rewind)
            except MigrationError as error:
                return error

        pool = ThreadPoolExecutor(max(1, min(workers, len(groups))), thread_name_prefix="migrate")
        try:
            futures = [pool.submit(run_one, group) for group in groups]
            for group, future in zip(groups, futures, strict=True):
                yield group, future.result()
        finally:
            pool.shutdown(wait=True, cancel_futures=True)  # a stopped caller starts no new group
            for runner in own_runners:
                runner.channel.close()

    def _with_channel(self, channel: CoordinatorChannel) -> "Runner":
        return Runner(
            self.zk,
            channel,
            self.steps,
            self.root,
            self.now_ms,
            self.say,
            self.progress,
            self.ack_timeout_s,
            self.target,
            self.legacy_strategy,
            self.stop,
        )

    def _write(self, ctx: StepContext, state: MigrationState) -> None:
        ctx.version = store.write_state(self.zk, self.root, ctx.group, state, ctx.version)
        ctx.state = state

    def _context(self, group: str, state: MigrationState, version: int, allow_rewind: bool = False) -> StepContext:
        return StepContext(
            group,
            self.zk,
            self.channel,
            self.root,
            state,
            version,
            self.now_ms,
            allow_rewind=allow_rewind,
            say=self.say,
            progress=self.progress,
            ack_timeout_s=self.ack_timeout_s,
            target=self.target,
            legacy_strategy=self.legacy_strategy,
            stop=self.stop,
        )


def _refuse_opt_in_after_other_steps(chosen: list[str], by_name: dict[str, Step], state: MigrationState) -> None:
    """An opt-in step runs on its own: the steps before it keep members running, it needs them stopped."""
    opt_in = [n for n in chosen if by_name[n].opt_in]
    if opt_in and chosen[0] != opt_in[0]:
        before = chosen[: chosen.index(opt_in[0])]
        raise MigrationError(
            f"step {opt_in[0]} runs only on a group that has every earlier step applied (the group is at "
            f"{state.phase.name}; {', '.join(before)} not applied): run `migrate up` without --to first, then stop "
            f"the group's consumers and run it again"
        )


def iter_groups(runner: Runner, group: str | None, all_groups: bool) -> Iterable[str]:
    if all_groups:
        return runner.groups()
    if not group or not layout.is_legal_name(group):
        raise MigrationError(f"group {group!r} is not a legal group id")
    return [group]
