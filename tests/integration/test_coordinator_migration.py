"""Offset migration on the coordinator (the issue's deliverables 3, 5; docs/protocol.md "Addition: offset migration").

A real node process on a real ZooKeeper (a fresh chroot per test), spoken to with the raw wire client: the
write-behind mirror into ``/consumers/<g>/offsets`` while ``RULES[phase].coordinator_mirror``, OffsetFetch's
MAX in ZK_ONLY/DUAL_WRITE, JoinGroup refused with 23 for a group that ZooKeeper consumers run or whose
phase is ZK_ONLY, the migration state's watch, and the mirror metrics. The conditional commit for
backfills (``if_greater``) is tested in the pure coordinator through CoordinatorHarness (virtual clock, no IO),
and once over the wire.
"""

import itertools
import signal
import socket
import subprocess
import urllib.request

import msgspec
import pytest
from cluster_support import ROOT, eventually, group_partition
from coordinator_requests import (
    ILLEGAL_GENERATION,
    NONE,
    G,
    commit,
    commit_errors,
    fetched_offset,
    new_harness,
    reply,
)
from test_coordinator_server import NODE_OVERRIDES, join, serving_port, stable_member, start_node
from wire_client import WireClient

from zkcoord.migration.phases import MigrationState, Phase, encode_state
from zkcoord.migration.store import NO_VERSION, read_state, write_state
from zkcoord.model import TopicPartition
from zkcoord.server.steps import accepted_offsets, join_refusal_message, max_fetch_response
from zkcoord.testing.node_process import HOST
from zkcoord.wire.messages import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchResponse,
    OffsetFetchResponsePartition,
    OffsetFetchResponseTopic,
)
from zkcoord.wire.requests import check_request
from zkcoord.zk import admin, layout

COORDINATOR_NOT_AVAILABLE = 15
INCONSISTENT_GROUP_PROTOCOL = 23
MEMBER_ID_REQUIRED = 79
INVALID_REQUEST = 42
WAIT_S = 15.0
CANARY = "canary"


# ---- a node, and what the tests do with it ----------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return probe.getsockname()[1]


def probe_groups(count: int) -> list[str]:
    """Group ids that cover every offsets partition, so a DescribeGroups of them shows the node ready."""
    found: dict[int, str] = {}
    for index in itertools.count():
        name = f"probe-{index}"
        found.setdefault(group_partition(name, count), name)
        if len(found) == count:
            return list(found.values())
    raise AssertionError("unreachable")


