"""``AdminClient``: consumer-group administration over coordinator groups and legacy (0.8.2 ZooKeeper) groups.

A group id can exist in both places; every result says which one it comes from (``kind``), coordinator
first. This module locates groups, decides where a call applies (reset targets, a migrating group's
stores, partitions to expand) and merges the answers; :mod:`zkcoord.admin.coordinator_groups` talks to the
coordinator nodes and :mod:`zkcoord.admin.legacy_groups` to ZooKeeper. With ``protocol="kafka"`` the
coordinator groups are those of any Kafka-protocol cluster (:mod:`zkcoord.admin.kafka_groups`), which also
gives the log offsets, and there are no legacy groups.

IO: through those two, the record source, and reads of node registrations and migration state on the
ZooKeeper client of the legacy side. Must not import the CLI, the renderer, the server or gevent.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from zkcoord.admin.broker_offsets import BROKER_TIMEOUT_MS, BrokerOffsets
from zkcoord.admin.coordinator_groups import CoordinatorGroups
from zkcoord.admin.kafka_groups import KafkaGroups
from zkcoord.admin.legacy_groups import LegacyGroups
from zkcoord.admin.migrating import KIND_READS_FROM, merge_listings, needs_coordinator, reads_from, reads_rule
from zkcoord.admin.model import (
    COORDINATOR,
    LEGACY,
    UNKNOWN_STATE,
    GroupAdminError,
    GroupDescription,
    GroupListing,
    GroupOffsets,
    GroupOffsetsDescription,
    GroupResult,
    GroupsOverview,
    MemberRemoval,
    Node,
    OffsetAndMetadata,
    OffsetDeletion,
    ResetPlan,
    ResetSpec,
    mixed_group,
    offset_rows,
    plan_reset,
)
from zkcoord.config import parse_bootstrap_servers
from zkcoord.errors import (
    ConfigError,
    CoordinatorNotAvailableError,
    CoordinatorResponseError,
    GroupIdNotFoundError,
    GroupNotEmptyError,
    UnknownTopicOrPartitionError,
)
from zkcoord.migration.phases import LOG, RULES, ZK, MigrationStateError, Phase, read_offset
from zkcoord.migration.store import read_bridge, read_state
from zkcoord.model import Address, GroupState, TopicPartition
from zkcoord.security.client import ClientSecurity
from zkcoord.zk import layout
from zkcoord.zk.nodes import discover_nodes, read_nodes

log = logging.getLogger(__name__)

PartitionsArg = Iterable[TopicPartition | tuple[str, int] | str]
MSGPACK, KAFKA = "msgpack", "kafka"  # the protocols bootstrap_servers may speak


class AdminClient:
    """Kafka's ``KafkaAdminClient`` consumer-group calls, for coordinator groups and legacy groups.

    ``bootstrap_servers`` ("h:p,h:p") reach the coordinator nodes; without it they are discovered under
    ``root`` in ZooKeeper. ``zookeeper_connect`` ("h:p[,h:p][/chroot]") is needed for legacy groups.
    ``source`` is a record source (or a spec for ``zkcoord.sources.open_source``) giving log-start and
    log-end offsets; without one they come from the brokers registered in that ZooKeeper (``/brokers/ids``), and
    are unknown when none is registered or answers (``warn`` is told why, once; ``broker_offsets.problem`` says it).

    ``protocol="kafka"``: ``bootstrap_servers`` are brokers of any Kafka-protocol coordinator (a Kafka
    cluster, zkcoord's Kafka listener), spoken to through kafka-python; log offsets come from them
    (ListOffsets). It takes neither ``zookeeper_connect`` nor ``source``.

    ``security``: how to reach the coordinators, as Kafka client properties (``{"security.protocol": "SASL_SSL",
    "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": ..., "sasl.password": ..., "ssl.ca.location": ...}``, what
    ``--command-config`` holds) or a :class:`~zkcoord.security.client.ClientSecurity`; plaintext without it.
    """

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str] | None = None,
        zookeeper_connect: str | None = None,
        root: str = layout.DEFAULT_ROOT,
        source=None,
        request_timeout_ms: int = 30000,
        client_id: str = "zkcoord-admin",
        protocol: str = MSGPACK,
        security: ClientSecurity | Mapping[str, object] | None = None,
        warn: Callable[[str], None] | None = None,
    ):
        if protocol not in (MSGPACK, KAFKA):
            raise ConfigError(f"AdminClient protocol {protocol!r}: use {MSGPACK!r} or {KAFKA!r}")
        if protocol == KAFKA and (not bootstrap_servers or zookeeper_connect or source is not None):
            raise ConfigError("AdminClient(protocol='kafka') takes bootstrap_servers only (no ZooKeeper, no source)")
        if not bootstrap_servers and not zookeeper_connect:
            raise ConfigError("AdminClient needs bootstrap_servers, zookeeper_connect or both")
        security = ClientSecurity.of(security)
        self._bootstrap = parse_bootstrap_servers(bootstrap_servers) if bootstrap_servers else None
        self.zookeeper_connect = zookeeper_connect or None
        self.root = root
        self.request_timeout_ms = request_timeout_ms
        self.client_id = client_id
        self.protocol = protocol
        self._warn = warn or log.warning
        self._owns_source = isinstance(source, str)
        if isinstance(source, str):
            from zkcoord.sources import open_source

            source = open_source(source)
        self.source = source
        self._legacy_groups = LegacyGroups(zookeeper_connect) if zookeeper_connect else None
        self.broker_offsets = None
        if zookeeper_connect and source is None:
            self.broker_offsets = BrokerOffsets(self._zookeeper, min(request_timeout_ms, BROKER_TIMEOUT_MS), warn)
        if protocol == KAFKA:
            servers = bootstrap_servers if isinstance(bootstrap_servers, str) else ",".join(bootstrap_servers)
            options = security.kafka_python_options()
            self._coordinators = KafkaGroups(servers, client_id, request_timeout_ms, options)
            self.source = self._coordinators
        else:
            self._coordinators = CoordinatorGroups(
                self._bootstrap_addresses, client_id, request_timeout_ms, security.connector()
            )

    # -- lifecycle -------------------------------------------------------------------------------------------

    def close(self) -> None:
        self._coordinators.close()
        if self._legacy_groups is not None:
            self._legacy_groups.close()
        if self.broker_offsets is not None:
            self.broker_offsets.close()
        if self._owns_source and self.source is not None:
            self.source.close()
            self.source = None

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    # -- consumer-group calls ----------------------------------------------------------------------------------

    def list_consumer_groups(self, states: Iterable[str] = ()) -> list[GroupListing]:
        """:meth:`list_groups`' listings; CoordinatorNotAvailableError when a coordinator node did not answer."""
        overview = self.list_groups(states)
        if overview.unreachable:
            raise CoordinatorNotAvailableError("; ".join(overview.unreachable))
        return list(overview.listings)

    def list_groups(self, states: Iterable[str] = ()) -> GroupsOverview:
        """Groups of every coordinator node (protocol type "consumer" or "") and legacy groups (children of
        ``/consumers``: "Stable" with live members under ``ids``, else "Empty"), by id then kind; a group with a
        migration state once, with its phase and the store its readers use. Nodes that do not answer are named in
        ``unreachable``; a migrating group they may hold is listed in state Unknown. ``states`` filters (a group
        in state Unknown is always listed)."""
        wanted = set(states)
        coordinator: dict[str, GroupListing] = {}
        unreachable: list[str] = []
        if self._has_coordinators():
            try:
                nodes = self._live_nodes()
            except CoordinatorNotAvailableError as error:
                nodes, unreachable = [], [str(error)]
            for node in nodes:
                try:
                    coordinator.update((g.group_id, g) for g in self._coordinators.list([node], []))
                except CoordinatorNotAvailableError as error:
                    unreachable.append(f"node {node} did not answer: {error}")
        legacy = {g.group_id: g for g in self._legacy().list([])} if self.zookeeper_connect else {}
        phases, bridged = self._migrating_groups()
        if not self._has_coordinators() and any(needs_coordinator(phase) for phase in phases.values()):
            unreachable.append(self._no_node_registered())
        states_read = self.zookeeper_connect is not None or self.protocol == KAFKA
        if coordinator and not states_read:
            self._warn(
                "no ZooKeeper given, so no migration state was read: a coordinator group may be migrating, and its "
                "PHASE and READS-FROM are unknown (give --zookeeper to read them)"
            )
        listings = merge_listings(
            coordinator, legacy, phases, bridged, coordinators_answered=not unreachable, states_read=states_read
        )
        shown = [g for g in listings if not wanted or g.state in wanted or g.state == UNKNOWN_STATE]
        return GroupsOverview(tuple(shown), tuple(unreachable))

    def describe_consumer_groups(self, group_ids: Iterable[str]) -> list[GroupDescription]:
        """One description per place each group exists in, a mixed group's as one (kind MIXED, each member with
        its kind); GroupIdNotFoundError for a group that exists nowhere."""
        return [description for group_id in group_ids for description in self._describe(group_id).values()]

    def describe_consumer_group_offsets(self, group_ids: Iterable[str]) -> list[GroupOffsetsDescription]:
        """``describe --offsets``: each group's partitions with committed offset, log end, lag and owner; a mixed
        group's offsets are those its readers see (the phase's rule)."""
        results = []
        for group_id in group_ids:
            for kind, description in self._describe(group_id).items():
                if description.phase is not None:
                    committed = self._readers_committed(group_id, description)
                else:
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
                    self._delete_group(group_id, kind)
                    results.append(GroupResult(group_id, kind))
                except CoordinatorResponseError as error:
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
        return self._coordinators.remove_members(group_id, ids)

    def delete_consumer_group_offsets(self, group_id: str, partitions: PartitionsArg) -> list[OffsetDeletion]:
        """KIP-496 OffsetDelete: drop committed offsets of partitions the group is not subscribed to.
        A top-level refusal raises (GroupIdNotFoundError, GroupNotEmptyError); per-partition errors are returned."""
        results = []
        for kind in self._locate(group_id):
            wanted = self._expand_partitions(partitions, kind)
            if kind == COORDINATOR:
                outcome = self._coordinators.delete_offsets(group_id, wanted)
            else:
                outcome = self._legacy().delete_offsets(group_id, wanted)
            results.append(OffsetDeletion(group_id, kind, outcome))
        return results

    # -- locating a group --------------------------------------------------------------------------------------

    def _locate(self, group_id: str, missing_ok: bool = False) -> dict[str, GroupDescription]:
        """``{kind: description}`` of the places ``group_id`` exists in, coordinator first."""
        found, unreachable = self._find(group_id)
        if unreachable is not None:
            raise CoordinatorNotAvailableError(unreachable)
        if not found and not missing_ok:
            raise GroupIdNotFoundError(f"Consumer group '{group_id}' does not exist.")
        return found

    def _find(self, group_id: str) -> tuple[dict[str, GroupDescription], str | None]:
        """As :meth:`_locate` without its errors, and why the group's coordinator could not be asked (None: it
        answered, or there are no coordinators)."""
        found, unreachable = {}, None
        if self._has_coordinators():
            try:
                description = self._coordinators.describe(group_id)
            except CoordinatorNotAvailableError as error:
                unreachable = str(error)
            else:
                if description.state != GroupState.DEAD:
                    found[COORDINATOR] = description
        if self.zookeeper_connect:
            description = self._legacy().describe(group_id)
            if description is not None:
                found[LEGACY] = description
        return found, unreachable

    def _describe(self, group_id: str) -> dict[str, GroupDescription]:
        """As :meth:`_locate`, but a group with a migration state is one description (MIXED with the bridge, else
        MIGRATING) with its phase and the store its readers use, also when its coordinator does not answer (then
        in state Unknown, saying why). A group that is not migrating is described where it is found, with the
        coordinator's failure on its legacy description; CoordinatorNotAvailableError when nothing is found."""
        found, unreachable = self._find(group_id)
        phase = self._migration_phase(group_id)
        if phase is None:
            if unreachable is not None and not found:
                raise CoordinatorNotAvailableError(unreachable)
            if not found:
                raise GroupIdNotFoundError(f"Consumer group '{group_id}' does not exist.")
            return {
                kind: replace(d, reads_from=KIND_READS_FROM[kind], unreachable=unreachable) for kind, d in found.items()
            }
        if unreachable is None and not self._has_coordinators() and needs_coordinator(phase):
            unreachable = self._no_node_registered()
        legacy = found.get(LEGACY) or GroupDescription(group_id, LEGACY, GroupState.EMPTY, "consumer", "", (), None)
        bridge = read_bridge(self._zookeeper(), self.root, group_id)
        merged = replace(
            mixed_group(legacy, found.get(COORDINATOR), bridge),
            phase=phase.name,
            reads_from=reads_from(phase),
            unreachable=unreachable,
        )
        if unreachable is not None and needs_coordinator(phase):
            merged = replace(merged, state=UNKNOWN_STATE)  # its coordinator members are unknown
        return {merged.kind: merged}

    def _readers_committed(self, group_id: str, description: GroupDescription) -> dict[TopicPartition, int | None]:
        """The offsets a migrating group's readers see: ZooKeeper's where they read only ZooKeeper (no coordinator
        asked); with its coordinator unreachable, ZooKeeper's where they read the larger of both (then a lower
        bound), None (unknown) where they read the log."""
        phase = Phase[description.phase]
        if description.unreachable is None and reads_rule(phase) != ZK:
            return self._effective_committed(group_id, phase)
        zookeeper = {tp: o.offset for tp, o in self._committed(group_id, LEGACY).items()}
        return dict.fromkeys(zookeeper) if reads_rule(phase) == LOG else zookeeper

    def _migrating_groups(self) -> tuple[dict[str, Phase | None], set[str]]:
        """The phase of every group with a migration state (None: unreadable, which ``warn`` is told), and the
        groups with a mixed-group bridge."""
        if self.zookeeper_connect is None:
            return {}, set()
        zk = self._zookeeper()
        phases = {}
        with contextlib.suppress(NoNodeError):
            for group_id in zk.get_children(layout.migration_groups_path(self.root)):
                try:
                    state, _ = read_state(zk, self.root, group_id)
                except MigrationStateError as error:
                    self._warn(f"{error}; the PHASE and READS-FROM of group '{group_id}' are unknown")
                    phases[group_id] = None
                    continue
                if state is not None:
                    phases[group_id] = state.phase
        bridged: set[str] = set()
        with contextlib.suppress(NoNodeError):
            bridged.update(zk.get_children(layout.bridge_groups_path(self.root)))
        return phases, bridged

    def legacy_offset_writes(self, group_id: str) -> dict[TopicPartition, int]:
        """ZooKeeper's id of the last write of each of the group's legacy offsets: it moves with every commit a
        0.8.2 consumer makes, and only then (it writes only offsets that changed)."""
        return self._legacy().offset_writes(group_id)

    def no_coordinator_node(self) -> str | None:
        """Why no coordinator node can be asked: none is given and none is registered (None: one is)."""
        return None if self._has_coordinators() else self._no_node_registered()

    def _no_node_registered(self) -> str:
        return f"no coordinator node is registered under {self.root} in ZooKeeper at {self.zookeeper_connect}"

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
        zk = {tp: o.offset for tp, o in self._legacy().committed(group_id).items()}
        log = {tp: o.offset for tp, o in self._coordinators.committed(group_id).items()}
        rule = RULES[phase].legacy_member.reads
        seen = {tp: read_offset(rule, zk.get(tp), log.get(tp)) for tp in sorted(set(zk) | set(log))}
        return {tp: offset for tp, offset in seen.items() if offset >= 0}

    # -- either kind -------------------------------------------------------------------------------------------

    def _committed(self, group_id: str, kind: str) -> dict[TopicPartition, OffsetAndMetadata]:
        if kind == COORDINATOR:
            return self._coordinators.committed(group_id)
        return self._legacy().committed(group_id)

    def _write_offsets(self, group_id: str, kind: str, offsets: Mapping[TopicPartition, int]) -> None:
        if not offsets:
            return
        if kind == COORDINATOR:
            self._coordinators.commit(group_id, offsets)
            return
        self._check_topics_exist(offsets, LEGACY)
        self._legacy().write_offsets(group_id, offsets)

    def _delete_group(self, group_id: str, kind: str) -> None:
        if kind == COORDINATOR:
            self._coordinators.delete(group_id)
        else:
            self._legacy().delete(group_id)

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
        if kind == COORDINATOR:
            counts = self._coordinators.partition_counts(topics)
        else:
            counts = self._legacy().partition_counts(topics)
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
        if self._log_offsets() is None or not partitions:
            return {}
        return dict(self._log_offsets().beginning_offsets(partitions) or {})

    def _end_offsets(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int] | None:
        if self._log_offsets() is None:
            return None
        return self._log_offsets().end_offsets(partitions) if partitions else {}

    def _log_offsets(self):
        """Where log offsets come from: the record source, else the brokers registered in ZooKeeper."""
        return self.source if self.source is not None else self.broker_offsets

    # -- where the coordinator nodes and ZooKeeper are ---------------------------------------------------------

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
        return self._coordinators.nodes()

    def _legacy(self) -> LegacyGroups:
        if self._legacy_groups is None:
            raise ConfigError("legacy groups need zookeeper_connect")
        return self._legacy_groups

    def _zookeeper(self) -> KazooClient:
        return self._legacy().zookeeper()
