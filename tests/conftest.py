import logging
import os
import signal

import pytest
from hypothesis import settings
from kazoo.client import KazooClient
from spark_support import SMALL_JOBS

from zkcoord.testing.zookeeper import fresh_chroot, zookeeper_for_tests

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
logging.getLogger("kazoo").setLevel(logging.WARNING)
# Tests Ctrl-C the processes they start. A suite started in the background of a shell without job control inherits
# SIGINT ignored, and so would every child; a handler (unlike SIG_IGN) is reset to the default on exec.
signal.signal(signal.SIGINT, signal.default_int_handler)
# Two shared cores: a per-example time limit fails tests for the machine's load, not for the code.
settings.register_profile("zkcoord", deadline=None)
settings.load_profile("zkcoord")


@pytest.fixture(scope="session")
def zk_server():
    """One ZooKeeper for the whole test session (embedded unless ZKCOORD_ZK_CONNECT says otherwise)."""
    with zookeeper_for_tests() as connect:
        yield connect


@pytest.fixture(scope="session")
def spark():
    """One local Spark session for every pipeline test: starting the JVM costs seconds, the tiny jobs do not."""
    from zkcoord.pipeline.spark import spark_session

    session = spark_session("zkcoord-tests", "local[2]")
    for key, value in SMALL_JOBS.items():
        session.conf.set(key, value)
    yield session
    session.stop()


@pytest.fixture
def zk_connect(zk_server):
    """A connect string with a fresh, empty chroot for this test."""
    return fresh_chroot(zk_server)


@pytest.fixture
def zk(zk_connect):
    """A plain (threading) kazoo client on the test's chroot, for arranging and checking znodes."""
    client = KazooClient(hosts=zk_connect)
    client.start(timeout=15)
    yield client
    client.stop()
    client.close()


@pytest.fixture(scope="session")
def kafka(zk_server):
    """One real Kafka 3.9 broker (ZooKeeper mode) for the session, in its own chroot of the test ZooKeeper.

    Groups that read it live in ``kafka.zk_connect`` (0.8.2 members read ``/brokers`` in their own chroot),
    so tests that use it differ by topic and group name.
    """
    from zkcoord.testing.kafka_broker import kafka_cluster

    with kafka_cluster(zk_server) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def kafka4():
    """One real Kafka 4 broker (KRaft mode, no ZooKeeper) for the session, serving KIP-848's consumer protocol.

    Its groups' session timeout and heartbeat interval are a comparison run's defaults (the consumer protocol
    takes them from the broker), so ``compare run`` may be given it. Tests that use it differ by
    topic and group name.
    """
    from zkcoord.compare.kafka4 import broker_properties
    from zkcoord.compare.runner import CompareOptions
    from zkcoord.compare.scenarios import Workload
    from zkcoord.testing.kafka_broker import kraft_cluster

    timings = broker_properties(Workload().session_timeout_ms, CompareOptions.heartbeat_interval_ms)
    with kraft_cluster(overrides=timings) as cluster:
        yield cluster
