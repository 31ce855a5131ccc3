"""A Kafka cluster's group coordinator as step 0005 and ``migrate verify`` see it, through kafka-python's admin client.

kafka-python (3.0 or later: its admin client's group-offset calls) is an optional extra
(``pip install 'zkcoord[kafka]'``), imported on first use. Offsets are
written as kafka-consumer-groups --reset-offsets writes them: a simple OffsetCommit (generation -1, no member
id), which Kafka's coordinator accepts only while the group has no members.

IO: sockets, through kafka-python's own network thread.
"""

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass

from zkcoord.migration.kafka_copy import Partition
from zkcoord.migration.phases import MigrationError

log = logging.getLogger(__name__)

RETRY_BACKOFF_S = 0.1
# COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR: look the coordinator up again. A
# fresh cluster answers 15 to the first FindCoordinator while it creates __consumer_offsets.
COORDINATOR_MOVED = frozenset({14, 15, 16})


class TargetError(MigrationError):
    """No target cluster given, or it cannot be reached: a usage or connection error (the CLI exits 2)."""


@dataclass(frozen=True)
class KafkaGroup:
    """A group as the Kafka cluster's coordinator describes it (state ``Dead``: it has never existed there)."""

    state: str
    members: tuple[str, ...] = ()


class KafkaTarget:
    """The Kafka cluster at ``bootstrap`` (``HOST:PORT[,HOST:PORT]``); connects on first use, ``close()`` ends it."""

    def __init__(self, bootstrap: str, timeout_ms: int = 30_000, security_options: Mapping[str, object] | None = None):
        self.bootstrap, self.timeout_ms = bootstrap, timeout_ms
        # kafka-python's security_protocol, sasl_*, ssl_* (ClientSecurity.kafka_python_options)
        self._security_options = dict(security_options or {})
        self._admin = None

    def cluster_id(self) -> str:
        """The cluster's id (``cluster_id`` in Kafka's Metadata): the same whichever broker answers."""
        return self._call(lambda admin: admin.describe_cluster(), "DescribeCluster")["cluster_id"]

    def describe_group(self, group: str) -> KafkaGroup:
        described = self._call(lambda admin: admin.describe_groups([group]), f"DescribeGroups for group {group}")
        found = described.get(group) or {}
        if found.get("error"):
            raise MigrationError(f"Kafka at {self.bootstrap}: DescribeGroups for group {group}: {found['error']}")
        members = tuple(member["member_id"] for member in found.get("members") or [])
        return KafkaGroup(found.get("group_state") or "Dead", members)

    def offsets(self, group: str) -> dict[Partition, int]:
        """Every offset the group has committed on the cluster (none for an unknown group)."""
        return self.offsets_of([group])[group]

    def offsets_of(self, groups: list[str]) -> dict[str, dict[Partition, int]]:
        """Each group's committed offsets (OffsetFetch for all partitions, one request per coordinator)."""
        if not groups:
            return {}
        fetched = self._call(lambda admin: admin.list_group_offsets(list(groups)), "OffsetFetch")
        return {
            group: {
                (tp.topic, tp.partition): committed.offset
                for tp, committed in (fetched.get(group) or {}).items()
                if committed.offset >= 0
            }
            for group in groups
        }

    def commit(self, group: str, offsets: dict[Partition, int]) -> dict[Partition, str]:
        """Simple commits of ``offsets`` (metadata ""); the partitions not accepted, with Kafka's error name."""
        if not offsets:
            return {}
        from kafka import TopicPartition
        from kafka.structs import OffsetAndMetadata

        request = {TopicPartition(t, p): OffsetAndMetadata(o, "", None) for (t, p), o in sorted(offsets.items())}
        deadline = time.monotonic() + self.timeout_ms / 1000
        while True:
            answers = self._call(lambda admin: admin.alter_group_offsets(group, request), f"OffsetCommit for {group}")
            refused = {tp: error for tp, error in answers.items() if error.errno != 0}
            moved = refused and all(error.errno in COORDINATOR_MOVED for error in refused.values())
            if not moved or time.monotonic() > deadline:
                return {(tp.topic, tp.partition): error.__name__ for tp, error in refused.items()}
            time.sleep(RETRY_BACKOFF_S)

    def close(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None

    def _call(self, request, what: str):
        """``request(admin)``, retried on Kafka's retriable errors until the timeout (kafka-python's admin does not
        retry them)."""
        errors = _kafka_errors()
        admin = self._connected()
        deadline = time.monotonic() + self.timeout_ms / 1000
        while True:
            try:
                return request(admin)
            except errors.KafkaError as error:
                if error.retriable and time.monotonic() < deadline:
                    log.debug("retrying %s on Kafka at %s: %s", what, self.bootstrap, error)
                    time.sleep(RETRY_BACKOFF_S)
                    continue
                if isinstance(error, (errors.KafkaConnectionError, errors.KafkaTimeoutError)):
                    raise TargetError(f"Kafka at {self.bootstrap} did not answer {what}: {error}") from None
                raise MigrationError(f"Kafka at {self.bootstrap}: {what} failed: {error}") from None

    def _connected(self):
        if self._admin is None:
            from kafka.admin import KafkaAdminClient

            errors = _kafka_errors()
            try:
                self._admin = KafkaAdminClient(
                    bootstrap_servers=self.bootstrap,
                    client_id="zkcoord-migrate",
                    request_timeout_ms=self.timeout_ms,
                    bootstrap_timeout_ms=self.timeout_ms,
                    **self._security_options,
                )
            except (errors.KafkaConnectionError, errors.KafkaTimeoutError) as error:
                raise TargetError(
                    f"cannot reach the Kafka cluster at {self.bootstrap} within {self.timeout_ms / 1000:g} s "
                    f"({type(error).__name__}); check --target-bootstrap-server"
                ) from None
        return self._admin


def _kafka_errors():
    try:
        import kafka.errors
    except ImportError:
        raise TargetError("copying to Kafka needs kafka-python: pip install 'zkcoord[kafka]'") from None
    return kafka.errors
