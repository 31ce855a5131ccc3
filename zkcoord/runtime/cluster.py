"""The requests every node answers about the cluster itself: ApiVersions, FindCoordinator and Metadata.

One place for both the node and the test harness: each hands in its view of the cluster (who leads which
offsets partition, which brokers exist); the answers are built here. :class:`CachedCluster` is the node's
view: the answers of one :class:`ClusterSnapshot` of ZooKeeper, computed once per change, so a request reads
no ZooKeeper.

Pure: imports only zkcoord.wire and zkcoord.errors.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from zkcoord.errors import ErrorCode
from zkcoord.wire import messages as m
from zkcoord.wire.limits import legal_topic_name
from zkcoord.wire.requests import SUPPORTED_APIS

API_VERSIONS = tuple(
    m.ApiVersion(api=api, min_version=low, max_version=high) for api, (low, high) in SUPPORTED_APIS.items()
)
_NO_COORDINATOR = m.FindCoordinatorResponse(
    error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, node_id=-1, host="", port=-1
)


class ClusterView(Protocol):
    """What a node knows of its cluster."""

    def brokers(self) -> Sequence[m.MetadataResponseBroker]:
        """Every live node, by node id."""

    def coordinator(self, partition: int) -> m.MetadataResponseBroker | None:
        """The live node that leads offsets partition ``partition``, or None."""


@dataclass(frozen=True)
class ClusterSnapshot:
    """What a node last read of its cluster in ZooKeeper, and whether it may answer from it.

    ``nodes`` maps each registered node id to its ``(host, port)``, or to the reason its registration cannot
    be read; ``leaders`` maps each offsets partition with a readable leader znode to the leader's node id.
    ``current`` is False while the node's own session is suspended or lost and until everything has been read
    again after it reconnected: the snapshot may be stale then.
    """

    nodes: Mapping[int, tuple[str, int] | str] = field(default_factory=dict)
    leaders: Mapping[int, int] = field(default_factory=dict)
    current: bool = False


class CachedCluster:
    """The :class:`ClusterView` of one snapshot: FindCoordinator and Metadata answered without ZooKeeper.

    A partition has a coordinator only while the snapshot is current and its leader is registered readably;
    otherwise FindCoordinator answers 15 COORDINATOR_NOT_AVAILABLE. Metadata lists the readable registrations
    even while the snapshot is not current, as Kafka answers it from its metadata cache.
    """

    def __init__(self, snapshot: ClusterSnapshot):
        self.snapshot = snapshot
        self._brokers = tuple(
            m.MetadataResponseBroker(node_id=node_id, host=address[0], port=address[1])
            for node_id, address in sorted(snapshot.nodes.items())
            if not isinstance(address, str)
        )
        by_id = {broker.node_id: broker for broker in self._brokers}
        self._coordinators = (
            {partition: by_id[node] for partition, node in snapshot.leaders.items() if node in by_id}
            if snapshot.current
            else {}
        )

    def brokers(self) -> Sequence[m.MetadataResponseBroker]:
        return self._brokers

    def coordinator(self, partition: int) -> m.MetadataResponseBroker | None:
        return self._coordinators.get(partition)

    def unreadable_leaders(self) -> dict[int, tuple[str, tuple[int, ...]]]:
        """``{node_id: (reason, partitions it leads)}`` for each node whose registration cannot be read."""
        return {
            node_id: (reason, tuple(sorted(p for p, leader in self.snapshot.leaders.items() if leader == node_id)))
            for node_id, reason in sorted(self.snapshot.nodes.items())
            if isinstance(reason, str)
        }


def cluster_response(
    request: m.ClusterRequest, cluster: ClusterView, partition_for, topics: Mapping[str, int]
) -> m.Response:
    """The answer to ``request``; ``partition_for(group_id)`` places a group, ``topics`` maps name → partitions."""
    if type(request) is m.ApiVersionsRequest:
        return m.ApiVersionsResponse(error_code=ErrorCode.NONE, apis=API_VERSIONS)
    if type(request) is m.FindCoordinatorRequest:
        broker = cluster.coordinator(partition_for(request.key))
        if broker is None:
            return _NO_COORDINATOR
        return m.FindCoordinatorResponse(
            error_code=ErrorCode.NONE, node_id=broker.node_id, host=broker.host, port=broker.port
        )
    return metadata_response(cluster.brokers(), topics, request.topics)


def metadata_response(
    brokers: Sequence[m.MetadataResponseBroker], topics: Mapping[str, int], requested: Sequence[str] | None
) -> m.MetadataResponse:
    """Metadata's answer (wire-protocol §3): ``brokers`` as given, each requested topic (None: all) with its
    partitions, 3 UNKNOWN_TOPIC_OR_PARTITION for a topic not in ``topics`` (name → partition count) and 17
    INVALID_TOPIC_EXCEPTION for a name Kafka would not accept."""
    names = sorted(topics) if requested is None else requested
    return m.MetadataResponse(
        nodes=tuple(brokers),
        topics=tuple(
            m.MetadataResponseTopic(
                name=name,
                error_code=_topic_error(name, topics),
                partitions=tuple(
                    m.MetadataResponsePartition(partition_index=index, error_code=ErrorCode.NONE)
                    for index in range(topics.get(name, 0))
                ),
            )
            for name in names
        ),
    )


def _topic_error(name: str, topics: Mapping[str, int]) -> ErrorCode:
    if name in topics:
        return ErrorCode.NONE
    return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if legal_topic_name(name) else ErrorCode.INVALID_TOPIC_EXCEPTION
