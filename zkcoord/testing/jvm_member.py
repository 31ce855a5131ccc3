"""Unmodified Kafka 0.8.2 consumers as members of legacy groups in tests, and 0.8.2's own rebalance check.

Two kinds of JVM member, both Kafka 0.8.2.2's ``ZookeeperConsumerConnector`` in a child JVM (docs/peers.md):
``kafka.tools.ConsoleConsumer`` (a whitelist, one stream; it prints each record's value) and the
``LegacyMember`` driver of :mod:`zkcoord.peers.driver` (static subscriptions with several streams per topic,
or a wildcard; it prints ``started``, then ``record TOPIC PARTITION OFFSET VALUE`` lines). A member is
stopped with SIGTERM (its shutdown commits and closes the session), killed with SIGKILL, or paused with
SIGSTOP past its session timeout so that ZooKeeper expires it. :class:`JvmMembers` owns the members of a
test and kills whatever is left on exit.

:func:`verify_consumer_rebalance` runs ``kafka.tools.VerifyConsumerRebalance``. 0.8.2.2's can never print
success for a group that has partitions: it compares owner znode names (strings) with partition numbers
(ints) and owner values with thread-id objects, so every owned partition draws one "No owner" and one "not a
valid member" error (KAFKA-3952, fixed in 0.10.1). The report keeps the owner it read per partition and the
complaints those two type mismatches do not explain. Kafka 1.1.1's (``peers.REBALANCE_VERIFIER``), the last
release that has the tool, reads the same layout and gives the verdict (docs/peers.md).
"""

import os
import re
import signal
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kazoo.client import KazooClient

from zkcoord import peers
from zkcoord.model import TopicPartition
from zkcoord.peers import driver
from zkcoord.peers.jvm import java_command
from zkcoord.testing.zookeeper import wait_until
from zkcoord.zk import layout

# Short timings, so that a test sees expiries and retries in seconds; tests override any of them.
FAST_JVM_PROPERTIES = {
    "zookeeper.session.timeout.ms": "3000",
    "zookeeper.connection.timeout.ms": "10000",
    "rebalance.backoff.ms": "300",
    "rebalance.max.retries": "10",
    "auto.commit.interval.ms": "200",
    "auto.offset.reset": "smallest",
}
# What 0.8.2 logs when a rebalance failed every retry (the watcher thread logs the exception at ERROR).
GAVE_UP = re.compile(r"can't rebalance after \d+ retries|ConsumerRebalanceFailedException")
_RECORD = re.compile(r"record (\S+) (\d+) (\d+) (.*)")


@dataclass(frozen=True)
class JvmRecord:
    topic: str
    partition: int
    offset: int
    value: str


