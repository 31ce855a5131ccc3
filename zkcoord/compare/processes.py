"""The processes a comparison runs and what it reads off them: member processes, node metrics, ZooKeeper's
counters, the members' trace files."""

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from zkcoord.compare.member import READY
from zkcoord.testing.node_process import HOST, NodeProcess
from zkcoord.zk.server import four_letter_word

log = logging.getLogger(__name__)


class RunFailed(Exception):
    """A step did not settle, or the members did not catch up, in time."""


POLL_TICK_S = 0.05


def poll_until(what: str, check: Callable[[], object], timeout: float) -> float:
    """Call ``check`` (what is still wrong; it may raise) until it finds nothing; returns the seconds it took.

    :class:`RunFailed` names ``what`` and what was still wrong after ``timeout`` seconds."""
    started = time.monotonic()
    while True:
        left = check()
        if not left:
            return time.monotonic() - started
        if time.monotonic() - started > timeout:
            raise RunFailed(f"{what} not reached in {timeout:.0f} s: {left}")
        time.sleep(POLL_TICK_S)


class MemberProcess:
    """A ``python -m zkcoord.compare.member`` process: started, then closed, killed, stopped or continued."""

    def __init__(self, spec: dict, log_path: Path):
        self.spec = spec
        self.instance = spec["instance"]
        with open(log_path, "ab") as log_file:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "zkcoord.compare.member", json.dumps(spec)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log_file,
                text=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
                start_new_session=True,  # Ctrl-C reaches the runner, which closes its members in order
            )
        self.log_path = log_path

    def wait_ready(self, timeout: float) -> None:
        ready = threading.Event()

        def read() -> None:
            for line in self.process.stdout:
                if line.strip() == READY:
                    ready.set()
                    return

        threading.Thread(target=read, daemon=True).start()
        if not ready.wait(timeout):
            tail = self.log_path.read_text(errors="replace")[-2000:]
            raise RunFailed(f"member {self.instance} did not start in {timeout:.0f} s:\n{tail}")

    def close(self, timeout: float = 30.0) -> None:
        with contextlib.suppress(BrokenPipeError, OSError):
            self.process.stdin.write("close\n")
            self.process.stdin.flush()
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            log.warning("member %s did not close in %.0f s: killing it", self.instance, timeout)
            self.kill()

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def pause(self) -> None:
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.process.send_signal(signal.SIGCONT)


def node_requests(node: NodeProcess) -> dict[str, int]:
    """The node's handled requests per API, from its Prometheus metrics ({} when it does not answer)."""
    try:
        body = urllib.request.urlopen(f"http://{HOST}:{node.metrics_port}/metrics", timeout=5).read().decode()
    except OSError:
        return {}
    counts: dict[str, int] = {}
    for family in text_string_to_metric_families(body):
        if family.name == "requests":
            for sample in family.samples:
                if sample.name == "requests_total":
                    counts[sample.labels["api"]] = int(sample.value)
    return counts


def zookeeper_counts(connect: str) -> tuple[int, int] | None:
    """(reads, writes) every server of ``connect`` has served, from ``mntr``; None if one does not tell."""
    reads = writes = 0
    for server in connect.split("/", 1)[0].split(","):
        host, _, port = server.rpartition(":")
        try:
            figures = dict(
                line.split("\t", 1) for line in four_letter_word(host, int(port), "mntr").splitlines() if "\t" in line
            )
            reads += int(figures["zk_cnt_readlatency"])
            writes += int(figures["zk_cnt_updatelatency"])
        except (OSError, KeyError, ValueError):
            return None
    return reads, writes


def read_events(directory: Path) -> list[dict]:
    """Every event of the ``*.jsonl`` files in ``directory`` (one run's traces)."""
    return [
        json.loads(line)
        for path in sorted(directory.glob("*.jsonl"))
        for line in path.read_text().splitlines()
        if line.strip()
    ]


class TraceTail:
    """New complete lines of the ``*.jsonl`` files in a directory, as events, but for the ``skip`` file's."""

    def __init__(self, directory: Path, skip: str):
        self.directory = directory
        self.skip = skip
        self._offsets: dict[Path, int] = {}

    def read(self) -> list[dict]:
        events = []
        for path in sorted(self.directory.glob("*.jsonl")):
            if path.name == self.skip:
                continue
            with open(path, "rb") as file:
                file.seek(self._offsets.get(path, 0))
                data = file.read()
            complete = data.rfind(b"\n") + 1
            self._offsets[path] = self._offsets.get(path, 0) + complete
            events += [json.loads(line) for line in data[:complete].splitlines() if line.strip()]
        return events
