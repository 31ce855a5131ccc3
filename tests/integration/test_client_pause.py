"""A client member paused past its session (SIGSTOP, then SIGCONT) on a real coordinator node: once resumed it hands
out no record of the partitions the group gave to the other member meanwhile (docs/client.md, "After a long
pause"). The fault campaign found the first poll after the resume returning such records (issue 18).

Two ``zkcoord.compare.member`` processes consume a growing synthetic topic with no cost per record, so each
``compare.processed`` event is stamped as its poll returned. A record the resumed member processes while the
other member owns its partition must have existed before the pause: only a poll returned before it may still be
processed (that batch is the application's); any later record came from a poll after the resume.
"""

from __future__ import annotations

import json
import time
import uuid

from zkcoord.clock import ManualClock
from zkcoord.compare.member import client_member_config
from zkcoord.compare.processes import MemberProcess, poll_until
from zkcoord.model import TopicPartition
from zkcoord.sources import SyntheticSource
from zkcoord.testing.node_process import NodeProcess
from zkcoord.zk import admin

NODE_OVERRIDES = {
    "offsets.topic.num.partitions": 2,
    "group.initial.rebalance.delay.ms": 0,
    "group.min.session.timeout.ms": 100,
    "zookeeper.session.timeout.ms": 4000,
}
SESSION_TIMEOUT_MS = 2000
HEARTBEAT_INTERVAL_MS = 200
PARTITIONS = 2
RATE_PER_PARTITION = 100
SETTLE_SECONDS = 20


def read_events(path) -> list[dict]:
    """The complete lines of a member's trace so far."""
    try:
        *lines, _ = path.read_bytes().split(b"\n")
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in lines if line.strip()]


def assignments(events: list[dict]) -> list[tuple[int, set[int]]]:
    return [(e["time_ms"], {p for _, p in e["partitions"]}) for e in events if e["type"] == "compare.assignment"]


def owned_now(events: list[dict]) -> set[int]:
    found = assignments(events)
    return found[-1][1] if found else set()


def owner_intervals(events: list[dict], partition: int) -> list[tuple[int, float]]:
    """When the member owned ``partition``, as (from, to) wall-clock ms, by its compare.assignment events."""
    intervals, since = [], None
    for time_ms, partitions in assignments(events):
        if partition in partitions and since is None:
            since = time_ms
        elif partition not in partitions and since is not None:
            intervals.append((since, time_ms))
            since = None
    if since is not None:
        intervals.append((since, float("inf")))
    return intervals


def test_a_member_resumed_after_its_session_hands_out_no_record_of_a_partition_taken_over(tmp_path, zk, zk_connect):
    topic, group = f"pause-{uuid.uuid4().hex[:6]}", f"pause-{uuid.uuid4().hex[:6]}"
    admin.create_topic(zk, topic, PARTITIONS)
    source = SyntheticSource(RATE_PER_PARTITION)
    node = NodeProcess(1, zk_connect, tmp_path / "log", NODE_OVERRIDES, tmp_path)
    members: dict[str, MemberProcess] = {}
    try:
        node.wait_serving()

        def spec(name: str) -> dict:
            config = client_member_config(
                group, [node.address], name, "range", False, SESSION_TIMEOUT_MS, HEARTBEAT_INTERVAL_MS, 500
            )
            return {
                **{"run": 1, "scenario": "pause", "variant": "client", "instance": name, "member": name},
                **{"kind": "client", "group": group, "topics": [topic], "source": source.spec, "cost_ms": 0},
                **{"trace": str(tmp_path / f"{name}.jsonl"), "config": config},
            }

        for name in ("paused", "other"):
            members[name] = MemberProcess(spec(name), tmp_path / f"{name}.log")
        for member in members.values():
            member.wait_ready(SETTLE_SECONDS)
        traces = {name: tmp_path / f"{name}.jsonl" for name in members}

        def each_owns_one():
            owned = {name: owned_now(read_events(path)) for name, path in traces.items()}
            return None if sorted(map(len, owned.values())) == [1, 1] else owned

        poll_until("one partition each", each_owns_one, SETTLE_SECONDS)
        time.sleep(0.5)  # records flow to both

        members["paused"].pause()
        paused_ms = int(time.time() * 1000)
        poll_until(
            "the other member owning every partition",
            lambda: None if owned_now(read_events(traces["other"])) == {0, 1} else "not yet",
            SETTLE_SECONDS,
        )
        # Stamped before SIGCONT: the resumed member may report its lost partitions before this process runs again.
        resumed_ms = int(time.time() * 1000)
        members["paused"].resume()
        poll_until(
            "the resumed member owning a partition again",
            lambda: None if any(t > resumed_ms and p for t, p in assignments(read_events(traces["paused"]))) else "no",
            SETTLE_SECONDS,
        )
    finally:
        for member in members.values():
            member.close()
        node.close()

    resumed, other = read_events(traces["paused"]), read_events(traces["other"])
    ends_at_pause = SyntheticSource.from_spec(source.spec, clock=ManualClock(paused_ms)).end_offsets(
        [TopicPartition(topic, p) for p in range(PARTITIONS)]
    )
    stale = []
    for event in resumed:
        if event["type"] != "compare.processed" or event["time_ms"] < resumed_ms:
            continue
        partition, when = event["partition"], event["time_ms"]
        taken_over = any(start <= when < end for start, end in owner_intervals(other, partition))
        if taken_over and event["last_offset"] >= ends_at_pause[TopicPartition(topic, partition)]:
            stale.append(event)
    assert stale == [], f"records polled after the resume, of partitions the other member owned: {stale}"
    lost = [e for e in resumed if e["type"] == "client.partitions_lost" and e["time_ms"] >= resumed_ms]
    assert lost and lost[0]["partitions"], "the resumed member reported no partition lost"
