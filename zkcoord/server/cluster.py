"""The node's view of its cluster for FindCoordinator and Metadata: ZooKeeper's registrations and partition
leaders as :class:`~zkcoord.zk.cluster_watch.ClusterWatch` keeps them, answered through
:class:`~zkcoord.runtime.cluster.CachedCluster`, rebuilt on each change, so no request reads ZooKeeper.

IO: kazoo (through the watch). Expects the node's gevent hub.
"""

from __future__ import annotations

import logging

from kazoo.client import KazooClient

from zkcoord.runtime.cluster import CachedCluster, ClusterSnapshot
from zkcoord.wire.messages import MetadataResponseBroker
from zkcoord.zk.cluster_watch import ClusterWatch
from zkcoord.zk.election import PartitionElection
from zkcoord.zk.layout import KafkaListenerAddress
from zkcoord.zk.nodes import NodeRegistry

log = logging.getLogger(__name__)


class ZooKeeperCluster:
    """The cluster as the node's ZooKeeper watches have it; answers 15 until :meth:`watch` has read it."""

    def __init__(self):
        self.registry: NodeRegistry | None = None
        self.election: PartitionElection | None = None
        self._watch: ClusterWatch | None = None
        self._answers = CachedCluster(ClusterSnapshot())

    def watch(self, client: KazooClient, root: str, num_partitions: int, own_registration: tuple[int, bytes]) -> None:
        """Start following ZooKeeper; ``own_registration`` is this node's id and the data it registers with."""
        self._watch = ClusterWatch(client, root, num_partitions, self._on_change, own_registration=own_registration)
        self._watch.start()

    def stop(self) -> None:
        if self._watch is not None:
            self._watch.stop()
        self._answers = CachedCluster(ClusterSnapshot())

    @property
    def current(self) -> bool:
        """Whether the answers come from a view ZooKeeper has confirmed since the last interruption."""
        return self._watch is not None and self._watch.current

    def kafka_listeners(self) -> dict[int, KafkaListenerAddress]:
        """The Kafka listener of each registered node that has one (readable registrations only)."""
        return dict(self._watch.kafka_listeners) if self._watch is not None else {}

    def brokers(self) -> tuple[MetadataResponseBroker, ...]:
        return self._answers.brokers()

    def coordinator(self, partition: int) -> MetadataResponseBroker | None:
        return self._answers.coordinator(partition)

    def _on_change(self) -> None:
        watch = self._watch
        before = self._answers.unreadable_leaders()
        self._answers = CachedCluster(ClusterSnapshot(dict(watch.nodes), dict(watch.leaders), watch.current))
        after = self._answers.unreadable_leaders()
        for node_id, (reason, partitions) in after.items():
            if before.get(node_id) != (reason, partitions):
                log.warning(
                    "FindCoordinator answers COORDINATOR_NOT_AVAILABLE for the partitions of a node whose "
                    "registration cannot be read node=%d partitions=%s error=%s",
                    node_id,
                    list(partitions),
                    reason,
                )
