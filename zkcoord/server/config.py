"""A coordinator node's settings: Kafka's property names for group, offsets, log and server settings.

One properties map (a file, then ``--override key=value``) feeds three typed configs; a property none of
them knows is logged by name and ignored, as Kafka's brokers and every zkcoord config do (docs/configuration.md),
so a broker's server.properties can be reused.
"""

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from zkcoord.config import build_config, check_values, kafka_field, kafka_names
from zkcoord.errors import ConfigError
from zkcoord.group.config import CoordinatorConfig
from zkcoord.log.config import LogConfig
from zkcoord.security.config import SecurityConfig, split_listener_overrides
from zkcoord.zk import credentials
from zkcoord.zk.credentials import ZooKeeperSecurity

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServerConfig:
    """Network, ZooKeeper and metrics settings of a node."""

    max_request_bytes: int = kafka_field("max.request.bytes", 1_048_576, "largest request frame", at_least=1)
    max_connections: int = kafka_field("max.connections", 1024, "open client connections per node", at_least=0)
    max_connections_per_ip: int = kafka_field(
        "max.connections.per.ip", 2**31 - 1, "open connections from one IP", at_least=1
    )
    max_connections_per_ip_overrides: str = kafka_field(
        "max.connections.per.ip.overrides", "", "ip:count,... per-IP exceptions to max.connections.per.ip"
    )
    connections_max_idle_ms: int = kafka_field(
        "connections.max.idle.ms", 600_000, "close after no request this long", at_least=1
    )
    request_read_timeout_ms: int = kafka_field(
        "request.read.timeout.ms", 30_000, "close when a started request frame is not all in by then", at_least=1
    )
    connection_failed_authentication_delay_ms: int = kafka_field(
        "connection.failed.authentication.delay.ms",
        100,
        "a failed authentication is answered, then closed this late",
        at_least=0,
    )
    zookeeper_session_timeout_ms: int = kafka_field("zookeeper.session.timeout.ms", 18_000, at_least=1)
    zookeeper_connection_timeout_ms: int = kafka_field("zookeeper.connection.timeout.ms", 18_000, at_least=1)
    zookeeper_set_acl: bool = kafka_field(
        "zookeeper.set.acl",
        False,
        "znodes zkcoord creates get Kafka's ACLs: creator all, world read (docs/security.md)",
    )
    login_config: str = kafka_field(
        credentials.LOGIN_CONFIG, "", "JAAS file with ZooKeeper's Client section (default: -D... in $KAFKA_OPTS)"
    )
    zookeeper_sasl_client: bool | None = kafka_field(
        credentials.SASL_CLIENT, None, "false: no SASL to ZooKeeper (default: $KAFKA_OPTS's, else true)"
    )
    zookeeper_sasl_client_config: str = kafka_field(
        credentials.SASL_CLIENT_CONFIG, "", "the JAAS section of ZooKeeper's credentials (default: Client)"
    )
    root: str = kafka_field("zkcoord.root", "/zkcoord", "zkcoord's ZooKeeper root")
    bridge_rebalance_max_retries: int = kafka_field(
        "zkcoord.bridge.rebalance.max.retries",
        4,
        "claims of a mixed group's handover tried this often (0.8.2's)",
        at_least=1,
    )
    bridge_rebalance_backoff_ms: int = kafka_field(
        "zkcoord.bridge.rebalance.backoff.ms",
        2000,
        "wait between claims of a mixed group's handover (0.8.2's)",
        at_least=0,
    )
    bridge_release_grace_ms: int = kafka_field(
        "zkcoord.bridge.release.grace.ms",
        5000,
        "a mixed group's member gone from the group keeps its partitions this long",
        at_least=0,
    )
    bridge_check_interval_ms: int = kafka_field(
        "zkcoord.bridge.check.interval.ms", 500, "how often a node checks its mixed groups' legacy members", at_least=1
    )
    claim_grace_ms: int = kafka_field(
        "coordinator.claim.grace.ms", 1000, "wait before a non-preferred node claims", at_least=0
    )
    shutdown_timeout_ms: int = kafka_field(
        "controlled.shutdown.timeout.ms", 10_000, "graceful shutdown bound", at_least=0
    )
    load_retry_backoff_ms: int = kafka_field(
        "coordinator.load.retry.backoff.ms",
        5000,
        "wait before loading a partition again after a failed load",
        at_least=0,
    )
    load_max_attempts: int = kafka_field(
        "coordinator.load.max.attempts", 3, "failed loads of a partition before the node resigns it", at_least=1
    )
    listeners: str = kafka_field("listeners", "", "NAME://host:port of the Kafka listener (none: not served)")
    advertised_listeners: str = kafka_field("advertised.listeners", "", "NAME://host:port told to clients")
    socket_request_max_bytes: int = kafka_field(
        "socket.request.max.bytes", 104_857_600, "largest request frame on the Kafka listener", at_least=1
    )
    gateway_port_range: str = kafka_field(
        "zkcoord.gateway.port.range", "", "START-END: one port per upstream broker id (default: 8 after the Kafka port)"
    )
    gateway_lowest_broker_id: int = kafka_field(
        "zkcoord.gateway.lowest.broker.id", 0, "the upstream broker id served at the range's first port", at_least=0
    )
    gateway_coordinator_id_base: int = kafka_field(
        "zkcoord.gateway.coordinator.id.base",
        1_000_000_000,
        "Kafka node id of coordinator node 0 (not a broker's)",
        at_least=0,
    )
    gateway_probe_interval_ms: int = kafka_field(
        "zkcoord.gateway.probe.interval.ms",
        1000,
        "probe the other nodes' Kafka listeners this often (0: never)",
        at_least=0,
    )
    gateway_upstream_timeout_ms: int = kafka_field(
        "zkcoord.gateway.upstream.timeout.ms", 5000, "connecting to an upstream broker gives up after this", at_least=1
    )

    def __post_init__(self) -> None:
        check_values(self)
        self.per_ip_overrides()

    def zookeeper_security(self) -> ZooKeeperSecurity:
        """The node's ZooKeeper credentials and ACL setting; the JAAS properties not given come from $KAFKA_OPTS."""
        given = {
            credentials.LOGIN_CONFIG: self.login_config,
            credentials.SASL_CLIENT: None if self.zookeeper_sasl_client is None else str(self.zookeeper_sasl_client),
            credentials.SASL_CLIENT_CONFIG: self.zookeeper_sasl_client_config,
        }
        return credentials.zookeeper_security(given, set_acl=self.zookeeper_set_acl)

    def kafka_listener(self, kafka_port: int | None) -> "KafkaListenerSettings | None":
        """Where the Kafka listener binds and what it advertises (``kafka_port``, e.g. ``--kafka-port``, replaces
        the port of ``listeners``); None when neither asks for one."""
        if kafka_port is None and not self.listeners:
            return None
        name, host, port = _listener("listeners", self.listeners or "PLAINTEXT://127.0.0.1:9092")
        port = port if kafka_port is None else kafka_port
        advertised = None
        if self.advertised_listeners:
            advertised_name, *advertised = _listener("advertised.listeners", self.advertised_listeners)
            if advertised_name != name:
                raise ConfigError(f"advertised.listeners: {advertised_name} is not the listener {name} of listeners")
        if self.gateway_port_range:
            start, _, end = self.gateway_port_range.partition("-")
            if not (start.strip().isdigit() and end.strip().isdigit() and 0 < int(start) <= int(end) <= 65535):
                raise ConfigError(f"zkcoord.gateway.port.range: {self.gateway_port_range!r} is not START-END")
            first, last = int(start), int(end)
        elif port:
            first, last = port + 1, port + 8
        else:
            raise ConfigError("zkcoord.gateway.port.range must be given when the Kafka port is 0 (any free port)")
        if last > 65535:
            raise ConfigError(f"zkcoord.gateway.port.range: {first}-{last} goes past port 65535; give a range")
        if first <= port <= last:
            raise ConfigError(f"zkcoord.gateway.port.range: {first}-{last} holds the Kafka port {port}")
        return KafkaListenerSettings(
            name, host, port, advertised and tuple(advertised), first, last, self.gateway_lowest_broker_id
        )

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
class KafkaListenerSettings:
    """The Kafka listener's name, bind address, advertised address (None: the bound one) and gateway ports."""

    name: str
    host: str
    port: int
    advertised: tuple[str, int] | None
    gateway_first_port: int
    gateway_last_port: int
    lowest_broker_id: int

    def gateway_ports(self) -> dict[int, int]:
        """Gateway port → the upstream broker id it fronts."""
        return {
            port: self.lowest_broker_id + port - self.gateway_first_port
            for port in range(self.gateway_first_port, self.gateway_last_port + 1)
        }