class Node:
    """One coordinator node process with a wire connection and its metrics endpoint."""

    def __init__(self, zk, zk_connect, log_dir):
        self.zk = zk
        self.metrics_port = free_port()
        self.process = start_node(zk_connect, log_dir, extra=["--metrics-port", str(self.metrics_port)])
        self.client: WireClient | None = None
        self._canary_offsets = itertools.count(1)

    def wait_ready(self) -> None:
        self.port = serving_port(self.process)
        self.client = WireClient(HOST, self.port)
        probes = probe_groups(NODE_OVERRIDES["offsets.topic.num.partitions"])

        def ready():
            groups = self.client.call("DescribeGroups", groups=probes)["groups"]
            return all(group["error_code"] == 0 for group in groups)

        eventually(ready, WAIT_S, "the node to lead and load every offsets partition")

    def stop(self) -> None:
        if self.client is not None:
            self.client.close()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()

    def commit(self, group: str, offsets: dict[tuple[str, int], int], **fields) -> dict[tuple[str, int], int]:
        """A simple commit (generation -1, as a backfill makes it); (topic, partition) → error code."""
        topics: dict[str, list[dict]] = {}
        for (topic, partition), offset in offsets.items():
            topics.setdefault(topic, []).append(
                {"partition_index": partition, "committed_offset": offset, "committed_metadata": f"m{offset}"}
            )
        fields = {"generation_id": -1, "member_id": "", **fields}
        response = self.client.call(
            "OffsetCommit",
            group_id=group,
            group_instance_id=None,
            retention_time_ms=-1,
            topics=[{"name": name, "partitions": partitions} for name, partitions in topics.items()],
            **fields,
        )
        return {(t["name"], p["partition_index"]): p["error_code"] for t in response["topics"] for p in t["partitions"]}

    def fetch(self, group: str, partitions: list[tuple[str, int]] | None, **extra) -> dict:
        """OffsetFetch of ``partitions`` (None: all); the whole response."""
        if partitions is None:
            return self.client.call("OffsetFetch", group_id=group, topics=None, **extra)
        topics: dict[str, list[int]] = {}
        for topic, partition in partitions:
            topics.setdefault(topic, []).append(partition)
        asked = [{"name": name, "partition_indexes": indexes} for name, indexes in topics.items()]
        return self.client.call("OffsetFetch", group_id=group, topics=asked, **extra)

    def fetched(
        self, group: str, partitions: list[tuple[str, int]] | None, **extra
    ) -> dict[tuple[str, int], tuple[int, str]]:
        response = self.fetch(group, partitions, **extra)
        assert response["error_code"] == 0, response
        assert all(p["error_code"] == 0 for t in response["topics"] for p in t["partitions"]), response
        return {
            (t["name"], p["partition_index"]): (p["committed_offset"], p["metadata"])
            for t in response["topics"]
            for p in t["partitions"]
        }

    def metrics(self) -> dict[str, float]:
        body = urllib.request.urlopen(f"http://{HOST}:{self.metrics_port}/metrics", timeout=5).read().decode()
        lines = (line.rsplit(" ", 1) for line in body.splitlines() if line and not line.startswith("#"))
        return {name: float(value) for name, value in lines}

    def mirror_settled(self) -> None:
        """Commit a new offset for a DUAL_WRITE canary group and wait until ZooKeeper has it. The mirror works
        through its queue in order, so whatever was queued before has been written (or dropped) by then."""
        if read_state(self.zk, ROOT, CANARY)[0] is None:
            write_state(self.zk, ROOT, CANARY, MigrationState(Phase.DUAL_WRITE, 1), NO_VERSION)
        offset = next(self._canary_offsets)
        assert self.commit(CANARY, {("t", 0): offset}) == {("t", 0): 0}
        eventually(lambda: zk_offset(self.zk, CANARY, "t", 0) == offset, WAIT_S, "the canary's commit in ZooKeeper")


@pytest.fixture
def node(zk, zk_connect, tmp_path):
    admin.create_topic(zk, "t", 4)
    admin.create_topic(zk, "u", 4)
    started = Node(zk, zk_connect, tmp_path / "log")
    try:
        started.wait_ready()
        yield started
    finally:
        started.stop()


def set_phase(zk, group: str, phase: Phase) -> None:
    """Store the group's migration state as the migration tools do (compare-and-set, epoch + 1)."""
    state, version = read_state(zk, ROOT, group)
    epoch = 1 if state is None else state.epoch + 1
    write_state(zk, ROOT, group, MigrationState(phase=phase, epoch=epoch), version)


def zk_offset(zk, group: str, topic: str, partition: int) -> int | None:
    path = layout.offset_path(group, topic, partition)
    if zk.exists(path) is None:
        return None
    return int(zk.get(path)[0])


def set_zk_offset(zk, group: str, topic: str, partition: int, value: bytes) -> None:
    path = layout.offset_path(group, topic, partition)
    if zk.exists(path) is None:
        zk.create(path, value, makepath=True)
    else:
        zk.set(path, value)


# ---- the mirror: RULES[phase].coordinator_mirror ------------------------------------------------------------


