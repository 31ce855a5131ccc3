"""Three coordinator processes on a real ZooKeeper: a node dies (SIGKILL) or leaves (SIGTERM) and its groups
are served again by the others, as group-coordinator.md §9.6, §9.7 and §10 say.

The clients speak the wire protocol only (tests/wire_client.py); what they expect comes from the documents:
after a failover each group is Stable again at its persisted generation, its members' sessions restart at
load (so an old (member, generation) heartbeat answers NONE), and every commit acknowledged with error 0
by any coordinator is fetched back (§10.1).
"""

from __future__ import annotations

import itertools
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import pytest
from cluster_support import (
    RETRIABLE,
    Cluster,
    GroupClient,
    Retry,
    assignment,
    commit_retriable,
    eventually,
    group_partition,
    preferred_layout,
    read_leaders,
    registered_nodes,
    subscription,
)
from wire_client import WireClient

from zkcoord.zk import admin

NUM_PARTITIONS = 12
NODE_OVERRIDES = {
    "offsets.topic.num.partitions": NUM_PARTITIONS,
    "group.initial.rebalance.delay.ms": 0,
    "group.min.session.timeout.ms": 100,
    "zookeeper.session.timeout.ms": 2000,
    "coordinator.claim.grace.ms": 200,
}
TOPICS = {"orders": 4, "audit": 2}
TOPICS_PARTITIONS = {topic: list(range(count)) for topic, count in TOPICS.items()}
SESSION_TIMEOUT_MS = 45_000  # longer than the whole test: no member may expire unless a reload loses it
REBALANCE_TIMEOUT_MS = 30_000
GROUP_COUNT = 50
SETUP_ROUNDS = 3
FAILOVER_SECONDS = 25.0
PROTOCOL = "range"


@dataclass
class Member:
    """One group with one member, and every commit sent for it: which offsets were acknowledged."""

    group: str
    index: int
    member_id: str = ""
    generation: int = -1
    node: int | None = None  # the node that answered SyncGroup
    acked: dict[tuple[str, int], tuple[int, str]] = field(default_factory=dict)  # (offset, metadata), last ack
    unacked: dict[tuple[str, int], set[int]] = field(default_factory=dict)  # sent after the last ack, no answer
    rounds: itertools.count = field(default_factory=lambda: itertools.count(1))

    def offsets(self, round_: int, topics=tuple(TOPICS)) -> dict[tuple[str, int], tuple[int, str]]:
        """Distinct per group, partition and round, growing with the round."""
        return {
            (topic, p): (self.index * 1_000_000 + round_ * 100 + i * 10 + p, f"{self.group}/{round_}")
            for i, (topic, count) in enumerate(sorted(TOPICS.items()))
            if topic in topics
            for p in range(count)
        }

    def member_fields(self) -> dict:
        return {"generation_id": self.generation, "member_id": self.member_id, "group_instance_id": None}


def commit_request(member: Member, offsets: dict[tuple[str, int], tuple[int, str]]) -> dict:
    topics: dict[str, list] = {}
    for (topic, partition), (offset, metadata) in sorted(offsets.items()):
        topics.setdefault(topic, []).append(
            {"partition_index": partition, "committed_offset": offset, "committed_metadata": metadata}
        )
    return {
        "group_id": member.group,
        **member.member_fields(),
        "retention_time_ms": -1,
        "topics": [{"name": name, "partitions": partitions} for name, partitions in topics.items()],
    }


