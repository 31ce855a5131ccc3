"""The defaults zkcoord takes from the environment, all read here (docs/configuration.md, "Environment").

Each function reads its variable when called, so a test or a shell that sets one later is seen. An empty value
counts as unset. Imports nothing of zkcoord.
"""

import os

ZOOKEEPER_CONNECT = "ZKCOORD_ZK_CONNECT"  # host:port[,host:port][/chroot]: every command's --zookeeper default
ZOOKEEPER_BACKEND = "ZKCOORD_ZK_BACKEND"  # "docker": tests start ZooKeeper in a container, not from the jars
JAVA_HOME = "JAVA_HOME"  # the JDK the embedded ZooKeeper runs on (else java on PATH)
ZOOKEEPER_CLASSPATH = "ZOOKEEPER_CLASSPATH"  # ZooKeeper's jars (else pyspark's, else Debian's)
PEERS_CACHE = "ZKCOORD_PEERS_CACHE"  # where Maven puts Kafka's jars (else ~/.cache/zkcoord/peers)
# Read by the slow-fsync shim (zkcoord/faults/fsync_delay.c), in the processes a fault campaign starts with it.
FSYNC_DELAY_FILE = "ZKCOORD_FSYNC_DELAY_FILE"
KAFKA_OPTS = "KAFKA_OPTS"  # JVM options of Kafka's scripts: -Djava.security.auth.login.config=FILE for ZooKeeper


def _value(name: str) -> str | None:
    return os.environ.get(name) or None


def zookeeper_connect() -> str | None:
    return _value(ZOOKEEPER_CONNECT)


def zookeeper_backend() -> str | None:
    return _value(ZOOKEEPER_BACKEND)


def java_home() -> str | None:
    return _value(JAVA_HOME)


def zookeeper_classpath() -> str | None:
    return _value(ZOOKEEPER_CLASSPATH)


def peers_cache() -> str | None:
    return _value(PEERS_CACHE)


def kafka_opts() -> str | None:
    return _value(KAFKA_OPTS)
