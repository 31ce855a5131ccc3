"""Mixed groups with real peers: unmodified Kafka 0.8.2 consumers (JVM), zkcoord's client and librdkafka in one
DUAL_WRITE group, on the real Kafka 3.9 broker (docs/migration.md "Mixed groups").

The JVM members run the ``LegacyMember`` driver (offsets in ZooKeeper); zkcoord's client bootstraps to the
node's msgpack port; librdkafka joins through the node's Kafka listener. After every change the owner znodes
equal 0.8.2's assignment over every registration, each coordinator member holds exactly what the owner znodes
give its thread, and every partition's owner consumes it.

Traces: zkcoord's client writes its own ``client.*`` events; librdkafka's consumer is traced here from its
rebalance callbacks and poll loop; a JVM member writes none. So ownership is checked in two parts. Over the
coordinator members' traces (:func:`zkcoord.testing.verifiable.check_group`): no two hold a partition at one
instant and none consumes a partition it does not hold. Against the owner znodes, read over and over: no
coordinator member surely holds a partition while a read finds its owner znode naming another thread or none.
A JVM member claims the owner znode before it fetches and stops fetching before it releases it, and a znode
has one owner, which covers the JVM members.
"""

import collections
import contextlib
import re
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer as RdkafkaConsumer
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from test_migration_walk import migrate_ok

from zkcoord.bridge.core import consumer_id_for, thread_of
from zkcoord.client.consumer import Consumer
from zkcoord.migration import store
from zkcoord.model import TopicPartition
from zkcoord.sources.kafka import KafkaSource
from zkcoord.testing.jvm_member import JvmMember, JvmMembers
from zkcoord.testing.legacy import converged
from zkcoord.testing.node_process import HOST, kafka_node
from zkcoord.testing.verifiable import check_group
from zkcoord.testing.zookeeper import wait_until
from zkcoord.trace import make_event
from zkcoord.zk import layout
from zkcoord.zk.server import free_port

PARTITIONS = 6
NODE_OVERRIDES = {
    "offsets.topic.num.partitions": 4,
    "group.initial.rebalance.delay.ms": 0,
    "group.min.session.timeout.ms": 10,
    "coordinator.claim.grace.ms": 200,
    "zookeeper.session.timeout.ms": 4000,
}
JVM_ZOOKEEPER = {"offsets.storage": "zookeeper", "zookeeper.session.timeout.ms": 3000}
JVM_DEFAULT_REBALANCE = {"rebalance.max.retries": 4, "rebalance.backoff.ms": 2000}
WAIT_S = 60
# 0.8.2's range assigns in consumer id order; coordinator members are "<group>_zkcoord-<key>". One JVM member
# sorts before them and one after, so each change moves partitions between JVM and coordinator members both ways.
BEFORE_BRIDGE, AFTER_BRIDGE = "j1", "zz-j2"


@pytest.fixture(scope="module")
def node(kafka, tmp_path_factory):
    """One node on the broker's ZooKeeper, serving msgpack and Kafka's protocol."""
    workdir = tmp_path_factory.mktemp("mixed-jvm")
    started = kafka_node(1, kafka.zk_connect, workdir / "log", NODE_OVERRIDES, workdir, metrics_port=free_port(HOST))
    try:
        started.wait_serving()
        yield started
    finally:
        started.stop()


class Traces:
    """The run's trace events, from every member's thread."""

    def __init__(self, group: str):
        self.group = group
        self.events: list[dict] = []
        self._lock = threading.Lock()

    def __call__(self, event: dict) -> None:
        with self._lock:
            self.events.append(event)

    def emit(self, event_type: str, member: str, **fields) -> None:
        self(make_event(event_type, int(time.time() * 1000), self.group, member, **fields))


class Polled:
    """A member polled on a thread of its own until :meth:`close`."""

    def __init__(self):
        self.consumed: dict[int, list[str]] = {}  # partition → values, in order
        self.busy = threading.Event()  # set: the application does not poll, as one busy processing would not
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            if self.busy.is_set():
                self._stop.wait(0.05)
            else:
                self.poll()

    def start(self):
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=20)


class ZkcoordMember(Polled):
    """zkcoord's client, bootstrapped to the node's msgpack port, reading the broker."""

    def __init__(self, node, kafka, group: str, topic: str, traces: Traces, **config):
        super().__init__()
        self.source = KafkaSource(kafka.bootstrap)
        self.consumer = Consumer(
            source=self.source,
            trace=traces,
            bootstrap_servers=f"{HOST}:{node.port}",
            group_id=group,
            partition_assignment_strategy="range",
            auto_offset_reset="earliest",
            **config,
        )
        self.consumer.subscribe([topic])
        self.start()

    def poll(self) -> None:
        for records in self.consumer.poll(timeout_ms=100).values():
            for record in records:
                self.consumed.setdefault(record.partition, []).append(record.value.decode())

    @property
    def member_id(self) -> str:
        return self.consumer.member_id

    def assignment(self) -> set[TopicPartition]:
        return set(self.consumer.assignment())

    def close(self) -> None:
        super().close()
        try:
            self.consumer.close()
        finally:
            self.source.close()


