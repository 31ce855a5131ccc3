"""zkcoord's own tools and clients against a msgpack listener on SASL_SSL (issue 21, "Tools and clients"): the
admin CLI, ``zkcoord migrate`` and ``coordinator status`` with ``--command-config``, ``zkcoord.client.Consumer``
with SCRAM, and the legacy member's log commits. One node process serves the whole module; its certificate is
made here, its SCRAM users are written into its ZooKeeper chroot, its PLAIN users come from the JAAS property."""

import json

import pytest
import trustme
from kazoo.client import KazooClient
from legacy_support import member, prepare_cluster

from zkcoord import cli
from zkcoord.admin import AdminClient
from zkcoord.auth.scram import make_credential
from zkcoord.client import Consumer
from zkcoord.errors import SaslAuthenticationFailedError
from zkcoord.model import TopicPartition
from zkcoord.testing.node_process import NodeProcess
from zkcoord.testing.zookeeper import fresh_chroot, wait_until
from zkcoord.zk.users import set_scram_credential

SCRAM = "SCRAM-SHA-256"
USER, PASSWORD = "alice", "alice-secret"
T0 = TopicPartition("t", 0)


class SecuredNode:
    """The node, its ZooKeeper connect string, and the client properties that reach it."""

    def __init__(self, node: NodeProcess, zk_connect: str, ca_path: str):
        self.node, self.zk_connect = node, zk_connect
        self.bootstrap = "{}:{}".format(*node.address)
        self.tls = {"security.protocol": "SASL_SSL", "ssl.ca.location": ca_path}

    def scram(self, password: str = PASSWORD) -> dict:
        return {**self.tls, "sasl.mechanism": SCRAM, "sasl.username": USER, "sasl.password": password}