def commit(client: GroupClient, member: Member, deadline: float, topics=lambda: tuple(TOPICS)) -> tuple[dict, tuple]:
    """One generation-aware commit of a new round, retried on coordinator errors; records what was acked.

    Every attempt (a new round of the partitions of ``topics()`` at that moment) counts as sent: one whose
    answer is lost may still have been written. An attempt acknowledged with 0 becomes the partition's last ack.
    """
    while True:
        offsets = member.offsets(next(member.rounds), topics())
        for key, (offset, _) in offsets.items():
            member.unacked.setdefault(key, set()).add(offset)
        try:
            address = client.find_coordinator(member.group)
            response = client.call_at(address, "OffsetCommit", **commit_request(member, offsets))
        except Retry:
            response, address = None, None
        if response is not None and not commit_retriable(response):
            errors = {
                (t["name"], p["partition_index"]): p["error_code"] for t in response["topics"] for p in t["partitions"]
            }
            for key, error in errors.items():
                if error == 0:
                    member.acked[key] = offsets[key]
                    member.unacked[key] = set()
            return errors, address
        if time.monotonic() > deadline:
            raise AssertionError(f"OffsetCommit for {member.group} never reached a coordinator: {response}")
        time.sleep(0.05)


def fetch(client: GroupClient, member: Member, deadline: float) -> tuple[dict, tuple[str, int]]:
    response, address = client.call(member.group, "OffsetFetch", deadline, group_id=member.group, topics=None)
    assert response["error_code"] == 0, (member.group, response)
    fetched = {
        (t["name"], p["partition_index"]): (p["committed_offset"], p["metadata"])
        for t in response["topics"]
        for p in t["partitions"]
        if p["error_code"] == 0 and p["committed_offset"] >= 0
    }
    return fetched, address


def lost_commits(member: Member, fetched: dict) -> list[str]:
    """Partitions whose fetched offset is not the last acknowledged one (or an unacknowledged later attempt)."""
    problems = []
    for key, (offset, metadata) in sorted(member.acked.items()):
        got = fetched.get(key)
        if got == (offset, metadata):
            continue
        if got is not None and got[0] in member.unacked.get(key, set()):
            continue  # a later attempt whose answer was lost, yet written: allowed (never older than the ack)
        problems.append(f"{member.group} {key[0]}-{key[1]}: acknowledged {offset} ({metadata!r}), fetched {got}")
    extra = set(fetched) - set(member.acked)
    if extra:
        problems.append(f"{member.group}: offsets never acknowledged: { {k: fetched[k] for k in sorted(extra)} }")
    return problems


def join_and_sync(client: GroupClient, member: Member, node_of, deadline: float) -> None:
    """FindCoordinator, JoinGroup ("" → 79, again with the id), SyncGroup as leader; a coordinator move restarts."""
    join = {
        "group_id": member.group,
        "session_timeout_ms": SESSION_TIMEOUT_MS,
        "rebalance_timeout_ms": REBALANCE_TIMEOUT_MS,
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocols": [{"name": PROTOCOL, "metadata": subscription(sorted(TOPICS))}],
    }
    first, _ = client.call(member.group, "JoinGroup", deadline, member_id="", **join)
    assert first["error_code"] == 79 and first["member_id"], (member.group, first)
    joined, address = client.call(member.group, "JoinGroup", deadline, member_id=first["member_id"], **join)
    assert joined["error_code"] == 0, (member.group, joined)
    assert joined["leader"] == joined["member_id"] == first["member_id"], joined
    member.member_id, member.generation = joined["member_id"], joined["generation_id"]
    synced = client.call_at(
        address,
        "SyncGroup",
        group_id=member.group,
        **member.member_fields(),
        protocol_type="consumer",
        protocol_name=PROTOCOL,
        assignments=[{"member_id": member.member_id, "assignment": assignment(TOPICS_PARTITIONS)}],
    )
    assert synced["error_code"] == 0, (member.group, synced)
    member.node = node_of(address)


def heartbeat(client: GroupClient, member: Member, address) -> dict:
    return client.call_at(address, "Heartbeat", group_id=member.group, **member.member_fields())