class RdkafkaMember(Polled):
    """librdkafka through the node's Kafka listener; its trace is written here. Its rebalance callbacks change
    the assignment themselves (``assign``/``unassign`` return once librdkafka applied it), so an assignment event
    spans the callback's call: ``monotonic_before`` on entry, ``monotonic_after`` once the change is made."""

    def __init__(self, node, group: str, topic: str, traces: Traces, **config):
        super().__init__()
        self.name = f"rdkafka-{uuid.uuid4().hex[:6]}"
        self.traces = traces
        self.owned: set[TopicPartition] = set()
        self.member_id = ""  # read on the poll thread: memberid() from another thread can wait on its poll
        self.consumer = RdkafkaConsumer(
            {
                "bootstrap.servers": node.kafka_bootstrap,
                "group.id": group,
                "client.id": self.name,
                "partition.assignment.strategy": "range",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": True,
                "auto.commit.interval.ms": 200,
                **config,
            }
        )
        self.consumer.subscribe([topic], on_assign=self._on_assign, on_revoke=self._on_revoke)
        self.start()

    def _traced(self, owned: set[TopicPartition], change: Callable[[], None]) -> None:
        before = time.monotonic()
        change()
        self.owned = owned
        self.traces.emit(
            "client.assignment",
            self.name,
            assignment={self.name: [list(tp) for tp in sorted(owned)]},
            generation=-1,
            member_id=self.member_id,
            monotonic_before=before,
            monotonic_after=time.monotonic(),
        )

    def _on_assign(self, consumer, partitions) -> None:
        self.member_id = consumer.memberid()
        self._traced({TopicPartition(p.topic, p.partition) for p in partitions}, lambda: consumer.assign(partitions))

    def _on_revoke(self, consumer, partitions) -> None:
        # Eager: every partition goes (on_lost, when not given, comes here too).
        self._traced(set(), consumer.unassign)

    def poll(self) -> None:
        message = self.consumer.poll(0.1)
        if message is not None and message.error() is None:
            self.consumed.setdefault(message.partition(), []).append(message.value().decode())
            self.traces.emit(
                "client.consumed",
                self.name,
                topic=message.topic(),
                partition=message.partition(),
                first_offset=message.offset(),
                last_offset=message.offset(),
                monotonic=time.monotonic(),
            )

    def assignment(self) -> set[TopicPartition]:
        return set(self.owned)

    def close(self) -> None:
        super().close()
        self.consumer.close()


