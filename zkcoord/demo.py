"""``make demo``: the old and the new rebalance side by side, a migration there and back, and the report, on
one embedded ZooKeeper and one real Kafka broker (Apache Kafka's own jars, docs/peers.md).

1. ``zkcoord compare run`` of a rolling bounce and a SIGKILL under the ZooKeeper group and coordinator groups,
   its records produced into the broker and read back from it by every member;
2. ``zkcoord compare run --scenario member-migration``: a legacy group with Kafka 0.8.2.2's own consumer (a JVM
   member) among its members moved to librdkafka members through zkcoord's Kafka listener, one member at a
   time in a mixed DUAL_WRITE group, against the whole group stopped, migrated and started again;
3. a live legacy group of Kafka 0.8.2.2's own ``kafka.tools.ConsoleConsumer`` (a JVM member) and two zkcoord
   legacy members on a topic of the broker, migrated by ``zkcoord migrate`` from ZK_ONLY to LOG_ONLY step by
   step, verified after each step, and back to ZK_ONLY; the JVM member is stopped at the step it cannot follow;
4. ``zkcoord pipeline rebalance-report`` over the traces of part 1 (Spark in local mode).
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

from zkcoord import peers
from zkcoord.assign.legacy import consumer_of_thread
from zkcoord.compare.production import KafkaProduction, kafka_spec
from zkcoord.compare.runner import CompareOptions, compare_run
from zkcoord.compare.scenarios import Workload
from zkcoord.migration.runner import load_steps
from zkcoord.model import TopicPartition
from zkcoord.testing.jvm_member import JvmMember, JvmMembers
from zkcoord.testing.kafka_broker import TestKafka, kafka_cluster
from zkcoord.testing.node_process import NodeProcess
from zkcoord.testing.zookeeper import wait_until
from zkcoord.zk import admin
from zkcoord.zk.client import started_client
from zkcoord.zk.server import EmbeddedZooKeeper

DEMO_VARIANTS = ("legacy", "eager", "static", "cooperative")
MEMBER_MIGRATION_VARIANTS = ("rdkafka-whole-group", "rdkafka-member-by-member")
MIGRATION_GROUP = "demo-migration"
MIGRATION_TOPIC = "demo.events"
ZKCOORD_MEMBERS = ("m1", "m2")
JVM_MEMBER_NAME = "jvm"
# A JVM member commits to ZooKeeper only: a backfill would be stale at once, and reading from the log is refused
# while one is live (docs/migration.md), so the demo stops it before the backfill.
JVM_MEMBER_STOPS_BEFORE = "0002_backfill_log"
NODE_OVERRIDES = {"offsets.topic.num.partitions": 4, "group.initial.rebalance.delay.ms": 0}
SETTLE_TIMEOUT_S = 60


def _version(peer: peers.Peer) -> str:
    return peer.artifact.rsplit(":", 1)[1]


BROKER = f"Kafka {_version(peers.BROKER)} broker"
JVM_MEMBER = f"Kafka {_version(peers.LEGACY_CONSUMER)} ConsoleConsumer"
JVM_CONNECTOR = f"Kafka {_version(peers.LEGACY_CONSUMER)} ZookeeperConsumerConnector"


def _banner(text: str) -> None:
    print(f"\n=== {text}", flush=True)


def _command(*args: str) -> int:
    """Run ``zkcoord ARGS`` in a process of its own, its output shown as it comes; returns the exit code."""
    print(f"$ zkcoord {' '.join(args)}", flush=True)
    return subprocess.call([sys.executable, "-m", "zkcoord.cli", *args])


def show_peers(kafka: TestKafka) -> None:
    _banner("real peers: Apache Kafka's own jars, resolved by set-up (docs/peers.md)")
    print(
        f"   {BROKER} ({peers.BROKER.artifact}), ZooKeeper mode, serving {kafka.bootstrap},\n"
        f"   registered in {kafka.zk_connect}: every record below is produced into it and read back from it\n"
        f"   {JVM_CONNECTOR} ({peers.LEGACY_CONSUMER.artifact}) in a JVM, a member of the group of part 2,\n"
        f"   and its {JVM_MEMBER.rsplit(' ', 1)[1]}, a JVM member of the migrated group in part 3\n"
        "   ZooKeeper is zkcoord's embedded one; members, coordinator nodes and the migration are zkcoord's",
        flush=True,
    )


def compare(out: Path, members: int, partitions: int, variants: tuple[str, ...], kafka: TestKafka) -> bool:
    """Step 1: a rolling bounce and a SIGKILL under each variant, on the broker; True if every run completed."""
    _banner(
        f"1/4 rolling bounce and SIGKILL of {members} members on {partitions} partitions of the {BROKER}: "
        f"{', '.join(variants)}"
    )
    options = CompareOptions(
        out=out,
        scenarios=["rolling-bounce", "kill"],
        variants=list(variants),
        workload=Workload(members=members, partitions=partitions, session_timeout_ms=4000, downtime_ms=1000),
        duration_s=4.0,
        zookeeper=kafka.zk_connect,
        source=kafka_spec(kafka),
        node_properties={"group.initial.rebalance.delay.ms": 0},
    )
    results = compare_run(options)
    return all(result["status"] != "failed" for result in results)


def migrate_members(out: Path, members: int, partitions: int, kafka: TestKafka) -> bool:
    """Step 2: a legacy group with a JVM member moved to librdkafka members one at a time, then all at once;
    True if both runs completed and no partition was owned twice."""
    _banner(
        f"2/4 moving a legacy group ({JVM_CONNECTOR} m00 in a JVM + {members - 1} zkcoord legacy members) to "
        "librdkafka members through zkcoord's Kafka listener: member by member in a mixed DUAL_WRITE group, then for "
        "comparison the whole group stopped, migrated and started again"
    )
    options = CompareOptions(
        out=out,
        scenarios=["member-migration"],
        variants=list(MEMBER_MIGRATION_VARIANTS),
        workload=Workload(members=members, partitions=partitions, session_timeout_ms=4000),
        duration_s=2.0,
        zookeeper=kafka.zk_connect,
        source=kafka_spec(kafka),
        node_properties={"group.initial.rebalance.delay.ms": 0},
        jvm_members=1,
    )
    figures = {result["variant"]: result.get("figures") for result in compare_run(options)}
    stepwise, whole = (figures[variant] for variant in reversed(MEMBER_MIGRATION_VARIANTS))
    if stepwise is None or whole is None:
        return False
    print(
        f"   member by member: partitions owned twice {stepwise['owned_twice']}, records duplicated "
        f"{stepwise['records_duplicated']}, longest partition pause {stepwise['longest_pause_ms']} ms\n"
        f"   whole group:      partitions owned twice {whole['owned_twice']}, records duplicated "
        f"{whole['records_duplicated']}, longest partition pause {whole['longest_pause_ms']} ms",
        flush=True,
    )
    return stepwise["violations"] == 0 and whole["violations"] == 0


def _settled_group(client: KazooClient, members: int) -> admin.GroupSnapshot | None:
    """The group once it has ``members`` members, every partition one live owner, and an offset each."""
    snapshot = admin.read_group(client, MIGRATION_GROUP)
    partitions = snapshot.partitions.get(MIGRATION_TOPIC, [])
    if len(snapshot.members) != members or snapshot.problems() or not partitions:
        return None
    return snapshot if len(snapshot.offsets) >= len(partitions) else None


def show_group(client: KazooClient, members: int) -> None:
    """Wait until the group settles with ``members`` members, then print who owns what, as ZooKeeper has it."""
    snapshot = wait_until(
        lambda: _settled_group(client, members),
        timeout=SETTLE_TIMEOUT_S,
        what=f"group {MIGRATION_GROUP} to settle with {members} members",
    )
    print(f"   group {MIGRATION_GROUP} in ZooKeeper (/consumers/{MIGRATION_GROUP}/ids, owners, offsets):", flush=True)
    jvm_consumer_id = f"{MIGRATION_GROUP}_{JVM_MEMBER_NAME}"
    for consumer_id in sorted(snapshot.members):
        what = f"{JVM_MEMBER} (JVM)" if consumer_id == jvm_consumer_id else "zkcoord legacy member"
        owned = sorted(
            tp.partition for tp, thread in snapshot.owners.items() if consumer_of_thread(thread) == consumer_id
        )
        offsets = [snapshot.offsets.get(TopicPartition(MIGRATION_TOPIC, p)) for p in owned]
        print(f"   {consumer_id:<20} {what:<38} owns {owned}, committed {offsets}", flush=True)


def migrate(scratch: Path, partitions: int, kafka: TestKafka) -> bool:
    """Step 2: a consuming legacy group taken from ZK_ONLY to LOG_ONLY and back; True if every command passed."""
    _banner(
        f"3/4 migrating the offsets of legacy group {MIGRATION_GROUP} ({JVM_MEMBER} + {len(ZKCOORD_MEMBERS)} "
        "zkcoord members) to the offsets log and back"
    )
    connect = kafka.zk_connect
    group = ["--group", MIGRATION_GROUP, "--zookeeper", connect]
    with contextlib.ExitStack() as running:  # stopped in reverse: members, the JVM member, node, producer, client
        client = running.enter_context(started_client(connect))
        production = KafkaProduction(kafka_spec(kafka), 20, kafka)
        running.callback(production.close)
        production.create_topics({MIGRATION_TOPIC: partitions})
        production.start([MIGRATION_TOPIC])
        node = NodeProcess(1, connect, scratch / "offsets", NODE_OVERRIDES, scratch, log_level="WARNING")
        running.callback(node.stop)
        jvm_member = running.enter_context(JvmMembers(scratch / "jvm")).console(
            connect,
            MIGRATION_GROUP,
            JVM_MEMBER_NAME,
            MIGRATION_TOPIC,
            from_beginning=True,  # which it refuses once the group has offsets: it starts first
            properties={"zookeeper.session.timeout.ms": 4000, "auto.commit.interval.ms": 500},
        )
        try:
            node.wait_serving()
            print(f"coordinator node 1 serving on {node.address[0]}:{node.address[1]}", flush=True)
            jvm_member.wait_started(client, MIGRATION_GROUP, timeout=SETTLE_TIMEOUT_S)
            for name in ZKCOORD_MEMBERS:
                start_zkcoord_member(name, kafka, running)
            show_group(client, len(ZKCOORD_MEMBERS) + 1)
            ok = _command("migrate", "plan", *group) == 0
            for step in load_steps():
                if step.name == JVM_MEMBER_STOPS_BEFORE:
                    ok &= stop_jvm_member(jvm_member, client)
                ok &= _command("migrate", "up", "--to", step.name, *group) == 0
                time.sleep(1)  # members commit in the new phase
                ok &= _command("migrate", "verify", *group) == 0
            ok &= _command("migrate", "down", "--to", "zero", "--yes", *group) == 0  # four steps, unasked
            time.sleep(1)
            ok &= _command("migrate", "verify", *group) == 0
            ok &= _command("migrate", "status", *group) == 0
            return ok
        except (TimeoutError, AssertionError) as error:  # a group that did not settle, a JVM member that exited
            print(f"error: {error}", flush=True)
            return False


def start_zkcoord_member(name: str, kafka: TestKafka, running: contextlib.ExitStack) -> None:
    """A zkcoord legacy member reading the broker through KafkaSource, its one stream drained until closed."""
    from zkcoord.legacy.consumer import LegacyConsumer
    from zkcoord.sources.kafka import KafkaSource

    source = KafkaSource(kafka.bootstrap, client_id=f"{MIGRATION_GROUP}-{name}")
    running.callback(source.close)
    member = LegacyConsumer(
        {
            "group.id": MIGRATION_GROUP,
            "zookeeper.connect": kafka.zk_connect,
            "consumer.id": name,
            "zookeeper.session.timeout.ms": 4000,
            "auto.commit.interval.ms": 500,
            "auto.offset.reset": "smallest",
        },
        topics={MIGRATION_TOPIC: 1},
        source=source,
        trace=_print_offsets_mode,
    ).start()
    drain = threading.Thread(target=_drain, args=(member.streams()[MIGRATION_TOPIC][0],), daemon=True)
    running.callback(drain.join, 30)  # before the source closes: a fetch may still be under way
    running.callback(member.close)  # which ends the stream
    drain.start()


def stop_jvm_member(jvm_member: JvmMember, client: KazooClient) -> bool:
    """Stop the JVM member before the backfill, and show the zkcoord members taking its partitions over."""
    print(
        f"   stopping the {JVM_MEMBER} here: a 0.8.2 JVM member knows nothing of phases and goes on committing to\n"
        "   ZooKeeper only (its partitions are only in ZooKeeper above), so the log's copy of its offsets would be\n"
        "   stale as soon as it is made, reading from the log is refused while one is live, and it cannot join a\n"
        "   coordinator group: the runbook replaces JVM members with zkcoord legacy members (docs/migration.md)",
        flush=True,
    )
    status = jvm_member.stop()
    consumed = len(jvm_member.values())
    print(
        f"   the {JVM_MEMBER} consumed {consumed} records of the broker and exited with status {status} "
        "(SIGTERM: its shutdown hook committed and left the group)",
        flush=True,
    )
    show_group(client, len(ZKCOORD_MEMBERS))
    return consumed > 0


def _drain(stream) -> None:
    for _ in stream:  # ends when the member closes
        pass


def _print_offsets_mode(event: dict) -> None:
    if event["type"] == "legacy.offsets_mode":
        print(
            f"   member {event['member'].rsplit('_', 1)[-1]} follows {event['phase'] or 'its config'}: "
            f"commits to {' + '.join(event['writes'])}, reads {event['reads']}",
            flush=True,
        )


def report(traces: Path, out: Path) -> bool:
    """Step 3: the PySpark report; True if it ran and no record was left unprocessed."""
    _banner("4/4 the report (PySpark, local mode)")
    return _command("pipeline", "rebalance-report", "--in", str(traces), "--out", str(out)) == 0


def run_demo(
    out: Path = Path("var/demo"), members: int = 4, partitions: int = 8, variants: tuple[str, ...] = DEMO_VARIANTS
) -> int:
    """Run the four parts; 0 when each succeeded. ``out`` keeps the traces and the report."""
    for noisy in ("kazoo", "kafka"):  # expected reconnects and slow-loop notices would clutter the story
        logging.getLogger(noisy).setLevel(logging.ERROR)
    started = time.monotonic()
    scratch = Path(tempfile.mkdtemp(prefix="zkcoord-demo-"))
    try:
        zookeeper = EmbeddedZooKeeper(data_dir=scratch / "zookeeper", tick_time_ms=200, max_session_timeout_ms=60_000)
        with zookeeper, kafka_cluster(zookeeper.connect_string) as kafka:
            show_peers(kafka)
            compared = compare(out / "compare", members, partitions, variants, kafka)
            moved = migrate_members(out / "member-migration", members, partitions, kafka)
            migrated = migrate(scratch, partitions, kafka)
        reported = report(out / "compare", out / "report")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"\nDone in {time.monotonic() - started:.0f} s.", flush=True)
    print(f"Report: {(out / 'report' / 'report.html').resolve()}")
    print(f"Traces: {(out / 'compare').resolve()}  (docs/compare.md explains the report)")
    print(f"Member migration traces: {(out / 'member-migration').resolve()}  (rebalance-report --in reads them too)")
    parts = (("compare", compared), ("member migration", moved), ("migration", migrated), ("report", reported))
    failed = [name for name, ok in parts if not ok]
    if failed:
        print(f"Not everything passed: {', '.join(failed)}")
        return 1
    return 0
