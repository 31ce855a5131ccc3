"""One connection's SASL exchange, server and client, as Kafka's PlainSaslServer and ScramSaslServer answer it."""

import contextlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scramp import ScramClient

from zkcoord.auth.sasl import ENABLED_DEFAULT, SUPPORTED_MECHANISMS, SaslClient, SaslServer, check_mechanisms
from zkcoord.auth.scram import HASHES, ScramCredential, make_credential
from zkcoord.errors import ConfigError, ErrorCode, IllegalStateError, SaslAuthenticationFailedError

PASSWORDS = {"alice": "alice-secret", "a=b,c": "odd-name-secret"}
CREDENTIALS = {(user, m): make_credential(m, password) for user, password in PASSWORDS.items() for m in HASHES}
SCRAM = sorted(HASHES)


def invalid_credentials(mechanism: str) -> str:
    return f"Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}"


def server(mechanism: str, credentials=CREDENTIALS) -> SaslServer:
    return SaslServer(mechanism, lambda user, mech: credentials.get((user, mech)), PASSWORDS)


def exchange(sasl_server: SaslServer, client: SaslClient) -> None:
    """Run the exchange to its end, as a listener and a tool would."""
    token = client.first()
    while token is not None:
        token = client.evaluate(sasl_server.evaluate(token))


@pytest.mark.parametrize("mechanism", SUPPORTED_MECHANISMS)
@pytest.mark.parametrize("user", sorted(PASSWORDS))
def test_the_right_password_authenticates_both_sides(mechanism, user):
    sasl_server, client = server(mechanism), SaslClient(mechanism, user, PASSWORDS[user])
    exchange(sasl_server, client)
    assert sasl_server.complete and client.complete
    assert sasl_server.principal == f"User:{user}"


@pytest.mark.parametrize("mechanism", SCRAM)
@pytest.mark.parametrize("user", ["alice", "mallory"])
def test_a_wrong_password_or_unknown_user_gets_kafkas_generic_message(mechanism, user):
    sasl_server = server(mechanism)
    with pytest.raises(SaslAuthenticationFailedError) as failure:
        exchange(sasl_server, SaslClient(mechanism, user, "guess"))
    assert failure.value.message == invalid_credentials(mechanism)
    assert failure.value.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert user in failure.value.reason
    assert not sasl_server.complete


@pytest.mark.parametrize("user", ["alice", "mallory"])
def test_plain_refuses_a_wrong_password_or_unknown_user_alike(user):
    with pytest.raises(SaslAuthenticationFailedError, match="^Authentication failed: Invalid username or password$"):
        exchange(server("PLAIN"), SaslClient("PLAIN", user, "guess"))


@pytest.mark.parametrize(
    ("token", "message"),
    [
        (b"alice\0alice\0alice-secret", None),
        (b"bob\0alice\0alice-secret", "Client requested an authorization id that is different from username"),
        (b"alice\0alice-secret", "expected 3 tokens, got 2"),
        (b"\0alice\0alice-secret\0x\0y", "expected 3 tokens, got 4"),
        (b"\0\0alice-secret", "username not specified"),
        (b"\0alice\0", "password not specified"),
    ],
)
def test_plain_tokens_as_kafkas_plain_sasl_server_reads_them(token, message):
    sasl_server = server("PLAIN")
    if message is None:
        assert sasl_server.evaluate(token) == b"" and sasl_server.principal == "User:alice"
    else:
        with pytest.raises(SaslAuthenticationFailedError, match=message):
            sasl_server.evaluate(token)


def scram_messages(mechanism: str, user: str = "alice") -> tuple[SaslServer, ScramClient, bytes]:
    """A server and scramp's client after the first round: the client-final message, not yet sent."""
    sasl_server, client = server(mechanism), ScramClient([mechanism], user, PASSWORDS[user])
    client.set_server_first(sasl_server.evaluate(client.get_client_first().encode()).decode())
    return sasl_server, client, client.get_client_final().encode()


@pytest.mark.parametrize("mechanism", SCRAM)
def test_a_client_final_replayed_on_another_exchange_fails(mechanism):
    first_server, _, client_final = scram_messages(mechanism)
    first_server.evaluate(client_final)
    replay_server, _, _ = scram_messages(mechanism)
    with pytest.raises(SaslAuthenticationFailedError, match=invalid_credentials(mechanism)):
        replay_server.evaluate(client_final)


@pytest.mark.parametrize("mechanism", SCRAM)
@settings(max_examples=30)
@given(data=st.data())
def test_a_tampered_client_final_fails(mechanism, data):
    sasl_server, _, client_final = scram_messages(mechanism)
    position = data.draw(st.integers(0, len(client_final) - 1))
    replacement = data.draw(st.integers(0x21, 0x7E).filter(lambda byte: byte != client_final[position]))
    tampered = client_final[:position] + bytes([replacement]) + client_final[position + 1 :]
    with pytest.raises(SaslAuthenticationFailedError):
        sasl_server.evaluate(tampered)