class OwnerPoll:
    """Reads the group's owner znodes over and over: ``(started, finished, owners)`` per read, monotonic seconds."""

    def __init__(self, zk: KazooClient, group: str, topic: str):
        self.zk, self.group, self.topic = zk, group, topic
        self.reads: list[tuple[float, float, dict[TopicPartition, str]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _read(self) -> dict[TopicPartition, str]:
        owners = {}
        for partition in self.zk.get_children(layout.owners_path(self.group, self.topic)):
            with contextlib.suppress(NoNodeError):  # released between the listing and the read
                data, _ = self.zk.get(layout.owner_path(self.group, self.topic, int(partition)))
                owners[TopicPartition(self.topic, int(partition))] = layout.decode_owner(data)
        return owners

    def _run(self) -> None:
        self.zk.ensure_path(layout.owners_path(self.group, self.topic))
        while not self._stop.wait(0.02):
            started = time.monotonic()
            owners = self._read()
            self.reads.append((started, time.monotonic(), owners))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


def held_without_owner_znode(events: list[dict], group: str, reads) -> list[str]:
    """Moments a coordinator member surely held a partition while a read of the owner znodes found it naming
    another thread or none.

    A member surely holds a partition from just after it was assigned (``monotonic_after``) until just before
    its next assignment change (``monotonic_before``); a read that began and ended inside that span saw the owner
    znode at some instant of it.
    """
    found = []
    changes: dict[str, list[dict]] = {}
    for event in events:
        if event["type"] == "client.assignment":
            changes.setdefault(event["member"], []).append(event)
    for member, history in changes.items():
        history.sort(key=lambda e: e["monotonic_before"])
        for current, following in zip(history, [*history[1:], None], strict=True):
            thread = thread_of(consumer_id_for(group, current["member_id"], None))
            held = {TopicPartition(t, p) for claims in current["assignment"].values() for t, p in claims}
            until = following["monotonic_before"] if following else float("inf")
            for started, finished, owners in reads:
                if current["monotonic_after"] <= started and finished <= until:
                    found += [
                        f"{member} held {tp} while its owner znode named {owners.get(tp)}"
                        for tp in held
                        if owners.get(tp) != thread
                    ]
    return found


class MixedJvmGroup:
    """One DUAL_WRITE group of JVM and coordinator members on the session's broker."""

    def __init__(self, kafka, jvm: JvmMembers, zk: KazooClient):
        self.kafka, self.jvm, self.zk = kafka, jvm, zk
        self.name = f"mixjvm-{uuid.uuid4().hex[:8]}"
        self.topic = f"mixjvm-{uuid.uuid4().hex[:8]}"
        kafka.create_topic(self.topic, PARTITIONS)
        self.traces = Traces(self.name)
        self.legacy: dict[str, JvmMember] = {}  # live JVM members by consumer id
        self.coordinator: list[ZkcoordMember | RdkafkaMember] = []
        self.jvm_threads: dict[str, str] = {}
        self.owner_poll = OwnerPoll(zk, self.name, self.topic)

    def jvm_member(self, name: str, properties: dict) -> JvmMember:
        member = self.jvm.driver(
            self.kafka.zk_connect, self.name, name, topics={self.topic: 1}, properties={**JVM_ZOOKEEPER, **properties}
        )
        self.jvm_threads[f"{member.consumer_id}-0"] = member.name
        self.legacy[member.consumer_id] = member.wait_started(self.zk, self.name)
        return member

    def add(self, member):
        self.coordinator.append(member)
        return member

    def kill(self, member: JvmMember) -> None:
        member.kill()
        del self.legacy[member.consumer_id]

    def stop(self, member: JvmMember) -> None:
        member.stop()
        del self.legacy[member.consumer_id]

    def bridge_threads(self) -> dict[str, str]:
        """member id → owner thread of the coordinator members registered in the 0.8.2 group."""
        state = store.read_bridge(self.zk, layout.DEFAULT_ROOT, self.name)
        return {} if state is None else {m.member_id: thread_of(m.consumer_id) for m in state.members}

    def consistent(self) -> bool:
        """Owner znodes are 0.8.2's assignment over exactly the live members' registrations, and each
        coordinator member holds what the owner znodes give its thread."""
        threads = self.bridge_threads()
        registered = {*self.legacy, *(t.removesuffix("-0") for t in threads.values())}
        if len(threads) != len(self.coordinator):
            return False
        snapshot = converged(self.zk, self.name, members=registered)
        if snapshot is None:
            return False
        for member in self.coordinator:
            thread = threads.get(member.member_id)
            owned = {tp for tp, owner in snapshot.owners.items() if owner == thread}
            if thread is None or member.assignment() != owned:
                return False
        return True

    def settle(self, what: str) -> None:
        wait_until(self.consistent, timeout=WAIT_S, interval=0.1, what=f"{self.name} consistent after {what}")

    def owner_of(self, thread: str) -> Callable[[], dict[int, list[str]]] | None:
        """What the live member owning as ``thread`` consumed, partition → values; None if no live member does."""
        jvm = next((m for m in self.legacy.values() if self.jvm_threads.get(thread) == m.name), None)
        if jvm is not None:
            return lambda: {p: [r.value for r in jvm.records() if r.partition == p] for p in range(PARTITIONS)}
        threads = self.bridge_threads()
        member = next((m for m in self.coordinator if threads.get(m.member_id) == thread), None)
        return None if member is None else (lambda: member.consumed)

    def live_owners_consume(self, step: str) -> None:
        """A record marked ``step`` to every partition; each partition's owner znode names a live member's thread
        and that member consumes the marked record."""
        for partition in range(PARTITIONS):
            self.kafka.produce(self.topic, [f"{step}-{partition}".encode()], partition=partition)

        def consumed() -> bool:
            owners = converged(self.zk, self.name)
            if owners is None:
                return False
            for tp, thread in owners.owners.items():
                read = self.owner_of(thread)
                if read is None or f"{step}-{tp.partition}" not in read().get(tp.partition, []):
                    return False
            return True

        wait_until(consumed, timeout=WAIT_S, interval=0.2, what=f"every partition's owner to consume after {step}")

    def duplicates(self) -> dict[str, int]:
        """Values more than one member consumed, or one member more than once, and how often (printed, not
        failed: a SIGKILLed JVM member's last auto-commit interval may be consumed again)."""
        values = [v for m in self.jvm.members for v in m.values()]
        values += [v for m in self.coordinator for consumed in list(m.consumed.values()) for v in consumed]
        return {value: count for value, count in collections.Counter(values).items() if count > 1}

    def close(self) -> None:
        self.owner_poll.close()
        for member in self.coordinator:
            member.close()


@pytest.fixture
def group(kafka, node, tmp_path):
    """A fresh group and topic on the session's broker; every member the test starts is stopped at teardown."""
    zk = KazooClient(hosts=kafka.zk_connect)
    zk.start(timeout=15)
    try:
        with JvmMembers(tmp_path / "jvm") as jvm:
            mixed = MixedJvmGroup(kafka, jvm, zk)
            try:
                yield mixed
            finally:
                mixed.close()
    finally:
        zk.stop()
        zk.close()


def test_jvm_zkcoord_and_librdkafka_members_own_what_the_owner_znodes_say(group, kafka, node):
    first = group.jvm_member(BEFORE_BRIDGE, {})
    last = group.jvm_member(AFTER_BRIDGE, {})
    group.settle("two JVM members")
    migrate_ok(kafka.zk_connect, "up", "--group", group.name, "--to", "0001_dual_commit")
    kafka.produce(group.topic, [b"before-%d" % i for i in range(60)])
    group.add(ZkcoordMember(node, kafka, group.name, group.topic, group.traces, heartbeat_interval_ms=300))
    group.settle("zkcoord's client joined")
    group.add(RdkafkaMember(node, group.name, group.topic, group.traces, **{"heartbeat.interval.ms": 300}))
    group.settle("librdkafka joined")
    group.kill(first)
    group.settle("a JVM member was SIGKILLed")
    group.stop(last)
    group.settle("the last JVM member left")
    group.live_owners_consume("after")
    group.owner_poll.close()
    ends = {(group.topic, p): end for p, end in kafka.end_offsets(group.topic).items()}
    # Only (d) applies: the JVM members consumed the rest, so (b) and (c) do not, nor does (a) to a commit of where
    # a JVM member's consumption had reached.
    report = check_group(group.traces.events, ends)
    assert not (report.overlaps or report.unowned_consumption), (report.summary(), timeline(group.traces.events))
    unfenced = held_without_owner_znode(group.traces.events, group.name, group.owner_poll.reads)
    assert unfenced == [], (unfenced[:10], timeline(group.traces.events))
    assert group.jvm.gave_up_rebalancing() == []
    print("consumed more than once:", group.duplicates())


@pytest.mark.soak  # 30 s of JVM give-ups at 0.8.2's default timings; make test keeps the ownership test above
def test_every_partition_gets_a_live_owner_with_default_timings(group, kafka, node):
    poked = pokes(node)
    first = group.jvm_member(BEFORE_BRIDGE, JVM_DEFAULT_REBALANCE)
    last = group.jvm_member(AFTER_BRIDGE, JVM_DEFAULT_REBALANCE)
    group.settle("two JVM members")
    migrate_ok(kafka.zk_connect, "up", "--group", group.name, "--to", "0001_dual_commit")
    group.live_owners_consume("legacy")
    group.add(RdkafkaMember(node, group.name, group.topic, group.traces))
    group.settle("librdkafka joined")
    group.live_owners_consume("rdkafka")
    group.add(ZkcoordMember(node, kafka, group.name, group.topic, group.traces))
    group.settle("zkcoord's client joined")
    group.live_owners_consume("zkcoord")
    # The coordinator members poll again only after the JVM member that takes a partition from them gave up
    # (after j1, the group is [zkcoord-*, zkcoord-*, zz-j2]: zz-j2 gets partition 4, which a coordinator member
    # holds); an application busy longer than rebalance.max.retries × rebalance.backoff.ms does the same.
    for member in group.coordinator:
        member.busy.set()
    group.kill(first)
    wait_until(lambda: last.gave_up_rebalancing(), timeout=WAIT_S, what="the JVM member to give up its retries")
    for member in group.coordinator:
        member.busy.clear()
    group.settle("a JVM member was SIGKILLed")
    group.live_owners_consume("killed")
    group.stop(last)
    group.settle("the last JVM member left")
    group.live_owners_consume("left")
    print("consumed more than once:", group.duplicates())
    assert group.jvm.gave_up_rebalancing() == [AFTER_BRIDGE]
    assert f"group={group.name} has unowned partitions" in node.log_tail(10**7) and pokes(node) > poked


def pokes(node) -> int:
    """The node's ``mixed_group_legacy_retriggers_total``."""
    metrics = urllib.request.urlopen(f"http://{HOST}:{node.metrics_port}/metrics", timeout=5).read().decode()
    return int(float(re.search(r"^mixed_group_legacy_retriggers_total (\S+)$", metrics, re.MULTILINE)[1]))


def timeline(events: list[dict]) -> str:
    """The members' assignment changes in order, for a failure's message."""
    changes = sorted((e for e in events if e["type"] == "client.assignment"), key=lambda e: e["monotonic_before"])
    return "\n".join(
        f"{e['monotonic_before']:.3f}-{e['monotonic_after']:.3f} {e['member']} "
        f"{sorted(p for claims in e['assignment'].values() for _, p in claims)}"
        for e in changes
    )
