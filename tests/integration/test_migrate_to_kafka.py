"""Step 0005: a LOG_ONLY group's offsets copied into a real Kafka 3.9 broker's group coordinator and back.

The zkcoord side is a coordinator node process on the test's chroot; the Kafka side is the session's broker,
read and written with kafka-python's consumer, as a team's own consumers would.
"""

import json
import socket
import uuid

import pytest
from migrate_support import one_node, run_migrate, state_of

from zkcoord.channel import CoordinatorChannel
from zkcoord.migration import store
from zkcoord.migration.phases import KafkaCopy, Phase
from zkcoord.migration.verify import fetch_log_offsets
from zkcoord.zk import layout
from zkcoord.zk.client import started_client
from zkcoord.zk.nodes import discover_nodes
from zkcoord.zk.offsets import write_offsets

COPY = "0005_copy_to_kafka"
PARTITIONS = 4


@pytest.fixture
def kafka_partitions():
    """How many partitions the topic has on Kafka (zkcoord's side always has PARTITIONS)."""
    return PARTITIONS


@pytest.fixture
def topic(kafka, kafka_partitions):
    name = f"exit-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(name, kafka_partitions)
    return name


@pytest.fixture
def group():
    return f"exit-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def log_only(zk, zk_connect, tmp_path, capsys, topic, group):
    """The group walked to LOG_ONLY with offsets 10..13, on one coordinator node; yields its log's offsets."""
    with one_node(zk, zk_connect, tmp_path, {topic: PARTITIONS}):
        write_offsets(zk, group, {(topic, p): 10 + p for p in range(PARTITIONS)})
        code, _, err = run_migrate(capsys, zk_connect, "up", "--group", group)
        assert code == 0, err
        assert state_of(zk, group).phase == Phase.LOG_ONLY
        channel = CoordinatorChannel(lambda: discover_nodes(zk), "test-exit", 10_000)
        try:
            yield lambda: fetch_log_offsets(channel, group)
        finally:
            channel.close()


def kafka_consumer(kafka, group: str):
    from kafka import KafkaConsumer

    return KafkaConsumer(
        bootstrap_servers=kafka.bootstrap, group_id=group, enable_auto_commit=False, session_timeout_ms=6000
    )


def cluster_id(kafka) -> str:
    """The id the broker registered in its ZooKeeper (Kafka's ``/cluster/id``)."""
    with started_client(kafka.zk_connect) as client:
        return json.loads(client.get("/cluster/id")[0])["id"]


def committed_on_kafka(kafka, group: str, topic: str) -> dict[tuple[str, int], int]:
    from kafka import TopicPartition

    consumer = kafka_consumer(kafka, group)
    try:
        found = {p: consumer.committed(TopicPartition(topic, p)) for p in range(PARTITIONS)}
    finally:
        consumer.close()
    return {(topic, p): offset for p, offset in found.items() if offset is not None}


