"""Mixed groups on real ZooKeeper and node processes: zkcoord's legacy members and coordinator members in one
DUAL_WRITE group (docs/migration.md "Mixed groups").

After every change the owner znodes equal 0.8.2's assignment over every registration, and each coordinator
member holds exactly the partitions whose owner znodes name its thread.
"""

import subprocess
import sys
import threading

import pytest
from cluster_support import Cluster, eventually, group_partition
from legacy_support import prepare_cluster
from test_migration_walk import (
    MEMBER_CONFIG,
    NODE_OVERRIDES,
    PARTITIONS,
    TOPIC,
    LegacyGroup,
    cluster,  # noqa: F401 (the same one-node cluster fixture)
    migrate_ok,
)

from zkcoord.bridge.core import thread_of
from zkcoord.client.consumer import Consumer
from zkcoord.migration import store
from zkcoord.model import TopicPartition
from zkcoord.sources import SyntheticSource
from zkcoord.testing.legacy import converged
from zkcoord.zk import layout

GROUP = MEMBER_CONFIG["group.id"]
WAIT_S = 40


class CoordinatorMember:
    """A zkcoord client member polling on a thread of its own."""

    def __init__(self, zk_connect: str, source, instance_id: str | None = None):
        self.consumer = Consumer(
            source=source,
            zookeeper_connect=zk_connect,
            group_id=GROUP,
            group_instance_id=instance_id,
            session_timeout_ms=6000,
            heartbeat_interval_ms=200,
            auto_commit_interval_ms=200,
            partition_assignment_strategy="range",
        )
        self.consumer.subscribe([TOPIC])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        while not self._stop.is_set():
            self.consumer.poll(timeout_ms=50)

    def assignment(self) -> set[TopicPartition]:
        return set(self.consumer.assignment())

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self.consumer.close()


def bridge_members(zk) -> dict[str, str]:
    """consumer id → member id of the coordinator members registered in the 0.8.2 group."""
    state = store.read_bridge(zk, layout.DEFAULT_ROOT, GROUP)
    return {} if state is None else {m.consumer_id: m.member_id for m in state.members}


def consistent(zk, members: list[CoordinatorMember], registered: int) -> bool:
    """Owner znodes are 0.8.2's assignment over ``registered`` registrations, and each coordinator member holds
    what the owner znodes give its thread."""
    snapshot = converged(zk, GROUP)
    if snapshot is None or len(snapshot.members) != registered:
        return False
    by_member = {member_id: thread_of(cid) for cid, member_id in bridge_members(zk).items()}
    for member in members:
        thread = by_member.get(member.consumer.member_id)
        owned = {tp for tp, owner in snapshot.owners.items() if owner == thread}
        if thread is None or member.assignment() != owned:
            return False
    return True


