"""A coordinator node's settings: Kafka's property names for group, offsets, log and server settings.

One properties map (a file, then ``--override key=value``) feeds three typed configs; a property none of
them knows is logged by name and ignored, as Kafka's brokers and every zkcoord config do (docs/configuration.md),
so a broker's server.properties can be reused.
"""

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from zkcoord.config import build_config, kafka_field, kafka_names
from zkcoord.group.config import CoordinatorConfig
from zkcoord.log.config import LogConfig

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServerConfig:
    """Network, ZooKeeper and metrics settings of a node."""

    max_request_bytes: int = kafka_field("max.request.bytes", 1_048_576, "largest request frame")
    max_connections: int = kafka_field("max.connections", 1024, "open client connections per node")
    zookeeper_session_timeout_ms: int = kafka_field("zookeeper.session.timeout.ms", 18_000)
    zookeeper_connection_timeout_ms: int = kafka_field("zookeeper.connection.timeout.ms", 18_000)
    root: str = kafka_field("zkcoord.root", "/zkcoord", "zkcoord's ZooKeeper root")
    claim_grace_ms: int = kafka_field("coordinator.claim.grace.ms", 1000, "wait before a non-preferred node claims")
    shutdown_timeout_ms: int = kafka_field("controlled.shutdown.timeout.ms", 10_000, "graceful shutdown bound")


@dataclass(frozen=True)
class NodeConfig:
    coordinator: CoordinatorConfig
    log: LogConfig
    server: ServerConfig


_CONFIG_CLASSES = (("coordinator", CoordinatorConfig), ("log", LogConfig), ("server", ServerConfig))


def node_config(properties: Mapping[str, object]) -> NodeConfig:
    """Split Kafka-named (or snake_case) properties among the node's configs; unknown names are logged, ignored."""
    parts: dict[str, dict[str, object]] = {name: {} for name, _ in _CONFIG_CLASSES}
    unknown = []
    for key, value in properties.items():
        for name, cls in _CONFIG_CLASSES:
            names = kafka_names(cls)
            if key in names or key in names.values() or key.replace("_", ".") in names:
                parts[name][key] = value
                break
        else:
            unknown.append(key)
    for key in sorted(unknown):
        log.warning("property %s is not used by a coordinator node; ignored", key)
    return NodeConfig(**{name: build_config(cls, parts[name]) for name, cls in _CONFIG_CLASSES})


def known_properties() -> list[str]:
    """Every Kafka property name a node accepts."""
    return sorted(name for _, cls in _CONFIG_CLASSES for name in kafka_names(cls))
