"""Transitional: the coordinator's ZooKeeper metadata moved to :mod:`zkcoord.zk.nodes` (node registrations)
and :mod:`zkcoord.zk.election` (the partition count and each offsets partition's leader with its epoch).

Re-exports the names that ``zkcoord.server`` and ``zkcoord.client.bootstrap`` still import from here; remove
once they import from the two modules.
"""

from zkcoord.zk.election import PartitionElection, ensure_partition_count, read_leaders
from zkcoord.zk.nodes import NodeRegistry, read_nodes

__all__ = ["NodeRegistry", "PartitionElection", "ensure_partition_count", "read_leaders", "read_nodes"]
