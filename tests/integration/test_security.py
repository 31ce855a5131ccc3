"""TLS, SASL and Kafka's ACLs on a node, with real clients: librdkafka and kafka-python on the Kafka listener
(SASL_SSL, its gateway ports included), zkcoord's own client on the msgpack listener (mutual TLS). Users and ACLs
come from Kafka 3.9's own kafka-configs and kafka-acls as well as from zkcoord's (docs/security.md)."""

import logging
import socket
import ssl
import struct
import uuid

import pytest
import trustme
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaException, TopicPartition
from confluent_kafka import KafkaError as RdKafkaError
from confluent_kafka.admin import AdminClient
from cryptography import x509
from kafka import KafkaAdminClient
from kafka import TopicPartition as PythonTopicPartition
from kafka.errors import GroupAuthorizationFailedError, KafkaError
from kafka_tool_support import config_command, kafka_acls
from kio.schema.api_versions.v3.request import ApiVersionsRequest as ApiVersionsRequestV3
from kio.schema.metadata.v12.request import MetadataRequest as MetadataRequestV12
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest as SaslHandshakeRequestV1

from zkcoord.auth.acls import Acl, ResourcePattern
from zkcoord.auth.scram import make_credential
from zkcoord.channel import WireClientError, WireConnection
from zkcoord.errors import ErrorCode, SaslAuthenticationFailedError
from zkcoord.security.client import ClientSecurity
from zkcoord.server.gateway import exchange, frame_content, read_frame
from zkcoord.testing.node_process import HOST, kafka_node
from zkcoord.testing.zookeeper import wait_until
from zkcoord.wire.kafka.frames import read_response
from zkcoord.zk.acls import add_acls
from zkcoord.zk.client import started_client
from zkcoord.zk.users import set_scram_credential

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
TOPIC = f"secured-{uuid.uuid4().hex[:8]}"
ALICE_GROUP, BOB_GROUP, CAROL_GROUP = (f"{name}-{uuid.uuid4().hex[:8]}" for name in ("alice", "bob", "carol"))
WAIT_S = 60


@pytest.fixture(scope="module")
def certificates(tmp_path_factory):
    """A CA, the node's certificate for 127.0.0.1, and a client certificate whose subject names alice."""
    where = tmp_path_factory.mktemp("certificates")
    authority = trustme.CA()
    files = {name: str(where / f"{name}.pem") for name in ("ca", "server", "alice")}
    authority.cert_pem.write_to_path(files["ca"])
    authority.issue_cert(HOST, "localhost").private_key_and_cert_chain_pem.write_to_path(files["server"])
    authority.issue_cert("alice@example.org", common_name="alice").private_key_and_cert_chain_pem.write_to_path(
        files["alice"]
    )
    return files


@pytest.fixture(scope="module")
def node(kafka, certificates, tmp_path_factory):
    """One node: its Kafka listener SASL_SSL (PLAIN for admin, SCRAM for the rest), its msgpack listener mutual TLS,
    ACLs on with admin a super user. Alice is made by Kafka's kafka-configs, bob by zkcoord."""
    kafka.create_topic(TOPIC, 2)
    kafka.produce(TOPIC, [f"record-{n}".encode() for n in range(20)])
    config_command(
        kafka.zk_connect,
        *("--alter", "--add-config", "SCRAM-SHA-512=[password=alice-secret]"),
        *("--entity-type", "users", "--entity-name", "alice"),
    )
    with started_client(kafka.zk_connect) as zk:
        for user in ("bob", "carol"):
            set_scram_credential(zk, user, "SCRAM-SHA-256", make_credential("SCRAM-SHA-256", f"{user}-secret"))
        grant(zk, "User:alice", "Read", "Group", ALICE_GROUP)
        grant(zk, "User:alice", "Read", "Topic", TOPIC)
        grant(zk, "User:bob", "Read", "Group", BOB_GROUP)
        grant(zk, "User:bob", "Read", "Topic", TOPIC)
        grant(zk, f"User:{alice_certificate_subject(certificates)}", "Describe", "Group", ALICE_GROUP)
    workdir = tmp_path_factory.mktemp("secured-node")
    overrides = {
        "zkcoord.root": f"/zkcoord-{uuid.uuid4().hex[:8]}",  # the broker's chroot is shared with other modules' nodes
        "offsets.topic.num.partitions": 2,
        "group.initial.rebalance.delay.ms": 0,
        "coordinator.claim.grace.ms": 0,
        "listeners": f"SASL_SSL://{HOST}:0",
        "listener.security.protocol.map": "ZKCOORD:SSL",
        "ssl.keystore.location": certificates["server"],
        "listener.name.zkcoord.ssl.client.auth": "required",
        "listener.name.zkcoord.ssl.truststore.location": certificates["ca"],
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": f'{PLAIN_MODULE} required user_admin="admin-secret";',
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin",
    }
    started = kafka_node(1, kafka.zk_connect, workdir / "log", overrides, workdir)
    try:
        started.wait_serving()
        yield started
    finally:
        started.stop()


