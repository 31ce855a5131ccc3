"""``zkcoord legacy run`` as 0.8.2's console consumer, reading a real Kafka 3.9 broker (the session's ``kafka``
fixture) found through its registration in ZooKeeper, committing to ZooKeeper."""

import re
import signal
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from zkcoord import cli
from zkcoord.testing.zookeeper import wait_until
from zkcoord.zk import admin, layout

FAST_COMMITS = ("--consumer-property", "auto.commit.interval.ms=200")


def unique(name: str) -> str:
    """Topics and groups of the session's one broker differ by name."""
    return f"{name}-{uuid.uuid4().hex[:8]}"


class Member:
    """One ``zkcoord legacy run`` process; its standard output and error go to files."""

    def __init__(self, folder: Path, name: str, *argv: str):
        self.stdout, self.stderr = folder / f"{name}.out", folder / f"{name}.err"
        with self.stdout.open("wb") as out, self.stderr.open("wb") as err:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "zkcoord.cli", "legacy", "run", "--consumer-id", name, *argv],
                stdout=out,
                stderr=err,
            )

    def interrupt_and_wait(self) -> int:
        self.process.send_signal(signal.SIGINT)
        return self.process.wait(60)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def lines(self) -> list[str]:
        return self.stdout.read_text().splitlines()


def committed(client: KazooClient, group: str, topic: str, partitions: int) -> dict[int, int]:
    offsets = {}
    for partition in range(partitions):
        path = layout.offset_path(group, topic, partition)
        if client.exists(path):
            offsets[partition] = int(client.get(path)[0])
    return offsets


def owners(client: KazooClient, group: str, topic: str) -> dict[str, str]:
    """Partition → the thread id in its owner znode (members release and claim them meanwhile)."""
    path = layout.owners_path(group, topic)
    found = {}
    try:
        for partition in client.get_children(path):
            found[partition] = client.get(f"{path}/{partition}")[0].decode()
    except NoNodeError:
        return {}
    return found


def test_members_consume_every_record_once_and_commit_the_log_end(kafka, tmp_path):
    topic, group = unique("orders"), unique("console")
    kafka.create_topic(topic, 4)
    kafka.produce(topic, [b"before-%d" % i for i in range(200)])
    argv = ("--zookeeper", kafka.zk_connect, "--group", group, "--topics", topic, "--from-beginning")
    members = [Member(tmp_path, name, *argv, "--print-offsets", *FAST_COMMITS) for name in ("a", "b")]
    client = KazooClient(hosts=kafka.zk_connect)
    client.start(timeout=15)
    try:

        def stable() -> bool:
            owned = owners(client, group, topic)
            return len(owned) == 4 and {owner.rsplit("-", 1)[0] for owner in owned.values()} == {
                f"{group}_a",
                f"{group}_b",
            }

        wait_until(stable, timeout=60, what="both members to own partitions")
        kafka.produce(topic, [b"during-%d" % i for i in range(200)])  # read live, not only from the beginning
        ends = kafka.end_offsets(topic)
        assert sum(ends.values()) == 400
        wait_until(lambda: committed(client, group, topic, 4) == ends, timeout=60, what="the log end committed")
        assert [member.interrupt_and_wait() for member in members] == [130, 130]  # Ctrl-C: interrupted
        assert committed(client, group, topic, 4) == ends  # the final commits moved nothing back
        assert not client.get_children(layout.ids_path(group))  # both left the group
    finally:
        for member in members:
            member.kill()
        client.stop()
        client.close()
    printed = Counter(line for member in members for line in member.lines())
    assert printed == Counter(f"{topic} {p} {offset}" for p in range(4) for offset in range(ends[p]))
    for member in members:  # records alone on standard output; notices on standard error
        err = member.stderr.read_text()
        assert f"reading kafka:bootstrap={kafka.bootstrap}" in err  # found through /brokers/ids
        assert re.search(r"rebalance attempt \d \(startup\): success", err)  # the first may meet the other's claims
        assert f"Consumed {len(member.lines())} messages" in err


def test_max_messages_leaves_after_exactly_that_many_and_commits_them(kafka, tmp_path):
    topic, group = unique("events"), unique("console")
    kafka.create_topic(topic, 2)
    for partition in (0, 1):
        kafka.produce(topic, [b"p%d-%d" % (partition, i) for i in range(20)], partition=partition, key=b"k")
    member = Member(
        tmp_path,
        "m",
        *("--zookeeper", kafka.zk_connect, "--group", group, "--topics", f"{topic}:2", "--from-beginning"),
        *("--bootstrap-server", kafka.bootstrap, "--max-messages", "7", "--print-key"),
    )
    try:
        assert member.process.wait(60) == 0
    finally:
        member.kill()
    lines = member.lines()
    assert len(lines) == 7 and all(line.startswith("k\tp") for line in lines)
    client = KazooClient(hosts=kafka.zk_connect)
    client.start(timeout=15)
    try:
        offsets = committed(client, group, topic, 2)
    finally:
        client.stop()
        client.close()
    assert sum(offsets.values()) == 7  # what was printed, and not a record more, counts as consumed
    for partition, offset in offsets.items():
        assert sorted(line for line in lines if line.startswith(f"k\tp{partition}-")) == sorted(
            f"k\tp{partition}-{i}" for i in range(offset)
        )


def test_the_broker_is_found_in_its_registration(kafka):
    client = KazooClient(hosts=kafka.zk_connect)
    client.start(timeout=15)
    try:
        brokers = admin.read_brokers(client)
    finally:
        client.stop()
        client.close()
    assert [broker.connection_string for broker in brokers] == [kafka.bootstrap]


def test_no_registered_broker_exits_2_saying_what_to_do(capsys, zk_connect):
    code = cli.main(["legacy", "run", "--zookeeper", zk_connect, "--group", "g", "--topics", "t", "--print"])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert f"no broker is registered under /brokers/ids in {zk_connect}" in err
    assert "--bootstrap-server HOST:PORT" in err and "--source synthetic" in err
