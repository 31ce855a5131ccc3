"""A live legacy group walked through every migration step and back, on real ZooKeeper and node processes.

Issue "Done when": members keep consuming while ``zkcoord migrate`` runs, with rolling bounces between
steps and member restarts during them; no committed offset regresses at any sample, and re-consumed
records are counted (clean bounces commit before they release, so none are expected). Then SIGKILL of
``zkcoord migrate`` at random points, and a rerun that completes with a consistent state.
"""

import collections
import os
import random
import signal
import subprocess
import sys
import threading
import time

import pytest
from cluster_support import Cluster, eventually
from legacy_support import prepare_cluster
from migrate_support import confirmed

from zkcoord.channel import CoordinatorChannel
from zkcoord.errors import ConsumerTimeoutError
from zkcoord.legacy.consumer import LegacyConsumer
from zkcoord.migration import store
from zkcoord.migration.phases import RULES, Phase, read_offset
from zkcoord.migration.verify import fetch_log_offsets
from zkcoord.sources import SyntheticSource
from zkcoord.zk import admin, layout
from zkcoord.zk.nodes import discover_nodes
from zkcoord.zk.offsets import read_group_offsets, write_offsets

GROUP = "g"
TOPIC = "t"
PARTITIONS = 8
NODE_OVERRIDES = {
    "offsets.topic.num.partitions": 4,
    "group.initial.rebalance.delay.ms": 0,
    "group.min.session.timeout.ms": 10,
    "zookeeper.session.timeout.ms": 4000,
}
MEMBER_CONFIG = {
    "group.id": GROUP,
    "zookeeper.session.timeout.ms": 3000,
    "rebalance.backoff.ms": 200,
    "rebalance.max.retries": 20,
    "auto.commit.enable": True,
    "auto.commit.interval.ms": 200,
    "auto.offset.reset": "smallest",
    "consumer.timeout.ms": 100,
    "offsets.channel.backoff.ms": 100,
}


def migrate(zk_connect: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "zkcoord.cli", "migrate", *confirmed(args), "--zookeeper", zk_connect]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout)


def migrate_ok(zk_connect: str, *args: str) -> subprocess.CompletedProcess:
    result = migrate(zk_connect, *args)
    assert result.returncode == 0, f"migrate {' '.join(args)}: {result.stdout}\n{result.stderr}"
    return result


class LegacyGroup:
    """Legacy members of GROUP, each stream drained by a thread that records every offset it is handed."""

    def __init__(self, zk_connect: str, source: SyntheticSource):
        self.zk_connect, self.source = zk_connect, source
        self.members: dict[str, LegacyConsumer] = {}
        self.consumed: collections.Counter = collections.Counter()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._serial = 0

    def start(self) -> str:
        self._serial += 1
        name = f"m{self._serial}"
        member = LegacyConsumer(
            {**MEMBER_CONFIG, "zookeeper.connect": self.zk_connect, "consumer.id": name},
            topics={TOPIC: 2},
            source=self.source,
        )
        member.start(timeout=60)
        self.members[name] = member
        for stream in member.streams()[TOPIC]:
            thread = threading.Thread(target=self._drain, args=(stream,), daemon=True)
            thread.start()
            self._threads.append(thread)
        return name

    def _drain(self, stream) -> None:
        while True:
            try:
                for record in stream:
                    with self._lock:
                        self.consumed[(record.partition, record.offset)] += 1
                return  # the member closed
            except ConsumerTimeoutError:
                continue

    def stop(self, name: str) -> None:
        self.members.pop(name).close()

    def bounce_all(self) -> None:
        """A rolling bounce: each member closes (committing) and a new one takes its place."""
        for name in list(self.members):
            self.stop(name)
            self.start()

    def close(self) -> None:
        for name in list(self.members):
            self.stop(name)
        for thread in self._threads:
            thread.join(timeout=10)


class RegressionMonitor:
    """Samples, every 50 ms, the committed offset a member starting now would read; none may go down."""

    def __init__(self, zk, channel: CoordinatorChannel):
        self.zk, self.channel = zk, channel
        self.highest: dict[int, int] = {}
        self.regressions: list[str] = []
        self.samples = 0
        self.paused = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc_info):
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            if not self.paused.is_set():
                self.sample()

    def sample(self) -> None:
        state, _ = store.read_state(self.zk, layout.DEFAULT_ROOT, GROUP)
        phase = Phase.ZK_ONLY if state is None else state.phase
        zk = read_group_offsets(self.zk, GROUP).offsets
        # The coordinator answers by the phase's rule (max in DUAL_WRITE, the log after it).
        log = {} if phase == Phase.ZK_ONLY else fetch_log_offsets(self.channel, GROUP)
        rule = RULES[phase].legacy_member.reads
        for partition in range(PARTITIONS):
            seen = read_offset(rule, zk.get((TOPIC, partition)), log.get((TOPIC, partition)))
            before = self.highest.get(partition, -1)
            if seen < before:
                self.regressions.append(f"partition {partition} went from {before} to {seen} in {phase.name}")
            self.highest[partition] = max(before, seen)
        self.samples += 1


@pytest.fixture
def cluster(zk, zk_connect, tmp_path):
    prepare_cluster(zk, {TOPIC: PARTITIONS})
    with Cluster(zk_connect, tmp_path / "log", tmp_path, NODE_OVERRIDES) as nodes:
        nodes.start([1])
        nodes.wait_balanced(zk)
        yield nodes