@pytest.mark.parametrize("phase", [Phase.DUAL_WRITE, Phase.LOG_PRIMARY], ids=lambda phase: phase.name)
def test_accepted_commits_are_mirrored_into_zookeeper_while_the_phase_mirrors(node, zk, phase):
    set_phase(zk, "g", phase)
    with WireClient(HOST, node.port) as member_client:
        member, generation = stable_member(member_client)
        committed = member_client.call(
            "OffsetCommit",
            group_id="g",
            generation_id=generation,
            member_id=member,
            group_instance_id=None,
            retention_time_ms=-1,
            topics=[
                {
                    "name": "t",
                    "partitions": [
                        {"partition_index": 0, "committed_offset": 42, "committed_metadata": "m"},
                        {"partition_index": 1, "committed_offset": 7, "committed_metadata": None},
                        {"partition_index": 9, "committed_offset": 1, "committed_metadata": None},
                    ],
                }
            ],
        )
    assert [p["error_code"] for p in committed["topics"][0]["partitions"]] == [0, 0, 3]
    eventually(
        lambda: (zk_offset(zk, "g", "t", 0), zk_offset(zk, "g", "t", 1)) == (42, 7), WAIT_S, "the mirrored offsets"
    )
    # Only accepted partitions (error_code 0) are mirrored: t-9 does not exist.
    assert zk.exists(layout.offset_path("g", "t", 9)) is None


def test_unmanaged_and_log_only_groups_are_not_mirrored(node, zk):
    set_phase(zk, "done", Phase.LOG_ONLY)
    assert node.commit("plain", {("t", 0): 5}) == {("t", 0): 0}
    assert node.commit("done", {("t", 0): 6}) == {("t", 0): 0}
    node.mirror_settled()
    assert zk.exists(layout.group_path("plain")) is None
    assert zk.exists(layout.offsets_path("done")) is None
    assert node.fetched("plain", [("t", 0)]) == {("t", 0): (5, "m5")}


def test_the_mirror_is_set_if_greater_and_never_lowers_a_zookeeper_offset(node, zk):
    set_phase(zk, "g", Phase.DUAL_WRITE)
    set_zk_offset(zk, "g", "t", 0, b"100")
    assert node.commit("g", {("t", 0): 50, ("t", 1): 60}) == {("t", 0): 0, ("t", 1): 0}
    eventually(lambda: zk_offset(zk, "g", "t", 1) == 60, WAIT_S, "t-1 mirrored")
    node.mirror_settled()
    assert zk_offset(zk, "g", "t", 0) == 100


def test_a_backfills_conditional_commits_are_not_mirrored(node, zk):
    """docs/protocol.md: if_greater commits copy ZooKeeper's offsets, so the mirror leaves them alone."""
    set_phase(zk, "g", Phase.DUAL_WRITE)
    assert node.commit("g", {("t", 0): 8}, if_greater=True) == {("t", 0): 0}
    assert node.commit("g", {("t", 1): 9}) == {("t", 1): 0}
    eventually(lambda: zk_offset(zk, "g", "t", 1) == 9, WAIT_S, "the plain commit mirrored")
    node.mirror_settled()
    assert zk.exists(layout.offset_path("g", "t", 0)) is None


def test_later_commits_of_a_partition_reach_zookeeper_as_the_highest_offset(node, zk):
    set_phase(zk, "g", Phase.LOG_PRIMARY)
    for offset in range(1, 21):
        assert node.commit("g", {("t", 2): offset}) == {("t", 2): 0}
    eventually(lambda: zk_offset(zk, "g", "t", 2) == 20, WAIT_S, "the last commit in ZooKeeper")


def test_phase_changes_are_picked_up_by_the_watch(node, zk):
    set_phase(zk, "g", Phase.DUAL_WRITE)
    set_zk_offset(zk, "g", "t", 3, b"500")
    assert node.fetched("g", [("t", 3)]) == {("t", 3): (500, "")}  # MAX in DUAL_WRITE

    set_phase(zk, "g", Phase.LOG_PRIMARY)
    eventually(lambda: node.fetched("g", [("t", 3)]) == {("t", 3): (-1, "")}, WAIT_S, "LOG_PRIMARY's log-only fetch")
    assert node.commit("g", {("t", 0): 10}) == {("t", 0): 0}
    eventually(lambda: zk_offset(zk, "g", "t", 0) == 10, WAIT_S, "LOG_PRIMARY still mirroring")

    set_phase(zk, "g", Phase.LOG_ONLY)
    offsets = itertools.count(11)

    def not_mirrored():
        offset = next(offsets)
        assert node.commit("g", {("t", 0): offset}) == {("t", 0): 0}
        node.mirror_settled()
        return zk_offset(zk, "g", "t", 0) < offset

    eventually(not_mirrored, WAIT_S, "LOG_ONLY to stop the mirror")


