"""FindCoordinator and Metadata answered from a snapshot of ZooKeeper (runtime/cluster.py's CachedCluster):
Kafka's COORDINATOR_NOT_AVAILABLE whenever the answer is not known, never a generic error."""

from zkcoord.errors import ErrorCode
from zkcoord.runtime.cluster import CachedCluster, ClusterSnapshot, cluster_response
from zkcoord.wire import messages as m

NODES = {1: ("10.0.0.1", 9001), 2: ("10.0.0.2", 9002), 3: ("10.0.0.3", 9003)}
LEADERS = {0: 1, 1: 2, 2: 3, 3: 1}
GARBLED = "cannot decode /zkcoord/nodes/2: not JSON"


def find(cluster: CachedCluster, partition: int) -> m.FindCoordinatorResponse:
    request = m.FindCoordinatorRequest(key=f"group-of-{partition}", key_type=0)
    return cluster_response(request, cluster, lambda group: int(group.rsplit("-", 1)[1]), {})


def answers(cluster: CachedCluster, partitions=range(5)) -> dict[int, tuple[int, int]]:
    found = {p: find(cluster, p) for p in partitions}
    return {p: (response.error_code, response.node_id) for p, response in found.items()}


def test_a_current_snapshot_names_each_partitions_leader_and_15_for_a_leaderless_one():
    cluster = CachedCluster(ClusterSnapshot(NODES, LEADERS, current=True))
    assert answers(cluster) == {
        0: (0, 1),
        1: (0, 2),
        2: (0, 3),
        3: (0, 1),
        4: (ErrorCode.COORDINATOR_NOT_AVAILABLE, -1),
    }
    assert find(cluster, 1) == m.FindCoordinatorResponse(error_code=0, node_id=2, host="10.0.0.2", port=9002)


def test_a_snapshot_that_is_not_current_answers_15_for_every_partition_but_keeps_its_brokers():
    cluster = CachedCluster(ClusterSnapshot(NODES, LEADERS, current=False))
    assert {code for code, _ in answers(cluster).values()} == {ErrorCode.COORDINATOR_NOT_AVAILABLE}
    metadata = cluster_response(m.MetadataRequest(topics=None), cluster, lambda group: 0, {})
    assert [broker.node_id for broker in metadata.nodes] == [1, 2, 3]


def test_the_empty_snapshot_of_a_node_that_has_not_read_zookeeper_yet_knows_nothing():
    cluster = CachedCluster(ClusterSnapshot())
    assert set(answers(cluster).values()) == {(ErrorCode.COORDINATOR_NOT_AVAILABLE, -1)}
    assert cluster.brokers() == ()


def test_a_garbled_registration_blocks_only_the_partitions_its_node_leads():
    cluster = CachedCluster(ClusterSnapshot({**NODES, 2: GARBLED}, LEADERS, current=True))
    assert answers(cluster, range(4)) == {0: (0, 1), 1: (ErrorCode.COORDINATOR_NOT_AVAILABLE, -1), 2: (0, 3), 3: (0, 1)}
    assert [broker.node_id for broker in cluster.brokers()] == [1, 3]
    assert cluster.unreadable_leaders() == {2: (GARBLED, (1,))}


def test_a_leader_without_a_registration_is_not_a_coordinator():
    cluster = CachedCluster(ClusterSnapshot({1: NODES[1]}, LEADERS, current=True))
    assert answers(cluster, range(4)) == {
        0: (0, 1),
        1: (ErrorCode.COORDINATOR_NOT_AVAILABLE, -1),
        2: (ErrorCode.COORDINATOR_NOT_AVAILABLE, -1),
        3: (0, 1),
    }
    assert cluster.unreadable_leaders() == {}