class JvmMember:
    """One 0.8.2 consumer in a child JVM; its standard output and error go to files named by its consumer id
    in ``workdir``."""

    def __init__(self, name: str, consumer_id: str, command: Sequence[str], workdir: Path, prints_started: bool):
        self.name = name
        self.consumer_id = consumer_id
        self.command = list(command)
        self.stdout_path = workdir / f"{consumer_id}.out"
        self.stderr_path = workdir / f"{consumer_id}.err"
        self._prints_started = prints_started
        self._process: subprocess.Popen | None = None
        self._paused = False

    def start(self) -> "JvmMember":
        with open(self.stdout_path, "wb") as stdout, open(self.stderr_path, "wb") as stderr:
            self._process = subprocess.Popen(self.command, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr)
        return self

    @property
    def pid(self) -> int:
        assert self._process is not None, f"{self.name} was never started"
        return self._process.pid

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def stdout(self) -> str:
        return self.stdout_path.read_text(errors="replace") if self.stdout_path.exists() else ""

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace") if self.stderr_path.exists() else ""

    def wait_started(self, client: KazooClient, group: str, timeout: float = 60.0) -> "JvmMember":
        """Until the member is registered in ``group`` (and the driver has finished its first rebalance)."""

        def started() -> bool:
            if not self.running:
                raise AssertionError(f"JVM member {self.name} exited with {self._process.returncode}: {self._tail()}")
            if self._prints_started and "started" not in self.stdout().splitlines():
                return False
            return client.exists(layout.consumer_path(group, self.consumer_id)) is not None

        wait_until(started, timeout=timeout, interval=0.05, what=f"JVM member {self.name} to join {group}")
        return self

    def gave_up_rebalancing(self) -> bool:
        """Whether 0.8.2 logged a rebalance that failed every retry (it then owns nothing until a trigger)."""
        return bool(GAVE_UP.search(self.stderr()))

    def records(self) -> list[JvmRecord]:
        """The records the driver printed (the console consumer prints values only: see :meth:`values`)."""
        found = (_RECORD.fullmatch(line) for line in self.stdout().splitlines())
        return [JvmRecord(m[1], int(m[2]), int(m[3]), m[4]) for m in found if m]

    def values(self) -> list[str]:
        """The value of every record the member printed, of either kind."""
        if self._prints_started:
            return [record.value for record in self.records()]
        return self.stdout().splitlines()

    def pause(self) -> None:
        """SIGSTOP: the JVM stops answering ZooKeeper, which expires its session after the timeout."""
        os.kill(self.pid, signal.SIGSTOP)
        self._paused = True

    def resume(self) -> None:
        os.kill(self.pid, signal.SIGCONT)
        self._paused = False

    def kill(self) -> None:
        """SIGKILL: nothing is committed; the ephemerals stay until ZooKeeper expires the session."""
        if self.running:
            self._process.kill()
            self._process.wait(10)

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM: 0.8.2's shutdown() commits (with auto-commit on) and closes the session; the exit status."""
        if self.running:
            if self._paused:
                self.resume()
            self._process.terminate()
            try:
                self._process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        return self._process.returncode if self._process is not None else 0

    def _tail(self, lines: int = 20) -> str:
        return "\n".join((self.stdout() + self.stderr()).strip().splitlines()[-lines:])


def _properties(
    group: str, zookeeper_connect: str, name: str, properties: Mapping[str, object] | None
) -> dict[str, str]:
    return {
        **FAST_JVM_PROPERTIES,
        **{key: str(value) for key, value in (properties or {}).items()},
        "group.id": group,
        "zookeeper.connect": zookeeper_connect,
        "consumer.id": name,
    }


class JvmMembers:
    """The JVM members of one test, in ``workdir``; a context manager that kills every one left on exit."""

    def __init__(self, workdir: Path, heap_mb: int = 128):
        self.workdir = Path(workdir)
        self.heap_mb = heap_mb
        self.members: list[JvmMember] = []

    def driver(
        self,
        zookeeper_connect: str,
        group: str,
        name: str,
        *,
        topics: Mapping[str, int] | None = None,
        whitelist: str | None = None,
        blacklist: str | None = None,
        num_streams: int = 1,
        properties: Mapping[str, object] | None = None,
    ) -> JvmMember:
        """Start the LegacyMember driver as ``<group>_<name>``: a static ``topics`` map (in its order) or a
        wildcard; ``properties`` are 0.8.2 consumer properties laid over :data:`FAST_JVM_PROPERTIES`."""
        if sum(x is not None for x in (topics, whitelist, blacklist)) != 1:
            raise ValueError("subscribe the driver with exactly one of topics=, whitelist= or blacklist=")
        if topics is not None:
            subscription = ["--topics", ",".join(f"{topic}:{streams}" for topic, streams in topics.items())]
        else:
            kind = "--whitelist" if whitelist is not None else "--blacklist"
            subscription = [kind, whitelist if whitelist is not None else blacklist, str(num_streams)]
        config = self._write_properties(_properties(group, zookeeper_connect, name, properties))
        command = java_command(
            peers.LEGACY_CONSUMER,
            driver.MAIN_CLASS,
            [str(config), *subscription],
            heap_mb=self.heap_mb,
            classpath_extra=[str(driver.compiled_driver())],
        )
        return self._start(JvmMember(name, f"{group}_{name}", command, self.workdir, prints_started=True))

    def console(
        self,
        zookeeper_connect: str,
        group: str,
        name: str,
        whitelist: str,
        *,
        from_beginning: bool = False,
        properties: Mapping[str, object] | None = None,
    ) -> JvmMember:
        """Start ``kafka.tools.ConsoleConsumer --whitelist`` as ``<group>_<name>`` (one stream).

        The tool sets ``auto.offset.reset`` itself: ``smallest`` with ``from_beginning``, which it refuses
        (exit 1) once the group has offsets, else ``largest``.
        """
        config = self._write_properties(_properties(group, zookeeper_connect, name, properties))
        args = ["--zookeeper", zookeeper_connect, "--whitelist", whitelist, "--consumer.config", str(config)]
        command = java_command(
            peers.LEGACY_CONSUMER,
            "kafka.tools.ConsoleConsumer",
            [*args, *(["--from-beginning"] if from_beginning else [])],
            heap_mb=self.heap_mb,
        )
        return self._start(JvmMember(name, f"{group}_{name}", command, self.workdir, prints_started=False))

    def gave_up_rebalancing(self) -> list[str]:
        """The members that logged a rebalance failing every retry."""
        return [member.name for member in self.members if member.gave_up_rebalancing()]

    def _write_properties(self, properties: Mapping[str, str]) -> Path:
        self.workdir.mkdir(parents=True, exist_ok=True)
        path = self.workdir / f"{properties['group.id']}_{properties['consumer.id']}.properties"
        path.write_text("".join(f"{key}={value}\n" for key, value in properties.items()))
        return path

    def _start(self, member: JvmMember) -> JvmMember:
        self.members.append(member.start())
        return member

    def close(self) -> None:
        for member in self.members:
            member.kill()  # SIGKILL ends a paused (SIGSTOPped) JVM too

    def __enter__(self) -> "JvmMembers":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


