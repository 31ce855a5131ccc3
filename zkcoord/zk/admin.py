"""Operator actions on the 0.8.2 layout: topics, broker registrations, group snapshots and checks,
offset export and import. Synchronous kazoo calls; works with any kazoo handler."""

import contextlib
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError

from zkcoord.assign.java import java_string_key
from zkcoord.errors import ZkcoordError
from zkcoord.model import TopicPartition
from zkcoord.zk import layout
from zkcoord.zk.layout import ZnodeDecodeError
from zkcoord.zk.topic_filter import UnsupportedFilterError, expand

log = logging.getLogger(__name__)


class AdminError(ZkcoordError):
    """An operator request that cannot be carried out as asked."""


def _children(client: KazooClient, path: str) -> list[str]:
    try:
        return client.get_children(path)
    except NoNodeError:
        return []


def register_broker(
    client: KazooClient, broker_id: int, host: str, port: int, timestamp_ms: int, persistent: bool = False
) -> str:
    """Write a 0.8 broker registration (ephemeral unless ``persistent``); returns its path."""
    path = layout.broker_path(broker_id)
    data = layout.encode_broker_registration(
        layout.BrokerRegistration(broker_id, host, port, timestamp_ms=timestamp_ms)
    )
    try:
        client.create(path, data, ephemeral=not persistent, makepath=True)
    except NodeExistsError:
        raise AdminError(f"broker {broker_id} is already registered at {path}") from None
    return path


def broker_ids(client: KazooClient) -> list[int]:
    return sorted(int(b) for b in _children(client, layout.BROKER_IDS_PATH) if b.lstrip("-").isdigit())


def read_brokers(client: KazooClient) -> list[layout.BrokerRegistration]:
    """Every broker registration under ``/brokers/ids``, by id; one that vanishes while being read is left out."""
    brokers = []
    for broker_id in broker_ids(client):
        try:
            data, _ = client.get(layout.broker_path(broker_id))
        except NoNodeError:
            continue
        brokers.append(layout.decode_broker_registration(broker_id, data))
    return brokers


def _replicas(partition: int, brokers: list[int], replication_factor: int) -> list[int]:
    brokers = brokers or [0]
    return [brokers[(partition + i) % len(brokers)] for i in range(min(replication_factor, len(brokers)))]


def create_topic(client: KazooClient, topic: str, partitions: int, replication_factor: int = 1) -> None:
    """``/brokers/topics/<t>`` with replicas spread over registered brokers, as ``kafka-topics --create``.

    A live Kafka controller elects the partitions' leaders itself; without one, zkcoord writes each
    partition's state as a controller would, so a cluster of registrations alone looks complete.
    """
    if not layout.is_legal_name(topic):
        raise AdminError(f"topic name {topic!r} is illegal: use [a-zA-Z0-9._-], at most 255 characters")
    if partitions < 1 or replication_factor < 1:
        raise AdminError("partitions and replication factor must be >= 1")
    brokers = broker_ids(client)
    replicas = {p: _replicas(p, brokers, replication_factor) for p in range(partitions)}
    try:
        client.create(layout.topic_path(topic), layout.encode_topic_registration(replicas), makepath=True)
    except NodeExistsError:
        raise AdminError(f"topic {topic} already exists") from None
    _write_partition_states(client, topic, replicas)


def _write_partition_states(client: KazooClient, topic: str, replicas: dict[int, list[int]]) -> None:
    if client.exists(layout.CONTROLLER_PATH):  # a real controller would fail to bring ready-made states online
        return
    # Pipelined: one round trip at a time made a topic of 10,000 partitions take half a minute.
    pending = [
        client.create_async(
            layout.partition_state_path(topic, partition),
            layout.encode_partition_state(assigned[0], assigned),
            makepath=True,
        )
        for partition, assigned in replicas.items()
    ]
    for result in pending:
        with contextlib.suppress(NodeExistsError):
            result.get()


def alter_topic_partitions(client: KazooClient, topic: str, partitions: int) -> int:
    """Raise a topic's partition count (as ``kafka-topics --alter``); returns the old count."""
    try:
        data, stat = client.get(layout.topic_path(topic))
    except NoNodeError:
        raise AdminError(f"topic {topic} does not exist") from None
    node = layout.decode_topic_node(topic, data)  # keeps fields of later versions (topic_id ...)
    replicas = node["partitions"]
    if partitions <= len(replicas):
        raise AdminError(f"topic {topic} has {len(replicas)} partitions; the count can only grow")
    brokers = broker_ids(client)
    factor = len(next(iter(replicas.values()), [0])) or 1
    added = {p: _replicas(p, brokers, factor) for p in range(len(replicas), partitions)}
    node["partitions"] = {**replicas, **added}
    client.set(layout.topic_path(topic), layout.encode_topic_node(node), version=stat.version)
    _write_partition_states(client, topic, added)
    return len(replicas)


