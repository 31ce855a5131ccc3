"""A real Kafka 4 broker in KRaft combined mode (broker and controller in one JVM), on loopback (docs/peers.md).

No ZooKeeper: the broker is its own single-voter controller quorum. Its storage is formatted with a random
cluster id before the first start (Kafka's ``kafka-storage format``). Both group protocols are served: the
classic one (JoinGroup/SyncGroup) and KIP-848's consumer protocol (ConsumerGroupHeartbeat, assignments computed
by the broker). The broker is ready when it logs Kafka's started message, which it does once it has caught up
with the metadata log and been unfenced.
"""

import base64
import os
import subprocess
import uuid
from pathlib import Path

from zkcoord import peers
from zkcoord.peers.broker import BrokerProcess, BrokerStartError
from zkcoord.zk.server import free_port

NODE_ID = 1
STARTED_MESSAGE = "Kafka Server started"  # logged by kafka.server.KafkaRaftServer once the broker is unfenced
FORMAT_TIMEOUT_S = 60

_LOG4J2_CONFIG = """status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.file.ref = file
logger.started.name = kafka.server.KafkaRaftServer
logger.started.level = INFO
"""


def random_cluster_id() -> str:
    """A cluster id as Kafka's ``Uuid.randomUuid`` makes one: 16 random bytes in URL-safe base64, unpadded, never
    starting with '-' (a command line would read it as an option)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not text.startswith("-"):
            return text


class KraftBroker(BrokerProcess):
    """One Kafka 4 broker and controller (``process.roles=broker,controller``), with a controller listener on a
    port of its own; also a context manager."""

    peer = peers.KAFKA4

    def __init__(
        self,
        port: int = 0,
        host: str = "127.0.0.1",
        controller_port: int = 0,
        data_dir: str | os.PathLike | None = None,
        heap_mb: int = 256,
        overrides: dict[str, str] | None = None,
    ):
        super().__init__(port, host, data_dir, heap_mb, overrides)
        self.controller_port = controller_port or free_port(host)
        self.cluster_id = random_cluster_id()

    def properties(self) -> dict[str, str]:
        controller = f"{self.host}:{self.controller_port}"
        return {
            "process.roles": "broker,controller",
            "node.id": str(NODE_ID),
            "controller.quorum.voters": f"{NODE_ID}@{controller}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "group.coordinator.rebalance.protocols": "classic,consumer",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            **super().properties(),
        }

    def listeners(self) -> str:
        return f"{self.listener},CONTROLLER://{self.host}:{self.controller_port}"

    def logging_options(self) -> list[str]:
        config = self.data_dir / "log4j2.properties"
        config.write_text(_LOG4J2_CONFIG.format(log=self.log_path))
        return [f"-Dlog4j2.configurationFile={config}"]

    def prepare(self, config: Path) -> None:
        """Format the log directories with this broker's cluster id, once (Kafka's ``kafka-storage format``)."""
        if (self.data_dir / "logs" / "meta.properties").exists():
            return
        command = self.java(
            "kafka.tools.StorageTool", ["format", "--cluster-id", self.cluster_id, "--config", str(config)]
        )
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=FORMAT_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            raise BrokerStartError(f"formatting {self.data_dir} did not finish within {FORMAT_TIMEOUT_S}s") from None
        if done.returncode != 0:
            output = "\n".join((done.stdout + done.stderr).strip().splitlines()[-20:])
            raise BrokerStartError(f"formatting {self.data_dir} failed ({done.returncode}): {output}")

    def serving(self) -> bool:
        return self.log_path.exists() and STARTED_MESSAGE in self.log_path.read_text(errors="replace")