def grant(zk, principal: str, operation: str, resource_type: str, name: str, pattern: str = "LITERAL") -> None:
    add_acls(zk, ResourcePattern(resource_type, name, pattern), {Acl(principal, "*", operation, "Allow")})


def alice_certificate_subject(certificates) -> str:
    with open(certificates["alice"], "rb") as pem:
        certificate = next(
            c for c in x509.load_pem_x509_certificates(pem.read()) if "alice" in c.subject.rfc4514_string()
        )
    # RFC 4514 keeps RFC 2253's order; Java's X500Principal (Kafka's DEFAULT principal) escapes every "#" too.
    return certificate.subject.rfc4514_string().replace("#", "\\#")


def rdkafka(node, certificates, user: str, password: str, mechanism: str = "SCRAM-SHA-256") -> dict:
    return {
        "bootstrap.servers": node.kafka_bootstrap,
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
        "ssl.ca.location": certificates["ca"],
    }


def python_admin(node, certificates, mechanism: str, user: str, password: str, **config) -> KafkaAdminClient:
    """kafka-python's admin client on the Kafka listener, with SASL."""
    return KafkaAdminClient(
        **config,
        bootstrap_servers=node.kafka_bootstrap,
        security_protocol="SASL_SSL",
        sasl_mechanism=mechanism,
        sasl_plain_username=user,
        sasl_plain_password=password,
        ssl_cafile=certificates["ca"],
        request_timeout_ms=10_000,
    )


def commit(node, certificates, group: str, offset: int, user: str, password: str, mechanism="SCRAM-SHA-256") -> None:
    """A commit of ``offset`` on partition 0 for ``group``, by a librdkafka consumer that joins no group."""
    consumer = Consumer({**rdkafka(node, certificates, user, password, mechanism), "group.id": group})
    try:
        consumer.commit(offsets=[TopicPartition(TOPIC, 0, offset)], asynchronous=False)
    finally:
        consumer.close()


def answer_to_plaintext(port: int) -> bytes:
    """What a TLS port sends back to a plaintext Kafka ApiVersions frame before it closes."""
    api_versions = struct.pack(">ihhih", 10, 18, 0, 1, 0)  # size, api key, version, correlation id 1, no client id
    with socket.create_connection((HOST, port), timeout=10) as plain:
        plain.sendall(api_versions)
        answer = b""
        try:
            while chunk := plain.recv(4096):
                answer += chunk
        except ConnectionResetError:
            pass
        return answer


def test_a_plaintext_client_on_the_tls_ports_gets_no_answer_and_no_client_certificate_no_connection(node, certificates):
    for port in (node.kafka_port, node.port):
        answer = answer_to_plaintext(port)  # at most a TLS alert, then the connection closes
        assert len(answer) < 8 or struct.unpack(">i", answer[4:8]) != (1,)
    without_certificate = tls_connector(certificates, False)
    with (  # the mutual-TLS msgpack listener wants a certificate
        pytest.raises((OSError, WireClientError)),
        WireConnection(HOST, node.port, create_connection=without_certificate) as connection,
    ):
        connection.call("ApiVersions")


def tls_connector(certificates, with_cert: bool):
    properties = {"security.protocol": "SSL", "ssl.ca.location": certificates["ca"]}
    if with_cert:
        properties["ssl.certificate.location"] = certificates["alice"]
    return ClientSecurity.from_properties(properties).connector()


def test_a_wrong_scram_password_fails_with_every_client(node, certificates, caplog):
    errors = []
    consumer = Consumer(
        {**rdkafka(node, certificates, "bob", "not-bobs"), "group.id": BOB_GROUP, "error_cb": errors.append}
    )
    try:
        wait_until(lambda: consumer.poll(0.2) is None and errors, WAIT_S, what="librdkafka's authentication error")
        assert errors[0].code() == RdKafkaError._AUTHENTICATION and "invalid credentials" in errors[0].str()
    finally:
        consumer.close()
    with caplog.at_level(logging.ERROR, logger="kafka"), pytest.raises(KafkaError):
        # It retries bootstrapping until bootstrap_timeout_ms whatever failed, and logs why.
        python_admin(node, certificates, "SCRAM-SHA-512", "alice", "wrong", bootstrap_timeout_ms=3000)
    failures = [r.getMessage() for r in caplog.records if "SaslAuthenticationFailedError" in r.getMessage()]
    assert failures and "invalid credentials with SASL mechanism SCRAM-SHA-512" in failures[0]


