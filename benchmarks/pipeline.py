"""The rebalance report over 10M trace events: ``zkcoord pipeline rebalance-report`` (PySpark) against pandas.

In one run:

1. generates a comparison run's trace directory as ``zkcoord compare run`` writes it (docs/traces.md, "Comparison
   runs"): the 8 scenarios x the 4 variants (legacy, eager, static, cooperative), each with its runner file and one
   JSON-lines file per member instance, ``DIR/traces/<scenario>/<variant>/<instance>.jsonl``. The runs are simulated
   (fixed seed): a warm-up in two waves of 3 members, then the scenario's steps, each rebalance as the variant does
   it (legacy: every member releases everything and claims its 0.8.2 range; eager and static: every member revokes
   everything, then SyncGroup hands out the range assignment; static: no rebalance for a restart within the session
   timeout, none on close until the session times out; cooperative: sticky, only what moves is revoked, in a second
   generation), 2 topics (16 + 8 partitions). Members process their partitions in batches (``compare.processed``,
   most of the volume: the batch interval is chosen so that the directory holds ``--events`` lines), commit every
   second and on revocation, and a new owner resumes from the last successful commit: a kill, a member paused past
   its session timeout (it processes a little more when resumed, before it learns that it lost everything), a
   revocation whose commit fails in the warm-up, and commits refused during a coordinator failover all make
   duplicates; nothing is missed. Member processes also write ``legacy.*``/``client.*`` events the analysis must
   skip. The generator keeps the book of what it planted (duplicated records within the window and those before
   it, records missed, rebalances, moves, each step's settling, unowned time, pauses, counters: every summary
   column of docs/compare.md, from its own model, not from the files) and both contenders are checked against it;
2. times ``python -m zkcoord.pipeline rebalance-report --in DIR --out REPORT --master local[2]`` as users run it
   (a subprocess: the JVM's start, reading, the metrics, the parquet files and the HTML report with its plots);
3. times benchmarks/pipeline_pandas.py on the same files, a second implementation of the same metrics in one
   process: pyarrow's JSON reader (C++, its own thread pool) for the scalar fields of every line, ``json.loads``
   for the few lines with nested fields, then vectorized pandas/numpy (sweeps over range starts and ends for the
   coverage, sorts and shifts for pauses and moves); reading is part of the timed work for both;
4. peak memory of each contender: the RSS of its whole process tree (the driver, the JVM and the Python workers
   for Spark), /proc/<pid>/status VmRSS of every descendant summed every 100 ms from a thread, the largest sum kept.
   Each contender runs in its own process tree, one after the other;
5. a table (wall time, peak RSS, events/s), the ratios Spark / pandas, and the check: both summaries must equal
   each other and the generator's book cell by cell (counts exactly, seconds to 1e-6). Any difference prints
   MISMATCH with the differing cells and makes the exit status 1, as does a contender that fails.

Other sessions' processes skew the figures: the machine line shows the load average. The directory lives under
the repository's var/ (not tmpfs) and is removed at the end unless ``--keep DIR`` is given (then it is written
there, or reused if it holds a directory generated with the same parameters).

    python benchmarks/pipeline.py [--events 10000000] [--quick] [--keep DIR]
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import json
import math
import multiprocessing
import os
import random
import re
import shutil
import signal
import statistics
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from contenders import Outcome, machine, mib, run_contender
from coordinator import bench_directory
from tqdm import tqdm

from zkcoord.compare import scenarios
from zkcoord.pipeline.rebalance_report import TRACE_SCHEMA
from zkcoord.pipeline.report_summary import METRICS

SCENARIOS = scenarios.SCENARIOS
VARIANTS = tuple(scenarios.VARIANTS)

HERE = Path(__file__).resolve().parent
PANDAS_SCRIPT = HERE / "pipeline_pandas.py"
SPARK_MASTER = "local[2]"
FULL_EVENTS = 10_000_000
QUICK_EVENTS = 200_000
SEED = 20250601
TOPICS = {"orders": 16, "clicks": 8}
GROWN_TOPIC, GROWN_PARTITIONS = "clicks", 12  # partition-change
MEMBERS = 6
RATE = 2_000  # records/s per partition
COST_MS = 0.4
SESSION_TIMEOUT_MS = 6_000
HEARTBEAT_MS = 1_000
AUTO_COMMIT_MS = 1_000
INITIAL_DELAY_MS = 3_000  # group.initial.rebalance.delay.ms
JOIN_MS = 400  # from a process's start to its JoinGroup (or its legacy registration)
START_SPACING_MS = 2_000
STEADY_MS = 20_000  # from a step's settling to the next step (or drain)
DRAIN_MS = 8_000  # from drain to end; members have processed everything DRAIN_LEFT_MS before end
DRAIN_LEFT_MS = 1_000
T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
RUN_SPACING_MS = 3_600_000
SUMMARY_COLUMNS = (*METRICS, "window_ms")
FLOAT_COLUMNS = ("unowned_partition_s", "pause_p50_ms")
NEVER = 1 << 62


# ---- the simulated run --------------------------------------------------------------------------------------


def dumps(event: dict) -> str:
    """One line as ``JsonLinesTraceWriter`` writes it: compact, keys sorted."""
    return json.dumps(event, separators=(",", ":"), sort_keys=True)


@dataclass
class Instance:
    name: str
    member: str
    started_ms: int
    commit_phase_ms: int
    owned: frozenset = frozenset()
    killed_ms: int | None = None
    exited_ms: int | None = None
    pauses: list[tuple[int, int]] = field(default_factory=list)  # [paused, resumed)
    events: list[tuple[int, int, dict]] = field(default_factory=list)  # (time, seq, fields) of its own file


@dataclass
class Segment:
    """An instance processing one partition without interruption; ``own`` resumes from its own position."""

    instance: str
    start_ms: int
    end_ms: int
    own: bool
    interval: int  # index of the ownership interval it belongs to
    times: np.ndarray | None = None
    firsts: np.ndarray | None = None
    lasts: np.ndarray | None = None
    start_offset: int = 0


class RunSim:
    """One scenario run of one variant: the runner's and every instance's events, and the book of what they mean."""

    def __init__(self, scenario: str, variant: str, seed: int):
        self.scenario, self.variant = scenario, variant
        self.rng = random.Random(f"{seed}/{scenario}/{variant}")
        self.seed = seed
        self.run_id = f"bench-{seed}"
        self.group = f"bench-{scenario}-{variant}"
        self.legacy = variant == "legacy"
        self.base_ms = T0 + (SCENARIOS.index(scenario) * len(VARIANTS) + VARIANTS.index(variant)) * RUN_SPACING_MS
        self.seq = 0
        self.runner_events: list[tuple[int, int, dict]] = []
        self.instances: dict[str, Instance] = {}
        self.current: dict[str, Instance] = {}  # member -> its latest instance
        self.group_members: set[str] = set()  # members the coordinator (or ZooKeeper) sees
        self.topic_counts = dict(TOPICS)
        self.topic_first_seen: dict[tuple[str, int], int] = {}
        self.generation = 0
        self.ownership: list[tuple[int, int, str, frozenset, bool]] = []  # (time, seq, instance, owned, emitted)
        self.rebalances: list[tuple[int, str, int | None]] = []  # (time, member, generation)
        self.drop_commits: list[tuple[int, str, frozenset, str | None]] = []  # (time, instance, parts, error)
        self.failures: list[tuple[int, int, str | None, str]] = []  # [start, end] commits fail (instance or all)
        self.steps: list[int] = []
        self.measure_ms = self.drain_ms = self.end_ms = self.stop_ms = 0
        self.produced: list[dict] = []
        self.counters: dict = {}
        self.rebalance_calls = 0
        self.legacy_twice_done = False
        self.produced_ends: dict[tuple[str, int], int] = {}

    # -- emitting

    def _next_seq(self) -> int:
        self.seq += 1
        return self.seq

    def _common(self, event_type: str, time_ms: int, member: str, instance: str | None) -> dict:
        return {
            "schema": TRACE_SCHEMA,
            "type": event_type,
            "time_ms": time_ms,
            "group": self.group,
            "member": member,
            "run": self.run_id,
            "scenario": self.scenario,
            "variant": self.variant,
            "instance": instance,
        }

    def runner(self, time_ms: int, event_type: str, instance: str | None = None, **fields) -> dict:
        event = {**self._common(event_type, time_ms, "runner", instance), **fields}
        self.runner_events.append((time_ms, self._next_seq(), event))
        return event

    def emit(self, inst: Instance, time_ms: int, event_type: str, **fields) -> None:
        event = {**self._common(event_type, time_ms, inst.member, inst.name), **fields}
        inst.events.append((time_ms, self._next_seq(), event))

    def partitions(self) -> list[tuple[str, int]]:
        return [(topic, p) for topic in sorted(self.topic_counts) for p in range(self.topic_counts[topic])]

    def set_topic(self, time_ms: int, topic: str, count: int) -> None:
        self.runner(time_ms, "compare.topic", topic=topic, partitions=count)
        self.topic_counts[topic] = count
        for p in range(count):
            self.topic_first_seen.setdefault((topic, p), time_ms)

    # -- members

    def start_member(self, time_ms: int, member: str) -> Instance:
        number = sum(1 for inst in self.instances.values() if inst.member == member) + 1
        inst = Instance(f"{member}#{number}", member, time_ms, self.rng.randint(0, AUTO_COMMIT_MS - 1))
        self.instances[inst.name] = inst
        self.current[member] = inst
        self.runner(time_ms, "compare.member", inst.name, event="started")
        if self.legacy:
            self.emit(inst, time_ms + JOIN_MS - 50, "legacy.registered", registration="{}", session_id=time_ms)
            mode = {"phase": None, "epoch": -1, "writes": ["zookeeper"], "reads": "zookeeper"}
            self.emit(inst, time_ms + JOIN_MS - 49, "legacy.offsets_mode", **mode, storage="zookeeper")
        else:
            self.client_state(inst, time_ms + JOIN_MS - 50, "JOINING", "UNJOINED")
        return inst

    def client_state(self, inst: Instance, time_ms: int, state: str, previous: str) -> None:
        if not self.legacy:
            member_id = f"{inst.member}-{inst.name[-1]}"
            self.emit(
                inst,
                time_ms,
                "client.state",
                state=state,
                previous=previous,
                generation=self.generation,
                member_id=member_id,
            )

    def assign(self, time_ms: int, inst: Instance, parts: frozenset, commit_error: str | None = None, lost=False):
        """``inst`` owns ``parts`` from ``time_ms`` on; dropping partitions commits first, unless they were lost."""
        if parts == inst.owned:
            return
        dropped = inst.owned - parts
        if dropped and not lost:
            self.drop_commits.append((time_ms, inst.name, inst.owned, commit_error))
        listed = [[topic, p] for topic, p in sorted(parts)]
        if self.legacy:
            self.emit(
                inst,
                time_ms,
                "legacy.assignment",
                assignment={f"{inst.member}-0": listed},
                connected=True,
                monotonic_before=time_ms / 1000,
                monotonic_after=time_ms / 1000 + 0.002,
            )
        else:
            if dropped:
                kind = "client.partitions_lost" if lost else "client.partitions_revoked"
                self.emit(inst, time_ms, kind, partitions=[[t, p] for t, p in sorted(dropped)])
            if parts - inst.owned:
                self.emit(inst, time_ms, "client.partitions_assigned", partitions=[list(x) for x in sorted(parts)])
        self.emit(inst, time_ms, "compare.assignment", partitions=listed)
        self.ownership.append((time_ms, self._next_seq(), inst.name, parts, True))
        inst.owned = parts

    def stable(self, time_ms: int, inst: Instance) -> None:
        generation = None if self.legacy else self.generation
        self.emit(inst, time_ms, "compare.rebalance", generation=generation)
        self.rebalances.append((time_ms, inst.member, generation))
        self.client_state(inst, time_ms, "STABLE", "SYNCING")

    # -- assignments

    def range_assignment(self, members: list[str]) -> dict[str, frozenset]:
        owned: dict[str, set] = {m: set() for m in members}
        for topic in sorted(self.topic_counts):
            count, start = self.topic_counts[topic], 0
            for index, member in enumerate(members):
                share = count // len(members) + (1 if index < count % len(members) else 0)
                owned[member].update((topic, p) for p in range(start, start + share))
                start += share
        return {m: frozenset(s) for m, s in owned.items()}

    def sticky_assignment(self, members: list[str]) -> dict[str, frozenset]:
        existing = set(self.partitions())
        owned = {m: sorted(self.current[m].owned & existing) for m in members}
        base, extra = divmod(len(existing), len(members))
        order = sorted(members, key=lambda m: (-len(owned[m]), m))
        quota = {m: base + (1 if index < extra else 0) for index, m in enumerate(order)}
        free = existing - {p for parts in owned.values() for p in parts}
        for m in members:
            while len(owned[m]) > quota[m]:
                free.add(owned[m].pop())
        for p in sorted(free):
            taker = min((m for m in members if len(owned[m]) < quota[m]), key=lambda m: (len(owned[m]), m))
            owned[taker].append(p)
        return {m: frozenset(v) for m, v in owned.items()}

    # -- rebalances (each returns when the group settled)

    def rebalance(self, time_ms: int, failing: str | None = None, late: str | None = None) -> int:
        self.rebalance_calls += 1
        if self.legacy:
            return self.legacy_rebalance(time_ms, failing)
        return self.coordinator_rebalance(time_ms, failing, late)

    def legacy_rebalance(self, time_ms: int, failing: str | None) -> int:
        """0.8.2: every member commits and releases everything, then claims its range; one member may need a
        second attempt (an owner znode still held), and the first step's rebalance runs twice in one member."""
        members = sorted(self.group_members)
        target = self.range_assignment(members)
        conflicted = self.rng.choice(members) if self.rebalance_calls % 3 == 0 else None
        twice = members[1] if len(members) > 1 and len(self.steps) == 1 and not self.legacy_twice_done else None
        if twice:
            self.legacy_twice_done = True
        settled = time_ms
        for member in members:
            inst = self.current[member]
            release = time_ms + self.rng.randint(20, 150)
            claim = time_ms + 300 + self.rng.randint(0, 400)
            released = [[t, p] for t, p in sorted(inst.owned)]
            error = "ZooKeeperError: ConnectionLoss" if member == failing else None
            self.assign(release, inst, frozenset(), commit_error=error)
            attempt = 1
            if member == conflicted and target[member]:
                held = [[*min(target[member]), self.rng.choice(members)]]
                self.legacy_attempt(inst, claim, attempt, "conflict", released, frozenset(), held)
                claim += 250 + self.rng.randint(0, 100)
                attempt += 1
            self.assign(claim, inst, target[member])
            self.stable(claim + 1, inst)
            self.legacy_attempt(inst, claim + 1, attempt, "success", released, target[member], [])
            settled = max(settled, claim + 1)
            if member == twice:
                again = claim + 200 + self.rng.randint(0, 100)
                self.assign(again, inst, frozenset())
                self.assign(again + 300, inst, target[member])
                self.stable(again + 301, inst)
                self.legacy_attempt(
                    inst, again + 301, 1, "success", [[t, p] for t, p in sorted(target[member])], target[member], []
                )
                settled = max(settled, again + 301)
        return settled

    def legacy_attempt(self, inst, time_ms, attempt, outcome, released, claimed, conflicts) -> None:
        self.emit(
            inst,
            time_ms,
            "legacy.rebalance_attempt",
            attempt=attempt,
            reason="ids-changed",
            outcome=outcome,
            released=released,
            claimed=[[t, p] for t, p in sorted(claimed)],
            conflicts=conflicts,
            error=None,
            duration_ms=float(self.rng.randint(200, 700)),
            zk_ops=self.rng.randint(20, 80),
            zk_round_trips=self.rng.randint(4, 12),
        )

    def coordinator_rebalance(self, time_ms: int, failing: str | None, late: str | None) -> int:
        members = sorted(self.group_members)
        learns = {m: time_ms + self.rng.randint(30, HEARTBEAT_MS) for m in members}  # from their next heartbeat
        error = "RebalanceInProgressError: the group is rebalancing"
        self.generation += 1
        for member in members:
            self.client_state(self.current[member], learns[member], "JOINING", "STABLE")
        if self.variant == "cooperative":
            target = self.sticky_assignment(members)
            joined = max(learns.values()) + self.rng.randint(20, 80)
            syncs = {m: joined + self.rng.randint(5, 150) for m in members}
            revoking = {m: self.current[m].owned - target[m] for m in members}
            if any(revoking.values()):
                for member in members:
                    inst = self.current[member]
                    fails = error if member == failing else None
                    self.assign(syncs[member], inst, inst.owned - revoking[member], commit_error=fails)
                    self.stable(syncs[member] + 1, inst)
                self.generation += 1
                joined = max(syncs.values()) + 2 + self.rng.randint(20, 80)
                syncs = {m: joined + self.rng.randint(5, 150) for m in members}
            for member in members:
                self.assign(syncs[member], self.current[member], target[member])
                self.stable(syncs[member] + 1, self.current[member])
            return max(syncs.values()) + 1
        target = self.range_assignment(members)
        for member in members:
            self.assign(learns[member], self.current[member], frozenset(), error if member == failing else None)
        joined = max(learns.values()) + self.rng.randint(20, 80)
        syncs = {m: joined + self.rng.randint(5, 150) for m in members}
        if late is not None:  # its SyncGroup answer comes after the window opened (measure = settled + 300)
            syncs[late] = max(s for m, s in syncs.items() if m != late) + 361
        for member in members:
            self.assign(syncs[member], self.current[member], target[member])
            self.stable(syncs[member] + 1, self.current[member])
        return max(s for m, s in syncs.items() if m != late) + 1

    # -- steps

    def join(self, time_ms: int, member: str, **plant) -> int:
        self.start_member(time_ms, member)
        self.group_members.add(member)
        return self.rebalance(time_ms + JOIN_MS + (50 if self.legacy else 0), **plant)

    def close(self, time_ms: int, member: str, leave_group: bool = True) -> int:
        """Close gracefully: revoke (committing) and exit; the group rebalances unless a static member left."""
        inst = self.current[member]
        self.assign(time_ms + 20, inst, frozenset())
        self.emit(inst, time_ms + 60, "legacy.closed" if self.legacy else "client.closed")
        inst.exited_ms = time_ms + 60
        self.runner(time_ms + 100, "compare.member", inst.name, event="closed")
        if not leave_group:
            return time_ms + 100
        self.group_members.discard(member)
        if self.variant == "static":  # no LeaveGroup: the coordinator evicts it after the session timeout
            return self.rebalance(time_ms + 60 + SESSION_TIMEOUT_MS + self.rng.randint(0, 500))
        return self.rebalance(time_ms + (80 if self.legacy else 70))

    def bounce(self, time_ms: int, member: str) -> int:
        if self.variant != "static":
            settled = self.close(time_ms, member)
            return self.join(settled + 300, member)
        owned = self.current[member].owned
        self.close(time_ms, member, leave_group=False)
        restarted = time_ms + 1_500  # within the session timeout: the same member, no rebalance
        inst = self.start_member(restarted, member)
        synced = restarted + JOIN_MS + self.rng.randint(50, 150)
        self.assign(synced, inst, owned)
        self.stable(synced + 1, inst)
        return synced + 1

    def kill(self, time_ms: int, member: str) -> int:
        inst = self.current[member]
        self.runner(time_ms, "compare.member", inst.name, event="killed")
        inst.killed_ms = time_ms
        self.ownership.append((time_ms, self._next_seq(), inst.name, frozenset(), False))
        inst.owned = frozenset()
        self.group_members.discard(member)
        return self.rebalance(time_ms + SESSION_TIMEOUT_MS + self.rng.randint(0, 500))

    def pause(self, time_ms: int, member: str, duration_ms: int) -> int:
        """SIGSTOP for ``duration_ms``; past the session timeout the group moves on without it, and when resumed
        it processes what it had fetched until it learns it lost everything (its commits fail meanwhile)."""
        inst = self.current[member]
        self.runner(time_ms, "compare.member", inst.name, event="paused")
        resumed = time_ms + duration_ms
        inst.pauses.append((time_ms, resumed))
        if duration_ms < SESSION_TIMEOUT_MS:
            self.runner(resumed, "compare.member", inst.name, event="resumed")
            return resumed
        self.group_members.discard(member)
        settled = self.rebalance(time_ms + SESSION_TIMEOUT_MS + self.rng.randint(0, 500))
        resumed = max(resumed, settled + 500)
        inst.pauses[-1] = (time_ms, resumed)
        self.runner(resumed, "compare.member", inst.name, event="resumed")
        learns = resumed + self.rng.randint(40, 80)
        error = "SessionExpiredError" if self.legacy else "CommitFailedError: the group has already rebalanced"
        self.failures.append((resumed, learns, inst.name, error))
        self.drop_commits.append((learns - 5, inst.name, inst.owned, error))  # its last try
        if self.legacy:
            self.emit(inst, learns, "legacy.session_expired")
        self.assign(learns, inst, frozenset(), lost=True)
        self.group_members.add(member)
        return self.rebalance(learns + 20)

    def fail_over(self, time_ms: int) -> int:
        if self.legacy:
            return time_ms
        self.runner(time_ms, "compare.node", node_id=1, event="killed")
        self.failures.append((time_ms, time_ms + 2_500, None, "NotCoordinatorError: coordinator node 1 is gone"))
        return time_ms + 2_500

    def restart_node(self, time_ms: int) -> int:
        if not self.legacy:
            self.runner(time_ms + 100, "compare.node", node_id=1, event="started")
        return time_ms + 100

    def grow(self, time_ms: int) -> int:
        self.set_topic(time_ms, GROWN_TOPIC, GROWN_PARTITIONS)
        # legacy: the topic watch fires; coordinator: the leader sees it on its next metadata refresh
        delay = self.rng.randint(50, 150) if self.legacy else 2_000 + self.rng.randint(0, 1_000)
        return self.rebalance(time_ms + delay)

    def start_group(self, time_ms: int, members: list[str], **plant) -> int:
        """Start ``members`` START_SPACING_MS apart into an empty group."""
        if self.legacy:
            settled = time_ms
            for index, member in enumerate(members):
                last = index == len(members) - 1
                settled = self.join(
                    max(settled + 100, time_ms + index * START_SPACING_MS), member, **(plant if last else {})
                )
            return settled
        for index, member in enumerate(members):
            self.start_member(time_ms + index * START_SPACING_MS, member)
            self.group_members.add(member)
        last_join = time_ms + (len(members) - 1) * START_SPACING_MS + JOIN_MS
        return self.rebalance(last_join + INITIAL_DELAY_MS, **plant)

    def plan_steps(self) -> list:
        s = self.scenario
        if s == "cold-start":
            names = [f"m{k:02d}" for k in range(MEMBERS)]
            return [(f"start {names[0]}..{names[-1]}", lambda t: self.start_group(t, names))]
        if s == "scale-up":
            return [("start m06", lambda t: self.join(t, "m06")), ("start m07", lambda t: self.join(t, "m07"))]
        if s == "scale-down":
            return [("close m05", lambda t: self.close(t, "m05")), ("close m04", lambda t: self.close(t, "m04"))]
        if s == "rolling-bounce":
            return [(f"bounce {m}", lambda t, m=m: self.bounce(t, m)) for m in ("m00", "m01", "m02")]
        if s == "kill":
            return [("kill m02", lambda t: self.kill(t, "m02")), ("start m02", lambda t: self.join(t, "m02"))]
        if s == "session-expiry":
            return [
                ("pause m03 9 s", lambda t: self.pause(t, "m03", 9_000)),
                ("pause m01 2 s", lambda t: self.pause(t, "m01", 2_000)),
            ]
        if s == "coordinator-failover":
            return [("kill node 1", self.fail_over), ("start node 1", self.restart_node)]
        return [(f"{GROWN_TOPIC} to {GROWN_PARTITIONS} partitions", self.grow)]

    def simulate(self) -> None:
        t = self.base_ms
        self.runner(
            t,
            "compare.run",
            members=MEMBERS,
            partitions=dict(TOPICS),
            rate=RATE,
            cost_ms=COST_MS,
            auto_commit_interval_ms=AUTO_COMMIT_MS,
            session_timeout_ms=SESSION_TIMEOUT_MS,
            label=f"{self.scenario} {self.variant}",
        )
        self.runner(t + 1, "compare.phase", phase="warmup")
        for topic, count in TOPICS.items():
            self.set_topic(t + 2, topic, count)
        if not self.legacy:
            for node in (1, 2):
                self.runner(t + 3, "compare.node", node_id=node, event="started")
        members = [f"m{k:02d}" for k in range(MEMBERS)]
        if self.scenario == "cold-start":
            self.measure_ms = t + 1_000
        else:
            settled = self.start_group(t + 100, members[:3])
            t = settled + START_SPACING_MS
            for member in members[3:-1]:
                t = self.join(t, member) + START_SPACING_MS
            # planted: m00's commit on revocation fails just before the window opens (its partitions are
            # processed again, partly before W); in scale-up one eager/static member syncs only after it opened
            late = members[4] if self.scenario == "scale-up" and self.variant in ("eager", "static") else None
            settled = self.join(t, members[-1], failing="m00", late=late)
            self.measure_ms = settled + 300
        self.runner(self.measure_ms, "compare.phase", phase="measure")
        t = self.measure_ms + 2_000
        for number, (name, action) in enumerate(self.plan_steps(), 1):
            self.runner(t, "compare.step", step=number, name=name)
            self.steps.append(t)
            settled = action(t + self.rng.randint(5, 20))
            t = max(settled, t) + STEADY_MS
        self.drain_ms = t
        self.runner(t, "compare.phase", phase="drain")
        for index, (topic, p) in enumerate(self.partitions()):
            self.produced.append(self.runner(t + 1 + index, "compare.produced", topic=topic, partition=p))
        self.stop_ms = t + DRAIN_MS - DRAIN_LEFT_MS
        self.end_ms = t + DRAIN_MS
        self.runner(self.end_ms, "compare.phase", phase="end")
        self.counters = self.runner(self.end_ms + 1, "compare.counters")
        for index, inst in enumerate(i for i in self.current.values() if i.killed_ms is None and i.exited_ms is None):
            self.close(self.end_ms + 200 + 50 * index, inst.member, leave_group=False)

    # -- processing

    def commit_times(self, inst: Instance) -> np.ndarray:
        last = inst.killed_ms or inst.exited_ms or self.end_ms + 400
        times = np.arange(inst.started_ms + JOIN_MS + inst.commit_phase_ms, last, AUTO_COMMIT_MS, dtype=np.int64)
        for paused, resumed in inst.pauses:
            times = times[(times < paused) | (times >= resumed)]
        return times

    def commit_error(self, instance: str, time_ms: int) -> str | None:
        for start, end, who, error in self.failures:
            if start <= time_ms <= end and who in (None, instance):
                return error
        return None

    def process(self, tick_ms: float) -> dict:
        """Batches of every partition: returns {(topic, p): [Segment, ...]} in start order."""
        intervals: dict[tuple[str, int], list[tuple[str, int, int]]] = defaultdict(list)  # (instance, start, end)
        opened: dict[tuple[str, tuple], int] = {}
        previous: dict[str, frozenset] = defaultdict(frozenset)
        for time_ms, _, name, parts, _ in sorted(self.ownership):
            for tp in previous[name] - parts:
                intervals[tp].append((name, opened.pop((name, tp)), time_ms))
            for tp in parts - previous[name]:
                opened[(name, tp)] = time_ms
            previous[name] = parts
        for (name, tp), start in opened.items():
            intervals[tp].append((name, start, NEVER))
        self.intervals = intervals
        commits = {name: self.commit_times(inst) for name, inst in self.instances.items()}
        good_commits = {
            name: np.array([t for t in times.tolist() if self.commit_error(name, t) is None], dtype=np.int64)
            for name, times in commits.items()
        }
        self.auto_commits = commits
        drops_ok = {(name, t) for t, name, _, error in self.drop_commits if error is None}
        segments: dict[tuple[str, int], list[Segment]] = {}
        for index_tp, tp in enumerate(self.partitions()):
            pieces: list[Segment] = []
            for number, (name, start, end) in enumerate(intervals.get(tp, [])):
                inst = self.instances[name]
                cuts = [(start, min(end, self.stop_ms))] if start < min(end, self.stop_ms) else []
                for paused, resumed in inst.pauses:
                    cuts = [c for a, b in cuts for c in ((a, min(b, paused)), (max(a, resumed), b)) if c[0] < c[1]]
                for k, (a, b) in enumerate(cuts):
                    pieces.append(Segment(name, a, b, own=k > 0 or a != start, interval=number))
            pieces.sort(key=lambda s: s.start_ms)
            committed: list[tuple[int, int]] = []  # (time, offset), successful commits, sorted
            position: dict[str, int] = {}
            rng = np.random.default_rng(
                [self.seed, SCENARIOS.index(self.scenario), VARIANTS.index(self.variant), index_tp]
            )
            for segment in pieces:
                if segment.own:
                    start_offset = position[segment.instance]
                else:
                    at = bisect.bisect_right(committed, (segment.start_ms, NEVER)) - 1
                    start_offset = committed[at][1] if at >= 0 else 0
                segment.start_offset = start_offset
                span = segment.end_ms - segment.start_ms
                count = int(span / tick_ms * 1.3) + 8
                steps = np.maximum(1, np.rint(tick_ms * rng.uniform(0.5, 1.5, count))).astype(np.int64)
                times = segment.start_ms + rng.integers(1, max(2, int(tick_ms)), endpoint=True) + np.cumsum(steps)
                if times[-1] < segment.end_ms:
                    raise AssertionError(f"{count} batches do not fill {span} ms")  # 1.3x the mean: never
                times = times[times < segment.end_ms]
                sizes = np.maximum(1, np.rint(RATE * steps[: len(times)] / 1000 * rng.uniform(0.7, 1.3, len(times))))
                sizes = sizes.astype(np.int64)
                ends = start_offset + np.cumsum(sizes)
                segment.times, segment.firsts, segment.lasts = times, ends - sizes, ends - 1
                position[segment.instance] = int(ends[-1]) if len(ends) else start_offset
                # this segment's successful commits move the group's committed offset
                good = good_commits[segment.instance]
                good = good[(good >= segment.start_ms) & (good < segment.end_ms)].tolist()
                end_ms = intervals[tp][segment.interval][2]  # its last piece commits on revocation
                if segment.end_ms == min(end_ms, self.stop_ms) and (segment.instance, end_ms) in drops_ok:
                    good.append(end_ms)
                for t in good:
                    done = int(np.searchsorted(times, t, side="right"))
                    bisect.insort(committed, (t, int(ends[done - 1]) if done else start_offset))
            segments[tp] = pieces
        self.segments = segments
        return segments

    def offsets_at(self, name: str, tp: tuple, number: int, times: np.ndarray) -> np.ndarray:
        """The position of ``name`` in ``tp`` (next offset to process) at ``times``, within ownership ``number``."""
        pieces = [s for s in self.segments[tp] if s.instance == name and s.interval == number]
        if not pieces:
            return np.full(len(times), -1, dtype=np.int64)
        batch_times = np.concatenate([s.times for s in pieces])
        nexts = np.concatenate([s.lasts + 1 for s in pieces])
        if not len(batch_times):
            return np.full(len(times), pieces[0].start_offset, dtype=np.int64)
        done = np.searchsorted(batch_times, times, side="right")
        return np.where(done > 0, nexts[np.maximum(done - 1, 0)], pieces[0].start_offset)

    def commit_events(self) -> None:
        """compare.committed of every instance: auto commits (every second) and commits on revocation."""
        per_instance: dict[str, dict[int, dict]] = defaultdict(lambda: defaultdict(dict))
        for tp, intervals in self.intervals.items():
            for number, (name, start, end) in enumerate(intervals):
                auto = self.auto_commits[name]
                auto = auto[(auto >= start) & (auto < end)]
                if len(auto):
                    for t, offset in zip(auto.tolist(), self.offsets_at(name, tp, number, auto).tolist(), strict=True):
                        if offset >= 0:
                            per_instance[name][t][tp] = offset
        for time_ms, name, parts, _ in self.drop_commits:
            for tp in sorted(parts):
                for number, (who, start, end) in enumerate(self.intervals[tp]):
                    if who == name and start < time_ms <= end:
                        offset = int(self.offsets_at(name, tp, number, np.array([time_ms]))[0])
                        if offset >= 0:
                            per_instance[name][time_ms][tp] = offset
        for name, by_time in per_instance.items():
            inst = self.instances[name]
            for time_ms, positions in sorted(by_time.items()):
                offsets = [[topic, p, offset] for (topic, p), offset in sorted(positions.items())]
                error = self.commit_error(name, time_ms)
                if error is None:
                    error = next((e for t, n, _, e in self.drop_commits if t == time_ms and n == name), None)
                self.emit(inst, time_ms, "compare.committed", offsets=offsets, error=error)
                if not self.legacy:
                    self.emit(
                        inst,
                        time_ms,
                        "client.committed",
                        offsets=offsets,
                        error=error,
                        latency_ms=round(self.rng.uniform(1, 9), 3),
                    )

    # -- the book

    def book(self) -> dict:
        """Every summary column from the model (not from the files), and what was planted."""
        w0, w1 = self.measure_ms, self.end_ms

        def in_w(t: int) -> bool:
            return w0 <= t <= w1

        # rebalances
        if self.legacy:
            per_member: dict[str, int] = defaultdict(int)
            for t, member, _ in self.rebalances:
                if in_w(t):
                    per_member[member] += 1
            rebalances = max(per_member.values(), default=0)
        else:
            before = max((g for t, _, g in self.rebalances if t < w0), default=0)
            rebalances = len({g for t, _, g in self.rebalances if in_w(t) and g > before})
        # steps
        emitted = sorted((t, s, name, parts) for t, s, name, parts, shown in self.ownership if shown)
        bounds = [*self.steps, self.drain_ms]
        settle = [
            max((t - start for t, _, _, _ in emitted if start <= t < bounds[k + 1]), default=0)
            for k, start in enumerate(self.steps)
        ]
        # moves
        owner: dict[tuple, str] = {}
        previous: dict[str, frozenset] = defaultdict(frozenset)
        moved = 0
        for t, _, name, parts in emitted:
            member = self.instances[name].member
            for tp in sorted(parts - previous[name]):
                if in_w(t) and tp in owner and owner[tp] != member:
                    moved += 1
                owner[tp] = member
            previous[name] = parts
        # unowned
        unowned_ms = 0
        for tp in self.partitions():
            lo = max(w0, self.topic_first_seen[tp])
            spans = sorted(
                (max(a, lo), min(b, w1)) for _, a, b in self.intervals.get(tp, []) if max(a, lo) < min(b, w1)
            )
            covered, reach = 0, lo
            for a, b in spans:
                if b > reach:
                    covered += b - max(a, reach)
                    reach = b
            unowned_ms += (w1 - lo) - covered
        # pauses, records
        times_by_instance: dict[str, list[np.ndarray]] = defaultdict(list)
        processed = 0
        duplicated = duplicated_before = missed = 0
        for tp, pieces in self.segments.items():
            for s in pieces:
                times_by_instance[s.instance].append(s.times)
                processed += int((s.lasts - s.firsts + 1).sum())
            all_first = np.concatenate([s.firsts for s in pieces] or [np.zeros(0, np.int64)])
            all_last = np.concatenate([s.lasts for s in pieces] or [np.zeros(0, np.int64)])
            all_time = np.concatenate([s.times for s in pieces] or [np.zeros(0, np.int64)])
            # offsets processed more than once can only be where a segment started below the highest offset
            # processed before it (a restart from an older commit) or in the batches of a resumed instance
            zones, high = [], 0
            for s in pieces:
                if len(s.lasts) == 0:
                    continue
                if s.own:
                    zones.append(np.arange(int(s.firsts[0]), int(s.lasts[-1]) + 1))
                elif s.start_offset < high:
                    zones.append(np.arange(s.start_offset, high))
                high = max(high, int(s.lasts.max()) + 1)
            if zones:
                offsets = np.unique(np.concatenate(zones))
                near = (all_first <= offsets[-1]) & (all_last >= offsets[0])
                inside = (offsets[:, None] >= all_first[near]) & (offsets[:, None] <= all_last[near])
                count_all = inside.sum(axis=1)
                count_before = (inside & (all_time[near] < w0)).sum(axis=1)
                duplicated += int((count_all >= 2).sum() - (count_before >= 2).sum())
                duplicated_before += int((count_before >= 2).sum())
            # missed: offsets below end_offset outside every range
            order = np.argsort(all_first, kind="stable")
            reach = np.maximum.accumulate(all_last[order] + 1)  # the highest offset processed so far, plus one
            missed += int(np.maximum(0, all_first[order] - np.concatenate([[0], reach[:-1]])).sum())
            self.produced_ends[tp] = int(reach[-1]) if len(reach) else 0  # what was produced: all processed
        longest: dict[str, int] = {}
        for name, arrays in times_by_instance.items():
            times = np.sort(np.concatenate(arrays))
            times = times[(times >= w0) & (times <= w1)]
            if len(times) >= 2:
                member = self.instances[name].member
                longest[member] = max(longest.get(member, 0), int(np.diff(times).max()))
        return {
            "rebalances": rebalances,
            "time_to_stable_ms": max(settle, default=0),
            "partitions_moved": moved,
            "unowned_partition_s": unowned_ms / 1000,
            "pause_max_ms": max(longest.values()) if longest else None,
            "pause_p50_ms": float(statistics.median(longest.values())) if longest else None,
            "records_processed": processed,
            "records_duplicated": duplicated,
            "records_missed": missed,
            "zk_reads": self.counters["zk_reads"],
            "zk_writes": self.counters["zk_writes"],
            "coordinator_requests": self.counters["coordinator_requests"],
            "window_ms": w1 - w0,
            "_duplicated_before_window": duplicated_before,
        }

    def fill_counters(self) -> None:
        w0, w1 = self.measure_ms, self.end_ms
        in_w = sum(1 for t, _, _ in self.rebalances if w0 <= t <= w1)
        alive = sum(
            max(0, min(i.killed_ms or i.exited_ms or w1, w1) - max(i.started_ms, w0)) for i in self.instances.values()
        )
        commits = sum(int(((c >= w0) & (c <= w1)).sum()) for c in self.auto_commits.values())
        if self.legacy:
            zk_reads, zk_writes, requests, by_api = 900 + 60 * in_w + commits // 50, 40 * in_w + commits, 0, {}
        else:
            by_api = {
                "Heartbeat": alive // HEARTBEAT_MS,
                "OffsetCommit": commits,
                "JoinGroup": in_w,
                "SyncGroup": in_w,
                "FindCoordinator": len(self.instances),
            }
            zk_reads, zk_writes, requests = 300 + 3 * in_w, 20 + in_w, sum(by_api.values())
        if (self.scenario, self.variant) == ("session-expiry", "static"):  # ZooKeeper's mntr did not answer
            zk_reads = zk_writes = None
        self.counters.update(
            zk_reads=zk_reads, zk_writes=zk_writes, coordinator_requests=requests, coordinator_requests_by_api=by_api
        )


