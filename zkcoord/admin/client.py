"""``AdminClient``: consumer-group administration over coordinator groups and legacy (0.8.2 ZooKeeper) groups.

Coordinator groups are reached over the wire protocol (wire-protocol.md): FindCoordinator on any node,
then the group's coordinator, retrying 14/15/16 with backoff until ``request_timeout_ms``. Legacy groups are
read and written under ``/consumers/<g>`` through a threading kazoo client. A group id can exist in both
places; every result says which one it comes from (``kind``), coordinator first.

IO: blocking sockets (``zkcoord.wire.client``) and a threading kazoo client, both under timeouts. Must not
import the CLI, the renderer, the server or gevent.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterable, Mapping, Sequence

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError, NotEmptyError
from kazoo.handlers.threading import KazooTimeoutError

from zkcoord.admin.model import (
    CONSUMER_PROTOCOL_TYPES,
    COORDINATOR,
    DEAD,
    EMPTY,
    LEGACY,
    STABLE,
    CoordinatorNotAvailableError,
    GroupAdminError,
    GroupDescription,
    GroupIdNotFoundError,
    GroupListing,
    GroupNotEmptyError,
    GroupOffsets,
    GroupOffsetsDescription,
    GroupResult,
    GroupSubscribedToTopicError,
    MemberDescription,
    MemberRemoval,
    Node,
    OffsetAndMetadata,
    OffsetDeletion,
    ResetPlan,
    ResetSpec,
    UnknownTopicOrPartitionError,
    error_for,
    offset_rows,
    plan_reset,
)
from zkcoord.client.bootstrap import Address, discover_nodes, parse_bootstrap_servers
from zkcoord.errors import ConfigError, ErrorCode
from zkcoord.migration.phases import RULES, Phase, read_offset
from zkcoord.migration.store import read_state
from zkcoord.model import TopicPartition
from zkcoord.wire.channel import RETRIABLE, CoordinatorChannel, Unreachable
from zkcoord.wire.channel import top_level_error as _top_level
from zkcoord.wire.consumer_protocol import ConsumerProtocolError, decode_assignment
from zkcoord.wire.requests import simple_offset_commit
from zkcoord.zk import admin as zk_admin
from zkcoord.zk import layout
from zkcoord.zk.nodes import read_nodes

log = logging.getLogger(__name__)

ZOOKEEPER_CONNECT_TIMEOUT_S = 10.0

PartitionsArg = Iterable[TopicPartition | tuple[str, int] | str]


class AdminClient:
    """Kafka's ``KafkaAdminClient`` consumer-group calls, for coordinator groups and legacy groups.

    ``bootstrap_servers`` ("h:p,h:p") reach the coordinator nodes; without it they are discovered under
    ``root`` in ZooKeeper. ``zookeeper_connect`` ("h:p[,h:p][/chroot]") is needed for legacy groups.
    ``source`` is a record source (or a spec for ``zkcoord.sources.open_source``) giving log-start and
    log-end offsets; without one, LOG-END-OFFSET and LAG are unknown.
    """

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str] | None = None,
        zookeeper_connect: str | None = None,
        root: str = layout.DEFAULT_ROOT,
        source=None,
        request_timeout_ms: int = 30000,
        client_id: str = "zkcoord-admin",
    ):
        if not bootstrap_servers and not zookeeper_connect:
            raise ConfigError("AdminClient needs bootstrap_servers, zookeeper_connect or both")
        self._bootstrap = parse_bootstrap_servers(bootstrap_servers) if bootstrap_servers else None
        self.zookeeper_connect = zookeeper_connect or None
        self.root = root
        self.request_timeout_ms = request_timeout_ms
        self.client_id = client_id
        self._owns_source = isinstance(source, str)
        if isinstance(source, str):
            from zkcoord.sources import open_source

            source = open_source(source)
        self.source = source
        self._zk: KazooClient | None = None
        self._channel = CoordinatorChannel(
            self._bootstrap_addresses,
            client_id,
            request_timeout_ms,
            unavailable=CoordinatorNotAvailableError,
            error_for=error_for,
        )

    # -- lifecycle -------------------------------------------------------------------------------------------

    def close(self) -> None:
        self._channel.close()
        if self._zk is not None:
            self._zk.stop()
            self._zk.close()
            self._zk = None
        if self._owns_source and self.source is not None:
            self.source.close()
            self.source = None

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    # -- consumer-group calls ----------------------------------------------------------------------------------

    def list_consumer_groups(self, states: Iterable[str] = ()) -> list[GroupListing]:
        """Groups of every live coordinator node (protocol type "consumer" or "") and legacy groups
        (children of ``/consumers``: "Stable" with live members under ``ids``, else "Empty"); by id, then kind."""
        wanted = list(states)
        listings: dict[tuple[str, str], GroupListing] = {}
        if self._has_coordinators():
            for node in self._live_nodes():
                for group in self._list_node_groups(node, wanted):
                    if group["protocol_type"] in CONSUMER_PROTOCOL_TYPES:
                        key = (group["group_id"], COORDINATOR)
                        listings[key] = GroupListing(
                            group["group_id"], COORDINATOR, group["group_state"], group["protocol_type"]
                        )
        if self.zookeeper_connect:
            zk = self._zookeeper()
            for group_id in _children(zk, layout.CONSUMERS_PATH):
                state = STABLE if _children(zk, layout.ids_path(group_id)) else EMPTY
                if not wanted or state in wanted:
                    listings[(group_id, LEGACY)] = GroupListing(group_id, LEGACY, state, "consumer")
        return [listings[key] for key in sorted(listings, key=_kind_order)]

    def describe_consumer_groups(self, group_ids: Iterable[str]) -> list[GroupDescription]:
        """One description per place each group exists in; GroupIdNotFoundError for a group that exists nowhere."""
        return [description for group_id in group_ids for description in self._locate(group_id).values()]

    def describe_consumer_group_offsets(self, group_ids: Iterable[str]) -> list[GroupOffsetsDescription]:
        """``describe --offsets``: each group's partitions with committed offset, log end, lag and owner."""
        results = []
        for group_id in group_ids:
            for kind, description in self._locate(group_id).items():
                committed = {tp: o.offset for tp, o in self._committed(group_id, kind).items()}
                assigned = {tp for member in description.members for tp in member.assignment}
                ends = self._end_offsets(sorted(assigned | set(committed))) or {}
                results.append(GroupOffsetsDescription(description, offset_rows(description, committed, ends)))
        return results

    def list_consumer_group_offsets(self, group_id: str) -> list[GroupOffsets]:
        """Committed offsets of the group, per place it exists in."""
        return [GroupOffsets(group_id, kind, self._committed(group_id, kind)) for kind in self._locate(group_id)]

    def delete_consumer_groups(self, group_ids: Iterable[str]) -> list[GroupResult]:
        """Delete each group where it exists; a group with live members is not deleted (GroupNotEmptyError)."""
        results = []
        for group_id in dict.fromkeys(group_ids):
            kinds = list(self._locate(group_id, missing_ok=True)) or [self._default_kind()]
            for kind in kinds:
                try:
                    if kind == COORDINATOR:
                        self._delete_coordinator_group(group_id)
                    else:
                        self._delete_legacy_group(group_id)
                    results.append(GroupResult(group_id, kind))
                except GroupAdminError as error:
                    results.append(GroupResult(group_id, kind, error))
        return results

    def alter_consumer_group_offsets(
        self, group_id: str, offsets: Mapping[TopicPartition | tuple[str, int], int | OffsetAndMetadata]
    ) -> list[str]:
        """Commit ``offsets`` for an inactive group (Empty or Dead; a legacy group without live members).
        A group that exists nowhere yet gets them as a coordinator group. Returns the kinds written."""
        values = {
            TopicPartition(*tp): value.offset if isinstance(value, OffsetAndMetadata) else int(value)
            for tp, value in offsets.items()
        }
        targets = self._reset_targets(group_id)
        for kind in targets:
            self._write_offsets(group_id, kind, values)
        return list(targets)

    def reset_offsets(
        self,
        group_id: str,
        spec: ResetSpec,
        partitions: PartitionsArg | None = None,
        execute: bool = False,
    ) -> list[ResetPlan]:
        """kafka-consumer-groups ``--reset-offsets``: plan (and with ``execute``, commit) new offsets.
        ``partitions`` None means every partition with a committed offset (``--all-topics``); a str is a whole
        topic. Refused (GroupNotEmptyError) unless the group is inactive everywhere it exists."""
        targets = self._reset_targets(group_id)
        phase = self._migration_phase(group_id)
        merged = self._effective_committed(group_id, phase) if phase is not None else None
        plans = []
        for kind in targets:
            # A migrating group is planned once, from what its readers see, and both stores get the result.
            committed = (
                merged if merged is not None else {tp: o.offset for tp, o in self._committed(group_id, kind).items()}
            )
            wanted = sorted(committed) if partitions is None else self._expand_partitions(partitions, kind)
            everything = sorted(set(wanted) | set(spec.plan))
            starts = self._start_offsets(everything)
            ends = self._end_offsets(everything)
            plan = plan_reset(spec, wanted, committed, starts, ends)
            plans.append(ResetPlan(group_id, kind, plan, executed=False))
        if execute:
            plans = [ResetPlan(p.group_id, p.kind, p.offsets, executed=True) for p in plans]
            for plan in plans:
                self._write_offsets(group_id, plan.kind, plan.offsets)
        return plans

    def remove_members(self, group_id: str, instance_ids: Iterable[str]) -> list[MemberRemoval]:
        """KIP-345 batch leave of static members by ``group.instance.id``; the group rebalances without them."""
        ids = list(dict.fromkeys(instance_ids))
        located = self._locate(group_id)
        if COORDINATOR not in located:
            raise GroupAdminError(
                f"Consumer group '{group_id}' is a legacy (ZooKeeper) group: it has no static members to remove."
            )
        members = [{"member_id": "", "group_instance_id": instance_id} for instance_id in ids]
        response, _ = self._call_coordinator(group_id, "LeaveGroup", group_id=group_id, members=members)
        if (code := _top_level(response)) != 0:
            raise error_for(code, response.get("error_message"))
        codes = {m["group_instance_id"]: m["error_code"] for m in response.get("members") or []}
        return [
            MemberRemoval(instance_id, error_for(codes[instance_id]) if codes.get(instance_id, 0) else None)
            for instance_id in ids
        ]

    def delete_consumer_group_offsets(self, group_id: str, partitions: PartitionsArg) -> list[OffsetDeletion]:
        """KIP-496 OffsetDelete: drop committed offsets of partitions the group is not subscribed to.
        A top-level refusal raises (GroupIdNotFoundError, GroupNotEmptyError); per-partition errors are returned."""
        results = []
        for kind in self._locate(group_id):
            wanted = self._expand_partitions(partitions, kind)
            if kind == COORDINATOR:
                outcome = self._delete_coordinator_offsets(group_id, wanted)
            else:
                outcome = self._delete_legacy_offsets(group_id, wanted)
            results.append(OffsetDeletion(group_id, kind, outcome))
        return results

    # -- locating a group --------------------------------------------------------------------------------------

    def _locate(self, group_id: str, missing_ok: bool = False) -> dict[str, GroupDescription]:
        """``{kind: description}`` of the places ``group_id`` exists in, coordinator first."""
        found = {}
        if self._has_coordinators():
            description = self._describe_coordinator_group(group_id)
            if description.state != DEAD:
                found[COORDINATOR] = description
        if self.zookeeper_connect:
            description = self._describe_legacy_group(group_id)
            if description is not None:
                found[LEGACY] = description
        if not found and not missing_ok:
            raise GroupIdNotFoundError(f"Consumer group '{group_id}' does not exist.")
        return found

    def _default_kind(self) -> str:
        """Where a group that exists nowhere goes: the coordinator, as Kafka; legacy with only ZooKeeper."""
        return COORDINATOR if self._has_coordinators() else LEGACY

    def _reset_targets(self, group_id: str) -> dict[str, GroupDescription | None]:
        """The places to reset: where the group exists (each must be inactive), else the default place."""
        located = self._locate(group_id, missing_ok=True)
        for description in located.values():
            if not description.is_inactive:
                raise GroupNotEmptyError(
                    f"Assignments can only be reset if the group '{group_id}'"
                    f"{' (legacy)' if description.kind == LEGACY else ''} is inactive, "
                    f"but the current state is {description.state}."
                )
        if self._migration_phase(group_id) is not None:
            # An explicit rewind of a migrating group writes both stores, so no reader sees a regression.
            return {COORDINATOR: located.get(COORDINATOR), LEGACY: located.get(LEGACY)}
        return dict(located) or {self._default_kind(): None}

    def _migration_phase(self, group_id: str) -> Phase | None:
        """The group's offset-migration phase (None: not migrating, or no ZooKeeper to ask)."""
        if self.zookeeper_connect is None:
            return None
        state, _ = read_state(self._zookeeper(), self.root, group_id)
        return None if state is None else state.phase

    def _effective_committed(self, group_id: str, phase: Phase) -> dict[TopicPartition, int]:
        """The offsets a member of a migrating group reads now (legacy rule of the phase: ZK, log or max)."""
        zk = {tp: o.offset for tp, o in self._legacy_offsets(group_id).items()}
        log = {tp: o.offset for tp, o in self._coordinator_offsets(group_id).items()}
        rule = RULES[phase].legacy_member.reads
        seen = {tp: read_offset(rule, zk.get(tp), log.get(tp)) for tp in sorted(set(zk) | set(log))}
        return {tp: offset for tp, offset in seen.items() if offset >= 0}

    # -- coordinator groups ------------------------------------------------------------------------------------

    def _describe_coordinator_group(self, group_id: str) -> GroupDescription:
        response, node = self._call_coordinator(
            group_id,
            "DescribeGroups",
            retriable=lambda r: _first_code(r, "groups") in RETRIABLE,
            groups=[group_id],
        )
        groups = response.get("groups") or []
        if not groups:
            raise error_for(_top_level(response) or ErrorCode.UNKNOWN_SERVER_ERROR, response.get("error_message"))
        group = groups[0]
        if group["error_code"] != 0:
            raise error_for(group["error_code"])
        consumer = group["protocol_type"] == "consumer"
        members = tuple(
            MemberDescription(
                member["member_id"],
                member.get("group_instance_id"),
                member.get("client_id"),
                member.get("client_host"),
                _assignment(group_id, member) if consumer else (),
            )
            for member in group.get("members") or []
        )
        ordered = tuple(sorted(members, key=lambda m: (m.group_instance_id or "", m.member_id)))
        return GroupDescription(
            group_id,
            COORDINATOR,
            group["group_state"],
            group["protocol_type"] or "",
            group.get("protocol_data") or "",
            ordered,
            node,
        )

    def _coordinator_offsets(self, group_id: str) -> dict[TopicPartition, OffsetAndMetadata]:
        response, _ = self._call_coordinator(group_id, "OffsetFetch", group_id=group_id, topics=None)
        if (code := _top_level(response)) != 0:
            raise error_for(code, response.get("error_message"))
        offsets = {}
        for topic in response.get("topics") or []:
            for partition in topic["partitions"]:
                if partition.get("error_code", 0) == 0 and partition["committed_offset"] >= 0:
                    offsets[TopicPartition(topic["name"], partition["partition_index"])] = OffsetAndMetadata(
                        partition["committed_offset"], partition.get("metadata") or ""
                    )
        return dict(sorted(offsets.items()))

    def _commit_coordinator_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        response, _ = self._call_coordinator(
            group_id,
            "OffsetCommit",
            retriable=_all_partitions_retriable,
            **simple_offset_commit(group_id, offsets),
        )
        if (code := _top_level(response)) != 0:
            raise error_for(code, response.get("error_message"))
        failed = {
            TopicPartition(t["name"], p["partition_index"]): p["error_code"]
            for t in response.get("topics") or []
            for p in t["partitions"]
            if p["error_code"] != 0
        }
        if failed:
            tp, code = next(iter(sorted(failed.items())))
            names = ", ".join(str(p) for p in sorted(failed))
            raise error_for(code, f"{error_for(code)} (committing offsets of group '{group_id}' for {names})")

    def _delete_coordinator_group(self, group_id: str) -> None:
        response, _ = self._call_coordinator(
            group_id,
            "DeleteGroups",
            retriable=lambda r: _first_code(r, "results") in RETRIABLE,
            groups_names=[group_id],
        )
        code = _first_code(response, "results")
        if code != 0:
            raise error_for(code, response.get("error_message"))

    def _delete_coordinator_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, GroupAdminError | None]:
        by_topic: dict[str, list[dict]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append({"partition_index": tp.partition})
        response, _ = self._call_coordinator(
            group_id,
            "OffsetDelete",
            group_id=group_id,
            topics=[{"name": name, "partitions": entries} for name, entries in by_topic.items()],
        )
        code = _top_level(response)
        if code == ErrorCode.NON_EMPTY_GROUP:
            raise GroupNotEmptyError(
                f"Deleting offsets of a consumer group '{group_id}' is forbidden if the group is not empty."
            )
        if code == ErrorCode.GROUP_ID_NOT_FOUND:
            raise GroupIdNotFoundError(f"Consumer group '{group_id}' does not exist.")
        if code == ErrorCode.UNSUPPORTED_VERSION:
            raise error_for(code, "The coordinator does not support OffsetDelete (UNSUPPORTED_VERSION).")
        codes = {
            TopicPartition(t["name"], p["partition_index"]): p["error_code"]
            for t in response.get("topics") or []
            for p in t.get("partitions") or []
        }
        if code != 0 and not any(codes.values()):
            raise error_for(code, response.get("error_message"))
        return {tp: error_for(codes[tp]) if codes.get(tp, 0) else None for tp in partitions}

    # -- legacy groups -----------------------------------------------------------------------------------------

    def _describe_legacy_group(self, group_id: str) -> GroupDescription | None:
        zk = self._zookeeper()
        snapshot = zk_admin.read_group(zk, group_id)
        if not snapshot.exists:
            return None
        live = sorted(set(snapshot.members) | set(snapshot.bad_members))
        owned: dict[str, list[TopicPartition]] = {}
        for tp, thread in snapshot.owners.items():
            owned.setdefault(_consumer_of_thread(thread), []).append(tp)
        members = tuple(MemberDescription(c, None, None, None, tuple(sorted(owned.get(c, ())))) for c in live)
        return GroupDescription(group_id, LEGACY, STABLE if live else EMPTY, "consumer", "", members, None)

    def _legacy_offsets(self, group_id: str) -> dict[TopicPartition, OffsetAndMetadata]:
        offsets = {}
        for topic, partition, offset in zk_admin.read_offsets(self._zookeeper(), group_id):
            if isinstance(offset, int):
                offsets[TopicPartition(topic, partition)] = OffsetAndMetadata(offset)
            else:
                log.warning("skipping an unreadable offset group=%s topic=%s partition=%d", group_id, topic, partition)
        return offsets

    def _delete_legacy_group(self, group_id: str) -> None:
        zk = self._zookeeper()
        if zk.exists(layout.group_path(group_id)) is None:
            raise GroupIdNotFoundError("The group id does not exist.")
        if _children(zk, layout.ids_path(group_id)):
            raise GroupNotEmptyError("The group is not empty.")
        try:
            zk.delete(layout.group_path(group_id), recursive=True)
        except NotEmptyError:  # a member registered meanwhile
            raise GroupNotEmptyError("The group is not empty.") from None
        except NoNodeError:
            pass

    def _delete_legacy_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, GroupAdminError | None]:
        zk = self._zookeeper()
        snapshot = zk_admin.read_group(zk, group_id)
        subscribed = {topic for subscription in snapshot.members.values() for topic in subscription}
        outcome: dict[TopicPartition, GroupAdminError | None] = {}
        for tp in partitions:
            if tp.topic in subscribed:
                outcome[tp] = GroupSubscribedToTopicError("The consumer group is actively subscribed to the topic")
                continue
            with contextlib.suppress(NoNodeError):
                zk.delete(layout.offset_path(group_id, tp.topic, tp.partition))
            outcome[tp] = None
        for topic in {tp.topic for tp, error in outcome.items() if error is None}:
            with contextlib.suppress(NoNodeError, NotEmptyError):
                zk.delete(layout.offsets_path(group_id, topic))  # only when no partition of it is left
        return outcome

    # -- shared by both kinds ----------------------------------------------------------------------------------

    def _committed(self, group_id: str, kind: str) -> dict[TopicPartition, OffsetAndMetadata]:
        return self._coordinator_offsets(group_id) if kind == COORDINATOR else self._legacy_offsets(group_id)

    def _write_offsets(self, group_id: str, kind: str, offsets: Mapping[TopicPartition, int]) -> None:
        if not offsets:
            return
        if kind == COORDINATOR:
            self._commit_coordinator_offsets(group_id, offsets)
            return
        self._check_topics_exist(offsets, LEGACY)
        entries = [(layout.offset_path(group_id, tp.topic, tp.partition), offset) for tp, offset in offsets.items()]
        zk_admin.import_offsets(self._zookeeper(), entries)

    def _expand_partitions(self, partitions: PartitionsArg, kind: str) -> list[TopicPartition]:
        """Topic names become every partition of the topic; UnknownTopicOrPartitionError for an unknown one."""
        expanded: list[TopicPartition] = []
        topics = []
        for item in partitions:
            if isinstance(item, str):
                topics.append(item)
            else:
                expanded.append(TopicPartition(*item))
        counts = self._partition_counts(topics, kind) if topics else {}
        for topic in topics:
            expanded.extend(TopicPartition(topic, p) for p in range(counts[topic]))
        return sorted(set(expanded))

    def _partition_counts(self, topics: Sequence[str], kind: str) -> dict[str, int]:
        """Partitions per topic: Metadata from a coordinator node, or ``/brokers/topics`` for legacy groups."""
        counts: dict[str, int] = {}
        if kind == COORDINATOR:
            response = self._channel.call_any_node("Metadata", topics=list(topics))
            for topic in response.get("topics") or []:
                if topic["error_code"] == 0:
                    counts[topic["name"]] = len(topic["partitions"])
        else:
            listed = zk_admin.list_topics(self._zookeeper())
            counts = {t: len(p) for t, p in listed.items() if t in topics and isinstance(p, list)}
        for topic in topics:
            if topic not in counts:
                raise UnknownTopicOrPartitionError(f"Topic '{topic}' does not exist.")
        return counts

    def _check_topics_exist(self, offsets: Mapping[TopicPartition, int], kind: str) -> None:
        """What OffsetCommit checks on a coordinator: each partition exists in ``/brokers/topics``."""
        counts = self._partition_counts(sorted({tp.topic for tp in offsets}), kind)
        unknown = [tp for tp in sorted(offsets) if tp.partition >= counts[tp.topic] or tp.partition < 0]
        if unknown:
            raise UnknownTopicOrPartitionError(f"This server does not host this topic-partition: {unknown[0]}")

    def _start_offsets(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        if self.source is None or not partitions:
            return {}
        return dict(self.source.beginning_offsets(partitions))

    def _end_offsets(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int] | None:
        if self.source is None:
            return None
        return dict(self.source.end_offsets(partitions)) if partitions else {}

    # -- wire protocol -----------------------------------------------------------------------------------------

    def _has_coordinators(self) -> bool:
        return self._bootstrap is not None or bool(self._discovered())

    def _discovered(self) -> list[Address]:
        if self.zookeeper_connect is None:
            return []
        return discover_nodes(self._zookeeper(), self.root)

    def _bootstrap_addresses(self) -> list[Address]:
        return list(self._bootstrap) if self._bootstrap is not None else self._discovered()

    def _live_nodes(self) -> list[Node]:
        """Every registered node: from ZooKeeper when discovering, else Metadata on a bootstrap node."""
        if self._bootstrap is None:
            registered = read_nodes(self._zookeeper(), self.root)
            return [Node(node_id, host, port) for node_id, (host, port) in sorted(registered.items())]
        response = self._channel.call_any_node("Metadata", topics=[])
        nodes = [Node(n["node_id"], n["host"], n["port"]) for n in response.get("nodes") or []]
        return sorted(nodes, key=lambda n: n.node_id)

    def _list_node_groups(self, node: Node, states: list[str]) -> list[dict]:
        """ListGroups on one node, again while it loads (14) until the deadline, then what it holds."""
        deadline = self._channel.deadline()
        backoff = self._channel.backoff()
        while True:
            try:
                response = self._channel.call((node.host, node.port), "ListGroups", states_filter=states)
            except Unreachable as error:
                if time.monotonic() + backoff > deadline:
                    raise CoordinatorNotAvailableError(f"ListGroups on node {node}: {error}") from None
            else:
                code = _top_level(response)
                if code == 0:
                    return response.get("groups") or []
                if code not in RETRIABLE:
                    raise error_for(code, response.get("error_message"))
                if time.monotonic() + backoff > deadline:
                    log.warning("node still loading, listing what it holds node=%s", node)
                    return response.get("groups") or []
            time.sleep(backoff)
            backoff = self._channel.backoff(backoff)

    def _call_coordinator(self, key: str, api: str, **kwargs) -> tuple[dict, Node]:
        """Send to the coordinator of group ``key`` until the answer is not retriable; (response, coordinator)."""
        response, (node_id, (host, port)) = self._channel.call_coordinator(key, api, **kwargs)
        return response, Node(node_id, host, port)

    # -- ZooKeeper ---------------------------------------------------------------------------------------------

    def _zookeeper(self) -> KazooClient:
        if self.zookeeper_connect is None:
            raise ConfigError("legacy groups need zookeeper_connect")
        if self._zk is None:
            client = KazooClient(hosts=self.zookeeper_connect, timeout=ZOOKEEPER_CONNECT_TIMEOUT_S)
            try:
                client.start(timeout=ZOOKEEPER_CONNECT_TIMEOUT_S)
            except KazooTimeoutError:
                client.close()
                raise GroupAdminError(
                    f"cannot connect to ZooKeeper at {self.zookeeper_connect} within {ZOOKEEPER_CONNECT_TIMEOUT_S:.0f}s"
                ) from None
            self._zk = client
        return self._zk


def _children(client: KazooClient, path: str) -> list[str]:
    try:
        return client.get_children(path)
    except NoNodeError:
        return []


def _kind_order(key: tuple[str, str]) -> tuple[str, int]:
    group_id, kind = key
    return group_id, 0 if kind == COORDINATOR else 1


def _first_code(response: dict, field: str) -> int:
    entries = response.get(field) or []
    return entries[0]["error_code"] if entries else _top_level(response) or ErrorCode.UNKNOWN_SERVER_ERROR


def _all_partitions_retriable(response: dict) -> bool:
    """OffsetCommit has no top-level error: a coordinator problem shows on every partition."""
    codes = {p["error_code"] for t in response.get("topics") or [] for p in t["partitions"]}
    return bool(codes) and codes <= RETRIABLE


def _consumer_of_thread(thread_id: str) -> str:
    """0.8.2 owner znodes hold ``<consumer id>-<thread number>``; CONSUMER-ID is the consumer id."""
    consumer, separator, number = thread_id.rpartition("-")
    return consumer if separator and number.isdigit() else thread_id


def _assignment(group_id: str, member: dict) -> tuple[TopicPartition, ...]:
    data = member.get("member_assignment") or b""
    if not data:
        return ()
    try:
        return tuple(decode_assignment(data).assigned_partitions)
    except ConsumerProtocolError as error:
        log.warning("unreadable assignment group=%s member=%s error=%s", group_id, member.get("member_id"), error)
        return ()
