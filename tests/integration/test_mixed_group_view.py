"""The operator's view of a mixed group on real ZooKeeper and node processes: ``zkcoord groups describe`` shows one
group whose rows say each member's kind, with the partitions its owner znodes (legacy) or the coordinator's
assignment (coordinator) give it; ``zkcoord migrate status`` counts the members of each kind (docs/migration.md
"Mixed groups: member by member")."""

import json

import test_mixed_groups
from cluster_support import eventually
from test_migration_walk import LegacyGroup, migrate_ok
from test_mixed_groups import GROUP, WAIT_S, CoordinatorMember, bridge_members, consistent

from zkcoord.assign.legacy import consumer_of_thread
from zkcoord.cli import main
from zkcoord.model import TopicPartition
from zkcoord.sources import SyntheticSource
from zkcoord.testing.legacy import converged

cluster = test_mixed_groups.cluster  # one node, topic t with 8 partitions


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def describe(capsys, zk_connect: str, source, *view: str, exit_code: int = 0) -> tuple[list[list[str]], str]:
    """``groups describe --group GROUP [view]``: the table's rows split into cells (header first), and stderr."""
    code, out, err = run(
        capsys, "groups", "--zookeeper", zk_connect, "--source", source.spec, "describe", "--group", GROUP, *view
    )
    assert code == exit_code, err
    lines = [line for line in out.splitlines() if line]
    assert lines[0] == (
        f"Consumer group '{GROUP}' is a mixed group: phase DUAL_WRITE; its readers take the larger of ZooKeeper's "
        "and the log's offsets."
    )
    return [line.split() for line in lines[1:]], err


def partitions_by_member(rows: list[list[str]]) -> dict[tuple[str, str], set[TopicPartition]]:
    """(kind, consumer id) → partitions, from the offsets table."""
    header, *rows = rows
    at = {name: header.index(name) for name in ("TOPIC", "PARTITION", "KIND", "CONSUMER-ID")}
    held: dict[tuple[str, str], set[TopicPartition]] = {}
    for row in rows:
        key = (row[at["KIND"]], row[at["CONSUMER-ID"]])
        held.setdefault(key, set()).add(TopicPartition(row[at["TOPIC"]], int(row[at["PARTITION"]])))
    return held


def expected_view(zk, member: CoordinatorMember) -> dict[tuple[str, str], set[TopicPartition]] | None:
    """Legacy members with what their owner znodes give them; the coordinator member with its assignment (None
    while the 0.8.2 group is rebalancing)."""
    snapshot = converged(zk, GROUP)
    if snapshot is None:
        return None
    bridged = bridge_members(zk)
    expected: dict[tuple[str, str], set[TopicPartition]] = {}
    for tp, thread in snapshot.owners.items():
        consumer_id = consumer_of_thread(thread)
        if consumer_id not in bridged:
            expected.setdefault(("legacy", consumer_id), set()).add(tp)
    expected[("coordinator", member.consumer.member_id)] = member.assignment()
    return expected


def migrate_status(capsys, zk_connect: str) -> dict:
    code, out, err = run(capsys, "migrate", "status", "--group", GROUP, "--zookeeper", zk_connect, "--json")
    assert code == 0, err
    [status] = json.loads(out)
    return status


def test_describe_and_status_show_each_member_with_its_kind(cluster, zk, zk_connect, capsys):
    source = SyntheticSource(rate_per_partition=50, initial_records=100)
    legacy = LegacyGroup(zk_connect, source)
    member = None
    try:
        legacy.start()
        eventually(lambda: converged(zk, GROUP) is not None, WAIT_S, "legacy group settled")
        migrate_ok(zk_connect, "up", "--group", GROUP, "--to", "0001_dual_commit")
        member = CoordinatorMember(zk_connect, source)
        eventually(lambda: consistent(zk, [member], 2), WAIT_S, "the coordinator member in the group")

        def settled_view():
            rows, err = describe(capsys, zk_connect, source)
            return rows if "Warning" not in err and partitions_by_member(rows) == expected_view(zk, member) else None

        rows = eventually(settled_view, WAIT_S, "describe showing what owner znodes and the assignment say")
        first_view = partitions_by_member(rows)
        header = rows[0]
        assert header[header.index("LAG") + 1 : header.index("CONSUMER-ID") + 1] == ["KIND", "CONSUMER-ID"]
        kinds = {row[header.index("KIND")] for row in rows[1:]}
        assert kinds == {"legacy", "coordinator"}
        lags = [row[header.index("LAG")] for row in rows[1:]]
        assert len(lags) == 8 and all(int(lag) >= 0 for lag in lags if lag != "-")

        members, _ = describe(capsys, zk_connect, source, "--members")
        assert [row[:2] for row in members] == [["GROUP", "KIND"], [GROUP, "legacy"], [GROUP, "coordinator"]]
        code, out, _ = run(capsys, "groups", "--zookeeper", zk_connect, "describe", "--group", GROUP, "--json")
        [document] = json.loads(out)
        assert document["kind"] == "mixed" and document["owner_mismatches"] == []
        assert {row["kind"] for row in document["offsets"]} == {"legacy", "coordinator"}

        status = migrate_status(capsys, zk_connect)
        assert (status["phase"], status["legacy_jvm_members"], status["legacy_zkcoord_members"]) == ("DUAL_WRITE", 0, 1)
        assert status["coordinator_members"] == 1
        code, out, _ = run(capsys, "migrate", "status", "--group", GROUP, "--zookeeper", zk_connect)
        assert out.splitlines()[1].split()[-3:] == ["0", "1", "1"]

        # Every node lost: the bridge's registration and owner znodes stay, and the view says who holds what.
        held = member.assignment()
        cluster.nodes[1].stop()
        rows, err = describe(capsys, zk_connect, source, exit_code=2)  # a connection error, said on stderr
        assert partitions_by_member(rows)[("coordinator", member.consumer.member_id)] == held
        assert "no coordinator node is registered under /zkcoord" in err and "a lower bound" in err
        assert (
            f"Warning: coordinator member {member.consumer.member_id} of consumer group '{GROUP}' has no coordinator"
            in err
        )
        status = migrate_status(capsys, zk_connect)
        assert (status["legacy_zkcoord_members"], status["coordinator_members"]) == (1, None)

        # A node comes back, takes the bridge over, and the view settles on the same member holding the same.
        cluster.start([1])
        rows = eventually(settled_view, WAIT_S, "describe settled after a node took the bridge over")
        assert partitions_by_member(rows) == first_view
    finally:
        if not cluster.live_ids():  # members leave through a node: without one their commits wait out timeouts
            cluster.start([1])
        if member is not None:
            member.close()
        legacy.close()
