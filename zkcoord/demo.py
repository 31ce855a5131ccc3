"""``make demo``: an embedded ZooKeeper, a topic, a legacy group of members, a few bounces.

Each step prints how long the group took to converge, the rebalance attempts and ZooKeeper
operations it cost, and the resulting assignment.
"""

import itertools
import logging
import threading
import time

from kazoo.client import KazooClient

from zkcoord.clock import SystemClock
from zkcoord.legacy.consumer import LegacyConsumer
from zkcoord.testing.legacy import converged
from zkcoord.testing.zookeeper import expire_session, fresh_chroot, wait_until
from zkcoord.zk import admin
from zkcoord.zk.server import EmbeddedZooKeeper

GROUP = "demo-group"
TOPIC = "demo.events"
MEMBER_CONFIG = {
    "group.id": GROUP,
    "zookeeper.session.timeout.ms": 2000,
    "rebalance.backoff.ms": 200,
    "auto.commit.enable": False,
}


class _Tally:
    """Counts rebalance attempts and ZooKeeper operations between two marks."""

    def __init__(self):
        self._lock = threading.Lock()
        self.attempts = self.conflicts = self.ops = 0

    def __call__(self, event: dict) -> None:
        if event["type"] == "legacy.rebalance_attempt":
            with self._lock:
                self.attempts += 1
                self.conflicts += event["outcome"] == "conflict"
                self.ops += event["zk_ops"]

    def take(self) -> tuple[int, int, int]:
        with self._lock:
            counts = (self.attempts, self.conflicts, self.ops)
            self.attempts = self.conflicts = self.ops = 0
        return counts


def _expire_and_wait(consumer: LegacyConsumer) -> None:
    session_id = consumer.zk_client.client_id[0]
    expire_session(consumer.zk_client)
    wait_until(lambda: (consumer.zk_client.client_id or (session_id,))[0] != session_id, what="a new session")


def run_demo(members: int = 4, partitions: int = 12) -> int:
    """Run the demo; returns 0 when every step converged to the pure assignor's ownership."""
    logging.getLogger("kazoo").setLevel(logging.ERROR)  # expected reconnects would clutter the story
    print(f"Starting an embedded ZooKeeper ({TOPIC}: {partitions} partitions, group {GROUP}) ...", flush=True)
    with EmbeddedZooKeeper(tick_time_ms=200) as server:
        connect = fresh_chroot(server.connect_string, "zkcoord-demo")
        client = KazooClient(hosts=connect)
        client.start(timeout=15)
        admin.register_broker(client, 0, "localhost", 9092, SystemClock().now_ms(), persistent=True)
        admin.create_topic(client, TOPIC, partitions)
        tally = _Tally()
        live: dict[str, LegacyConsumer] = {}
        stream_counts = itertools.cycle([1, 2])

        def start(name: str, streams: int) -> None:
            config = {**MEMBER_CONFIG, "zookeeper.connect": connect, "consumer.id": name}
            live[name] = LegacyConsumer(config, topics={TOPIC: streams}, trace=tally).start()

        def step(title: str, action) -> None:
            started = time.monotonic()
            action()
            snapshot = wait_until(
                lambda: converged(client, GROUP, members=[m.consumer_id for m in live.values()]),
                timeout=60,
                what=title,
            )
            elapsed_ms = (time.monotonic() - started) * 1000.0
            attempts, conflicts, ops = tally.take()
            print(f"\n== {title}")
            print(
                f"   converged in {elapsed_ms:.0f} ms: {attempts} rebalance attempts "
                f"({conflicts} with conflicts), {ops} ZooKeeper operations"
            )
            by_thread: dict[str, list[str]] = {}
            for tp, owner in sorted(snapshot.owners.items()):
                by_thread.setdefault(owner, []).append(str(tp.partition))
            for member, subscription in sorted(snapshot.members.items()):
                for n in range(subscription.get(TOPIC, 0)):
                    thread = f"{member}-{n}"
                    print(f"   {thread:<22} {TOPIC} [{','.join(by_thread.get(thread, [])) or '-'}]")

        try:
            step(
                f"{members} members join",
                lambda: [start(f"m{i}", next(stream_counts)) for i in range(members)],
            )
            step("m1 leaves cleanly", lambda: live.pop("m1").close())
            step("m9 joins with 2 streams", lambda: start("m9", 2))
            step("m2's ZooKeeper session expires", lambda: _expire_and_wait(live["m2"]))
            step("m1 is bounced back (same consumer.id)", lambda: start("m1", 1))
            step(
                f"{TOPIC} grows to {partitions + 4} partitions",
                lambda: admin.alter_topic_partitions(client, TOPIC, partitions + 4),
            )
            problems = admin.read_group(client, GROUP).problems()
            if problems:
                print("\nNOT verified:", *problems, sep="\n  ")
                return 1
            print("\nVerified: every partition has exactly one live owner.")
            return 0
        finally:
            for consumer in live.values():
                consumer.close()
            client.stop()
            client.close()
