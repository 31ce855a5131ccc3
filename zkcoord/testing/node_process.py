"""One ``zkcoord coordinator start`` process bound to 127.0.0.1, for tests, benchmarks and comparison runs.

Its log goes to a file; a thread reads its stdout for the "serving on" line. :meth:`NodeProcess.close` kills
whatever is still running.
"""

import contextlib
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from zkcoord.zk.server import free_port_block

HOST = "127.0.0.1"
STARTUP_SECONDS = 30.0


class NodeProcess:
    """One coordinator node process; ``metrics_port`` serves its Prometheus metrics when given.

    ``port`` 0 lets the node pick a free port; ``kafka_port`` serves Kafka's protocol too (docs/kafka-protocol.md;
    its gateway ports come from the overrides); ``advertised_port`` is the port it registers for clients (a proxy
    in front of it), ``env`` extra environment for the process (an LD_PRELOAD shim, :mod:`zkcoord.faults.fsync`).
    """

    def __init__(
        self,
        node_id: int,
        zk_connect: str,
        log_dir: Path,
        overrides: dict,
        workdir: Path,
        log_level: str = "INFO",
        metrics_port: int | None = None,
        advertised_port: int | None = None,
        env: dict | None = None,
        port: int = 0,
        kafka_port: int | None = None,
    ):
        self.node_id = node_id
        self.log_path = workdir / f"node-{node_id}.log"
        self.metrics_port = metrics_port
        command = [sys.executable, "-m", "zkcoord.cli", "--log-level", log_level, "coordinator", "start"]
        command += ["--node-id", str(node_id), "--host", HOST, "--port", str(port)]
        command += ["--zookeeper", zk_connect, "--log-dir", str(log_dir)]
        if metrics_port is not None:
            command += ["--metrics-port", str(metrics_port)]
        if advertised_port is not None:
            command += ["--advertised-port", str(advertised_port)]
        if kafka_port is not None:
            command += ["--kafka-port", str(kafka_port)]
        for key, value in overrides.items():
            command += ["--override", f"{key}={value}"]
        with open(self.log_path, "ab") as log_file:  # a restarted node keeps its predecessor's log
            self.process = subprocess.Popen(
                command,
                stdout=subprocess.PIPE,
                stderr=log_file,
                stdin=subprocess.DEVNULL,
                text=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
                start_new_session=True,  # Ctrl-C reaches whoever started it, which stops it in its own order
            )
        self.port: int | None = None
        self.kafka_port: int | None = None  # the Kafka listener's, when it serves one
        self._serving = threading.Event()
        self._reader = threading.Thread(target=self._read_stdout, daemon=True)
        self._reader.start()

    def _read_stdout(self) -> None:
        for line in self.process.stdout:
            if "kafka listener on" in line:
                self.kafka_port = int(line.strip().rsplit(":", 1)[1])
            if "serving on" in line and self.port is None:
                self.port = int(line.strip().rsplit(":", 1)[1])
                self._serving.set()
        self._serving.set()  # the process ended: stop waiting

    @property
    def kafka_bootstrap(self) -> str:
        """``host:port`` of its Kafka listener, where Kafka clients bootstrap."""
        assert self.kafka_port is not None, f"node {self.node_id} serves no Kafka listener"
        return f"{HOST}:{self.kafka_port}"

    @property
    def address(self) -> tuple[str, int]:
        assert self.port is not None, f"node {self.node_id} is not serving"
        return HOST, self.port

    def wait_serving(self, timeout: float = STARTUP_SECONDS) -> int:
        self._serving.wait(timeout)
        if self.port is None:
            raise AssertionError(f"node {self.node_id} did not start (exit {self.process.poll()}):\n{self.log_tail()}")
        return self.port

    def alive(self) -> bool:
        return self.process.poll() is None

    def signal(self, signum: int) -> None:
        self.process.send_signal(signum)

    def kill(self) -> None:
        """SIGKILL and reap."""
        if self.alive():
            os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM (a graceful shutdown: the node's ZooKeeper registrations go at once), SIGKILL if it hangs."""
        if self.alive():
            self.signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout)
        self.close()

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError, subprocess.TimeoutExpired):
            self.kill()
        self._reader.join(timeout=5)
        self.process.stdout.close()


GATEWAY_PORTS = 8  # upstream broker ids 0..7 (zkcoord.gateway.lowest.broker.id defaults to 0)


def kafka_node(node_id: int, zk_connect: str, log_dir: Path, overrides: dict, workdir: Path, **options) -> NodeProcess:
    """A node serving Kafka's protocol too, on free ports: its Kafka port, then :data:`GATEWAY_PORTS` gateway
    ports. ``zk_connect`` must be the data brokers' ZooKeeper (chroot included): the gateway finds them there."""
    first = free_port_block(HOST, 1 + GATEWAY_PORTS)
    overrides = {**overrides, "zkcoord.gateway.port.range": f"{first + 1}-{first + GATEWAY_PORTS}"}
    return NodeProcess(node_id, zk_connect, log_dir, overrides, workdir, kafka_port=first, **options)
