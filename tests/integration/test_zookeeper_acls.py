"""zookeeper.set.acl against a ZooKeeper with SASL/digest logins: every znode zkcoord creates gets Kafka's ACLs,
/consumers stays open for 0.8.2 members, and ``zkcoord zk secure`` migrates an existing tree."""

import time
import uuid

import pytest
from cluster_support import Cluster, GroupClient, eventually
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import ACL, OPEN_ACL_UNSAFE, Id, Permissions
from legacy_support import prepare_cluster
from migrate_support import NODE_OVERRIDES, run_migrate, state_of

from zkcoord.cli import main
from zkcoord.migration.phases import Phase
from zkcoord.testing.node_process import NodeProcess
from zkcoord.zk import layout
from zkcoord.zk.client import started_client
from zkcoord.zk.credentials import ZooKeeperSecurity, zookeeper_security
from zkcoord.zk.server import EmbeddedZooKeeper

USER, PASSWORD = "kafka", "kafka-secret"
# What Kafka's defaultAcls gives a znode created by sasl:kafka: all for the creator, read for the world.
KAFKA_ACL = [ACL(Permissions.ALL, Id("sasl", USER)), ACL(Permissions.READ, Id("world", "anyone"))]
CREATOR_ONLY = [ACL(Permissions.ALL, Id("sasl", USER))]  # Kafka's sensitive paths: SCRAM credentials
CLIENT_JAAS = f"""Client {{
    org.apache.zookeeper.server.auth.DigestLoginModule required
    username="{USER}"
    password="{PASSWORD}";
}};
"""


@pytest.fixture(scope="module")
def sasl_zookeeper():
    """A ZooKeeper of its own that logs users in with SASL/digest (the session one does not)."""
    with EmbeddedZooKeeper(sasl_users={USER: PASSWORD}) as server:
        yield server.connect_string


@pytest.fixture
def jaas(tmp_path, monkeypatch):
    """The JAAS file of zkcoord's ZooKeeper login, also given to tools as Kafka's scripts do: in $KAFKA_OPTS."""
    path = tmp_path / "zkcoord_jaas.conf"
    path.write_text(CLIENT_JAAS)
    monkeypatch.setenv("KAFKA_OPTS", f"-Xmx64m -Djava.security.auth.login.config={path}")
    return str(path)


@pytest.fixture
def connect(sasl_zookeeper, jaas):
    """A fresh chroot, created by zkcoord's login: like everything outside /consumers, it is secured."""
    chroot = f"/zkacl-{uuid.uuid4().hex[:12]}"
    with started_client(sasl_zookeeper, security=zookeeper_security()) as client:
        client.create(chroot)
    return sasl_zookeeper + chroot


@pytest.fixture
def anonymous(connect):
    """A client without credentials, as any process that reaches ZooKeeper has."""
    client = KazooClient(hosts=connect)
    client.start(timeout=15)
    yield client
    client.stop()
    client.close()


def tree(client: KazooClient, path: str = "/") -> list[str]:
    children = sorted(client.get_children(path))
    return [path] + [node for child in children for node in tree(client, f"{path.rstrip('/')}/{child}")]


def under_consumers(path: str) -> bool:
    return path == layout.CONSUMERS_PATH or path.startswith(layout.CONSUMERS_PATH + "/")


