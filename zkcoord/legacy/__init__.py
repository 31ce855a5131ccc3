"""Kafka 0.8.2's ZooKeeper consumer group protocol: a member that runs beside JVM members."""

from zkcoord.legacy.consumer import LegacyConsumer, RebalanceListener
from zkcoord.legacy.trace import JsonLinesTraceWriter, read_trace

__all__ = ["JsonLinesTraceWriter", "LegacyConsumer", "RebalanceListener", "read_trace"]
