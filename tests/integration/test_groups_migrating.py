"""``zkcoord groups`` never misleads about a migrating group or an unreachable coordinator: a migrating group is one
row and one table with its phase and the store its readers use, members of both kinds show their kind, and a
coordinator that does not answer is named (exit 2) without presenting ZooKeeper's frozen offsets as the truth."""

import json
import socket

import pytest
from kazoo.client import KazooClient
from test_admin import commit, form_group, legacy_group, running_cluster

from zkcoord import cli
from zkcoord.migration import store
from zkcoord.migration.phases import MigrationState, Phase
from zkcoord.testing.zookeeper import fresh_chroot
from zkcoord.zk import admin, layout

ORDERS = {("orders", 0): 7, ("orders", 1): 8}


@pytest.fixture(scope="module")
def node(zk_server, tmp_path_factory):
    with running_cluster(zk_server, tmp_path_factory.mktemp("groups-migrating")) as cluster:
        yield cluster


@pytest.fixture(autouse=True)
def no_default_zookeeper(monkeypatch):
    monkeypatch.delenv("ZKCOORD_ZK_CONNECT", raising=False)


def zkcoord(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def rows_of(out: str, group: str) -> list[list[str]]:
    return [line.split() for line in out.splitlines() if line.split()[:1] == [group]]


def closed_port() -> int:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        return unused.getsockname()[1]


def put_state(zk, group: str, phase: Phase, epoch: int) -> None:
    store.write_state(zk, layout.DEFAULT_ROOT, group, MigrationState(phase, epoch), store.NO_VERSION)


def test_a_mixed_group_is_one_row_and_one_table_with_its_phase(capsys, node):
    legacy_group(
        node.zk,
        "mix",
        members={"mix_c1": {"orders": 1}},
        owners={("orders", p): "mix_c1-0" for p in range(3)},
        offsets=ORDERS,
    )
    code, _, err = zkcoord(
        capsys, "migrate", "up", "--group", "mix", "--to", "0001_dual_commit", "--zookeeper", node.connect
    )
    assert code == 0, err
    code, out, err = zkcoord(capsys, "groups", "--zookeeper", node.connect, "list")
    assert (code, err) == (0, "")
    assert out.splitlines()[0].split() == ["GROUP", "KIND", "STATE", "PHASE", "READS-FROM"]
    assert rows_of(out, "mix") == [["mix", "mixed", "Stable", "DUAL_WRITE", "max(zookeeper,log)"]]

    code, out, err = zkcoord(capsys, "groups", "--zookeeper", node.connect, "describe", "--group", "mix")
    assert code == 0 and "no active members" not in err
    assert (
        "Consumer group 'mix' is a mixed group: phase DUAL_WRITE; its readers take the larger of ZooKeeper's and the "
        "log's offsets." in out
    )
    assert sum(line.startswith("GROUP") for line in out.splitlines()) == 1  # one table, no "(legacy)" one
    assert [row[:4] for row in rows_of(out, "mix")] == [["mix", "orders", "0", "7"], ["mix", "orders", "1", "8"],
                                                         ["mix", "orders", "2", "-"]]  # fmt: skip


def test_a_migrating_group_is_one_group_whose_offsets_are_what_its_readers_read(capsys, node):
    """LOG_PRIMARY: ZooKeeper's offsets are behind (the mirror is write-behind), the coordinator has the member."""
    legacy_group(node.zk, "mig", offsets={("orders", 0): 3, ("orders", 1): 4})
    put_state(node.zk, "mig", Phase.LOG_PRIMARY, 2)
    commit(node.address, "mig", {("orders", 0): 30, ("orders", 1): 40})
    form_group(node.address, "mig", {"a": ("orders",)}, {"a": {"orders": [0]}})
    code, out, _ = zkcoord(capsys, "groups", "--zookeeper", node.connect, "list", "--state", "stable")
    assert code == 0 and rows_of(out, "mig") == [["mig", "migrating", "Stable", "LOG_PRIMARY", "log"]]

    code, out, err = zkcoord(capsys, "groups", "--zookeeper", node.connect, "describe", "--group", "mig", "--members")
    assert code == 0 and "no active members" not in err
    assert "Consumer group 'mig' is migrating: phase LOG_PRIMARY; its readers use the log's offsets." in out
    assert out.splitlines()[2].split()[:3] == ["GROUP", "KIND", "CONSUMER-ID"]
    assert [row[1] for row in rows_of(out, "mig")] == ["coordinator"]

    code, out, _ = zkcoord(capsys, "groups", "--zookeeper", node.connect, "describe", "--group", "mig")
    assert code == 0 and sum(line.startswith("GROUP") for line in out.splitlines()) == 1
    current = {(row[1], row[2]): row[3] for row in rows_of(out, "mig")}
    assert current == {("orders", "0"): "30", ("orders", "1"): "40"}  # the log's, not ZooKeeper's 3 and 4


def test_phase_and_readers_are_unknown_where_no_migration_state_can_be_read(capsys, node):
    legacy_group(node.zk, "garbled", offsets=ORDERS)
    node.zk.create(layout.migration_path(layout.DEFAULT_ROOT, "garbled"), b"{not json", makepath=True)
    code, out, err = zkcoord(capsys, "groups", "--zookeeper", node.connect, "list")
    assert code == 0 and rows_of(out, "garbled") == [["garbled", "migrating", "Empty", "unknown", "unknown"]]
    assert "WARN: " in err and "not a migration state" in err and "READS-FROM of group 'garbled' are unknown" in err

    commit(node.address, "dual", {("orders", 0): 3})
    put_state(node.zk, "dual", Phase.DUAL_WRITE, 1)
    code, out, err = zkcoord(capsys, "groups", "--coordinator-server", node.bootstrap, "list")
    assert code == 0 and rows_of(out, "dual") == [["dual", "coordinator", "Empty", "unknown", "unknown"]]
    assert "WARN: no ZooKeeper given" in err


def test_an_unreachable_coordinator_is_named_and_log_offsets_are_unknown(capsys, zk_server):
    """A chroot whose only coordinator node is registered but does not answer (its port is closed), then one where
    none is registered, then one given with --coordinator-server that does not answer."""
    connect = fresh_chroot(zk_server, prefix="zkcoord-groups")
    zk = KazooClient(hosts=connect)
    zk.start(timeout=15)
    try:
        admin.create_topic(zk, "orders", 3)
        legacy_group(zk, "orders", offsets=ORDERS)
        put_state(zk, "orders", Phase.LOG_ONLY, 3)
        legacy_group(zk, "plain", offsets=ORDERS)
        port = closed_port()
        registration = layout.encode_coordinator_node("127.0.0.1", port)
        zk.create(layout.coordinator_node_path(layout.DEFAULT_ROOT, 7), registration, ephemeral=True, makepath=True)
        options = ("--zookeeper", connect, "--timeout", "500")
        code, out, err = zkcoord(capsys, "groups", *options, "list")
        assert code == 2
        assert f"127.0.0.1:{port}" in err and "the coordinator groups it holds are not listed" in err
        assert rows_of(out, "orders") == [["orders", "migrating", "Unknown", "LOG_ONLY", "log"]]
        assert rows_of(out, "plain") == [["plain", "legacy", "Empty", "-", "zookeeper"]]

        code, out, err = zkcoord(capsys, "groups", *options, "describe", "--group", "orders")
        assert code == 2
        assert "Error: the coordinator of consumer group 'orders' could not be asked" in err
        assert "whose offsets are unknown" in err and "(frozen since LOG_ONLY) are not what they read" in err
        assert "no active members" not in err
        assert "Consumer group 'orders' is migrating: phase LOG_ONLY; its readers use the log's offsets." in out
        assert [row[:4] for row in rows_of(out, "orders")] == [
            ["orders", "orders", "0", "-"],
            ["orders", "orders", "1", "-"],
        ]

        zk.delete(layout.coordinator_node_path(layout.DEFAULT_ROOT, 7))
        code, out, err = zkcoord(capsys, "groups", *options, "list", "--json")
        assert code == 2 and "no coordinator node is registered under /zkcoord" in err
        assert [g["state"] for g in json.loads(out) if g["group"] == "orders"] == ["Unknown"]

        given = ("--coordinator-server", f"127.0.0.1:{port}", *options)
        code, out, err = zkcoord(capsys, "groups", *given, "describe", "--group", "plain")
        assert code == 2 and f"127.0.0.1:{port}" in err and "a coordinator group 'plain', if there is one" in err
        assert [row[2:5] for row in rows_of(out, "plain")] == [["orders", "0", "7"], ["orders", "1", "8"]]
        code, out, err = zkcoord(capsys, "groups", *given, "list")
        assert code == 2 and f"127.0.0.1:{port}" in err and rows_of(out, "plain")

        # a group only a coordinator could hold cannot be described; the others still are, with the worst code
        code, out, err = zkcoord(capsys, "groups", *given, "describe", "--group", "ghost", "--group", "plain", "--json")
        assert code == 2 and "Error: " in err and "ghost" in err
        assert [document["group"] for document in json.loads(out)] == ["plain"]
    finally:
        zk.stop()
        zk.close()


def test_a_group_walked_down_to_zk_only_is_described_without_a_coordinator(capsys, zk_server):
    """Its readers read only ZooKeeper, so no coordinator is asked (none is registered here)."""
    connect = fresh_chroot(zk_server, prefix="zkcoord-groups")
    zk = KazooClient(hosts=connect)
    zk.start(timeout=15)
    try:
        admin.create_topic(zk, "orders", 2)
        legacy_group(zk, "down", offsets=ORDERS)
        put_state(zk, "down", Phase.ZK_ONLY, 2)
        options = ("--zookeeper", connect, "--timeout", "500")
        code, out, err = zkcoord(capsys, "groups", *options, "describe", "--group", "down")
        assert code == 0 and "coordinator" not in err, err
        assert "Consumer group 'down' is migrating: phase ZK_ONLY" in out
        assert [row[:4] for row in rows_of(out, "down")] == [["down", "orders", "0", "7"], ["down", "orders", "1", "8"]]
    finally:
        zk.stop()
        zk.close()
