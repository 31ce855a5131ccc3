"""A migrate step returns only once every live zkcoord node that follows the group acknowledged its new epoch.

Real node processes on a real ZooKeeper. A node acknowledges the epoch it has applied in an ephemeral znode
while it caches the group's migration state (docs/migration.md, "A phase change is acknowledged"); a SIGSTOPped
coordinator cannot, so the step waits, times out naming it, stays under way, and completes once the node
runs again. A node that never served the group has no cached phase and is not waited for, and a node that
hands the group's partition over withdraws its acknowledgement.
"""

import signal
import textwrap
import threading

import pytest
from cluster_support import Cluster, eventually
from legacy_support import prepare_cluster

from zkcoord.channel import CoordinatorChannel
from zkcoord.cli import main
from zkcoord.migration import store
from zkcoord.migration.phases import NodeAck, Phase
from zkcoord.migration.runner import Runner, load_steps
from zkcoord.zk import layout
from zkcoord.zk.nodes import discover_nodes

ROOT = layout.DEFAULT_ROOT
GROUP = "g"
STEP = "0001_phase"
NODE_OVERRIDES = {
    "offsets.topic.num.partitions": 2,
    "group.initial.rebalance.delay.ms": 0,
    "zookeeper.session.timeout.ms": 6000,  # well past the few hundred ms a node stays stopped here
}
WAIT_S = 15.0


@pytest.fixture
def cluster(zk, zk_connect, tmp_path):
    prepare_cluster(zk, {"t": 2})
    with Cluster(zk_connect, tmp_path / "log", tmp_path, NODE_OVERRIDES) as nodes:
        yield nodes


@pytest.fixture
def nodes(cluster, zk):
    cluster.start([1, 2])
    cluster.wait_balanced(zk)
    return cluster


@pytest.fixture
def steps_dir(tmp_path):
    """One step that only changes the phase: nothing in it talks to a coordinator, so a stopped node stops
    nothing but its acknowledgement."""
    directory = tmp_path / "steps"
    directory.mkdir()
    (directory / f"{STEP}.py").write_text(
        textwrap.dedent(
            '''
            """Phase only: ZK_ONLY <-> DUAL_WRITE."""
            from zkcoord.migration.phases import Phase

            PHASE = Phase.DUAL_WRITE


            def check(ctx, when):
                return []


            def up(ctx):
                ctx.set_phase(Phase.DUAL_WRITE)


            def down(ctx):
                ctx.set_phase(Phase.ZK_ONLY)
            '''
        )
    )
    return directory


def serve_group(zk, epoch: int = -1) -> int:
    """An OffsetFetch that reads the group's phase, so its coordinator caches it and acknowledges ``epoch``; the
    coordinator's node id."""
    channel = CoordinatorChannel(lambda: discover_nodes(zk, ROOT), "test", 5000)
    try:
        answer, (coordinator, _) = channel.call_coordinator(GROUP, "OffsetFetch", group_id=GROUP, topics=None)
    finally:
        channel.close()
    assert answer["error_code"] == 0, answer
    acknowledged = [NodeAck(str(coordinator), epoch)]
    eventually(lambda: store.node_acks(zk, ROOT, GROUP) == acknowledged, WAIT_S, "the acknowledgement")
    return coordinator