@pytest.mark.parametrize("mechanism", SCRAM)
def test_a_token_after_the_end_is_an_illegal_state(mechanism):
    sasl_server, _, client_final = scram_messages(mechanism)
    sasl_server.evaluate(client_final)
    with pytest.raises(SaslAuthenticationFailedError) as failure:
        sasl_server.evaluate(client_final)
    assert failure.value.error_code == ErrorCode.ILLEGAL_SASL_STATE


def test_a_failed_exchange_stays_failed_and_has_no_principal():
    sasl_server = server("SCRAM-SHA-256")
    with pytest.raises(SaslAuthenticationFailedError):
        sasl_server.evaluate(b"n,,n=mallory,r=abc")
    with pytest.raises(SaslAuthenticationFailedError) as failure:
        sasl_server.evaluate(b"n,,n=alice,r=abc")
    assert failure.value.error_code == ErrorCode.ILLEGAL_SASL_STATE
    with pytest.raises(IllegalStateError):
        sasl_server.principal  # noqa: B018


@pytest.mark.parametrize(
    "client_first",
    [
        b"y,,n=alice,r=abc",  # Kafka's grammar has gs2 flag "n" only
        b"n,,n=al\xc3\xafce,r=abc",  # names are ASCII
        b"n,,n=al=ice,r=abc",  # '=' must be escaped
        b"n,,n=alice,r=a,b",
        b"n,,n=alice,r=abc,tokenauth=true",  # delegation tokens are not served
        b"n,a=alice,n=alice,r=abc",  # scramp refuses an authorization id, even the user's own
    ],
)
def test_a_client_first_message_refused(client_first):
    with pytest.raises(SaslAuthenticationFailedError, match=invalid_credentials("SCRAM-SHA-256")):
        server("SCRAM-SHA-256").evaluate(client_first)


def test_an_authorization_id_of_another_user_gets_kafkas_message():
    with pytest.raises(SaslAuthenticationFailedError, match="authorization id that is different from username"):
        server("SCRAM-SHA-256").evaluate(b"n,a=bob,n=alice,r=abc")


def test_a_store_that_fails_or_a_weak_credential_fails_the_exchange_only():
    def broken_store(user, mechanism):
        raise OSError("ZooKeeper is away")

    weak = {("alice", "SCRAM-SHA-256"): ScramCredential(b"0123456789abcdef", b"k", b"k", 4095)}
    for sasl_server in (SaslServer("SCRAM-SHA-256", broken_store, {}), server("SCRAM-SHA-256", weak)):
        with pytest.raises(SaslAuthenticationFailedError, match=invalid_credentials("SCRAM-SHA-256")):
            exchange(sasl_server, SaslClient("SCRAM-SHA-256", "alice", "alice-secret"))


@pytest.mark.parametrize("mechanism", SCRAM)
def test_the_client_refuses_a_server_that_does_not_know_the_credential(mechanism):
    sasl_server, client = server(mechanism), SaslClient(mechanism, "alice", "alice-secret")
    client_final = client.evaluate(sasl_server.evaluate(client.first()))
    server_final = sasl_server.evaluate(client_final)
    with pytest.raises(SaslAuthenticationFailedError):
        client.evaluate(server_final[:-4] + b"AAA=")
    assert not client.complete


def test_the_client_refuses_a_password_saslprep_would_change():
    with pytest.raises(ConfigError, match="SASLprep"):
        SaslClient("SCRAM-SHA-256", "alice", "pass\u00adword")


@pytest.mark.parametrize("mechanism", SUPPORTED_MECHANISMS)
@settings(max_examples=50)
@given(token=st.binary(max_size=200))
def test_random_tokens_only_raise_sasl_authentication_error(mechanism, token):
    with contextlib.suppress(SaslAuthenticationFailedError):
        server(mechanism).evaluate(token)


@settings(max_examples=20)
@given(
    user=st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=20),
    password=st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), min_size=1, max_size=20),
    mechanism=st.sampled_from(SUPPORTED_MECHANISMS),
)
def test_any_ascii_user_and_password_round_trip(user, password, mechanism):
    credentials = {(user, mechanism): make_credential(mechanism, password)} if mechanism in HASHES else {}
    sasl_server = SaslServer(mechanism, lambda name, mech: credentials.get((name, mech)), {user: password})
    exchange(sasl_server, SaslClient(mechanism, user, password))
    assert sasl_server.principal == f"User:{user}"


def test_enabled_mechanisms_are_checked():
    assert check_mechanisms(["SCRAM-SHA-512", " PLAIN", "SCRAM-SHA-512", ""]) == ("SCRAM-SHA-512", "PLAIN")
    with pytest.raises(ConfigError, match="GSSAPI not supported"):
        check_mechanisms(ENABLED_DEFAULT)
    with pytest.raises(ConfigError, match="empty"):
        check_mechanisms([])
    with pytest.raises(ConfigError):
        SaslServer("OAUTHBEARER", lambda user, mechanism: None, {})
