"""FindCoordinator and Metadata answered from watches on a real ZooKeeper, not from a read per request.

The watch itself runs in process (zkcoord/zk/cluster_watch.py, with a real registration and election) to
interrupt its session; two node processes show the answers: no ZooKeeper read per FindCoordinator (the
server's read count from ``mntr``), 15 only for the partitions of a node whose registration is garbage, that
node writing its registration again, and the answers following leadership when a node dies.
"""

from __future__ import annotations

import signal
import time

import gevent
from cluster_support import Cluster, eventually, group_partition, read_leaders
from wire_client import WireClient

from zkcoord.runtime.cluster import CachedCluster, ClusterSnapshot
from zkcoord.testing.zookeeper import drop_connection, expire_session
from zkcoord.zk import layout
from zkcoord.zk.cluster_watch import ClusterWatch
from zkcoord.zk.election import PartitionElection
from zkcoord.zk.nodes import NodeRegistry
from zkcoord.zk.server import four_letter_word
from zkcoord.zk.session import make_kazoo_client

ROOT = layout.DEFAULT_ROOT
PARTITIONS = 4
NOT_AVAILABLE = 15
NODE_OVERRIDES = {
    "offsets.topic.num.partitions": PARTITIONS,
    "zookeeper.session.timeout.ms": 4000,
    "coordinator.claim.grace.ms": 200,
}
REQUESTS = 200


def on_hub(condition, timeout: float = 20.0, what: str = ""):
    """Poll ``condition`` while this thread's hub runs the in-process watch."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        gevent.sleep(0.02)
    return value


class Snapshots:
    """What the watch held after each of its changes."""

    def __init__(self):
        self.watch: ClusterWatch | None = None
        self.seen: list[ClusterSnapshot] = []

    def __call__(self) -> None:
        self.seen.append(ClusterSnapshot(dict(self.watch.nodes), dict(self.watch.leaders), self.watch.current))

    def since(self, index: int) -> list[ClusterSnapshot]:
        return self.seen[index:]

    def answers(self) -> dict[int, int | None]:
        """Each partition's coordinator by the latest snapshot (None: 15)."""
        view = CachedCluster(self.seen[-1]) if self.seen else CachedCluster(ClusterSnapshot())
        return {p: (broker.node_id if (broker := view.coordinator(p)) else None) for p in range(PARTITIONS)}


def test_the_watch_follows_zookeeper_and_is_stale_while_its_session_is_interrupted(zk_connect, zk):
    client = make_kazoo_client(zk_connect, 4000)
    client.start(timeout=10)
    registry = NodeRegistry(client, ROOT, 1, "127.0.0.1", 9001)
    election = PartitionElection(client, ROOT, 1, PARTITIONS, lambda *_: None, lambda *_: None, claim_grace_ms=200)
    snapshots = Snapshots()
    own = (1, layout.encode_coordinator_node("127.0.0.1", 9001))
    watch = snapshots.watch = ClusterWatch(client, ROOT, PARTITIONS, snapshots, own_registration=own)
    try:
        registry.register()
        election.start()
        watch.start()
        everything_at_node_1 = {p: 1 for p in range(PARTITIONS)}
        on_hub(lambda: snapshots.answers() == everything_at_node_1, what="node 1 to lead every partition")

        # Another node's registration appears, then is overwritten with garbage: only its own entry is unreadable.
        zk.create(layout.coordinator_node_path(ROOT, 2), layout.encode_coordinator_node("127.0.0.1", 9002))
        on_hub(lambda: watch.nodes.get(2) == ("127.0.0.1", 9002), what="node 2's registration")
        zk.set(layout.coordinator_node_path(ROOT, 2), b"\xffgarbage")
        on_hub(lambda: isinstance(watch.nodes.get(2), str), what="node 2's garbage to be read")
        assert "/zkcoord/nodes/2" in watch.nodes[2] and watch.nodes[1] == ("127.0.0.1", 9001)
        zk.delete(layout.coordinator_node_path(ROOT, 2))
        on_hub(lambda: 2 not in watch.nodes, what="node 2's registration to go")

        # Its own registration overwritten: the node writes it back.
        mark = len(snapshots.seen)
        zk.set(layout.coordinator_node_path(ROOT, 1), b"{}")
        on_hub(lambda: zk.get(layout.coordinator_node_path(ROOT, 1))[0] == own[1], what="the registration rewritten")
        on_hub(lambda: watch.nodes.get(1) == ("127.0.0.1", 9001), what="the rewritten registration to be read")
        assert any(isinstance(s.nodes.get(1), str) for s in snapshots.since(mark)), "the garbage was never seen"
        on_hub(lambda: snapshots.answers() == everything_at_node_1, what="the answers to come back")

        # A dropped connection (SUSPENDED): not current until it reconnected and read everything again.
        mark = len(snapshots.seen)
        drop_connection(client)
        on_hub(lambda: snapshots.since(mark), what="the view to go stale on SUSPENDED")
        assert not snapshots.since(mark)[0].current  # before anything was read again
        on_hub(lambda: watch.current and snapshots.answers() == everything_at_node_1, what="answers after reconnect")

        # An expired session (LOST): the same, and the new session's registration and leadership are read.
        mark = len(snapshots.seen)
        expire_session(client)
        on_hub(lambda: any(not s.current for s in snapshots.since(mark)), what="the view to go stale on LOST")
        on_hub(lambda: watch.current and snapshots.answers() == everything_at_node_1, what="answers after expiry")
    finally:
        watch.stop()
        election.stop()
        registry.stop()
        client.stop()
        client.close()