def commit_on_kafka(kafka, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """A commit by a consumer that assigned its partitions (no group membership), as a stand-alone consumer makes."""
    from kafka import TopicPartition
    from kafka.structs import OffsetAndMetadata

    consumer = kafka_consumer(kafka, group)
    try:
        partitions = {TopicPartition(t, p): OffsetAndMetadata(o, "", -1) for (t, p), o in offsets.items()}
        consumer.assign(list(partitions))
        consumer.commit(partitions)
    finally:
        consumer.close()


def test_copy_up_then_back_down_loses_nothing_and_verify_compares_both(
    kafka, zk, zk_connect, capsys, topic, group, log_only
):
    target = ("--target-bootstrap-server", kafka.bootstrap)
    code, out, _ = run_migrate(capsys, zk_connect, "verify", "--group", group, *target)
    assert code == 1 and f"{PARTITIONS} only_zkcoord" in out  # a consumer of Kafka would start from nothing
    code, out, err = run_migrate(capsys, zk_connect, "up", "--group", group, "--to", COPY, *target)
    assert code == 0, err
    assert f"copying {PARTITIONS} of {PARTITIONS} partition(s) to Kafka" in out
    assert committed_on_kafka(kafka, group, topic) == log_only() == {(topic, p): 10 + p for p in range(PARTITIONS)}
    state = state_of(zk, group)
    assert (state.phase, state.applied[-1], state.pending) == (Phase.LOG_ONLY, COPY, None)
    assert state.kafka_copy == KafkaCopy(cluster_id(kafka), kafka.bootstrap)
    code, out, _ = run_migrate(capsys, zk_connect, "status", "--group", group, "--json")
    assert json.loads(out)[0]["kafka_copy"] == {"cluster_id": cluster_id(kafka), "bootstrap": kafka.bootstrap}
    assert run_migrate(capsys, zk_connect, "up", "--group", group, "--to", COPY, *target)[1].endswith("nothing to do\n")

    # The team's consumers now run on Kafka and commit there.
    commit_on_kafka(kafka, group, {(topic, 0): 50, (topic, 1): 51})
    code, out, _ = run_migrate(capsys, zk_connect, "verify", "--group", group, *target)
    assert code == 0, out  # Kafka ahead: nothing a consumer of Kafka would miss
    assert "4 partition(s): 2 match, 0 zkcoord_ahead, 2 kafka_ahead, 0 only_zkcoord, 0 only_kafka" in out
    table = [line.split() for line in out.splitlines() if line.startswith(group)]
    assert [group, topic, "0", "10", "50", "kafka_ahead", "40"] in table

    code, out, err = run_migrate(capsys, zk_connect, "down", "--group", group, *target)
    assert code == 0, err
    assert "copying 2 partition(s) committed on Kafka back into zkcoord's log" in out
    assert log_only() == {(topic, 0): 50, (topic, 1): 51, (topic, 2): 12, (topic, 3): 13}
    assert COPY not in state_of(zk, group).applied and state_of(zk, group).kafka_copy is None
    code, out, _ = run_migrate(capsys, zk_connect, "verify", "--group", group, "--json", *target)
    [verified] = json.loads(out)
    assert code == 0 and verified["kafka"]["counts"]["match"] == PARTITIONS


def test_zkcoord_ahead_of_kafka_fails_verify_and_refuses_the_step_down(
    kafka, zk, zk_connect, capsys, topic, group, log_only
):
    """Never a silent regression: with Kafka behind zkcoord's log, down copies nothing unless told to rewind."""
    target = ("--target-bootstrap-server", kafka.bootstrap)
    assert run_migrate(capsys, zk_connect, "up", "--group", group, "--to", COPY, *target)[0] == 0
    commit_on_kafka(kafka, group, {(topic, 2): 5})  # reset back on Kafka
    code, out, _ = run_migrate(capsys, zk_connect, "verify", "--group", group, *target)
    assert code == 1 and "1 partition(s) behind on Kafka" in out
    code, _, err = run_migrate(capsys, zk_connect, "down", "--group", group, *target)
    assert code == 1 and f"refusing to run {COPY} down" in err
    assert f"{topic}-2 (zkcoord 12, Kafka 5)" in err and "--allow-rewind" in err
    assert log_only()[(topic, 2)] == 12 and COPY in state_of(zk, group).applied
    assert run_migrate(capsys, zk_connect, "down", "--group", group, "--allow-rewind", *target)[0] == 0
    assert log_only()[(topic, 2)] == 5


@pytest.mark.parametrize("kafka_partitions", [2])
def test_a_partition_kafka_lacks_leaves_the_copy_under_way_and_a_rerun_finishes_it(
    kafka, zk, zk_connect, capsys, topic, group, log_only
):
    target = ("--target-bootstrap-server", kafka.bootstrap)
    code, _, err = run_migrate(capsys, zk_connect, "up", "--group", group, "--to", COPY, *target)
    assert code == 1 and "2 partition(s) were not accepted by Kafka" in err
    assert f"{topic}-2: UnknownTopicOrPartitionError" in err and "the step stays under way" in err
    assert state_of(zk, group).pending == (COPY, "up")
    assert committed_on_kafka(kafka, group, topic) == {(topic, 0): 10, (topic, 1): 11}
    kafka.add_partitions(topic, PARTITIONS)
    code, out, err = run_migrate(capsys, zk_connect, "up", "--group", group, *target)  # no --to: finishes it
    assert code == 0, err
    assert "copying 2 of 4 partition(s)" in out  # the rerun writes only what is still missing
    assert committed_on_kafka(kafka, group, topic) == log_only()
    assert (state_of(zk, group).pending, state_of(zk, group).applied[-1]) == (None, COPY)


def test_the_copy_is_refused_while_the_kafka_group_has_members(kafka, zk, zk_connect, capsys, topic, group, log_only):
    from kafka import KafkaConsumer

    member = KafkaConsumer(topic, bootstrap_servers=kafka.bootstrap, group_id=group, session_timeout_ms=6000)
    try:
        for _ in range(100):  # bounded: until the broker has given the member its partitions
            member.poll(timeout_ms=100)
            if member.assignment():
                break
        assert member.assignment()
        code, _, err = run_migrate(
            capsys, zk_connect, "up", "--group", group, "--to", COPY, "--target-bootstrap-server", kafka.bootstrap
        )
    finally:
        member.close()
    assert code == 1
    assert f"group {group} on the Kafka cluster at {kafka.bootstrap} is not inactive (state Stable" in err
    assert COPY not in state_of(zk, group).applied and state_of(zk, group).pending is None


def test_an_unreachable_or_missing_target_is_a_usage_error_that_changes_nothing(
    zk, zk_connect, capsys, group, log_only
):
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        closed = f"127.0.0.1:{unused.getsockname()[1]}"  # bound, never listening: connections are refused
        code, _, err = run_migrate(
            capsys, zk_connect, "up", "--group", group, "--to", COPY, "--target-bootstrap-server", closed,
            "--timeout", "2000",
        )  # fmt: skip
    assert code == 2 and f"cannot reach the Kafka cluster at {closed}" in err
    code, _, err = run_migrate(capsys, zk_connect, "up", "--group", group, "--to", COPY)
    assert code == 2 and "--target-bootstrap-server" in err
    state = state_of(zk, group)
    assert (state.phase, state.pending, COPY in state.applied) == (Phase.LOG_ONLY, None, False)


def test_a_group_not_yet_log_only_is_refused_before_any_step_runs(kafka, zk, zk_connect, tmp_path, capsys, topic):
    with one_node(zk, zk_connect, tmp_path, {topic: PARTITIONS}):
        write_offsets(zk, "g", {(topic, 0): 3})
        code, _, err = run_migrate(
            capsys, zk_connect, "up", "--group", "g", "--to", COPY, "--target-bootstrap-server", kafka.bootstrap
        )
    assert code == 1 and f"step {COPY} runs only on a group that has every earlier step applied" in err
    assert "the group is at ZK_ONLY" in err and state_of(zk, "g") is None


def test_the_step_down_copies_back_only_from_the_cluster_the_offsets_went_to(
    kafka, zk, zk_connect, capsys, topic, group, log_only
):
    target = ("--target-bootstrap-server", kafka.bootstrap)
    assert run_migrate(capsys, zk_connect, "up", "--group", group, "--to", COPY, *target)[0] == 0
    state, version = store.read_state(zk, layout.DEFAULT_ROOT, group)
    elsewhere = state.with_kafka_copy(KafkaCopy("another-cluster", "kafka.elsewhere:9092"), 1)
    store.write_state(zk, layout.DEFAULT_ROOT, group, elsewhere, version)  # as if copied to another cluster
    code, _, err = run_migrate(capsys, zk_connect, "down", "--group", group, *target)
    assert code == 1 and f"refusing to run {COPY} down" in err
    assert f"copied to the Kafka cluster another-cluster (at kafka.elsewhere:9092), not to {cluster_id(kafka)}" in err
    assert state_of(zk, group) == elsewhere  # nothing changed
