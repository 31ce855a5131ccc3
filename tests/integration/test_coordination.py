"""zkcoord's own ZooKeeper metadata: the agreed partition count, node registrations and the election of every
offsets partition's leader with epochs (real ZooKeeper; several nodes are several kazoo clients here)."""

import json
import os
import subprocess
import sys
import textwrap
import time
from collections import defaultdict

import gevent
import pytest

from zkcoord.errors import ConfigError
from zkcoord.testing.zookeeper import drop_connection, expire_session, wait_until
from zkcoord.zk import layout
from zkcoord.zk.election import PartitionElection
from zkcoord.zk.layout import ZnodeDecodeError
from zkcoord.zk.leader_znodes import ensure_partition_count, read_leaders
from zkcoord.zk.nodes import NodeRegistry, read_nodes
from zkcoord.zk.session import HubThread, make_kazoo_client

ROOT = "/zkcoord"
SESSION_MS = 4000
GRACE_MS = 300


class Events:
    """Every callback of every node, in the order they ran."""

    def __init__(self):
        self.log: list[tuple[str, int, int, int | None]] = []

    def callbacks(self, node_id: int):
        def on_elected(partition, epoch):
            self.log.append(("elected", node_id, partition, epoch))

        def on_resigned(partition, epoch):
            self.log.append(("resigned", node_id, partition, epoch))

        return on_elected, on_resigned

    def of(self, kind: str, node_id: int) -> list[tuple[int, int | None]]:
        return [(p, epoch) for what, node, p, epoch in self.log if what == kind and node == node_id]


class Node:
    """One coordinator node: a gevent kazoo client, its election and its registration, on one hub.

    ``hub`` is a HubThread to run on, or None for the test's own hub (which then runs only while the test
    waits with :func:`eventually`)."""

    def __init__(self, connect: str, node_id: int, events: Events, partitions: int, hub: HubThread | None = None):
        self.node_id = node_id
        self.hub = hub

        def start():
            client = make_kazoo_client(connect, SESSION_MS)
            client.start(timeout=10)
            on_elected, on_resigned = events.callbacks(node_id)
            election = PartitionElection(
                client, ROOT, node_id, partitions, on_elected, on_resigned, claim_grace_ms=GRACE_MS
            )
            registry = NodeRegistry(client, ROOT, node_id, "127.0.0.1", 9000 + node_id)
            election.start()
            registry.register()
            return client, election, registry

        self.client, self.election, self.registry = self.run(start)

    def run(self, fn, *args):
        return fn(*args) if self.hub is None else self.hub.call(fn, *args, timeout=30)

    def owned(self) -> dict[int, int]:
        return self.election.owned()

    def close(self) -> None:
        def stop():
            self.election.stop()
            self.registry.stop()
            self.client.stop()
            self.client.close()

        self.run(stop)


@pytest.fixture
def events():
    return Events()


@pytest.fixture
def cluster(zk_connect, events):
    """``cluster(node_id, partitions, on_hub_thread=False)`` starts a node, on this thread's hub or on a hub
    thread shared by the test's other such nodes; every node is closed at the end."""
    made: list[Node] = []
    hubs: list[HubThread] = []

    def start(node_id: int, partitions: int, on_hub_thread: bool = False) -> Node:
        if on_hub_thread and not hubs:
            hubs.append(HubThread("test-nodes").start())
        node = Node(zk_connect, node_id, events, partitions, hubs[0] if on_hub_thread else None)
        made.append(node)
        return node

    yield start
    try:
        for node in reversed(made):
            node.close()
    finally:
        for hub in hubs:
            hub.stop()


def eventually(condition, timeout: float = 20.0, what: str = ""):
    """Poll ``condition`` while this thread's hub runs (wait_until's time.sleep would freeze nodes on it)."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what or condition}")
        gevent.sleep(0.02)
    return value


def preferred(node_ids, partitions: int) -> dict[int, int]:
    ids = sorted(node_ids)
    return {p: ids[p % len(ids)] for p in range(partitions)}


def converged(zk, nodes: list[Node], partitions: int) -> bool:
    """ZooKeeper has the preferred leader for every partition and each node's own view agrees."""
    leaders = read_leaders(zk, ROOT, partitions)
    if {p: node for p, (node, _) in leaders.items()} != preferred([n.node_id for n in nodes], partitions):
        return False
    return all(n.owned() == {p: e for p, (node, e) in leaders.items() if node == n.node_id} for n in nodes)


def assert_epochs_increase(events: Events) -> None:
    elected = defaultdict(list)
    for kind, _, partition, epoch in events.log:
        if kind == "elected":
            elected[partition].append(epoch)
    for partition, epochs in elected.items():
        assert all(a < b for a, b in zip(epochs, epochs[1:], strict=False)), (partition, epochs)


