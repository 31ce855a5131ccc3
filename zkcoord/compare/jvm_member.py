"""Kafka 0.8.2's own consumer as a member of a comparison run (docs/compare.md, "Migrating members").

The LegacyMember driver (zkcoord.testing.jvm_member, one stream per topic) runs in a child JVM and prints every
record it is handed; this process turns the printed records into ``compare.processed`` events and the owner
znodes that name the JVM's threads into ``compare.assignment`` (and ``compare.rebalance``) events, as 0.8.2
itself claims and releases partitions there. The JVM's own commits go to ZooKeeper unseen: its trace has no
``compare.committed``. It processes records at no cost (``cost_ms`` does not apply).
"""

import contextlib
import re
import threading
from pathlib import Path

from kazoo.exceptions import NoNodeError

from zkcoord.compare.member_trace import CompareTrace, now_ms
from zkcoord.testing.jvm_member import JvmMembers
from zkcoord.zk import layout
from zkcoord.zk.client import started_client

POLL_S = 0.1  # how often the owner znodes and the JVM's output are read
START_TIMEOUT_S = 60.0
_RECORD = re.compile(rb"record (\S+) (\d+) (\d+)(?: |$)")


class JvmMember:
    """A 0.8.2 JVM member of the run's legacy group, with the comparison's trace derived from the outside."""

    failed = False  # a JVM that exits early shows as an exited member process: the runner reports it

    def __init__(self, spec: dict, trace: CompareTrace, stop: threading.Event):
        config = spec["config"]
        self.trace, self.stop = trace, stop
        self.group, self.topics = config["group.id"], spec["topics"]
        self._jvms = JvmMembers(Path(spec["log_dir"]) / f"{spec['instance']}.jvm")
        ours = ("group.id", "consumer.id", "zkcoord.root")  # the driver sets the first two; 0.8.2 knows no third
        properties = {key: _java(value) for key, value in config.items() if key not in ours}
        self._zk = contextlib.ExitStack()
        self.client = self._zk.enter_context(started_client(config["zookeeper.connect"]))
        self.jvm = self._jvms.driver(
            config["zookeeper.connect"],
            self.group,
            config["consumer.id"],
            topics={topic: 1 for topic in self.topics},
            properties=properties,
        )
        self._thread_prefix = f"{self.jvm.consumer_id}-"
        self._owned: list | None = None
        self._read = 0

    def start(self) -> None:
        try:
            self.jvm.wait_started(self.client, self.group, timeout=START_TIMEOUT_S)
        except BaseException:
            self._zk.close()  # else the ZooKeeper client's threads keep the process from exiting
            self._jvms.close()
            raise
        self._follow()
        self._watcher = threading.Thread(target=self._run, name="jvm-watch", daemon=True)
        self._watcher.start()

    def _run(self) -> None:
        while not self.stop.wait(POLL_S):
            self._follow()

    def _follow(self) -> None:
        """Report what the JVM printed since the last look, then what the owner znodes give it now."""
        self._report_records()
        owned = sorted(self._owned_partitions())
        if owned != self._owned:
            self._owned = owned
            self.trace.emit("compare.assignment", partitions=[list(tp) for tp in owned])
            self.trace.emit("compare.rebalance", generation=None)

    def _owned_partitions(self) -> set[tuple[str, int]]:
        owned = set()
        for topic in self.topics:
            with contextlib.suppress(NoNodeError):
                for child in self.client.get_children(layout.owners_path(self.group, topic)):
                    with contextlib.suppress(NoNodeError):
                        owner, _ = self.client.get(layout.owner_path(self.group, topic, int(child)))
                        if owner.decode().startswith(self._thread_prefix):
                            owned.add((topic, int(child)))
        return owned

    def _report_records(self) -> None:
        """The complete ``record`` lines printed since the last call, as ``compare.processed`` events."""
        with contextlib.suppress(FileNotFoundError), open(self.jvm.stdout_path, "rb") as output:
            output.seek(self._read)
            data = output.read()
        complete = data.rfind(b"\n") + 1
        self._read += complete
        at = now_ms()
        for topic, partition, first, last in record_runs(data[:complete]):
            self.trace.processed(topic, partition, first, last, at)

    def close(self) -> None:
        """SIGTERM the JVM (0.8.2's shutdown commits, releases its partitions, closes its session), then report
        its last records and that it owns nothing."""
        if hasattr(self, "_watcher"):
            self._watcher.join()
        self.jvm.stop()
        self._follow()
        self._zk.close()
        self._jvms.close()


def record_runs(output: bytes) -> list[tuple[str, int, int, int]]:
    """The driver's ``record TOPIC PARTITION OFFSET VALUE`` lines as runs of consecutive offsets of one partition:
    (topic, partition, first offset, last offset); other lines are left out."""
    runs: list[list] = []
    for line in output.splitlines():
        if found := _RECORD.match(line):
            topic, partition, offset = found[1].decode(), int(found[2]), int(found[3])
            if runs and runs[-1][:2] == [topic, partition] and runs[-1][3] == offset - 1:
                runs[-1][3] = offset
            else:
                runs.append([topic, partition, offset, offset])
    return [tuple(run) for run in runs]


def _java(value: object) -> object:
    """A property value as 0.8.2 reads it: booleans only as ``true`` or ``false``."""
    return str(value).lower() if isinstance(value, bool) else value
