"""Kafka 0.8.2.2's own tools against zkcoord's, both ways, on the real ZooKeeper (docs/peers.md).

``ExportZkOffsets`` / ``ImportZkOffsets`` against ``zkcoord legacy offsets export|import``;
``ConsumerOffsetChecker`` against ``zkcoord groups describe`` and ``legacy verify`` on a group zkcoord's members
own, reading the session's broker; ``VerifyConsumerRebalance`` against ``legacy verify``. Each tool runs in a
small JVM of its own (about 0.7 s).
"""

import contextlib
import json
import re
import subprocess
import uuid
from collections.abc import Iterator

from kazoo.client import KazooClient

from zkcoord import cli, peers
from zkcoord.legacy.consumer import LegacyConsumer
from zkcoord.model import TopicPartition
from zkcoord.peers.jvm import java_command
from zkcoord.sources.kafka import KafkaSource
from zkcoord.testing.jvm_member import verify_consumer_rebalance
from zkcoord.testing.legacy import converged
from zkcoord.testing.zookeeper import fresh_chroot, wait_until
from zkcoord.zk import layout

# Legal but odd names: dots, dashes, underscores, in groups and topics; one offset beyond 32 bits.
OFFSETS = {
    ("consumer.group-1_a", "a.b-c_d", 0): 0,
    ("consumer.group-1_a", "a.b-c_d", 2): 17,
    ("consumer.group-1_a", "a.b-c_d", 10): 5,
    ("consumer.group-1_a", "t", 0): 2**40,
    ("g2", "_under_", 3): 9,
    ("g2", "x-y.z", 1): 123,
    ("g3", "t", 0): 1,
}
# Groups with nothing to export: an empty offsets folder, and a topic folder without partitions.
EMPTY_GROUPS = ("idle", "idle-topic")


def run_tool(main_class: str, *args: str) -> subprocess.CompletedProcess:
    """One of Kafka 0.8.2.2's ``kafka.tools`` classes; its log4j warnings and errors go to stderr."""
    command = java_command(peers.LEGACY_CONSUMER, f"kafka.tools.{main_class}", args)
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


def run_zkcoord(capsys, *argv: str) -> tuple[int, str]:
    code = cli.main(list(argv))
    return code, capsys.readouterr().out


def write_offsets(client: KazooClient) -> None:
    for (group, topic, partition), offset in OFFSETS.items():
        client.create(layout.offset_path(group, topic, partition), str(offset).encode(), makepath=True)
    client.ensure_path(layout.offsets_path("idle"))
    client.ensure_path(layout.offsets_path("idle-topic", "t"))


def offsets_in(connect: str) -> dict[tuple[str, str, int], int]:
    """Every ``/consumers/<g>/offsets/<t>/<p>`` under ``connect``, read with plain kazoo; values must be exactly
    ``Long.toString`` text (no sign, space or line end that ``int`` would forgive)."""
    client = KazooClient(hosts=connect)
    client.start(timeout=15)
    try:
        found = {}
        for group in client.get_children("/consumers") if client.exists("/consumers") else ():
            if client.exists(layout.offsets_path(group)) is None:
                continue
            for topic in client.get_children(layout.offsets_path(group)):
                for partition in client.get_children(layout.offsets_path(group, topic)):
                    data, _ = client.get(layout.offset_path(group, topic, int(partition)))
                    assert re.fullmatch(rb"-?\d+", data), (group, topic, partition, data)
                    found[(group, topic, int(partition))] = int(data)
        return found
    finally:
        client.stop()
        client.close()


def export_lines(offsets: dict[tuple[str, str, int], int]) -> set[str]:
    return {f"/consumers/{g}/offsets/{t}/{p}:{o}" for (g, t, p), o in offsets.items()}


def of_groups(*groups: str) -> dict[tuple[str, str, int], int]:
    return {key: offset for key, offset in OFFSETS.items() if key[0] in groups}


# ---- ExportZkOffsets / ImportZkOffsets ---------------------------------------------------------------


