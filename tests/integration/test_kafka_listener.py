"""librdkafka consumers (confluent-kafka) in zkcoord groups through a node's Kafka listener, with the real Kafka
3.9 broker as the data plane behind the node's gateway ports (docs/kafka-protocol.md)."""

import collections
import contextlib
import re
import signal
import socket
import struct
import time
import urllib.request
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from zkcoord.errors import ErrorCode
from zkcoord.server.gateway import frame_content, read_frame
from zkcoord.testing.node_process import HOST, kafka_node
from zkcoord.testing.zookeeper import wait_until
from zkcoord.wire.kafka import versions
from zkcoord.wire.kafka.frames import encode_request, read_response
from zkcoord.zk.server import free_port

PARTITIONS = 4
OVERRIDES = {
    "offsets.topic.num.partitions": 4,
    "group.initial.rebalance.delay.ms": 0,
    "coordinator.claim.grace.ms": 200,
    "zookeeper.session.timeout.ms": 4000,
}
COORDINATOR_ID_BASE = 1_000_000_000  # zkcoord.gateway.coordinator.id.base's default
WAIT_S = 60


@pytest.fixture(scope="module")
def nodes(kafka, tmp_path_factory):
    """Two nodes with Kafka listeners in front of the test broker, sharing one offsets log."""
    workdir = tmp_path_factory.mktemp("kafka-listener")
    started = [
        kafka_node(node_id, kafka.zk_connect, workdir / "log", OVERRIDES, workdir, metrics_port=free_port(HOST))
        for node_id in (1, 2)
    ]
    try:
        for node in started:
            node.wait_serving()
        yield started
    finally:
        for node in started:
            node.stop()


def bootstrap(nodes) -> str:
    return ",".join(node.kafka_bootstrap for node in nodes if node.alive())


class Member:
    """One librdkafka consumer, polled by the test; keeps what it consumed and every assignment change."""

    def __init__(self, servers: str, group: str, topic: str, **config):
        self.consumer = Consumer(
            {
                "bootstrap.servers": servers,
                "group.id": group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 500,
                "topic.metadata.refresh.interval.ms": 1000,
                **config,
            }
        )
        self.records: list[tuple[int, int]] = []
        self.revoked: list[set[int]] = []
        self.assigned: set[int] = set()
        self.incremental = config.get("partition.assignment.strategy") == "cooperative-sticky"
        self.consumer.subscribe([topic], on_assign=self._on_assign, on_revoke=self._on_revoke)

    def _on_assign(self, consumer, partitions):
        got = {p.partition for p in partitions}
        self.assigned = self.assigned | got if self.incremental else got

    def _on_revoke(self, consumer, partitions):
        lost = {p.partition for p in partitions}
        if lost:
            self.revoked.append(lost)
        self.assigned -= lost

    def poll(self) -> None:
        message = self.consumer.poll(0.1)
        if message is not None and message.error() is None:
            self.records.append((message.partition(), message.offset()))

    def close(self) -> None:
        self.consumer.close()


def poll_until(members, condition, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        for member in members:
            member.poll()


def produce(kafka, topic: str, count: int, start: int = 0) -> None:
    kafka.produce(topic, [b"r%d" % i for i in range(start, start + count)])


def split(members) -> bool:
    owned = [member.assigned for member in members]
    return all(owned) and set().union(*owned) == set(range(PARTITIONS)) and sum(map(len, owned)) == PARTITIONS


@pytest.fixture
def topic(kafka):
    name = f"orders-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(name, PARTITIONS)
    return name


def test_two_members_split_consume_once_and_the_survivor_resumes_from_the_commits(nodes, kafka, topic):
    group = f"g-{uuid.uuid4().hex[:6]}"
    first, second = (Member(bootstrap(nodes), group, topic) for _ in range(2))
    try:
        poll_until([first, second], lambda: split([first, second]), "both members to share the partitions")
        produce(kafka, topic, 200)
        poll_until([first, second], lambda: len(first.records) + len(second.records) >= 200, "200 records")
        consumed = first.records + second.records
        assert len(set(consumed)) == len(consumed) == 200
        assert {p for p, _ in first.records} <= first.assigned and {p for p, _ in second.records} <= second.assigned
        for member in (first, second):
            member.consumer.commit(asynchronous=False)
        handed = set(second.assigned)
        second.close()  # LeaveGroup: the survivor takes every partition at once
        poll_until([first], lambda: first.assigned == set(range(PARTITIONS)), "the survivor to own everything")
        before = len(first.records)
        produce(kafka, topic, 100, start=200)
        poll_until([first], lambda: len(first.records) - before >= 100, "the 100 new records")
        time.sleep(0.5)
        for _ in range(10):
            first.poll()
        resumed = first.records[before:]
        assert len(resumed) == 100, "the survivor consumed what the other had committed again"
        assert {p for p, _ in resumed} >= handed
        committed = first.consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)
        assert sum(tp.offset for tp in committed) >= 200
    finally:
        first.close()