def assert_never_two_owners(events: Events) -> None:
    owner: dict[int, int] = {}
    for kind, node, partition, _ in events.log:
        if kind == "elected":
            assert partition not in owner, f"{node} elected for {partition} while {owner[partition]} owns it"
            owner[partition] = node
        else:
            assert owner.pop(partition) == node


# -- the znode layout -----------------------------------------------------------------------------------


def test_paths_live_under_the_configured_root():
    assert layout.coordinator_nodes_path(ROOT) == "/zkcoord/nodes"
    assert layout.coordinator_node_path("/x/", 3) == "/x/nodes/3"
    assert layout.offsets_config_path(ROOT) == "/zkcoord/offsets/config"
    assert layout.partition_leader_path(ROOT, 7) == "/zkcoord/offsets/partitions/7/leader"
    assert layout.partition_epoch_path(ROOT, 7) == "/zkcoord/offsets/partitions/7/epoch"
    with pytest.raises(ValueError):
        layout.coordinator_nodes_path("zkcoord")


def test_payloads_round_trip_and_foreign_data_is_refused():
    path = "/zkcoord/any"
    assert layout.encode_partition_leader(2, 7) == b'{"version":1,"node_id":2,"epoch":7}'
    assert layout.decode_partition_leader(path, layout.encode_partition_leader(2, 7)) == (2, 7)
    assert layout.decode_coordinator_node(path, layout.encode_coordinator_node("h", 9092)) == ("h", 9092)
    assert layout.decode_offsets_config(path, layout.encode_offsets_config(50)) == 50
    assert layout.decode_partition_epoch(path, layout.encode_partition_epoch(0)) == 0
    assert layout.decode_partition_leader(path, b'{"version":2,"node_id":1,"epoch":3,"extra":[]}') == (1, 3)
    for data in (
        None,
        b"",
        b"\xff",
        b"7",
        b"[1]",
        b'{"node_id":1,"epoch":3}',
        b'{"version":1,"node_id":true,"epoch":3}',
        b'{"version":1,"node_id":1,"epoch":"3"}',
        b'{"version":1,"node_id":1,"epoch":0}',
        b'{"version":0,"node_id":1,"epoch":3}',
    ):
        with pytest.raises(ZnodeDecodeError, match=path):
            layout.decode_partition_leader(path, data)
    with pytest.raises(ZnodeDecodeError):
        layout.decode_coordinator_node(path, b'{"version":1,"host":"h","port":70000}')
    with pytest.raises(ZnodeDecodeError):
        layout.decode_offsets_config(path, b'{"version":1,"partitions":0}')


# -- the partition count --------------------------------------------------------------------------------


def test_the_partition_count_is_stored_and_a_different_one_refused(zk):
    assert ensure_partition_count(zk, ROOT, 10) == 10
    assert ensure_partition_count(zk, ROOT, 10) == 10
    data, _ = zk.get(layout.offsets_config_path(ROOT))
    assert json.loads(data) == {"version": 1, "partitions": 10}
    with pytest.raises(ConfigError, match="is 50 here but 10 in ZooKeeper at /zkcoord/offsets/config; a node config"):
        ensure_partition_count(zk, ROOT, 50)
    with pytest.raises(ConfigError):
        ensure_partition_count(zk, ROOT, 0)
    zk.create("/other/offsets/config", b"fifty", makepath=True)
    with pytest.raises(ZnodeDecodeError, match="/other/offsets/config"):
        ensure_partition_count(zk, "/other", 50)


# -- registrations --------------------------------------------------------------------------------------


def test_nodes_register_and_come_back_after_their_session_expires(cluster, zk):
    cluster(1, partitions=1)
    b = cluster(2, partitions=1)
    assert read_nodes(zk, ROOT) == {1: ("127.0.0.1", 9001), 2: ("127.0.0.1", 9002)}
    old_session = b.client.client_id[0]
    expire_session(b.client)

    def registered_again():
        stat = zk.exists(layout.coordinator_node_path(ROOT, 2))
        return stat is not None and stat.ephemeralOwner != old_session

    eventually(registered_again, what="node 2 to register with its new session")
    assert read_nodes(zk, ROOT)[2] == ("127.0.0.1", 9002)
    b.registry.stop()
    assert read_nodes(zk, ROOT) == {1: ("127.0.0.1", 9001)}


def test_a_node_id_held_by_another_live_session_is_refused(cluster, zk_connect):
    cluster(1, partitions=1)
    client = make_kazoo_client(zk_connect, SESSION_MS)
    client.start(timeout=10)
    try:
        with pytest.raises(ConfigError, match="node id 1 is already registered"):
            NodeRegistry(client, ROOT, 1, "127.0.0.1", 1).register()
    finally:
        client.stop()
        client.close()


