"""ZooKeeper credentials from JAAS files and $KAFKA_OPTS, and the ACL each path gets with zookeeper.set.acl."""

import pytest
from kazoo.security import CREATOR_ALL_ACL, OPEN_ACL_UNSAFE

from zkcoord.auth.plain import JaasEntry, parse_jaas_file
from zkcoord.errors import ConfigError
from zkcoord.server.config import node_config
from zkcoord.zk.acl import SECURE_ACL, default_acls
from zkcoord.zk.credentials import DigestCredentials, kafka_opts_properties, zookeeper_security

KAFKA_JAAS = """
/* a broker's file: Kafka's own section, then ZooKeeper's */
KafkaServer {
    org.apache.kafka.common.security.plain.PlainLoginModule required
    username="admin" password="admin-secret" user_admin="admin-secret";
};
// ZooKeeper's client section
Client {
    org.apache.zookeeper.server.auth.DigestLoginModule required
    username="kafka"
    password="se\\"cret;{}";
};
"""


@pytest.fixture
def jaas(tmp_path):
    path = tmp_path / "kafka_server_jaas.conf"
    path.write_text(KAFKA_JAAS)
    return str(path)


@pytest.fixture(autouse=True)
def no_kafka_opts(monkeypatch):
    monkeypatch.delenv("KAFKA_OPTS", raising=False)


def test_a_jaas_file_is_read_by_section_with_quoted_options():
    sections = parse_jaas_file(KAFKA_JAAS)
    assert list(sections) == ["KafkaServer", "Client"]
    assert sections["Client"] == (
        JaasEntry(
            "org.apache.zookeeper.server.auth.DigestLoginModule",
            "required",
            {"username": "kafka", "password": 'se"cret;{}'},
        ),
    )


def test_credentials_come_from_the_property(jaas):
    security = zookeeper_security({"java.security.auth.login.config": jaas})
    assert security.credentials == DigestCredentials("kafka", 'se"cret;{}', jaas)
    assert security.set_acl  # as Kafka's tools: a tool that logs in secures what it creates
    assert security.sasl_options() == {"mechanism": "DIGEST-MD5", "username": "kafka", "password": 'se"cret;{}'}
    assert "cret" not in repr(security)


def test_credentials_come_from_kafka_opts_as_kafka_scripts_pass_them(jaas, monkeypatch):
    monkeypatch.setenv("KAFKA_OPTS", f"-Xmx1g '-Djava.security.auth.login.config={jaas}' -Dzookeeper.sasl.client=true")
    assert kafka_opts_properties("-Xmx1g -Dzookeeper.sasl.clientconfig=Zk -Da=b=c") == {
        "zookeeper.sasl.clientconfig": "Zk",
        "a": "b=c",
    }
    assert zookeeper_security().credentials.username == "kafka"
    monkeypatch.setenv("KAFKA_OPTS", f"-Djava.security.auth.login.config={jaas} -Dzookeeper.sasl.client=false")
    assert zookeeper_security() == zookeeper_security({}, set_acl=False)
    assert zookeeper_security().credentials is None


def test_node_properties_win_over_kafka_opts(jaas, tmp_path, monkeypatch):
    other = tmp_path / "other.conf"
    other.write_text(KAFKA_JAAS.replace("Client {", "ZkClient {"))
    monkeypatch.setenv("KAFKA_OPTS", f"-Djava.security.auth.login.config={jaas}")
    server = node_config({"zookeeper.set.acl": "true", "zookeeper.sasl.clientconfig": "ZkClient",
                          "java.security.auth.login.config": str(other)}).server  # fmt: skip
    security = server.zookeeper_security()
    assert security.set_acl and security.credentials.source == str(other)
    unsecured = node_config({}).server.zookeeper_security()
    assert not unsecured.set_acl and unsecured.credentials.source == jaas  # logs in, sets no ACL: Kafka's default


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("KafkaServer { a.B required; };", "no Client section (found: KafkaServer)"),
        (
            "Client { org.apache.zookeeper.server.auth.DigestLoginModule required username kafka; };",
            "value not specified for key 'username'",
        ),
        (
            "Client { org.apache.zookeeper.server.auth.DigestLoginModule required username=kafka };",
            "section Client: JAAS config entry not terminated by semi-colon",
        ),
        (
            "Client { org.apache.zookeeper.server.auth.DigestLoginModule mandatory; };",
            "invalid login module control flag 'mandatory'",
        ),
        (
            "Client { org.apache.zookeeper.server.auth.DigestLoginModule required username=k; }",
            "section Client is not terminated by '};'",
        ),
        ("Client { org.apache.zookeeper.server.auth.DigestLoginModule required username=k; };", "lacks password"),
        ("Client { com.sun.security.auth.module.Krb5LoginModule required; };", "no org.apache.zookeeper"),
    ],
)
def test_a_bad_jaas_file_is_a_config_error_naming_the_file(tmp_path, text, message):
    path = tmp_path / "jaas.conf"
    path.write_text(text)
    with pytest.raises(ConfigError, match=f"JAAS file {path}") as error:
        zookeeper_security({"java.security.auth.login.config": str(path)})
    assert message in str(error.value)


def test_set_acl_without_credentials_or_with_an_absent_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="zookeeper.set.acl is true, but zkcoord has no ZooKeeper credentials"):
        node_config({"zookeeper.set.acl": "true"}).server.zookeeper_security()
    with pytest.raises(ConfigError, match=f"JAAS file {tmp_path}/absent.conf .*cannot be read"):
        zookeeper_security({"java.security.auth.login.config": str(tmp_path / "absent.conf")})


@pytest.mark.parametrize(
    ("path", "acl"),
    [
        ("/zkcoord/coordinator/nodes/1", SECURE_ACL),
        ("/brokers/topics", SECURE_ACL),
        ("/config/users/alice", CREATOR_ALL_ACL),  # Kafka's sensitive roots: SCRAM credentials
        ("/config/brokers", CREATOR_ALL_ACL),
        ("/config/topics/t", SECURE_ACL),
        ("/consumers", OPEN_ACL_UNSAFE),  # 0.8.2 members write there, unauthenticated
        ("/consumers/g/offsets/t/0", OPEN_ACL_UNSAFE),
        ("/consumersX", SECURE_ACL),
    ],
)
def test_default_acls_follow_kafka_and_keep_consumers_open(path, acl):
    assert default_acls(path) == list(acl)
