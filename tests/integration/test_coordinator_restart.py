"""A coordinator node restarted at once after SIGKILL, and a second process with a node id already in use
(docs/coordinator.md "Restart after a crash").

The restarted node finds the registration its killed predecessor left (same log directory, so the same
identity), waits for ZooKeeper to expire it, then serves every commit acknowledged before the kill. A second
process with the same id is refused: on another log directory by its registration's identity, on the same one
by the identity file's lock, which a paused (SIGSTOP) process still holds. SIGTERM ends the wait; a leader
znode its predecessor left without a registration is not taken over, but claimed once its session ends; a
registration of the same identity that outlives the wait is refused.
"""

from __future__ import annotations

import signal
import time

import pytest
from cluster_support import GroupClient, commit_retriable, eventually, read_leaders
from wire_client import WireClient

from zkcoord.errors import ConfigError
from zkcoord.testing.node_process import STARTUP_SECONDS, NodeProcess
from zkcoord.zk import admin, layout
from zkcoord.zk.client import started_client
from zkcoord.zk.nodes import NodeRegistry, previous_session_wait_s
from zkcoord.zk.session import make_kazoo_client

NUM_PARTITIONS = 4
SESSION_TIMEOUT_MS = 3000
OVERRIDES = {
    "offsets.topic.num.partitions": NUM_PARTITIONS,
    "group.initial.rebalance.delay.ms": 0,
    "zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS,
    "coordinator.claim.grace.ms": 200,
}
TOPIC, TOPIC_PARTITIONS = "orders", 3
GROUPS = [f"restart-{i}" for i in range(8)]  # spread over the offsets partitions
EXIT_USAGE = 2  # README: usage or connection error
RESTART_SECONDS = previous_session_wait_s(SESSION_TIMEOUT_MS) + STARTUP_SECONDS


def start_node(zk_connect, log_dir, workdir) -> NodeProcess:
    workdir.mkdir(exist_ok=True)
    return NodeProcess(1, zk_connect, log_dir, OVERRIDES, workdir)


def wait_leading_all(zk, when: str) -> None:
    wanted = {p: 1 for p in range(NUM_PARTITIONS)}
    eventually(
        lambda: {p: node for p, (node, _) in read_leaders(zk, NUM_PARTITIONS).items()} == wanted,
        STARTUP_SECONDS,
        f"node 1 to lead every partition {when}",
    )


def commit(client: GroupClient, group: str, offset: int) -> None:
    """A standalone commit (no member, generation -1), retried until a coordinator answers it."""
    response, _ = client.call(
        group,
        "OffsetCommit",
        deadline=_deadline(),
        retriable=commit_retriable,
        group_id=group,
        generation_id=-1,
        member_id="",
        group_instance_id=None,
        retention_time_ms=-1,
        topics=[
            {
                "name": TOPIC,
                "partitions": [
                    {"partition_index": p, "committed_offset": offset + p, "committed_metadata": group}
                    for p in range(TOPIC_PARTITIONS)
                ],
            }
        ],
    )
    assert {p["error_code"] for t in response["topics"] for p in t["partitions"]} == {0}, response


def fetch(client: GroupClient, group: str) -> dict[int, tuple[int, str]]:
    response, _ = client.call(
        group,
        "OffsetFetch",
        deadline=_deadline(),
        group_id=group,
        topics=[{"name": TOPIC, "partition_indexes": list(range(TOPIC_PARTITIONS))}],
    )
    assert response["error_code"] == 0, response
    return {p["partition_index"]: (p["committed_offset"], p["metadata"]) for p in response["topics"][0]["partitions"]}


def _deadline() -> float:
    return time.monotonic() + STARTUP_SECONDS


def registration_owner(zk) -> int | None:
    stat = zk.exists(layout.coordinator_node_path(layout.DEFAULT_ROOT, 1))
    return None if stat is None else stat.ephemeralOwner


def leader_owner(zk, partition: int) -> int | None:
    stat = zk.exists(layout.partition_leader_path(layout.DEFAULT_ROOT, partition))
    return None if stat is None else stat.ephemeralOwner


def test_a_node_restarted_at_once_after_sigkill_waits_for_its_old_session_and_keeps_every_commit(
    zk, zk_connect, tmp_path
):
    admin.create_topic(zk, TOPIC, TOPIC_PARTITIONS)
    log_dir = tmp_path / "offsets-log"
    nodes: list[NodeProcess] = []
    current = {}
    client = GroupClient(lambda: {1: current["node"].address})
    try:
        nodes.append(start_node(zk_connect, log_dir, tmp_path / "first"))
        current["node"] = nodes[-1]
        nodes[-1].wait_serving()
        old_session = registration_owner(zk)
        wait_leading_all(zk, "first start")
        acknowledged = {}
        for index, group in enumerate(GROUPS):
            commit(client, group, 1000 * (index + 1))
            acknowledged[group] = {p: (1000 * (index + 1) + p, group) for p in range(TOPIC_PARTITIONS)}

        nodes[-1].kill()
        nodes.append(start_node(zk_connect, log_dir, tmp_path / "second"))
        current["node"] = nodes[-1]
        client.close()
        nodes[-1].wait_serving(RESTART_SECONDS)
        assert registration_owner(zk) not in (None, old_session)
        log_text = nodes[-1].log_tail(20_000)
        waited = f"{previous_session_wait_s(SESSION_TIMEOUT_MS):g}"
        assert f"waiting up to {waited} s for the registration of node 1 by a previous session of this node" in log_text
        wait_leading_all(zk, "after the restart")
        assert {group: fetch(client, group) for group in GROUPS} == acknowledged
    finally:
        client.close()
        for node in nodes:
            node.close()