def test_every_znode_a_secured_node_and_its_tools_create_gets_kafkas_acls(jaas, connect, anonymous, tmp_path, capsys):
    with started_client(connect, security=zookeeper_security()) as arranging:  # a tool: secures what it creates
        prepare_cluster(arranging, {"t": 2})
    scram = "SCRAM-SHA-256=[password=alice-secret]"
    assert main(["users", "--zookeeper", connect, "--alter", "--add-config", scram, "--entity-name", "alice"]) == 0
    acl = ["--allow-principal", "User:alice", "--operation", "Read", "--group", "g"]
    assert main(["acls", "--zookeeper", connect, "--add", *acl]) == 0
    overrides = {**NODE_OVERRIDES, "zookeeper.set.acl": "true", "java.security.auth.login.config": jaas}
    with Cluster(connect, tmp_path / "log", tmp_path, overrides) as nodes:
        nodes.start([1])
        nodes.wait_balanced(anonymous)
        code, _, err = run_migrate(
            capsys, connect, "up", "--group", "g", "--to", "0001_dual_commit", "--allow-new-group"
        )
        assert code == 0, err
        assert state_of(anonymous).phase == Phase.DUAL_WRITE
        client = GroupClient(nodes.addresses)
        try:
            partitions = [{"partition_index": p, "committed_offset": 7 + p, "committed_metadata": ""} for p in (0, 1)]
            response, _ = client.call(
                "g", "OffsetCommit", time.monotonic() + 30, group_id="g", generation_id=-1, member_id="",
                group_instance_id=None, retention_time_ms=-1, topics=[{"name": "t", "partitions": partitions}],
            )  # fmt: skip
        finally:
            client.close()
        assert [p["error_code"] for t in response["topics"] for p in t["partitions"]] == [0, 0]
        eventually(lambda: anonymous.exists(layout.offset_path("g", "t", 1)), 30, "the commits mirrored to ZooKeeper")

        with started_client(connect, security=zookeeper_security()) as reader:  # the world may not list credentials
            znodes = tree(reader)
            acls = {path: reader.get_acls(path)[0] for path in znodes}
        mine = [path for path in znodes if path.startswith(layout.DEFAULT_ROOT + "/")]
        assert {layout.coordinator_nodes_path(), layout.migration_groups_path()} <= set(mine) and len(mine) > 10
        open_ones = [path for path in znodes if under_consumers(path)]
        assert layout.offset_path("g", "t", 0) in open_ones
        assert {path: acls[path] for path in open_ones} == {path: OPEN_ACL_UNSAFE for path in open_ones}
        credentials = [path for path in znodes if path.startswith("/config/users")]
        assert credentials == ["/config/users", "/config/users/alice"]
        assert {path: acls[path] for path in credentials} == {path: CREATOR_ONLY for path in credentials}
        assert {"/kafka-acl/Group/g", "/kafka-acl-changes"} <= set(znodes)
        secured = [path for path in znodes if not under_consumers(path)]
        readable = set(secured) - set(credentials)
        assert {path: acls[path] for path in readable} == {path: KAFKA_ACL for path in readable}

        for path in secured:
            with pytest.raises(NoAuthError):
                anonymous.set(path, b"{}")
            with pytest.raises(NoAuthError):
                anonymous.create(f"{path.rstrip('/')}/intruder")
            if path != "/":
                with pytest.raises(NoAuthError):
                    anonymous.delete(path, recursive=False)
        # 0.8.2 members have no credentials and still register and commit.
        anonymous.create(layout.ids_path("g") + "/legacy-member", b"{}", makepath=True, ephemeral=True)
        anonymous.set(layout.offset_path("g", "t", 0), b"3")
        assert nodes.nodes[1].alive()


def test_zk_secure_sets_kafkas_acls_on_an_existing_tree_and_unsecure_opens_it(jaas, connect, anonymous, capsys):
    existing = [f"{layout.DEFAULT_ROOT}/migration/groups/g", f"{layout.DEFAULT_ROOT}/coordinator/partitions/0"]
    before = ZooKeeperSecurity(zookeeper_security().credentials, set_acl=False)  # logged in, set no ACL
    with started_client(connect, security=before) as client:
        for path in [*existing, layout.offset_path("g", "t", 0)]:
            client.create(path, b"{}", makepath=True)
    root_tree = tree(anonymous, layout.DEFAULT_ROOT)

    assert main(["zk", "secure", "--zookeeper", connect]) == 0
    assert f"Set secure ACLs on {len(root_tree)} znodes under /zkcoord." in capsys.readouterr().out
    assert {path: anonymous.get_acls(path)[0] for path in root_tree} == {path: KAFKA_ACL for path in root_tree}
    assert anonymous.get_acls(layout.offset_path("g", "t", 0))[0] == OPEN_ACL_UNSAFE  # not zkcoord's root
    with pytest.raises(NoAuthError):
        anonymous.set(existing[0], b"{}")

    assert main(["zk", "secure", "--unsecure", "--zookeeper", connect]) == 0
    assert all(anonymous.get_acls(path)[0] == OPEN_ACL_UNSAFE for path in root_tree)
    anonymous.set(existing[0], b"{}")


