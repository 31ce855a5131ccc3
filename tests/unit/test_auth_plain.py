"""Kafka's JAAS property for SASL/PLAIN, read as Kafka's JaasConfig reads it."""

import pytest

from zkcoord.auth.plain import JaasEntry, client_credentials, parse_jaas_config, plain_users
from zkcoord.errors import ConfigError

MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SERVER = (
    f'{MODULE} required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";'
)


def test_a_servers_users_are_its_user_options():
    assert plain_users(SERVER) == {"admin": "admin-secret", "alice": "alice-secret"}


def test_a_clients_credentials_are_username_and_password():
    assert client_credentials(SERVER) == ("admin", "admin-secret")


def test_quotes_escapes_comments_and_words():
    value = f"""
        // a comment
        {MODULE} REQUIRED /* another */
            user_bob='single quoted' user_carol="say \\"hi\\"\\\\" user_dave=plain-word_$1.x;
    """
    (entry,) = parse_jaas_config(value)
    assert entry == JaasEntry(
        MODULE, "required", {"user_bob": "single quoted", "user_carol": 'say "hi"\\', "user_dave": "plain-word_$1.x"}
    )


def test_several_entries_are_read_but_plain_wants_one():
    two = f'{MODULE} required user_a="1"; other.Module optional;'
    assert [entry.login_module for entry in parse_jaas_config(two)] == [MODULE, "other.Module"]
    with pytest.raises(ConfigError, match="contains 2 login modules, should be 1 module"):
        plain_users(two)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("", "login module not specified"),
        (MODULE, "control flag not specified"),
        (f"{MODULE} mandatory;", "invalid login module control flag"),
        (f'{MODULE} required user_a="x"', "not terminated by semi-colon"),
        (f"{MODULE} required user_a=;", "value not specified for key 'user_a'"),
        (f"{MODULE} required user_a=123;", "value not specified for key 'user_a'"),
        (f"{MODULE} required user_a;", "value not specified for key 'user_a'"),
        ('org.example.Other required user_a="x";', "not org.apache.kafka.common.security.plain.PlainLoginModule"),
    ],
)
def test_a_malformed_value_is_a_clear_config_error(value, message):
    with pytest.raises(ConfigError, match=message):
        plain_users(value)


def test_a_client_value_without_a_password_is_a_config_error():
    with pytest.raises(ConfigError, match="no password"):
        client_credentials(f'{MODULE} required username="alice";')