def migrate(capsys, zk_connect, steps_dir, *args):
    options = ["--group", GROUP, "--zookeeper", zk_connect, "--migrations-dir", str(steps_dir)]
    code = main(["migrate", *args, *options, *(["--allow-new-group"] if args[0] == "up" else [])])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_step_waits_for_a_stopped_coordinator_names_it_and_completes_once_it_runs(
    nodes, zk, zk_connect, steps_dir, capsys
):
    coordinator = nodes.nodes[serve_group(zk)]
    coordinator.signal(signal.SIGSTOP)
    try:
        code, _, err = migrate(capsys, zk_connect, steps_dir, "up", "--ack-timeout", "300")
        assert code == 1, err
        assert "phase DUAL_WRITE (epoch 1) not acknowledged within 0.3 s" in err
        assert f"node {coordinator.node_id} still at epoch -1 (the group is at DUAL_WRITE, epoch 1)" in err
        state, _ = store.read_state(zk, ROOT, GROUP)
        assert (state.phase, state.epoch, state.pending, state.applied) == (Phase.DUAL_WRITE, 1, (STEP, "up"), ())

        # Run again: the step under way waits, and does not return while the node cannot acknowledge.
        runner = Runner(zk, None, load_steps(steps_dir), say=lambda line: None, ack_timeout_s=WAIT_S)
        outcome = {}
        rerun = threading.Thread(target=lambda: outcome.update(result=runner.run(GROUP, "up")), daemon=True)
        rerun.start()
        rerun.join(0.5)
        assert rerun.is_alive() and not outcome
    finally:
        coordinator.signal(signal.SIGCONT)
    rerun.join(WAIT_S)
    assert [planned.step.name for planned in outcome["result"].done] == [STEP]
    assert store.node_acks(zk, ROOT, GROUP) == [NodeAck(str(coordinator.node_id), 1)]
    state, _ = store.read_state(zk, ROOT, GROUP)
    assert (state.pending, state.applied) == (None, (STEP,))


def test_a_node_that_does_not_serve_the_group_is_not_waited_for(nodes, zk, zk_connect, steps_dir, capsys):
    coordinator = serve_group(zk)
    other = nodes.nodes[next(node_id for node_id in nodes.nodes if node_id != coordinator)]
    other.signal(signal.SIGSTOP)
    try:
        code, out, err = migrate(capsys, zk_connect, steps_dir, "up", "--ack-timeout", "5000")
        assert code == 0, err
        assert store.node_acks(zk, ROOT, GROUP) == [NodeAck(str(coordinator), 1)]
        code, out, err = migrate(capsys, zk_connect, steps_dir, "down", "--ack-timeout", "5000")
        assert code == 0, err
        assert store.node_acks(zk, ROOT, GROUP) == [NodeAck(str(coordinator), 2)]
    finally:
        other.signal(signal.SIGCONT)


def test_a_node_that_hands_the_group_over_withdraws_its_acknowledgement(cluster, zk, zk_connect, steps_dir, capsys):
    cluster.start([1])
    cluster.wait_balanced(zk)
    assert serve_group(zk) == 1
    cluster.start([2])
    cluster.wait_balanced(zk)  # the group's partition (1) moves to node 2; node 1 unloads it
    eventually(lambda: store.node_acks(zk, ROOT, GROUP) == [], WAIT_S, "node 1 to withdraw its acknowledgement")
    assert serve_group(zk) == 2
    cluster.nodes[1].signal(signal.SIGSTOP)  # no longer follows the group: the step must not wait for it
    try:
        code, _, err = migrate(capsys, zk_connect, steps_dir, "up", "--ack-timeout", "5000")
    finally:
        cluster.nodes[1].signal(signal.SIGCONT)
    assert code == 0, err
    assert store.node_acks(zk, ROOT, GROUP) == [NodeAck("2", 1)]


def test_a_coordinator_whose_session_expired_no_longer_counts_and_acknowledges_afresh(
    nodes, zk, zk_connect, steps_dir, capsys
):
    coordinator = nodes.nodes[serve_group(zk)]
    coordinator.signal(signal.SIGSTOP)
    try:
        eventually(lambda: store.node_acks(zk, ROOT, GROUP) == [], WAIT_S, "ZooKeeper to expire the stopped node")
        code, _, err = migrate(capsys, zk_connect, steps_dir, "up", "--ack-timeout", "5000")
        assert code == 0, err
    finally:
        coordinator.signal(signal.SIGCONT)
    nodes.wait_balanced(zk)
    serving = serve_group(zk, epoch=1)
    assert store.node_acks(zk, ROOT, GROUP) == [NodeAck(str(serving), 1)]
