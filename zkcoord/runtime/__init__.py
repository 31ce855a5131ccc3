"""The coordinator runtime that the node and the test harness share: effects carried out, timers, the log."""

from zkcoord.runtime.logs import LogWriter, MemoryLog
from zkcoord.runtime.runtime import CoordinatorRuntime, RequestSteps

__all__ = ["CoordinatorRuntime", "LogWriter", "MemoryLog", "RequestSteps"]