@pytest.fixture(scope="module")
def secured(zk_server, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("secured-node")
    zk_connect = fresh_chroot(zk_server)
    ca = trustme.CA()
    ca.cert_pem.write_to_path(workdir / "ca.pem")
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(workdir / "node.pem")
    zk = KazooClient(hosts=zk_connect)
    zk.start(timeout=15)
    try:
        set_scram_credential(zk, USER, SCRAM, make_credential(SCRAM, PASSWORD))
        prepare_cluster(zk, {"t": 2})
    finally:
        zk.stop()
        zk.close()
    overrides = {
        "offsets.topic.num.partitions": 1,
        "group.initial.rebalance.delay.ms": 0,
        "listener.security.protocol.map": "ZKCOORD:SASL_SSL",
        "ssl.keystore.location": workdir / "node.pem",
        "sasl.enabled.mechanisms": f"{SCRAM},PLAIN",
        "listener.name.zkcoord.plain.sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule "
        'required user_admin="admin-secret";',
    }
    node = NodeProcess(1, zk_connect, workdir / "log", overrides, workdir)
    try:
        node.wait_serving()
        yield SecuredNode(node, zk_connect, str(workdir / "ca.pem"))
    finally:
        node.stop()


def properties_file(path, properties: dict) -> str:
    path.write_text("".join(f"{key}={value}\n" for key, value in properties.items()), encoding="utf-8")
    return str(path)


@pytest.fixture
def zkcoord(capsys, monkeypatch):
    """``zkcoord ARGS...`` in-process: (exit code, stdout, stderr)."""
    monkeypatch.delenv("ZKCOORD_ZK_CONNECT", raising=False)

    def run(*args: str) -> tuple[int, str, str]:
        code = cli.main(list(args))
        out, err = capsys.readouterr()
        return code, out, err

    return run


def committed_by_admin(secured: SecuredNode, group: str) -> dict:
    with AdminClient(secured.bootstrap, request_timeout_ms=10000, security=secured.scram()) as admin:
        return {
            tp: found.offset
            for listed in admin.list_consumer_group_offsets(group)
            for tp, found in listed.offsets.items()
        }


def test_groups_cli_with_command_config_and_a_refused_password(secured, tmp_path, zkcoord):
    with AdminClient(secured.bootstrap, request_timeout_ms=10000, security=secured.scram()) as admin:
        admin.alter_consumer_group_offsets("cli-group", {T0: 5})
    plain = {**secured.tls, "sasl.mechanism": "PLAIN"}
    plain["sasl.jaas.config"] = (
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret";'
    )
    servers = ("--coordinator-server", secured.bootstrap, "--timeout", "5000")
    code, out, err = zkcoord(
        "groups", "list", *servers, "--command-config", properties_file(tmp_path / "plain.properties", plain)
    )
    assert code == 0, err
    assert "cli-group" in out.split()

    wrong = properties_file(tmp_path / "wrong.properties", secured.scram("wrong"))
    code, out, err = zkcoord("groups", "describe", "--group", "cli-group", *servers, "--command-config", wrong)
    assert code != 0
    assert "authentication failed" in err.lower(), err
    assert "cli-group" not in out


def test_migrate_verify_and_coordinator_status_with_command_config(secured, tmp_path, zkcoord):
    with AdminClient(secured.bootstrap, request_timeout_ms=10000, security=secured.scram()) as admin:
        admin.alter_consumer_group_offsets("migrate-group", {T0: 9})
    config = properties_file(tmp_path / "client.properties", secured.scram())
    verify = ("migrate", "verify", "--group", "migrate-group", "--zookeeper", secured.zk_connect, "--timeout", "5000")
    code, out, err = zkcoord(*verify, "--verbose", "--json", "--command-config", config)
    assert code == 0, err
    assert json.loads(out)[0]["partitions"][0]["log"] == 9

    wrong = properties_file(tmp_path / "wrong.properties", secured.scram("wrong"))
    code, out, err = zkcoord(*verify, "--command-config", wrong)
    assert code != 0
    assert "authentication failed" in err.lower(), err

    code, out, err = zkcoord(
        "coordinator", "status", "--zookeeper", secured.zk_connect, "--json", "--command-config", config
    )
    assert code == 0, err
    [node] = json.loads(out)["nodes"]
    assert node["error"] == "" and node["groups"] >= 1


def test_consumer_commits_and_fetches_with_scram_over_tls(secured):
    consumer = Consumer(bootstrap_servers=secured.bootstrap, group_id="client-group", **secured.scram())
    try:
        consumer.assign([T0])
        consumer.commit({T0: 42})
        assert consumer.committed(T0) == 42
    finally:
        consumer.close()
    assert committed_by_admin(secured, "client-group") == {T0: 42}


def test_consumer_with_a_refused_password_fails_instead_of_retrying(secured):
    properties = {**secured.scram("wrong"), "request.timeout.ms": 5000}
    consumer = Consumer(bootstrap_servers=secured.bootstrap, group_id="refused-group", **properties)
    try:
        consumer.subscribe(["t"])
        raised = []

        def poll_raised() -> bool:
            try:
                consumer.poll(100)
            except SaslAuthenticationFailedError as error:
                raised.append(error)
            return bool(raised)

        wait_until(poll_raised, timeout=15, what="poll() raising SaslAuthenticationFailedError")
        with pytest.raises(SaslAuthenticationFailedError):
            consumer.committed(T0)
        with pytest.raises(SaslAuthenticationFailedError):
            consumer.commit({T0: 1})
    finally:
        consumer.close()


def test_legacy_member_log_commits_through_the_secured_listener(secured):
    log_storage = {"offsets.storage": "kafka", "dual.commit.enabled": False, "offsets.channel.backoff.ms": 100}
    with member(secured.zk_connect, "m0", subscription={"topics": {"t": 1}}, **log_storage, **secured.scram()) as m:
        m.commit({T0: 17})
        assert m.committed(T0) == 17
        assert committed_by_admin(secured, "g") == {T0: 17}
    refused = member(secured.zk_connect, "m1", **log_storage, **secured.scram("wrong"))
    try:  # with log storage it asks the coordinator about the group before it joins: that is refused at once
        with pytest.raises(SaslAuthenticationFailedError, match="invalid credentials"):
            refused.start()
    finally:
        refused.close()
    assert committed_by_admin(secured, "g") == {T0: 17}
