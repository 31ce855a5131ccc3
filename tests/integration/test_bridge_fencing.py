"""The bridge's znodes on a real ZooKeeper: persistent, fenced by the bridge znode's version and the writer's
epoch, and set up and torn down atomically with the migration phase (docs/mixed-groups.md)."""

import pytest
from kazoo.client import KazooClient

from zkcoord.migration import store
from zkcoord.migration.phases import MigrationState, Phase
from zkcoord.model import TopicPartition
from zkcoord.server.bridge_zk import BridgeFenced, ClaimConflict, FencedWriter, poke_legacy_members, read_group
from zkcoord.zk import admin, layout

ROOT = layout.DEFAULT_ROOT
G = "g"
TP = TopicPartition("t", 0)


@pytest.fixture
def bridged(zk):
    """Group G in DUAL_WRITE with its bridge set up, as `migrate up --to 0001_dual_commit` leaves it."""
    admin.create_topic(zk, "t", 2)
    version = store.write_state(zk, ROOT, G, MigrationState(), store.NO_VERSION)
    dual = MigrationState().with_phase(Phase.DUAL_WRITE, 1)
    store.write_state_and_bridge(zk, ROOT, G, dual, version, "range")
    return zk


def writer(zk, epoch: int) -> FencedWriter:
    view = read_group(zk, ROOT, G)
    return FencedWriter(zk, ROOT, G, view.state, view.version, epoch)


def member(name: str) -> layout.BridgeMember:
    return layout.BridgeMember(f"{G}_zkcoord-{name}", f"member-{name}", None, ("t",))


def test_registrations_and_owner_znodes_are_persistent_and_carry_0_8_2_values(bridged):
    first = writer(bridged, 1)
    first.register(member("a"), b'{"version":1}')
    first.claim(TP, f"{G}_zkcoord-a-0")
    _, stat = bridged.get(layout.owner_path(G, "t", 0))
    assert stat.ephemeralOwner == 0 and bridged.get(layout.owner_path(G, "t", 0))[0] == b"g_zkcoord-a-0"
    assert bridged.get(layout.consumer_path(G, "g_zkcoord-a"))[1].ephemeralOwner == 0
    state = store.read_bridge(bridged, ROOT, G)
    assert state.epoch == 1 and state.consumer_ids == {"g_zkcoord-a"}


def test_a_deposed_writer_fails_once_a_newer_epoch_took_over(bridged):
    old = writer(bridged, 1)
    new = writer(bridged, 2)
    new.take_over()
    with pytest.raises(BridgeFenced):
        old.claim(TP, "g_zkcoord-a-0")
    assert not bridged.exists(layout.owner_path(G, "t", 0))
    with pytest.raises(BridgeFenced, match="newer leader"):
        writer(bridged, 1)


def test_a_claim_on_another_thread_s_partition_conflicts_and_a_release_leaves_it_alone(bridged, zk_connect):
    legacy = KazooClient(hosts=zk_connect)
    legacy.start(timeout=15)
    try:
        legacy.create(layout.owner_path(G, "t", 0), b"g_host-1-0", ephemeral=True, makepath=True)
        bridge = writer(bridged, 1)
        with pytest.raises(ClaimConflict) as conflict:
            bridge.claim(TP, "g_zkcoord-a-0")
        assert conflict.value.owner == "g_host-1-0"
        bridge.release(TP, "g_zkcoord-a-0")
        assert bridged.get(layout.owner_path(G, "t", 0))[0] == b"g_host-1-0"
    finally:
        legacy.stop()
        legacy.close()


def test_leaving_dual_write_deletes_the_bridge_s_znodes_in_the_phase_change(bridged):
    bridge = writer(bridged, 1)
    bridge.register(member("a"), b'{"version":1}')
    bridge.claim(TP, "g_zkcoord-a-0")
    bridged.create(layout.owner_path(G, "t", 1), b"g_host-1-0")
    state, version = store.read_state(bridged, ROOT, G)
    store.write_state_and_bridge(bridged, ROOT, G, state.with_phase(Phase.LOG_PRIMARY, 2), version, None)
    assert store.read_state(bridged, ROOT, G)[0].phase == Phase.LOG_PRIMARY
    assert store.read_bridge(bridged, ROOT, G) is None
    assert not bridged.exists(layout.owner_path(G, "t", 0))
    assert not bridged.exists(layout.consumer_path(G, "g_zkcoord-a"))
    assert bridged.exists(layout.owner_path(G, "t", 1))  # a legacy member's owner znode is not the bridge's
    with pytest.raises(BridgeFenced):
        bridge.claim(TP, "g_zkcoord-a-0")  # a node still bridging the group fails, it does not recreate it


def test_a_phase_change_fails_when_the_bridge_changed_since_it_was_read(bridged):
    state, version = store.read_state(bridged, ROOT, G)
    writer(bridged, 1).register(member("a"), b'{"version":1}')
    store.write_state(bridged, ROOT, G, state, version)  # someone else moved the state on meanwhile
    with pytest.raises(store.ConcurrentChangeError):
        store.write_state_and_bridge(bridged, ROOT, G, state.with_phase(Phase.ZK_ONLY, 2), version, None)
    assert store.read_bridge(bridged, ROOT, G) is not None


def test_bridge_registrations_are_not_counted_as_legacy_members_and_a_poke_leaves_nothing(bridged):
    writer(bridged, 1).register(member("a"), b'{"version":1,"subscription":{"t":1},"pattern":"static"}')
    bridged.create(layout.consumer_path(G, "g_host-1"), b'{"version":1,"subscription":{"t":1},"pattern":"static"}')
    assert [m.consumer_id for m in store.live_legacy_members(bridged, ROOT, G)] == ["g_host-1"]
    poke_legacy_members(bridged, G, "g_zkcoord-rebalance")
    assert sorted(bridged.get_children(layout.ids_path(G))) == ["g_host-1", "g_zkcoord-a"]