def test_a_reader_of_its_group_consumes_and_commits_but_deletes_nothing_and_sees_only_its_groups(node, certificates):
    commit(node, certificates, BOB_GROUP, 3, "bob", "bob-secret")
    alice = rdkafka(node, certificates, "alice", "alice-secret", "SCRAM-SHA-512")
    consumer = Consumer(
        {**alice, "group.id": ALICE_GROUP, "auto.offset.reset": "earliest", "enable.auto.commit": False}
    )
    try:
        consumer.subscribe([TOPIC])
        records = []
        wait_until(
            lambda: records.extend(filter(None, [consumer.poll(0.5)])) or len(records) >= 5, WAIT_S, what="records"
        )
        assert all(record.error() is None for record in records)  # fetched through the gateway, which checks Read
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()

    admin = AdminClient(alice)
    listed = admin.list_consumer_groups(request_timeout=20).result()
    assert {group.group_id for group in listed.valid} == {ALICE_GROUP}  # bob's group exists but is not hers
    (deleted,) = admin.delete_consumer_groups([ALICE_GROUP], request_timeout=20).values()
    with pytest.raises(KafkaException, match="GROUP_AUTHORIZATION_FAILED"):
        deleted.result()
    (fetched,) = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(BOB_GROUP)]).values()
    with pytest.raises(KafkaException, match="GROUP_AUTHORIZATION_FAILED"):
        fetched.result()


def test_a_super_user_lists_and_deletes_every_group(node, certificates):
    commit(node, certificates, BOB_GROUP, 4, "bob", "bob-secret")
    admin = python_admin(node, certificates, "PLAIN", "admin", "admin-secret")  # the super user
    try:
        listed = wait_until(lambda: BOB_GROUP in listed_groups(admin), WAIT_S, what="bob's group listed")
        assert listed and ALICE_GROUP in listed_groups(admin)
        assert admin.list_group_offsets(BOB_GROUP)[BOB_GROUP][PythonTopicPartition(TOPIC, 0)].offset == 4
        assert admin.delete_groups([BOB_GROUP]) == {BOB_GROUP: "OK"}
        assert BOB_GROUP not in listed_groups(admin)
    finally:
        admin.close()


def listed_groups(admin: KafkaAdminClient) -> set[str]:
    return {group["group_id"] for group in admin.list_groups()}


def test_acls_written_by_kafkas_own_kafka_acls_reach_the_node(node, certificates, kafka):
    carol = python_admin(node, certificates, "SCRAM-SHA-256", "carol", "carol-secret")
    try:
        with pytest.raises(GroupAuthorizationFailedError):
            carol.list_group_offsets(CAROL_GROUP)
        kafka_acls(
            kafka.zk_connect,
            *("--add", "--allow-principal", "User:carol", "--operation", "Read"),
            *("--group", "carol-", "--topic", TOPIC, "--resource-pattern-type", "prefixed"),
        )
        wait_until(lambda: describable(carol, CAROL_GROUP), WAIT_S, what="carol's prefixed ACL to reach the node")
    finally:
        carol.close()
    commit(node, certificates, CAROL_GROUP, 2, "carol", "carol-secret")


def describable(admin: KafkaAdminClient, group: str) -> bool:
    try:
        admin.list_group_offsets(group)
        return True
    except GroupAuthorizationFailedError:
        return False


def test_mutual_tls_names_the_principal_by_its_certificate_on_the_msgpack_listener(node, certificates):
    with WireConnection(HOST, node.port, create_connection=tls_connector(certificates, with_cert=True)) as connection:
        own = connection.call("OffsetFetch", group_id=ALICE_GROUP, topics=None)
        assert own["error_code"] == ErrorCode.NONE
        other = connection.call("DescribeGroups", groups=[CAROL_GROUP])
        assert other["groups"][0]["error_code"] == ErrorCode.GROUP_AUTHORIZATION_FAILED


def test_tls_is_verified_by_the_client_too(node):
    untrusted = trustme.CA()
    with untrusted.cert_pem.tempfile() as authority:
        security = ClientSecurity.from_properties({"security.protocol": "SSL", "ssl.ca.location": authority})
        with pytest.raises(
            SaslAuthenticationFailedError, match="TLS to 127.0.0.1: self-signed certificate in certificate chain"
        ):
            WireConnection(HOST, node.port, create_connection=security.connector())


def kafka_tls_socket(node, certificates) -> ssl.SSLSocket:
    context = ssl.create_default_context(cafile=certificates["ca"])
    return context.wrap_socket(socket.create_connection((HOST, node.kafka_port), timeout=10), server_hostname=HOST)


def test_before_sasl_completes_only_api_versions_is_answered_and_an_unknown_mechanism_closes(node, certificates):
    with kafka_tls_socket(node, certificates) as sock:
        _, versions = read_response(
            18,
            3,
            frame_content(
                exchange(sock, "t", ApiVersionsRequestV3(client_software_name="t", client_software_version="1"))
            ),
        )
        assert {(int(each.api_key), int(each.max_version)) for each in versions.api_keys} >= {(17, 1), (36, 2)}
        assert max(int(each.max_version) for each in versions.api_keys if int(each.api_key) == 1) <= 12  # Fetch
        with pytest.raises(ConnectionError):  # Kafka's broker closes too
            exchange(
                sock,
                "t",
                MetadataRequestV12(
                    topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
                ),
            )
    with kafka_tls_socket(node, certificates) as sock:
        _, refused = read_response(
            17, 1, frame_content(exchange(sock, "t", SaslHandshakeRequestV1(mechanism="GSSAPI")))
        )
        assert refused.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
        assert set(refused.mechanisms) == {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}
        assert read_frame(sock, 1 << 20) is None  # then closed