# -- the election ---------------------------------------------------------------------------------------


def test_one_node_claims_every_partition(cluster, zk, events):
    node = cluster(1, partitions=4)
    eventually(lambda: len(node.owned()) == 4, what="node 1 to lead every partition")
    assert node.owned() == {p: 1 for p in range(4)}
    assert read_leaders(zk, ROOT, 4) == {p: (1, 1) for p in range(4)}
    assert sorted(events.of("elected", 1)) == [(p, 1) for p in range(4)]
    for p in range(4):
        assert json.loads(zk.get(layout.partition_epoch_path(ROOT, p))[0]) == {"version": 1, "epoch": 1}


def test_three_nodes_spread_partitions_as_the_preferred_rule_says(cluster, zk, events):
    nodes = [cluster(node_id, partitions=12) for node_id in (3, 7, 5)]
    eventually(lambda: converged(zk, nodes, 12), what="the preferred spread")
    assert {p: n for p, (n, _) in read_leaders(zk, ROOT, 12).items()} == {p: (3, 5, 7)[p % 3] for p in range(12)}
    owned = [set(node.owned()) for node in nodes]
    assert set().union(*owned) == set(range(12)) and sum(map(len, owned)) == 12
    assert_never_two_owners(events)
    assert_epochs_increase(events)


def test_a_partition_given_up_goes_to_another_node_and_comes_back_after_the_hold_off(cluster, zk, events):
    one, two = cluster(1, partitions=2), cluster(2, partitions=2)
    eventually(lambda: converged(zk, [one, two], 2), what="the preferred spread")
    epoch = one.owned()[0]
    # Node 1 may have led partition 1 alone before node 2 started, and handed it over: not this test's resignation.
    resigned_before = len(events.of("resigned", 1))

    one.election.give_up(0, epoch + 1, hold_off_s=60)  # an epoch it does not lead: nothing happens
    one.election.give_up(0, epoch, hold_off_s=1)

    # Node 1 is partition 0's preferred node, so only its hold-off lets node 2 (after the grace) claim it.
    eventually(lambda: two.owned().get(0, 0) > epoch, what="node 2 to claim the partition node 1 gave up")
    assert events.of("resigned", 1)[resigned_before:] == [(0, epoch)] and 0 not in one.owned()
    assert read_leaders(zk, ROOT, 2)[0][0] == 2
    # Node 2 took it over live node 1, so it offers it back after ten graces; node 1's hold-off is over by then.
    eventually(lambda: converged(zk, [one, two], 2), what="node 1 to lead partition 0 again")
    assert_never_two_owners(events)
    assert_epochs_increase(events)


def test_an_expired_session_moves_its_partitions_to_the_others(cluster, zk, events):
    """Nodes 1 and 3 run on their own hub thread; node 2 on this thread's hub, which stays frozen (time.sleep)
    from the expiry until the others have taken its partitions, so node 2 cannot come back first."""
    one, three = cluster(1, 12, on_hub_thread=True), cluster(3, 12, on_hub_thread=True)
    two = cluster(2, partitions=12)
    nodes = [one, two, three]
    eventually(lambda: converged(zk, nodes, 12), what="the preferred spread")
    lost = dict(two.owned())
    assert sorted(lost) == [1, 4, 7, 10]

    expire_session(two.client)

    def taken_over():
        leaders = read_leaders(zk, ROOT, 12)
        return all(p in leaders and leaders[p][0] != 2 and leaders[p][1] > lost[p] for p in lost)

    wait_until(taken_over, what="nodes 1 and 3 to take node 2's partitions with higher epochs")
    assert two.owned() == lost  # node 2 has not noticed yet: what the epoch fence on disk is for
    resigned_before = len(events.of("resigned", 2))

    eventually(lambda: not two.owned(), what="node 2 to notice its lost session")
    assert sorted(events.of("resigned", 2)[resigned_before:]) == [(p, None) for p in sorted(lost)]
    eventually(lambda: converged(zk, nodes, 12), what="node 2 to rejoin with a new session")
    assert sorted(two.owned()) == sorted(lost)
    assert all(epoch > lost[p] + 1 for p, epoch in two.owned().items())
    assert_epochs_increase(events)


