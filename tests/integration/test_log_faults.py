"""Storage faults on a running node: a partition that cannot be loaded is resigned, never left stuck, and loads
once repaired (docs/offsets-log.md "Repairs"); the node compacts its log in the background."""

import contextlib

from cluster_support import ROOT, read_leaders
from coordinator_requests import commit, fetch
from wire_client import WireClient

from zkcoord import cli
from zkcoord.log.fence import EPOCH_FILE
from zkcoord.runtime.durable import partition_directory
from zkcoord.testing.node_process import NodeProcess
from zkcoord.testing.zookeeper import wait_until
from zkcoord.zk import admin

GIVEN_UP = "handed over node=1 partition=0: given up"
OVERRIDES = {
    "offsets.topic.num.partitions": 1,
    "zookeeper.session.timeout.ms": 2000,
    "coordinator.claim.grace.ms": 200,
    "coordinator.load.retry.backoff.ms": 200,
    "coordinator.load.max.attempts": 2,
}


@contextlib.contextmanager
def nodes(zk_connect, log_dir, workdir, node_ids, overrides=OVERRIDES):
    started = {node_id: NodeProcess(node_id, zk_connect, log_dir, overrides, workdir) for node_id in node_ids}
    try:
        for node in started.values():
            node.wait_serving()
        yield started
    finally:
        for node in started.values():
            node.stop()


def logged(node: NodeProcess, text: str) -> bool:
    return text in node.log_tail(1_000_000)


def call(client: WireClient, request: dict) -> dict:
    return client.call(request.pop("api"), **request)


def serves_partition(node: NodeProcess) -> bool:
    """The node answers an OffsetFetch of a group of offsets partition 0 (not 14 loading, not 16 elsewhere)."""
    with contextlib.suppress(OSError), WireClient(*node.address, timeout=2) as client:
        return call(client, fetch("g", [("t", 0)]))["error_code"] == 0
    return False


def test_a_partition_that_cannot_load_is_resigned_to_another_node_and_loads_once_repaired(zk, zk_connect, tmp_path):
    log_dir = tmp_path / "logs"
    directory = partition_directory(log_dir, 0)
    directory.mkdir(parents=True)
    (directory / "swap.json").write_bytes(b"\xff\xfe not a plan")
    with nodes(zk_connect, log_dir, tmp_path, [1, 2]) as started:
        wait_until(lambda: logged(started[1], "resigning it so another node can try"), 30, what="node 1 resigns")
        assert logged(started[1], "swap.json is not a swap plan")
        # Node 1 holds off; node 2 (not preferred, so after the claim grace) claims it and fails alike.
        wait_until(lambda: read_leaders(zk, 1).get(0, (None,))[0] == 2, 30, what="node 2 takes the partition")
        wait_until(lambda: logged(started[2], "resigning it so another node can try"), 30, what="node 2 resigns")
        (directory / "swap.json").unlink()
        wait_until(lambda: any(map(serves_partition, started.values())), 30, what="a node to serve the partition")


def test_a_leader_epoch_ahead_of_zookeeper_is_reported_and_repaired_with_raise_epoch(zk, zk_connect, tmp_path, capsys):
    log_dir = tmp_path / "logs"
    directory = partition_directory(log_dir, 0)
    directory.mkdir(parents=True)
    (directory / EPOCH_FILE).write_text("1000000\n")  # as if ZooKeeper had been reset under a used log
    with nodes(zk_connect, log_dir, tmp_path, [1]) as started:
        node = started[1]
        wait_until(lambda: logged(node, "epoch 1000000 already has"), 30, what="the fence refuses the load")
        assert logged(node, "zkcoord log raise-epoch")
        wait_until(lambda: logged(node, GIVEN_UP), 30, what="the node resigns the partition")

        assert cli.main(["log", "verify", str(log_dir), "--zookeeper", zk_connect, "--root", ROOT]) == 1
        out = capsys.readouterr().out
        assert f"leader epoch ahead of ZooKeeper: {directory / EPOCH_FILE}: epoch 1000000 is above" in out

        assert cli.main(["log", "raise-epoch", str(log_dir), "--zookeeper", zk_connect, "--root", ROOT]) == 0
        assert "raised ZooKeeper's epoch from" in capsys.readouterr().out
        wait_until(lambda: logged(node, "loaded partition=0 epoch=1000001"), 30, what="the load under a new epoch")
        assert serves_partition(node)
        assert cli.main(["log", "verify", str(log_dir), "--zookeeper", zk_connect, "--root", ROOT]) == 0


def test_an_unreadable_leader_epoch_file_is_resigned_not_served(zk, zk_connect, tmp_path):
    log_dir = tmp_path / "logs"
    directory = partition_directory(log_dir, 0)
    directory.mkdir(parents=True)
    (directory / EPOCH_FILE).write_bytes(b"\x00garbage")
    with nodes(zk_connect, log_dir, tmp_path, [1]) as started:
        node = started[1]
        wait_until(lambda: logged(node, GIVEN_UP), 30, what="the node resigns the partition")
        assert logged(node, "not a leader epoch")
        (directory / EPOCH_FILE).unlink()
        wait_until(lambda: logged(node, "loaded partition=0"), 30, what="the load once repaired")


def test_a_running_node_compacts_its_log_in_the_background(zk, zk_connect, tmp_path):
    admin.create_topic(zk, "orders", 4)
    overrides = {
        **OVERRIDES,
        "log.segment.bytes": 4096,
        "message.max.bytes": 2048,
        "log.cleaner.backoff.ms": 50,
        "log.flush.policy": "never",
    }
    directory = partition_directory(tmp_path / "logs", 0)

    def on_disk() -> int:
        total = 0
        for path in directory.glob("*.log"):
            with contextlib.suppress(FileNotFoundError):  # the cleaner swapped it out since the glob
                total += path.stat().st_size
        return total

    with nodes(zk_connect, tmp_path / "logs", tmp_path, [1], overrides) as started:
        node = started[1]
        wait_until(lambda: logged(node, "loaded partition=0"), 30, what="the node loads the partition")
        with WireClient(*node.address, timeout=5) as client:
            for round_ in range(300):  # the same 4 keys over and over: ~60 kB of records, 4 of them live
                offsets = {("orders", p): (round_ * 10 + p, "x" * 40) for p in range(4)}
                response = call(client, commit("", -1, offsets, group="compacted"))
                assert {p["error_code"] for t in response["topics"] for p in t["partitions"]} == {0}
        written = 300 * 4 * 40
        wait_until(lambda: logged(node, "cleaned "), 30, what="a background compaction")
        wait_until(lambda: on_disk() < written / 4, 30, what="the log to shrink on disk")
        with WireClient(*node.address, timeout=5) as client:
            fetched = call(client, fetch("compacted", [("orders", p) for p in range(4)]))
        assert sorted(p["committed_offset"] for t in fetched["topics"] for p in t["partitions"]) == [
            2990,
            2991,
            2992,
            2993,
        ]
