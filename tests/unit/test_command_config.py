"""Client security settings for zkcoord's tools and clients: ``--command-config`` on every command that reaches
coordinator nodes, the same properties in the consumers' configs, their kafka-python translation, and a member
that a refused login stops for good. Pure: no sockets."""

import pytest
from kafka.admin import KafkaAdminClient

from zkcoord.assign.consumer import assignor_for
from zkcoord.cli.common import UsageError, client_security
from zkcoord.cli.parser import build_parser
from zkcoord.client.config import ConsumerConfig
from zkcoord.config import build_config
from zkcoord.errors import ConfigError, SaslAuthenticationFailedError
from zkcoord.legacy.config import LegacyConsumerConfig
from zkcoord.membership import Completed, Fatal, GroupMember, MembershipConfig, MemberState
from zkcoord.security.client import ClientSecurity

SCRAM_OVER_TLS = {
    "security.protocol": "SASL_SSL",
    "sasl.mechanism": "SCRAM-SHA-512",
    "sasl.username": "alice",
    "sasl.password": "alice-secret",
    "ssl.ca.location": "/etc/ca.pem",
    "ssl.certificate.location": "/etc/client.pem",
    "ssl.key.location": "/etc/client.key",
    "ssl.key.password": "key-secret",
}


@pytest.mark.parametrize(
    "argv",
    [
        ["groups", "list", "--coordinator-server", "h:1"],
        ["groups", "--command-config", "F", "describe", "--group", "g"],  # before the action, as Kafka's tool allows
        ["groups", "reset-offsets", "--group", "g", "--all-topics", "--to-earliest"],
        ["groups", "delete", "--group", "g"],
        ["groups", "delete-offsets", "--group", "g", "--topic", "t"],
        ["groups", "remove-members", "--group", "g", "--instance-ids", "i"],
        ["migrate", "status", "--all"],
        ["migrate", "plan", "--group", "g"],
        ["migrate", "up", "--group", "g"],
        ["migrate", "down", "--group", "g"],
        ["migrate", "verify", "--group", "g"],
        ["coordinator", "status"],
        ["legacy", "run", "--group", "g", "--topics", "t:1"],
    ],
)
def test_every_command_that_reaches_coordinators_takes_command_config(argv):
    if "--command-config" not in argv:
        argv = [*argv, "--command-config", "F"]
    assert build_parser().parse_args(argv).command_config == "F"


def test_command_config_file_is_read_as_kafka_client_properties(tmp_path):
    path = tmp_path / "client.properties"
    path.write_text(
        "# as for kafka-consumer-groups --command-config\nsecurity.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="bob" '
        'password="b=b";\n',
        encoding="utf-8",
    )
    security = client_security(str(path))
    assert (security.protocol, security.mechanism, security.username, security.password) == (
        "SASL_PLAINTEXT",
        "PLAIN",
        "bob",
        "b=b",
    )
    assert client_security(None).protocol == "PLAINTEXT"


def test_an_unreadable_or_wrong_command_config_is_a_usage_error_naming_the_file(tmp_path):
    with pytest.raises(UsageError, match="--command-config .*missing.properties"):
        client_security(str(tmp_path / "missing.properties"))
    path = tmp_path / "gssapi.properties"
    path.write_text("security.protocol=SASL_SSL\nsasl.username=u\nsasl.password=p\n", encoding="utf-8")
    with pytest.raises(UsageError, match="gssapi.properties: sasl.mechanism: GSSAPI"):
        client_security(str(path))
    path.write_text("security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n", encoding="utf-8")
    with pytest.raises(UsageError, match="needs sasl.username"):
        client_security(str(path))


def test_kafka_python_gets_the_same_settings_under_its_own_names():
    options = ClientSecurity.from_properties(SCRAM_OVER_TLS).kafka_python_options()
    assert options == {
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "alice",
        "sasl_plain_password": "alice-secret",
        "ssl_cafile": "/etc/ca.pem",
        "ssl_certfile": "/etc/client.pem",
        "ssl_keyfile": "/etc/client.key",
        "ssl_password": "key-secret",
        "ssl_check_hostname": True,
    }
    assert set(options) <= set(KafkaAdminClient.DEFAULT_CONFIG)
    assert ClientSecurity().kafka_python_options() == {"security_protocol": "PLAINTEXT"}


def test_an_empty_endpoint_identification_algorithm_turns_the_host_name_check_off_as_in_kafka():
    unchecked = {**SCRAM_OVER_TLS, "ssl.endpoint.identification.algorithm": ""}
    assert not ClientSecurity.from_properties(unchecked).check_hostname
    assert ClientSecurity.from_properties(SCRAM_OVER_TLS).check_hostname


def test_passwords_stay_out_of_the_settings_and_configs_repr():
    consumer = build_config(ConsumerConfig, {"bootstrap.servers": "h:1", **SCRAM_OVER_TLS})
    for text in (repr(ClientSecurity.from_properties(SCRAM_OVER_TLS)), repr(consumer)):
        assert "alice-secret" not in text and "key-secret" not in text


@pytest.mark.parametrize(
    ("config_class", "required"),
    [
        (ConsumerConfig, {"bootstrap.servers": "h:1"}),
        (LegacyConsumerConfig, {"group.id": "g", "zookeeper.connect": "z"}),
    ],
)
def test_consumer_configs_take_the_client_properties_by_kafka_name_or_snake_case(config_class, required):
    config = build_config(config_class, {**required, **SCRAM_OVER_TLS, "ssl_ca_location": "/other/ca.pem"})
    assert config.client_security == ClientSecurity.from_properties(
        {**SCRAM_OVER_TLS, "ssl.ca.location": "/other/ca.pem"}
    )
    assert build_config(config_class, required).client_security.protocol == "PLAINTEXT"
    with pytest.raises(ConfigError, match="security.protocol"):
        build_config(config_class, {**required, "security.protocol": "TLS"})


def test_a_refused_login_stops_the_member_and_fails_its_requests_now_and_later():
    config = MembershipConfig("g", None, 3000, 300, 60000, 100, 30000, 300000)
    member = GroupMember(config, [assignor_for("range")], 0)
    member.subscribe(["t"], now_ms=0)
    member.request(1, "OffsetFetch", {"group_id": "g", "topics": None}, 0, 30000)
    member.take_events()
    refused = SaslAuthenticationFailedError("invalid credentials")

    member.fail(refused, 10)
    member.request(2, "OffsetFetch", {"group_id": "g", "topics": None}, 20, 30000)

    events = member.take_events()
    assert member.state == MemberState.FATAL
    assert [e.error for e in events if isinstance(e, Fatal)] == [refused]
    assert {e.request_id: e.error for e in events if isinstance(e, Completed)} == {1: refused, 2: refused}