# ---- writing a run's files ----------------------------------------------------------------------------------


def processed_template(sim: RunSim, inst: Instance, topic: str) -> str:
    """A ``%``-template of one compare.processed line (keys sorted, as dumps writes them): first, last, p, time."""
    marker = {
        "first_offset": -101,
        "last_offset": -102,
        "partition": -103,
        "time_ms": -104,
        "topic": topic,
        "type": "compare.processed",
    }
    line = dumps({**sim._common("compare.processed", 0, inst.member, inst.name), **marker})
    line = line.replace("%", "%%")
    for number in (101, 102, 103, 104):
        line = line.replace(f":-{number}", ":%d", 1)
    return line + "\n"


@dataclass
class RunResult:
    scenario: str
    variant: str
    lines: int
    processed_events: int
    files: int
    bytes: int
    book: dict


def schedule(scenario: str, variant: str, seed: int) -> tuple[int, int, int]:
    """(partition-milliseconds of processing, processing segments, lines other than compare.processed) of a run."""
    sim = RunSim(scenario, variant, seed)
    sim.simulate()
    sim.process(tick_ms=1e12)  # no batches: just the segments and the commits
    active = sum(s.end_ms - s.start_ms for pieces in sim.segments.values() for s in pieces)
    segments = sum(len(pieces) for pieces in sim.segments.values())
    sim.commit_events()
    return active, segments, len(sim.runner_events) + sum(len(i.events) for i in sim.instances.values())


