"""The coordinator's settings, under Kafka's broker property names (group-coordinator.md §0.2)."""

from dataclasses import dataclass

from zkcoord.config import check_values, kafka_field
from zkcoord.errors import ConfigError

NEW_MEMBER_JOIN_TIMEOUT_MS = 300_000  # Kafka's fixed GroupCoordinator.NewMemberJoinTimeoutMs


@dataclass(frozen=True)
class CoordinatorConfig:
    """Group and offset settings of one coordinator; build with :func:`zkcoord.config.build_config`."""

    group_min_session_timeout_ms: int = kafka_field("group.min.session.timeout.ms", 6000, at_least=0)
    group_max_session_timeout_ms: int = kafka_field("group.max.session.timeout.ms", 1_800_000, at_least=0)
    group_initial_rebalance_delay_ms: int = kafka_field("group.initial.rebalance.delay.ms", 3000, at_least=0)
    group_max_size: int = kafka_field("group.max.size", 2_147_483_647, at_least=1)
    offsets_topic_num_partitions: int = kafka_field("offsets.topic.num.partitions", 50, at_least=1)
    offset_metadata_max_bytes: int = kafka_field("offset.metadata.max.bytes", 4096, at_least=0)
    offsets_retention_minutes: int = kafka_field("offsets.retention.minutes", 10080, at_least=1)
    offsets_retention_check_interval_ms: int = kafka_field("offsets.retention.check.interval.ms", 600_000, at_least=1)
    offsets_commit_timeout_ms: int = kafka_field("offsets.commit.timeout.ms", 5000, at_least=1)

    def __post_init__(self) -> None:
        check_values(self)
        if self.group_min_session_timeout_ms > self.group_max_session_timeout_ms:
            raise ConfigError("group.min.session.timeout.ms is larger than group.max.session.timeout.ms")

    @property
    def offsets_retention_ms(self) -> int:
        # Python ints do not overflow; Kafka also widens to 64 bits here (GCT testOffsetsRetentionMsIntegerOverflow).
        return self.offsets_retention_minutes * 60_000
