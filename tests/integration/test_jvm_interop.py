"""Unmodified Kafka 0.8.2.2 consumers and zkcoord's legacy members in one group, on the real 3.9 broker.

JVM members are Kafka's ``kafka.tools.ConsoleConsumer`` and the ``LegacyMember`` driver (docs/peers.md);
zkcoord members are in-process :class:`~zkcoord.legacy.consumer.LegacyConsumer` s reading the broker through
a :class:`~zkcoord.sources.kafka.KafkaSource`. After every change the owner znodes must equal the 0.8.2
assignment of the group's registrations, no member may have given up its retries, Kafka's
``VerifyConsumerRebalance`` must pass the group (1.1.1's: 0.8.2.2's fails every group, KAFKA-3952), and
0.8.2.2's and ``zkcoord legacy verify`` must read the same owners. Each test is one scenario of several
steps: a JVM costs about a second to start.
"""

import json
import re
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import pytest
from kazoo.client import KazooClient
from legacy_support import Recorder

from zkcoord import cli, peers
from zkcoord.legacy.consumer import LegacyConsumer
from zkcoord.model import TopicPartition
from zkcoord.testing.jvm_member import JvmMembers, verify_consumer_rebalance
from zkcoord.testing.legacy import converged
from zkcoord.testing.zookeeper import wait_until
from zkcoord.zk import layout

CONVERGENCE_S = 60


class PythonMember:
    """A zkcoord legacy member reading the broker, every stream drained by a thread of its own."""

    def __init__(self, kafka, group: str, name: str, strategy: str, recorder: Recorder, **subscription):
        from zkcoord.sources.kafka import KafkaSource

        self.source = KafkaSource(kafka.bootstrap)
        config = {
            "group.id": group,
            "zookeeper.connect": kafka.zk_connect,
            "consumer.id": name,
            "zookeeper.session.timeout.ms": 4000,
            "rebalance.backoff.ms": 300,
            "rebalance.max.retries": 10,
            "auto.commit.interval.ms": 200,
            "auto.offset.reset": "smallest",
            "partition.assignment.strategy": strategy,
        }
        self.consumer = LegacyConsumer(config, trace=recorder, source=self.source, **subscription)
        self.consumer_id = self.consumer.consumer_id
        self.values: list[str] = []
        self.errors: list[Exception] = []  # what ended a stream other than close()
        self._readers = [
            threading.Thread(target=self._drain, args=(stream,), daemon=True)
            for streams in self.consumer.streams().values()
            for stream in streams
        ]

    def _drain(self, stream) -> None:
        try:
            for record in stream:
                self.values.append(record.value.decode())
        except Exception as error:  # reported by the test, not lost in a thread
            self.errors.append(error)

    def start(self) -> "PythonMember":
        self.consumer.start()
        for reader in self._readers:
            reader.start()
        return self

    def close(self) -> None:
        try:
            self.consumer.close()
            for reader in self._readers:
                reader.join(10)
        finally:
            self.source.close()


@dataclass
class MixedGroup:
    """One group of JVM and zkcoord members on the session's broker, and the checks every step ends with."""

    kafka: object
    zk: KazooClient
    capsys: pytest.CaptureFixture
    jvm: JvmMembers
    strategy: str
    name: str = field(default_factory=lambda: f"g-{uuid.uuid4().hex[:8]}")
    recorder: Recorder = field(default_factory=Recorder)
    python: list[PythonMember] = field(default_factory=list)

    def python_member(self, name: str, **subscription) -> PythonMember:
        member = PythonMember(self.kafka, self.name, name, self.strategy, self.recorder, **subscription)
        self.python.append(member)
        return member.start()

    def agree(self, members: list[str]):
        """Owners equal the 0.8.2 assignment of exactly ``members``, both verifiers read those owners, and no
        member gave up its retries on the way."""
        snapshot = wait_until(
            lambda: converged(self.zk, self.name, self.strategy, members),
            timeout=CONVERGENCE_S,
            what=f"{self.name} to converge on {members}",
        )
        with ThreadPoolExecutor(2) as pool:  # two JVMs of about a second each
            first, last = pool.map(
                lambda peer: verify_consumer_rebalance(self.kafka.zk_connect, self.name, peer),
                (peers.LEGACY_CONSUMER, peers.REBALANCE_VERIFIER),
            )
        assert last.successful and not last.unexplained, last.output
        assert first.verified, first.output  # only KAFKA-3952's complaints
        assert first.owners == snapshot.owners
        code = cli.main(["legacy", "verify", "--group", self.name, "--zookeeper", self.kafka.zk_connect, "--json"])
        verdict = json.loads(self.capsys.readouterr().out)
        assert code == 0 and verdict["ok"], verdict["problems"]
        assert {TopicPartition(p["topic"], p["partition"]): p["owner"] for p in verdict["partitions"]} == first.owners
        assert self.jvm.gave_up_rebalancing() == []
        assert self.recorder.of("legacy.rebalance_failed") == []
        return snapshot

    def committed(self, topic: str, partitions) -> dict[int, int | None]:
        paths = {p: layout.offset_path(self.name, topic, p) for p in partitions}
        return {p: int(self.zk.get(path)[0]) if self.zk.exists(path) else None for p, path in paths.items()}


@pytest.fixture
def mixed_group(kafka, tmp_path, capsys):
    """A factory of :class:`MixedGroup` s; every member a test starts is stopped at teardown."""
    zk = KazooClient(hosts=kafka.zk_connect)
    zk.start(timeout=15)
    groups: list[MixedGroup] = []
    with JvmMembers(tmp_path / "jvm") as jvm:

        def new_group(strategy: str) -> MixedGroup:
            groups.append(MixedGroup(kafka, zk, capsys, jvm, strategy))
            return groups[-1]

        try:
            yield new_group
        finally:
            for member in (m for group in groups for m in group.python):
                member.close()
            zk.stop()
            zk.close()


