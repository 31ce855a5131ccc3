"""The embedded ZooKeeper launcher and the test helpers that really expire and disconnect sessions."""

import contextlib

import pytest
from kazoo.client import KazooClient, KazooState

from zkcoord.errors import ZooKeeperNotFoundError, ZooKeeperStartError
from zkcoord.testing.zookeeper import (
    container_zookeeper,
    docker_unavailable_reason,
    drop_connection,
    expire_session,
    wait_until,
)
from zkcoord.zk.server import EmbeddedZooKeeper, find_java, four_letter_word


@contextlib.contextmanager
def _watched_client(connect):
    """A started client and the list of session states it went through."""
    client = KazooClient(hosts=connect, timeout=2.0)
    states = []
    client.add_listener(states.append)
    client.start(timeout=15)
    try:
        yield client, states
    finally:
        client.stop()
        client.close()


def test_expire_session_really_expires_it(zk_connect):
    with _watched_client(zk_connect) as (client, states):
        client.create("/mine", ephemeral=True)
        old_session = client.client_id[0]
        expire_session(client)
        wait_until(lambda: KazooState.LOST in states and client.connected, what="a new session")
        assert client.client_id[0] != old_session
        assert client.exists("/mine") is None


def test_drop_connection_keeps_the_session(zk_connect):
    with _watched_client(zk_connect) as (client, states):
        client.create("/mine", ephemeral=True)
        session = client.client_id[0]
        drop_connection(client)
        wait_until(lambda: KazooState.SUSPENDED in states and client.connected, what="a reconnect")
        assert client.client_id[0] == session and KazooState.LOST not in states
        assert client.exists("/mine").ephemeralOwner == session


def test_embedded_server_starts_serves_and_stops(tmp_path):
    server = EmbeddedZooKeeper(data_dir=tmp_path, tick_time_ms=100)
    with server:
        assert "Mode: standalone" in four_letter_word(server.host, server.port, "srvr")
        assert server.running
    assert not server.running
    with pytest.raises(OSError):
        four_letter_word(server.host, server.port, "srvr")


def test_unusable_classpath_fails_with_the_log(monkeypatch, tmp_path):
    monkeypatch.setenv("ZOOKEEPER_CLASSPATH", str(tmp_path / "nothing-here.jar"))
    with pytest.raises(ZooKeeperStartError, match="exited with code"):
        EmbeddedZooKeeper(data_dir=tmp_path).start(timeout=30)


def test_missing_java_says_how_to_get_it(monkeypatch):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(ZooKeeperNotFoundError, match="apt-get install openjdk-17-jre-headless"):
        find_java()


def test_zookeeper_in_a_container_when_a_docker_engine_answers():
    reason = docker_unavailable_reason()
    if reason:
        pytest.skip(f"needs a Docker engine: {reason}")
    with container_zookeeper() as connect, _watched_client(connect) as (client, _):
        client.create("/hello", b"world")
        assert client.get("/hello")[0] == b"world"
