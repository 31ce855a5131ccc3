"""A real Kafka broker (3.9, ZooKeeper mode) in a child JVM, on loopback (docs/peers.md).

Configured so that unmodified 0.8.2 consumers can read from it: a PLAINTEXT listener with an explicit host
(the registration under ``/brokers/ids`` then carries the ``host``/``port`` 0.8.2 reads) and message
down-conversion on (0.8.2 fetches v0 messages). Topics are left to Kafka's own admin API, so
``/brokers/topics`` is written by Kafka.
"""

import logging
import os
import shutil
import socket
import subprocess
import tempfile
import time
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


class KafkaBroker:
    """One Kafka 3.9 broker on ``zookeeper_connect`` (which may end in a chroot); also a context manager.

    ``overrides`` are server properties laid over the defaults (Kafka's names). The data directory is
    temporary, and removed on stop, unless ``data_dir`` is given.
    """

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
        self.zookeeper_connect = zookeeper_connect
        self.host = host
        self.port = port or free_port(host)
        self.broker_id = broker_id
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

    def properties(self) -> dict[str, str]:
        """The broker's server properties: short timeouts and one replica, for one machine."""
        listener = f"PLAINTEXT://{self.host}:{self.port}"
        return {
            "broker.id": str(self.broker_id),
            "listeners": listener,
            "advertised.listeners": listener,
            "log.dirs": str(self.data_dir / "logs"),
            "zookeeper.connect": self.zookeeper_connect,
            "zookeeper.session.timeout.ms": "6000",
            "log.message.downconversion.enable": "true",
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

    def _write_config(self) -> Path:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        (self.data_dir / "log4j.properties").write_text(_LOG4J_CONFIG.format(log=self.log_path))
        config = self.data_dir / "server.properties"
        config.write_text("".join(f"{key}={value}\n" for key, value in self.properties().items()))
        return config

    def start(self, timeout: float = 90.0) -> "KafkaBroker":
        """Start the JVM and wait until the broker is registered in ZooKeeper and accepts connections."""
        classpath = peers.classpath(peers.BROKER)
        config = self._write_config()
        command = [
            find_java(),
            f"-Xmx{self.heap_mb}m",
            "-Xms64m",
            "-XX:+UseSerialGC",
            "-Djava.awt.headless=true",
            f"-Dlog4j.configuration=file:{self.data_dir / 'log4j.properties'}",
            "-cp",
            classpath,
            "kafka.Kafka",
            str(config),
        ]
        output = open(self.data_dir / "broker.out", "wb")  # noqa: SIM115 - the child keeps writing to it
        with output:
            self._process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while not self._serving():
            if self._process.poll() is not None:
                status = self._process.returncode
                raise BrokerStartError(f"the Kafka broker exited with status {status}: {self._tail()}")
            if time.monotonic() > deadline:
                self.stop()
                raise BrokerStartError(f"the Kafka broker did not serve {self.bootstrap} within {timeout:.0f}s")
            time.sleep(0.2)
        log.info("Kafka broker %d serving %s on %s", self.broker_id, self.bootstrap, self.zookeeper_connect)
        return self

    def _serving(self) -> bool:
        try:
            with socket.create_connection((self.host, self.port), timeout=0.5):
                pass
        except OSError:
            return False
        with started_client(self.zookeeper_connect, timeout=10) as client:
            return client.exists(f"{layout.BROKER_IDS_PATH}/{self.broker_id}") is not None

    def _tail(self, lines: int = 30) -> str:
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

    def __enter__(self) -> "KafkaBroker":
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()