def _produce_numbered(kafka, partitions: dict[str, int], batch: str) -> set[str]:
    """One record per partition and batch, valued ``topic/partition/batch``; the values."""
    values = set()
    for topic, count in partitions.items():
        for partition in range(count):
            value = f"{topic}/{partition}/{batch}"
            kafka.produce(topic, [value.encode()], partition=partition)
            values.add(value)
    return values


def test_range_group_of_console_driver_and_zkcoord_members(kafka, mixed_group):
    """Static and wildcard members of both kinds; partitions added; a JVM member SIGKILLed and another
    stopped; every record consumed, and every offset committed as the next offset to consume."""
    group = mixed_group("range")
    orders, refunds = f"orders-{group.name}", f"refunds-{group.name}"
    kafka.create_topic(orders, 4)
    kafka.create_topic(refunds, 3)
    produced = _produce_numbered(kafka, {orders: 4, refunds: 3}, "a")
    jvm, zk_connect = group.jvm, kafka.zk_connect
    # First, so --from-beginning is allowed (the group has no offsets yet): it starts from the earliest too.
    console = jvm.console(zk_connect, group.name, "console", f"{orders},{refunds}", from_beginning=True)
    console.wait_started(group.zk, group.name)
    driver = jvm.driver(zk_connect, group.name, "driver", topics={orders: 2, refunds: 1})
    static = group.python_member("static", topics={refunds: 2, orders: 1})
    wildcard = group.python_member("wildcard", whitelist=f"{orders}|{refunds}", num_streams=2)
    driver.wait_started(group.zk, group.name)
    members = [console.consumer_id, driver.consumer_id, static.consumer_id, wildcard.consumer_id]
    group.agree(members)

    kafka.add_partitions(orders, 6)
    produced |= _produce_numbered(kafka, {orders: 6}, "b")
    snapshot = group.agree(members)
    assert len([tp for tp in snapshot.owners if tp.topic == orders]) == 6

    driver.kill()
    members.remove(driver.consumer_id)
    group.agree(members)

    late = jvm.driver(zk_connect, group.name, "late", whitelist=f"{orders},{refunds}", num_streams=3)
    late.wait_started(group.zk, group.name)
    members.append(late.consumer_id)
    group.agree(members)

    produced |= _produce_numbered(kafka, {orders: 6, refunds: 3}, "c")

    def consumed():
        assert static.errors == wildcard.errors == []
        return {*console.values(), *driver.values(), *late.values(), *static.values, *wildcard.values}

    wait_until(lambda: consumed() >= produced, timeout=CONVERGENCE_S, what="every record consumed")
    assert consumed() == produced
    assert late.stop() == 143 and "stopped" in late.stdout().splitlines()  # shutdown() ran on SIGTERM
    members.remove(late.consumer_id)
    group.agree(members)
    ends = {topic: kafka.end_offsets(topic) for topic in (orders, refunds)}
    wait_until(
        lambda: all(group.committed(topic, ends[topic]) == ends[topic] for topic in ends),
        timeout=CONVERGENCE_S,
        what="every partition committed at its log end",
    )


def test_roundrobin_group_with_hash_tied_topics_survives_an_expired_jvm_session(kafka, mixed_group):
    """Five topics, two of whose "[topic,partition]" strings hash alike for every partition ("Aa…"/"BB…"), so
    the deal depends on the Scala map order each member rebuilds from its registration (§4.3). A JVM member
    SIGSTOPped past its session timeout comes back (SIGCONT) and re-registers; partitions are added; the
    console member is SIGKILLed."""
    group = mixed_group("roundrobin")
    suffix = group.name
    topics = [f"Aa-{suffix}", f"BB-{suffix}", f"c-{suffix}", f"d-{suffix}", f"e-{suffix}"]
    # Aa before BB: ZooKeeper lists children of equal hash in creation order, and a wildcard member's
    # registration expands to the topics in that order, as the static members list them.
    for topic in topics:
        kafka.create_topic(topic, 2)
    jvm, zk_connect, strategy = group.jvm, kafka.zk_connect, {"partition.assignment.strategy": "roundrobin"}
    driver = jvm.driver(zk_connect, group.name, "driver", topics=dict.fromkeys(topics, 2), properties=strategy)
    console = jvm.console(zk_connect, group.name, "console", ",".join(topics), properties=strategy)
    static = group.python_member("static", topics=dict.fromkeys(topics, 2))
    wildcard = group.python_member("wildcard", whitelist=f".*-{suffix}")
    driver.wait_started(group.zk, group.name)
    console.wait_started(group.zk, group.name)
    members = [driver.consumer_id, console.consumer_id, static.consumer_id, wildcard.consumer_id]
    group.agree(members)

    # The same five-topic map registers byte for byte alike (but for the timestamp) from either kind of member.
    def registration(member):
        data = group.zk.get(layout.consumer_path(group.name, member.consumer_id))[0]
        return re.sub(rb'"timestamp":"\d+"', b'"timestamp":"T"', data)

    assert registration(driver) == registration(static)

    driver.pause()
    wait_until(
        lambda: not group.zk.exists(layout.consumer_path(group.name, driver.consumer_id)),
        timeout=CONVERGENCE_S,
        what="the paused JVM member's session to expire",
    )
    members.remove(driver.consumer_id)
    group.agree(members)
    driver.resume()
    members.append(driver.consumer_id)
    group.agree(members)

    for topic in topics[:2]:
        kafka.add_partitions(topic, 3)
    assert len(group.agree(members).owners) == 12

    console.kill()
    members.remove(console.consumer_id)
    group.agree(members)
