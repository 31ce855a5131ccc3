"""A group of ten consumer processes (``zkcoord.testing.client_member``) on three coordinator nodes and a real
ZooKeeper, checked with Kafka's VerifiableConsumer invariants (``zkcoord.testing.verifiable``).

Each scenario consumes 100 synthetic partitions that grow until a known stop, bounces, kills or fails over
something while they grow, then waits until the group committed every partition's end, stops every member
(SIGTERM: a clean close) and checks the traces: commits never ahead of consumption, no gap, every record
consumed, no partition owned twice at one instant. Duplicates are printed (``pytest -s``), not failed.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from cluster_support import Cluster, GroupClient, eventually, group_partition, read_leaders

from zkcoord.model import TopicPartition
from zkcoord.sources import SyntheticSource
from zkcoord.testing.verifiable import REBALANCE_STATES, VerifiableReport, assignments, check_group
from zkcoord.zk import admin

NUM_OFFSETS_PARTITIONS = 6
NODE_OVERRIDES = {
    "offsets.topic.num.partitions": NUM_OFFSETS_PARTITIONS,
    "group.initial.rebalance.delay.ms": 0,
    "group.min.session.timeout.ms": 100,
    "zookeeper.session.timeout.ms": 2000,
    "coordinator.claim.grace.ms": 200,
}
GROUP = "verifiable-group"
TOPIC = "events"
PARTITIONS = 100
ALL_PARTITIONS = frozenset(TopicPartition(TOPIC, p) for p in range(PARTITIONS))
MEMBERS = 10
RATE_PER_PARTITION = 20
SESSION_TIMEOUT_MS = 3000
HEARTBEAT_INTERVAL_MS = 300
STABLE_SECONDS = 30.0
DRAIN_SECONDS = 30.0
HANG_SECONDS = 6.0  # longer than the nodes' ZooKeeper session (2 s) plus the members' session (3 s)


# ---- one member process and its trace ---------------------------------------------------------------------


class TraceTail:
    """A member's JSON-lines trace, read incrementally; a torn last line waits for the rest of it."""

    def __init__(self, path: Path):
        self.path = path
        self.events: list[dict] = []
        self.name: str | None = None
        self.state: dict | None = None  # last client.state event
        self.assignment: dict | None = None  # last client.assignment event
        self._offset = 0
        self._partial = b""

    def update(self) -> TraceTail:
        try:
            with open(self.path, "rb") as trace:
                trace.seek(self._offset)
                data = trace.read()
        except FileNotFoundError:
            return self
        self._offset += len(data)
        *lines, self._partial = (self._partial + data).split(b"\n")
        for line in lines:
            if not line.strip():
                continue
            event = json.loads(line)
            self.events.append(event)
            self.name = self.name or event["member"]
            if event["type"] == "client.state":
                self.state = event
            elif event["type"] == "client.assignment":
                self.assignment = event
        return self

    @property
    def owned(self) -> frozenset[TopicPartition]:
        if self.assignment is None:
            return frozenset()
        return frozenset(TopicPartition(t, p) for claims in self.assignment["assignment"].values() for t, p in claims)

    def commits_since(self, wall_ms: int) -> int:
        return sum(
            1 for e in self.events if e["type"] == "client.committed" and not e["error"] and e["time_ms"] > wall_ms
        )


