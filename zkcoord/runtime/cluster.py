"""The requests every node answers about the cluster itself: ApiVersions, FindCoordinator and Metadata.

One place for both the node and the test harness: each hands in its view of the cluster (who leads which
offsets partition, which brokers exist); the answers are built here.

Pure: imports only zkcoord.wire and zkcoord.errors.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from zkcoord.errors import ErrorCode
from zkcoord.wire import messages as m
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
    partitions, and 3 UNKNOWN_TOPIC_OR_PARTITION for a topic not in ``topics`` (name → partition count)."""
    names = sorted(topics) if requested is None else requested
    return m.MetadataResponse(
        nodes=tuple(brokers),
        topics=tuple(
            m.MetadataResponseTopic(
                name=name,
                error_code=ErrorCode.NONE if name in topics else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                partitions=tuple(
                    m.MetadataResponsePartition(partition_index=index, error_code=ErrorCode.NONE)
                    for index in range(topics.get(name, 0))
                ),
            )
            for name in names
        ),
    )
