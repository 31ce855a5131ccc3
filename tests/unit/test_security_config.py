"""Kafka's listener security properties and the TLS principal as Kafka names it."""

import logging
import ssl

import pytest
import trustme

from zkcoord.errors import ConfigError
from zkcoord.security.config import MSGPACK_LISTENER
from zkcoord.security.tls import ANONYMOUS, certificate_principal, client_context, server_context
from zkcoord.server.config import node_config


def test_a_listener_named_after_its_protocol_or_mapped_takes_its_own_overrides():
    security = node_config(
        {
            "listeners": "CLIENT://127.0.0.1:9092",
            "listener.security.protocol.map": "CLIENT:SASL_SSL,ZKCOORD:SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "listener.name.client.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
            "listener.name.client.plain.sasl.jaas.config": 'x required user_a="b";',
        }
    ).security
    client = security.for_listener("CLIENT")
    assert (client.protocol, client.tls, client.sasl) == ("SASL_SSL", True, True)
    assert client.mechanisms == ("PLAIN", "SCRAM-SHA-256")
    assert client.jaas_config("PLAIN") == 'x required user_a="b";'
    msgpack = security.for_listener(MSGPACK_LISTENER)
    assert (msgpack.protocol, msgpack.mechanisms, msgpack.jaas_config("PLAIN")) == (
        "SASL_PLAINTEXT",
        ("SCRAM-SHA-512",),
        "",
    )
    assert node_config({}).security.for_listener(MSGPACK_LISTENER).protocol == "PLAINTEXT"
    assert node_config({}).security.for_listener("SSL").protocol == "SSL"


@pytest.mark.parametrize(
    ("properties", "message"),
    [
        ({"ssl.keystore.type": "JKS"}, "only PEM"),
        ({"ssl.client.auth": "always"}, "ssl.client.auth"),
        ({"listener.security.protocol.map": "CLIENT:TLS"}, "NAME:PROTOCOL"),
        ({"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}, "AclAuthorizer"),
        ({"ssl.principal.mapping.rules": "RULE:^CN=(.*?),.*$/$1/"}, "only DEFAULT"),
    ],
)
def test_misspelt_security_settings_are_refused_by_name(properties, message):
    with pytest.raises(ConfigError, match=message):
        node_config(properties)


def test_a_listener_override_that_is_no_setting_is_refused_by_name():
    config = node_config({"listener.name.ssl.ssl.keystore.locaton": "/x.pem"}).security
    with pytest.raises(ConfigError, match="ssl.keystore.locaton"):
        config.for_listener("SSL")
    with pytest.raises(ConfigError, match="not in listener.security.protocol.map"):
        config.for_listener("CLIENT")


def test_the_principal_of_a_certificate_is_its_subject_in_rfc_2253_order():
    certificate = {
        "subject": (
            (("countryName", "US"),),
            (("organizationName", "Example, Inc."),),
            (("organizationalUnitName", "eng"), ("userId", "7")),
            (("commonName", "alice"),),
        )
    }
    assert certificate_principal(certificate) == r"User:CN=alice,OU=eng+UID=7,O=Example\, Inc.,C=US"
    assert certificate_principal(None) == certificate_principal({}) == ANONYMOUS


@pytest.mark.parametrize(
    ("subject", "java"),  # what Java's X500Principal.getName() gives for these subjects (Kafka's principal)
    [
        (((("commonName", "a=b"),), (("organizationalUnitName", "x#y"),)), r"OU=x\#y,CN=a\=b"),
        (((("commonName", "alice"),), (("emailAddress", "a@b.c"),)), "1.2.840.113549.1.9.1=#16056140622e63,CN=alice"),
        (((("commonName", "alice"),), (("serialNumber", "12"),)), "2.5.4.5=#13023132,CN=alice"),
    ],
)
def test_a_certificates_principal_is_spelt_as_java_spells_it(subject, java):
    assert certificate_principal({"subject": subject}) == f"User:{java}"


def test_pem_files_and_inline_pem_give_the_same_server_and_a_client_trusts_it(tmp_path):
    authority = trustme.CA()
    server = authority.issue_cert("localhost")
    keystore = tmp_path / "server.pem"
    server.private_key_and_cert_chain_pem.write_to_path(str(keystore))
    config = node_config({"ssl.keystore.location": str(keystore)}).security
    inline = node_config(
        {
            "ssl.keystore.key": server.private_key_pem.bytes().decode(),
            "ssl.keystore.certificate.chain": "".join(blob.bytes().decode() for blob in server.cert_chain_pems),
        }
    ).security
    for context in (server_context(config), server_context(inline)):
        assert context.verify_mode == ssl.CERT_NONE
    authority_file = tmp_path / "ca.pem"
    authority.cert_pem.write_to_path(str(authority_file))
    assert client_context(str(authority_file)).check_hostname


def test_mutual_tls_needs_a_truststore_and_a_missing_keystore_is_named(tmp_path):
    with pytest.raises(ConfigError, match="ssl.keystore.location"):
        server_context(node_config({}).security)
    authority = trustme.CA()
    keystore = tmp_path / "server.pem"
    authority.issue_cert("localhost").private_key_and_cert_chain_pem.write_to_path(str(keystore))
    with pytest.raises(ConfigError, match="needs ssl.truststore"):
        server_context(node_config({"ssl.keystore.location": str(keystore), "ssl.client.auth": "required"}).security)
    with pytest.raises(ConfigError, match="nowhere.pem"):
        server_context(node_config({"ssl.keystore.location": str(tmp_path / "nowhere.pem")}).security)


def test_a_plaintext_listener_on_every_interface_is_warned_about(caplog):
    from zkcoord.server.node import CoordinatorNode

    with caplog.at_level(logging.WARNING, logger="zkcoord.server.node"):
        CoordinatorNode._warn_if_open("127.0.0.1", None)
        assert not caplog.records
        CoordinatorNode._warn_if_open("0.0.0.0", None)
    (warning,) = caplog.records
    assert "every interface" in warning.getMessage() and "docs/security.md" in warning.getMessage()