class MemberProcess:
    """``python -m zkcoord.testing.client_member`` for one slot of the group; a restart is a new incarnation."""

    def __init__(
        self,
        slot: int,
        incarnation: int,
        workdir: Path,
        zk_connect: str,
        spec: str,
        static: bool,
        processing_ms: float,
        warm: bool = False,
    ):
        self.slot = slot
        self.label = f"m{slot}.{incarnation}"
        self.instance_id = f"instance-{slot}" if static else None
        self.tail = TraceTail(workdir / f"{self.label}.jsonl")
        self.log_path = workdir / f"{self.label}.log"
        command = [sys.executable, "-m", "zkcoord.testing.client_member", "--zookeeper", zk_connect]
        command += ["--group", GROUP, "--topic", TOPIC, "--source", spec, "--trace", str(self.tail.path)]
        command += ["--client-id", self.label, "--log-level", "INFO", "--processing-ms-per-record", str(processing_ms)]
        command += [
            "--session-timeout-ms",
            str(SESSION_TIMEOUT_MS),
            "--heartbeat-interval-ms",
            str(HEARTBEAT_INTERVAL_MS),
        ]
        if self.instance_id:
            command += ["--instance-id", self.instance_id]
        if warm:
            command.append("--start-on-stdin")
        with open(self.log_path, "wb") as log_file:
            self.process = subprocess.Popen(
                command,
                stdout=subprocess.PIPE,
                stderr=log_file,
                stdin=subprocess.PIPE if warm else subprocess.DEVNULL,
                text=True,
            )
        self.killed_at: float | None = None
        if warm:
            self._expect("waiting", 60.0)

    def __repr__(self) -> str:
        return f"{self.label}({self.tail.name})"

    def _expect(self, word: str, timeout: float) -> None:
        readable, _, _ = select.select([self.process.stdout], [], [], timeout)
        line = self.process.stdout.readline() if readable else ""
        assert line.strip() == word, f"{self.label} did not print {word}: {line!r}\n{self.log_tail()}"

    def wait_ready(self, timeout: float = 30.0) -> None:
        self._expect("ready", timeout)

    def go(self) -> None:
        """Let a member started with ``warm`` join now."""
        self.process.stdin.write("go\n")
        self.process.stdin.flush()

    def alive(self) -> bool:
        return self.process.poll() is None

    def terminate(self) -> None:
        if self.alive():
            self.process.send_signal(signal.SIGTERM)

    def wait(self, timeout: float = 30.0) -> int:
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.send_signal(signal.SIGUSR1)  # the member writes its threads' stacks to its log
            time.sleep(1)
            raise AssertionError(f"{self.label} did not exit in {timeout:.0f}s\n{self.log_tail()}") from None

    def kill(self) -> float:
        """SIGKILL; returns the moment (time.monotonic) the process was surely gone."""
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(10)
        self.killed_at = time.monotonic()
        return self.killed_at

    def log_tail(self, chars: int = 3000) -> str:
        with contextlib.suppress(OSError):
            return self.log_path.read_text(errors="replace")[-chars:]
        return ""

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            if self.alive():
                self.process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(10)
        self.process.stdout.close()
        if self.process.stdin is not None:
            with contextlib.suppress(OSError):
                self.process.stdin.close()


@dataclass(frozen=True)
class Stable:
    generation: int
    owned: dict[int, frozenset[TopicPartition]]  # by slot