class Committer(threading.Thread):
    """Commits new rounds for a few groups, one after another, through the failover; records every ack.

    Until :meth:`mark` (right after the kill) it commits the partitions of "orders", then those of "audit":
    later commits cannot hide an acknowledged "orders" commit that the failover lost.
    """

    def __init__(self, members: list[Member], bootstrap):
        super().__init__(daemon=True)
        self.members = members
        self.client = GroupClient(bootstrap, timeout=3.0)
        self.stop = threading.Event()
        self.acks_after: dict[str, int] = {m.group: 0 for m in members}  # acknowledged rounds since `mark`
        self.problems: list[str] = []
        self.topics = ("orders",)

    def mark(self) -> None:
        self.topics = ("audit",)
        self.acks_after = {m.group: 0 for m in self.members}

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                for member in self.members:
                    errors, _ = commit(self.client, member, time.monotonic() + FAILOVER_SECONDS, lambda: self.topics)
                    if set(errors.values()) != {0}:
                        self.problems.append(f"{member.group}: commit answered {errors}")
                        return
                    self.acks_after[member.group] += 1
                time.sleep(0.005)
        except Exception as error:  # reported by the test
            self.problems.append(f"committer failed: {type(error).__name__}: {error}")
        finally:
            self.client.close()


def start_cluster(zk, zk_connect, tmp_path) -> Cluster:
    for topic, count in TOPICS.items():
        admin.create_topic(zk, topic, count)
    return Cluster(zk_connect, tmp_path / "offsets-log", tmp_path, NODE_OVERRIDES)


def in_pool(function, items, workers: int = 10) -> list:
    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(function, items))