def write_run(job: tuple[str, str, int, float, str]) -> RunResult:
    scenario, variant, seed, tick_ms, root = job
    sim = RunSim(scenario, variant, seed)
    sim.simulate()
    sim.process(tick_ms)
    sim.commit_events()
    sim.fill_counters()
    book = sim.book()
    for event in sim.produced:
        event["end_offset"] = sim.produced_ends[(event["topic"], event["partition"])]
    directory = Path(root) / "traces" / scenario / variant
    directory.mkdir(parents=True, exist_ok=True)
    total_lines = processed_events = size = 0
    by_instance: dict[str, list[tuple[tuple[str, int], Segment]]] = defaultdict(list)
    for tp, pieces in sim.segments.items():
        for s in pieces:
            by_instance[s.instance].append((tp, s))
    files = [("runner", sim.runner_events, [])]
    files += [(inst.name, inst.events, by_instance.get(inst.name, [])) for inst in sim.instances.values()]
    for name, events, pieces in files:
        events.sort(key=lambda e: (e[0], e[1]))
        times = [np.array([e[0] for e in events], dtype=np.int64)]
        lines = [dumps(e[2]) + "\n" for e in events]
        if pieces:
            inst = sim.instances[name]
            templates = {topic: processed_template(sim, inst, topic) for topic in sim.topic_counts}
            for (topic, p), s in pieces:
                template = templates[topic]
                lines.extend(
                    template % (f, last, p, t)
                    for f, last, t in zip(s.firsts.tolist(), s.lasts.tolist(), s.times.tolist(), strict=True)
                )
                times.append(s.times)
                processed_events += len(s.times)
        order = np.argsort(np.concatenate(times), kind="stable")
        text = "".join([lines[i] for i in order.tolist()])
        data = text.encode()
        (directory / f"{name}.jsonl").write_bytes(data)
        total_lines += len(lines)
        size += len(data)
    return RunResult(scenario, variant, total_lines, processed_events, len(files), size, book)


