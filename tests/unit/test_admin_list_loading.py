"""A coordinator node still loading its groups at the deadline is named as unreachable by ``groups list``, never
listed as if it held only the groups it had loaded."""

from zkcoord.admin import AdminClient
from zkcoord.errors import ErrorCode


class StillLoading:
    """A channel to one node that answers ListGroups with COORDINATOR_LOAD_IN_PROGRESS and one group loaded; its
    deadline has passed, so nothing waits."""

    request_timeout_ms = 1

    def call_any_node(self, api, **fields):
        assert api == "Metadata"
        return {"nodes": [{"node_id": 1, "host": "127.0.0.1", "port": 1}]}

    def call(self, address, api, **fields):
        assert api == "ListGroups"
        loaded = {"group_id": "loaded", "group_state": "Empty", "protocol_type": "consumer"}
        return {"error_code": ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, "groups": [loaded]}

    def deadline(self):
        return 0.0

    def backoff(self, previous=None):
        return 0.05

    def close(self):
        pass


def test_a_node_still_loading_at_the_deadline_is_unreachable():
    with AdminClient(bootstrap_servers="127.0.0.1:1", request_timeout_ms=1) as client:
        client._coordinators._channel = StillLoading()
        overview = client.list_groups()
    assert len(overview.unreachable) == 1 and "still loading after" in overview.unreachable[0]
    assert "127.0.0.1:1" in overview.unreachable[0]
