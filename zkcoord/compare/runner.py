"""``zkcoord compare run``: the same workload under the ZooKeeper group and under coordinator groups.

For every scenario and variant: fresh topics and a fresh group on one ZooKeeper (embedded unless given), fresh
coordinator node processes for the coordinator variants, member processes (zkcoord.compare.member) started,
closed, killed or stopped as the scenario's plan says (zkcoord.compare.scenarios), each step waited on until
the group is settled again, then production stops and the members process what is left. Records come from the
synthetic source or from a real Kafka broker that the runner feeds (zkcoord.compare.production). Everything the
members and the runner do is written as ``compare.*`` trace events (docs/traces.md) under ``OUT/traces``;
``OUT/compare.json`` lists the runs and their outcome; process logs go to ``OUT/logs``.
"""

import contextlib
import functools
import itertools
import json
import logging
import shutil
import signal
import tempfile
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from kazoo.client import KazooClient

from zkcoord.channel import CoordinatorChannel
from zkcoord.compare.figures import migration_figures
from zkcoord.compare.kafka4 import kafka4_broker
from zkcoord.compare.member import client_member_config, legacy_member_config
from zkcoord.compare.processes import (
    MemberProcess,
    RunFailed,
    TraceTail,
    node_requests,
    poll_until,
    read_events,
    zookeeper_counts,
)
from zkcoord.compare.production import KAFKA, KafkaProduction, kafka_endpoint, kafka_spec, open_production, source_kind
from zkcoord.compare.rdkafka_member import rdkafka_member_config
from zkcoord.compare.scenarios import (
    BROKER,
    CLIENT_MEMBER,
    JVM_MEMBER,
    LEGACY_MEMBER,
    RDKAFKA_MEMBER,
    SCENARIOS,
    VARIANTS,
    ZKCOORD,
    Action,
    GroupView,
    NotApplicable,
    Plan,
    Variant,
    Workload,
    plan,
)
from zkcoord.config import parse_bootstrap_servers
from zkcoord.errors import SourceError, StopRequested
from zkcoord.files import replace_text
from zkcoord.interrupts import signals_held
from zkcoord.migration.runner import Runner, load_steps
from zkcoord.model import Address, TopicPartition
from zkcoord.testing.kafka_broker import KafkaEndpoint
from zkcoord.testing.node_process import HOST, NodeProcess, kafka_node
from zkcoord.testing.zookeeper import fresh_chroot
from zkcoord.trace import JsonLinesTraceWriter, make_event
from zkcoord.zk import admin, layout
from zkcoord.zk.client import started_client
from zkcoord.zk.server import EmbeddedZooKeeper, free_port

log = logging.getLogger(__name__)

MANIFEST = "compare.json"
STOPS = (KeyboardInterrupt, StopRequested)  # what Ctrl-C and SIGTERM raise (zkcoord.interrupts)
INTERRUPTED = "interrupted"  # a run's manifest status when Ctrl-C or SIGTERM stopped it
NOT_STARTED = "not-started"  # ... and of a run of the command that one stopped before it began
RUNNER = "runner"
TICK_S = 0.05


@dataclass
class CompareOptions:
    """What ``zkcoord compare run`` was asked for."""

    out: Path
    scenarios: list[str]
    variants: list[str] | None = None  # None: every variant the source can run
    workload: Workload = field(default_factory=Workload)
    rate: float = 20.0  # records/s per partition
    source: str = "synthetic"  # or kafka:bootstrap=HOST:PORT, with zookeeper the broker's zookeeper.connect
    cost_ms: float = 1.0  # processing time per record
    duration_s: float = 10.0  # the window lasts at least this long before the drain
    auto_commit_interval_ms: int = 1000
    heartbeat_interval_ms: int = 1000
    zookeeper: str | None = None  # connect string; None: an embedded ZooKeeper
    node_properties: dict = field(default_factory=dict)
    settle_timeout_s: float = 120.0
    quiet_ms: int = 1000
    jvm_members: int = 0  # legacy members m00... that run Kafka 0.8.2's own consumer (a Kafka source only)
    kafka4: str | None = None  # bootstrap of a running Kafka 4 broker for the Kafka 4 variants; None: start one


# ---- one scenario under one variant ------------------------------------------------------------------------------