def generate(root: Path, events: int, seed: int) -> list[RunResult]:
    """The whole trace directory, runs spread over the cores; the batch interval is set for ``events`` lines."""
    runs = [(s, v) for s in SCENARIOS for v in VARIANTS]
    workers = min(len(os.sched_getaffinity(0)), 4)
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        schedules = pool.starmap(schedule, [(s, v, seed) for s, v in runs])
        active, segments, other = (sum(column) for column in zip(*schedules, strict=True))
        if events <= other * 1.2:
            raise SystemExit(f"--events {events:,} is too few: the runs' other events alone are {other:,} lines")
        tick_ms = active / (events - other + segments / 2)  # a segment's first batch comes after ~half a tick
        jobs = [(s, v, seed, tick_ms, str(root)) for s, v in runs]
        results = []
        with tqdm(total=events, unit="ev", unit_scale=True, desc="generating", leave=False, disable=None) as bar:
            for result in pool.imap_unordered(write_run, jobs):
                results.append(result)
                bar.update(result.lines)
    manifest = {
        "run": f"bench-{seed}",
        "generator": {"events": events, "seed": seed, "batch_interval_ms": tick_ms},
        "scenarios": {s: {v: {"status": "ok"} for v in VARIANTS} for s in SCENARIOS},
    }
    (root / "compare.json").write_text(json.dumps(manifest, indent=2) + "\n")
    results.sort(key=lambda r: (SCENARIOS.index(r.scenario), VARIANTS.index(r.variant)))
    return results


