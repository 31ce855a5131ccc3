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

HOST = "127.0.0.1"
STARTUP_SECONDS = 30.0


class NodeProcess:
    """One coordinator node process; ``metrics_port`` serves its Prometheus metrics when given.

    ``port`` 0 lets the node pick a free port; ``advertised_port`` is the port it registers for clients (a proxy
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
        self._serving = threading.Event()
        self._reader = threading.Thread(target=self._read_stdout, daemon=True)
        self._reader.start()

    def _read_stdout(self) -> None:
        for line in self.process.stdout:
            if "serving on" in line and self.port is None:
                self.port = int(line.strip().rsplit(":", 1)[1])
                self._serving.set()
        self._serving.set()  # the process ended: stop waiting

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
