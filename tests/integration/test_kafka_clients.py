"""Kafka's other clients and tools through a coordinator node's Kafka listener (docs/kafka-protocol.md).

One node serves Kafka's protocol in front of the session's broker. Each client below uses it as its only
bootstrap: Kafka 3.9's own Java consumer (``kafka-console-consumer``) and ``kafka-consumer-groups``,
kafka-python's consumer and admin client, confluent-kafka's admin client, and ``zkcoord groups
--bootstrap-server``. What one client commits is read back through another, so every check goes through
zkcoord's group coordinator and the gateway, never around them.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, ConsumerGroupState, ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaPartition
from kafka import errors as kafka_errors
from kafka.admin import KafkaAdminClient
from kafka.structs import OffsetAndMetadata

from zkcoord import cli, peers
from zkcoord.peers.jvm import java_command
from zkcoord.testing.node_process import kafka_node
from zkcoord.testing.zookeeper import wait_until

PARTITIONS = 3
RECORDS = {0: 5, 1: 6, 2: 7}  # records per partition: each partition's log-end offset
COMMITTED = {0: 2, 1: 6, 2: 1}
NODE_ID = 1
COORDINATOR_ID = 1_000_000_000 + NODE_ID  # zkcoord.gateway.coordinator.id.base + node id
NODE_OVERRIDES = {
    "offsets.topic.num.partitions": 4,
    "group.initial.rebalance.delay.ms": 0,
    "coordinator.claim.grace.ms": 200,
}
CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
CONSUMER_GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
TIMEOUT_S = 30


@pytest.fixture(autouse=True)
def no_default_zookeeper(monkeypatch):
    monkeypatch.delenv("ZKCOORD_ZK_CONNECT", raising=False)


@pytest.fixture(scope="module")
def node(kafka, tmp_path_factory):
    """One coordinator node serving Kafka's protocol in front of the session's broker."""
    workdir = tmp_path_factory.mktemp("kafka-clients")
    process = kafka_node(NODE_ID, kafka.zk_connect, workdir / "logs", NODE_OVERRIDES, workdir)
    try:
        process.wait_serving()
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module")
def topic(kafka) -> str:
    """A topic produced on the broker itself: value ``p<partition>-<offset>`` at each offset."""
    name = f"orders-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(name, PARTITIONS)
    for partition, count in RECORDS.items():
        kafka.produce(name, [f"p{partition}-{offset}".encode() for offset in range(count)], partition=partition)
    return name


def every_value() -> list[str]:
    return sorted(f"p{partition}-{offset}" for partition, count in RECORDS.items() for offset in range(count))


def unique_group(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def kafka_tool(node, main_class: str, *args: str) -> subprocess.CompletedProcess:
    """One of Kafka 3.9's command-line tools, bootstrapping at the node's Kafka listener."""
    command = java_command(peers.TOOLS, main_class, ["--bootstrap-server", node.kafka_bootstrap, *args])
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


def consumer_groups(node, *args: str) -> list[list[str]]:
    """``kafka-consumer-groups ARGS``: the words of each non-empty line it prints (exit 0 asserted)."""
    done = kafka_tool(node, CONSUMER_GROUPS, *args)
    assert done.returncode == 0, done.stdout + done.stderr
    return [line.split() for line in done.stdout.splitlines() if line.strip()]


def committed(node, group: str, topic: str) -> dict[int, int]:
    """The group's committed offsets as librdkafka reads them through the node (OffsetFetch; -1001: none)."""
    reader = Consumer({"bootstrap.servers": node.kafka_bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        partitions = reader.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=TIMEOUT_S)
        return {tp.partition: tp.offset for tp in partitions}
    finally:
        reader.close()


@contextlib.contextmanager
def member(node, group: str, topic: str, client_id: str) -> Iterator[Consumer]:
    """A librdkafka consumer of ``topic`` in ``group`` that owns every partition and has committed
    ``COMMITTED``; it leaves the group (LeaveGroup) when the block ends."""
    consumer = Consumer(
        {
            "bootstrap.servers": node.kafka_bootstrap,
            "group.id": group,
            "client.id": client_id,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.subscribe([topic])

        def owns_every_partition() -> bool:
            consumer.poll(0.1)  # joins, and serves the rebalance callbacks
            return len(consumer.assignment()) == PARTITIONS

        wait_until(owns_every_partition, timeout=TIMEOUT_S, what=f"the consumer to own every partition of {topic}")
        offsets = [TopicPartition(topic, p, o) for p, o in COMMITTED.items()]
        assert all(tp.error is None for tp in consumer.commit(offsets=offsets, asynchronous=False))
        yield consumer
    finally:
        consumer.close()


def test_kafkas_java_consumer_consumes_every_record_and_commits_through_the_node(node, topic):
    group = unique_group("java")
    done = kafka_tool(
        node,
        CONSOLE_CONSUMER,
        *("--topic", topic, "--group", group, "--from-beginning"),
        *("--max-messages", str(sum(RECORDS.values())), "--timeout-ms", str(TIMEOUT_S * 1000)),
        *("--consumer-property", "client.id=java-console"),
    )
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.split()) == every_value()
    # Auto-commit on close: the position of every partition, its log end.
    assert committed(node, group, topic) == RECORDS


def test_kafka_consumer_groups_lists_describes_and_resets_a_group_through_the_node(node, topic):
    group = unique_group("tools")
    with member(node, group, topic, "tools-client") as consumer:
        assert consumer_groups(node, "--list").count([group]) == 1

        header, *rows = consumer_groups(node, "--describe", "--group", group)
        assert header == [
            "GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"
        ]  # fmt: skip
        member_id = consumer.memberid()
        assert sorted(rows) == [
            [group, topic, str(p), str(COMMITTED[p]), str(RECORDS[p]), str(RECORDS[p] - COMMITTED[p]), member_id]
            + ["/127.0.0.1", "tools-client"]
            for p in range(PARTITIONS)
        ]
        _, state = consumer_groups(node, "--describe", "--group", group, "--state")
        assert state == [group, node.kafka_bootstrap, f"({COORDINATOR_ID})", "range", "Stable", "1"]

        # A live group keeps its offsets: Kafka's tool says why on stdout, and still exits 0.
        done = kafka_tool(
            node, CONSUMER_GROUPS, "--reset-offsets", "--group", group, "--all-topics", "--to-earliest", "--execute"
        )
        refusal = f"Error: Assignments can only be reset if the group '{group}' is inactive, but the current state is"
        assert (done.returncode, done.stdout.splitlines()[1]) == (0, f"{refusal} Stable.")
        assert committed(node, group, topic) == COMMITTED

    _, state = consumer_groups(node, "--describe", "--group", group, "--state")
    assert state[-2:] == ["Empty", "0"]
    plan = consumer_groups(node, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute")
    # Kafka's tool prints the whole plan on one line: its header, then GROUP TOPIC PARTITION NEW-OFFSET per row.
    words = [word for line in plan for word in line]
    assert words[:4] == ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]
    rows = sorted(words[start : start + 4] for start in range(4, len(words), 4))
    assert rows == [[group, topic, str(p), "0"] for p in range(PARTITIONS)]
    assert committed(node, group, topic) == {p: 0 for p in range(PARTITIONS)}


def consume_everything(consumer: KafkaConsumer) -> list[str]:
    """Every value a kafka-python consumer reads until it has as many as were produced, sorted."""
    values = []

    def consumed_everything() -> bool:
        for records in consumer.poll(timeout_ms=100).values():
            values.extend(record.value.decode() for record in records)
        return len(values) >= sum(RECORDS.values())

    wait_until(consumed_everything, timeout=TIMEOUT_S, what="kafka-python to consume every record")
    return sorted(values)


def old_kafka_python(node, topic: str, group: str, api_version: tuple[int, ...]) -> KafkaConsumer:
    """A kafka-python consumer held to the protocol versions of Kafka ``api_version`` (no ApiVersions check)."""
    return KafkaConsumer(
        topic,
        bootstrap_servers=node.kafka_bootstrap,
        group_id=group,
        api_version=api_version,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )


@pytest.mark.parametrize(
    "api_version",
    [
        # FindCoordinator v0 (no key_type), JoinGroup v0 (no MEMBER_ID_REQUIRED), OffsetFetch v1, and Fetch v2 and
        # ListOffsets v0, older than kio's schemas: forwarded as they are
        (0, 10, 0),
        (2, 0),  # JoinGroup v3, SyncGroup v2, Heartbeat v2, OffsetCommit v4, OffsetFetch v4, Fetch v8
    ],
)
def test_kafka_python_at_older_protocol_versions_consumes_and_commits_through_the_node(node, topic, api_version):
    group = unique_group("python-old")
    with contextlib.closing(old_kafka_python(node, topic, group, api_version)) as consumer:
        assert consume_everything(consumer) == every_value()
        consumer.commit()
    assert committed(node, group, topic) == RECORDS


def test_kafka_python_consumes_commits_and_administers_its_group_through_the_node(node, topic):
    group = unique_group("python")
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=node.kafka_bootstrap,
        group_id=group,
        client_id="python-client",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    with contextlib.closing(consumer):
        assert consume_everything(consumer) == every_value()
        consumer.commit()
        assert committed(node, group, topic) == RECORDS

        # Only now: a KafkaAdminClient made while a KafkaConsumer of the same process joins often stalls that
        # consumer after its SyncGroup (kafka-python 3.0.12, against Kafka's own broker too).
        with contextlib.closing(KafkaAdminClient(bootstrap_servers=node.kafka_bootstrap)) as admin:
            described = admin.describe_groups([group])[group]
            assert (described["group_state"], described["protocol_type"], described["protocol_data"]) == (
                "Stable",
                "consumer",
                "range",
            )
            (described_member,) = described["members"]
            assert (described_member["client_id"], described_member["client_host"]) == ("python-client", "/127.0.0.1")
            assert described_member["member_assignment"]["assigned_partitions"] == [
                {"topic": topic, "partitions": list(range(PARTITIONS))}
            ]
            # Once: kafka-python asks every broker that Metadata names and keeps every answer.
            listed = [each for each in admin.list_groups() if each["group_id"] == group]
            assert listed == [
                {"group_id": group, "protocol_type": "consumer", "group_state": "Stable", "group_type": "classic"}
            ]
            assert group not in {each["group_id"] for each in admin.list_groups(types_filter=["consumer"])}  # KIP-848's

            consumer.close()  # LeaveGroup
            wait_until(
                lambda: admin.describe_groups([group])[group]["group_state"] == "Empty",
                timeout=TIMEOUT_S,
                what=f"{group} to be empty",
            )
            new_offsets = {KafkaPartition(topic, p): OffsetAndMetadata(o, "reset", -1) for p, o in COMMITTED.items()}
            assert set(admin.alter_group_offsets(group, new_offsets).values()) == {kafka_errors.NoError}
            fetched = admin.list_group_offsets(group)[group]
            assert {tp.partition: (value.offset, value.metadata) for tp, value in fetched.items()} == {
                p: (o, "reset") for p, o in COMMITTED.items()
            }
    assert committed(node, group, topic) == COMMITTED


def test_confluent_admin_lists_describes_fetches_and_alters_a_group_through_the_node(node, topic):
    group = unique_group("confluent")
    admin = AdminClient({"bootstrap.servers": node.kafka_bootstrap, "client.id": "confluent-admin"})
    with member(node, group, topic, "confluent-client") as consumer:
        listed = admin.list_consumer_groups(request_timeout=TIMEOUT_S).result()
        assert listed.errors == []
        assert [(g.state, g.is_simple_consumer_group) for g in listed.valid if g.group_id == group] == [
            (ConsumerGroupState.STABLE, False)
        ]
        described = admin.describe_consumer_groups([group], request_timeout=TIMEOUT_S)[group].result()
        assert (described.state, described.partition_assignor) == (ConsumerGroupState.STABLE, "range")
        assert (described.coordinator.id, f"{described.coordinator.host}:{described.coordinator.port}") == (
            COORDINATOR_ID,
            node.kafka_bootstrap,
        )
        (described_member,) = described.members
        assert (described_member.member_id, described_member.client_id) == (consumer.memberid(), "confluent-client")
        assert sorted(tp.partition for tp in described_member.assignment.topic_partitions) == list(range(PARTITIONS))

    fetched = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], request_timeout=TIMEOUT_S)
    assert {tp.partition: tp.offset for tp in fetched[group].result().topic_partitions} == COMMITTED

    described = admin.describe_consumer_groups([group], request_timeout=TIMEOUT_S, include_authorized_operations=True)[
        group
    ].result()
    assert (described.state, described.members) == (ConsumerGroupState.EMPTY, [])
    assert {operation.name for operation in described.authorized_operations} == {"READ", "DELETE", "DESCRIBE"}
    altered = admin.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0, 4), TopicPartition(topic, 2, 7)])],
        request_timeout=TIMEOUT_S,
    )
    assert [(tp.partition, tp.offset, tp.error) for tp in altered[group].result().topic_partitions] == [
        (0, 4, None),
        (2, 7, None),
    ]
    assert committed(node, group, topic) == {0: 4, 1: COMMITTED[1], 2: 7}


def test_zkcoord_groups_lists_and_describes_a_group_through_the_node(capsys, node, topic):
    group = unique_group("cli")
    with member(node, group, topic, "cli-client") as consumer:
        assert cli.main(["groups", "--bootstrap-server", node.kafka_bootstrap, "--json", "list"]) == 0
        listed = [each for each in json.loads(capsys.readouterr().out) if each["group"] == group]
        assert listed == [
            {
                "group": group,
                "kind": "coordinator",
                "state": "Stable",
                "protocol_type": "consumer",
                "phase": None,
                "reads_from": "log",
            }
        ]

        assert (
            cli.main(["groups", "--bootstrap-server", node.kafka_bootstrap, "--json", "describe", "--group", group])
            == 0
        )
        (described,) = json.loads(capsys.readouterr().out)
        assert described["state"] == "Stable"
        assert described["offsets"] == [
            {
                "topic": topic,
                "partition": p,
                "current_offset": COMMITTED[p],
                "log_end_offset": RECORDS[p],
                "lag": RECORDS[p] - COMMITTED[p],
                "consumer_id": consumer.memberid(),
                "host": "/127.0.0.1",
                "client_id": "cli-client",
            }
            for p in range(PARTITIONS)
        ]