def test_a_second_process_with_the_node_id_is_refused_on_another_or_the_same_directory(zk, zk_connect, tmp_path):
    log_dir = tmp_path / "offsets-log"
    first = start_node(zk_connect, log_dir, tmp_path / "first")
    others: list[NodeProcess] = []
    try:
        first.wait_serving()

        others.append(start_node(zk_connect, tmp_path / "elsewhere", tmp_path / "elsewhere-run"))
        assert others[-1].process.wait(STARTUP_SECONDS) == EXIT_USAGE
        assert "node id 1 is already registered" in others[-1].log_tail()
        assert "by another live process" in others[-1].log_tail()

        # Paused, the first process still holds its identity file: its replacement must not race it.
        first.signal(signal.SIGSTOP)
        others.append(start_node(zk_connect, log_dir, tmp_path / "same-dir-run"))
        assert others[-1].process.wait(STARTUP_SECONDS) == EXIT_USAGE
        assert "node id 1 is in use on this log directory" in others[-1].log_tail()
        first.signal(signal.SIGCONT)

        # Its session may have expired while it was paused; it registers again, leads its offsets partitions again
        # (COORDINATOR_NOT_AVAILABLE until it has loaded them) and goes on serving.
        eventually(lambda: registration_owner(zk) is not None, STARTUP_SECONDS, "node 1 to be registered")
        with WireClient(*first.address, timeout=5) as wire:
            eventually(
                lambda: wire.call("ListGroups", states_filter=[])["error_code"] == 0,
                STARTUP_SECONDS,
                "node 1 to serve ListGroups again",
            )
    finally:
        if first.alive():
            first.signal(signal.SIGCONT)
        for node in [first, *others]:
            node.close()


def test_sigterm_while_waiting_for_the_old_session_stops_the_node_without_registering(zk, zk_connect, tmp_path):
    log_dir = tmp_path / "offsets-log"
    long_session = {**OVERRIDES, "zookeeper.session.timeout.ms": 20_000}  # the wait outlasts the test
    nodes = [NodeProcess(1, zk_connect, log_dir, long_session, tmp_path)]
    try:
        nodes[-1].wait_serving()
        nodes[-1].kill()
        (tmp_path / "second").mkdir()
        nodes.append(NodeProcess(1, zk_connect, log_dir, long_session, tmp_path / "second"))
        eventually(lambda: "previous session of this node" in nodes[-1].log_tail(), STARTUP_SECONDS, "the wait")
        nodes[-1].signal(signal.SIGTERM)
        assert nodes[-1].process.wait(STARTUP_SECONDS) == 0
        assert "registered coordinator node" not in nodes[-1].log_tail(20_000)
        assert nodes[-1].port is None  # it never said it was serving
    finally:
        for node in nodes:
            node.close()


def test_a_leader_znode_left_without_its_registration_is_claimed_again_when_its_session_ends(zk, zk_connect, tmp_path):
    """A node killed mid-way through a graceful stop: deregistered, but one leader znode still in its session."""
    with started_client(zk_connect) as stopping:
        stopping.create(
            layout.partition_leader_path(layout.DEFAULT_ROOT, 0),
            layout.encode_partition_leader(1, 5),
            ephemeral=True,
            makepath=True,
        )
        node = start_node(zk_connect, tmp_path / "offsets-log", tmp_path / "run")
        try:
            node.wait_serving()  # at once: no registration of node 1 is in the way
            eventually(lambda: len(read_leaders(zk, NUM_PARTITIONS)) == NUM_PARTITIONS, STARTUP_SECONDS, "every leader")
            assert leader_owner(zk, 0) == stopping.client_id[0]  # left alone, not taken over
            stopping.stop()  # its session ends
            eventually(
                lambda: leader_owner(zk, 0) == registration_owner(zk), STARTUP_SECONDS, "node 1 to claim partition 0"
            )
        finally:
            node.close()


def test_a_registration_of_this_identity_that_outlives_the_wait_is_refused(zk_connect):
    """The identity file copied to a second running process's directory: its registration never expires."""
    path = layout.coordinator_node_path(layout.DEFAULT_ROOT, 1)
    clients = [make_kazoo_client(zk_connect, SESSION_TIMEOUT_MS) for _ in range(2)]
    try:
        for client in clients:
            client.start(timeout=10)
        holder, starting = clients
        holder.create(path, layout.encode_coordinator_node("127.0.0.1", 1, "same"), ephemeral=True, makepath=True)
        registry = NodeRegistry(
            starting, layout.DEFAULT_ROOT, 1, "127.0.0.1", 2, identity="same", previous_session_wait_s=0.2
        )
        with pytest.raises(ConfigError, match="node id 1 is still registered .* after 0.2 s"):
            registry.register()
        assert holder.exists(path).ephemeralOwner == holder.client_id[0]
    finally:
        for client in clients:
            client.stop()
            client.close()