def load_or_generate(root: Path, events: int, seed: int) -> tuple[list[RunResult], float, bool]:
    """(the runs, generation seconds, reused): a kept directory generated with the same parameters is reused."""
    manifest = root / "bench-generator.json"
    if manifest.exists():
        kept = json.loads(manifest.read_text())
        if (kept["events"], kept["seed"]) == (events, seed):
            return [RunResult(**r) for r in kept["runs"]], kept["seconds"], True
        shutil.rmtree(root / "traces", ignore_errors=True)  # ours (the manifest says so): regenerate
    elif (root / "traces").exists():
        raise SystemExit(f"{root / 'traces'} exists and was not generated by this benchmark")
    started = time.monotonic()
    results = generate(root, events, seed)
    seconds = time.monotonic() - started
    runs = [r.__dict__ for r in results]
    manifest.write_text(json.dumps({"events": events, "seed": seed, "seconds": seconds, "runs": runs}) + "\n")
    return results, seconds, False


# ---- the contenders -----------------------------------------------------------------------------------------


SPARK_STAGES = (  # the CLI's progress lines (zkcoord.pipeline.rebalance_report.run), in order
    ("starting Spark", "JVM start, SparkSession"),
    ("reading compare.* events", "read + cache every event (_check_runs)"),
    ("computing the metrics", "compute(): building the plan, no action"),
    ("writing .*members.parquet", "members.parquet"),
    ("writing .*steps.parquet", "steps.parquet"),
    ("writing .*summary.parquet", "summary.parquet (every metric)"),
    ("collecting ownership intervals", "ownership intervals for the plots"),
    ("plotting", "plotting, report.html"),
    ("SCENARIO", "terminal table"),
    ("report: ", "after its last line: stop, exit"),
)