class Group:
    """The member processes of one scenario (every incarnation of every slot) and the source they read."""

    def __init__(
        self,
        cluster: Cluster,
        zk_connect: str,
        workdir: Path,
        duration_s: float,
        static: bool = False,
        processing_ms: float = 0.0,
    ):
        self.cluster = cluster
        self.zk_connect = zk_connect
        self.workdir = workdir
        self.static = static
        self.processing_ms = processing_ms
        now = int(time.time() * 1000)
        self.source = SyntheticSource(RATE_PER_PARTITION, 0, start_ms=now, stop_ms=now + int(duration_s * 1000))
        self.incarnations: list[MemberProcess] = []
        self.live: dict[int, MemberProcess] = {}
        self.client = GroupClient(cluster.addresses)
        cluster.on_close(self.close)

    def start(self, slot: int, warm: bool = False) -> MemberProcess:
        """A new incarnation for ``slot``; ``warm``: imported and waiting for :meth:`MemberProcess.go`."""
        count = sum(1 for m in self.incarnations if m.slot == slot)
        member = MemberProcess(
            slot, count, self.workdir, self.zk_connect, self.source.spec, self.static, self.processing_ms, warm
        )
        self.incarnations.append(member)
        if not warm:
            self.live[slot] = member
        return member

    def replace(self, slot: int, replacement: MemberProcess) -> None:
        """Stop ``slot``'s member (SIGTERM), then let the warm ``replacement`` join in its place."""
        self.stop(slot)
        replacement.go()
        self.live[slot] = replacement
        replacement.wait_ready()

    def start_all(self) -> Stable:
        started = [self.start(slot) for slot in range(MEMBERS)]
        for member in started:
            member.wait_ready()
        return self.wait_stable()

    def stop(self, slot: int) -> None:
        member = self.live.pop(slot)
        member.terminate()
        assert member.wait() == 0, f"{member} did not close cleanly\n{member.log_tail()}"

    def wait_stable(self, newer_than: int = -1, timeout: float = STABLE_SECONDS) -> Stable:
        """Until every live member is STABLE in one generation (after ``newer_than``), owning every partition once."""

        def stable() -> Stable | None:
            generations, owned = set(), {}
            for slot, member in self.live.items():
                assert member.alive(), f"{member} exited with {member.process.poll()}\n{member.log_tail()}"
                tail = member.tail.update()
                if tail.state is None or tail.state["state"] != "STABLE" or tail.assignment is None:
                    return None
                generations |= {tail.state["generation"], tail.assignment["generation"]}
                owned[slot] = tail.owned
            if len(generations) != 1 or min(generations) <= newer_than:
                return None
            if (
                sum(len(p) for p in owned.values()) != PARTITIONS
                or frozenset().union(*owned.values()) != ALL_PARTITIONS
            ):
                return None
            return Stable(generations.pop(), owned)

        try:
            return eventually(stable, timeout, f"a stable group after generation {newer_than}", interval=0.1)
        except AssertionError as error:
            states = {m.label: (m.tail.state or {}).get("state") for m in self.live.values()}
            raise AssertionError(f"{error}; member states {states}\n{self.cluster.logs(1500)}") from None

    def ends(self) -> dict[TopicPartition, int]:
        return self.source.end_offsets(sorted(ALL_PARTITIONS))

    def committed(self) -> dict[TopicPartition, int]:
        response, _ = self.client.call(GROUP, "OffsetFetch", time.monotonic() + 10, group_id=GROUP, topics=None)
        assert response["error_code"] == 0, response
        return {
            TopicPartition(t["name"], p["partition_index"]): p["committed_offset"]
            for t in response["topics"]
            for p in t["partitions"]
            if p["error_code"] == 0
        }

    def wait_drained(self, timeout: float = DRAIN_SECONDS) -> dict[TopicPartition, int]:
        """Until the source stopped growing and the group committed every partition's end."""
        remaining_s = (self.source.stop_ms - time.time() * 1000) / 1000
        if remaining_s > 0:
            time.sleep(remaining_s + 0.05)
        ends = self.ends()

        def drained() -> bool:
            for member in self.live.values():
                assert member.alive(), f"{member} exited with {member.process.poll()}\n{member.log_tail()}"
            committed = self.committed()
            return all(committed.get(tp) == end for tp, end in ends.items())

        try:
            eventually(drained, timeout, "every partition committed to its end", interval=0.25)
        except AssertionError as error:
            short = {str(tp): (self.committed().get(tp), end) for tp, end in ends.items()}
            short = {tp: pair for tp, pair in short.items() if pair[0] != pair[1]}
            raise AssertionError(f"{error}: (committed, end) {short}\n{self.cluster.logs(1500)}") from None
        return ends

    def stop_all(self) -> None:
        members = list(self.live.values())
        self.live.clear()
        for member in members:
            member.terminate()
        for member in members:
            assert member.wait() == 0, f"{member} did not close cleanly\n{member.log_tail()}"

    def events(self) -> list[dict]:
        return [event for member in self.incarnations for event in member.tail.update().events]

    def check(self, ends: dict[TopicPartition, int], title: str) -> tuple[VerifiableReport, list[dict]]:
        events = self.events()
        killed = {m.tail.name: m.killed_at for m in self.incarnations if m.killed_at is not None}
        report = check_group(events, ends, killed=killed)
        print(f"\n--- {title} ---\n{report.summary()}")
        assert report.ok, report.summary()
        assert report.members == tuple(sorted({m.tail.name for m in self.incarnations}))
        return report, events

    def close(self) -> None:
        self.client.close()
        for member in self.incarnations:
            member.close()


