"""A coordinator node's settings: Kafka's property names for group, offsets, log and server settings.

One properties map (a file, then ``--override key=value``) feeds three typed configs; a property none of
them knows is logged by name and ignored, as Kafka's brokers and every zkcoord config do (docs/configuration.md),
so a broker's server.properties can be reused.
"""

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from zkcoord.config import build_config, kafka_field, kafka_names
from zkcoord.errors import ConfigError
from zkcoord.group.config import CoordinatorConfig
from zkcoord.log.config import LogConfig

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServerConfig:
    """Network, ZooKeeper and metrics settings of a node."""

    max_request_bytes: int = kafka_field("max.request.bytes", 1_048_576, "largest request frame")
    max_connections: int = kafka_field("max.connections", 1024, "open client connections per node")
    max_connections_per_ip: int = kafka_field("max.connections.per.ip", 2**31 - 1, "open connections from one IP")
    max_connections_per_ip_overrides: str = kafka_field(
        "max.connections.per.ip.overrides", "", "ip:count,... per-IP exceptions to max.connections.per.ip"
    )
    connections_max_idle_ms: int = kafka_field("connections.max.idle.ms", 600_000, "close after no request this long")
    request_read_timeout_ms: int = kafka_field(
        "request.read.timeout.ms", 30_000, "close when a started request frame is not all in by then"
    )
    zookeeper_session_timeout_ms: int = kafka_field("zookeeper.session.timeout.ms", 18_000)
    zookeeper_connection_timeout_ms: int = kafka_field("zookeeper.connection.timeout.ms", 18_000)
    root: str = kafka_field("zkcoord.root", "/zkcoord", "zkcoord's ZooKeeper root")
    claim_grace_ms: int = kafka_field("coordinator.claim.grace.ms", 1000, "wait before a non-preferred node claims")
    shutdown_timeout_ms: int = kafka_field("controlled.shutdown.timeout.ms", 10_000, "graceful shutdown bound")
    load_retry_backoff_ms: int = kafka_field(
        "coordinator.load.retry.backoff.ms", 5000, "wait before loading a partition again after a failed load"
    )
    load_max_attempts: int = kafka_field(
        "coordinator.load.max.attempts", 3, "failed loads of a partition before the node resigns it"
    )

    def __post_init__(self) -> None:
        for name in ("max.connections.per.ip", "connections.max.idle.ms", "request.read.timeout.ms"):
            value = getattr(self, kafka_names(ServerConfig)[name])
            if type(value) is not int or value < 1:
                raise ConfigError(f"{name}: must be a positive int, got {value!r}")
        self.per_ip_overrides()

    def per_ip_overrides(self) -> dict[str, int]:
        """``max.connections.per.ip.overrides`` as {ip: bound}, written as Kafka's ``ip:count,ip:count``."""
        overrides = {}
        for item in filter(None, (text.strip() for text in self.max_connections_per_ip_overrides.split(","))):
            ip, _, count = item.rpartition(":")
            if not ip or not count.strip().isdigit():
                raise ConfigError(f"max.connections.per.ip.overrides: {item!r} is not ip:count")
            overrides[ip.strip()] = int(count)
        return overrides


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
