"""zkcoord: Kafka consumer-group coordination from ZooKeeper (0.8.2) to broker-side, and the way between."""

__version__ = "0.1.0"