@contextlib.contextmanager
def running_cluster(zk, zk_connect: str, workdir: Path):
    admin.create_topic(zk, TOPIC, PARTITIONS)
    with Cluster(zk_connect, workdir / "log", workdir, NODE_OVERRIDES) as cluster:
        cluster.start([1, 2, 3])
        cluster.wait_balanced(zk)
        yield cluster


def rebalances_between(group: Group, since_ms: int, until_ms: int) -> list[dict]:
    """Member state changes into a rebalance within the window, but for the first join of a new incarnation."""
    found = []
    for member in group.incarnations:
        states = [e for e in member.tail.update().events if e["type"] == "client.state"]
        if states and states[0]["previous"] == "UNJOINED" and states[0]["time_ms"] >= since_ms:
            states = states[1:]  # a restarted member's own JoinGroup
        found += [e for e in states if e["state"] in REBALANCE_STATES and since_ms <= e["time_ms"] <= until_ms]
    return found


# ---- scenarios ---------------------------------------------------------------------------------------------


def rolling_bounce_dynamic(zk, zk_connect, tmp_path, slots):
    started = time.monotonic()
    with running_cluster(zk, zk_connect, tmp_path) as cluster:
        # 1 ms of work per record: revocations come while a batch is being processed
        group = Group(cluster, zk_connect, tmp_path, duration_s=6 + 2.5 * len(slots), processing_ms=1.0)
        stable = group.start_all()
        first = stable.generation
        step_seconds = []
        for slot in slots:
            step_started = time.monotonic()
            group.stop(slot)
            group.start(slot).wait_ready()
            stable = group.wait_stable(newer_than=stable.generation)
            step_seconds.append(time.monotonic() - step_started)
        ends = group.wait_drained()
        group.stop_all()
        report, _ = group.check(ends, f"rolling bounce of {len(slots)} dynamic members")
    assert report.generations[-1] >= first + len(slots)  # every bounce is a rebalance (or two)
    print(
        f"generations {first} -> {stable.generation}; steps {min(step_seconds):.1f}..{max(step_seconds):.1f}s; "
        f"test {time.monotonic() - started:.1f}s"
    )


@pytest.mark.soak  # make test: the comparison's rolling bounces (test_compare_run, test_compare_rdkafka)
@pytest.mark.timeout(150)
def test_rolling_bounce_of_dynamic_members(zk, zk_connect, tmp_path):
    rolling_bounce_dynamic(zk, zk_connect, tmp_path, slots=[0, 4, 7])


@pytest.mark.soak
@pytest.mark.timeout(300)
def test_rolling_bounce_of_every_dynamic_member(zk, zk_connect, tmp_path):
    rolling_bounce_dynamic(zk, zk_connect, tmp_path, slots=list(range(MEMBERS)))


