"""Configuration of the offsets log, with Kafka's property names where Kafka has one."""

from dataclasses import dataclass

from zkcoord.config import check_values, kafka_field
from zkcoord.errors import ConfigError

FLUSH_ALWAYS, FLUSH_GROUP, FLUSH_NEVER = "always", "group", "never"
FLUSH_POLICIES = (FLUSH_ALWAYS, FLUSH_GROUP, FLUSH_NEVER)


@dataclass(frozen=True)
class LogConfig:
    flush_policy: str = kafka_field(
        "log.flush.policy",
        FLUSH_GROUP,
        "always: one fsync per append before it is acknowledged; group: concurrent appends share one fsync, "
        "run off the gevent loop; never: the OS decides",
        choices=FLUSH_POLICIES,
    )
    segment_bytes: int = kafka_field(
        "log.segment.bytes", 100 * 1024 * 1024, "roll when a segment would exceed it", at_least=1
    )
    roll_ms: int = kafka_field(
        "log.roll.ms", 7 * 24 * 3600 * 1000, "roll when the active segment is this old", at_least=1
    )
    index_interval_bytes: int = kafka_field(
        "log.index.interval.bytes", 4096, "bytes of entries per index entry", at_least=1
    )
    max_message_bytes: int = kafka_field("message.max.bytes", 1048588, "largest entry, header included", at_least=1)
    load_buffer_bytes: int = kafka_field(
        "offsets.load.buffer.size", 5 * 1024 * 1024, "read size when loading", at_least=1
    )
    delete_retention_ms: int = kafka_field(
        "log.cleaner.delete.retention.ms", 24 * 3600 * 1000, "how long the cleaner keeps tombstones", at_least=0
    )
    cleaner_enable: bool = kafka_field(
        "log.cleaner.enable", True, "a coordinator node compacts the partitions it leads in the background"
    )
    cleaner_io_bytes_per_second: int = kafka_field(
        "log.cleaner.io.max.bytes.per.second",
        64 * 1024 * 1024,
        "read + write budget of the background cleaner",
        at_least=1,
    )
    cleaner_backoff_ms: int = kafka_field(
        "log.cleaner.backoff.ms", 15000, "pause between checks for dirty logs", at_least=0
    )
    cleaner_min_cleanable_ratio: float = kafka_field(
        "log.cleaner.min.cleanable.ratio",
        0.5,
        "clean when this share of the closed bytes is new since the last run",
        at_least=0,
        at_most=1,
    )
    skip_corrupt_segments: bool = kafka_field(
        "log.recovery.skip.corrupt.segments",
        False,
        "on a corrupt older segment, report it and read on from the next segment instead of stopping",
    )

    def __post_init__(self):
        check_values(self)
        if self.segment_bytes < self.max_message_bytes:
            raise ConfigError("log.segment.bytes must be at least message.max.bytes")
