"""The compacted offsets log: segment files of CRC-framed batches, recovery, the cleaner and the loader.

docs/offsets-log.md describes the on-disk format and the durability policies.
"""

from zkcoord.log.config import LogConfig
from zkcoord.log.format import Batch, LogFormatError
from zkcoord.log.partition import AppendResult, PartitionLog, RecoveryReport

__all__ = ["AppendResult", "Batch", "LogConfig", "LogFormatError", "PartitionLog", "RecoveryReport"]