def list_topics(client: KazooClient) -> dict[str, list[int] | ZnodeDecodeError]:
    """Topic → sorted partitions, or the decode error of a topic node 0.8.2 could not read."""
    topics: dict[str, list[int] | ZnodeDecodeError] = {}
    for topic in sorted(_children(client, layout.BROKER_TOPICS_PATH)):
        try:
            topics[topic] = layout.decode_topic_partitions(topic, client.get(layout.topic_path(topic))[0])
        except NoNodeError:
            continue
        except ZnodeDecodeError as error:
            topics[topic] = error
    return topics


@dataclass
class GroupSnapshot:
    """One read of a group's ids, owners and offsets (not atomic: znodes are read one by one)."""

    group: str
    members: dict[str, dict[str, int]] = field(default_factory=dict)  # consumer id → expanded subscription
    bad_members: dict[str, str] = field(default_factory=dict)  # consumer id → why 0.8.2 cannot read it
    partitions: dict[str, list[int]] = field(default_factory=dict)  # subscribed topic → partitions
    bad_topics: dict[str, str] = field(default_factory=dict)  # subscribed topic → why its znode is unreadable
    owners: dict[TopicPartition, str] = field(default_factory=dict)
    foreign_owner_nodes: list[str] = field(default_factory=list)  # not /owners/<t>/<int>, e.g. pykafka's
    offsets: dict[TopicPartition, int | str] = field(default_factory=dict)
    exists: bool = True

    def live_threads(self, topic: str) -> set[str]:
        return {f"{c}-{n}" for c, subs in self.members.items() if topic in subs for n in range(subs[topic])}

    def problems(self) -> list[str]:
        """VerifyConsumerRebalance: every partition of a subscribed topic has one live owner thread."""
        if not self.exists:
            return [f"consumer group {self.group} does not exist"]
        found = [f"member {c} has an unreadable registration: {why}" for c, why in sorted(self.bad_members.items())]
        found += [f"owner node {path} is not in the 0.8.2 layout" for path in self.foreign_owner_nodes]
        found += [f"topic {topic} has an unreadable znode: {why}" for topic, why in sorted(self.bad_topics.items())]
        for topic, partitions in sorted(self.partitions.items()):
            live = self.live_threads(topic)
            for partition in partitions:
                owner = self.owners.get(TopicPartition(topic, partition))
                if owner is None:
                    found.append(f"no owner for partition [{topic},{partition}]")
                elif owner not in live:
                    found.append(
                        f"owner {printable(owner)} of [{topic},{partition}] is not a live thread of group {self.group}"
                    )
        return found


def printable(text: str) -> str:
    """``text`` with control and other unprintable characters escaped, so a foreign znode cannot drive a terminal."""
    return text if text.isprintable() else text.encode("unicode_escape").decode("ascii")


def read_group(client: KazooClient, group: str, exclude_internal_topics: bool = True) -> GroupSnapshot:
    snapshot = GroupSnapshot(group, exists=client.exists(layout.group_path(group)) is not None)
    topic_list = _children(client, layout.BROKER_TOPICS_PATH)
    for consumer_id in sorted(_children(client, layout.ids_path(group)), key=java_string_key):
        try:
            data, _ = client.get(layout.consumer_path(group, consumer_id))
            registration = layout.decode_consumer_registration(group, consumer_id, data)
            snapshot.members[consumer_id] = expand(registration, topic_list, exclude_internal_topics)
        except NoNodeError:
            continue
        except ZnodeDecodeError as error:
            snapshot.bad_members[consumer_id] = error.reason
        except UnsupportedFilterError as error:
            snapshot.bad_members[consumer_id] = str(error)
    for topic in sorted({t for subs in snapshot.members.values() for t in subs}):
        try:
            snapshot.partitions[topic] = layout.decode_topic_partitions(topic, client.get(layout.topic_path(topic))[0])
        except NoNodeError:  # a subscribed topic that does not exist (yet) has no partitions to own
            snapshot.partitions[topic] = []
        except ZnodeDecodeError as error:  # 0.8.2's rebalance fails on it: nothing of the topic can be verified
            snapshot.partitions[topic] = []
            snapshot.bad_topics[topic] = error.reason
    for topic in _children(client, layout.owners_path(group)):
        for partition in _children(client, layout.owners_path(group, topic)):
            if not partition.isdigit():
                snapshot.foreign_owner_nodes.append(f"{layout.owners_path(group, topic)}/{partition}")
                continue
            with contextlib.suppress(NoNodeError):
                owner = layout.decode_owner(client.get(layout.owner_path(group, topic, int(partition)))[0])
                snapshot.owners[TopicPartition(topic, int(partition))] = owner or ""
    for topic, partition, offset in read_offsets(client, group):
        snapshot.offsets[TopicPartition(topic, partition)] = offset
    return snapshot