def zookeeper_reads(zk_connect: str) -> int:
    host, port = zk_connect.split("/", 1)[0].split(",")[0].rsplit(":", 1)
    stats = dict(line.split("\t", 1) for line in four_letter_word(host, int(port), "mntr").splitlines() if "\t" in line)
    return int(stats["zk_cnt_readlatency"])


def group_on(partition: int) -> str:
    return next(f"lookup-{i}" for i in range(10_000) if group_partition(f"lookup-{i}", PARTITIONS) == partition)


def answers(client: WireClient, groups: dict[int, str]) -> dict[int, tuple[int, int]]:
    found = {p: client.call("FindCoordinator", key=group, key_type=0) for p, group in groups.items()}
    return {p: (r["error_code"], r["node_id"]) for p, r in found.items()}


def test_find_coordinator_reads_no_zookeeper_and_follows_garbage_and_failover(zk, zk_connect, tmp_path):
    groups = {p: group_on(p) for p in range(PARTITIONS)}
    with Cluster(zk_connect, tmp_path / "offsets-log", tmp_path, NODE_OVERRIDES) as cluster:
        cluster.start([1, 2])
        leaders = {p: node for p, (node, _) in cluster.wait_balanced(zk).items()}
        client = WireClient(*cluster.nodes[1].address)
        cluster.on_close(client.close)
        eventually(lambda: answers(client, groups) == {p: (0, n) for p, n in leaders.items()}, 10, "the leaders")
        assert [b["node_id"] for b in client.call("Metadata", topics=None)["nodes"]] == [1, 2]

        # -- no ZooKeeper read per request ----------------------------------------------------------------------
        reads_before = zookeeper_reads(zk_connect)
        started = time.perf_counter()
        for index in range(REQUESTS):
            partition = index % PARTITIONS
            found = client.call("FindCoordinator", key=groups[partition], key_type=0)
            assert (found["error_code"], found["node_id"]) == (0, leaders[partition]), found
        elapsed = time.perf_counter() - started
        reads = zookeeper_reads(zk_connect) - reads_before
        assert reads < REQUESTS, f"{reads} ZooKeeper reads for {REQUESTS} FindCoordinator requests"

        # -- node 2's registration garbage (node 2 paused, so it cannot repair it yet) ---------------------------
        mine = {p for p, n in leaders.items() if n == 1}
        path = layout.coordinator_node_path(ROOT, 2)
        registration, _ = zk.get(path)
        cluster.nodes[2].signal(signal.SIGSTOP)
        try:
            zk.set(path, b"not a registration")
            blocked = {p: (NOT_AVAILABLE, -1) if p not in mine else (0, 1) for p in range(PARTITIONS)}
            eventually(lambda: answers(client, groups) == blocked, 3, "15 for node 2's partitions only")
            assert [b["node_id"] for b in client.call("Metadata", topics=None)["nodes"]] == [1]
        finally:
            cluster.nodes[2].signal(signal.SIGCONT)
        assert f"znode={path}" in cluster.nodes[1].log_tail(20_000)
        eventually(lambda: zk.get(path)[0] == registration, 10, "node 2 to write its registration again")
        eventually(lambda: answers(client, groups) == {p: (0, n) for p, n in leaders.items()}, 10, "node 2 back")

        # -- node 2 dies: node 1's answers follow the new leaders -----------------------------------------------
        cluster.nodes[2].kill()
        killed = time.monotonic()
        everything_at_1 = {p: (0, 1) for p in range(PARTITIONS)}
        eventually(lambda: answers(client, groups) == everything_at_1, 20, "node 1 to coordinate every group")
        followed = time.monotonic() - killed
        assert {p: n for p, (n, _) in read_leaders(zk, PARTITIONS).items()} == dict.fromkeys(range(PARTITIONS), 1)
        assert [b["node_id"] for b in client.call("Metadata", topics=None)["nodes"]] == [1]
    print(
        f"{REQUESTS} FindCoordinator in {elapsed * 1000:.0f} ms ({elapsed / REQUESTS * 1e6:.0f} µs each) with "
        f"{reads} ZooKeeper reads; answers followed a SIGKILL {followed:.1f}s after it (session timeout 4 s)"
    )
