"""Kafka 0.8.2's ZooKeeper consumer group protocol: a member that runs beside JVM members."""

from zkcoord.legacy.consumer import LegacyConsumer, RebalanceListener

__all__ = ["LegacyConsumer", "RebalanceListener"]
