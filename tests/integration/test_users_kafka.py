"""SCRAM shared with Kafka 3.9.2: what ``kafka-configs --zookeeper`` (ConfigCommand) writes authenticates on
zkcoord, what ``zkcoord users`` writes is what ConfigCommand shows, and Kafka's own SCRAM client and server
complete exchanges with zkcoord's."""

import base64
import subprocess
from pathlib import Path

import pytest
from kafka_tool_support import JVM_ENV, config_command
from scramp import ScramClient

from zkcoord import cli, peers
from zkcoord.auth.sasl import SaslClient, SaslServer
from zkcoord.auth.scram import make_credential
from zkcoord.errors import SaslAuthenticationFailedError
from zkcoord.peers.jvm import java_command
from zkcoord.zk import layout, users

# A TLS-style principal: sanitized in the znode name, escaped in SCRAM's client-first message.
USER = "CN=alice,O=ex ample"
# A soft hyphen, which SASLprep removes: Kafka hashes the password as typed.
PASSWORD_512 = "pass\u00adword"
# Kafka's ScramSaslClient, then its ScramSaslServer, talking base64 lines on stdin/stdout.
SCRAM_PEER = Path(__file__).parent.parent / "data" / "ScramPeer.java"


def scram_exchange(server: SaslServer, mechanism: str, user: str, password: str) -> None:
    """One SCRAM exchange between ``server`` and scramp's own client."""
    client = ScramClient([mechanism], user, password)
    server_first = server.evaluate(client.get_client_first().encode())
    client.set_server_first(server_first.decode())
    server_final = server.evaluate(client.get_client_final().encode())
    client.set_server_final(server_final.decode())


def test_a_user_made_by_kafka_configs_authenticates_on_zkcoord(zk, zk_connect):
    configs = f"SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password={PASSWORD_512}]"
    out = config_command(
        zk_connect, "--alter", "--add-config", configs, "--entity-type", "users", "--entity-name", USER
    )
    assert "Completed updating config" in out

    data, _ = zk.get(f"/config/users/{layout.sanitize_entity_name(USER)}")
    assert set(layout.decode_entity_config("user", data)) == {"SCRAM-SHA-256", "SCRAM-SHA-512"}
    (change,) = zk.get_children("/config/changes")
    assert zk.get(f"/config/changes/{change}")[0] == layout.encode_user_config_change(USER)

    credential = users.scram_credential(zk, USER, "SCRAM-SHA-256")
    assert credential.iterations == 8192
    server = SaslServer("SCRAM-SHA-256", lambda user, mechanism: users.scram_credential(zk, user, mechanism), {})
    scram_exchange(server, "SCRAM-SHA-256", USER, "alice-secret")
    assert server.complete and server.principal == f"User:{USER}"

    wrong = SaslServer("SCRAM-SHA-256", lambda user, mechanism: users.scram_credential(zk, user, mechanism), {})
    with pytest.raises(SaslAuthenticationFailedError):
        scram_exchange(wrong, "SCRAM-SHA-256", USER, "alice-secreT")

    kafkas = users.scram_credential(zk, USER, "SCRAM-SHA-512")
    assert make_credential("SCRAM-SHA-512", PASSWORD_512, kafkas.iterations, kafkas.salt) == kafkas


def test_kafka_configs_shows_what_zkcoord_users_writes(zk, zk_connect, capsys):
    configs = "SCRAM-SHA-256=[iterations=8192,password=bob-secret],SCRAM-SHA-512=[password=bob-secret]"
    add = ["users", "--zookeeper", zk_connect, "--alter", "--add-config", configs, "--entity-name", "bob"]
    assert cli.main(add) == 0
    delete = ["users", "--zookeeper", zk_connect, "--alter", "--delete-config", "SCRAM-SHA-512", "--entity-name", "bob"]
    assert cli.main(delete) == 0
    capsys.readouterr()

    out = config_command(zk_connect, "--describe", "--entity-type", "users", "--entity-name", "bob")
    credential = users.scram_credential(zk, "bob", "SCRAM-SHA-256")
    assert out.splitlines()[-1] == f"Configs for user-principal 'bob' are SCRAM-SHA-256={credential.format()}"


def test_kafkas_scram_client_and_server_complete_exchanges_with_zkcoords():
    mechanism, user, password = "SCRAM-SHA-512", "CN=bob,O=x", "bob-secret"
    credential = make_credential(mechanism, password, 8192)
    command = java_command(peers.BROKER, str(SCRAM_PEER), [mechanism, user, password, credential.format()])
    peer = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=JVM_ENV
    )

    def receive() -> bytes:
        line = peer.stdout.readline()
        assert line and not line.startswith(("client ", "server ")), line or peer.stderr.read()
        return base64.b64decode(line)

    def send(token: bytes) -> None:
        peer.stdin.write(base64.b64encode(token).decode() + "\n")
        peer.stdin.flush()

    try:
        server = SaslServer(mechanism, lambda name, mech: credential if (name, mech) == (user, mechanism) else None, {})
        send(server.evaluate(receive()))
        send(server.evaluate(receive()))
        assert peer.stdout.readline().strip() == "client complete true"
        assert server.principal == f"User:{user}"

        client = SaslClient(mechanism, user, password)
        send(client.first())
        send(client.evaluate(receive()))
        assert client.evaluate(receive()) is None and client.complete
        assert peer.stdout.readline().strip() == f"server complete {user}"
    finally:
        peer.kill()
        peer.communicate(timeout=30)