def test_a_dropped_connection_resigns_everything_then_leads_again_with_new_epochs(cluster, zk, events):
    node = cluster(1, partitions=4)
    eventually(lambda: len(node.owned()) == 4, what="node 1 to lead every partition")
    session = node.client.client_id[0]

    drop_connection(node.client)
    eventually(lambda: len(events.of("resigned", 1)) == 4, what="node 1 to resign on SUSPENDED")
    assert sorted(events.of("resigned", 1)) == [(p, None) for p in range(4)]
    eventually(lambda: node.owned() == {p: 2 for p in range(4)}, what="node 1 to lead again with epoch 2")
    assert node.client.client_id[0] == session
    assert read_leaders(zk, ROOT, 4) == {p: (1, 2) for p in range(4)}
    assert zk.exists(layout.partition_leader_path(ROOT, 0)).ephemeralOwner == session
    assert_epochs_increase(events)


def test_confirm_answers_only_the_partitions_whose_leader_znode_is_still_this_sessions(cluster, zk, events):
    node = cluster(1, partitions=2)
    eventually(lambda: node.owned() == {0: 1, 1: 1}, what="node 1 to lead both partitions")
    confirmed = []
    node.election.on_confirmed = confirmed.append
    node.election.confirm()
    eventually(lambda: confirmed == [{0: 1, 1: 1}], what="a confirmation of both partitions")

    # Another session leads partition 0 now (as after this node's session expired unnoticed).
    taken = zk.transaction()
    taken.delete(layout.partition_leader_path(ROOT, 0))
    taken.create(layout.partition_leader_path(ROOT, 0), layout.encode_partition_leader(2, 9), ephemeral=True)
    taken.commit()
    node.election.confirm()
    eventually(lambda: len(confirmed) == 2, what="a second confirmation")
    assert confirmed[1] == {1: 1}
    assert events.of("resigned", 1) == [(0, 1)]


def test_stop_hands_every_partition_over_and_a_restarted_election_gets_them_back(cluster, zk, events):
    one, two = cluster(1, partitions=6), cluster(2, partitions=6)
    eventually(lambda: converged(zk, [one, two], 6), what="the preferred spread")
    led = one.owned()
    resigned_before = len(events.of("resigned", 1))

    one.election.stop()  # still registered: node 2 takes over after the grace, and keeps the partitions
    assert sorted(events.of("resigned", 1)[resigned_before:]) == sorted(led.items())
    assert one.owned() == {}
    eventually(lambda: len(two.owned()) == 6, what="node 2 to take node 1's partitions after the grace")
    assert all(two.owned()[p] > epoch for p, epoch in led.items())
    settled = len(events.log)
    gevent.sleep(3 * GRACE_MS / 1000)  # long enough for a hand-back to a preferred node that is not electing
    assert len(events.log) == settled

    taken = two.owned()
    started = time.monotonic()
    one.election.start()  # the same registration, electing again: node 2 offers them back after ten graces
    eventually(lambda: converged(zk, [one, two], 6), what="node 2 to hand node 1's partitions back")
    assert time.monotonic() - started > 0.5 * 10 * GRACE_MS / 1000
    assert all(one.owned()[p] > taken[p] for p in led)
    assert_never_two_owners(events)
    assert_epochs_increase(events)


def test_a_stopped_node_with_its_registration_gone_hands_over_at_once(cluster, zk, events):
    one, two = cluster(1, partitions=4), cluster(2, partitions=4)
    eventually(lambda: converged(zk, [one, two], 4), what="the preferred spread")
    one.close()
    eventually(lambda: converged(zk, [two], 4), timeout=GRACE_MS / 1000 * 0.9 + 5, what="node 2 to lead all")
    assert_never_two_owners(events)
    assert_epochs_increase(events)


def test_the_election_works_under_monkey_patching(zk_connect, zk):
    """The server process patches; the tests above do not. Two nodes in a patched child process."""
    script = textwrap.dedent(
        f"""
        from gevent import monkey
        monkey.patch_all()
        import json, time
        from zkcoord.zk.election import PartitionElection
        from zkcoord.zk.leader_znodes import read_leaders
        from zkcoord.zk.nodes import NodeRegistry
        from zkcoord.zk.session import make_kazoo_client

        nodes = []
        for node_id in (1, 2):
            client = make_kazoo_client({zk_connect!r}, {SESSION_MS})
            client.start(timeout=10)
            election = PartitionElection(client, {ROOT!r}, node_id, 4, lambda p, e: None, lambda p, e: None,
                                         claim_grace_ms={GRACE_MS})
            election.start()
            NodeRegistry(client, {ROOT!r}, node_id, "127.0.0.1", 9000 + node_id).register()
            nodes.append((client, election))
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            owned = [sorted(election.owned()) for _, election in nodes]
            if owned == [[0, 2], [1, 3]]:
                break
            time.sleep(0.02)
        print(json.dumps(owned))
        for client, election in nodes:
            election.stop()
            client.stop()
        """
    )
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=env)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[-1]) == [[0, 2], [1, 3]]
    assert read_leaders(zk, ROOT, 4) == {}  # stop() deleted the leader znodes
