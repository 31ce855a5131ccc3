"""Kafka's own jars through Maven into the cache, and ``zkcoord kafka start`` (docs/peers.md)."""

import os
import signal
import socket
import subprocess
import sys
import uuid

import pytest
from kazoo.client import KazooClient

from zkcoord import peers
from zkcoord.testing.zookeeper import fresh_chroot, wait_until


def test_a_cached_peer_is_reused_without_maven(monkeypatch):
    folder = peers.fetch(peers.LEGACY_CONSUMER)  # set-up resolved it; resolves now if not
    monkeypatch.setenv("PATH", "/nonexistent")
    assert peers.fetch(peers.LEGACY_CONSUMER) == folder
    assert (folder / "kafka_2.10-0.8.2.2.jar").is_file()
    assert peers.classpath(peers.LEGACY_CONSUMER) == f"{folder}/*"


def test_the_member_driver_is_compiled_once_and_set_up_says_where(monkeypatch, capsys):
    from zkcoord import cli
    from zkcoord.peers import driver

    assert cli.main(["peers", "fetch"]) == 0  # set-up compiled it; compiles now if not
    classes = driver.compiled_driver()
    assert f"LegacyMember.java: ready in {classes}" in capsys.readouterr().out
    assert (classes / "LegacyMember.class").is_file() and classes.parent == peers.cache_root()
    monkeypatch.setenv("PATH", "/nonexistent")  # no javac: the cache must do
    assert driver.compiled_driver() == classes


def test_without_javac_the_driver_says_a_jdk_is_needed(monkeypatch, tmp_path):
    from zkcoord.peers import driver

    monkeypatch.setattr(driver, "SOURCE", tmp_path / "LegacyMember.java")  # a source never compiled
    driver.SOURCE.write_text("public final class LegacyMember {}\n")
    monkeypatch.setattr(driver, "find_java", lambda: str(tmp_path / "jre" / "bin" / "java"))
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(peers.PeerUnavailableError, match="needs a JDK"):
        driver.compiled_driver()


def test_without_maven_set_up_says_what_is_missing(monkeypatch, tmp_path):
    monkeypatch.setenv("ZKCOORD_PEERS_CACHE", str(tmp_path))
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(peers.PeerUnavailableError, match=r"Maven \(mvn\) is not on PATH"):
        peers.fetch(peers.BROKER)
    assert not peers.is_cached(peers.BROKER)


def test_an_unresolvable_artifact_is_named_with_maven_s_reason(monkeypatch, tmp_path):
    fake = tmp_path / "bin" / "mvn"
    fake.parent.mkdir()
    fake.write_text(
        "#!/bin/sh\n"
        "echo '[INFO] Scanning for projects...'\n"
        "echo '[ERROR] Failed to execute goal on project zkcoord-peers: Could not resolve dependencies: "
        "Could not find artifact org.apache.kafka:kafka_2.13:jar:3.9.2 in central'\n"
        "echo '[ERROR] Re-run Maven using the -X switch to enable full debug logging.'\n"
        "exit 1\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("ZKCOORD_PEERS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(fake.parent))
    with pytest.raises(peers.PeerUnavailableError) as raised:
        peers.fetch(peers.BROKER)
    message = str(raised.value)
    assert message.startswith("Maven could not resolve org.apache.kafka:kafka_2.13:3.9.2 (a Kafka broker")
    assert "Could not find artifact org.apache.kafka:kafka_2.13:jar:3.9.2 in central" in message
    assert "Re-run Maven" not in message
    assert not any((tmp_path / "cache").glob("kafka-*")), "a failed resolution leaves nothing behind"


def test_kafka_start_runs_a_broker_that_registers_in_zookeeper_until_ctrl_c(zk_server):
    connect = fresh_chroot(zk_server, prefix="kafka-cli")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, "-m", "zkcoord.cli", "kafka", "start", "--zookeeper", connect, "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    client = KazooClient(hosts=connect)
    client.start(timeout=15)
    try:
        banner = process.stdout.readline()
        assert f"serving PLAINTEXT://127.0.0.1:{port}" in banner and "not a production broker" in banner
        wait_until(lambda: client.exists("/brokers/ids/0") is not None, timeout=30, what="the broker to register")
        assert b'"host":"127.0.0.1"' in client.get("/brokers/ids/0")[0]
        process.send_signal(signal.SIGINT)
        assert process.wait(60) == 130
        assert "Kafka broker stopped" in process.stdout.read()
        wait_until(lambda: client.exists("/brokers/ids/0") is None, timeout=30, what="the registration to go")
    finally:
        if process.poll() is None:
            process.kill()
        client.stop()
        client.close()


def test_topics_made_by_zkcoord_beside_a_real_controller_come_online(kafka):
    """``zkcoord topics create|alter`` leaves leader election to Kafka's controller, as ``kafka-topics`` does."""
    from zkcoord import cli

    topic = f"made-by-zkcoord-{uuid.uuid4().hex[:8]}"
    zookeeper = ["--zookeeper", kafka.zk_connect]
    assert cli.main(["topics", "create", topic, "--partitions", "2", *zookeeper]) == 0
    assert cli.main(["topics", "alter", "--topic", topic, "--partitions", "3", *zookeeper]) == 0
    for partition in range(3):
        kafka.produce(topic, [b"x"] * (partition + 1), partition=partition)
    assert kafka.end_offsets(topic) == {0: 1, 1: 2, 2: 3}


def test_kafka_produce_sends_each_line_with_kafka_s_console_producer(kafka):
    topic = f"produced-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(topic, 1)
    done = subprocess.run(
        [sys.executable, "-m", "zkcoord.cli", "kafka", "produce", "--bootstrap-server", kafka.bootstrap]
        + ["--topic", topic],
        input="".join(f"line {i}\n" for i in range(25)),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert kafka.end_offsets(topic) == {0: 25}