def test_zk_secure_without_credentials_is_a_usage_error(connect, monkeypatch, capsys):
    monkeypatch.delenv("KAFKA_OPTS", raising=False)
    assert main(["zk", "secure", "--zookeeper", connect]) == 2
    assert "changing ACLs needs ZooKeeper credentials" in capsys.readouterr().err


def test_a_refused_login_stops_tools_and_nodes_with_a_clear_error(connect, tmp_path, monkeypatch, capsys):
    wrong = tmp_path / "wrong_jaas.conf"
    wrong.write_text(CLIENT_JAAS.replace(PASSWORD, "not-the-password"))
    refused = f"ZooKeeper refused the SASL login of user 'kafka' (JAAS file {wrong})"
    monkeypatch.setenv("KAFKA_OPTS", f"-Djava.security.auth.login.config={wrong}")
    assert main(["topics", "list", "--zookeeper", connect]) == 2
    assert refused in capsys.readouterr().err
    node = NodeProcess(1, connect, tmp_path / "log", {}, tmp_path)
    try:
        assert node.process.wait(timeout=30) != 0
        assert refused in node.log_tail()
    finally:
        node.close()


def test_parents_and_transactions_get_the_acl_of_their_own_path(connect, anonymous):
    with started_client(connect, security=zookeeper_security()) as client:
        client.create("/config/users/alice", b"{}", makepath=True)  # SCRAM credentials: Kafka's sensitive root
        client.ensure_path(layout.owners_path("g", "t"))
        transaction = client.transaction()  # as the node registers a mixed group's coordinator members
        transaction.create("/consumers/h")
        transaction.create(layout.ids_path("h"))
        transaction.create(f"{layout.DEFAULT_ROOT}-other")
        assert transaction.commit() == ["/consumers/h", layout.ids_path("h"), f"{layout.DEFAULT_ROOT}-other"]
        acls = {path: client.get_acls(path)[0] for path in tree(client)}
    assert acls == {
        "/": KAFKA_ACL,
        "/config": KAFKA_ACL,
        "/config/users": CREATOR_ONLY,
        "/config/users/alice": CREATOR_ONLY,
        "/consumers": OPEN_ACL_UNSAFE,
        "/consumers/g": OPEN_ACL_UNSAFE,
        "/consumers/g/owners": OPEN_ACL_UNSAFE,
        "/consumers/g/owners/t": OPEN_ACL_UNSAFE,
        "/consumers/h": OPEN_ACL_UNSAFE,
        "/consumers/h/ids": OPEN_ACL_UNSAFE,
        f"{layout.DEFAULT_ROOT}-other": KAFKA_ACL,
    }
    with pytest.raises(NoAuthError):
        anonymous.get("/config/users/alice")  # the world cannot read credentials


def test_a_tool_without_the_login_is_told_how_to_give_it(connect, monkeypatch, capsys):
    with started_client(connect, security=zookeeper_security()) as client:
        prepare_cluster(client, {"t": 1})
    monkeypatch.delenv("KAFKA_OPTS")
    assert main(["topics", "alter", "--topic", "t", "--partitions", "2", "--zookeeper", connect]) == 2
    assert "ZooKeeper refused the change: the znode's ACL" in capsys.readouterr().err