ERROR_LINE = re.compile(r"OutOfMemoryError|Exception:|Error:|ERROR ")


def stage_times(outcome: Outcome) -> list[tuple[str, float]]:
    """Seconds from each progress line of the CLI to the next one (to the exit for the last; marked when the CLI
    failed in it)."""
    marks = []
    for pattern, label in SPARK_STAGES:
        at = next((t for t, line in outcome.lines if re.match(pattern, line)), None)
        if at is not None:
            marks.append((label, at))
    marks.append(("", outcome.seconds))
    first = [("Python start, imports", marks[0][1])] if len(marks) > 1 else []
    stages = first + [(label, marks[k + 1][1] - at) for k, (label, at) in enumerate(marks[:-1])]
    if outcome.returncode and stages:
        stages[-1] = (f"{stages[-1][0]}: FAILED (exit status {outcome.returncode})", stages[-1][1])
    return stages


# ---- the check ----------------------------------------------------------------------------------------------


def same(a, b, column: str) -> bool:
    missing_a = a is None or (isinstance(a, float) and math.isnan(a))
    missing_b = b is None or (isinstance(b, float) and math.isnan(b))
    if missing_a or missing_b:
        return missing_a and missing_b
    if column in FLOAT_COLUMNS:
        return abs(float(a) - float(b)) <= 1e-6 + 1e-9 * abs(float(a))
    return float(a) == float(b) and float(a) == int(float(a))


