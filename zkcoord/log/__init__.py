"""The compacted offsets log: segment files of CRC-framed batches, recovery, the cleaner and the loader.

docs/offsets-log.md describes the on-disk format and the durability policies. The readers (``format``,
``segment``, ``swap``, ``config``) are pure; ``PartitionLog`` and what comes with it (gevent) are imported
only when asked for, so that Spark jobs can decode segments without gevent in their process.
"""

from zkcoord.log.config import LogConfig
from zkcoord.log.format import Batch, LogFormatError

__all__ = ["AppendResult", "Batch", "LogConfig", "LogFormatError", "PartitionLog", "RecoveryReport"]
_FROM_PARTITION = ("AppendResult", "PartitionLog", "RecoveryReport")


def __getattr__(name: str):
    if name in _FROM_PARTITION:
        from zkcoord.log import partition

        return getattr(partition, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
