"""FindCoordinator latency and ZooKeeper reads per request, of this checkout and, with ``--baseline DIR``, of
another one (e.g. a checkout from before the answers came from watches).

For each checkout: an embedded ZooKeeper chroot of its own, two ``zkcoord coordinator start`` processes run
from that checkout (``PYTHONPATH``), then ``--requests`` FindCoordinator requests to node 1 one after another,
and the same number spread over ``--clients`` concurrent connections. Prints latency percentiles, the
server's read count (``mntr`` zk_cnt_readlatency) per request, and the baseline / this ratios.

    python benchmarks/find_coordinator.py --baseline ../main-before
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path

from zkcoord.channel import WireConnection
from zkcoord.testing.node_process import NodeProcess
from zkcoord.testing.zookeeper import fresh_chroot
from zkcoord.zk.server import EmbeddedZooKeeper, four_letter_word

HERE = Path(__file__).resolve().parent.parent
OVERRIDES = {"offsets.topic.num.partitions": 8}
READY_SECONDS = 30.0


def zookeeper_reads(connect: str) -> int:
    host, port = connect.split(",")[0].rsplit(":", 1)
    lines = four_letter_word(host, int(port), "mntr").splitlines()
    return int(dict(line.split("\t", 1) for line in lines if "\t" in line)["zk_cnt_readlatency"])


def timed_lookups(address: tuple[str, int], count: int, groups: list[str]) -> list[float]:
    latencies = []
    with WireConnection(*address) as connection:
        for index in range(count):
            started = time.perf_counter()
            answer = connection.call("FindCoordinator", key=groups[index % len(groups)], key_type=0)
            latencies.append(time.perf_counter() - started)
            assert answer["error_code"] == 0, answer
    return latencies


def measure(code: Path, connect: str, requests: int, clients: int) -> dict[str, float]:
    """Latencies (ms) and reads per request of the nodes run from ``code``."""
    # The node processes inherit both: ``python -m`` puts the working directory first on sys.path.
    os.environ["PYTHONPATH"] = str(code)
    os.chdir(code)
    groups = [f"bench-group-{i}" for i in range(64)]
    with tempfile.TemporaryDirectory() as workdir:
        chroot = fresh_chroot(connect, "find-coordinator-bench")
        nodes = [NodeProcess(n, chroot, Path(workdir) / "log", OVERRIDES, Path(workdir)) for n in (1, 2)]
        try:
            for node in nodes:
                node.wait_serving()
            deadline = time.monotonic() + READY_SECONDS
            while True:  # every group has a coordinator
                try:
                    timed_lookups(nodes[0].address, len(groups), groups)
                    break
                except AssertionError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
            reads = zookeeper_reads(connect)
            sequential = timed_lookups(nodes[0].address, requests, groups)
            reads = zookeeper_reads(connect) - reads
            concurrent: list[float] = []
            per_client = requests // clients

            def run() -> None:
                concurrent.extend(timed_lookups(nodes[0].address, per_client, groups))

            threads = [threading.Thread(target=run) for _ in range(clients)]
            started = time.perf_counter()
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            wall = time.perf_counter() - started
        finally:
            for node in nodes:
                node.stop()
    return {
        "p50_ms": statistics.median(sequential) * 1000,
        "p99_ms": statistics.quantiles(sequential, n=100)[98] * 1000,
        "concurrent_p99_ms": statistics.quantiles(concurrent, n=100)[98] * 1000,
        "concurrent_per_s": len(concurrent) / wall,
        "reads_per_request": reads / requests,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", type=Path, help="another checkout to compare with")
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=8)
    args = parser.parse_args()
    checkouts = {"this": HERE} if args.baseline is None else {"baseline": args.baseline.resolve(), "this": HERE}
    with EmbeddedZooKeeper() as zookeeper:
        results = {
            name: measure(code, zookeeper.connect_string, args.requests, args.clients)
            for name, code in checkouts.items()
        }
    for name, figures in results.items():
        print(f"{name:9s} " + "  ".join(f"{key}={value:.3f}" for key, value in figures.items()))
    if "baseline" in results:
        before, after = results["baseline"], results["this"]
        print(
            f"ratio baseline/this: p50 {before['p50_ms'] / after['p50_ms']:.1f}x, "
            f"p99 {before['p99_ms'] / after['p99_ms']:.1f}x, "
            f"concurrent p99 {before['concurrent_p99_ms'] / after['concurrent_p99_ms']:.1f}x, "
            f"throughput {after['concurrent_per_s'] / before['concurrent_per_s']:.1f}x"
        )


if __name__ == "__main__":
    main()