def differences(left: str, left_rows: dict, right: str, right_rows: dict) -> list[str]:
    out = []
    for key in sorted(set(left_rows) | set(right_rows)):
        if key not in left_rows or key not in right_rows:
            out.append(f"{key[0]}/{key[1]}: only in {left if key in left_rows else right}")
            continue
        for column in SUMMARY_COLUMNS:
            a, b = left_rows[key].get(column), right_rows[key].get(column)
            if not same(a, b, column):
                out.append(f"{key[0]}/{key[1]} {column}: {left} {a!r} != {right} {b!r}")
    return out


def read_spark_summary(path: Path) -> dict:
    import pyarrow.parquet as pq  # only here: the parent stays light until the contenders are done

    return {(r["scenario"], r["variant"]): r for r in pq.read_table(path).to_pylist()}


# ---- printing -----------------------------------------------------------------------------------------------


def print_generation(results: list[RunResult], seconds: float, reused: bool, root: Path) -> int:
    lines = sum(r.lines for r in results)
    processed = sum(r.processed_events for r in results)
    size = sum(r.bytes for r in results)
    how = "reused (generated earlier in" if reused else "generated in"
    print(
        f"Traces: {lines:,} lines ({processed:,} compare.processed) in {sum(r.files for r in results)} files, "
        f"{size / 1e9:.2f} GB, {len(results)} runs ({len(SCENARIOS)} scenarios x {len(VARIANTS)} variants); "
        f"{how} {seconds:.1f} s{')' if reused else ''}, {lines / seconds:,.0f} lines/s"
    )
    books = [r.book for r in results]

    def total(column: str):
        return sum(b[column] or 0 for b in books)

    print(
        f"Planted (the generator's book): {total('records_processed'):,} records processed; "
        f"{total('records_duplicated'):,} duplicated within W (and {total('_duplicated_before_window'):,} "
        f"duplicated before W, not counted); {total('records_missed')} missed; {total('rebalances')} rebalances, "
        f"{total('partitions_moved'):,} partitions moved, {total('unowned_partition_s'):,.3f} unowned "
        f"partition-seconds, longest pause {max(b['pause_max_ms'] or 0 for b in books):,} ms over the "
        f"{len(books)} runs"
    )
    return lines


