"""Looking for a group before migrating it and forgetting its migration state (zkcoord.migration.presence)."""

import pytest

from zkcoord.channel import CoordinatorChannel
from zkcoord.cli import main
from zkcoord.errors import CoordinatorNotAvailableError, ErrorCode, error_for
from zkcoord.migration import presence, store
from zkcoord.migration.phases import MigrationState, Phase
from zkcoord.zk import layout

ROOT = layout.DEFAULT_ROOT
DUAL_COMMIT = "0001_dual_commit"


class NoNodes:
    """A channel with no coordinator node registered."""

    def addresses(self):
        return []


class LoadingNode(CoordinatorChannel):
    """One coordinator that first answers DescribeGroups with the group's COORDINATOR_LOAD_IN_PROGRESS (as a node
    does right after it took the group's offsets partition), then with the group."""

    def __init__(self):
        super().__init__(
            lambda: [("127.0.0.1", 1)], "t", 2000, unavailable=CoordinatorNotAvailableError, error_for=error_for
        )
        self.describes = 0

    def find_coordinator(self, group_id, deadline):
        return 1, ("127.0.0.1", 1)

    def call(self, address, api, **fields):
        if api == "DescribeGroups":
            self.describes += 1
            code = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self.describes == 1 else 0
            return {"groups": [{"error_code": code, "group_id": fields["groups"][0], "group_state": "Empty"}]}
        assert api == "OffsetFetch"
        partitions = [{"partition_index": 0, "committed_offset": 5, "error_code": 0}]
        return {"error_code": 0, "topics": [{"name": "orders", "partitions": partitions}]}


def test_a_loading_coordinator_is_asked_again(zk):
    channel = LoadingNode()
    found = presence.find_group(zk, channel, ROOT, "g")
    assert (channel.describes, found.coordinator_record, found.log_offsets, found.exists) == (2, True, 1, True)


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


def test_offsets_that_are_not_offsets_are_still_the_group(zk, zk_connect, capsys):
    zk.create("/consumers/g/offsets/orders/0", b"not an offset", makepath=True)
    found = presence.find_group(zk, NoNodes(), ROOT, "g")
    assert found.exists and (found.zookeeper_offsets, found.unreadable_offsets) == (1, 1)
    assert "1 ZooKeeper offset znode(s) under /consumers/g/offsets hold data that is not an offset" in (
        presence.unreadable_warning(found)
    )
    assert main(["migrate", "forget", "--group", "g", "--zookeeper", zk_connect, "--timeout", "500"]) == 0
    assert "WARN: group g: 1 ZooKeeper offset znode(s)" in capsys.readouterr().err
