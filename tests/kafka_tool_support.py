"""Kafka 3.9.2's own kafka-configs and kafka-acls (ConfigCommand, AclCommand) against a ZooKeeper, for tests that
check zkcoord honours what Kafka's tools write. Each run is one short JVM (seconds)."""

import os
import subprocess

from zkcoord import peers
from zkcoord.peers.jvm import java_command

JVM_ENV = {**os.environ, "LC_ALL": "C.UTF-8"}  # arguments reach the JVM as UTF-8


def _run(main_class: str, args: list[str]) -> str:
    done = subprocess.run(
        java_command(peers.BROKER, main_class, args), capture_output=True, text=True, timeout=120, env=JVM_ENV
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def config_command(zk_connect: str, *args: str) -> str:
    """``kafka-configs --zookeeper zk_connect args``; its standard output."""
    return _run("kafka.admin.ConfigCommand", ["--zookeeper", zk_connect, *args])


def kafka_acls(zk_connect: str, *args: str) -> str:
    """``kafka-acls --authorizer-properties zookeeper.connect=zk_connect args``; its standard output."""
    return _run("kafka.admin.AclCommand", ["--authorizer-properties", f"zookeeper.connect={zk_connect}", *args])