def read_owners(client: KazooClient, group: str, topics: Iterable[str] | None = None) -> dict[TopicPartition, str]:
    """The owner znodes of ``topics`` (None: every topic under ``/consumers/<g>/owners``), pipelined: partition →
    the thread id it names. Znodes that are not ``<topic>/<partition>`` are left out, as are those a member deletes
    while they are read (a rebalancing member releases its own)."""
    if topics is None:
        topics = _children(client, layout.owners_path(group))
    listed = {t: client.get_children_async(layout.owners_path(group, t)) for t in topics if layout.is_legal_name(t)}
    pending = []
    for topic, reply in listed.items():
        with contextlib.suppress(NoNodeError):
            pending += [
                (TopicPartition(topic, int(p)), client.get_async(layout.owner_path(group, topic, int(p))))
                for p in reply.get()
                if p.isdigit()
            ]
    owners = {}
    for tp, reply in pending:
        with contextlib.suppress(NoNodeError):
            owners[tp] = layout.decode_owner(reply.get()[0])
    return owners


def read_offsets(client: KazooClient, group: str) -> Iterable[tuple[str, int, int | str]]:
    """``(topic, partition, offset)`` under ``/consumers/<g>/offsets``; unreadable values as raw text."""
    for topic in sorted(_children(client, layout.offsets_path(group))):
        partitions = [p for p in _children(client, layout.offsets_path(group, topic)) if p.isdigit()]
        for partition in sorted(partitions, key=int):
            path = layout.offset_path(group, topic, int(partition))
            with contextlib.suppress(NoNodeError):
                data, _ = client.get(path)
                try:
                    yield topic, int(partition), layout.decode_offset(path, data)
                except ZnodeDecodeError:
                    yield topic, int(partition), (data or b"").decode("utf-8", "replace")


def offset_writes(client: KazooClient, group: str) -> dict[tuple[str, int], int]:
    """``{(topic, partition): mzxid}`` of the offsets under ``/consumers/<g>/offsets``: ZooKeeper's id of each
    znode's last write, which changes with every write, also of the same offset."""
    writes = {}
    for topic in sorted(_children(client, layout.offsets_path(group))):
        for partition in _children(client, layout.offsets_path(group, topic)):
            if partition.isdigit() and (stat := client.exists(layout.offset_path(group, topic, int(partition)))):
                writes[(topic, int(partition))] = stat.mzxid
    return writes


def export_offsets(client: KazooClient, groups: Iterable[str] | None = None) -> list[str]:
    """ExportZkOffsets lines ``<znode>:<offset>`` for the given groups (all when None)."""
    lines = []
    for group in sorted(groups if groups is not None else _children(client, layout.CONSUMERS_PATH)):
        for topic, partition, offset in read_offsets(client, group):
            if isinstance(offset, int):
                lines.append(f"{layout.offset_path(group, topic, partition)}:{offset}")
            else:
                log.warning("skipping unreadable offset %s", layout.offset_path(group, topic, partition))
    return lines


def parse_offset_lines(lines: Iterable[str]) -> list[tuple[str, int]]:
    """Validate ImportZkOffsets lines first, so that a bad file writes nothing."""
    parsed = []
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line:
            continue
        path, sep, offset = line.rpartition(":")
        if not sep or layout.parse_offset_path(path) is None:
            raise AdminError(f"line {number}: expected /consumers/<group>/offsets/<topic>/<partition>:<offset>")
        try:
            parsed.append((path, layout.decode_offset(path, offset.encode())))
        except ZnodeDecodeError:
            raise AdminError(f"line {number}: offset {offset!r} is not an integer") from None
    return parsed


def import_offsets(client: KazooClient, entries: Iterable[tuple[str, int]]) -> int:
    """Write each offset znode (``updatePersistentPath``); returns how many were written."""
    count = 0
    for path, offset in entries:
        data = layout.encode_offset(offset)
        try:
            client.set(path, data)
        except NoNodeError:
            try:
                client.create(path, data, makepath=True)
            except NodeExistsError:
                client.set(path, data)
        count += 1
    return count