def test_zkcoord_imports_what_export_zk_offsets_wrote(capsys, zk, zk_connect, zk_server, tmp_path):
    write_offsets(zk)
    every = tmp_path / "every.txt"
    exported = run_tool("ExportZkOffsets", "--zkconnect", zk_connect, "--output-file", str(every))
    assert exported.returncode == 0, exported.stderr
    text = every.read_text(encoding="utf-8")
    assert text.endswith("\n") and "\n\n" not in text
    assert set(text.splitlines()) == export_lines(OFFSETS)  # in ZooKeeper's child order, not sorted

    other = fresh_chroot(zk_server)
    code, out = run_zkcoord(capsys, "legacy", "offsets", "import", "--input", str(every), "--zookeeper", other)
    assert (code, out) == (0, f"Imported {len(OFFSETS)} offsets.\n")
    assert offsets_in(other) == OFFSETS

    some = tmp_path / "some.txt"
    filtered = run_tool(
        "ExportZkOffsets", "--zkconnect", zk_connect, "--group", "g2", "--group", "idle", "--output-file", str(some)
    )
    assert filtered.returncode == 0, filtered.stderr
    assert set(some.read_text(encoding="utf-8").splitlines()) == export_lines(of_groups("g2"))
    zk.delete(layout.group_path("g2"), recursive=True)
    code, _ = run_zkcoord(capsys, "legacy", "offsets", "import", "--input", str(some), "--zookeeper", zk_connect)
    assert code == 0 and offsets_in(zk_connect) == OFFSETS


def test_export_zk_offsets_of_every_group_fails_on_a_group_that_never_committed(capsys, zk, zk_connect, tmp_path):
    """A difference: 0.8.2's tool lists ``/consumers/<g>/offsets`` of each group and dies on the first group
    without one (exit 1, the file cut short wherever that group came); zkcoord exports the others."""
    write_offsets(zk)
    zk.ensure_path(layout.ids_path("never-committed"))
    output = tmp_path / "every.txt"
    exported = run_tool("ExportZkOffsets", "--zkconnect", zk_connect, "--output-file", str(output))
    assert exported.returncode == 1
    assert "NoNode for /consumers/never-committed/offsets" in exported.stderr
    code, out = run_zkcoord(capsys, "legacy", "offsets", "export", "--zookeeper", zk_connect)
    assert code == 0 and set(out.splitlines()) == export_lines(OFFSETS)


def test_import_zk_offsets_reads_what_zkcoord_exported(capsys, zk, zk_connect, zk_server, tmp_path):
    write_offsets(zk)
    every = tmp_path / "every.txt"
    code, _ = run_zkcoord(capsys, "legacy", "offsets", "export", "--output", str(every), "--zookeeper", zk_connect)
    text = every.read_text(encoding="utf-8")
    assert code == 0 and text.endswith("\n") and "\n\n" not in text  # the tool stops reading at a blank line
    assert set(text.splitlines()) == export_lines(OFFSETS)

    other = fresh_chroot(zk_server)  # ImportZkOffsets cannot create a missing chroot
    imported = run_tool("ImportZkOffsets", "--zkconnect", other, "--input-file", str(every))
    assert imported.returncode == 0 and "Exception" not in imported.stderr, imported.stderr
    assert offsets_in(other) == OFFSETS

    code, out = run_zkcoord(
        capsys, "legacy", "offsets", "export", "--group", "g3", "--group", "idle-topic", "--zookeeper", zk_connect
    )
    some = tmp_path / "some.txt"
    some.write_text(out, encoding="utf-8")
    zk.delete(layout.group_path("g3"), recursive=True)
    imported = run_tool("ImportZkOffsets", "--zkconnect", zk_connect, "--input-file", str(some))
    assert imported.returncode == 0 and "Exception" not in imported.stderr, imported.stderr
    assert offsets_in(zk_connect) == OFFSETS


# ---- groups that zkcoord's members own, on the session's broker ---------------------------------------