class ScenarioRun:
    """Carry out ``plan`` for ``variant`` and write the traces of it."""

    def __init__(self, context: "CompareContext", plan: Plan, variant: Variant):
        self.context = context
        self.options = context.options
        self.plan = plan
        self.variant = variant
        self.tags = {"run": context.run_id, "scenario": plan.scenario, "variant": variant.name}
        self.group = f"compare.{plan.scenario}.{variant.name}{context.suffix_of(variant.name)}"
        self.topics = {topic: self.options.workload.partitions for topic in context.topics(plan.scenario, variant.name)}
        self.trace_dir = self.options.out / "traces" / plan.scenario / variant.name
        self.log_dir = self.options.out / "logs" / plan.scenario / variant.name
        self.view = GroupView(dict(self.topics), variant.legacy, self.options.quiet_ms)
        self.members: dict[str, MemberProcess] = {}
        self.starts: dict[str, int] = {}
        self.nodes: dict[int, NodeProcess] = {}
        self.node_counts: dict[int, dict[str, int]] = {}  # each node's request counts when the window opened
        self.node_final: dict[int, dict[str, int]] = {}  # ... and when it was killed
        if variant.on_kafka4:
            self.production = KafkaProduction(kafka_spec(context.kafka4), self.options.rate, context.kafka4)
        else:
            self.production = open_production(self.options.source, self.options.rate, context)
        self.tail = TraceTail(self.trace_dir, skip=f"{RUNNER}.jsonl")
        self.zk_before: tuple[int, int] | None = None
        self._writer: JsonLinesTraceWriter | None = None
        self.say: Callable[[str], None] = log.info  # run() sets its caller's

    # -- events --

    def emit(self, event_type: str, member: str = RUNNER, instance: str | None = None, **fields) -> None:
        event = make_event(event_type, int(time.time() * 1000), self.group, member, **fields)
        event.update(self.tags, instance=instance)
        self._writer(event)
        self.view.apply(event)

    def refresh(self) -> None:
        for event in self.tail.read():
            self.view.apply(event)

    def wait_for(self, what: str, check: Callable[[], list[str] | dict], timeout: float) -> float:
        """Poll ``check`` (what is still wrong) until it finds nothing; returns the seconds it took."""

        def still_wrong() -> list[str] | dict:
            self.refresh()
            for process in self.members.values():
                if process.process.poll() is not None:
                    tail = process.log_path.read_text(errors="replace")[-2000:]
                    raise RunFailed(f"member {process.instance} exited ({process.process.returncode}):\n{tail}")
            return check()

        return poll_until(what, still_wrong, timeout)

    def settle(self) -> float:
        return self.wait_for(
            "a settled group",
            lambda: self.view.problems(int(time.time() * 1000)),
            self.options.settle_timeout_s,
        )

    # -- members --

    def member_spec(self, member: str, consumer: str | None = None) -> dict:
        """What the process of ``member`` runs: ``consumer``, or the variant's member."""
        count = self.starts[member] = self.starts.get(member, 0) + 1
        options, workload, variant = self.options, self.options.workload, self.variant
        consumer = consumer or variant.member
        if consumer == LEGACY_MEMBER and member in workload.member_names(options.jvm_members):
            consumer = JVM_MEMBER
        if consumer in (LEGACY_MEMBER, JVM_MEMBER):
            config = legacy_member_config(
                self.group, self.context.connect, member, workload.session_timeout_ms, options.auto_commit_interval_ms
            )
            config.update(self.context.node_root)  # where a migrating group's phase is: the nodes' root
        else:
            if consumer == CLIENT_MEMBER:
                make_config = client_member_config
            else:
                make_config = functools.partial(rdkafka_member_config, group_protocol=variant.group_protocol)
            config = make_config(
                self.group,
                self.coordinator_addresses(consumer),
                member,
                variant.strategy,
                static=variant.static,
                session_timeout_ms=workload.session_timeout_ms,
                heartbeat_interval_ms=options.heartbeat_interval_ms,
                auto_commit_interval_ms=options.auto_commit_interval_ms,
            )
        return {
            **self.tags,
            "kind": consumer,
            "member": member,
            "instance": f"{member}#{count}",
            "group": self.group,
            "topics": sorted(self.topics),
            "source": self.production.spec,
            "cost_ms": options.cost_ms,
            "trace": str(self.trace_dir / f"{member}#{count}.jsonl"),
            "log_dir": str(self.log_dir),
            "config": config,
        }

    def start_members(self, names: list[str], consumer: str | None = None) -> None:
        started = []
        for name in names:
            spec = self.member_spec(name, consumer)
            process = MemberProcess(spec, self.log_dir / f"{spec['instance']}.log")
            self.members[name] = process
            self.emit("compare.member", member=name, instance=process.instance, event="started")
            started.append(process)
        for process in started:
            process.wait_ready(self.options.settle_timeout_s)

    def close_member(self, name: str) -> None:
        process = self.members.pop(name)
        process.close()
        self.emit("compare.member", member=name, instance=process.instance, event="closed")

    def close_members(self, names: list[str]) -> None:
        """Close every member of ``names`` at once, as a deployment stops."""
        with ThreadPoolExecutor(max(1, len(names))) as pool:
            list(pool.map(lambda name: self.members[name].close(), names))
        for name in names:
            process = self.members.pop(name)
            self.emit("compare.member", member=name, instance=process.instance, event="closed")

    def await_partitions(self, name: str) -> None:
        """Wait until member ``name``'s instance owns at least one partition and the group has settled around it."""
        instance = self.members[name].instance

        def owns_nothing() -> list[str]:
            found = self.view.instances.get(instance)
            return [] if found is not None and found.owned else [f"{instance} owns no partition"]

        self.wait_for(f"{name} owning partitions", owns_nothing, self.options.settle_timeout_s)
        self.settle()
        self.say(f"    {name} joined: {self.owners()}")

    def migrate_group(self, step: str) -> None:
        """``zkcoord migrate up --to STEP`` for the run's group, through the migration Runner as the CLI runs it."""
        root = self.context.node_root.get("zkcoord.root", layout.DEFAULT_ROOT)
        channel = CoordinatorChannel(
            lambda: [node.address for node in self.nodes.values() if node.alive()], "zkcoord-migrate", 10_000
        )
        try:
            with self.context.zookeeper() as client:
                Runner(client, channel, load_steps(), root=root, say=log.info).run(self.group, "up", to=step)
        finally:
            channel.close()

    # -- coordinator nodes --

    def start_nodes(self, count: int) -> None:
        session_ms = self.options.workload.session_timeout_ms
        overrides = {
            "offsets.topic.num.partitions": 4,
            "zookeeper.session.timeout.ms": session_ms,
            "group.min.session.timeout.ms": min(6000, session_ms),  # Kafka's default minimum, or the run's
            **self.context.node_root,
            **self.options.node_properties,
        }
        log_dir = self.context.scratch / f"{self.plan.scenario}-{self.variant.name}-offsets"
        # librdkafka members bootstrap at the nodes' Kafka listeners, which forward data requests to the brokers.
        start_node = kafka_node if RDKAFKA_MEMBER in self.variant.consumers else NodeProcess
        for _ in range(count):
            node_id = next(self.context.node_ids)  # unique: a killed node's registration outlives it a while
            node = start_node(
                node_id,
                self.context.connect,
                log_dir,
                overrides,
                self.log_dir,
                log_level="WARNING",
                metrics_port=free_port(HOST),
            )
            self.nodes[node_id] = node
        for node_id, node in self.nodes.items():
            node.wait_serving()
            self.emit("compare.node", node_id=node_id, event="started")

    def coordinator_addresses(self, consumer: str) -> list[Address]:
        """Where members of ``consumer`` bootstrap: the broker, or the nodes (their Kafka listeners for librdkafka)."""
        if self.variant.coordinator == BROKER:
            return parse_bootstrap_servers(self.context.kafka.bootstrap)
        if self.variant.on_kafka4:
            return parse_bootstrap_servers(self.context.kafka4.bootstrap)
        if consumer == RDKAFKA_MEMBER:
            return [(HOST, node.kafka_port) for node in self.nodes.values()]
        return [node.address for node in self.nodes.values()]

    def kill_coordinator(self) -> None:
        """SIGKILL the group's coordinator, then wait until another node has taken the group over."""
        live = [node_id for node_id, node in self.nodes.items() if node.alive()]
        channel = CoordinatorChannel(
            lambda: [self.nodes[node_id].address for node_id in live], "zkcoord-compare", request_timeout_ms=5000
        )
        try:
            node_id, _ = channel.find_coordinator(self.group, time.monotonic() + 30)
            node = self.nodes[node_id]
            self.node_final[node_id] = node_requests(node)
            node.kill()
            live.remove(node_id)
            self.emit("compare.node", node_id=node_id, event="killed")
            deadline = time.monotonic() + self.options.settle_timeout_s
            successor, _ = channel.find_coordinator(self.group, deadline)
            while successor == node_id:  # the dead node's leadership lasts until its ZooKeeper session expires
                if time.monotonic() > deadline:
                    raise RunFailed(f"no node took group {self.group} over from node {node_id}")
                time.sleep(TICK_S)
                successor, _ = channel.find_coordinator(self.group, deadline)
            self.emit("compare.node", node_id=successor, event="took-over")
        finally:
            channel.close()

    # -- the plan --

    def act(self, action: Action) -> None:
        name = action.target
        if action.kind == "start":
            self.start_members([name], action.consumer)
        elif action.kind == "close":
            self.close_member(name)
        elif action.kind == "start-together":
            self.start_members(list(action.members), action.consumer)
        elif action.kind == "close-together":
            self.close_members(list(action.members))
        elif action.kind == "await-partitions":
            self.await_partitions(name)
        elif action.kind == "migrate":
            self.migrate_group(name)
        elif action.kind == "restart":
            self.close_member(name)
            time.sleep(action.hold_ms / 1000)
            self.start_members([name])
        elif action.kind == "kill":
            process = self.members.pop(name)
            process.kill()
            self.emit("compare.member", member=name, instance=process.instance, event="killed")
        elif action.kind == "pause":
            process = self.members[name]
            process.pause()
            self.emit("compare.member", member=name, instance=process.instance, event="paused")
            time.sleep(action.hold_ms / 1000)
            process.resume()
            self.emit("compare.member", member=name, instance=process.instance, event="resumed")
        elif action.kind == "kill-coordinator":
            self.kill_coordinator()
        elif action.kind == "add-partitions":
            count = self.topics[name] + action.count
            self.production.add_partitions(name, count)
            self.topics[name] = count
            self.emit("compare.topic", topic=name, partitions=count)
        else:
            raise ValueError(f"unknown action {action.kind!r}")

    def owners(self) -> str:
        """How many partitions each live member owns, as their traces tell, with the consumer it runs."""
        kinds = {process.instance: process.spec["kind"] for process in self.members.values()}
        return ", ".join(
            f"{instance.member} ({kinds.get(name, '?')}) {len(instance.owned)}"
            for name, instance in self.view.instances.items()
            if instance.live
        )

    def counters(self) -> dict:
        zk = None if self.variant.on_kafka4 else zookeeper_counts(self.context.connect)  # KRaft: no ZooKeeper
        before = self.zk_before
        by_api: dict[str, int] = {}
        for node_id, node in self.nodes.items():
            final = self.node_final.get(node_id) or node_requests(node)
            for api, count in final.items():
                by_api[api] = by_api.get(api, 0) + count - self.node_counts.get(node_id, {}).get(api, 0)
        return {
            "zk_reads": None if zk is None or before is None else zk[0] - before[0],
            "zk_writes": None if zk is None or before is None else zk[1] - before[1],
            "coordinator_requests": sum(by_api.values()),
            "coordinator_requests_by_api": dict(sorted(by_api.items())),
        }

    def run(self, say: Callable[[str], None]) -> None:
        self.say = say
        shutil.rmtree(self.trace_dir, ignore_errors=True)
        shutil.rmtree(self.log_dir, ignore_errors=True)
        self.trace_dir.mkdir(parents=True)
        self.log_dir.mkdir(parents=True)
        self._writer = JsonLinesTraceWriter(self.trace_dir / f"{RUNNER}.jsonl")
        try:
            self._run(say)
        except BaseException as error:  # Ctrl-C too: the report must know the run did not finish
            self.emit("compare.phase", phase="interrupted", reason=stop_reason(error))
            raise
        finally:
            with signals_held():  # a signal now would leave members, nodes or the producer running
                self.stop()
                self.production.close()
                self._writer.close()

    def _run(self, say: Callable[[str], None]) -> None:
        options, workload = self.options, self.options.workload
        self.production.create_topics(self.topics)
        self.production.start(self.topics)
        self.emit(
            "compare.run",
            members=workload.members,
            partitions=dict(self.topics),
            rate=options.rate,
            source=self.production.spec,
            cost_ms=options.cost_ms,
            auto_commit_interval_ms=options.auto_commit_interval_ms,
            session_timeout_ms=workload.session_timeout_ms,
            downtime_ms=workload.downtime_ms,
            bounces=workload.bounces,
            label=self.variant.label,
        )
        for topic, count in self.topics.items():
            self.emit("compare.topic", topic=topic, partitions=count)
        self.emit("compare.phase", phase="warmup")
        if self.variant.coordinator == ZKCOORD:
            self.start_nodes(self.plan.coordinator_nodes)
        if self.plan.initial_members:
            self.start_members(list(self.plan.initial_members))
            self.settle()
        self.zk_before = None if self.variant.on_kafka4 else zookeeper_counts(self.context.connect)
        self.node_counts = {node_id: node_requests(node) for node_id, node in self.nodes.items()}
        self.emit("compare.phase", phase="measure")
        window_opened = time.monotonic()
        for number, step in enumerate(self.plan.steps, 1):
            self.emit("compare.step", step=number, name=step.name)
            started = time.monotonic()
            for action in step.actions:
                self.act(action)
            settled = self.settle()
            say(
                f"  step {number}/{len(self.plan.steps)} {step.name}: settled "
                f"{time.monotonic() - started:.1f} s after it began, {settled:.1f} s after its last action"
            )
            if self.variant.migrates:
                say(f"    partitions owned: {self.owners()}")
        time.sleep(max(0.0, options.duration_s - (time.monotonic() - window_opened)))
        self.emit("compare.phase", phase="drain")
        partitions = [TopicPartition(topic, p) for topic, count in self.topics.items() for p in range(count)]
        ends = {(topic, partition): end for (topic, partition), end in self.production.stop(partitions).items()}
        for (topic, partition), end in ends.items():
            self.emit("compare.produced", topic=topic, partition=partition, end_offset=end)
        took = self.wait_for("every record processed", lambda: self.view.behind(ends), options.settle_timeout_s)
        say(f"  all {sum(ends.values())} records processed {took:.1f} s after production stopped")
        self.emit("compare.counters", **self.counters())
        self.emit("compare.phase", phase="end")

    def stop(self) -> None:
        self.close_members(list(self.members))
        for node in self.nodes.values():
            node.stop()