@pytest.mark.usefixtures("cluster")
def test_a_group_moves_member_by_member_from_legacy_to_coordinator_members(zk, zk_connect):
    source = SyntheticSource(rate_per_partition=200, initial_records=100)
    legacy = LegacyGroup(zk_connect, source)
    coordinator: list[CoordinatorMember] = []
    try:
        legacy.start()
        legacy.start()
        eventually(lambda: converged(zk, GROUP) is not None, WAIT_S, "legacy group settled")
        migrate_ok(zk_connect, "up", "--group", GROUP, "--to", "0001_dual_commit")
        coordinator.append(CoordinatorMember(zk_connect, source))
        eventually(lambda: consistent(zk, coordinator, 3), WAIT_S, "one coordinator member in the group")
        coordinator.append(CoordinatorMember(zk_connect, source, instance_id="static-1"))
        eventually(lambda: consistent(zk, coordinator, 4), WAIT_S, "two coordinator members in the group")
        legacy.stop(sorted(legacy.members)[0])
        eventually(lambda: consistent(zk, coordinator, 3), WAIT_S, "a legacy member left")
        coordinator.pop(0).close()
        eventually(lambda: consistent(zk, coordinator, 2), WAIT_S, "a coordinator member left")
        refused = subprocess.run(
            [sys.executable, "-m", "zkcoord.cli", "migrate", "up", "--group", GROUP, "--to", "0003_read_from_log",
             "--yes", "--zookeeper", zk_connect],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert refused.returncode == 1 and "legacy members" in refused.stderr, refused.stdout + refused.stderr
        assert store.read_bridge(zk, layout.DEFAULT_ROOT, GROUP) is not None
        legacy.close()  # the last legacy member leaves: the coordinator member takes every partition
        eventually(lambda: consistent(zk, coordinator, 1), WAIT_S, "the last legacy member left")
        assert coordinator[0].assignment() == {TopicPartition(TOPIC, p) for p in range(PARTITIONS)}
        migrate_ok(zk_connect, "up", "--group", GROUP, "--to", "0003_read_from_log")
        assert store.read_bridge(zk, layout.DEFAULT_ROOT, GROUP) is None
        assert zk.get_children(layout.ids_path(GROUP)) == []  # the bridge's registration went with it
        assert len(coordinator[0].assignment()) == PARTITIONS
    finally:
        for member in coordinator:
            member.close()
        legacy.close()


def test_a_node_failover_keeps_the_coordinator_members_partitions_owned_until_the_new_leader_takes_over(
    zk, zk_connect, tmp_path
):
    prepare_cluster(zk, {TOPIC: PARTITIONS})
    source = SyntheticSource(rate_per_partition=200, initial_records=100)
    with Cluster(zk_connect, tmp_path / "log", tmp_path, NODE_OVERRIDES) as nodes:
        nodes.start([1, 2])
        leaders = nodes.wait_balanced(zk)
        legacy = LegacyGroup(zk_connect, source)
        coordinator: list[CoordinatorMember] = []
        try:
            legacy.start()
            migrate_ok(zk_connect, "up", "--group", GROUP, "--to", "0001_dual_commit")
            coordinator.append(CoordinatorMember(zk_connect, source))
            eventually(lambda: consistent(zk, coordinator, 2), WAIT_S, "a mixed group of two")
            thread = thread_of(next(iter(bridge_members(zk))))
            held = {tp for tp, owner in converged(zk, GROUP).owners.items() if owner == thread}
            epoch = store.read_bridge(zk, layout.DEFAULT_ROOT, GROUP).epoch
            leader = leaders[group_partition(GROUP, nodes.num_partitions)][0]
            nodes.nodes[leader].kill()
            # Persistent owner znodes: the dead node's session takes none of them along.
            owners = converged(zk, GROUP)
            assert owners is not None and {tp for tp, o in owners.owners.items() if o == thread} == held
            taken_over = lambda: store.read_bridge(zk, layout.DEFAULT_ROOT, GROUP).epoch > epoch  # noqa: E731
            eventually(taken_over, WAIT_S, "the new leader took over")
            eventually(lambda: consistent(zk, coordinator, 2), WAIT_S, "the mixed group after the failover")
        finally:
            for member in coordinator:
                member.close()
            legacy.close()


def test_a_crashed_coordinator_member_is_released_after_the_grace_and_its_share_followed(zk, zk_connect, tmp_path):
    """A coordinator member SIGKILLed: the core expires it, the bridge releases its registration and owner znodes
    after the grace, and the coordinator member left rebalances onto what 0.8.2 now gives it."""
    prepare_cluster(zk, {TOPIC: PARTITIONS})
    source = SyntheticSource(rate_per_partition=200, initial_records=100)
    overrides = {**NODE_OVERRIDES, "zkcoord.bridge.release.grace.ms": 500}
    with Cluster(zk_connect, tmp_path / "log", tmp_path, overrides) as nodes:
        nodes.start([1])
        nodes.wait_balanced(zk)
        legacy = LegacyGroup(zk_connect, source)
        coordinator: list[CoordinatorMember] = []
        crashing = None
        try:
            legacy.start()
            migrate_ok(zk_connect, "up", "--group", GROUP, "--to", "0001_dual_commit")
            coordinator.append(CoordinatorMember(zk_connect, source))
            eventually(lambda: consistent(zk, coordinator, 2), WAIT_S, "a mixed group of two")
            command = [sys.executable, "-m", "zkcoord.testing.client_member", "--zookeeper", zk_connect,
                       "--group", GROUP, "--topic", TOPIC, "--source", "synthetic:rate=200",
                       "--trace", str(tmp_path / "crashing.jsonl"), "--session-timeout-ms", "1500",
                       "--heartbeat-interval-ms", "200"]  # fmt: skip
            crashing = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            eventually(lambda: len(bridge_members(zk)) == 2, WAIT_S, "the member in its own process registered")
            eventually(lambda: converged(zk, GROUP) is not None, WAIT_S, "a mixed group of three")
            crashing.kill()
            crashing.wait(timeout=10)
            eventually(lambda: len(bridge_members(zk)) == 1, WAIT_S, "the crashed member released")
            eventually(lambda: consistent(zk, coordinator, 2), WAIT_S, "its share followed by the others")
        finally:
            if crashing is not None and crashing.poll() is None:
                crashing.kill()
            for member in coordinator:
                member.close()
            legacy.close()


@pytest.mark.usefixtures("cluster")
def test_going_down_into_dual_write_registers_the_coordinator_members_already_in_the_group(zk, zk_connect):
    source = SyntheticSource(rate_per_partition=200, initial_records=100)
    coordinator: list[CoordinatorMember] = []
    legacy = LegacyGroup(zk_connect, source)
    try:
        migrate_ok(
            zk_connect, "up", "--group", GROUP, "--to", "0003_read_from_log", "--allow-new-group"
        )  # no member yet
        coordinator.append(CoordinatorMember(zk_connect, source))
        eventually(lambda: len(coordinator[0].assignment()) == PARTITIONS, WAIT_S, "a coordinator-only group")
        migrate_ok(zk_connect, "down", "--group", GROUP, "--to", "0002_backfill_log")
        eventually(lambda: consistent(zk, coordinator, 1), WAIT_S, "the member registered through the bridge")
        legacy.start()
        eventually(lambda: consistent(zk, coordinator, 2), WAIT_S, "a legacy member joined the mixed group")
    finally:
        for member in coordinator:
            member.close()
        legacy.close()