@contextlib.contextmanager
def live_group(kafka, group: str, members: dict[str, dict[str, int]]) -> Iterator[dict[str, LegacyConsumer]]:
    """zkcoord members ``<group>_<name>`` reading ``kafka`` (ZooKeeper offsets, no auto-commit), once the group's
    ownership is the range assignor's."""
    source = KafkaSource(kafka.bootstrap)
    client = KazooClient(hosts=kafka.zk_connect)
    client.start(timeout=15)
    started: dict[str, LegacyConsumer] = {}
    config = {"group.id": group, "zookeeper.connect": kafka.zk_connect, "auto.commit.enable": False}
    config.update({"rebalance.backoff.ms": 200, "rebalance.max.retries": 10})  # two members join at once
    try:
        for name, topics in members.items():
            member = LegacyConsumer({**config, "consumer.id": name}, topics=topics, source=source)
            started[name] = member.start()
        consumer_ids = [member.consumer_id for member in started.values()]
        wait_until(lambda: converged(client, group, members=consumer_ids), timeout=30, what=f"{group} to settle")
        yield started
    finally:
        for member in started.values():
            member.close()
        source.close()
        client.stop()
        client.close()


def checker_rows(stdout: str) -> dict[TopicPartition, dict[str, str]]:
    """ConsumerOffsetChecker's table: ``Group Topic Pid Offset logSize Lag Owner`` (names hold no spaces)."""
    lines = stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:3] == ["Group", "Topic", "Pid"])
    rows = {}
    for line in lines[header + 1 :]:
        _group, topic, pid, offset, log_size, lag, owner = line.split()
        rows[TopicPartition(topic, int(pid))] = {"offset": offset, "logSize": log_size, "lag": lag, "owner": owner}
    return rows


def check_offsets(connect: str, group: str) -> subprocess.CompletedProcess:
    """ConsumerOffsetChecker's run once the broker answered its OffsetFetch: right after Kafka creates
    ``__consumer_offsets`` (the session's first FindCoordinator), the partition may still be loading (error 14),
    and the tool then prints "Could not fetch offset" and leaves the offset out."""

    def answered() -> subprocess.CompletedProcess | None:
        done = run_tool("ConsumerOffsetChecker", "--zookeeper", connect, "--group", group)
        return None if "Could not fetch offset" in done.stdout else done

    return wait_until(answered, timeout=60, interval=0.5, what="ConsumerOffsetChecker to fetch every offset")


def test_consumer_offset_checker_shows_what_zkcoord_committed(capsys, kafka, tmp_path):
    suffix = uuid.uuid4().hex[:8]
    orders, clicks, group = f"orders.v1-{suffix}", f"clicks_{suffix}", f"tools.checker-{suffix}"
    kafka.create_topic(orders, 3)
    kafka.create_topic(clicks, 2)
    for partition in range(3):
        kafka.produce(orders, [b"o"] * (4 + partition), partition=partition)
    kafka.produce(clicks, [b"c"] * 3, partition=0)
    with live_group(kafka, group, {"a": {orders: 2, clicks: 1}, "b": {orders: 1}}) as members:
        # range: a-0 owns orders-0 and both clicks partitions, a-1 orders-1, b-0 orders-2
        members["a"].commit({TopicPartition(orders, 0): 3, TopicPartition(orders, 1): 5, TopicPartition(clicks, 0): 1})
        imported = tmp_path / "b.txt"
        imported.write_text(f"{layout.offset_path(group, orders, 2)}:6\n", encoding="utf-8")
        zookeeper = ("--zookeeper", kafka.zk_connect)
        assert run_zkcoord(capsys, "legacy", "offsets", "import", "--input", str(imported), *zookeeper)[0] == 0

        checked = check_offsets(kafka.zk_connect, group)
        source = f"kafka:bootstrap={kafka.bootstrap}"
        code, described = run_zkcoord(
            capsys, "groups", "describe", "--group", group, *zookeeper, "--source", source, "--json"
        )
        assert code == 0
        code, verified = run_zkcoord(capsys, "legacy", "verify", "--group", group, *zookeeper, "--json")
        assert code == 0

    assert checked.returncode == 0, checked.stderr
    checker = checker_rows(checked.stdout)
    assert {tp: row["offset"] for tp, row in checker.items()} == {
        TopicPartition(orders, 0): "3",
        TopicPartition(orders, 1): "5",
        TopicPartition(orders, 2): "6",
        TopicPartition(clicks, 0): "1",
        TopicPartition(clicks, 1): "-1",  # no commit: the tool prints -1 and an unknown lag
    }
    rows = {TopicPartition(r["topic"], r["partition"]): r for r in json.loads(described)[0]["offsets"]}
    owners = {TopicPartition(r["topic"], r["partition"]): r["owner"] for r in json.loads(verified)["partitions"]}
    assert set(rows) == set(owners) == set(checker)
    for tp, row in checker.items():
        current = rows[tp]["current_offset"]
        assert row["offset"] == str(-1 if current is None else current), tp
        assert row["logSize"] == str(rows[tp]["log_end_offset"]), tp
        assert row["lag"] == ("unknown" if rows[tp]["lag"] is None else str(rows[tp]["lag"])), tp
        assert row["owner"] == owners[tp], tp  # the thread id
        assert row["owner"].rsplit("-", 1)[0] == rows[tp]["consumer_id"], tp  # describe names the consumer