def test_a_consuming_group_walks_every_step_up_and_back_down_without_regression(cluster, zk, zk_connect):
    source = SyntheticSource(rate_per_partition=400, initial_records=300)
    channel = CoordinatorChannel(lambda: discover_nodes(zk, layout.DEFAULT_ROOT), "test", 10000)
    group = LegacyGroup(zk_connect, source)
    rng = random.Random(7)
    phases = []
    try:
        for _ in range(3):
            group.start()
        eventually(lambda: len(read_group_offsets(zk, GROUP).offsets) == PARTITIONS, 30, "first ZooKeeper commits")
        with RegressionMonitor(zk, channel) as monitor:
            for direction, to in [("up", "0001_dual_commit"), ("up", "0002_backfill_log"),
                                  ("up", "0003_read_from_log"), ("up", "0004_stop_zk_commits"),
                                  ("down", "0003_read_from_log"), ("down", "0002_backfill_log"),
                                  ("down", "0001_dual_commit"), ("down", "zero")]:  # fmt: skip
                monitor.paused.set()  # a phase flip is not atomic across members: sample between steps
                running = subprocess.Popen(
                    [sys.executable, "-m", "zkcoord.cli", "migrate", direction, "--group", GROUP, "--to", to,
                     "--zookeeper", zk_connect],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                )  # fmt: skip
                victim = rng.choice(sorted(group.members))  # a member restart while the step runs
                group.stop(victim)
                group.start()
                out, err = running.communicate(timeout=120)
                assert running.returncode == 0, f"migrate {direction} --to {to}:\n{out}\n{err}"
                monitor.paused.clear()
                state, _ = store.read_state(zk, layout.DEFAULT_ROOT, GROUP)
                phases.append(state.phase.name)
                time.sleep(0.5)  # consume and commit in the new phase
                group.bounce_all()
                time.sleep(0.5)
                verified = migrate(zk_connect, "verify", "--group", GROUP)
                assert verified.returncode == 0, f"after {direction} {to}:\n{verified.stdout}\n{verified.stderr}"
            monitor.sample()
    finally:
        group.close()
        channel.close()
    assert phases == ["DUAL_WRITE", "DUAL_WRITE", "LOG_PRIMARY", "LOG_ONLY", "LOG_PRIMARY", "DUAL_WRITE",
                      "DUAL_WRITE", "ZK_ONLY"]  # fmt: skip
    assert monitor.samples > 20 and monitor.regressions == []
    final = read_group_offsets(zk, GROUP).offsets
    duplicates = sum(count - 1 for count in group.consumed.values())
    for partition in range(PARTITIONS):
        committed = final[(TOPIC, partition)]
        missing = [o for o in range(committed) if group.consumed[(partition, o)] == 0]
        assert not missing, f"partition {partition}: {len(missing)} records never consumed, first {missing[:5]}"
    print(f"consumed {sum(group.consumed.values())} records, {duplicates} again; {monitor.samples} samples")
    assert duplicates == 0  # every bounce was clean: commit before release


def test_sigkill_of_migrate_at_random_points_then_a_rerun_completes(cluster, zk, zk_connect):
    """Resumable after a crash at any point: the step under way runs again; the state ends consistent."""
    admin.create_topic(zk, "idle", 300)
    idle = {("idle", p): 1000 + p for p in range(300)}  # enough partitions for the backfill to take a while
    write_offsets(zk, GROUP, idle)
    source = SyntheticSource(rate_per_partition=200, initial_records=100)
    group = LegacyGroup(zk_connect, source)
    rng = random.Random(int(os.environ.get("ZKCOORD_SEED", "11")))
    kills = []
    try:
        group.start()
        for _ in range(3):
            running = subprocess.Popen(
                [sys.executable, "-m", "zkcoord.cli", "migrate", "up", "--group", GROUP, "--zookeeper", zk_connect],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            )  # fmt: skip
            time.sleep(rng.uniform(0.3, 2.5))  # the interpreter starts in about 0.3 s
            running.send_signal(signal.SIGKILL)
            running.wait(timeout=10)
            state, _ = store.read_state(zk, layout.DEFAULT_ROOT, GROUP)
            kills.append(None if state is None else (state.phase.name, state.applied, state.pending))
        migrate_ok(zk_connect, "up", "--group", GROUP)
        state, _ = store.read_state(zk, layout.DEFAULT_ROOT, GROUP)
        assert (state.phase, state.pending) == (Phase.LOG_ONLY, None), kills
        assert list(state.applied) == ["0001_dual_commit", "0002_backfill_log", "0003_read_from_log",
                                       "0004_stop_zk_commits"]  # fmt: skip
        assert state.epoch == 3  # three phase changes, each made once however often the run was killed
        migrate_ok(zk_connect, "verify", "--group", GROUP)
        log = fetch_log_offsets(CoordinatorChannel(lambda: discover_nodes(zk, layout.DEFAULT_ROOT), "t", 5000), GROUP)
        assert all(log[p] == o for p, o in idle.items())  # the backfill copied every idle partition
        print(f"states seen after each SIGKILL: {kills}")
    finally:
        group.close()
