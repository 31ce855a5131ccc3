"""The compacted offsets log: segment files of CRC-framed batches, recovery, the cleaner and the loader.

docs/offsets-log.md describes the on-disk format and the durability policies. The readers (``format``,
``segment``, ``swap``, ``config``) are pure; ``PartitionLog`` and what comes with it (gevent) are imported
only when asked for, so that Spark jobs can decode segments without gevent in their process.
"""

import importlib

from zkcoord.log.config import LogConfig
from zkcoord.log.format import Batch, LogFormatError

__all__ = ["AppendResult", "Batch", "LogConfig", "LogFormatError", "PartitionLog", "RecoveryReport"]
_LAZY_MODULES = {"AppendResult": "appender", "PartitionLog": "partition", "RecoveryReport": "recovery"}


def __getattr__(name: str):
    if name in _LAZY_MODULES:
        return getattr(importlib.import_module(f"zkcoord.log.{_LAZY_MODULES[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
