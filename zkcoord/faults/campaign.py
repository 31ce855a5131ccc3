"""``zkcoord faults run``: seeded fault runs on real processes, each proven safe by the history checker.

One run: a fresh chroot on the campaign's ZooKeeper, three coordinator nodes, a legacy group (zkcoord's 0.8.2
members, its offsets migrating up and down the steps of ``migrations/`` by ``zkcoord migrate``) and a coordinator
group (zkcoord's client), a mixed group of both kinds in DUAL_WRITE, bridged by the nodes
(``zkcoord.faults.mixed``), records flowing into them from the synthetic source, and a librdkafka group reading
the campaign's Kafka broker through the nodes' Kafka listeners (``zkcoord.faults.data_plane``). Once the groups
are settled, the nemesis carries out the run's schedule (``zkcoord.faults.schedule``, drawn from the seed) for
the window; then production stops, every record must be processed within the recovery timeout, the members
close and the checker (``zkcoord.compare.history``) reads the traces. Each run appends one line to
``OUT/runs.jsonl``, so a campaign that stops resumes with the next seed it has not run.
"""

import json
import logging
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from zkcoord.compare.history import HANDOVER_SLACK_MS, HistoryReport, check_history, summary_table
from zkcoord.compare.member import REBALANCE_MAX_RETRIES, client_member_config, legacy_member_config
from zkcoord.compare.processes import MemberProcess, TraceTail, poll_until
from zkcoord.compare.production import KafkaProduction, SyntheticProduction
from zkcoord.compare.rdkafka_member import rdkafka_member_config
from zkcoord.compare.scenarios import CLIENT_MEMBER, LEGACY_MEMBER, RDKAFKA_MEMBER, GroupView
from zkcoord.faults.cluster import MemberSlot, Nemesis, NodeSlot, available_kinds
from zkcoord.faults.data_plane import (
    campaign_broker,
    create_run_topic,
    endpoint,
    kafka_production,
    register_data_plane,
)
from zkcoord.faults.disk import LogDisk
from zkcoord.faults.fsync import SlowFsync
from zkcoord.faults.mixed import MIXED, bridge_group, mixed_member_names
from zkcoord.faults.schedule import FAULT_KINDS, Fault, Schedule, Shape, draw_schedule
from zkcoord.interrupts import signals_held
from zkcoord.migration.runner import ZERO, load_steps
from zkcoord.model import TopicPartition
from zkcoord.peers.broker import KafkaBroker
from zkcoord.testing.kafka_broker import KafkaEndpoint
from zkcoord.testing.node_process import HOST
from zkcoord.testing.zookeeper import fresh_chroot
from zkcoord.trace import JsonLinesTraceWriter, make_event
from zkcoord.zk.client import started_client
from zkcoord.zk.server import EmbeddedZooKeeper, port_to_return_to

log = logging.getLogger(__name__)

RESULTS = "runs.jsonl"
RUNNER = "runner.jsonl"
LEGACY, CLIENT, RDKAFKA = LEGACY_MEMBER, CLIENT_MEMBER, RDKAFKA_MEMBER  # the group kinds: one per member kind
MIGRATE_TIMEOUT_S = 60.0


@dataclass
class CampaignOptions:
    """What ``zkcoord faults run`` was asked for."""

    out: Path
    runs: int = 5
    first_seed: int = 1
    window_s: float = 20.0
    kinds: list[str] = field(default_factory=lambda: list(FAULT_KINDS))
    nodes: int = 3
    legacy_members: int = 2
    client_members: int = 2
    rdkafka_members: int = 2  # 0: no librdkafka group, and no Kafka broker
    mixed_members: int = 1  # of each kind (legacy, client) in the mixed group; 0: no mixed group
    partitions: int = 4
    rate: float = 20.0  # records/s per partition
    session_timeout_ms: int = 4000
    recovery_timeout_s: float = 90.0
    handover_slack_ms: int = HANDOVER_SLACK_MS
    migrate: bool = True

    def shape(self, migration_steps: int) -> Shape:
        mixed = mixed_member_names(self.mixed_members)
        return Shape(
            nodes=[f"node-{n}" for n in range(1, self.nodes + 1)],
            legacy_members=[f"legacy-{n}" for n in range(self.legacy_members)],
            client_members=[f"client-{n}" for n in range(self.client_members)],
            rdkafka_members=[f"{RDKAFKA}-{n}" for n in range(self.rdkafka_members)],
            mixed_legacy_members=mixed[LEGACY],
            mixed_client_members=mixed[CLIENT],
            migration_steps=migration_steps if self.migrate else 0,
            session_timeout_ms=self.session_timeout_ms,
            window_ms=int(self.window_s * 1000),
        )


