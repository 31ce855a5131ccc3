"""The consumer client's configuration: Kafka's consumer property names, snake_case aliases, kafka-python defaults."""

import math
from dataclasses import dataclass

from zkcoord import env
from zkcoord.assign.consumer import ASSIGNOR_NAMES
from zkcoord.config import check_values, invalid_value, kafka_field, one_of
from zkcoord.errors import ConfigError
from zkcoord.security.client import ClientSecurityProperties
from zkcoord.zk.layout import DEFAULT_ROOT

AUTO_OFFSET_RESETS = ("earliest", "latest", "none")


@dataclass(frozen=True)
class ConsumerConfig(ClientSecurityProperties):
    """The consumer's settings; the security ones (``security.protocol``, ``sasl.*``, ``ssl.*``) are inherited."""

    bootstrap_servers: str | None = kafka_field(
        "bootstrap.servers", None, "coordinator nodes host:port[,host:port]; or set zookeeper.connect to discover them"
    )
    zookeeper_connect: str | None = kafka_field(
        "zookeeper.connect", None, "discover coordinator nodes under zkcoord.root; defaults to $ZKCOORD_ZK_CONNECT"
    )
    zkcoord_root: str = kafka_field("zkcoord.root", DEFAULT_ROOT, "zkcoord's ZooKeeper root")
    group_id: str | None = kafka_field("group.id", None, "None: manual assignment only, no commits")
    group_instance_id: str | None = kafka_field("group.instance.id", None, "static membership (KIP-345)")
    client_id: str = kafka_field("client.id", "zkcoord-consumer")
    session_timeout_ms: int = kafka_field("session.timeout.ms", 10000, at_least=1)
    heartbeat_interval_ms: int = kafka_field("heartbeat.interval.ms", 3000, at_least=1)
    max_poll_interval_ms: int = kafka_field("max.poll.interval.ms", 300000, "also the rebalance timeout", at_least=1)
    max_poll_records: int = kafka_field("max.poll.records", 500, at_least=1)
    enable_auto_commit: bool = kafka_field("enable.auto.commit", True)
    auto_commit_interval_ms: int = kafka_field("auto.commit.interval.ms", 5000, at_least=0)
    auto_offset_reset: str = kafka_field(
        "auto.offset.reset", "latest", "earliest, latest or none", choices=AUTO_OFFSET_RESETS
    )
    partition_assignment_strategy: str = kafka_field(
        "partition.assignment.strategy", "range", "comma-separated: range, roundrobin, sticky, cooperative-sticky"
    )
    request_timeout_ms: int = kafka_field("request.timeout.ms", 30000, at_least=0)
    retry_backoff_ms: int = kafka_field("retry.backoff.ms", 100, at_least=0)
    default_api_timeout_ms: int = kafka_field(
        "default.api.timeout.ms", 60000, "commit(), committed(), close()", at_least=0
    )
    metadata_max_age_ms: int = kafka_field(
        "metadata.max.age.ms", 300000, "pattern subscriptions re-list topics", at_least=0
    )
    consumer_timeout_ms: int = kafka_field(
        "consumer.timeout.ms", -1, "iteration stops after this long without a record; -1 never", at_least=-1
    )
    fetch_backoff_ms: int = kafka_field(
        "zkcoord.fetch.backoff.ms", 10, "how long poll() waits for events before asking the source again", at_least=0
    )
    metrics_port: int | None = kafka_field(
        "zkcoord.metrics.port", None, "serve Prometheus metrics on this port", at_least=0, at_most=65535
    )

    def __post_init__(self):
        if not isinstance(self.partition_assignment_strategy, str):  # kafka-python takes a list
            object.__setattr__(self, "partition_assignment_strategy", ",".join(self.partition_assignment_strategy))
        if self.consumer_timeout_ms == math.inf:  # kafka-python's default: never time out
            object.__setattr__(self, "consumer_timeout_ms", -1)
        check_values(self)
        super().__post_init__()
        for name in self.assignment_strategies:
            if name not in ASSIGNOR_NAMES:
                raise invalid_value("partition.assignment.strategy", name, f"a list of {one_of(ASSIGNOR_NAMES)}")
        if not self.bootstrap_servers and not self.zookeeper_connect:
            object.__setattr__(self, "zookeeper_connect", env.zookeeper_connect())
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ConfigError("heartbeat.interval.ms must be lower than session.timeout.ms")
        if self.group_instance_id is not None and not self.group_id:
            raise ConfigError("group.instance.id needs group.id")

    @property
    def assignment_strategies(self) -> list[str]:
        return [name.strip() for name in self.partition_assignment_strategy.split(",") if name.strip()]