def test_a_static_member_bounces_inside_its_session_with_no_revocation(nodes, topic):
    group = f"static-{uuid.uuid4().hex[:6]}"
    servers = bootstrap(nodes)
    stay = Member(servers, group, topic, **{"group.instance.id": "stay"})
    bounce = Member(servers, group, topic, **{"group.instance.id": "bounce", "session.timeout.ms": 15000})
    try:
        poll_until([stay, bounce], lambda: split([stay, bounce]), "the static members to share the partitions")
        stay.revoked.clear()  # the group's forming (one member joining after the other) may have revoked some
        owned = set(bounce.assigned)
        bounce.close()  # a static member leaves no LeaveGroup behind (KIP-345)
        bounce = Member(servers, group, topic, **{"group.instance.id": "bounce", "session.timeout.ms": 15000})
        poll_until([stay, bounce], lambda: bounce.assigned, "the bounced member's assignment")
        for _ in range(20):
            stay.poll()
        assert bounce.assigned == owned
        assert stay.revoked == [], "the member that stayed was rebalanced"
    finally:
        stay.close()
        bounce.close()


def test_cooperative_sticky_moves_only_what_must_move(nodes, topic):
    group = f"coop-{uuid.uuid4().hex[:6]}"
    config = {"partition.assignment.strategy": "cooperative-sticky"}
    first = Member(bootstrap(nodes), group, topic, **config)
    second = None
    try:
        poll_until([first], lambda: first.assigned == set(range(PARTITIONS)), "the first member to own all")
        second = Member(bootstrap(nodes), group, topic, **config)
        poll_until([first, second], lambda: split([first, second]), "the partitions to be shared")
        moved = set().union(*first.revoked)
        assert moved == second.assigned, "more moved than the newcomer received"
        assert len(moved) == PARTITIONS // 2
    finally:
        first.close()
        if second is not None:
            second.close()