def _listener(name: str, value: str) -> tuple[str, str, int]:
    """``(listener name, host, port)`` of one ``NAME://host:port`` listener; ConfigError for anything else."""
    if "," in value:
        raise ConfigError(f"{name}: one Kafka listener is served, got {value!r}")
    listener, separator, address = value.strip().partition("://")
    host, _, port = address.rpartition(":")
    if not separator or not listener or not port.isdigit() or int(port) > 65535:
        raise ConfigError(f"{name}: {value!r} is not NAME://host:port")
    return listener.upper(), host.strip("[]") or "0.0.0.0", int(port)


@dataclass(frozen=True)
class NodeConfig:
    coordinator: CoordinatorConfig
    log: LogConfig
    server: ServerConfig
    security: SecurityConfig = SecurityConfig()


_CONFIG_CLASSES = (
    ("coordinator", CoordinatorConfig),
    ("log", LogConfig),
    ("server", ServerConfig),
    ("security", SecurityConfig),
)


def node_config(properties: Mapping[str, object]) -> NodeConfig:
    """Split Kafka-named (or snake_case) properties among the node's configs; unknown names are logged, ignored."""
    parts: dict[str, dict[str, object]] = {name: {} for name, _ in _CONFIG_CLASSES}
    properties, parts["security"]["listener_overrides"] = split_listener_overrides(properties)
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
