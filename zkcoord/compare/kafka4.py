"""The Kafka 4 broker of the comparison's Kafka 4 variants (``kip848``, ``classic-kafka4``; docs/compare.md).

One broker in KRaft mode for a whole ``compare run``, started before its first run and stopped after its last
(unless the command is given one already running). KIP-848 moved the session timeout and the heartbeat interval
from the consumer to the broker (``group.consumer.*``), so the broker is given the run's: its consumer-protocol
members then time out as the other variants' members do, and its classic members may ask for the run's timeout.
"""

import contextlib
from collections.abc import Iterator

from zkcoord.testing.kafka_broker import KafkaEndpoint, kraft_cluster

# Kafka's defaults of the upper bounds, kept unless the run's timings exceed them.
MAX_SESSION_TIMEOUT_MS = 60_000
MAX_HEARTBEAT_INTERVAL_MS = 15_000
CLASSIC_MIN_SESSION_TIMEOUT_MS = 6000  # group.min.session.timeout.ms's default


def broker_properties(session_timeout_ms: int, heartbeat_interval_ms: int) -> dict[str, str]:
    """The broker's group settings for a run with these timings, for both group protocols."""
    session, heartbeat = session_timeout_ms, heartbeat_interval_ms
    settings = {
        "group.consumer.session.timeout.ms": session,
        "group.consumer.min.session.timeout.ms": session,
        "group.consumer.max.session.timeout.ms": max(session, MAX_SESSION_TIMEOUT_MS),
        "group.consumer.heartbeat.interval.ms": heartbeat,
        "group.consumer.min.heartbeat.interval.ms": heartbeat,
        "group.consumer.max.heartbeat.interval.ms": max(heartbeat, MAX_HEARTBEAT_INTERVAL_MS),
        "group.min.session.timeout.ms": min(CLASSIC_MIN_SESSION_TIMEOUT_MS, session),
    }
    return {key: str(value) for key, value in settings.items()}


@contextlib.contextmanager
def kafka4_broker(
    bootstrap: str | None, session_timeout_ms: int, heartbeat_interval_ms: int
) -> Iterator[KafkaEndpoint]:
    """The broker at ``bootstrap`` as it is, or (None) one started for the block with the run's timings."""
    if bootstrap is not None:
        yield KafkaEndpoint(None, bootstrap)
        return
    with kraft_cluster(overrides=broker_properties(session_timeout_ms, heartbeat_interval_ms)) as cluster:
        yield cluster
