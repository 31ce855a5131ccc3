"""``zkcoord groups --bootstrap-server``: the groups of a real Kafka 3.9 broker, over Kafka's protocol.

The group is made by a real kafka-python consumer (a static member, so it stays in the group after it closes
until ``remove-members`` takes it out); the broker's own answers (kafka-python's admin client) are what the
CLI's output is checked against.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterator

import pytest
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaPartition
from kafka.admin import KafkaAdminClient
from kafka.structs import OffsetAndMetadata
from test_admin import running_cluster

from zkcoord import cli
from zkcoord.testing.zookeeper import wait_until

PARTITIONS = 3
RECORDS = {0: 5, 1: 6, 2: 7}  # log-end offset per partition
COMMITTED = {0: 2, 1: 6, 2: 1}
STABLE = "but the current state is Stable"


@pytest.fixture(autouse=True)
def no_default_zookeeper(monkeypatch):
    monkeypatch.delenv("ZKCOORD_ZK_CONNECT", raising=False)


@pytest.fixture
def topic(kafka) -> str:
    name = f"orders-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(name, PARTITIONS)
    for partition, count in RECORDS.items():
        kafka.produce(name, [b"r"] * count, partition=partition)
    return name


@pytest.fixture
def broker(kafka) -> Iterator[KafkaAdminClient]:
    admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap)
    try:
        yield admin
    finally:
        admin.close()


def groups(capsys, kafka, *argv: str) -> tuple[int, str, str]:
    """``zkcoord groups --bootstrap-server <broker> ARGV`` in process: (exit code, stdout, stderr)."""
    code = cli.main(["groups", "--bootstrap-server", kafka.bootstrap, *argv])
    out, err = capsys.readouterr()
    return code, out, err


def groups_json(capsys, kafka, *argv: str) -> list[dict]:
    code, out, err = groups(capsys, kafka, "--json", *argv)
    assert code == 0, err
    return json.loads(out)


@contextlib.contextmanager
def static_member(kafka, group: str, topic: str) -> Iterator[KafkaConsumer]:
    """A kafka-python consumer of ``topic`` in ``group`` (``group.instance.id`` "shop-a") that owns every
    partition and has committed ``COMMITTED``; closing it leaves it in the group (no LeaveGroup, KIP-345)."""
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=kafka.bootstrap,
        group_id=group,
        group_instance_id="shop-a",
        client_id="shop-client",
        enable_auto_commit=False,
        session_timeout_ms=30_000,
    )
    try:
        wait_until(
            lambda: consumer.poll(timeout_ms=100) is not None and len(consumer.assignment()) == PARTITIONS,
            timeout=30,
            what=f"the consumer to own every partition of {topic}",
        )
        consumer.commit({KafkaPartition(topic, p): OffsetAndMetadata(o, "", -1) for p, o in COMMITTED.items()})
        yield consumer
    finally:
        consumer.close(autocommit=False)


def committed(broker: KafkaAdminClient, group: str) -> dict[int, int]:
    return {tp.partition: value.offset for tp, value in broker.list_group_offsets(group)[group].items()}


def test_a_live_group_is_listed_and_described_as_kafka_consumer_groups_shows_it(capsys, kafka, topic, broker):
    group = f"shop-{uuid.uuid4().hex[:8]}"
    with static_member(kafka, group, topic):
        code, out, _ = groups(capsys, kafka, "list")
        assert code == 0 and [group, "coordinator", "Stable", "-", "log"] in [line.split() for line in out.splitlines()]
        listed = {"group": group, "kind": "coordinator", "state": "Stable", "protocol_type": "consumer"}
        assert {**listed, "phase": None, "reads_from": "log"} in groups_json(capsys, kafka, "list", "--state", "stable")

        (described,) = groups_json(capsys, kafka, "describe", "--group", group)
        member_id = broker.describe_groups([group])[group]["members"][0]["member_id"]
        assert described["state"] == "Stable"
        assert described["offsets"] == [
            {
                "topic": topic,
                "partition": p,
                "current_offset": COMMITTED[p],
                "log_end_offset": RECORDS[p],
                "lag": RECORDS[p] - COMMITTED[p],
                "consumer_id": member_id,
                "host": "/127.0.0.1",
                "client_id": "shop-client",
            }
            for p in range(PARTITIONS)
        ]
        code, out, err = groups(capsys, kafka, "describe", "--group", group)
        assert (code, err) == (0, "")
        lines = out.splitlines()
        assert lines[1].split() == [
            "GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"
        ]  # fmt: skip
        assert lines[2].split() == [group, topic, "0", "2", "5", "3", member_id, "/127.0.0.1", "shop-client"]

        code, out, _ = groups(capsys, kafka, "describe", "--group", group, "--members", "--verbose")
        assert code == 0
        assert out.splitlines()[2].split() == [
            group, member_id, "shop-a", "/127.0.0.1", "shop-client", "3", f"{topic}(0,1,2)"
        ]  # fmt: skip

        code, out, _ = groups(capsys, kafka, "describe", "--group", group, "--state")
        host, port = kafka.bootstrap.split(":")
        assert code == 0 and out.splitlines()[2].split() == [group, f"{host}:{port}", "(0)", "range", "Stable", "1"]

        # A live group keeps its offsets: Kafka's refusals, and nothing changed.
        code, _, err = groups(
            capsys, kafka, "reset-offsets", "--group", group, "--all-topics", "--to-earliest", "--execute"
        )
        assert code == 1
        assert err == f"Error: Assignments can only be reset if the group '{group}' is inactive, {STABLE}.\n"
        code, out, err = groups(capsys, kafka, "delete-offsets", "--group", group, "--topic", topic)
        assert code == 1 and "Error: The consumer group is actively subscribed to the topic" in out
        assert committed(broker, group) == COMMITTED


def test_an_empty_group_is_reset_its_offsets_deleted_and_then_the_group(capsys, kafka, topic, broker):
    group = f"shop-{uuid.uuid4().hex[:8]}"
    with static_member(kafka, group, topic):
        pass
    code, out, _ = groups(capsys, kafka, "remove-members", "--group", group, "--instance-ids", "shop-a")
    assert code == 0 and out.splitlines()[2].split() == [group, "shop-a", "Successful"]
    wait_until(lambda: broker.describe_groups([group])[group]["group_state"] == "Empty", timeout=10, what="Empty")

    code, out, err = groups(capsys, kafka, "describe", "--group", group)
    assert code == 0 and err == f"\nConsumer group '{group}' has no active members.\n"
    assert out.splitlines()[2].split() == [group, topic, "0", "2", "5", "3", "-", "-", "-"]

    code, out, err = groups(
        capsys, kafka, "reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--dry-run"
    )
    assert (code, err) == (0, "")
    assert [line.split() for line in out.splitlines()[1:]] == [
        ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"],
        *([group, topic, str(p), "0"] for p in range(PARTITIONS)),
    ]
    assert committed(broker, group) == COMMITTED  # a dry run commits nothing

    (plan,) = groups_json(
        capsys, kafka, "reset-offsets", "--group", group, "--topic", f"{topic}:0,2", "--shift-by", "-1", "--execute"
    )
    assert plan["executed"] and [o["new_offset"] for o in plan["offsets"]] == [1, 0]
    assert committed(broker, group) == {0: 1, 1: 6, 2: 0}
    groups_json(capsys, kafka, "reset-offsets", "--group", group, "--all-topics", "--to-latest", "--execute")
    assert committed(broker, group) == RECORDS
    code, out, _ = groups(
        capsys, kafka, "reset-offsets", "--group", group, "--all-topics", "--to-offset", "99", "--export"
    )
    assert (code, out) == (0, "".join(f"{topic},{p},{RECORDS[p]}\n" for p in range(PARTITIONS)))  # clamped to the end

    code, out, _ = groups(capsys, kafka, "delete-offsets", "--group", group, "--topic", f"{topic}:1")
    assert code == 0
    assert out.splitlines()[0] == f"Request succeed for deleting offsets with topic {topic}:1 group {group}"
    assert committed(broker, group) == {0: RECORDS[0], 2: RECORDS[2]}

    code, out, _ = groups(capsys, kafka, "delete", "--group", group)
    assert (code, out) == (0, f"Deletion of requested consumer groups ('{group}') was successful.\n")
    code, out, err = groups(capsys, kafka, "describe", "--group", group)
    assert (code, out, err) == (1, "", f"Error: Consumer group '{group}' does not exist.\n")


def test_errors_are_kafkas_messages_or_usage_errors(capsys, kafka):
    code, _, err = groups(capsys, kafka, "describe", "--group", "no-such-group", "--state")
    assert (code, err) == (1, "Error: Consumer group 'no-such-group' does not exist.\n")
    code, out, err = groups(capsys, kafka, "delete", "--group", "no-such-group")
    assert code == 1 and "* Group 'no-such-group' could not be deleted due to: GroupIdNotFoundError" in err

    assert cli.main(["groups", "--bootstrap-server", "127.0.0.1:1", "--timeout", "300", "list"]) == 2
    out, err = capsys.readouterr()
    assert err.startswith("Error: no Kafka-protocol broker answered at 127.0.0.1:1 within 300 ms")
    assert "Traceback" not in err and out == ""

    assert cli.main(["groups", "--bootstrap-server", kafka.bootstrap, "list", "--zookeeper", kafka.zk_connect]) == 2
    assert "--bootstrap-server cannot be combined with --zookeeper" in capsys.readouterr().err


def test_a_coordinator_nodes_msgpack_port_is_no_kafka_broker(capsys, zk_server, tmp_path):
    with running_cluster(zk_server, tmp_path) as node:
        code = cli.main(["groups", "--bootstrap-server", node.bootstrap, "--timeout", "1000", "list"])
        err = capsys.readouterr().err
        assert code == 2 and f"no Kafka-protocol broker answered at {node.bootstrap}" in err
        assert "--coordinator-server" in err
        assert cli.main(["groups", "--coordinator-server", node.bootstrap, "list"]) == 0
