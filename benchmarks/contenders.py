"""Contenders of a benchmark, each run as users run it: its own process tree, timed, its memory sampled.

Shared by benchmarks/pipeline.py and benchmarks/offsets_audit.py.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import platform
import re
import subprocess
import threading
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def tree_rss(root_pid: int) -> tuple[int, dict[str, int]]:
    """(bytes, bytes by command name) of the resident memory (VmRSS) of ``root_pid`` and all its descendants, now.

    A child that runs its parent's executable under another name is a clone not yet exec'd (the JVM starts
    processes with posix_spawn: the child shares the JVM's memory and is named after the forking thread, e.g.
    ``shutdown-hook-0``): its VmRSS is the parent's, so it is not counted twice. Forks of the same program keep
    its name (PySpark's Python workers) and are counted."""
    children: dict[int, list[int]] = defaultdict(list)
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as file:
                    stat = file.read()
            except OSError:
                continue
            children[int(stat.rsplit(b")", 1)[1].split()[1])].append(int(entry.name))
    total, by_name = 0, defaultdict(int)
    stack: list[tuple[int, tuple[str, str] | None]] = [(root_pid, None)]
    while stack:
        pid, parent = stack.pop()
        try:
            with open(f"/proc/{pid}/status") as file:
                status = file.read()
            exe = os.readlink(f"/proc/{pid}/exe")
        except OSError:
            continue
        found = re.search(r"^VmRSS:\s+(\d+) kB", status, re.M)
        name = re.search(r"^Name:\s+(.*)$", status, re.M)
        identity = (exe, name.group(1) if name else "?")
        stack.extend((child, identity) for child in children.get(pid, ()))
        if parent is not None and identity[0] == parent[0] and identity[1] != parent[1]:
            continue  # a clone sharing its parent's memory until exec
        if found:
            total += int(found.group(1)) * 1024
            by_name[identity[1]] += int(found.group(1)) * 1024
    return total, dict(by_name)


class PeakMemory(threading.Thread):
    """Samples ``tree_rss`` of a process every ``interval`` seconds until stopped; keeps the largest sum."""

    def __init__(self, pid: int, interval: float = 0.1):
        super().__init__(daemon=True)
        self.pid, self.interval = pid, interval
        self.peak, self.peak_by_name, self.samples = 0, {}, 0
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.is_set():
            total, by_name = tree_rss(self.pid)
            self.samples += 1
            if total > self.peak:
                self.peak, self.peak_by_name = total, by_name
            self._stop_event.wait(self.interval)

    def stop(self) -> None:
        self._stop_event.set()
        self.join()


@dataclass
class Outcome:
    name: str
    returncode: int
    seconds: float
    peak_rss: int
    peak_by_name: dict[str, int]
    samples: int
    lines: list[tuple[float, str]]  # (seconds since the start, line) of its streamed output
    stdout: str = ""  # its standard output, when it went to a file


def run_contender(name: str, command: list[str], stdout_path: Path | None = None) -> Outcome:
    """Run ``command`` in its own process tree, stream its output (each line stamped), time it, sample memory.

    With ``stdout_path`` its standard output (a result to parse) goes to that file and only its stderr is streamed.
    """
    print(f"\n== {name}: {' '.join(command)}", flush=True)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}  # lines arrive when printed: their stamps time the stages
    with contextlib.ExitStack() as files:
        stdout = files.enter_context(open(stdout_path, "w")) if stdout_path else subprocess.PIPE
        stderr = subprocess.PIPE if stdout_path else subprocess.STDOUT
        started = time.monotonic()
        process = subprocess.Popen(command, cwd=REPO, env=env, stdout=stdout, stderr=stderr, text=True, bufsize=1)
        sampler = PeakMemory(process.pid)
        sampler.start()
        lines = []
        streamed = process.stderr if stdout_path else process.stdout
        assert streamed is not None
        for line in streamed:
            at = time.monotonic() - started
            lines.append((at, line.rstrip("\n")))
            print(f"   {at:7.1f} s | {line.rstrip()}", flush=True)
        returncode = process.wait()
        seconds = time.monotonic() - started
    sampler.stop()
    print(f"   {name}: exit status {returncode}, {seconds:.1f} s", flush=True)
    output = stdout_path.read_text() if stdout_path else ""
    return Outcome(name, returncode, seconds, sampler.peak, sampler.peak_by_name, sampler.samples, lines, output)


def machine(packages: tuple[str, ...]) -> str:
    """Cores, CPU, memory, Python, the versions of ``packages``, Java and the load average, on one line."""
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as file:
        cpu = next((line.split(":", 1)[1].strip() for line in file if line.startswith("model name")), cpu)
    usable = len(os.sched_getaffinity(0))
    java = "java not found"
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        found = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=30)
        java = (found.stderr or found.stdout).splitlines()[0].strip()
    versions = ", ".join(f"{package} {importlib.metadata.version(package)}" for package in packages)
    return (
        f"{os.cpu_count()} cores ({usable} usable), {cpu}, {platform.system()} {platform.release()}, "
        f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB; "
        f"{platform.python_implementation()} {platform.python_version()}, {versions}, {java}; "
        f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )


def mib(size: int) -> str:
    return f"{size / 2**20:,.0f}"