class FaultRun:
    """Run ``schedule`` once under ``out`` and return the run's record (the checker's report and what went wrong)."""

    def __init__(
        self,
        options: CampaignOptions,
        zookeeper: EmbeddedZooKeeper,
        shape: Shape,
        schedule: Schedule,
        campaign: str,
        kafka: KafkaEndpoint | None = None,
    ):
        self.options = options
        self.shape = shape
        self.zookeeper = zookeeper
        self.kafka = kafka  # the campaign's broker, when it runs a librdkafka group
        self.schedule = schedule
        self.out = options.out / "runs" / f"seed-{schedule.seed}"
        self.tags = {"run": campaign, "scenario": f"seed-{schedule.seed}", "variant": "faults"}
        kinds = (LEGACY, CLIENT) + ((RDKAFKA,) if shape.rdkafka_members else ())
        kinds += (MIXED,) if shape.mixed_legacy_members else ()
        self.groups = {kind: f"faults.{kind}" for kind in kinds}
        self.topics = {kind: f"{kind}.0" for kind in self.groups}
        if RDKAFKA in self.groups:  # the broker outlives the run: its topic must be the seed's own
            self.topics[RDKAFKA] = f"{RDKAFKA}.seed-{schedule.seed}"
        self.views = {  # legacy members report no generation
            kind: GroupView({self.topics[kind]: options.partitions}, kind in (LEGACY, MIXED)) for kind in self.groups
        }
        self.nodes: dict[str, NodeSlot] = {}
        self.members: dict[str, MemberSlot] = {}
        self.starts: dict[str, int] = {}
        self.problems: list[str] = []  # what went wrong besides the checker's violations
        self.migrations: list[dict] = []
        self.production: SyntheticProduction | None = None  # the legacy and client groups' records
        self.kafka_production: KafkaProduction | None = None  # the librdkafka group's
        self.disk: LogDisk | None = None
        self.direct_connect = self.chroot = ""  # the run's chroot on ZooKeeper, set when it starts
        self._writer: JsonLinesTraceWriter | None = None
        self._lock = threading.Lock()
        self._stopping = threading.Event()  # the nemesis and the migration end their schedules when set
        self._threads: list[threading.Thread] = []

    # -- events --

    def emit(self, event_type: str, member: str = "runner", **fields) -> None:
        kind = self.members[member].group if member in self.members else None
        event = make_event(event_type, int(time.time() * 1000), self.groups.get(kind, ""), member, **fields)
        event.update(self.tags)
        event.setdefault("instance", None)
        with self._lock:
            self._writer(event)
        if kind is not None:
            self.views[kind].apply(event)

    def refresh(self) -> None:
        for event in self.tail.read():
            for kind, group in self.groups.items():
                if event.get("group") == group:
                    self.views[kind].apply(event)

    def wait_for(self, what: str, check: Callable[[], object], timeout: float) -> float:
        def still_wrong() -> object:
            self.refresh()
            return check()

        return poll_until(what, still_wrong, timeout)

    # -- processes --

    def start_node(self, slot: NodeSlot) -> None:
        slot.start()
        self.emit("compare.node", node_id=slot.node_id, event="started")

    def start_member(self, name: str) -> None:
        slot = self.members[name]
        count = self.starts[name] = self.starts.get(name, 0) + 1
        group, session_ms = self.groups[slot.group], self.options.session_timeout_ms
        if slot.kind == RDKAFKA:
            bootstrap = [(HOST, node.kafka_port) for node in self.nodes.values()]
            config = rdkafka_member_config(group, bootstrap, name, "range", False, session_ms, 1000, 1000)
        elif slot.kind == LEGACY:
            # Kafka's rule for 0.8.2: rebalance.max.retries * rebalance.backoff.ms > zookeeper.session.timeout.ms,
            # else a member gives up while a dead member's session has yet to expire, and owns nothing until the
            # next change (the campaign's faults leave no next change).
            backoff_ms = 2 * session_ms // REBALANCE_MAX_RETRIES
            connect = slot.zk_proxy.connect_string + self.chroot
            config = legacy_member_config(group, connect, name, session_ms, 1000, rebalance_backoff_ms=backoff_ms)
        else:
            bootstrap = [node.client_proxy.address for node in self.nodes.values()]
            config = client_member_config(group, bootstrap, name, "range", False, session_ms, 1000, 1000)
        spec = {
            **self.tags,
            "kind": slot.kind,
            "member": name,
            "instance": f"{name}#{count}",
            "group": group,
            "topics": [self.topics[slot.group]],
            "source": (self.kafka_production if slot.kind == RDKAFKA else self.production).spec,
            "cost_ms": 1.0,
            "trace": str(self.trace_dir / f"{name}#{count}.jsonl"),
            "config": config,
        }
        slot.process = MemberProcess(spec, self.log_dir / f"{name}#{count}.log")
        self.emit("compare.member", member=name, instance=slot.process.instance, event="started")

    # -- the run --

    def run(self, say: Callable[[str], None]) -> dict:
        shutil.rmtree(self.out, ignore_errors=True)
        self.trace_dir, self.log_dir = self.out / "traces", self.out / "logs"
        self.trace_dir.mkdir(parents=True)
        self.log_dir.mkdir(parents=True)
        self.tail = TraceTail(self.trace_dir, skip=RUNNER)
        self._writer = JsonLinesTraceWriter(self.trace_dir / RUNNER)
        started = time.monotonic()
        record = {"seed": self.schedule.seed, "kinds": sorted(self.schedule.kinds), "status": "ok", "detail": None}
        try:
            self._run(say)
        except Exception as error:  # one broken run must not end the campaign; it is reported as failed
            log.debug("run %d failed", self.schedule.seed, exc_info=True)
            record.update(status="failed", detail=f"{type(error).__name__}: {error}")
        finally:
            with signals_held():
                self._stop()
            self._writer.close()
        events = [
            json.loads(line)
            for path in sorted(self.trace_dir.glob("*.jsonl"))
            for line in path.read_text().splitlines()
            if line.strip()
        ]
        report = check_history(events, self.options.handover_slack_ms)
        record.update(
            report=report.to_json(),
            groups=self._group_figures(events),
            problems=self.problems,
            migrations=self.migrations,
            duration_s=round(time.monotonic() - started, 1),
        )
        return record

    def _group_figures(self, events: list[dict]) -> dict[str, dict]:
        """Each group's own check (its members' events, its topic's production, the runner's faults), so a run
        shows that every kind of member committed, and where a violation was."""
        figures = {}
        for kind, group in self.groups.items():
            topic = self.topics[kind]
            own = [e for e in events if e.get("group") in ("", group) and e.get("topic", topic) == topic]
            report = check_history(own, self.options.handover_slack_ms)
            figures[kind] = {
                "violations": len(report.violations),
                "acknowledged_commits": report.acknowledged_commits,
                "duplicates": report.duplicates,
                "missed": report.missed,
            }
        return figures

    def _run(self, say: Callable[[str], None]) -> None:
        self._start_processes()
        self.emit("compare.phase", phase="warmup")
        self.wait_for("settled groups", self._unsettled, self.options.recovery_timeout_s)
        self.emit("compare.phase", phase="measure")
        nemesis = Nemesis(
            self.zookeeper, self.disk, self.nodes, self.members, self.emit, self.start_member, self.start_node
        )
        self._threads = [
            threading.Thread(target=self._play, args=(nemesis,), name="nemesis", daemon=True),
            threading.Thread(target=self._migrate, name="migration", daemon=True),
        ]
        for thread in self._threads:
            thread.start()
        for thread in self._threads:
            thread.join()
        self._restart_the_fallen()
        self._recover_and_drain(say)
        self.emit("compare.phase", phase="end")

    def _start_processes(self) -> None:
        """The run's chroot and topics, the shared log disk, the nodes, then the members."""
        options, shape = self.options, self.shape
        base = self.zookeeper.connect_string
        self.direct_connect = fresh_chroot(base, f"faults-{self.schedule.seed}")
        self.chroot = self.direct_connect[len(base) :]
        register_data_plane(self.direct_connect, self.kafka)
        self.production = SyntheticProduction(options.rate, _Context(self.direct_connect))
        self.production.create_topics({self.topics[kind]: options.partitions for kind in self._synthetic_groups()})
        if RDKAFKA in self.groups:
            topic = self.topics[RDKAFKA]
            self.kafka_production = kafka_production(self.kafka, options.rate)
            create_run_topic(self.kafka_production, self.direct_connect, topic, options.partitions)
            self.kafka_production.start([topic])
        overrides = {
            "offsets.topic.num.partitions": 6,
            "zookeeper.session.timeout.ms": options.session_timeout_ms,
            "group.min.session.timeout.ms": min(6000, options.session_timeout_ms),
        }
        self.disk = LogDisk(self.out / "log-disk").__enter__()
        zk_address = (HOST, self.zookeeper.port)
        for node_id, name in enumerate(shape.nodes, 1):
            self.nodes[name] = NodeSlot(
                node_id, zk_address, self.chroot, self.disk.directory / "offsets", self.out, overrides
            )
        for slot in self.nodes.values():
            self.start_node(slot)
        for slot in self.nodes.values():
            slot.process.wait_serving()
        members = ((LEGACY, shape.legacy_members), (CLIENT, shape.client_members), (RDKAFKA, shape.rdkafka_members))
        for kind, names in members:
            for name in names:
                self.members[name] = MemberSlot(name, kind, zk_address)
                self.start_member(name)
        if MIXED in self.groups:  # the other groups settle meanwhile
            bridge_group(self.direct_connect, self.groups[MIXED])
            for kind, names in ((LEGACY, shape.mixed_legacy_members), (CLIENT, shape.mixed_client_members)):
                for name in names:
                    self.members[name] = MemberSlot(name, kind, zk_address, group=MIXED)
                    self.start_member(name)

    def _recover_and_drain(self, say: Callable[[str], None]) -> None:
        """Wait until every partition is processed again after the last heal, then stop production and wait until
        every record produced is processed."""
        options = self.options
        self.refresh()
        healed = {kind: dict(view.processed_up_to) for kind, view in self.views.items()}
        took = self.wait_for(
            "every partition processed again after the last heal",
            lambda: self._unserved(healed),
            options.recovery_timeout_s,
        )
        say(f"  seed {self.schedule.seed}: every partition served again {took:.1f} s after the window")
        self.emit("compare.phase", phase="drain")
        ends = self._stop_production()
        for (topic, partition), end in ends.items():
            self.emit("compare.produced", topic=topic, partition=partition, end_offset=end)
        took = self.wait_for(
            "every record processed",
            lambda: {
                tp: left
                for kind, view in self.views.items()
                for tp, left in view.behind({tp: end for tp, end in ends.items() if tp[0] == self.topics[kind]}).items()
            },
            options.recovery_timeout_s,
        )
        say(f"  seed {self.schedule.seed}: all {sum(ends.values())} records processed {took:.1f} s into the drain")

    def _stop_production(self) -> dict[tuple[str, int], int]:
        """Stop producing; each partition's end offset, every record below it produced."""
        sources = [(self.production, self._synthetic_groups())]
        if self.kafka_production is not None:
            sources.append((self.kafka_production, (RDKAFKA,)))
        ends = {}
        for production, kinds in sources:
            partitions = [TopicPartition(self.topics[k], p) for k in kinds for p in range(self.options.partitions)]
            ends.update({(tp.topic, tp.partition): end for tp, end in production.stop(partitions).items()})
        return ends

    def _synthetic_groups(self) -> tuple[str, ...]:
        """The group kinds that read the synthetic source (all but the librdkafka group)."""
        return tuple(kind for kind in self.groups if kind != RDKAFKA)

    def _unserved(self, marks: dict[str, dict]) -> list[tuple[str, int]]:
        """Partitions whose processing has not moved past ``marks`` (per group kind, as ``processed_up_to``)."""
        return [
            (topic, partition)
            for kind, view in self.views.items()
            for topic, count in view.topics.items()
            for partition in range(count)
            if view.processed_up_to.get((topic, partition), -1) <= marks[kind].get((topic, partition), -1)
        ]

    def _unsettled(self) -> list[str]:
        now_ms = int(time.time() * 1000)
        return [f"{kind}: {problem}" for kind, view in self.views.items() for problem in view.problems(now_ms)]

    def _play(self, nemesis: Nemesis) -> None:
        """Inject and heal every fault at its time from the window's start; an interrupted run heals at once."""
        opened = time.monotonic()
        timeline = sorted(
            [(f.at_ms, 1, f) for f in self.schedule.faults] + [(f.healed_ms, 0, f) for f in self.schedule.faults],
            key=lambda entry: entry[:2],
        )
        active: list[Fault] = []
        for at_ms, inject, fault in timeline:
            if self._stopping.wait(max(0.0, opened + at_ms / 1000 - time.monotonic())):
                break
            self._act(nemesis.inject if inject else nemesis.heal, fault)
            active.append(fault) if inject else active.remove(fault)
        for fault in reversed(active):
            self._act(nemesis.heal, fault)
        self._stopping.wait(max(0.0, opened + self.options.window_s - time.monotonic()))

    def _act(self, action: Callable[[Fault], None], fault: Fault) -> None:
        try:
            action(fault)
        except Exception as error:  # noted and carried on: the run must still heal what it can
            log.warning("nemesis: %s of %s on %s failed", action.__name__, fault.kind, fault.target)
            self.problems.append(f"nemesis could not {action.__name__} {fault}: {error}")

    def _migrate(self) -> None:
        """Move the legacy group's migration as the schedule says, with the operator's own command."""
        opened = time.monotonic()
        names = [step.name for step in load_steps()]
        for move in self.schedule.moves:
            if self._stopping.wait(max(0.0, opened + move.at_ms / 1000 - time.monotonic())):
                return
            to = names[move.to - 1] if move.to else ZERO
            command = [sys.executable, "-m", "zkcoord.cli", "migrate", move.direction, "--group", self.groups[LEGACY]]
            command += ["--to", to, "--yes", "--zookeeper", self.direct_connect, "--timeout", "10000"]
            began = time.monotonic()
            try:
                done = subprocess.run(
                    command, capture_output=True, text=True, timeout=MIGRATE_TIMEOUT_S, start_new_session=True
                )
                output = done.stdout if done.returncode == 0 else done.stderr or done.stdout
                outcome, said = done.returncode, output.strip().splitlines()[-1:]
            except subprocess.TimeoutExpired:
                outcome, said = "timeout", []
            entry = {"direction": move.direction, "to": to, "exit": outcome, "said": said}
            entry["took_s"] = round(time.monotonic() - began, 1)
            self.migrations.append(entry)
            self.emit("faults.migration", **entry)

    def _restart_the_fallen(self) -> None:
        """A process that exited by itself (not by the nemesis) is a defect: noted, then restarted as a
        supervisor would, so that the run can still be checked."""
        for slot in self.nodes.values():
            if not slot.process.alive():
                self.problems.append(f"{slot.name} exited by itself ({slot.process.process.returncode})")
                self.start_node(slot)
        for name, slot in self.members.items():
            if slot.process.process.poll() is not None:
                self.problems.append(f"{slot.process.instance} exited by itself ({slot.process.process.returncode})")
                self.emit("compare.member", member=name, instance=slot.process.instance, event="killed")
                self.start_member(name)

    def _stop(self) -> None:
        self._stopping.set()
        for thread in self._threads:  # an interrupted run: let the nemesis finish the action under way
            thread.join(MIGRATE_TIMEOUT_S)
        if not self.zookeeper.running:
            self.zookeeper.start()  # members close faster with their ZooKeeper there
        with ThreadPoolExecutor(max(1, len(self.members))) as pool:
            list(pool.map(MemberSlot.close, self.members.values()))
        for name, slot in self.members.items():
            if slot.process is not None:
                self.emit("compare.member", member=name, instance=slot.process.instance, event="closed")
        for slot in self.nodes.values():
            slot.close()
        if self.disk is not None:
            self.disk.heal(None)
            self.disk.__exit__(None, None, None)
        for production in (self.production, self.kafka_production):
            if production is not None:
                production.close()