@dataclass(frozen=True)
class RebalanceVerification:
    """What ``kafka.tools.VerifyConsumerRebalance`` printed for a group."""

    successful: bool  # its verdict line
    owners: dict[TopicPartition, str]  # the owner znode value 0.8.2.2's read, per partition (later ones log it at INFO)
    unowned: list[TopicPartition]  # partitions it found no owner znode for
    unexplained: list[str] = field(default_factory=list)  # complaints KAFKA-3952 does not explain
    output: str = ""

    @property
    def verified(self) -> bool:
        """Success, or every complaint is one of KAFKA-3952's two type mismatches about an owned partition."""
        return self.successful or (not self.unowned and not self.unexplained and "Rebalance operation" in self.output)


_PARTITION = r"\[(.+),(\d+)\]"
_NO_OWNER = re.compile(rf"No owner for partition {_PARTITION}")
_OWNER = re.compile(rf"Owner (.+) for partition {_PARTITION} is not a valid member of consumer group (.+)")


def verify_consumer_rebalance(
    zookeeper_connect: str, group: str, peer: peers.Peer = peers.LEGACY_CONSUMER, timeout: float = 60.0
) -> RebalanceVerification:
    """Run ``VerifyConsumerRebalance --zookeeper.connect ... --group ...`` of ``peer`` (0.8.2.2's by default, or
    ``peers.REBALANCE_VERIFIER``) and read its output."""
    command = java_command(
        peer,
        "kafka.tools.VerifyConsumerRebalance",
        ["--zookeeper.connect", zookeeper_connect, "--group", group],
    )
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    return read_verification(done.stdout, done.stderr)


def read_verification(stdout: str, stderr: str) -> RebalanceVerification:
    """VerifyConsumerRebalance's verdict (standard output) and its log4j errors (standard error)."""
    owners: dict[TopicPartition, str] = {}
    no_owner_lines: dict[TopicPartition, int] = {}
    unexplained = []
    for line in (stdout + stderr).splitlines():
        if (owner := _OWNER.search(line)) is not None:
            owners[TopicPartition(owner[2], int(owner[3]))] = owner[1]
        elif (missing := _NO_OWNER.search(line)) is not None:
            partition = TopicPartition(missing[1], int(missing[2]))
            no_owner_lines[partition] = no_owner_lines.get(partition, 0) + 1
        elif " ERROR " in line or "Exception" in line:
            unexplained.append(line)
    # An owned partition draws one "No owner" line (the name check's type mismatch); one without an owner
    # znode draws a second for its missing value.
    unowned = sorted(tp for tp, count in no_owner_lines.items() if count > 1 or tp not in owners)
    return RebalanceVerification(
        successful="Rebalance operation successful" in stdout,
        owners=owners,
        unowned=unowned,
        unexplained=unexplained,
        output=stdout + stderr,
    )