def test_commits_queued_before_log_only_are_still_mirrored(node, zk):
    set_phase(zk, "g", Phase.LOG_PRIMARY)
    set_zk_offset(zk, "g", "t", 0, b"garbage")  # holds t-0 in the mirror's queue (retried with backoff)
    assert node.commit("g", {("t", 0): 5}) == {("t", 0): 0}
    eventually(lambda: node.metrics()["migration_mirror_failures_total"] >= 1, WAIT_S, "t-0 to be retried")

    set_phase(zk, "g", Phase.LOG_ONLY)
    offsets = itertools.count(1)

    def not_mirrored():
        offset = next(offsets)
        assert node.commit("g", {("t", 1): offset}) == {("t", 1): 0}
        node.mirror_settled()
        return (zk_offset(zk, "g", "t", 1) or 0) < offset

    eventually(not_mirrored, WAIT_S, "LOG_ONLY to stop the mirror")
    set_zk_offset(zk, "g", "t", 0, b"1")
    eventually(lambda: zk_offset(zk, "g", "t", 0) == 5, WAIT_S, "the commit queued under LOG_PRIMARY in ZooKeeper")


# ---- OffsetFetch: RULES[phase].coordinator_fetch -----------------------------------------------------------


@pytest.mark.parametrize("phase", [Phase.ZK_ONLY, Phase.DUAL_WRITE], ids=lambda phase: phase.name)
def test_offset_fetch_answers_the_larger_of_zookeeper_and_the_log_in_max_phases(node, zk, phase):
    set_phase(zk, "g", phase)
    set_zk_offset(zk, "g", "t", 0, b"100")  # ZooKeeper only
    set_zk_offset(zk, "g", "t", 1, b"80")  # ZooKeeper ahead of the log
    set_zk_offset(zk, "g", "t", 2, b"3")  # the log ahead
    set_zk_offset(zk, "g", "u", 2, b"9")  # a topic only ZooKeeper has
    set_zk_offset(zk, "g", "u", 3, b"not an offset")  # foreign data counts as none
    assert node.commit("g", {("t", 1): 50, ("t", 2): 7}) == {("t", 1): 0, ("t", 2): 0}

    asked = [("t", 0), ("t", 1), ("t", 2), ("t", 3), ("u", 3)]
    # Missing is -1; metadata is the log's ("" where it has none); asked order is kept.
    assert node.fetched("g", asked) == {
        ("t", 0): (100, ""),
        ("t", 1): (80, "m50"),
        ("t", 2): (7, "m7"),
        ("t", 3): (-1, ""),
        ("u", 3): (-1, ""),
    }
    everything = node.fetch("g", None)
    assert [(t["name"], [p["partition_index"] for p in t["partitions"]]) for t in everything["topics"]] == [
        ("t", [0, 1, 2]),
        ("u", [2]),
    ]
    assert node.fetched("g", None) == {
        ("t", 0): (100, ""),
        ("t", 1): (80, "m50"),
        ("t", 2): (7, "m7"),
        ("u", 2): (9, ""),
    }
    # Migration tools compare the stores, so they ask for the log alone (docs/protocol.md, log_only).
    assert node.fetched("g", None, log_only=True) == {("t", 1): (50, "m50"), ("t", 2): (7, "m7")}


def test_offset_fetch_reads_the_log_alone_in_log_primary(node, zk):
    set_phase(zk, "g", Phase.LOG_PRIMARY)
    set_zk_offset(zk, "g", "t", 0, b"100")
    set_zk_offset(zk, "g", "t", 1, b"100")
    assert node.commit("g", {("t", 0): 50}) == {("t", 0): 0}
    assert node.fetched("g", [("t", 0), ("t", 1)]) == {("t", 0): (50, "m50"), ("t", 1): (-1, "")}
    assert node.fetched("g", None) == {("t", 0): (50, "m50")}


