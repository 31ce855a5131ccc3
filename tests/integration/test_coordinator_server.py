"""A coordinator node process on a real ZooKeeper, spoken to with a raw-socket client (wire-protocol.md only)."""

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import msgpack
import pytest
from wire_client import WireClient, frame_bytes

from zkcoord.zk import admin

ZKCOORD = str(Path(sys.executable).with_name("zkcoord"))
NODE_OVERRIDES = {
    "offsets.topic.num.partitions": 4,
    "group.initial.rebalance.delay.ms": 0,
    "group.min.session.timeout.ms": 10,
    "zookeeper.session.timeout.ms": 4000,
}
STARTUP_SECONDS = 30


def start_node(zk_connect, log_dir, node_id=1, overrides=None, extra=()):
    command = [ZKCOORD, "coordinator", "start", "--node-id", str(node_id), "--host", "127.0.0.1", "--port", "0"]
    command += ["--zookeeper", zk_connect, "--log-dir", str(log_dir), *extra]
    for key, value in {**NODE_OVERRIDES, **(overrides or {})}.items():
        command += ["--override", f"{key}={value}"]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def serving_port(process) -> int:
    line = process.stdout.readline()
    if "serving on" not in line:
        process.kill()
        raise AssertionError(f"node did not start: {line!r} {process.stderr.read()[-2000:]}")
    return int(line.rsplit(":", 1)[1])


