"""``zkcoord.admin.AdminClient`` against a real coordinator node process and a real ZooKeeper.

Coordinator groups are built with raw wire requests (tests/wire_client.py): static members with fixed
``group.instance.id`` values join one generation and the leader hands out a fixed assignment. Legacy groups
are the 0.8.2 znodes under ``/consumers/<g>`` written directly (zkcoord/zk/layout.py encoders). The helpers
here are shared with tests/integration/test_admin_cli.py.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest
from cluster_support import Cluster, assignment, subscription
from kazoo.client import KazooClient
from wire_client import WireClient

from zkcoord.admin import (
    COORDINATOR,
    LEGACY,
    AdminClient,
    CoordinatorNotAvailableError,
    GroupAdminError,
    GroupDescription,
    GroupIdNotFoundError,
    GroupNotEmptyError,
    GroupOffsetsDescription,
    GroupSubscribedToTopicError,
    InvalidResetError,
    MemberDescription,
    OffsetAndMetadata,
    ResetSpec,
    UnknownMemberIdError,
    render,
)
from zkcoord.admin.model import clamp_offsets, offset_rows, parse_reset_csv
from zkcoord.model import TopicPartition
from zkcoord.sources import SyntheticSource
from zkcoord.testing.zookeeper import fresh_chroot
from zkcoord.zk import admin, layout

NODE_OVERRIDES = {
    "offsets.topic.num.partitions": 2,
    # Members sent back to back join one generation: the first join waits this long for the others.
    "group.initial.rebalance.delay.ms": 300,
    "group.min.session.timeout.ms": 10,
    "zookeeper.session.timeout.ms": 4000,
    "coordinator.claim.grace.ms": 200,
}
TOPICS = {"orders": 3, "audit": 2, "clicks": 1}
SESSION_TIMEOUT_MS = 120_000  # no member expires while a test module runs
REBALANCE_TIMEOUT_MS = 60_000
LOG_END = 100  # SyntheticSource(rate_per_partition=0, initial_records=LOG_END): every log ends here


def tp(topic: str, partition: int) -> TopicPartition:
    return TopicPartition(topic, partition)


# ---- a node on a fresh chroot -------------------------------------------------------------------------------


@dataclass
class AdminCluster:
    connect: str  # ZooKeeper connect string with this cluster's chroot
    zk: KazooClient
    address: tuple[str, int]

    @property
    def bootstrap(self) -> str:
        return f"{self.address[0]}:{self.address[1]}"

    def client(self, source=None, **options) -> AdminClient:
        return AdminClient(bootstrap_servers=self.bootstrap, zookeeper_connect=self.connect, source=source, **options)


@contextlib.contextmanager
def running_cluster(zk_server: str, workdir: Path) -> Iterator[AdminCluster]:
    """One coordinator node on a fresh chroot with TOPICS in ``/brokers/topics``."""
    connect = fresh_chroot(zk_server, prefix="zkcoord-admin")
    zk = KazooClient(hosts=connect)
    zk.start(timeout=15)
    for topic, partitions in TOPICS.items():
        admin.create_topic(zk, topic, partitions)
    cluster = Cluster(connect, workdir / "log", workdir, NODE_OVERRIDES)
    try:
        cluster.start([1])
        cluster.wait_balanced(zk)
        yield AdminCluster(connect, zk, cluster.nodes[1].address)
    finally:
        cluster.close()
        zk.stop()
        zk.close()


@pytest.fixture(scope="module")
def node(zk_server, tmp_path_factory):
    with running_cluster(zk_server, tmp_path_factory.mktemp("admin")) as cluster:
        yield cluster


# ---- coordinator groups over the wire -----------------------------------------------------------------------


def form_group(
    address: tuple[str, int],
    group: str,
    members: Mapping[str, tuple[str, ...]],
    assignments: Mapping[str, Mapping[str, list[int]]],
) -> dict[str, str]:
    """Static members (instance id → topics) join one generation; the leader hands out ``assignments``
    (instance id → {topic: partitions}). Returns instance id → member id."""
    clients = {instance: WireClient(*address, client_id=f"{instance}-client", timeout=15) for instance in members}
    try:
        for instance, client in clients.items():
            client.send(
                "JoinGroup",
                group_id=group,
                session_timeout_ms=SESSION_TIMEOUT_MS,
                rebalance_timeout_ms=REBALANCE_TIMEOUT_MS,
                member_id="",
                group_instance_id=instance,
                protocol_type="consumer",
                protocols=[{"name": "range", "metadata": subscription(list(members[instance]))}],
            )
        joined = {instance: client.receive(15) for instance, client in clients.items()}
        assert all(r["error_code"] == 0 for r in joined.values()), joined
        assert len({r["generation_id"] for r in joined.values()}) == 1, joined
        member_ids = {instance: r["member_id"] for instance, r in joined.items()}
        generation = next(iter(joined.values()))["generation_id"]
        plan = [
            {"member_id": member_ids[instance], "assignment": assignment(dict(assignments.get(instance, {})))}
            for instance in members
        ]
        for instance, client in clients.items():
            leader = joined[instance]["leader"] == member_ids[instance]
            client.send(
                "SyncGroup",
                group_id=group,
                generation_id=generation,
                member_id=member_ids[instance],
                group_instance_id=instance,
                protocol_type="consumer",
                protocol_name="range",
                assignments=plan if leader else [],
            )
        synced = {instance: client.receive(15) for instance, client in clients.items()}
        assert all(r["error_code"] == 0 for r in synced.values()), synced
        return member_ids
    finally:
        for client in clients.values():
            client.close()


def commit(
    address: tuple[str, int],
    group: str,
    offsets: Mapping[tuple[str, int], int],
    member: tuple[str, str, int] | None = None,
) -> None:
    """OffsetCommit: a simple commit (generation -1), or as ``member`` (member id, instance id, generation)."""
    member_id, instance, generation = member or ("", None, -1)
    topics: dict[str, list[dict]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        topics.setdefault(topic, []).append(
            {"partition_index": partition, "committed_offset": offset, "committed_metadata": ""}
        )
    with WireClient(*address) as client:
        response = client.call(
            "OffsetCommit",
            group_id=group,
            generation_id=generation,
            member_id=member_id,
            group_instance_id=instance,
            retention_time_ms=-1,
            topics=[{"name": name, "partitions": partitions} for name, partitions in topics.items()],
        )
    codes = {p["error_code"] for t in response["topics"] for p in t["partitions"]}
    assert codes == {0}, response


def stable_group_with_offsets(address: tuple[str, int], group: str) -> dict[str, str]:
    """Committed orders 0..2 and audit 0 (nobody's), then members a (orders 0,1), b (orders 2), c (nothing)."""
    commit(address, group, {("orders", 0): 10, ("orders", 1): 20, ("orders", 2): 30, ("audit", 0): 5})
    return form_group(
        address,
        group,
        {"a": ("orders",), "b": ("orders",), "c": ("orders",)},
        {"a": {"orders": [0, 1]}, "b": {"orders": [2]}},
    )


# ---- legacy groups in ZooKeeper -----------------------------------------------------------------------------


def legacy_group(
    zk: KazooClient,
    group: str,
    members: Mapping[str, Mapping[str, int]] = (),
    owners: Mapping[tuple[str, int], str] = (),
    offsets: Mapping[tuple[str, int], int] = (),
) -> None:
    """``/consumers/<group>`` as 0.8.2 leaves it: ids (consumer id → {topic: streams}), owners (partition →
    thread id) and offsets."""
    zk.ensure_path(layout.group_path(group))
    for consumer_id, topics in dict(members).items():
        registration = layout.ConsumerRegistration(dict(topics), timestamp_ms=1)
        zk.create(
            layout.consumer_path(group, consumer_id), layout.encode_consumer_registration(registration), makepath=True
        )
    for (topic, partition), thread in dict(owners).items():
        zk.create(layout.owner_path(group, topic, partition), layout.encode_owner(thread), makepath=True)
    for (topic, partition), offset in dict(offsets).items():
        zk.create(layout.offset_path(group, topic, partition), layout.encode_offset(offset), makepath=True)


def active_legacy_group(zk: KazooClient, group: str) -> None:
    """Consumers c1 (orders 0,1) and c2 (orders 2) subscribed to orders; offsets on orders and audit."""
    legacy_group(
        zk,
        group,
        members={f"{group}_c1": {"orders": 1}, f"{group}_c2": {"orders": 1}},
        owners={("orders", 0): f"{group}_c1-0", ("orders", 1): f"{group}_c1-0", ("orders", 2): f"{group}_c2-0"},
        offsets={("orders", 0): 7, ("orders", 1): 8, ("audit", 1): 3},
    )


def zk_offsets(zk: KazooClient, group: str) -> dict[tuple[str, int], int]:
    return {(topic, partition): offset for topic, partition, offset in admin.read_offsets(zk, group)}


# ---- tests ----------------------------------------------------------------------------------------------------


def test_list_merges_every_node_and_legacy_groups(node):
    form_group(node.address, "list-stable", {"x": ("orders",)}, {"x": {"orders": [0]}})
    commit(node.address, "list-both", {("orders", 0): 1})
    legacy_group(node.zk, "list-both", offsets={("orders", 0): 2})
    legacy_group(node.zk, "list-legacy", members={"list-legacy_c1": {"orders": 1}})
    with node.client() as client:
        listings = {(g.group_id, g.kind): g for g in client.list_consumer_groups()}
        assert listings[("list-stable", COORDINATOR)].state == "Stable"
        assert listings[("list-both", COORDINATOR)].state == "Empty"
        assert listings[("list-both", LEGACY)].state == "Empty"
        assert listings[("list-legacy", LEGACY)].state == "Stable"
        ordered = [key for key in listings if key[0].startswith("list-")]
        assert ordered == sorted(ordered, key=lambda k: (k[0], k[1] != COORDINATOR))
        stable = {(g.group_id, g.kind) for g in client.list_consumer_groups(["Stable"])}
        assert {("list-stable", COORDINATOR), ("list-legacy", LEGACY)} <= stable
        assert not {key for key in stable if key[0] == "list-both"}
    # Only ZooKeeper: the nodes are discovered under the root; only bootstrap: no legacy groups.
    with AdminClient(zookeeper_connect=node.connect) as client:
        assert {("list-stable", COORDINATOR), ("list-both", LEGACY)} <= {
            (g.group_id, g.kind) for g in client.list_consumer_groups()
        }
    with AdminClient(bootstrap_servers=node.bootstrap) as client:
        assert all(g.kind == COORDINATOR for g in client.list_consumer_groups())


def test_describe_coordinator_group_members_offsets_and_lag(node):
    member_ids = stable_group_with_offsets(node.address, "desc")
    with node.client(source=SyntheticSource(rate_per_partition=0, initial_records=LOG_END)) as client:
        (description,) = client.describe_consumer_groups(["desc"])
        assert (description.kind, description.state, description.protocol) == (COORDINATOR, "Stable", "range")
        assert description.coordinator.port == node.address[1]
        members = {m.group_instance_id: m for m in description.members}
        assert members["a"].member_id == member_ids["a"] and members["a"].member_id.startswith("a-")
        assert members["a"].assignment == (tp("orders", 0), tp("orders", 1))
        assert (members["b"].client_id, members["b"].host) == ("b-client", "/127.0.0.1")
        assert members["c"].assignment == ()
        (offsets,) = client.describe_consumer_group_offsets(["desc"])
        rows = [(r.topic, r.partition, r.current_offset, r.log_end_offset, r.lag, r.consumer_id) for r in offsets.rows]
        assert rows == [
            ("orders", 0, 10, LOG_END, 90, member_ids["a"]),
            ("orders", 1, 20, LOG_END, 80, member_ids["a"]),
            ("orders", 2, 30, LOG_END, 70, member_ids["b"]),
            ("audit", 0, 5, LOG_END, 95, None),
        ]
        (committed,) = client.list_consumer_group_offsets("desc")
        assert committed.kind == COORDINATOR and committed.offsets[tp("audit", 0)] == OffsetAndMetadata(5, "")
    with node.client() as client:  # no source: log ends and lag unknown, as Kafka's "-"
        (offsets,) = client.describe_consumer_group_offsets(["desc"])
        assert {(r.log_end_offset, r.lag) for r in offsets.rows} == {(None, None)}


def test_describe_legacy_group_from_zookeeper(node):
    active_legacy_group(node.zk, "ldesc")
    with node.client(source=SyntheticSource(rate_per_partition=0, initial_records=LOG_END)) as client:
        (description,) = client.describe_consumer_groups(["ldesc"])
        assert (description.kind, description.state, description.coordinator) == (LEGACY, "Stable", None)
        assert [(m.member_id, m.assignment) for m in description.members] == [
            ("ldesc_c1", (tp("orders", 0), tp("orders", 1))),
            ("ldesc_c2", (tp("orders", 2),)),
        ]
        (offsets,) = client.describe_consumer_group_offsets(["ldesc"])
        assert [(r.topic, r.partition, r.current_offset, r.lag, r.consumer_id) for r in offsets.rows] == [
            ("orders", 0, 7, 93, "ldesc_c1"),
            ("orders", 1, 8, 92, "ldesc_c1"),
            ("orders", 2, None, None, "ldesc_c2"),
            ("audit", 1, 3, 97, None),
        ]


def test_a_group_in_both_places_is_described_twice(node):
    commit(node.address, "twice", {("orders", 0): 4})
    legacy_group(node.zk, "twice", offsets={("orders", 0): 9})
    with node.client() as client:
        assert [(d.kind, d.state) for d in client.describe_consumer_groups(["twice"])] == [
            (COORDINATOR, "Empty"),
            (LEGACY, "Empty"),
        ]
        offsets = client.list_consumer_group_offsets("twice")
        assert [(o.kind, o.offsets[tp("orders", 0)].offset) for o in offsets] == [(COORDINATOR, 4), (LEGACY, 9)]


def test_unknown_group_is_reported_as_kafka_does(node):
    with node.client() as client:
        with pytest.raises(GroupIdNotFoundError, match=r"^Consumer group 'nope' does not exist\.$"):
            client.describe_consumer_groups(["nope"])
        with pytest.raises(GroupIdNotFoundError):
            client.list_consumer_group_offsets("nope")
        (result,) = client.delete_consumer_groups(["nope"])
        assert isinstance(result.error, GroupIdNotFoundError) and result.kind == COORDINATOR


def test_reset_is_refused_while_the_group_is_active(node):
    stable_group_with_offsets(node.address, "busy")
    active_legacy_group(node.zk, "lbusy")
    with node.client() as client:
        message = r"Assignments can only be reset if the group 'busy' is inactive, but the current state is Stable\."
        with pytest.raises(GroupNotEmptyError, match=message):
            client.reset_offsets("busy", ResetSpec.to_offset(0), None, execute=True)
        with pytest.raises(
            GroupNotEmptyError, match="'lbusy' \\(legacy\\) is inactive, but the current state is Stable"
        ):
            client.alter_consumer_group_offsets("lbusy", {tp("orders", 0): 0})
        assert client.list_consumer_group_offsets("busy")[0].offsets[tp("orders", 0)].offset == 10
    assert zk_offsets(node.zk, "lbusy")[("orders", 0)] == 7


def test_alter_offsets_creates_a_new_group_and_writes_legacy_znodes(node):
    legacy_group(node.zk, "lalter", offsets={("orders", 0): 1})
    with node.client() as client:
        assert client.alter_consumer_group_offsets("fresh", {tp("orders", 1): 12}) == [COORDINATOR]
        assert client.describe_consumer_groups(["fresh"])[0].state == "Empty"
        assert client.list_consumer_group_offsets("fresh")[0].offsets == {tp("orders", 1): OffsetAndMetadata(12)}
        assert client.alter_consumer_group_offsets("lalter", {("orders", 2): 6}) == [LEGACY]
    assert zk_offsets(node.zk, "lalter") == {("orders", 0): 1, ("orders", 2): 6}


def test_reset_scenarios_plan_clamp_and_execute(node):
    commit(node.address, "reset", {("orders", 0): 10, ("orders", 1): 95, ("audit", 0): 3})
    source = SyntheticSource(rate_per_partition=0, initial_records=LOG_END)
    orders = [tp("orders", 0), tp("orders", 1)]
    with node.client(source=source) as client:

        def plan(spec, partitions=orders, execute=False):
            (result,) = client.reset_offsets("reset", spec, partitions, execute=execute)
            assert result.kind == COORDINATOR and result.executed == execute
            return dict(result.offsets)

        assert plan(ResetSpec.to_earliest()) == {tp("orders", 0): 0, tp("orders", 1): 0}
        assert plan(ResetSpec.to_latest(), ["orders"]) == dict.fromkeys(
            [tp("orders", 0), tp("orders", 1), tp("orders", 2)], LOG_END
        )
        assert plan(ResetSpec.to_offset(250)) == dict.fromkeys(orders, LOG_END)  # clamped to the log end
        assert plan(ResetSpec.shift_by(10)) == {tp("orders", 0): 20, tp("orders", 1): LOG_END}
        assert plan(ResetSpec.shift_by(-15)) == {tp("orders", 0): 0, tp("orders", 1): 80}
        assert plan(ResetSpec.from_plan({tp("audit", 0): 1, tp("orders", 0): 500}), None) == {
            tp("audit", 0): 1,
            tp("orders", 0): LOG_END,
        }
        assert set(plan(ResetSpec.to_offset(1), None)) == {tp("orders", 0), tp("orders", 1), tp("audit", 0)}
        with pytest.raises(InvalidResetError, match="no current committed offset"):
            plan(ResetSpec.shift_by(1), [tp("orders", 2)])
        # Dry runs changed nothing; an execute commits.
        assert client.list_consumer_group_offsets("reset")[0].offsets[tp("orders", 1)].offset == 95
        plan(ResetSpec.shift_by(-5), execute=True)
        committed = client.list_consumer_group_offsets("reset")[0].offsets
        assert {p: o.offset for p, o in committed.items()} == {
            tp("audit", 0): 3,
            tp("orders", 0): 5,
            tp("orders", 1): 90,
        }
    # No source: --to-latest cannot be planned.
    with node.client() as client, pytest.raises(InvalidResetError, match="ending offset"):
        client.reset_offsets("reset", ResetSpec.to_latest(), orders)


def test_reset_legacy_offsets_writes_zookeeper(node):
    legacy_group(node.zk, "lreset", offsets={("orders", 0): 50, ("orders", 1): 60})
    with node.client(source=SyntheticSource(rate_per_partition=0, initial_records=LOG_END)) as client:
        (result,) = client.reset_offsets("lreset", ResetSpec.shift_by(45), None, execute=True)
        assert (result.kind, dict(result.offsets)) == (LEGACY, {tp("orders", 0): 95, tp("orders", 1): LOG_END})
    assert zk_offsets(node.zk, "lreset") == {("orders", 0): 95, ("orders", 1): LOG_END}


def test_delete_groups_only_without_live_members(node):
    stable_group_with_offsets(node.address, "del-busy")
    commit(node.address, "del-empty", {("orders", 0): 1})
    legacy_group(node.zk, "del-legacy", offsets={("orders", 0): 1})
    active_legacy_group(node.zk, "del-lbusy")
    with node.client() as client:
        results = client.delete_consumer_groups(["del-empty", "del-busy", "del-legacy", "del-lbusy"])
        outcome = {(r.group_id, r.kind): type(r.error).__name__ if r.error else None for r in results}
        assert outcome == {
            ("del-empty", COORDINATOR): None,
            ("del-busy", COORDINATOR): "GroupNotEmptyError",
            ("del-legacy", LEGACY): None,
            ("del-lbusy", LEGACY): "GroupNotEmptyError",
        }
        with pytest.raises(GroupIdNotFoundError):
            client.describe_consumer_groups(["del-empty"])
        assert client.describe_consumer_groups(["del-busy"])[0].state == "Stable"
    assert node.zk.exists(layout.group_path("del-legacy")) is None
    assert node.zk.exists(layout.group_path("del-lbusy")) is not None


def test_remove_static_members_then_the_group_rebalances(node):
    member_ids = form_group(
        node.address,
        "rm",
        {"a": ("orders",), "b": ("orders",), "c": ("orders",)},
        {"a": {"orders": [0]}, "b": {"orders": [1]}, "c": {"orders": [2]}},
    )
    with node.client() as client:
        removals = client.remove_members("rm", ["a", "b", "zz"])
        assert [(r.group_instance_id, type(r.error).__name__ if r.error else None) for r in removals] == [
            ("a", None),
            ("b", None),
            ("zz", "UnknownMemberIdError"),
        ]
        assert isinstance(removals[2].error, UnknownMemberIdError)
        (description,) = client.describe_consumer_groups(["rm"])
        assert description.state == "PreparingRebalance"
        assert [m.group_instance_id for m in description.members] == ["c"]
        # c rejoins and is alone in the next generation.
        with WireClient(*node.address) as wire:
            joined = wire.call(
                "JoinGroup",
                group_id="rm",
                session_timeout_ms=SESSION_TIMEOUT_MS,
                rebalance_timeout_ms=REBALANCE_TIMEOUT_MS,
                member_id=member_ids["c"],
                group_instance_id="c",
                protocol_type="consumer",
                protocols=[{"name": "range", "metadata": subscription(["orders"])}],
                receive_timeout=15,
            )
            assert joined["error_code"] == 0 and [m["group_instance_id"] for m in joined["members"]] == ["c"]
        assert client.describe_consumer_groups(["rm"])[0].state == "CompletingRebalance"
        legacy_group(node.zk, "rm-legacy", members={"rm-legacy_c1": {"orders": 1}})
        with pytest.raises(GroupAdminError, match="legacy"):
            client.remove_members("rm-legacy", ["x"])


def test_delete_offsets_of_legacy_groups(node):
    active_legacy_group(node.zk, "ldeloff")
    with node.client() as client:
        (deletion,) = client.delete_consumer_group_offsets("ldeloff", ["audit", tp("orders", 0)])
        assert deletion.kind == LEGACY
        assert {p: type(e).__name__ if e else None for p, e in deletion.partitions.items()} == {
            tp("audit", 0): None,
            tp("audit", 1): None,
            tp("orders", 0): "GroupSubscribedToTopicError",
        }
        assert isinstance(deletion.partitions[tp("orders", 0)], GroupSubscribedToTopicError)
    assert zk_offsets(node.zk, "ldeloff") == {("orders", 0): 7, ("orders", 1): 8}


def test_delete_offsets_of_coordinator_groups(node):
    """OffsetDelete (KIP-496): 86 for a subscribed topic, 68/69 at the top level."""
    member_ids = stable_group_with_offsets(node.address, "deloff")
    commit(node.address, "deloff-empty", {("orders", 0): 1, ("audit", 0): 2})
    with node.client() as client:
        (deletion,) = client.delete_consumer_group_offsets("deloff", ["audit", tp("orders", 1)])
        assert {p: type(e).__name__ if e else None for p, e in deletion.partitions.items()} == {
            tp("audit", 0): None,
            tp("audit", 1): None,
            tp("orders", 1): "GroupSubscribedToTopicError",
        }
        committed = client.list_consumer_group_offsets("deloff")[0].offsets
        assert tp("audit", 0) not in committed and tp("orders", 1) in committed
        (deletion,) = client.delete_consumer_group_offsets("deloff-empty", [tp("orders", 0)])
        assert deletion.partitions == {tp("orders", 0): None}
        assert set(client.list_consumer_group_offsets("deloff-empty")[0].offsets) == {tp("audit", 0)}
        with pytest.raises(GroupIdNotFoundError):
            client.delete_consumer_group_offsets("deloff-none", ["orders"])
    assert member_ids


def test_no_coordinator_in_time_is_an_error():
    client = AdminClient(bootstrap_servers="127.0.0.1:1", request_timeout_ms=300)
    with client, pytest.raises(CoordinatorNotAvailableError, match="'g'"):
        client.describe_consumer_groups(["g"])


# ---- pure rules (no cluster) ------------------------------------------------------------------------------------


def test_reset_plan_csv_and_range_check():
    assert parse_reset_csv("t,0,5\n\nt,1,6\n") == {tp("t", 0): 5, tp("t", 1): 6}
    assert parse_reset_csv("g,t,0,5\nh,t,0,9\n", "g") == {tp("t", 0): 5}  # Kafka's multi-group form
    with pytest.raises(InvalidResetError, match="line 2"):
        parse_reset_csv("t,0,5\nt,x,5\n")
    assert clamp_offsets({tp("t", 0): -3, tp("t", 1): 7}, {}, {tp("t", 1): 5}) == {tp("t", 0): 0, tp("t", 1): 5}
    assert clamp_offsets({tp("t", 0): 2}, {tp("t", 0): 4}, {}) == {tp("t", 0): 4}


def test_columns_widen_to_their_longest_value():
    member = MemberDescription("c" * 30, None, None, None, (tp("a-rather-long-topic-name", 0),))
    description = GroupDescription("g" * 20, LEGACY, "Stable", "consumer", "", (member,), None)
    blank, header, row = render.offsets_lines(GroupOffsetsDescription(description, offset_rows(description, {}, {})))
    assert blank == "" and row.startswith("g" * 20 + " (legacy) a-rather-long-topic-name 0 ")
    for column in ("TOPIC", "PARTITION", "CONSUMER-ID", "HOST"):
        start = header.index(column)
        assert row[start - 1] == " " and row[start] != " ", column
