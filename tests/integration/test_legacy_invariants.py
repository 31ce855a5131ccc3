"""Liveness of a busy member and exclusive ownership under random membership churn, on a real ZooKeeper."""

import random
import time

import gevent
import pytest
from legacy_support import Recorder, member, prepare_cluster

from zkcoord.model import TopicPartition
from zkcoord.testing.legacy import converged, ownership_overlaps
from zkcoord.testing.zookeeper import expire_session, wait_until
from zkcoord.zk import layout
from zkcoord.zk.session import make_kazoo_client

SESSION_MS = 1000


def _burn_cpu(seconds):
    """Pure-Python work that never yields to a gevent hub."""
    deadline = time.perf_counter() + seconds
    count = 0
    while time.perf_counter() < deadline:
        count += sum(range(200))
    return count


def test_cpu_bound_caller_does_not_cost_the_registration(zk, zk_connect):
    prepare_cluster(zk, {"t": 2})
    recorder = Recorder()
    with member(zk_connect, "m0", recorder=recorder, zookeeper_session_timeout_ms=SESSION_MS) as consumer:
        session = consumer.zk_client.client_id[0]
        owned = consumer.owned_partitions()
        _burn_cpu(2 * SESSION_MS / 1000)
        time.sleep(SESSION_MS / 1000)  # an expiry would surface now
        assert consumer.zk_client.client_id[0] == session
        assert not recorder.of("legacy.session_expired")
        assert zk.get(layout.consumer_path("g", consumer.consumer_id))[1].ephemeralOwner == session
        assert consumer.owned_partitions() == owned == {TopicPartition("t", 0), TopicPartition("t", 1)}


def test_blocking_rebalance_listener_does_not_cost_the_registration(zk, zk_connect):
    prepare_cluster(zk, {"t": 2})
    recorder = Recorder()

    class SlowListener:
        def on_partitions_assigned(self, assigned):
            _burn_cpu(2 * SESSION_MS / 1000)

    with member(
        zk_connect, "m0", recorder=recorder, listener=SlowListener(), zookeeper_session_timeout_ms=SESSION_MS
    ) as consumer:
        assert not recorder.of("legacy.session_expired")
        assert consumer.owned_partitions() == {TopicPartition("t", 0), TopicPartition("t", 1)}
        assert (
            zk.get(layout.consumer_path("g", consumer.consumer_id))[1].ephemeralOwner == consumer.zk_client.client_id[0]
        )


def test_control_a_client_on_the_busy_hub_does_lose_its_session(zk_connect):
    """The hazard the hub thread avoids: the same burn starves a kazoo client sharing the caller's hub."""
    client = make_kazoo_client(zk_connect, SESSION_MS)
    states = []
    client.add_listener(states.append)
    client.start(timeout=10)
    try:
        _burn_cpu(2 * SESSION_MS / 1000)
        with gevent.Timeout(10):
            while "LOST" not in states:
                gevent.sleep(0.05)
    finally:
        client.stop()
        client.close()
    assert "LOST" in states


def run_churn_campaign(zk, zk_connect, seed: int, steps: int) -> None:
    """Random joins, leaves and session expiries; no instant with two owners; converged at the end."""
    rnd = random.Random(seed)
    prepare_cluster(zk, {"t": 12, "u": 5})
    recorder = Recorder()
    live = {}
    next_id = 0

    def join():
        nonlocal next_id
        name = f"m{next_id}"
        next_id += 1
        streams = rnd.randint(1, 3)
        live[name] = member(
            zk_connect,
            name,
            recorder=recorder,
            rebalance_max_retries=20,
            subscription={"topics": {"t": streams, "u": rnd.randint(1, 2)} if rnd.random() < 0.7 else {"t": streams}},
        ).start()

    try:
        join()
        for _ in range(steps):
            action = rnd.choice(["join", "join", "leave", "expire"])
            if action == "join" and len(live) < 6 or not live:
                join()
            elif action == "leave" and len(live) > 1:
                live.pop(rnd.choice(sorted(live))).close()
            elif action == "expire":
                expire_session(live[rnd.choice(sorted(live))].zk_client)
            time.sleep(rnd.uniform(0.0, 0.4))
        members = [m.consumer_id for m in live.values()]
        wait_until(lambda: converged(zk, "g", members=members), timeout=60, what="quiescence")
    finally:
        for consumer in live.values():
            consumer.close()
    assert recorder.of("legacy.assignment")
    assert ownership_overlaps(recorder.events) == []


@pytest.mark.parametrize("seed", [7, 2024])
def test_random_churn_never_double_owns(zk, zk_connect, seed):
    run_churn_campaign(zk, zk_connect, seed, steps=8)


@pytest.mark.soak
@pytest.mark.parametrize("seed", range(100, 125))
def test_soak_random_churn_never_double_owns(zk, zk_connect, seed):
    run_churn_campaign(zk, zk_connect, seed, steps=40)


def test_overlap_checker_finds_a_real_overlap():
    """The checker can fail: two members holding t/0 over intersecting intervals."""

    def change(member_id, before, claims):
        return {
            "type": "legacy.assignment",
            "member": member_id,
            "assignment": {f"{member_id}-0": claims},
            "monotonic_before": before,
            "monotonic_after": before + 0.001,
        }

    events = [change("a", 1.0, [["t", 0]]), change("b", 1.5, [["t", 0]]), change("a", 2.0, [])]
    assert ownership_overlaps(events) == [(TopicPartition("t", 0), "a", "b")]
    handover = [change("a", 1.0, [["t", 0]]), change("a", 2.0, []), change("b", 2.5, [["t", 0]])]
    assert ownership_overlaps(handover) == []