# ---- JoinGroup: single-protocol membership (RULES[phase].client_member, /consumers/<g>/ids) -------------------


def assert_join_error_shape(response: dict, member_id: str = "") -> None:
    """An error JoinGroup response as docs/protocol.md gives it."""
    assert response["generation_id"] == -1
    assert (response["leader"], response["members"], response["member_id"]) == ("", [], member_id)
    assert response["protocol_type"] is None and response["protocol_name"] is None


def test_join_group_is_refused_with_23_while_zookeeper_consumers_are_registered(node, zk):
    for consumer_id in ("legacy-a", "legacy-b", "legacy-c"):
        zk.create(layout.consumer_path("g", consumer_id), b"{}", ephemeral=True, makepath=True)
    refused = join(node.client)
    assert refused["error_code"] == INCONSISTENT_GROUP_PROTOCOL
    assert_join_error_shape(refused)
    message = refused["error_message"]
    assert "legacy-a, legacy-b and 1 more" in message and "ZooKeeper (Kafka 0.8.2) consumers" in message
    assert "docs/mixed-groups.md" in message and "--to 0001_dual_commit" in message

    for consumer_id in ("legacy-a", "legacy-b", "legacy-c"):
        zk.delete(layout.consumer_path("g", consumer_id))
    # Accepted again once the node's watch saw the ids go: the two-step join (KIP-394), then a Stable generation.
    eventually(lambda: join(node.client)["error_code"] == MEMBER_ID_REQUIRED, WAIT_S, "the join to be let in")
    assert stable_member(node.client)[1] == 1


def test_a_zookeeper_consumer_registering_after_the_groups_ids_were_read_is_seen_by_the_next_joins(node, zk):
    """The node keeps a group's ids by a watch after reading them once: a registration that comes later (the
    ids znode did not even exist) refuses the rejoins of the coordinator members from then on."""
    member_id, _ = stable_member(node.client)
    zk.create(layout.consumer_path("g", "legacy-late"), b"{}", ephemeral=True, makepath=True)

    def refused() -> bool:
        answer = join(node.client, member_id=member_id)
        return answer["error_code"] == INCONSISTENT_GROUP_PROTOCOL and "legacy-late" in answer["error_message"]

    eventually(refused, WAIT_S, "the rejoin to be refused")


def test_join_group_is_refused_with_23_in_zk_only_until_dual_write(node, zk):
    set_phase(zk, "g", Phase.ZK_ONLY)
    refused = join(node.client, member_id="m-1")
    assert refused["error_code"] == INCONSISTENT_GROUP_PROTOCOL
    assert_join_error_shape(refused, member_id="m-1")
    assert "zkcoord migrate up --group g" in refused["error_message"] and "DUAL_WRITE" in refused["error_message"]

    set_phase(zk, "g", Phase.DUAL_WRITE)
    eventually(lambda: join(node.client)["error_code"] == MEMBER_ID_REQUIRED, WAIT_S, "the join to be let in")
    assert stable_member(node.client)[1] == 1


# ---- foreign data, metrics -----------------------------------------------------------------------------------


def test_foreign_data_in_the_migration_znode_fails_closed_and_holds_commits_for_zookeeper(node, zk):
    """The phase cannot be told: "unmanaged" would drop commits a mirroring phase owes ZooKeeper."""
    path = layout.migration_path(ROOT, "g")
    zk.create(path, b"\x00 not a migration state", makepath=True)
    set_zk_offset(zk, "g", "t", 0, b"100")
    assert join(node.client)["error_code"] == COORDINATOR_NOT_AVAILABLE  # retriable
    assert node.fetch("g", [("t", 0)])["error_code"] == COORDINATOR_NOT_AVAILABLE
    assert node.commit("g", {("t", 1): 5}) == {("t", 1): 0}  # in the log; mirroring waits for a readable phase
    eventually(lambda: node.metrics()["migration_mirror_failures_total"] >= 1, WAIT_S, "the held commit to be retried")
    assert node.metrics()["migration_mirror_lag_partitions"] == 1
    assert zk_offset(zk, "g", "t", 1) is None

    zk.set(path, encode_state(MigrationState(Phase.DUAL_WRITE, 1)))
    eventually(lambda: zk_offset(zk, "g", "t", 1) == 5, WAIT_S, "the held commit mirrored once the state reads")
    assert node.fetched("g", [("t", 0), ("t", 1)]) == {("t", 0): (100, ""), ("t", 1): (5, "m5")}
    assert node.process.poll() is None