def test_consumption_goes_on_when_the_coordinator_node_is_killed(nodes, kafka, topic):
    group = f"failover-{uuid.uuid4().hex[:6]}"
    member = Member(bootstrap(nodes), group, topic)
    try:
        poll_until([member], lambda: member.assigned == set(range(PARTITIONS)), "the member's assignment")
        produce(kafka, topic, 50)
        poll_until([member], lambda: len(member.records) >= 50, "the first 50 records")
        member.consumer.commit(asynchronous=False)
        admin = AdminClient({"bootstrap.servers": bootstrap(nodes)})
        described = admin.describe_consumer_groups([group])[group].result(timeout=10)
        coordinator = next(n for n in nodes if n.node_id == described.coordinator.id - COORDINATOR_ID_BASE)
        coordinator.signal(signal.SIGKILL)
        produce(kafka, topic, 50, start=50)
        poll_until([member], lambda: len({r for r in member.records}) >= 100, "the records after the kill")
        member.consumer.commit(asynchronous=False)
        survivor = next(n for n in nodes if n is not coordinator)
        committed = Consumer({"bootstrap.servers": survivor.kafka_bootstrap, "group.id": group}).committed(
            [TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=20
        )
        assert sum(tp.offset for tp in committed) == 100
    finally:
        member.close()


def test_garbage_closes_its_connection_and_nothing_else(nodes, topic):
    live = next(node for node in nodes if node.alive())
    with socket.create_connection(("127.0.0.1", live.kafka_port), timeout=10) as sock:
        sock.sendall(b"\x00\x00\x00\x0cgarbage-bytes")
        assert sock.recv(100) == b""  # closed, nothing answered
    metrics = urllib.request.urlopen(f"http://{HOST}:{live.metrics_port}/metrics", timeout=5).read().decode()
    assert re.search(r"^kafka_frame_errors_total [1-9]", metrics, re.MULTILINE), metrics
    consumer = Consumer({"bootstrap.servers": live.kafka_bootstrap, "group.id": f"after-{uuid.uuid4().hex[:6]}"})
    try:
        committed = consumer.committed([TopicPartition(topic, 0)], timeout=20)
        assert committed[0].offset < 0  # answered: no offset yet
    finally:
        consumer.close()
    assert live.alive()


def test_a_produce_with_acks_0_gets_no_response_and_arrives(nodes, kafka, topic):
    producer = Producer({"bootstrap.servers": bootstrap(nodes), "acks": 0, "linger.ms": 5})
    for index in range(20):
        producer.produce(topic, b"fire-and-forget %d" % index, partition=1)
    assert producer.flush(20) == 0
    wait_until(lambda: kafka.end_offsets(topic)[1] >= 20, timeout=20, what="the acks=0 records at the broker")


def _ask(address: tuple[str, int], frame: bytes) -> bytes:
    with socket.create_connection(address, timeout=10) as sock:
        sock.sendall(frame)
        answer = read_frame(sock, 1 << 20)
    assert answer is not None
    return frame_content(answer)


def _api_versions(address: tuple[str, int], version: int = 3) -> dict[int, tuple[int, int]]:
    from kio.schema.api_versions.v3.request import ApiVersionsRequest

    _, answer = read_response(
        18,
        version,
        _ask(
            address,
            encode_request(1, "test", ApiVersionsRequest(client_software_name="test", client_software_version="1")),
        ),
    )
    assert int(answer.error_code.value) == 0
    return {int(a.api_key): (int(a.min_version), int(a.max_version)) for a in answer.api_keys}


def test_api_versions_serve_kafka_39s_group_versions_and_never_what_zkcoord_does_not_serve(nodes, kafka):
    broker = _api_versions(tuple_address(kafka.bootstrap))
    live = next(node for node in nodes if node.alive())
    advertised = _api_versions(("127.0.0.1", live.kafka_port))
    for api_key, (low, high) in versions.SERVED.items():
        assert advertised[api_key] == (low, high)
        assert broker[api_key][0] <= low and high <= broker[api_key][1], "served beyond what Kafka 3.9 serves"
    assert not set(advertised) & versions.REFUSED  # TxnOffsetCommit, KIP-848, share and streams groups
    assert advertised[versions.FETCH][1] <= 15 and advertised[versions.PRODUCE][1] <= 9
    assert set(advertised) - set(versions.SERVED) <= set(broker)  # forwarded: only what the brokers serve


def test_an_api_versions_request_newer_than_kio_gets_kafkas_v0_fallback(nodes):
    live = next(node for node in nodes if node.alive())
    header = struct.pack(">hhih", 18, 99, 7, 4) + b"test" + b"\x00"  # ApiVersions v99, client "test"
    answer = _ask(("127.0.0.1", live.kafka_port), struct.pack(">i", len(header)) + header)
    correlation_id, response = read_response(18, 0, answer)
    assert correlation_id == 7 and int(response.error_code.value) == ErrorCode.UNSUPPORTED_VERSION
    assert [(a.api_key, a.min_version, a.max_version) for a in response.api_keys] == [
        (18, *versions.SERVED[versions.API_VERSIONS])
    ]


def tuple_address(bootstrap_server: str) -> tuple[str, int]:
    host, port = bootstrap_server.rsplit(":", 1)
    return host, int(port)


def test_a_request_for_a_broker_that_is_not_there_closes_the_connection_at_once(nodes):
    from kio.schema.metadata.v12.request import MetadataRequest

    live = next(node for node in nodes if node.alive())
    absent_broker_port = live.kafka_port + 1 + 5  # the gateway port of broker id 5: no such broker
    request = MetadataRequest(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    with socket.create_connection(("127.0.0.1", absent_broker_port), timeout=10) as sock:
        sock.sendall(encode_request(3, "test", request))
        assert sock.recv(100) == b""  # closed (a hang would raise socket.timeout instead)


def _coordinator_port(nodes, group: str) -> int:
    from kio.schema.find_coordinator.v3.request import FindCoordinatorRequest

    live = next(node for node in nodes if node.alive())
    request = FindCoordinatorRequest(key=group, key_type=0)

    def found():  # a node killed by an earlier test may still hold the group's partition until its session expires
        _, answer = read_response(10, 3, _ask(("127.0.0.1", live.kafka_port), encode_request(2, "test", request)))
        return answer if int(answer.error_code.value) == 0 else None

    answer = wait_until(found, timeout=WAIT_S, interval=0.2, what=f"a coordinator for {group}")
    assert answer.node_id >= COORDINATOR_ID_BASE
    return answer.port


def _first_join(group: str, version: int) -> bytes:
    """A JoinGroup frame of a member that has no id yet."""
    from kio.index import load_request_schema

    from zkcoord.wire.kafka.entities import build

    request = build(
        load_request_schema(11, version),
        {
            "group_id": group,
            "session_timeout": 10_000,
            "rebalance_timeout": 10_000,
            "member_id": "",
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}],
        },
    )
    return encode_request(3, "old-client", request)