def rolling_bounce_static(zk, zk_connect, tmp_path, slots):
    started = time.monotonic()
    with running_cluster(zk, zk_connect, tmp_path) as cluster:
        group = Group(cluster, zk_connect, tmp_path, duration_s=6 + 2.0 * len(slots), static=True)
        before = group.start_all()
        bounce_ms = int(time.time() * 1000)
        restart_seconds = []
        for slot in slots:
            replacement = group.start(slot, warm=True)  # its start-up costs must not eat the session
            step_started = time.monotonic()
            group.replace(slot, replacement)
            after = group.wait_stable()
            restart_seconds.append(time.monotonic() - step_started)
            assert after == before, (
                f"bouncing instance-{slot} (back in {restart_seconds[-1]:.1f}s, session {SESSION_TIMEOUT_MS} ms) "
                f"changed the group: {before} -> {after}"
            )
        ends = group.wait_drained()
        stopping_ms = int(time.time() * 1000)
        group.stop_all()
        report, events = group.check(ends, f"rolling bounce of {len(slots)} static members")
        rebalances = rebalances_between(group, bounce_ms, stopping_ms)
    history = assignments(events)
    print(
        f"generation {before.generation} throughout; restarts (SIGTERM to STABLE) "
        f"{min(restart_seconds):.1f}..{max(restart_seconds):.1f}s; rebalances among the others {len(rebalances)}; "
        f"test {time.monotonic() - started:.1f}s"
    )
    assert rebalances == [], rebalances
    # Every instance, in every incarnation after the group first settled, owned what it owned before.
    for slot, owned in before.owned.items():
        since_settled = {held for _, generation, held in history[f"instance-{slot}"] if generation >= before.generation}
        assert since_settled - {frozenset()} == {owned}, (slot, since_settled)
    assert report.generations[-1] == before.generation


@pytest.mark.soak  # make test: the comparison's static bounces without a rebalance (test_compare_run, _rdkafka)
@pytest.mark.timeout(150)
def test_rolling_bounce_of_static_members_is_no_rebalance(zk, zk_connect, tmp_path):
    rolling_bounce_static(zk, zk_connect, tmp_path, slots=[1, 5, 8])


@pytest.mark.soak
@pytest.mark.timeout(300)
def test_rolling_bounce_of_every_static_member_is_no_rebalance(zk, zk_connect, tmp_path):
    rolling_bounce_static(zk, zk_connect, tmp_path, slots=list(range(MEMBERS)))


@pytest.mark.timeout(150)
def test_sigkilled_member_loses_its_partitions_after_the_session_timeout(zk, zk_connect, tmp_path):
    started = time.monotonic()
    with running_cluster(zk, zk_connect, tmp_path) as cluster:
        group = Group(cluster, zk_connect, tmp_path, duration_s=14)
        before = group.start_all()
        time.sleep(1.0)  # consume and commit a little first
        victim = group.live.pop(3)
        victim_owned = before.owned[3]
        killed_at = victim.kill()
        after = group.wait_stable(newer_than=before.generation)
        ends = group.wait_drained()
        group.stop_all()
        report, events = group.check(ends, "SIGKILL of a member")
    taken = [
        e["monotonic_after"]
        for e in events
        if e["type"] == "client.assignment"
        and e["member"] != victim.tail.name
        and e["monotonic_after"] > killed_at
        and victim_owned & {TopicPartition(t, p) for claims in e["assignment"].values() for t, p in claims}
    ]
    delay = min(taken) - killed_at
    print(
        f"victim {victim.tail.name} owned {len(victim_owned)} partitions; taken over {delay:.2f}s after the kill "
        f"(session {SESSION_TIMEOUT_MS / 1000:.1f}s); generation {before.generation} -> {after.generation}; "
        f"test {time.monotonic() - started:.1f}s"
    )
    # The coordinator expires the session from the last heartbeat: one interval (0.3 s) before the kill, or
    # somewhat more on a busy machine; a reassignment on the disconnect itself would come within ~0.1 s.
    assert delay >= SESSION_TIMEOUT_MS / 1000 - 1.0, delay
    assert delay < SESSION_TIMEOUT_MS / 1000 + 5, delay
    assert frozenset().union(*after.owned.values()) >= victim_owned


