"""The 0.8.2 high-level consumer's configuration (legacy-zk-protocol.md §7), with its defaults."""

import re
from dataclasses import dataclass

from zkcoord import env
from zkcoord.config import check_values, kafka_field, parse_bootstrap_servers
from zkcoord.errors import ConfigError
from zkcoord.security.client import ClientSecurityProperties
from zkcoord.zk.layout import DEFAULT_ROOT, is_legal_name

OFFSETS_STORAGE_ZOOKEEPER = "zookeeper"
OFFSETS_STORAGE_KAFKA = "kafka"  # the coordinator's offsets log, reached over the wire protocol
AUTO_OFFSET_RESET_SMALLEST = "smallest"
AUTO_OFFSET_RESET_LARGEST = "largest"
STRATEGY_RANGE, STRATEGY_ROUNDROBIN = "range", "roundrobin"


@dataclass(frozen=True)
class LegacyConsumerConfig(ClientSecurityProperties):
    """0.8.2's settings, and the client security settings (``security.protocol``, ``sasl.*``, ``ssl.*``) that its
    log commits and fetches use towards coordinator nodes."""

    group_id: str = kafka_field("group.id", doc="consumer group; Kafka's legal characters")
    zookeeper_connect: str = kafka_field(
        "zookeeper.connect", "", "host:port[,host:port][/chroot]; defaults to $ZKCOORD_ZK_CONNECT"
    )
    consumer_id: str | None = kafka_field("consumer.id", None, "fixed id suffix; generated when unset (§2.1)")
    client_id: str | None = kafka_field("client.id", None, "defaults to group.id")
    zookeeper_session_timeout_ms: int = kafka_field("zookeeper.session.timeout.ms", 6000, at_least=1)
    zookeeper_connection_timeout_ms: int | None = kafka_field(
        "zookeeper.connection.timeout.ms", None, "defaults to the session timeout", at_least=1
    )
    zookeeper_sync_time_ms: int = kafka_field("zookeeper.sync.time.ms", 2000, at_least=0)
    rebalance_max_retries: int = kafka_field("rebalance.max.retries", 4, "total attempts per rebalance", at_least=1)
    rebalance_backoff_ms: int | None = kafka_field(
        "rebalance.backoff.ms", None, "sleep after a failed attempt; defaults to zookeeper.sync.time.ms", at_least=0
    )
    partition_assignment_strategy: str = kafka_field(
        "partition.assignment.strategy",
        STRATEGY_RANGE,
        "range or roundrobin; anything else is refused (0.8.2 falls back to range)",
        choices=(STRATEGY_RANGE, STRATEGY_ROUNDROBIN),
    )
    auto_commit_enable: bool = kafka_field("auto.commit.enable", True)
    auto_commit_interval_ms: int = kafka_field("auto.commit.interval.ms", 60000, at_least=1)
    exclude_internal_topics: bool = kafka_field("exclude.internal.topics", True)
    offsets_storage: str = kafka_field(
        "offsets.storage",
        OFFSETS_STORAGE_ZOOKEEPER,
        "zookeeper or kafka (the coordinator's offsets log), lower-cased; the group's migration phase, once it "
        "has one, wins over it (docs/legacy.md)",
        choices=(OFFSETS_STORAGE_ZOOKEEPER, OFFSETS_STORAGE_KAFKA),
    )
    dual_commit_enabled: bool | None = kafka_field(
        "dual.commit.enabled",
        None,
        "with offsets.storage=kafka, also write ZooKeeper for each partition the log accepted and read the "
        "larger of both offsets; defaults to true with kafka storage, else false (ignored for zookeeper)",
    )
    offsets_commit_max_retries: int = kafka_field(
        "offsets.commit.max.retries", 5, "commit retries at shutdown", at_least=0
    )
    offsets_channel_backoff_ms: int = kafka_field(
        "offsets.channel.backoff.ms",
        1000,
        "gap between tries of a log commit or fetch and between coordinator lookups",
        at_least=0,
    )
    offsets_channel_socket_timeout_ms: int = kafka_field(
        "offsets.channel.socket.timeout.ms",
        10000,
        "socket timeout towards coordinator nodes, and how long one log request keeps looking the coordinator up",
        at_least=1,
    )
    bootstrap_servers: str | None = kafka_field(
        "bootstrap.servers",
        None,
        "zkcoord: coordinator nodes as host:port[,host:port]; when unset they are discovered under zkcoord.root",
    )
    zkcoord_root: str = kafka_field(
        "zkcoord.root",
        DEFAULT_ROOT,
        "zkcoord: ZooKeeper path of zkcoord's own data (coordinator nodes, migration state, advertisements)",
    )
    auto_offset_reset: str = kafka_field(
        "auto.offset.reset",
        AUTO_OFFSET_RESET_LARGEST,
        "smallest or largest: where to start without a valid offset",
        choices=(AUTO_OFFSET_RESET_SMALLEST, AUTO_OFFSET_RESET_LARGEST),
    )
    consumer_timeout_ms: int = kafka_field(
        "consumer.timeout.ms",
        -1,
        "a stream raises ConsumerTimeoutError after this long without a record; -1 blocks",
        at_least=-1,
    )
    refresh_leader_backoff_ms: int = kafka_field(
        "refresh.leader.backoff.ms",
        200,
        "how long a stream waits before asking its source again about a partition the source did not know, "
        "e.g. one just added (0.8.2's leader finder retries as often)",
        at_least=0,
    )
    fetch_message_max_records: int = kafka_field(
        "fetch.message.max.records",
        500,
        "zkcoord: records a stream fetches from one partition at a time (0.8.2 bounds bytes instead)",
        at_least=1,
    )
    metrics_port: int | None = kafka_field(
        "zkcoord.metrics.port",
        None,
        "zkcoord: serve the member's Prometheus metrics on this port (docs/legacy.md)",
        at_least=0,
        at_most=65535,
    )
    metrics_host: str = kafka_field("zkcoord.metrics.host", "127.0.0.1", "zkcoord: the address the metrics bind")

    def __post_init__(self):
        # 0.8.2 lower-cases offsets.storage; auto.offset.reset it takes in lower case only, zkcoord in any case
        for name in ("offsets_storage", "auto_offset_reset"):
            if isinstance(getattr(self, name), str):
                object.__setattr__(self, name, getattr(self, name).lower())
        check_values(self)
        super().__post_init__()
        if not self.group_id or not is_legal_name(self.group_id):
            raise ConfigError(f"group.id {self.group_id!r} is illegal: use [a-zA-Z0-9._-], at most 255 characters")
        if not self.zookeeper_connect:
            object.__setattr__(self, "zookeeper_connect", env.zookeeper_connect() or "")
        if not self.zookeeper_connect:
            raise ConfigError("zookeeper.connect is required (or set ZKCOORD_ZK_CONNECT)")
        if self.consumer_id is not None and not re.fullmatch(r"[^/\x00-\x1f\x7f]+", self.consumer_id):
            raise ConfigError(f"consumer.id {self.consumer_id!r} must be non-empty, without '/' or control characters")
        if self.dual_commit_enabled is None:  # Kafka's default follows the storage
            object.__setattr__(self, "dual_commit_enabled", self.offsets_storage == OFFSETS_STORAGE_KAFKA)
        if self.bootstrap_servers:  # empty, as from a properties file line without a value: unset
            parse_bootstrap_servers(self.bootstrap_servers)
        if not self.zkcoord_root.startswith("/"):
            raise ConfigError(f"zkcoord.root={self.zkcoord_root!r} must be an absolute znode path")

    @property
    def connection_timeout_ms(self) -> int:
        return self.zookeeper_connection_timeout_ms or self.zookeeper_session_timeout_ms

    @property
    def backoff_ms(self) -> int:
        return self.zookeeper_sync_time_ms if self.rebalance_backoff_ms is None else self.rebalance_backoff_ms

    @property
    def effective_client_id(self) -> str:
        return self.client_id or self.group_id

    @property
    def dual_commit(self) -> bool:
        """Dual commit as 0.8.2 applies it: only with kafka storage."""
        return self.offsets_storage == OFFSETS_STORAGE_KAFKA and bool(self.dual_commit_enabled)