class _Context:
    """The production's view of a run: its chroot, no Kafka broker."""

    kafka = None

    def __init__(self, connect: str):
        self.connect = connect

    def zookeeper(self):
        return started_client(self.connect)


def read_results(out: Path) -> list[dict]:
    path = out / RESULTS
    return [json.loads(line) for line in path.open()] if path.exists() else []


def run_campaign(options: CampaignOptions, say: Callable[[str], None] = print) -> list[dict]:
    """Run the seeds not yet in ``OUT/runs.jsonl``; returns the records of every requested seed."""
    unknown = sorted(set(options.kinds) - set(FAULT_KINDS))
    if unknown:
        raise ValueError(f"unknown fault kinds {', '.join(unknown)}; kinds are: {', '.join(FAULT_KINDS)}")
    for option, count in (("--rdkafka-members", options.rdkafka_members), ("--mixed-members", options.mixed_members)):
        if count < 0:
            raise ValueError(f"{option} {count}: a count of members, 0 for none")
    options.out.mkdir(parents=True, exist_ok=True)
    seeds = range(options.first_seed, options.first_seed + options.runs)
    done = {record["seed"] for record in read_results(options.out)}
    if done & set(seeds):
        say(f"resuming: {len(done & set(seeds))} of {len(seeds)} runs already in {options.out / RESULTS}")
    scratch = Path(tempfile.mkdtemp(prefix="zkcoord-faults-"))
    kinds = available_kinds(options.kinds, SlowFsync(scratch / "probe"))
    shape = options.shape(len(load_steps()))
    campaign = time.strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6]
    zookeeper = EmbeddedZooKeeper(
        port=port_to_return_to(HOST),  # the nemesis restarts it
        data_dir=scratch / "zookeeper",
        tick_time_ms=200,
        max_session_timeout_ms=60_000,
    )
    broker: KafkaBroker | None = None
    try:
        zookeeper.start()
        if options.rdkafka_members and not done >= set(seeds):
            broker = campaign_broker(zookeeper.connect_string, options.out / "kafka")
            broker.start()
        kafka = endpoint(broker) if broker is not None else None
        for number, seed in enumerate(seeds, 1):
            if seed in done:
                continue
            schedule = draw_schedule(seed, shape, kinds)
            say(f"run {number}/{len(seeds)} seed {seed}: " + ", ".join(f"{f.kind}@{f.target}" for f in schedule.faults))
            record = FaultRun(options, zookeeper, shape, schedule, campaign, kafka).run(say)
            say("  " + describe(record))
            with open(options.out / RESULTS, "a") as results:
                results.write(json.dumps(record, sort_keys=True) + "\n")
    finally:
        with signals_held():
            if broker is not None:
                broker.stop()  # before its ZooKeeper, or its controlled shutdown waits for it in vain
            zookeeper.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    records = [record for record in read_results(options.out) if record["seed"] in seeds]
    say(summary_table([HistoryReport.from_json(record["report"]) for record in records]))
    return records


def describe(record: dict) -> str:
    report = HistoryReport.from_json(record["report"])
    kinds = ", ".join(sorted({v.kind for v in report.violations})) or "none"
    verdict = record["status"] if record["status"] != "ok" or not report.violations else "broke a rule"
    line = (
        f"{verdict} in {record['duration_s']:.0f} s: violations {len(report.violations)} ({kinds}), "
        f"acknowledged commits {report.acknowledged_commits} (lost {report.lost}), duplicates {report.duplicates}"
    )
    groups = record.get("groups", {})  # absent from the records of campaigns before the per-group figures
    if groups:
        line += "; commits by group: " + ", ".join(f"{k} {g['acknowledged_commits']}" for k, g in groups.items())
    extra = ([record["detail"]] if record["detail"] else []) + record["problems"]
    return line + "".join(f"\n    {problem}" for problem in extra)


def failed(record: dict) -> bool:
    """A run that did not complete, or whose history breaks a rule."""
    return record["status"] != "ok" or bool(record["report"]["violations"])