@pytest.mark.timeout(150)
def test_coordinator_failover_keeps_the_generation_and_commits_resume(zk, zk_connect, tmp_path):
    started = time.monotonic()
    with running_cluster(zk, zk_connect, tmp_path) as cluster:
        group = Group(cluster, zk_connect, tmp_path, duration_s=14)
        before = group.start_all()
        time.sleep(1.0)
        offsets_partition = group_partition(GROUP, NUM_OFFSETS_PARTITIONS)
        victim = read_leaders(zk, NUM_OFFSETS_PARTITIONS)[offsets_partition][0]
        killed_wall_ms = int(time.time() * 1000)
        cluster.nodes[victim].kill()
        killed_at = time.monotonic()

        def committing_again() -> bool:
            return all(m.tail.update().commits_since(killed_wall_ms + 100) for m in group.live.values())

        eventually(committing_again, 30, "every member committing after the failover", interval=0.1)
        resumed = time.monotonic() - killed_at
        new_node = cluster.node_at(group.client.find_coordinator(GROUP))
        after = group.wait_stable()
        ends = group.wait_drained()
        stopping_ms = int(time.time() * 1000)
        group.stop_all()
        rebalances = rebalances_between(group, killed_wall_ms, stopping_ms)
        report, events = group.check(ends, "coordinator failover")
    failed = sum(1 for e in events if e["type"] == "client.committed" and e["error"] and e["time_ms"] > killed_wall_ms)
    print(
        f"killed node {victim} (offsets partition {offsets_partition}); coordinator now node {new_node}; every member "
        f"committed again {resumed:.1f}s after the kill ({failed} failed commits meanwhile); "
        f"rebalances {len(rebalances)}; generation {before.generation} -> {after.generation}; "
        f"test {time.monotonic() - started:.1f}s"
    )
    assert new_node not in (None, victim)
    assert after == before  # same generation, same assignment: no member changed
    assert rebalances == [], rebalances


@pytest.mark.soak  # make test: a paused coordinator in test_coordinator_pause.py and test_client_pause.py
@pytest.mark.timeout(150)
def test_coordinator_hang_longer_than_the_session_is_no_rebalance(zk, zk_connect, tmp_path):
    """SIGSTOP of the group's coordinator for longer than its ZooKeeper session: another node takes the group
    over, and the members must find it (a whole session without a heartbeat answer marks the coordinator
    unknown, as Kafka's heartbeat thread does) before the new coordinator's restarted sessions expire."""
    started = time.monotonic()
    with running_cluster(zk, zk_connect, tmp_path) as cluster:
        group = Group(cluster, zk_connect, tmp_path, duration_s=16)
        before = group.start_all()
        time.sleep(1.0)
        offsets_partition = group_partition(GROUP, NUM_OFFSETS_PARTITIONS)
        victim = read_leaders(zk, NUM_OFFSETS_PARTITIONS)[offsets_partition][0]
        paused_wall_ms = int(time.time() * 1000)
        cluster.nodes[victim].signal(signal.SIGSTOP)
        try:
            time.sleep(HANG_SECONDS)
        finally:
            cluster.nodes[victim].signal(signal.SIGCONT)
        after = group.wait_stable()
        ends = group.wait_drained()
        stopping_ms = int(time.time() * 1000)
        group.stop_all()
        rebalances = rebalances_between(group, paused_wall_ms, stopping_ms)
        report, events = group.check(ends, f"coordinator hung for {HANG_SECONDS:.0f}s")
    failed = sum(1 for e in events if e["type"] == "client.committed" and e["error"] and e["time_ms"] > paused_wall_ms)
    print(
        f"node {victim} (offsets partition {offsets_partition}) stopped {HANG_SECONDS:.0f}s; rebalances "
        f"{len(rebalances)}, failed commits {failed}; generation {before.generation} -> {after.generation}; "
        f"test {time.monotonic() - started:.1f}s"
    )
    assert rebalances == [], [(e["member"], e["state"], e["time_ms"] - paused_wall_ms) for e in rebalances]
    assert after == before