@pytest.mark.parametrize(("version", "joined"), [(3, True), (4, False)])
def test_a_join_before_v4_never_sees_member_id_required(nodes, version, joined):
    group = f"old-{uuid.uuid4().hex[:6]}"
    frame = _first_join(group, version)
    _, answer = read_response(11, version, _ask(("127.0.0.1", _coordinator_port(nodes, group)), frame))
    if joined:  # Kafka before KIP-394: joined at once, with the id the coordinator made
        assert int(answer.error_code.value) == 0 and answer.member_id and answer.generation_id >= 1
    else:
        assert int(answer.error_code.value) == ErrorCode.MEMBER_ID_REQUIRED and answer.member_id


JOIN_BURST = 600  # more JoinGroups at once than kazoo's wake-up socket pair buffers ZooKeeper requests (a few hundred)


def test_a_burst_of_first_joins_is_answered_in_full(nodes):
    """Each JoinGroup reads ZooKeeper (single-protocol check): a burst of them, as a thousand members joining at
    once send, must neither fail those reads (COORDINATOR_NOT_AVAILABLE) nor wedge the node's session."""
    group = f"burst-{uuid.uuid4().hex[:6]}"
    address = ("127.0.0.1", _coordinator_port(nodes, group))
    frame = _first_join(group, 4)
    with contextlib.ExitStack() as closing:
        members = [closing.enter_context(socket.create_connection(address, timeout=WAIT_S)) for _ in range(JOIN_BURST)]
        for sock in members:
            sock.sendall(frame)
        answers = collections.Counter()
        for sock in members:
            answer = read_frame(sock, 1 << 20)
            assert answer is not None
            answers[int(read_response(11, 4, frame_content(answer))[1].error_code.value)] += 1
    assert answers == {ErrorCode.MEMBER_ID_REQUIRED: JOIN_BURST}
    later = f"after-{group}"  # the node's session still serves the reads of a group it never saw
    _, answer = read_response(11, 4, _ask(("127.0.0.1", _coordinator_port(nodes, later)), _first_join(later, 4)))
    assert int(answer.error_code.value) == ErrorCode.MEMBER_ID_REQUIRED
