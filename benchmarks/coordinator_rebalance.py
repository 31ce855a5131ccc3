"""Section 3 of benchmarks/coordinator.py: rebalance latency of groups whose members run the real protocol in
load-generator processes, from a JoinGroup or a LeaveGroup until every member is synced on the next generation."""

from __future__ import annotations

import random
import statistics
import time

import coordinator_load
from coordinator_harness import SESSION_TIMEOUT_MS, CpuWindow, LoadError, Scale, Server, Workers, verdict

REBALANCE_CONFIGS = ((10, 100), (100, 1000))
LARGE_REBALANCE = (1000, 10_000)  # at the FULL scale only: reported, without an aim
AIMED_REBALANCE = (100, 1000, 100, "leave")  # (members, partitions, heartbeat.interval.ms, trigger)
MEMBERS_PER_PROCESS, REBALANCE_PROCESSES = 25, 8  # a rebalance's members per load generator, at most so many
AIM_REBALANCE_MS = 100
SEED = 20240601


class RebalanceGroup:
    """One group's members spread over load-generator processes (coordinator_load.rebalance_load), about
    MEMBERS_PER_PROCESS each, at most REBALANCE_PROCESSES of them; the first also holds the newcomer that joins
    and leaves."""

    def __init__(self, server: Server, members: int, partitions: int, interval_ms: int):
        self.partitions = partitions
        processes = min(REBALANCE_PROCESSES, -(-members // MEMBERS_PER_PROCESS))
        shares = [members // processes + (1 if n < members % processes else 0) for n in range(processes)]
        params = {
            "address": server.address,
            "group": f"rebalance-{members}x{partitions}-{interval_ms}",
            "topic": f"bench-rebalance-{partitions}",
            "partitions": partitions,
            "interval_ms": interval_ms,
            "session_timeout_ms": SESSION_TIMEOUT_MS,
        }
        self.workers = Workers("rebalance", [{**params, "members": share} for share in shares])

    def settle(self, after: int, with_newcomer: bool, timeout: float) -> tuple[int, list[dict], dict | None]:
        """Wait until every member (and the newcomer if it is in) is synced on one generation later than ``after``
        with every partition assigned once; returns it, the members' records and the newcomer's."""
        deadline = time.monotonic() + timeout
        while True:
            left = max(0.0, deadline - time.monotonic())
            for inbox in self.workers.inboxes:
                inbox.put(("await", after, left))
            records = [r for status in self.workers.collect("status", timeout=left + 30) for r in status]
            members = [r for r in records if not r["newcomer"]]
            newcomer = next((r for r in records if r["newcomer"]), None)
            in_group = [*members, newcomer] if with_newcomer else members
            generation = coordinator_load.settled_generation(in_group, after, self.partitions)
            if generation is not None:
                return generation, members, newcomer
            if time.monotonic() > deadline:
                raise LoadError(f"the group did not settle after generation {after} in {timeout:.0f} s")
            time.sleep(0.05)  # members on different generations: another rebalance is under way

    def trigger(self, what: str) -> None:
        self.workers.inboxes[0].put((what,))

    def close(self) -> dict:
        """Stop the members; the answers they did not expect, by kind."""
        for inbox in self.workers.inboxes:
            inbox.put(("stop",))
        try:
            results = self.workers.collect("result", timeout=60)
        finally:
            self.workers.close()
        unexpected: dict = {}
        for result in results:
            for key, count in result["unexpected"].items():
                unexpected[key] = unexpected.get(key, 0) + count
        return unexpected


def rebalance_configs(scale: Scale) -> list[tuple[int, int, int, int]]:
    """(members, partitions, heartbeat.interval.ms, triggers of each kind) in the order they run."""
    runs = [
        (members, partitions, interval, repeats)
        for members, partitions in REBALANCE_CONFIGS
        for interval, repeats in sorted(scale.repeats.items(), reverse=True)
    ]
    members, partitions = LARGE_REBALANCE
    runs += [(members, partitions, i, n) for i, n in sorted(scale.large_repeats.items(), reverse=True)]
    return runs


def rebalance_phase(server: Server, zookeeper_pid: int, scale: Scale) -> dict[tuple[int, int, int, str], list[dict]]:
    print(
        f"\n3. Rebalance latency: members run the real protocol (heartbeat.interval.ms below, session.timeout.ms "
        f"{SESSION_TIMEOUT_MS}, one connection each, {MEMBERS_PER_PROCESS} per load-generator process, or more in "
        f"{REBALANCE_PROCESSES} processes); "
        f"a new member joins, then leaves again (LeaveGroup), each at a random moment of the heartbeat cycle; from "
        f"that JoinGroup or LeaveGroup until every member is synced on the next generation with all partitions "
        f"assigned by range. detect: until the last member rejoined after its heartbeat got 27; join+sync: the rest",
        flush=True,
    )
    rows: dict[tuple[int, int, int, str], list[dict]] = {}
    unexpected: dict = {}
    rng = random.Random(SEED)
    for members, partitions, interval, repeats in rebalance_configs(scale):
        label = f"{members} members, {partitions} partitions, heartbeat {interval} ms"
        print(f"   {label}: joining ...", flush=True)
        started = time.monotonic()
        group = RebalanceGroup(server, members, partitions, interval)
        try:
            group.workers.collect("ready", timeout=120)
            timeout = 3 * interval / 1000 + 20 + members / 20
            generation, _, _ = group.settle(-1, with_newcomer=False, timeout=timeout + 60)
            print(f"   {label}: settled on generation {generation} in {time.monotonic() - started:.1f} s", flush=True)
            roles = {"server": [server.process.pid], "load generators": group.workers.pids}
            cpu = CpuWindow({**roles, "zookeeper": [zookeeper_pid]})
            for repeat in range(repeats):
                for trigger in ("join", "leave"):
                    time.sleep(rng.uniform(0, interval / 1000))  # a random moment of the members' heartbeat cycle
                    group.trigger(trigger)
                    generation, records, newcomer = group.settle(generation, trigger == "join", timeout)
                    row = coordinator_load.rebalance_row(trigger, records, newcomer)
                    rows.setdefault((members, partitions, interval, trigger), []).append(row)
                    print(
                        f"   {label}: {trigger:>5} #{repeat + 1}: {row['total_ms']:7.1f} ms (detect "
                        f"{row['detect_ms']:7.1f} + join+sync {row['join_sync_ms']:6.1f}), generation {generation}",
                        flush=True,
                    )
            print(f"   {label}: {cpu.stop()}", flush=True)
        finally:
            closed = group.close()
        for key, count in closed.items():
            unexpected[key] = unexpected.get(key, 0) + count
    print(
        f"\n   {'members':>7} {'partitions':>10} {'interval':>8} {'trigger':>7} {'n':>2} {'median':>9} {'max':>9} "
        f"{'detect (median)':>15} {'join+sync (median)':>18} {'join+sync (max)':>15}"
    )
    for (members, partitions, interval, trigger), found in rows.items():
        totals = [row["total_ms"] for row in found]
        print(
            f"   {members:>7} {partitions:>10} {interval:>5} ms {trigger:>7} {len(found):>2} "
            f"{statistics.median(totals):>6.1f} ms {max(totals):>6.1f} ms "
            f"{statistics.median(row['detect_ms'] for row in found):>12.1f} ms "
            f"{statistics.median(row['join_sync_ms'] for row in found):>15.1f} ms "
            f"{max(row['join_sync_ms'] for row in found):>12.1f} ms"
        )
    if unexpected:
        print(f"   unexpected answers seen by members: {unexpected}")
    if (found := rows.get(AIMED_REBALANCE)) is not None:
        median = statistics.median(row["total_ms"] for row in found)
        print(
            f"\n   the LeaveGroup re-settle time < {AIM_REBALANCE_MS} ms: {median:.1f} ms, median of {len(found)} "
            f"(100 members, 1,000 partitions, heartbeat 100 ms): {verdict(median < AIM_REBALANCE_MS)}",
            flush=True,
        )
    return rows


def rebalance_summary(row, rebalances: dict[tuple[int, int, int, str], list[dict]]) -> None:
    """Section 3's lines of the summary, through ``row(measure, value, aim, ok)``."""
    for key, found in rebalances.items():
        members, partitions, interval, trigger = key
        totals = [r["total_ms"] for r in found]
        median = statistics.median(totals)
        if key != AIMED_REBALANCE:
            what = "LeaveGroup" if trigger == "leave" else "a join"
            measure = f"rebalance {members}/{partitions} after {what}, heartbeat {interval} ms, median"
            row(measure, f"{median:,.0f} ms (max {max(totals):,.0f})")
            continue
        measure = (
            f"the LeaveGroup re-settle time, {members}/{partitions}, heartbeat {interval} ms, median of {len(found)}"
        )
        value = f"{median:,.1f} ms (max {max(totals):,.0f})"
        row(measure, value, f"< {AIM_REBALANCE_MS} ms", median < AIM_REBALANCE_MS)
        join_sync = [r["join_sync_ms"] for r in found]
        value = f"{statistics.median(join_sync):,.0f} ms (max {max(join_sync):,.0f})"
        row("   its join+sync, after the last member learned of it", value)