def test_verify_consumer_rebalance_and_legacy_verify_read_the_same_owners(capsys, kafka):
    suffix = uuid.uuid4().hex[:8]
    topic, group = f"events.x-{suffix}", f"tools.verify-{suffix}"
    kafka.create_topic(topic, 3)
    zookeeper = ("--zookeeper", kafka.zk_connect)
    with live_group(kafka, group, {"a": {topic: 2}, "b": {topic: 1}}) as members:
        threads = [f"{members['a'].consumer_id}-0", f"{members['a'].consumer_id}-1", f"{members['b'].consumer_id}-0"]
        written = {TopicPartition(topic, p): thread for p, thread in enumerate(threads)}

        code, out = run_zkcoord(capsys, "legacy", "verify", "--group", group, *zookeeper, "--json")
        assert code == 0 and json.loads(out)["ok"]
        first = verify_consumer_rebalance(kafka.zk_connect, group)
        assert not first.successful  # 0.8.2.2's bug (KAFKA-3952), on a correct group
        assert first.unowned == [] and first.owners == written and first.unexplained == []
        last = verify_consumer_rebalance(kafka.zk_connect, group, peers.REBALANCE_VERIFIER)
        assert last.successful and last.unowned == [] and last.owners == {}

        gone = f"{group}_gone-0"
        zk = KazooClient(hosts=kafka.zk_connect)
        zk.start(timeout=15)
        try:
            zk.delete(layout.owner_path(group, topic, 0))
            zk.set(layout.owner_path(group, topic, 2), gone.encode())
        finally:
            zk.stop()
            zk.close()

        code, out = run_zkcoord(capsys, "legacy", "verify", "--group", group, *zookeeper, "--json")
        assert code == 1
        assert json.loads(out)["problems"] == [
            f"no owner for partition [{topic},0]",
            f"owner {gone} of [{topic},2] is not a live thread of group {group}",
        ]
        first = verify_consumer_rebalance(kafka.zk_connect, group)
        assert not first.successful and first.unowned == [TopicPartition(topic, 0)]
        assert first.owners == {TopicPartition(topic, 1): threads[1], TopicPartition(topic, 2): gone}
        last = verify_consumer_rebalance(kafka.zk_connect, group, peers.REBALANCE_VERIFIER)
        assert not last.successful and last.unowned == [TopicPartition(topic, 0)]
        assert last.owners == {TopicPartition(topic, 2): gone}  # the one owner it finds no member for


def test_verify_consumer_rebalance_passes_a_group_that_does_not_exist(capsys, kafka):
    """A difference: the tool checks nothing it cannot find and reports success; ``legacy verify`` exits 1."""
    group = f"tools.nowhere-{uuid.uuid4().hex[:8]}"
    nothing = verify_consumer_rebalance(kafka.zk_connect, group)
    assert nothing.successful and nothing.unowned == [] and nothing.owners == {}
    code, out = run_zkcoord(capsys, "legacy", "verify", "--group", group, "--zookeeper", kafka.zk_connect)
    assert code == 1 and f"consumer group {group} does not exist" in out
