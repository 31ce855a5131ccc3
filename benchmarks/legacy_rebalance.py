"""Legacy rebalance cost: a member joins a settled group; how long until ownership converges?

For (members, partitions) in (5, 50), (20, 200), (50, 1000) on an embedded ZooKeeper, prints the time
from the join to convergence, rebalance attempts, and ZooKeeper requests and round trips per attempt.
Baseline, measured in the same process on the same server: claiming one member's share of owner
znodes one synchronous create at a time, against the pipelined creates the connector uses.

    python benchmarks/legacy_rebalance.py [--configs 5x50,20x200,50x1000]
"""

import argparse
import logging
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from kazoo.client import KazooClient

from zkcoord.legacy.consumer import LegacyConsumer
from zkcoord.testing.legacy import converged
from zkcoord.testing.zookeeper import fresh_chroot, wait_until
from zkcoord.zk import admin, layout
from zkcoord.zk.server import EmbeddedZooKeeper

TOPIC = "bench"
MEMBER_CONFIG = {
    "group.id": "bench",
    "zookeeper.session.timeout.ms": 6000,
    "rebalance.backoff.ms": 200,
    "rebalance.max.retries": 10,
    "auto.commit.enable": False,
}


class Attempts:
    """Rebalance-attempt events with the monotonic time they arrived."""

    def __init__(self):
        self.lock = threading.Lock()
        self.seen: list[tuple[float, dict]] = []

    def __call__(self, event: dict) -> None:
        if event["type"] == "legacy.rebalance_attempt":
            with self.lock:
                self.seen.append((time.monotonic(), event))

    def since(self, start: float) -> list[tuple[float, dict]]:
        with self.lock:
            return [(t, e) for t, e in self.seen if t >= start]


def measure_join(server: EmbeddedZooKeeper, members: int, partitions: int) -> dict:
    connect = fresh_chroot(server.connect_string, "bench")
    client = KazooClient(hosts=connect)
    client.start(timeout=15)
    attempts = Attempts()
    group: list[LegacyConsumer] = []

    def start(n: int) -> LegacyConsumer:
        config = {**MEMBER_CONFIG, "zookeeper.connect": connect, "consumer.id": f"m{n:03d}"}
        return LegacyConsumer(config, topics={TOPIC: 1}, trace=attempts).start()

    try:
        admin.register_broker(client, 0, "localhost", 9092, timestamp_ms=1, persistent=True)
        admin.create_topic(client, TOPIC, partitions)
        with ThreadPoolExecutor(8) as pool:
            group.extend(pool.map(start, range(members - 1)))
        ids = [m.consumer_id for m in group]
        wait_until(lambda: converged(client, "bench", members=ids), timeout=300, interval=0.5, what="settled group")
        time.sleep(0.5)

        joined_at = time.monotonic()
        group.append(start(members - 1))
        ids.append(group[-1].consumer_id)
        wait_until(lambda: converged(client, "bench", members=ids), timeout=300, interval=0.25, what="convergence")
        after = attempts.since(joined_at)
        done_at = max(t for t, e in after if e["outcome"] == "success")
        per_member: dict[str, int] = {}
        for _, event in after:
            per_member[event["member"]] = per_member.get(event["member"], 0) + 1
        share = partitions // members
        sequential_ms, pipelined_ms = claim_baseline(client, share)
        return {
            "members": members,
            "partitions": partitions,
            "converge_ms": (done_at - joined_at) * 1000.0,
            "attempts_mean": statistics.mean(per_member.values()),
            "attempts_max": max(per_member.values()),
            "conflicts": sum(e["outcome"] == "conflict" for _, e in after),
            "ops_per_attempt": statistics.mean(e["zk_ops"] for _, e in after),
            "round_trips_per_attempt": statistics.mean(e["zk_round_trips"] for _, e in after),
            "claim_share": share,
            "sequential_ms": sequential_ms,
            "pipelined_ms": pipelined_ms,
        }
    finally:
        for member in group:
            member.close()
        client.stop()
        client.close()


def claim_baseline(client: KazooClient, count: int) -> tuple[float, float]:
    """Create ``count`` owner-like ephemerals one round trip at a time, then all pipelined."""
    paths = [layout.owner_path("baseline", TOPIC, p) for p in range(count)]
    client.ensure_path(layout.owners_path("baseline", TOPIC))
    started = time.perf_counter()
    for path in paths:
        client.create(path, b"baseline-0", ephemeral=True)
    sequential = (time.perf_counter() - started) * 1000.0
    for path in paths:
        client.delete(path)
    started = time.perf_counter()
    for result in [client.create_async(path, b"baseline-0", ephemeral=True) for path in paths]:
        result.get()
    pipelined = (time.perf_counter() - started) * 1000.0
    return sequential, pipelined


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--configs", default="5x50,20x200,50x1000", help="MEMBERSxPARTITIONS,...")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    configs = [tuple(int(x) for x in item.split("x")) for item in args.configs.split(",")]
    header = (
        f"{'members':>7} {'parts':>5} {'join->converged':>15} {'attempts mean/max':>17} {'conflicts':>9} "
        f"{'zk ops/attempt':>14} {'round trips/attempt':>19} {'claim N: sequential':>19} {'pipelined':>9} {'ratio':>6}"
    )
    with EmbeddedZooKeeper(tick_time_ms=500) as server:
        print(f"ZooKeeper {server.connect_string}; one member joins a settled group of members-1\n")
        print(header)
        for members, partitions in configs:
            r = measure_join(server, members, partitions)
            print(
                f"{r['members']:>7} {r['partitions']:>5} {r['converge_ms']:>12.0f} ms "
                f"{r['attempts_mean']:>11.2f}/{r['attempts_max']:<5} {r['conflicts']:>9} "
                f"{r['ops_per_attempt']:>14.1f} {r['round_trips_per_attempt']:>19.1f} "
                f"{r['claim_share']:>5}: {r['sequential_ms']:>8.1f} ms {r['pipelined_ms']:>6.1f} ms "
                f"{r['sequential_ms'] / r['pipelined_ms']:>5.1f}x",
                flush=True,
            )


if __name__ == "__main__":
    main()
