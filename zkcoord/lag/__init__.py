"""Consumer lag evaluated as Burrow does (docs/lag.md): the pure evaluator and the windows it reads.

Pure: no IO, no clock; the caller passes ``now_ms``.
"""

from zkcoord.lag.evaluator import (
    Commit,
    GroupLag,
    GroupStatus,
    PartitionLag,
    PartitionStatus,
    PartitionWindow,
    WindowConfig,
    evaluate_group,
    group_status,
    partition_status,
)
from zkcoord.lag.windows import LagWindows, PartitionObservation

__all__ = [
    "Commit",
    "GroupLag",
    "GroupStatus",
    "LagWindows",
    "PartitionLag",
    "PartitionObservation",
    "PartitionStatus",
    "PartitionWindow",
    "WindowConfig",
    "evaluate_group",
    "group_status",
    "partition_status",
]