@pytest.mark.timeout(90)  # typically 5 s; every wait has its own deadline
def test_sigkill_of_a_node_moves_its_groups_without_losing_acknowledged_commits(zk, zk_connect, tmp_path):
    started = time.monotonic()
    with start_cluster(zk, zk_connect, tmp_path) as cluster:
        cluster.start([1, 2, 3])
        before = cluster.wait_balanced(zk)
        assert {node for node, _ in before.values()} == {1, 2, 3}

        # -- 50 groups, one member each: join, sync, commit three rounds, heartbeat ------------------------------
        members = [Member(f"cluster-group-{i:02d}", i) for i in range(GROUP_COUNT)]
        local = threading.local()

        def client() -> GroupClient:
            if not hasattr(local, "client"):
                local.client = GroupClient(cluster.addresses)
                cluster.on_close(local.client.close)
            return local.client

        def set_up(member: Member) -> None:
            deadline = time.monotonic() + FAILOVER_SECONDS
            join_and_sync(client(), member, cluster.node_at, deadline)
            for _ in range(SETUP_ROUNDS):
                errors, _ = commit(client(), member, deadline)
                assert set(errors.values()) == {0}, (member.group, errors)
            fetched, address = fetch(client(), member, deadline)
            assert not lost_commits(member, fetched)
            assert heartbeat(client(), member, address)["error_code"] == 0

        in_pool(set_up, members)
        for member in members:  # placement as the document says, and nobody moved during the setup
            assert member.node == before[group_partition(member.group, NUM_PARTITIONS)][0], member
        by_node = {n: [m for m in members if m.node == n] for n in (1, 2, 3)}
        assert all(by_node.values()), {n: len(ms) for n, ms in by_node.items()}
        victim = max(by_node, key=lambda n: len(by_node[n]))
        victim_partitions = {p for p, (node, _) in before.items() if node == victim}

        # -- commits keep going on some groups of every node while the victim dies ----------------------------
        # Losing a node changes every partition's preferred leader, so some groups of the survivors move too
        # (a graceful hand-over between live nodes): commit on those first.
        survivors = [n for n in (1, 2, 3) if n != victim]
        next_leader = preferred_layout(survivors, NUM_PARTITIONS)

        def moving_first(group_members: list[Member]) -> list[Member]:
            return sorted(group_members, key=lambda m: next_leader[group_partition(m.group, NUM_PARTITIONS)] == m.node)

        busy = by_node[victim][:6] + [m for n in survivors for m in moving_first(by_node[n])[:2]]
        committers = [Committer([member], cluster.addresses) for member in busy]  # one each: none waits for another
        for committer in committers:
            committer.start()

        def acknowledged_twice() -> bool:
            """Every busy group had two commits acknowledged (since the kill, once marked); fails fast on a problem."""
            problems = [p for c in committers for p in c.problems]
            assert problems == [], "\n".join(problems) + "\n" + cluster.logs(1500)
            return all(min(c.acks_after.values()) >= 2 for c in committers)

        try:
            eventually(acknowledged_twice, 10, "commits before the kill")
            cluster.nodes[victim].kill()
            killed_at = time.monotonic()
            for committer in committers:
                committer.mark()

            # -- ZooKeeper: the victim's partitions have new leaders, with higher epochs -------------------------
            def moved():
                leaders = read_leaders(zk, NUM_PARTITIONS)
                if len(leaders) < NUM_PARTITIONS or registered_nodes(zk) != survivors:
                    return None
                if any(leaders[p][0] == victim or leaders[p][1] <= before[p][1] for p in victim_partitions):
                    return None
                return leaders

            after = eventually(moved, FAILOVER_SECONDS, f"new leaders for node {victim}'s partitions")
            assert {node for node, _ in after.values()} == set(survivors)
            moved_at = time.monotonic()
            # Commits resume on every busy group (each acknowledged at least twice after the kill).
            eventually(acknowledged_twice, FAILOVER_SECONDS, "commits after the failover on every busy group")
        finally:
            for committer in committers:
                committer.stop.set()
            for committer in committers:
                committer.join(FAILOVER_SECONDS)
        assert not any(c.is_alive() for c in committers)
        assert [p for c in committers for p in c.problems] == []

        # -- every group: served again by a live node, same generation, nothing acknowledged lost ---------------
        def check(member: Member) -> tuple[list[str], int]:
            deadline = time.monotonic() + FAILOVER_SECONDS
            problems: list[str] = []
            while True:
                fetched, address = fetch(client(), member, deadline)
                # The fetch answered 0, so this coordinator has loaded the group: its heartbeat is not the
                # blind NONE of a loading partition (§5.1) but the reloaded group's answer (§9.6, §10.3).
                try:
                    beat = heartbeat(client(), member, address)
                    described = client().call_at(address, "DescribeGroups", groups=[member.group])["groups"][0]
                except Retry as error:
                    assert time.monotonic() < deadline, (member.group, str(error))
                    continue
                if beat["error_code"] in RETRIABLE or described["error_code"] in RETRIABLE:
                    assert time.monotonic() < deadline, (member.group, beat, described)
                    continue  # it moved again in between (a hand-over between survivors): look it up again
                break
            node = cluster.node_at(address)
            problems += lost_commits(member, fetched)
            if node == victim or node is None:
                problems.append(f"{member.group}: served by {address}, the killed node {victim}")
            if beat["error_code"] != 0:
                problems.append(f"{member.group}: heartbeat of generation {member.generation} answered {beat}")
            state = (described["group_state"], [m["member_id"] for m in described["members"]])
            if state != ("Stable", [member.member_id]):
                problems.append(f"{member.group}: described as {state} at node {node}")
            # A commit of the old generation after the failover is acknowledged and fetched back.
            errors, _ = commit(client(), member, deadline)
            if set(errors.values()) != {0}:
                problems.append(f"{member.group}: commit after failover answered {errors}")
            fetched, _ = fetch(client(), member, deadline)
            problems += [f"after failover: {p}" for p in lost_commits(member, fetched)]
            return problems, node

        results = in_pool(check, members)
        checked_at = time.monotonic()
        problems = [p for group_problems, _ in results for p in group_problems]
        assert problems == [], "\n".join(problems) + "\n" + cluster.logs(1500)
        served_by = {m.group: node for m, (_, node) in zip(members, results, strict=True)}
        assert all(served_by[m.group] in survivors for m in by_node[victim])
        # The survivors keep running, and the victim died of the signal.
        assert cluster.live_ids() == survivors
        assert cluster.nodes[victim].process.returncode == -signal.SIGKILL

    elapsed = time.monotonic() - started
    print(
        f"victim node {victim} coordinated {len(by_node[victim])} groups on partitions {sorted(victim_partitions)}; "
        f"leaders moved {moved_at - killed_at:.1f}s after the kill, all {GROUP_COUNT} groups checked "
        f"{checked_at - killed_at:.1f}s after it ({sum(served_by[m.group] != m.node for m in members)} "
        f"changed coordinator); {sum(len(m.acked) for m in members)} partitions acknowledged; "
        f"test took {elapsed:.1f}s"
    )


