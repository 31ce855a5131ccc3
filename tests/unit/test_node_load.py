"""A node's load of an offsets partition that fails, for any reason: retried while its groups answer 14, then
given up to the election (zkcoord/server/node.py, docs/coordinator.md "Loading"). No ZooKeeper: the node is
built but not started, its election a recorder."""

import gc

import pytest

from zkcoord.errors import CorruptLogError, FencedLeaderError
from zkcoord.log.segment import ScanProblem
from zkcoord.server.config import node_config
from zkcoord.server.node import GC_YOUNG_THRESHOLD, CoordinatorNode, tune_garbage_collector


class GiveUps:
    def __init__(self):
        self.calls: list[tuple[int, int, float]] = []

    def give_up(self, partition: int, epoch: int, hold_off_s: float) -> None:
        self.calls.append((partition, epoch, hold_off_s))


@pytest.fixture
def make_node(tmp_path, monkeypatch):
    def make(failure: Exception, attempts: int) -> tuple[CoordinatorNode, GiveUps, list]:
        config = node_config({"coordinator.load.max.attempts": attempts, "coordinator.load.retry.backoff.ms": 250})
        node = CoordinatorNode(1, "127.0.0.1", 0, "unused:2181", tmp_path, config)
        node.cluster.election = GiveUps()
        retries = []
        monkeypatch.setattr("zkcoord.server.node.gevent.spawn_later", lambda *args: retries.append(args))

        def refuse(partition, epoch=None):
            raise failure

        node.runtime.load = refuse
        return node, node.cluster.election, retries

    return make


@pytest.mark.parametrize(
    "failure",
    [RuntimeError("a bug"), ValueError("foreign bytes"), CorruptLogError(ScanProblem("f", 5, 9, "bad", False))],
    ids=["bug", "value-error", "corrupt-log"],
)
def test_a_failing_load_is_retried_then_given_up_while_the_groups_answer_14(make_node, failure):
    node, election, retries = make_node(failure, attempts=3)
    node._on_elected(0, 7)
    assert election.calls == [] and 0 in node.coordinator.loading  # 14 meanwhile
    for attempt in (2, 3):
        (delay, load, partition, epoch, next_attempt) = retries.pop()
        assert (delay, partition, epoch, next_attempt) == (0.25, 0, 7, attempt)
        load(partition, epoch, next_attempt)
    assert retries == []
    assert election.calls == [(0, 7, 0.75)]  # hold-off: attempts × back-off
    assert 0 in node.coordinator.loading  # until the election resigns it (then 16)


def test_a_fenced_load_is_given_up_at_once(make_node):
    node, election, retries = make_node(FencedLeaderError("epoch 9 already has"), attempts=3)
    node._on_elected(0, 7)
    assert (election.calls, retries) == ([(0, 7, 0.75)], [])


def test_a_nodes_process_collects_its_young_generation_less_often_and_leaves_what_start_up_made():
    thresholds = gc.get_threshold()
    try:
        tune_garbage_collector()
        assert gc.get_threshold() == (GC_YOUNG_THRESHOLD, *thresholds[1:])
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)
