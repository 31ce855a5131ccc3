"""A coordinator paused (SIGSTOP) past its ZooKeeper session, its group taken over by another node, then resumed
(SIGCONT): on the member's old connection it acknowledges nothing from its stale state (docs/coordinator.md
"After a pause or a disconnect"). Two node processes on a real ZooKeeper, spoken to over the wire protocol."""

from __future__ import annotations

import itertools
import signal
import time

import pytest
from cluster_support import (
    Cluster,
    GroupClient,
    commit_retriable,
    eventually,
    group_partition,
    read_leaders,
    subscription,
)
from wire_client import WireClient

from zkcoord.zk import admin

NUM_PARTITIONS = 4
ZOOKEEPER_SESSION_MS = 3000
NODE_OVERRIDES = {
    "offsets.topic.num.partitions": NUM_PARTITIONS,
    "group.initial.rebalance.delay.ms": 0,
    "zookeeper.session.timeout.ms": ZOOKEEPER_SESSION_MS,
    "coordinator.claim.grace.ms": 200,
}
TOPIC = "orders"
OLD_OFFSET, NEW_OFFSET = 10, 20
ROUNDS = 30  # of Heartbeat, OffsetCommit and OffsetFetch on the old connection after the resume
FETCH = {"topics": [{"name": TOPIC, "partition_indexes": [0]}]}


def group_led_by(leaders: dict[int, tuple[int, int]], node_id: int) -> tuple[str, int]:
    """A group id whose offsets partition ``node_id`` leads, and that partition."""
    groups = (f"paused-group-{i}" for i in itertools.count())
    return next((g, p) for g in groups if leaders[p := group_partition(g, NUM_PARTITIONS)][0] == node_id)


def commit_fields(group: str, member_id: str, generation: int, offset: int) -> dict:
    return {
        "group_id": group,
        "generation_id": generation,
        "member_id": member_id,
        "group_instance_id": None,
        "retention_time_ms": -1,
        "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "committed_offset": offset}]}],
    }


def commit_errors(response: dict) -> set[int]:
    return {p["error_code"] for t in response["topics"] for p in t["partitions"]}


def error_codes(response: dict) -> list[int]:
    """Every error code of an answer: the top-level one (if the API has one) and each partition's."""
    top = [response["error_code"]] if "error_code" in response else []
    return top + [p["error_code"] for t in response.get("topics") or () for p in t["partitions"]]


@pytest.mark.timeout(90)  # typically 5 s; every wait has its own deadline
def test_a_resumed_deposed_coordinator_acknowledges_nothing_on_an_old_connection(zk, zk_connect, tmp_path):
    admin.create_topic(zk, TOPIC, 1)
    with Cluster(zk_connect, tmp_path / "offsets-log", tmp_path, NODE_OVERRIDES) as cluster:
        cluster.start([1, 2])
        group, partition = group_led_by(cluster.wait_balanced(zk), 1)
        paused = cluster.nodes[1]
        old = WireClient(*paused.address, timeout=5)
        cluster.on_close(old.close)

        # -- a stable member on node 1, with a committed offset ---------------------------------------------------
        join = {
            "group_id": group,
            "session_timeout_ms": 45_000,  # no member expires during the test unless a stale view expires it
            "rebalance_timeout_ms": 30_000,
            "group_instance_id": None,
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": subscription([TOPIC])}],
        }
        member_id = old.call("JoinGroup", member_id="", **join)["member_id"]
        joined = old.call("JoinGroup", member_id=member_id, **join)
        assert joined["error_code"] == 0, joined
        generation = joined["generation_id"]
        member = {"group_id": group, "generation_id": generation, "member_id": member_id, "group_instance_id": None}
        assignment = [{"member_id": member_id, "assignment": b""}]
        assert old.call("SyncGroup", assignments=assignment, **member)["error_code"] == 0
        committed = old.call("OffsetCommit", **commit_fields(group, member_id, generation, OLD_OFFSET))
        assert commit_errors(committed) == {0}, committed
        assert old.call("Heartbeat", **member)["error_code"] == 0

        # -- node 1 paused past its session; node 2 takes the group over and commits a newer offset ---------------
        paused.signal(signal.SIGSTOP)
        try:
            eventually(lambda: read_leaders(zk, NUM_PARTITIONS).get(partition, (None,))[0] == 2, 30, "node 2 leading")
            client = GroupClient(lambda: {2: cluster.nodes[2].address})
            cluster.on_close(client.close)
            fields = commit_fields(group, member_id, generation, NEW_OFFSET)
            newer, _ = client.call(group, "OffsetCommit", time.monotonic() + 30, commit_retriable, **fields)
            assert commit_errors(newer) == {0}, newer

            # Requests already waiting in node 1's socket when it resumes: the first thing it reads.
            stale_commit = commit_fields(group, member_id, generation, OLD_OFFSET + 1)
            waiting = [
                old.send("Heartbeat", **member),
                old.send("OffsetCommit", **stale_commit),
                old.send("OffsetFetch", group_id=group, **FETCH),
            ]
        finally:
            paused.signal(signal.SIGCONT)

        # -- node 1, resumed: never error 0, never the old offset ------------------------------------------------
        answers = [old.receive(timeout=10) for _ in waiting]
        for _ in range(ROUNDS):
            answers.append(old.call("Heartbeat", **member))
            answers.append(old.call("OffsetCommit", **stale_commit))
            answers.append(old.call("OffsetFetch", group_id=group, **FETCH))
        refused = [error_codes(answer) for answer in answers]
        assert all(codes and set(codes) <= {15, 16} for codes in refused), f"{answers}\n{cluster.logs()}"

        # Node 2 still has the newer offset: nothing node 1 did after the resume reached the log.
        fetched, _ = client.call(group, "OffsetFetch", time.monotonic() + 30, group_id=group, **FETCH)
        assert [p["committed_offset"] for t in fetched["topics"] for p in t["partitions"]] == [NEW_OFFSET], fetched