def test_mirror_metrics_show_the_lag_then_zero(node, zk):
    set_phase(zk, "g", Phase.DUAL_WRITE)
    set_zk_offset(zk, "g", "t", 0, b"garbage")  # the mirror cannot write over foreign data: it retries
    assert node.commit("g", {("t", 0): 5, ("t", 1): 6}) == {("t", 0): 0, ("t", 1): 0}

    def lagging():
        metrics = node.metrics()
        return (
            metrics["migration_mirror_lag_partitions"] == 1
            and metrics["migration_mirror_lag_ms"] > 0
            and metrics["migration_mirror_failures_total"] >= 1
            and metrics["migration_mirror_writes_total"] >= 1  # t-1 went through
        )

    eventually(lagging, WAIT_S, "the mirror to report t-0 lagging")
    assert zk_offset(zk, "g", "t", 1) == 6

    set_zk_offset(zk, "g", "t", 0, b"1")
    eventually(lambda: zk_offset(zk, "g", "t", 0) == 5, WAIT_S, "the retried write")
    metrics = node.metrics()
    assert (metrics["migration_mirror_lag_partitions"], metrics["migration_mirror_lag_ms"]) == (0, 0)
    assert metrics["migration_mirror_writes_total"] >= 2


def test_if_greater_over_the_wire_leaves_a_larger_log_offset(node):
    assert node.commit("plain", {("t", 0): 10}) == {("t", 0): 0}
    assert node.commit("plain", {("t", 0): 4, ("t", 1): 4}, if_greater=True) == {("t", 0): 0, ("t", 1): 0}
    assert node.fetched("plain", [("t", 0), ("t", 1)]) == {("t", 0): (10, "m10"), ("t", 1): (4, "m4")}
    assert node.client.call("OffsetCommit", group_id="plain", if_greater="yes")["error_code"] == INVALID_REQUEST


# ---- if_greater in the pure coordinator (docs/protocol.md "Conditional commit") -------------------------------

T0, T1 = ("topic", 0), ("topic", 1)


def conditional(offsets: dict, if_greater: object = True) -> dict:
    return {**commit("", -1, offsets), "if_greater": if_greater}


def test_if_greater_writes_a_partition_without_an_offset_or_with_a_smaller_one():
    h = new_harness()
    assert commit_errors(h.send(commit("", -1, {T0: 5}))) == {TopicPartition(*T0): NONE}
    handle = h.send(conditional({T0: 6, T1: 3}))
    assert commit_errors(handle) == {TopicPartition(*T0): NONE, TopicPartition(*T1): NONE}
    assert (fetched_offset(h, T0), fetched_offset(h, T1)) == (6, 3)


def test_if_greater_leaves_an_equal_or_larger_offset_and_answers_0():
    h = new_harness()
    h.send(commit("", -1, {T0: 5, T1: 5}))
    records_before = len(h.records(0))
    handle = h.send(conditional({T0: 5, T1: 4}))
    assert commit_errors(handle) == {TopicPartition(*T0): NONE, TopicPartition(*T1): NONE}
    assert (fetched_offset(h, T0), fetched_offset(h, T1)) == (5, 5)
    assert len(h.records(0)) == records_before  # nothing appended


def test_if_greater_leaves_a_partition_whose_commit_is_in_flight():
    h = new_harness()
    h.hold_appends()
    first = h.send(commit("", -1, {T0: 5}))
    second = h.send(conditional({T0: 9, T1: 2}))
    assert not first.done and not second.done  # T1 is appended (held); T0 is left alone
    h.release_appends()
    assert commit_errors(first) == {TopicPartition(*T0): NONE}
    assert commit_errors(second) == {TopicPartition(*T0): NONE, TopicPartition(*T1): NONE}
    assert (fetched_offset(h, T0), fetched_offset(h, T1)) == (5, 2)