def stop_reason(error: BaseException) -> str:
    """Why a run stopped before its end, in one line."""
    if isinstance(error, STOPS):
        return f"interrupted ({signal_of(error).name})"
    lines = str(error).splitlines()
    return f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__


def signal_of(stop: BaseException) -> signal.Signals:
    """The signal that raised ``stop`` (or stopped the command it interrupted): SIGTERM for StopRequested, else
    Ctrl-C's."""
    if isinstance(stop, RunInterrupted):
        return stop.signum
    return signal.SIGTERM if isinstance(stop, StopRequested) else signal.SIGINT


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM (``signum``) stopped ``compare run``: ``entry`` (the manifest's) is the run it was in (None
    between runs), ``not_started`` the entries of the runs it never began; every process the command started has
    been stopped."""

    def __init__(self, entry: dict | None, not_started: list[dict], signum: signal.Signals = signal.SIGINT):
        super().__init__(entry, not_started, signum)
        self.entry = entry
        self.not_started = not_started
        self.signum = signum


# ---- the whole run ------------------------------------------------------------------------------------------------


class CompareContext:
    """Where the runs of one ``compare run`` happen: ZooKeeper (embedded or given), a scratch directory.

    On the synthetic source every run has a fresh chroot to itself. On Kafka the runs share the broker's chroot
    (0.8.2 members read ``/brokers`` in theirs), so topics and groups carry the run's id and the coordinator
    nodes keep their ZooKeeper state under a root of the run's own. The Kafka 4 variants' groups and records are
    on a Kafka 4 broker (zkcoord.compare.kafka4), started with the context when one of them runs and stopped with
    it, unless the options name one; their topics and groups carry the run's id too.
    """

    def __init__(self, options: CompareOptions, kafka4: bool = False):
        self.options = options
        self.needs_kafka4 = kafka4  # a variant of the command runs on the Kafka 4 broker
        self.kafka4: KafkaEndpoint | None = None  # ... which is this one, once started or given
        self._resources = contextlib.ExitStack()
        self.run_id = time.strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6]
        self.scratch = Path(tempfile.mkdtemp(prefix="zkcoord-compare-"))
        self._embedded: EmbeddedZooKeeper | None = None
        self.connect = ""
        self.node_ids = itertools.count(1)
        self.on_kafka = source_kind(options.source) == KAFKA
        self.kafka: KafkaEndpoint | None = None  # the broker, once checked
        self.run_suffix = f".{self.run_id.rsplit('-', 1)[1]}"
        self.node_root = {"zkcoord.root": f"/zkcoord-compare-{self.run_id}"} if self.on_kafka else {}

    def suffix_of(self, variant: str) -> str:
        """What ends the names of ``variant``'s topics and group: the run's id where a broker is shared (a given
        Kafka 4 broker may hold earlier runs' topics)."""
        return self.run_suffix if self.on_kafka or VARIANTS[variant].on_kafka4 else ""

    def topics(self, scenario: str, variant: str) -> list[str]:
        return [f"{scenario}.{variant}.{n}{self.suffix_of(variant)}" for n in range(self.options.workload.topics)]

    def __enter__(self) -> "CompareContext":
        try:
            return self._enter()
        except BaseException:  # Ctrl-C while ZooKeeper starts must not leave it running
            self.__exit__()
            raise

    def _enter(self) -> "CompareContext":
        if self.needs_kafka4:
            options = self.options
            broker = kafka4_broker(options.kafka4, options.workload.session_timeout_ms, options.heartbeat_interval_ms)
            self.kafka4 = self._resources.enter_context(broker)
        base = self.options.zookeeper
        if self.on_kafka:  # compare_run checked that the broker's ZooKeeper is given
            self.kafka = kafka_endpoint(self.options.source, base)
            self.connect = base
            return self
        if base is None:
            self._embedded = EmbeddedZooKeeper(
                data_dir=self.scratch / "zookeeper", tick_time_ms=500, max_session_timeout_ms=60_000
            ).start()
            base = self._embedded.connect_string
        self.connect = fresh_chroot(base, f"zkcoord-compare-{self.run_id}")
        with self.zookeeper() as client:
            admin.register_broker(client, 0, "localhost", 9092, timestamp_ms=1, persistent=True)
        return self

    def __exit__(self, *exc_info) -> None:
        with signals_held():  # a signal now would leave a broker or ZooKeeper running
            self._resources.close()
            if self._embedded is not None:
                self._embedded.stop()
            shutil.rmtree(self.scratch, ignore_errors=True)

    def zookeeper(self) -> contextlib.AbstractContextManager[KazooClient]:
        return started_client(self.connect)


def read_manifest(out: Path) -> dict:
    path = out / MANIFEST
    if not path.exists():
        return {"runs": []}
    return json.loads(path.read_text())


def compare_run(options: CompareOptions, say: Callable[[str], None] = print) -> list[dict]:
    """Run every scenario under every variant; returns the manifest entries of these runs (status per run)."""
    for name in options.scenarios:
        if name not in SCENARIOS:
            raise ValueError(f"unknown scenario {name!r}; one of {', '.join(SCENARIOS)}")
    try:
        kind = source_kind(options.source)
    except SourceError as error:
        raise ValueError(str(error)) from None
    if kind == KAFKA and options.zookeeper is None:
        raise ValueError("a Kafka source needs the broker's ZooKeeper: --zookeeper HOST:PORT/chroot")
    if options.jvm_members and kind != KAFKA:
        raise ValueError("JVM members read a Kafka broker: --jvm-members needs --source kafka:bootstrap=...")
    variants = options.variants or [name for name, v in VARIANTS.items() if kind == KAFKA or not v.reads_kafka]
    for name in variants:
        if name not in VARIANTS:
            raise ValueError(f"unknown variant {name!r}; one of {', '.join(VARIANTS)}")
        if VARIANTS[name].reads_kafka and kind != KAFKA:
            raise ValueError(f"variant {name!r} runs librdkafka consumers, which need --source kafka:bootstrap=...")
    runs = _applicable_runs(options, variants)
    options.out.mkdir(parents=True, exist_ok=True)
    results = []
    try:
        kafka4 = any(VARIANTS[variant].on_kafka4 for _, variant in runs)
        if kafka4 and options.kafka4 is None:
            say("starting a Kafka 4 broker (KRaft) for the Kafka 4 variants ...")
        with CompareContext(options, kafka4=kafka4) as context:
            _run_all(options, context, variants, results, say)
    except STOPS as stop:
        interrupted = next((entry for entry in results if entry.get("status") == INTERRUPTED), None)
        reached = {(entry["scenario"], entry["variant"]) for entry in results}
        not_started = [
            {"scenario": scenario, "variant": variant, "status": NOT_STARTED, "detail": None}
            for scenario, variant in runs
            if (scenario, variant) not in reached
        ]
        if not_started:
            write_manifest(options, results + not_started)
        raise RunInterrupted(interrupted, not_started, signal_of(stop)) from None
    return results


def _applicable_runs(options: CompareOptions, variants: list[str]) -> list[tuple[str, str]]:
    """(scenario, variant) of every run the command makes, in order; the not-applicable ones left out."""
    runs = []
    for scenario in options.scenarios:
        for variant in variants:
            try:
                plan(scenario, VARIANTS[variant], options.workload, ())  # whether it applies: not the topics' names
            except NotApplicable:
                continue
            runs.append((scenario, variant))
    return runs


def _run_all(
    options: CompareOptions, context: CompareContext, variants: list[str], results: list[dict], say: Callable
) -> None:
    """Every scenario under every variant, one after the other, each entry added to ``results`` and the
    manifest as it ends; Ctrl-C marks the run it is in ``interrupted`` and ends the loop."""
    for scenario in options.scenarios:
        for variant_name in variants:
            variant = VARIANTS[variant_name]
            entry = {"scenario": scenario, "variant": variant_name, "run": context.run_id}
            try:
                steps = plan(scenario, variant, options.workload, context.topics(scenario, variant_name))
            except NotApplicable as reason:
                say(f"{scenario} / {variant_name}: not applicable ({reason})")
                results.append({**entry, "status": "not-applicable", "detail": str(reason)})
                continue
            say(f"{scenario} / {variant_name} ({variant.label}) ...")
            started = time.monotonic()
            try:
                run = ScenarioRun(context, steps, variant)
                run.run(say)
                entry.update(status="ok", detail=None)
                if variant.migrates:
                    figures = migration_figures(read_events(run.trace_dir))
                    entry["figures"] = figures.to_json()
                    say(f"  {figures.describe()}")
            except STOPS as stop:
                if "status" not in entry:  # Ctrl-C after the run finished (during its figures) leaves it finished
                    entry.update(status=INTERRUPTED, detail=stop_reason(stop))
                raise
            except Exception as error:  # one broken run must not end the others
                log.debug("run %s / %s failed", scenario, variant_name, exc_info=True)
                entry.update(status="failed", detail=f"{type(error).__name__}: {error}")
                say(f"  FAILED: {entry['detail']}")
            finally:
                entry["duration_s"] = round(time.monotonic() - started, 1)
                results.append(entry)
                with signals_held():  # the finished run's entry reaches the manifest before a signal stops the rest
                    write_manifest(options, results)
            say(f"  {entry['status']} in {entry['duration_s']:.0f} s")


def write_manifest(options: CompareOptions, results: list[dict]) -> None:
    """``results`` replace the manifest's entries of their runs, but for a ``not-started`` one: an earlier
    command's entry of that run still describes its traces."""
    manifest = read_manifest(options.out)
    known = {(r["scenario"], r["variant"]) for r in manifest["runs"]}
    results = [r for r in results if r["status"] != NOT_STARTED or (r["scenario"], r["variant"]) not in known]
    done = {(r["scenario"], r["variant"]) for r in results}
    runs = [r for r in manifest["runs"] if (r["scenario"], r["variant"]) not in done] + results
    manifest.update(
        schema="zkcoord.compare/1",
        runs=sorted(runs, key=lambda r: (SCENARIOS.index(r["scenario"]), list(VARIANTS).index(r["variant"]))),
        workload={**asdict(options.workload), "rate": options.rate, "cost_ms": options.cost_ms},
        source=options.source,
    )
    replace_text(options.out / MANIFEST, json.dumps(manifest, indent=2, sort_keys=True) + "\n")
