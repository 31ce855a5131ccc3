"""Looking for a group before migrating it and forgetting its migration state (zkcoord.migration.presence)."""

import pytest

from zkcoord.migration import presence, store
from zkcoord.migration.phases import MigrationState, Phase
from zkcoord.zk import layout

ROOT = layout.DEFAULT_ROOT
DUAL_COMMIT = "0001_dual_commit"


class NoNodes:
    """A channel with no coordinator node registered."""

    def addresses(self):
        return []


def test_forget_deletes_only_the_state_that_was_checked(zk):
    store.write_state(zk, ROOT, "g", MigrationState(Phase.ZK_ONLY, 4), store.NO_VERSION)
    zk.create("/consumers/g/offsets/orders/0", b"10", makepath=True)
    found = presence.find_group(zk, NoNodes(), ROOT, "g")
    assert presence.forget_refusals(found) == []  # ZK_ONLY, nothing applied: safe to forget
    # meanwhile another operator walks the group up: forgetting it now would send its readers back to ZooKeeper
    state, version = store.read_state(zk, ROOT, "g")
    moved = state.begin(DUAL_COMMIT, "up", 1).with_phase(Phase.DUAL_WRITE, 1).finish(DUAL_COMMIT, "up", 1)
    store.write_state(zk, ROOT, "g", moved, version)

    with pytest.raises(store.ConcurrentChangeError, match="changed since it was checked"):
        presence.forget(zk, ROOT, "g", found.version)
    assert store.read_state(zk, ROOT, "g")[0] == moved

    presence.forget(zk, ROOT, "g", presence.find_group(zk, NoNodes(), ROOT, "g").version)
    assert store.read_state(zk, ROOT, "g") == (None, store.NO_VERSION)
