"""Real Kafka brokers in child JVMs, on loopback (docs/peers.md): what every kind shares, and a 3.9 broker in
ZooKeeper mode.

:class:`BrokerProcess` writes a broker's server properties and logging configuration into its data directory,
starts the JVM, waits until the broker serves (showing the tail of its log when it does not), and stops it. The
ZooKeeper-mode :class:`KafkaBroker` is configured so that unmodified 0.8.2 consumers can read from it: a PLAINTEXT
listener with an explicit host (the registration under ``/brokers/ids`` then carries the ``host``/``port`` 0.8.2
reads) and message down-conversion on (0.8.2 fetches v0 messages). Topics are left to Kafka's own admin API, so
``/brokers/topics`` is written by Kafka. The KRaft broker is zkcoord.peers.kraft's.
"""

import logging
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from zkcoord import peers
from zkcoord.errors import ZkcoordError
from zkcoord.zk import layout
from zkcoord.zk.client import started_client
from zkcoord.zk.server import find_java, free_port

log = logging.getLogger(__name__)

_LOG4J_CONFIG = """log4j.rootLogger=WARN, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File={log}
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.server.KafkaServer=INFO
"""


class BrokerStartError(ZkcoordError):
    """The broker did not come up; the message carries the tail of its log."""


class BrokerProcess:
    """One Kafka broker JVM of ``peer``'s jars; also a context manager. Subclasses give its properties, its
    logging configuration and when it serves.

    ``overrides`` are server properties laid over the defaults (Kafka's names). The data directory is
    temporary, and removed on stop, unless ``data_dir`` is given.
    """

    peer: peers.Peer
    main_class = "kafka.Kafka"

    def __init__(
        self,
        port: int = 0,
        host: str = "127.0.0.1",
        data_dir: str | os.PathLike | None = None,
        heap_mb: int = 256,
        overrides: dict[str, str] | None = None,
    ):
        self.host = host
        self.port = port or free_port(host)
        self._owns_data_dir = data_dir is None
        self.data_dir = Path(data_dir) if data_dir is not None else Path(tempfile.mkdtemp(prefix="zkcoord-kafka-"))
        self.heap_mb = heap_mb
        self.overrides = dict(overrides or {})
        self._process: subprocess.Popen | None = None

    @property
    def bootstrap(self) -> str:
        """``host:port``, what a client's ``bootstrap.servers`` takes."""
        return f"{self.host}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "broker.log"

    @property
    def listener(self) -> str:
        """The listener clients use, the one the broker advertises."""
        return f"PLAINTEXT://{self.host}:{self.port}"

    def listeners(self) -> str:
        """Every listener the broker binds."""
        return self.listener

    def properties(self) -> dict[str, str]:
        """The broker's server properties: short timeouts and one replica, for one machine."""
        return {
            "listeners": self.listeners(),
            "advertised.listeners": self.listener,
            "log.dirs": str(self.data_dir / "logs"),
            "auto.create.topics.enable": "false",
            "delete.topic.enable": "true",
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "4",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "num.network.threads": "2",
            "num.io.threads": "2",
            "num.recovery.threads.per.data.dir": "1",
            "log.flush.interval.messages": str(2**63 - 1),
            **self.overrides,
        }

    def logging_options(self) -> list[str]:
        """JVM options that send the broker's log to :attr:`log_path` (the configuration written first)."""
        raise NotImplementedError

    def prepare(self, config: Path) -> None:
        """What must happen before the broker's first start (nothing, unless a subclass says so)."""

    def serving(self) -> bool:
        """Whether the started broker serves clients."""
        raise NotImplementedError

    def java(self, main_class: str, args: Sequence[str]) -> list[str]:
        """``java ... main_class args`` on the peer's jars, with the broker's heap and logging."""
        return [
            find_java(),
            f"-Xmx{self.heap_mb}m",
            "-Xms64m",
            "-XX:+UseSerialGC",
            "-Djava.awt.headless=true",
            *self.logging_options(),
            "-cp",
            peers.classpath(self.peer),
            main_class,
            *args,
        ]

    def _write_config(self) -> Path:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        config = self.data_dir / "server.properties"
        config.write_text("".join(f"{key}={value}\n" for key, value in self.properties().items()))
        return config

    def start(self, timeout: float = 90.0) -> "BrokerProcess":
        """Start the JVM and wait until the broker serves."""
        config = self._write_config()
        self.prepare(config)
        output = open(self.data_dir / "broker.out", "wb")  # noqa: SIM115 - the child keeps writing to it
        with output:
            self._process = subprocess.Popen(
                self.java(self.main_class, [str(config)]),
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
            )
        try:
            self._wait_serving(timeout)
        except BaseException:  # Ctrl-C too: a broker that never served is not left running
            self.stop()
            raise
        log.info("Kafka broker (%s) serving %s", self.peer.artifact, self.bootstrap)
        return self

    def _wait_serving(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not self.accepts_connections() or not self.serving():
            if self._process.poll() is not None:
                status = self._process.returncode
                raise BrokerStartError(f"the Kafka broker exited with status {status}: {self.tail()}")
            if time.monotonic() > deadline:
                raise BrokerStartError(
                    f"the Kafka broker did not serve {self.bootstrap} within {timeout:.0f}s: {self.tail()}"
                )
            time.sleep(0.2)

    def accepts_connections(self) -> bool:
        try:
            with socket.create_connection((self.host, self.port), timeout=0.5):
                return True
        except OSError:
            return False

    def tail(self, lines: int = 30) -> str:
        """The last lines of the broker's output and log."""
        text = ""
        for path in (self.data_dir / "broker.out", self.log_path):
            if path.exists():
                text += path.read_text(errors="replace")
        return "\n".join(text.strip().splitlines()[-lines:])

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def wait(self) -> int:
        """Block until the broker exits; its exit status."""
        assert self._process is not None, "the broker was never started"
        return self._process.wait()

    def stop(self, timeout: float = 20.0) -> None:
        """Stop the broker (a controlled shutdown, then a kill) and remove a temporary data directory."""
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(10)
        if self._owns_data_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()


class KafkaBroker(BrokerProcess):
    """One Kafka 3.9 broker on ``zookeeper_connect`` (which may end in a chroot)."""

    peer = peers.BROKER

    def __init__(
        self,
        zookeeper_connect: str,
        port: int = 0,
        host: str = "127.0.0.1",
        broker_id: int = 0,
        data_dir: str | os.PathLike | None = None,
        heap_mb: int = 256,
        overrides: dict[str, str] | None = None,
    ):
        super().__init__(port, host, data_dir, heap_mb, overrides)
        self.zookeeper_connect = zookeeper_connect
        self.broker_id = broker_id

    def properties(self) -> dict[str, str]:
        return {
            "broker.id": str(self.broker_id),
            "zookeeper.connect": self.zookeeper_connect,
            "zookeeper.session.timeout.ms": "6000",
            "log.message.downconversion.enable": "true",
            **super().properties(),
        }

    def logging_options(self) -> list[str]:
        config = self.data_dir / "log4j.properties"
        config.write_text(_LOG4J_CONFIG.format(log=self.log_path))
        return [f"-Dlog4j.configuration=file:{config}"]

    def serving(self) -> bool:
        """Registered in ZooKeeper (it accepts connections: :meth:`start` checked)."""
        with started_client(self.zookeeper_connect, timeout=10) as client:
            return client.exists(f"{layout.BROKER_IDS_PATH}/{self.broker_id}") is not None
