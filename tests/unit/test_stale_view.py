"""No answers from a stale view (docs/coordinator.md "After a pause or a disconnect"): a suspended offsets
partition answers 15 and fires no timer; a node suspends what it leads after a pause or a ZooKeeper
disconnect, and serves again only what the election's fresh read confirms. No ZooKeeper, no real sleeps."""

import pytest
from coordinator_requests import (
    COORDINATOR_NOT_AVAILABLE,
    G_PARTITION,
    NONE,
    NOT_COORDINATOR,
    SESSION,
    G,
    commit,
    commit_errors,
    error,
    fetch,
    fetched_offset,
    fx_one,
    hb,
    list_groups,
    new_harness,
)
from kazoo.client import KazooState

from zkcoord.clock import ManualClock
from zkcoord.server.config import node_config
from zkcoord.server.node import CoordinatorNode
from zkcoord.wire import messages as m

TP = ("topic", 0)


@pytest.fixture
def suspended():
    """FX-ONE with offset 5 committed, then the group's partition suspended."""
    h = new_harness()
    a = fx_one(h)
    assert set(commit_errors(h.send(commit(a, 1, {TP: 5}))).values()) == {NONE}
    h.coordinator.suspend({G_PARTITION})
    return h, a


def test_a_suspended_partition_acknowledges_nothing(suspended):
    h, a = suspended
    assert error(h.send(hb(a, 1))) == COORDINATOR_NOT_AVAILABLE
    assert set(commit_errors(h.send(commit(a, 1, {TP: 9}))).values()) == {COORDINATOR_NOT_AVAILABLE}
    assert error(h.send(fetch(partitions=[TP]))) == COORDINATOR_NOT_AVAILABLE
    assert error(h.send(list_groups())) == COORDINATOR_NOT_AVAILABLE


def test_no_timer_fires_while_suspended_and_they_fire_once_resumed(suspended):
    h, a = suspended
    h.advance(10 * SESSION)
    assert set(h.group(G).members) == {a}  # the stale view expires nobody
    h.coordinator.resume(G_PARTITION)
    assert fetched_offset(h, TP) == 5
    h.advance(1)
    assert h.group(G).members == {}


def test_a_deposed_suspended_partition_answers_not_coordinator(suspended):
    h, a = suspended
    h.unload(G_PARTITION)
    assert h.coordinator.suspended == set()
    assert error(h.send(hb(a, 1))) == NOT_COORDINATOR


class Confirms:
    """Stands in for the election: counts the confirmations asked for."""

    def __init__(self):
        self.asked = 0

    def confirm(self) -> None:
        self.asked += 1


@pytest.fixture
def node(tmp_path):
    """A node, not started, leading G's offsets partition at epoch 1, with a 3 s ZooKeeper session (pause limit 1 s).
    Returns the node, its clock and that partition."""
    clock = ManualClock(1_000_000)
    config = node_config({"zookeeper.session.timeout.ms": 3000})
    node = CoordinatorNode(1, "127.0.0.1", 0, "unused:2181", tmp_path, config, clock=clock)
    node.cluster.election = Confirms()
    partition = node.coordinator.partition_for(G)
    node._on_elected(partition, 1)
    assert node.coordinator.owned == {partition}
    return node, clock, partition


def heartbeat_error(node: CoordinatorNode) -> int:
    answers = []
    node.dispatch(m.HeartbeatRequest(group_id=G, generation_id=1, member_id="gone"), answers.append)
    (answer,) = answers
    return answer.error_code


def test_a_pause_past_a_third_of_the_session_suspends_until_confirmed(node):
    node, clock, partition = node
    clock.advance(1000)
    node._check_pause()
    assert node.coordinator.suspended == set() and node.election.asked == 0
    clock.advance(1001)
    assert heartbeat_error(node) == COORDINATOR_NOT_AVAILABLE  # detected by the request itself, before answering
    assert node.coordinator.suspended == {partition} and node.election.asked == 1
    node._on_confirmed({partition: 1})
    assert node.coordinator.suspended == set() and node.coordinator.owned == {partition}
    assert heartbeat_error(node) != COORDINATOR_NOT_AVAILABLE


@pytest.mark.parametrize("led_epoch", [None, 2], ids=["resigned", "other-epoch"])
def test_a_partition_not_confirmed_at_its_epoch_is_unloaded(node, led_epoch):
    node, _, partition = node
    node._on_zookeeper_state(KazooState.SUSPENDED)
    assert node.coordinator.suspended == {partition} and node.election.asked == 1
    node._on_confirmed({} if led_epoch is None else {partition: led_epoch})
    assert node.coordinator.suspended == set() and node.coordinator.owned == set()
    assert heartbeat_error(node) == NOT_COORDINATOR
