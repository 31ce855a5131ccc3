"""Consumer groups of any Kafka-protocol coordinator (a Kafka cluster, or zkcoord's Kafka listener), through
kafka-python's ``KafkaAdminClient``.

Offers what :class:`zkcoord.admin.coordinator_groups.CoordinatorGroups` offers, so the admin client's rules
(locating a group, reset plans, offsets rows) apply unchanged, and is also the record source the admin client
asks for log-start and log-end offsets (ListOffsets). kafka-python's answers become the results and errors of
:mod:`zkcoord.admin.model`: a broker's error code becomes zkcoord's exception for it (Kafka's message), a
cluster that does not answer becomes :class:`ClusterUnreachableError`.

IO: kafka-python's network thread, under ``request_timeout_ms``. Imports kafka-python lazily; must not import
kazoo, the CLI, the renderer, the server or gevent.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence

from zkcoord.admin.model import (
    CONSUMER_PROTOCOL_TYPES,
    COORDINATOR,
    ClusterUnreachableError,
    GroupAdminError,
    GroupDescription,
    GroupListing,
    MemberRemoval,
    Node,
    OffsetAndMetadata,
    commit_failure,
    coordinator_group,
    offset_delete_refusal,
)
from zkcoord.errors import KAFKA_MESSAGES, CoordinatorResponseError, error_for
from zkcoord.model import TopicPartition

log = logging.getLogger(__name__)


def _kafka():
    """kafka-python, 3.0 or later (its admin client's group calls took their present names in 3.0)."""
    try:
        import kafka.admin
        import kafka.errors
    except ImportError:
        kafka = None
    if kafka is None or int(kafka.__version__.split(".")[0]) < 3:
        raise GroupAdminError("Kafka-protocol groups need kafka-python>=3.0: pip install 'zkcoord[kafka]'")
    return kafka


class KafkaGroups:
    """Kafka's admin-client group calls against the cluster at ``bootstrap_servers`` ("h:p,h:p").

    The connection is made on the first call; a cluster that does not answer within ``request_timeout_ms``
    raises :class:`ClusterUnreachableError`.
    """

    def __init__(
        self,
        bootstrap_servers: str,
        client_id: str,
        request_timeout_ms: int,
        security_options: Mapping[str, object] | None = None,
    ):
        self.bootstrap_servers = bootstrap_servers
        self._client_id = client_id
        self._security_options = dict(security_options or {})  # kafka-python's security_protocol, sasl_*, ssl_*
        self._timeout_ms = request_timeout_ms
        self._kafka = _kafka()
        self._client = None

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    # -- groups --------------------------------------------------------------------------------------------

    def nodes(self) -> list[Node]:
        """Every broker of the cluster (DescribeCluster)."""
        with self._calls() as admin:
            brokers = admin.describe_cluster()["brokers"]
        return sorted((Node(b["broker_id"], b["host"], b["port"]) for b in brokers), key=lambda n: n.node_id)

    def list(self, nodes: Iterable[Node], states: list[str]) -> list[GroupListing]:
        """The consumer groups (protocol type "consumer" or "") that ``nodes`` hold, in ``states`` (all if
        empty). States are filtered here: ListGroups' filter needs v4, which a coordinator need not offer."""
        with self._calls() as admin:
            groups = admin.list_groups(broker_ids=[node.node_id for node in nodes])
        return [
            GroupListing(group["group_id"], COORDINATOR, group["group_state"], group["protocol_type"])
            for group in groups
            if group["protocol_type"] in CONSUMER_PROTOCOL_TYPES and (not states or group["group_state"] in states)
        ]

    def describe(self, group_id: str) -> GroupDescription:
        """DescribeGroups on the group's coordinator (state Dead when it holds no such group)."""
        with self._calls() as admin:
            group = admin.describe_groups([group_id])[group_id]
            coordinator = self._coordinator(admin, group_id)
        if group["error"] is not None:
            raise GroupAdminError(f"Describing consumer group '{group_id}' failed: {group['error']}")
        return coordinator_group(group_id, group, lambda member: _assignment(member["member_assignment"]), coordinator)

    def committed(self, group_id: str) -> dict[TopicPartition, OffsetAndMetadata]:
        """OffsetFetch of every partition the group has committed, by partition."""
        with self._calls() as admin:
            fetched = admin.list_group_offsets(group_id).get(group_id, {})
        offsets = {
            TopicPartition(tp.topic, tp.partition): OffsetAndMetadata(value.offset, value.metadata or "")
            for tp, value in fetched.items()
            if value.offset >= 0
        }
        return dict(sorted(offsets.items()))

    def commit(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        """OffsetCommit outside any generation (AlterConsumerGroupOffsets); the first failed partition raises."""
        kafka = self._kafka
        values = {kafka.TopicPartition(*tp): kafka.structs.OffsetAndMetadata(o, "", None) for tp, o in offsets.items()}
        with self._calls() as admin:
            outcome = admin.alter_group_offsets(group_id, values)
        failed = {
            TopicPartition(*tp): error.errno for tp, error in outcome.items() if error is not kafka.errors.NoError
        }
        if failed:
            raise commit_failure(group_id, failed)

    def delete(self, group_id: str) -> None:
        """DeleteGroups of one group; its error raises."""
        with self._calls() as admin:
            outcome = admin.delete_groups([group_id])[group_id]
        if outcome != "OK":
            raise self._broker_error(getattr(self._kafka.errors, outcome))  # kafka-python answers the class's name

    def delete_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, CoordinatorResponseError | None]:
        """KIP-496 OffsetDelete: a top-level refusal raises; per-partition errors are returned."""
        kafka = self._kafka
        try:
            with self._calls() as admin:
                outcome = admin.delete_group_offsets(group_id, [kafka.TopicPartition(*tp) for tp in partitions])
        except CoordinatorResponseError as error:
            raise offset_delete_refusal(group_id, error.error_code) or error from None
        errors = {TopicPartition(*tp): error for tp, error in outcome.items()}
        return {tp: self._broker_error(errors.get(tp, kafka.errors.NoError)) for tp in partitions}

    def remove_members(self, group_id: str, instance_ids: Sequence[str]) -> list[MemberRemoval]:
        """KIP-345 LeaveGroup of static members by ``group.instance.id``; a top-level error raises."""
        members = [self._kafka.admin.MemberToRemove(group_instance_id=i) for i in instance_ids]
        with self._calls() as admin:
            outcome = admin.remove_group_members(group_id, members)
        no_error = self._kafka.errors.NoError
        return [MemberRemoval(i, self._broker_error(outcome.get(i, no_error))) for i in instance_ids]

    def partition_counts(self, topics: Sequence[str]) -> dict[str, int]:
        """Partitions per topic, from Metadata; topics the cluster does not know are left out."""
        with self._calls() as admin:
            described = admin.describe_topics(list(topics))
        return {topic["name"]: len(topic["partitions"]) for topic in described if topic["error_code"] == 0}

    # -- a record source's offsets (zkcoord.sources.RecordSource) -------------------------------------------

    def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._list_offsets(partitions, self._kafka.admin.OffsetSpec.EARLIEST)

    def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._list_offsets(partitions, self._kafka.admin.OffsetSpec.LATEST)

    def _list_offsets(self, partitions: Iterable[TopicPartition], spec) -> dict[TopicPartition, int]:
        """ListOffsets of the partitions that exist. Partitions that do not, or a refused ListOffsets, are left
        out with a warning: kafka-consumer-groups prints "-" for an offset it could not get."""
        wanted = sorted(set(partitions))
        counts = self.partition_counts(sorted({tp.topic for tp in wanted})) if wanted else {}
        existing = [tp for tp in wanted if tp.partition < counts.get(tp.topic, 0)]
        if not existing:
            return {}
        try:
            with self._calls() as admin:
                found = admin.list_partition_offsets({self._kafka.TopicPartition(*tp): spec for tp in existing})
        except ClusterUnreachableError:
            raise
        except CoordinatorResponseError as error:
            log.warning("ListOffsets failed, offsets unknown partitions=%d error=%r", len(existing), error)
            return {}
        return {TopicPartition(tp.topic, tp.partition): value.offset for tp, value in found.items()}

    # -- kafka-python --------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _calls(self) -> Iterator:
        """The connected admin client, with kafka-python's errors turned into zkcoord's."""
        errors = self._kafka.errors
        try:
            if self._client is None:
                self._client = self._kafka.admin.KafkaAdminClient(
                    bootstrap_servers=self.bootstrap_servers.split(","),
                    client_id=self._client_id,
                    request_timeout_ms=self._timeout_ms,
                    bootstrap_timeout_ms=self._timeout_ms,
                    **self._security_options,
                )
            yield self._client
        except errors.BrokerResponseError as error:
            raise self._broker_error(type(error)) from None
        except (errors.KafkaTimeoutError, errors.KafkaConnectionError, errors.NodeNotReadyError) as error:
            raise ClusterUnreachableError(
                f"no Kafka-protocol broker answered at {self.bootstrap_servers} within {self._timeout_ms} ms ({error})"
            ) from None
        except errors.KafkaError as error:
            raise GroupAdminError(str(error)) from None

    def _broker_error(self, error_class) -> CoordinatorResponseError | None:
        """zkcoord's exception for a kafka-python error class, with Kafka's message for its code (None: NoError)."""
        if error_class is self._kafka.errors.NoError:
            return None
        return error_for(error_class.errno, KAFKA_MESSAGES.get(error_class.errno) or error_class.description)

    def _coordinator(self, admin, group_id: str) -> Node | None:
        """The group's coordinator as kafka-python found it for the last request (its cluster metadata)."""
        cluster = admin._manager.cluster  # noqa: SLF001 - kafka-python's admin client does not publish it
        node_id = cluster.get_coordinator(group_id)
        broker = None if node_id is None else cluster.broker_metadata(node_id)
        return None if broker is None else Node(broker.node_id, broker.host, broker.port)


def _assignment(assignment) -> tuple[TopicPartition, ...]:
    """A member's partitions from kafka-python's decoded ConsumerProtocolAssignment (bytes when it was not one)."""
    if not isinstance(assignment, dict):
        return ()
    return tuple(
        TopicPartition(entry["topic"], partition)
        for entry in assignment["assigned_partitions"]
        for partition in entry["partitions"]
    )