def eventually(check, timeout=STARTUP_SECONDS, what="the condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def node(zk, zk_connect, tmp_path):
    admin.create_topic(zk, "t", 4)
    process = start_node(zk_connect, tmp_path / "log")
    try:
        port = serving_port(process)
        client = WireClient("127.0.0.1", port)
        eventually(
            lambda: client.call("FindCoordinator", key="g", key_type=0)["error_code"] == 0,
            what="partition leadership",
        )
        client.close()
        yield process, port
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()


def subscription(*topics):
    """wire-protocol.md §4, built here from the document."""
    return msgpack.packb({"version": 0, "topics": list(topics), "user_data": None, "owned_partitions": []})


def join(client, member_id="", group="g", metadata=b"", instance=None):
    return client.call(
        "JoinGroup",
        group_id=group,
        session_timeout_ms=10_000,
        rebalance_timeout_ms=2_000,
        member_id=member_id,
        group_instance_id=instance,
        protocol_type="consumer",
        protocols=[{"name": "range", "metadata": metadata}],
    )


def stable_member(client, group="g", metadata=b""):
    """Two-step join (KIP-394), then the leader's SyncGroup; returns (member id, generation)."""
    # 14/16 until this node has loaded the group's partition after its election.
    first = eventually(lambda: (r := join(client, group=group, metadata=metadata))["error_code"] not in (14, 16) and r)
    assert first["error_code"] == 79
    joined = join(client, first["member_id"], group=group, metadata=metadata)
    assert joined["error_code"] == 0, joined
    member, generation = joined["member_id"], joined["generation_id"]
    synced = client.call(
        "SyncGroup",
        group_id=group,
        generation_id=generation,
        member_id=member,
        group_instance_id=None,
        protocol_type="consumer",
        protocol_name="range",
        assignments=[{"member_id": member, "assignment": b"all of t"}],
    )
    assert synced["error_code"] == 0 and synced["assignment"] == b"all of t"
    return member, generation


def test_raw_client_joins_syncs_heartbeats_commits_fetches_and_leaves(node):
    _, port = node
    with WireClient("127.0.0.1", port) as client:
        member, generation = stable_member(client)
        assert generation == 1
        heartbeat = client.call("Heartbeat", group_id="g", generation_id=1, member_id=member, group_instance_id=None)
        assert heartbeat["error_code"] == 0
        committed = client.call(
            "OffsetCommit",
            group_id="g",
            generation_id=1,
            member_id=member,
            group_instance_id=None,
            retention_time_ms=-1,
            topics=[
                {
                    "name": "t",
                    "partitions": [
                        {"partition_index": 0, "committed_offset": 42, "committed_metadata": "m"},
                        {"partition_index": 9, "committed_offset": 1, "committed_metadata": None},
                    ],
                },
                {"name": "nope", "partitions": [{"partition_index": 0, "committed_offset": 1}]},
            ],
        )
        errors = {
            (t["name"], p["partition_index"]): p["error_code"] for t in committed["topics"] for p in t["partitions"]
        }
        # Partition 9 of a 4-partition topic and an unknown topic: 3 (wire-protocol.md §2).
        assert errors == {("t", 0): 0, ("t", 9): 3, ("nope", 0): 3}
        fetched = client.call("OffsetFetch", group_id="g", topics=[{"name": "t", "partition_indexes": [0, 1]}])
        partitions = {p["partition_index"]: p for p in fetched["topics"][0]["partitions"]}
        assert (partitions[0]["committed_offset"], partitions[0]["metadata"]) == (42, "m")
        assert partitions[1]["committed_offset"] == -1
        described = client.call("DescribeGroups", groups=["g"])["groups"][0]
        assert described["group_state"] == "Stable"
        assert described["members"][0]["client_host"] == "/127.0.0.1"
        left = client.call("LeaveGroup", group_id="g", members=[{"member_id": member, "group_instance_id": None}])
        assert left["error_code"] == 0 and left["members"][0]["error_code"] == 0
        assert client.call("DescribeGroups", groups=["g"])["groups"][0]["group_state"] == "Empty"


BAD_FRAMES = {
    "too long": (2_000_000).to_bytes(4, "big") + b"x",
    "zero length": (0).to_bytes(4, "big"),
    "garbage": (3).to_bytes(4, "big") + b"\xc1\xc1\xc1",
    "not a map": frame_bytes([1, 2, 3]),
    "no header": frame_bytes({"group_id": "g"}),
}


@pytest.mark.parametrize("kind", sorted(BAD_FRAMES))
def test_bad_frame_gets_the_error_frame_and_a_close_while_others_carry_on(node, kind):
    _, port = node
    with WireClient("127.0.0.1", port) as bystander, WireClient("127.0.0.1", port) as offender:
        member, _ = stable_member(bystander)
        offender.send_raw(BAD_FRAMES[kind])
        error = offender.receive()
        assert error["error_code"] == 42 and error["correlation_id"] == -1 and error["error_message"]
        assert offender.closed_by_peer()
        heartbeat = bystander.call("Heartbeat", group_id="g", generation_id=1, member_id=member, group_instance_id=None)
        assert heartbeat["error_code"] == 0


def test_unknown_api_gets_35_and_the_connection_stays(node):
    _, port = node
    with WireClient("127.0.0.1", port) as client:
        assert client.call("AlterPartitionReassignments")["error_code"] == 35
        assert client.call("ApiVersions")["error_code"] == 0


def test_partition_count_change_rebalances_subscribed_groups(node, zk):
    """The 0.9 coordinator design: the coordinator watches topics and rebalances groups whose topics changed."""
    _, port = node
    with WireClient("127.0.0.1", port) as client:
        member, generation = stable_member(client, metadata=subscription("t"))
        admin.alter_topic_partitions(zk, "t", 6)

        def rebalancing():
            beat = client.call(
                "Heartbeat", group_id="g", generation_id=generation, member_id=member, group_instance_id=None
            )
            return beat["error_code"] == 27

        eventually(rebalancing, timeout=10, what="a rebalance after the partition-count change")


def test_status_lists_the_node_its_partitions_and_groups(node, zk_connect):
    _, port = node
    with WireClient("127.0.0.1", port) as client:
        stable_member(client)
    output = subprocess.run(
        [ZKCOORD, "coordinator", "status", "--zookeeper", zk_connect, "--json"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    status = json.loads(output)
    assert [(n["node_id"], n["port"], n["partitions"], n["groups"]) for n in status["nodes"]] == [(1, port, 4, 1)]
    assert {(p["leader"], p["epoch"]) for p in status["partitions"]} == {(1, 1)}


def test_metrics_and_probe_endpoints(zk, zk_connect, tmp_path):
    metrics_port = 19000 + os.getpid() % 1000
    process = start_node(zk_connect, tmp_path / "log", extra=["--metrics-port", str(metrics_port)])
    try:
        port = serving_port(process)
        with WireClient("127.0.0.1", port) as client:
            stable_member(client)
        body = eventually(
            lambda: urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).read().decode(),
            what="the metrics endpoint",
        )
        assert 'num_groups{state="Stable"} 1.0' in body
        assert "partition_load_time_max" in body and "offset_commit_rate" in body
        assert "connections_rejected_total 0.0" in body and "connections_expired_total 0.0" in body
        health = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/healthz", timeout=5)
        assert health.status == 200
        ready = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/readyz", timeout=5).read())
        assert ready["ready"] is True and ready["zookeeper"] == "CONNECTED" and ready["partitions_led"] == [0, 1, 2, 3]
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0


def test_a_node_configured_with_another_partition_count_refuses_to_start(node, zk_connect, tmp_path):
    process = start_node(zk_connect, tmp_path / "other", node_id=2, overrides={"offsets.topic.num.partitions": 7})
    _, stderr = process.communicate(timeout=30)
    assert process.returncode != 0
    assert "offsets.topic.num.partitions is 7 here but 4 in ZooKeeper" in stderr
