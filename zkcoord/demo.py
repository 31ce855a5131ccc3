"""``make demo``: the old and the new rebalance side by side, a migration there and back, and the report.

1. ``zkcoord compare run`` of a rolling bounce and a SIGKILL under the ZooKeeper group and coordinator groups;
2. a live legacy group on an embedded ZooKeeper and one coordinator node, migrated by ``zkcoord migrate``
   from ZK_ONLY to LOG_ONLY step by step, verified after each step, and back to ZK_ONLY;
3. ``zkcoord pipeline rebalance-report`` over the comparison's traces (Spark in local mode).
"""

import contextlib
import logging
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from kazoo.client import KazooClient

from zkcoord.compare.runner import CompareOptions, compare_run
from zkcoord.compare.scenarios import Workload
from zkcoord.migration.runner import load_steps
from zkcoord.testing.node_process import NodeProcess
from zkcoord.testing.zookeeper import fresh_chroot
from zkcoord.zk import admin
from zkcoord.zk.server import EmbeddedZooKeeper

DEMO_VARIANTS = ("legacy", "eager", "static", "cooperative")
MIGRATION_GROUP = "demo-migration"
MIGRATION_TOPIC = "demo.events"
NODE_OVERRIDES = {"offsets.topic.num.partitions": 4, "group.initial.rebalance.delay.ms": 0}


def _banner(text: str) -> None:
    print(f"\n=== {text}", flush=True)


def _command(*args: str) -> int:
    """Run ``zkcoord ARGS`` in a process of its own, its output shown as it comes; returns the exit code."""
    print(f"$ zkcoord {' '.join(args)}", flush=True)
    return subprocess.call([sys.executable, "-m", "zkcoord.cli", *args])


def compare(out: Path, members: int, partitions: int, variants: tuple[str, ...]) -> bool:
    """Step 1: a rolling bounce and a SIGKILL under each variant; True if every run completed."""
    _banner(f"1/3 rolling bounce and SIGKILL of {members} members on {partitions} partitions: {', '.join(variants)}")
    options = CompareOptions(
        out=out,
        scenarios=["rolling-bounce", "kill"],
        variants=list(variants),
        workload=Workload(members=members, partitions=partitions, session_timeout_ms=4000, downtime_ms=1000),
        duration_s=4.0,
        node_properties={"group.initial.rebalance.delay.ms": 0},
    )
    results = compare_run(options)
    return all(result["status"] != "failed" for result in results)


def migrate(scratch: Path, partitions: int) -> bool:
    """Step 2: a consuming legacy group taken from ZK_ONLY to LOG_ONLY and back; True if every command passed."""
    from zkcoord.legacy.consumer import LegacyConsumer
    from zkcoord.sources import SyntheticSource

    _banner(f"2/3 migrating the offsets of legacy group {MIGRATION_GROUP} to the offsets log and back")
    with EmbeddedZooKeeper(data_dir=scratch / "zookeeper", tick_time_ms=200) as server:
        connect = fresh_chroot(server.connect_string, "demo")
        with contextlib.closing(KazooClient(hosts=connect)) as client:
            client.start(timeout=30)
            admin.register_broker(client, 0, "localhost", 9092, timestamp_ms=1, persistent=True)
            admin.create_topic(client, MIGRATION_TOPIC, partitions)
            client.stop()
        node = NodeProcess(1, connect, scratch / "offsets", NODE_OVERRIDES, scratch, log_level="WARNING")
        members: list[LegacyConsumer] = []
        stop = threading.Event()
        try:
            node.wait_serving()
            print(f"coordinator node 1 serving on {node.address[0]}:{node.address[1]}", flush=True)
            source = SyntheticSource(rate_per_partition=20)
            for name in ("m1", "m2"):
                member = LegacyConsumer(
                    {
                        "group.id": MIGRATION_GROUP,
                        "zookeeper.connect": connect,
                        "consumer.id": name,
                        "zookeeper.session.timeout.ms": 4000,
                        "auto.commit.interval.ms": 500,
                        "auto.offset.reset": "smallest",
                    },
                    topics={MIGRATION_TOPIC: 1},
                    source=source,
                    trace=_print_offsets_mode,
                ).start()
                members.append(member)
                stream = member.streams()[MIGRATION_TOPIC][0]
                threading.Thread(target=_drain, args=(stream, stop), daemon=True).start()
            time.sleep(2)  # commits in ZooKeeper before the first step
            group = ["--group", MIGRATION_GROUP, "--zookeeper", connect]
            ok = _command("migrate", "plan", *group) == 0
            for step in load_steps():
                ok &= _command("migrate", "up", "--to", step.name, *group) == 0
                time.sleep(1)  # members commit in the new phase
                ok &= _command("migrate", "verify", *group) == 0
            ok &= _command("migrate", "down", "--to", "zero", *group) == 0
            time.sleep(1)
            ok &= _command("migrate", "verify", *group) == 0
            ok &= _command("migrate", "status", *group) == 0
            return ok
        finally:
            stop.set()
            for member in members:
                member.close()
            node.stop()


def _drain(stream, stop: threading.Event) -> None:
    for _ in stream:
        if stop.is_set():
            return


def _print_offsets_mode(event: dict) -> None:
    if event["type"] == "legacy.offsets_mode":
        print(
            f"   member {event['member'].rsplit('_', 1)[-1]} follows {event['phase'] or 'its config'}: "
            f"commits to {' + '.join(event['writes'])}, reads {event['reads']}",
            flush=True,
        )


def report(traces: Path, out: Path) -> bool:
    """Step 3: the PySpark report; True if it ran and no record was left unprocessed."""
    _banner("3/3 the report (PySpark, local mode)")
    return _command("pipeline", "rebalance-report", "--in", str(traces), "--out", str(out)) == 0


def run_demo(
    out: Path = Path("var/demo"), members: int = 4, partitions: int = 8, variants: tuple[str, ...] = DEMO_VARIANTS
) -> int:
    """Run the three parts; 0 when each succeeded. ``out`` keeps the traces and the report."""
    logging.getLogger("kazoo").setLevel(logging.ERROR)  # expected reconnects would clutter the story
    started = time.monotonic()
    scratch = Path(tempfile.mkdtemp(prefix="zkcoord-demo-"))
    try:
        compared = compare(out / "compare", members, partitions, variants)
        migrated = migrate(scratch, partitions)
        reported = report(out / "compare", out / "report")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"\nDone in {time.monotonic() - started:.0f} s.", flush=True)
    print(f"Report: {(out / 'report' / 'report.html').resolve()}")
    print(f"Traces: {(out / 'compare').resolve()}  (docs/compare.md explains the report)")
    failed = [name for name, ok in (("compare", compared), ("migration", migrated), ("report", reported)) if not ok]
    if failed:
        print(f"Not everything passed: {', '.join(failed)}")
        return 1
    return 0