def print_summary_table(rows: dict) -> None:
    short = {
        "rebalances": "rebal",
        "time_to_stable_ms": "stable_ms",
        "partitions_moved": "moved",
        "unowned_partition_s": "unowned_s",
        "pause_max_ms": "pause_max",
        "pause_p50_ms": "pause_p50",
        "records_processed": "processed",
        "records_duplicated": "duplicated",
        "records_missed": "missed",
        "zk_reads": "zk_reads",
        "zk_writes": "zk_writes",
        "coordinator_requests": "coord_req",
        "window_ms": "window_ms",
    }
    widths = {column: max(len(label), 10) for column, label in short.items()}
    print(f"   {'scenario':<21}{'variant':<12}" + "".join(f"{short[c]:>{widths[c] + 1}}" for c in SUMMARY_COLUMNS))

    def cell(value, column: str) -> str:
        if value is None:
            return "-"
        return f"{value:,.3f}" if column in FLOAT_COLUMNS else f"{value:,}"

    for key in sorted(rows, key=lambda k: (SCENARIOS.index(k[0]), VARIANTS.index(k[1]))):
        row = rows[key]
        cells = "".join(f"{cell(row.get(c), c):>{widths[c] + 1}}" for c in SUMMARY_COLUMNS)
        print(f"   {key[0]:<21}{key[1]:<12}{cells}")


def report(lines: int, outcomes: dict[str, Outcome]) -> None:
    print("\nResults\n")
    print(f"   {'contender':<44} {'wall s':>9} {'peak RSS MiB':>13} {'events/s':>11}  exit  peak RSS by process")
    labels = {
        "spark": f"spark (zkcoord pipeline, {SPARK_MASTER}, CLI)",
        "pandas": "pandas (one process, pyarrow JSON reader)",
    }
    for name, outcome in outcomes.items():
        parts = ", ".join(f"{n} {mib(v)}" for n, v in sorted(outcome.peak_by_name.items(), key=lambda item: -item[1]))
        rate = f"{lines / outcome.seconds:,.0f}" if outcome.returncode == 0 else "failed"
        print(
            f"   {labels[name]:<44} {outcome.seconds:>9.1f} {mib(outcome.peak_rss):>13} "
            f"{rate:>11}  {outcome.returncode:>4}  {parts}"
        )
    if {"spark", "pandas"} <= set(outcomes):
        spark, pandas = outcomes["spark"], outcomes["pandas"]
        if spark.returncode == 0 and pandas.returncode == 0:
            print(
                f"   {'spark / pandas':<44} {spark.seconds / pandas.seconds:>8.2f}x "
                f"{spark.peak_rss / max(pandas.peak_rss, 1):>12.2f}x {pandas.seconds / spark.seconds:>10.2f}x"
            )
        else:
            failed = ", ".join(f"{o.name} failed after {o.seconds:.1f} s" for o in (spark, pandas) if o.returncode)
            print(f"   {'spark / pandas':<44} {'-':>9} {'-':>13} {'-':>11}  (no ratios: {failed})")
    for outcome in outcomes.values():
        if outcome.returncode:
            errors = [line for _, line in outcome.lines if ERROR_LINE.search(line)]
            error = next((line for line in errors if "OutOfMemoryError" in line), errors[0] if errors else None)
            last = outcome.lines[-1][1] if outcome.lines else "no output"
            print(f"   {outcome.name} failed: {error or last}")
    print(f"   (memory sampled every 100 ms: {', '.join(f'{o.name} {o.samples}' for o in outcomes.values())} samples)")


# ---- main ---------------------------------------------------------------------------------------------------


@contextlib.contextmanager
def kept_directory(path: str):
    root = Path(path).resolve()
    root.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    yield root
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"\nTotal {time.monotonic() - started:.0f} s; load average now {load}; kept {root}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, help=f"trace lines to generate (default {FULL_EVENTS:,})")
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_EVENTS:,} events (a smoke test)")
    parser.add_argument("--keep", metavar="DIR", help="generate into DIR (or reuse it) and keep it")
    parser.add_argument("--seed", type=int, default=SEED, help=argparse.SUPPRESS)
    args = parser.parse_args()
    events = args.events or (QUICK_EVENTS if args.quick else FULL_EVENTS)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so that the cleanup below runs
    failed = False
    directory = kept_directory(args.keep) if args.keep else bench_directory("pipeline-bench-")
    with directory as root:
        print(f"Machine: {machine(('pandas', 'pyarrow', 'numpy', 'pyspark'))}")
        print(f"Directory: {root}", flush=True)
        results, seconds, reused = load_or_generate(root, events, args.seed)
        lines = print_generation(results, seconds, reused, root)
        book = {(r.scenario, r.variant): r.book for r in results}
        pandas_out = root / "pandas-summary.json"
        spark_out = root / "spark-report"
        pandas_out.unlink(missing_ok=True)
        shutil.rmtree(spark_out, ignore_errors=True)
        outcomes = {
            "pandas": run_contender(
                "pandas", [sys.executable, str(PANDAS_SCRIPT), "--in", str(root), "--out", str(pandas_out)]
            ),
            "spark": run_contender(
                "spark",
                [
                    sys.executable,
                    "-m",
                    "zkcoord.pipeline",
                    "rebalance-report",
                    "--in",
                    str(root),
                    "--out",
                    str(spark_out),
                    "--master",
                    SPARK_MASTER,
                ],
            ),
        }
        summaries = {"generator's book": book}
        for name, outcome in outcomes.items():
            try:
                if name == "pandas":
                    summaries[name] = {(r["scenario"], r["variant"]): r for r in json.loads(pandas_out.read_text())}
                else:
                    summaries[name] = read_spark_summary(spark_out / "summary.parquet")
            except (OSError, ValueError) as error:
                print(f"\nFAILED: {name} left no summary ({error})")
                failed = True
            if outcome.returncode != 0:
                print(f"\nFAILED: {name} exited with status {outcome.returncode}")
                failed = True
        print("\nSummary (pandas; the reference the others are checked against)\n")
        print_summary_table(summaries.get("pandas", book))
        report(lines, outcomes)
        print("\nSpark stages (seconds from each progress line of the CLI to the next)\n")
        for label, took in stage_times(outcomes["spark"]):
            print(f"   {label:<44} {took:>8.1f}")
        print("\nCheck (every summary column of every run, counts exactly, seconds to 1e-6)\n")
        names = list(summaries)
        for left, right in [(a, b) for i, a in enumerate(names) for b in names[i + 1 :]]:
            found = differences(left, summaries[left], right, summaries[right])
            cells = len(summaries[left]) * len(SUMMARY_COLUMNS)
            if found:
                failed = True
                columns = Counter(line.split(":")[0].split(" ", 1)[1] for line in found if " " in line.split(":")[0])
                by_column = ", ".join(f"{column} in {count} runs" for column, count in columns.most_common())
                print(f"   MISMATCH {left} vs {right}: {len(found)} of {cells} cells differ ({by_column})")
                for line in found[:60]:
                    print(f"      {line}")
                if len(found) > 60:
                    print(f"      ... {len(found) - 60} more")
            else:
                print(f"   {left} = {right}: {len(summaries[left])} runs x {len(SUMMARY_COLUMNS)} columns equal")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