def test_if_greater_with_every_partition_left_alone_answers_at_once():
    h = new_harness()
    h.hold_appends()
    h.send(commit("", -1, {T0: 5}))
    handle = h.send(conditional({T0: 1}))
    assert commit_errors(handle) == {TopicPartition(*T0): NONE}


@pytest.mark.parametrize("if_greater", [False, None])
def test_without_if_greater_a_smaller_commit_still_rewinds(if_greater):
    h = new_harness()
    h.send(commit("", -1, {T0: 5}))
    assert commit_errors(h.send(conditional({T0: 2}, if_greater))) == {TopicPartition(*T0): NONE}
    assert fetched_offset(h, T0) == 2


def test_if_greater_must_be_a_bool_or_nil():
    assert check_request(conditional({T0: 1}, None)) is None
    refused = check_request(conditional({T0: 1}, 1))
    assert refused["error_code"] == INVALID_REQUEST
    assert refused["error_message"] == "OffsetCommit.if_greater must be bool or nil, got int 1"
    h = new_harness()
    assert reply(h.send(conditional({T0: 1}, "true")))["error_code"] == INVALID_REQUEST


def test_if_greater_still_checks_the_generation_first():
    h = new_harness()
    # A commit with a generation for a group that does not exist is a zombie's (§10.4): 22, nothing written.
    handle = h.send({**commit("nobody", 3, {T0: 1}, group=G), "if_greater": True})
    assert commit_errors(handle) == {TopicPartition(*T0): ILLEGAL_GENERATION}
    assert h.group(G) is None


# ---- the pure halves ---------------------------------------------------------------------------------------


def test_max_fetch_response_keeps_the_logs_metadata_and_adds_zookeeper_only_partitions():
    log_answer = OffsetFetchResponse(
        error_code=0,
        topics=(
            OffsetFetchResponseTopic(
                name="t",
                partitions=(
                    OffsetFetchResponsePartition(partition_index=1, committed_offset=50, metadata="m", error_code=0),
                    OffsetFetchResponsePartition(partition_index=0, committed_offset=-1, metadata="", error_code=0),
                ),
            ),
        ),
    )
    zookeeper = {("t", 1): 80, ("t", 0): 3, ("a", 0): 1}
    asked = max_fetch_response(log_answer, zookeeper, every_partition=False)
    assert [(p.partition_index, p.committed_offset, p.metadata) for p in asked.topics[0].partitions] == [
        (1, 80, "m"),
        (0, 3, ""),
    ]
    assert [t.name for t in asked.topics] == ["t"]
    everything = max_fetch_response(log_answer, zookeeper, every_partition=True)
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in everything.topics] == [
        ("a", [0]),
        ("t", [0, 1]),
    ]
    assert [p.committed_offset for p in log_answer.topics[0].partitions] == [50, -1]  # input unchanged


def test_join_refusal_message_names_at_most_two_ids_and_says_what_to_do():
    assert join_refusal_message("g", [], None) is None
    assert join_refusal_message("g", [], Phase.DUAL_WRITE) is None
    assert "legacy-1 under /consumers/g/ids" in join_refusal_message("g", ["legacy-1"], None)
    assert "zkcoord migrate up --group g" in join_refusal_message("g", [], Phase.ZK_ONLY)


def test_accepted_offsets_are_the_partitions_answered_0():
    request = msgspec.convert(
        {
            "generation_id": -1,
            "member_id": "",
            "topics": [
                {"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 5}]},
                {"name": "u", "partitions": [{"partition_index": 1, "committed_offset": 6}]},
            ],
        },
        OffsetCommitRequest,
    )
    response = msgspec.convert(
        {
            "topics": [
                {"name": "t", "partitions": [{"partition_index": 0, "error_code": 0}]},
                {"name": "u", "partitions": [{"partition_index": 1, "error_code": 3}]},
            ]
        },
        OffsetCommitResponse,
    )
    assert accepted_offsets(request, response) == {("t", 0): 5}