@pytest.mark.timeout(90)
def test_sigterm_moves_partitions_and_answers_a_parked_join(zk, zk_connect, tmp_path):
    with start_cluster(zk, zk_connect, tmp_path) as cluster:
        cluster.start([1, 2, 3])
        before = cluster.wait_balanced(zk)
        leaving = 2
        group = next(
            f"term-group-{i}"
            for i in itertools.count()
            if before[group_partition(f"term-group-{i}", NUM_PARTITIONS)][0] == leaving
        )
        deadline = time.monotonic() + FAILOVER_SECONDS
        client = GroupClient(cluster.addresses)
        cluster.on_close(client.close)
        member = Member(group, 7)
        join_and_sync(client, member, cluster.node_at, deadline)
        assert member.node == leaving
        errors, address = commit(client, member, deadline)
        assert set(errors.values()) == {0}

        # A second member's JoinGroup parks: the group waits for the first member to rejoin.
        join = {
            "group_id": group,
            "session_timeout_ms": SESSION_TIMEOUT_MS,
            "rebalance_timeout_ms": REBALANCE_TIMEOUT_MS,
            "group_instance_id": None,
            "protocol_type": "consumer",
            "protocols": [{"name": PROTOCOL, "metadata": subscription(sorted(TOPICS))}],
        }
        with WireClient(*address) as parked:
            second = parked.call("JoinGroup", member_id="", **join)
            assert second["error_code"] == 79
            correlation_id = parked.send("JoinGroup", member_id=second["member_id"], **join)
            eventually(  # the other connection's DescribeGroups may be read first: poll
                lambda: (
                    client.call_at(address, "DescribeGroups", groups=[group])["groups"][0]["group_state"]
                    == "PreparingRebalance"
                ),
                5,
                "the second member's JoinGroup to start a rebalance",
            )
            try:
                early = parked.receive(timeout=0.3)
            except TimeoutError:
                early = None
            assert early is None, f"the JoinGroup was not parked: {early}"

            cluster.nodes[leaving].signal(signal.SIGTERM)
            signalled = time.monotonic()
            answer = parked.receive(timeout=10)
            answered = time.monotonic() - signalled
        assert answer["correlation_id"] == correlation_id
        assert answer["error_code"] == 16, answer  # NOT_COORDINATOR (§9.7), not a hang or a dropped connection
        assert cluster.nodes[leaving].process.wait(timeout=20) == 0, cluster.nodes[leaving].log_tail()

        survivors = [1, 3]
        moved_partitions = {p for p, (node, _) in before.items() if node == leaving}

        def moved():
            leaders = read_leaders(zk, NUM_PARTITIONS)
            if registered_nodes(zk) != survivors or len(leaders) < NUM_PARTITIONS:
                return None
            if any(leaders[p][0] == leaving or leaders[p][1] <= before[p][1] for p in moved_partitions):
                return None
            return leaders

        eventually(moved, FAILOVER_SECONDS, f"new leaders for node {leaving}'s partitions")
        print(
            f"parked JoinGroup answered {answered:.2f}s after SIGTERM; node exited, partitions "
            f"{sorted(moved_partitions)} moved {time.monotonic() - signalled:.1f}s after it"
        )

        # The group is back on a survivor, Stable at the persisted generation: the parked rebalance was never
        # persisted, so it is forgotten (§9.6 step 5) and the first member's heartbeat answers NONE.
        fetched, address = fetch(client, member, time.monotonic() + FAILOVER_SECONDS)
        assert cluster.node_at(address) in survivors
        assert lost_commits(member, fetched) == []
        assert heartbeat(client, member, address)["error_code"] == 0
        described = client.call_at(address, "DescribeGroups", groups=[group])["groups"][0]
        assert (described["group_state"], [m["member_id"] for m in described["members"]]) == (
            "Stable",
            [member.member_id],
        )
