"""SCRAM credentials: Kafka's key derivation and its ZooKeeper text format."""

import base64
import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scramp import ScramMechanism

from zkcoord.auth.scram import InvalidCredentialError, ScramCredential, make_credential
from zkcoord.errors import ConfigError

# RFC 7677's example, which Kafka's ScramFormatterTest checks too.
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_FIRST = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_CLIENT_FINAL = (
    "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
RFC_SERVER_FINAL = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def test_a_credential_verifies_rfc_7677s_example_exchange():
    credential = make_credential("SCRAM-SHA-256", "pencil", 4096, RFC_SALT)
    auth_info = (credential.salt, credential.stored_key, credential.server_key, credential.iterations)
    server = ScramMechanism("SCRAM-SHA-256").make_server(lambda _user: auth_info, s_nonce=RFC_SERVER_NONCE)
    server.set_client_first(RFC_CLIENT_FIRST)
    server.get_server_first()
    server.set_client_final(RFC_CLIENT_FINAL)
    assert server.get_server_final() == RFC_SERVER_FINAL


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_an_ascii_password_gets_the_keys_scramp_makes(mechanism):
    salt = b"0123456789abcdef"
    credential = make_credential(mechanism, "alice-secret", 8192, salt)
    assert ScramMechanism(mechanism).make_auth_info("alice-secret", 8192, salt) == (
        salt,
        credential.stored_key,
        credential.server_key,
        8192,
    )


def test_the_password_is_hashed_as_typed_without_saslprep():
    # Kafka hashes the UTF-8 bytes (ScramFormatter.normalize); SASLprep would drop the soft hyphen.
    salt = b"0123456789abcdef"
    kafkas = make_credential("SCRAM-SHA-256", "pass\u00adword", 4096, salt)
    assert kafkas != make_credential("SCRAM-SHA-256", "password", 4096, salt)
    assert ScramMechanism("SCRAM-SHA-256").make_auth_info("pass\u00adword", 4096, salt)[1] != kafkas.stored_key


def test_the_text_is_kafkas_format():
    credential = ScramCredential(salt=b"\x00salt", stored_key=b"stored", server_key=b"server", iterations=4096)
    assert credential.format() == "salt=AHNhbHQ=,stored_key=c3RvcmVk,server_key=c2VydmVy,iterations=4096"


def test_the_fields_may_come_in_any_order_and_without_padding():
    text = "iterations=8192,server_key=c2VydmVy,stored_key=c3RvcmVk,salt=AHNhbHQ"
    assert ScramCredential.parse(text) == ScramCredential(b"\x00salt", b"stored", b"server", 8192)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "salt=AA==,stored_key=AA==,server_key=AA==",
        "salt=AA==,stored_key=AA==,server_key=AA==,iterations=4096,extra=1",
        "salt=AA==,stored_key=AA==,server_key=AA==,iterations=4096,",
        "salt=AA==,stored_key=AA==,server_key=AA==,iterations= 4096",
        "salt=AA==,stored_key=AA==,server_key=AA==,iterations=4_096",
        "salt=AA==,stored_key=AA==,server_key=AA==,iterations=99999999999",
        "salt=A*==,stored_key=AA==,server_key=AA==,iterations=4096",
        "=AA==,salt=AA==,stored_key=AA==,server_key=AA==,iterations=4096",
    ],
)
def test_text_kafka_would_refuse_is_refused(text):
    with pytest.raises(InvalidCredentialError):
        ScramCredential.parse(text)


def test_the_repr_keeps_the_keys_out():
    assert "stored" not in repr(make_credential("SCRAM-SHA-256", "x"))


def test_too_few_iterations_and_unknown_mechanisms_are_config_errors():
    with pytest.raises(ConfigError, match="less than the minimum 4096"):
        make_credential("SCRAM-SHA-256", "x", 4095)
    with pytest.raises(ConfigError, match="unknown SCRAM mechanism"):
        make_credential("SCRAM-SHA-1", "x")


def test_random_salts_differ():
    assert make_credential("SCRAM-SHA-256", "x").salt != make_credential("SCRAM-SHA-256", "x").salt


@given(
    salt=st.binary(max_size=64),
    stored_key=st.binary(max_size=64),
    server_key=st.binary(max_size=64),
    iterations=st.integers(-(2**31), 2**31 - 1),
)
def test_every_credential_parses_back_from_its_text(salt, stored_key, server_key, iterations):
    credential = ScramCredential(salt, stored_key, server_key, iterations)
    assert ScramCredential.parse(credential.format()) == credential


@given(st.text(max_size=80))
def test_any_text_parses_or_raises_invalid_credential(text):
    with contextlib.suppress(InvalidCredentialError):
        ScramCredential.parse(text)
