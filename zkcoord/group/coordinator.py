"""Kafka's classic group coordinator as a deterministic state machine (group-coordinator.md §0–§7, §9.4–§9.7).

Requests come in as normalized wire-protocol maps (wire-protocol.md §3) with a responder and ``now_ms``.
Handlers change memory, answer through responders (at once or later: a parked JoinGroup or SyncGroup),
queue record appends (:attr:`GroupCoordinator.appends`, each with a completion callback) and schedule
keyed timers (:attr:`GroupCoordinator.timers`). A runtime — the test harness or the server node — runs
the appends against a log, calls their callbacks, and fires due timers; state that must be durable
changes only in those callbacks (§9.4). Replaying the appended records (:meth:`load_partition`)
rebuilds every group as Kafka's loader does.

Pure: must not import gevent, kazoo, sockets, threads or a clock.
"""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from zkcoord.assign.java import java_string_hash
from zkcoord.errors import ErrorCode
from zkcoord.group.config import NEW_MEMBER_JOIN_TIMEOUT_MS, CoordinatorConfig
from zkcoord.group.model import Group, Member, Protocols, Responder
from zkcoord.group.state import COMPLETING_REBALANCE, DEAD, EMPTY, PREPARING_REBALANCE, STABLE
from zkcoord.group.timers import Timers
from zkcoord.model import TopicPartition
from zkcoord.offsets.records import (
    NO_EXPIRE_TIMESTAMP,
    GroupMetadataKey,
    OffsetCommitKey,
    OffsetCommitValue,
    RecordKey,
    RecordValue,
)
from zkcoord.offsets.retention import expired_offsets
from zkcoord.offsets.store import CommittedOffset, OffsetStore

log = logging.getLogger(__name__)

E = ErrorCode
AppendCallback = Callable[[str | None, int, int], None]  # (Kafka error name or None, base offset, now_ms)

# §9.5: how an append error reaches the client, for a group-metadata write and for an offset commit.
_GROUP_WRITE_ERRORS = {
    "UNKNOWN_TOPIC_OR_PARTITION": E.COORDINATOR_NOT_AVAILABLE,
    "NOT_ENOUGH_REPLICAS": E.COORDINATOR_NOT_AVAILABLE,
    "NOT_ENOUGH_REPLICAS_AFTER_APPEND": E.COORDINATOR_NOT_AVAILABLE,
    "NOT_LEADER_OR_FOLLOWER": E.NOT_COORDINATOR,
    "KAFKA_STORAGE_ERROR": E.NOT_COORDINATOR,
    "REQUEST_TIMED_OUT": E.REBALANCE_IN_PROGRESS,
    "MESSAGE_TOO_LARGE": E.UNKNOWN_SERVER_ERROR,
    "RECORD_LIST_TOO_LARGE": E.UNKNOWN_SERVER_ERROR,
    "INVALID_FETCH_SIZE": E.UNKNOWN_SERVER_ERROR,
}
_OFFSET_COMMIT_ERRORS = {
    **_GROUP_WRITE_ERRORS,
    "REQUEST_TIMED_OUT": E.REQUEST_TIMED_OUT,
    "MESSAGE_TOO_LARGE": E.INVALID_COMMIT_OFFSET_SIZE,
    "RECORD_LIST_TOO_LARGE": E.INVALID_COMMIT_OFFSET_SIZE,
    "INVALID_FETCH_SIZE": E.INVALID_COMMIT_OFFSET_SIZE,
}


def mapped_append_error(error_name: str, table: Mapping[str, ErrorCode]) -> int:
    """§9.5: the group error for an append error; unknown names pass through as Kafka's code, else -1."""
    if error_name in table:
        return int(table[error_name])
    return int(E[error_name]) if error_name in E.__members__ else int(E.UNKNOWN_SERVER_ERROR)


@functools.lru_cache(maxsize=65536)
def partition_for(group_id: str, num_partitions: int) -> int:
    """§9.1 / wire-protocol §6: ``kafka_abs(java_string_hash(group_id)) % num_partitions``."""
    code = java_string_hash(group_id)
    return (0 if code == -(2**31) else abs(code)) % num_partitions


def random_member_id(prefix: str) -> str:
    """Kafka's member-id format: ``<client id or instance id>-<UUID4>`` (§0.3)."""
    return f"{prefix}-{uuid.uuid4()}"


@dataclass(frozen=True)
class AppendRequest:
    """Records to append to offsets partition ``partition`` as one batch; ``on_complete`` runs when it is done."""

    partition: int
    records: list[tuple[RecordKey, RecordValue | None]]
    on_complete: AppendCallback


def join_response(error: int, member_id: str = "", **fields) -> dict:
    """A JoinGroup response; error responses carry Kafka's defaults (§2.1)."""
    response = {
        "error_code": int(error),
        "generation_id": -1,
        "protocol_type": None,
        "protocol_name": None,
        "leader": "",
        "member_id": member_id,
        "members": [],
    }
    response.update(fields)
    return response


def sync_response(error: int, protocol_type=None, protocol_name=None, assignment: bytes = b"") -> dict:
    return {
        "error_code": int(error),
        "protocol_type": protocol_type,
        "protocol_name": protocol_name,
        "assignment": assignment,
    }


def _error_only(error: int) -> dict:
    return {"error_code": int(error)}


def _metadata_length(metadata: str) -> int:
    """§0.2: Kafka compares the metadata's length in UTF-16 code units, not bytes."""
    return len(metadata.encode("utf-16-le")) // 2


class GroupCoordinator:
    """Every group of the offsets partitions this coordinator owns."""

    def __init__(
        self,
        config: CoordinatorConfig,
        now_ms: int = 0,
        new_member_id: Callable[[str], str] = random_member_id,
    ):
        self.config = config
        self.groups: dict[str, Group] = {}
        self.owned: set[int] = set()
        self.loading: set[int] = set()
        self.active = True
        self.timers = Timers()
        self.appends: list[AppendRequest] = []
        self.topics: dict[str, int] | None = None  # None: every topic is taken to exist
        self.new_member_id = new_member_id
        first_expiry = now_ms + config.offsets_retention_check_interval_ms
        self.timers.schedule(("offset-expiry",), first_expiry, self._on_expiry_due)
        self._handlers = {
            "JoinGroup": self.handle_join_group,
            "SyncGroup": self.handle_sync_group,
            "Heartbeat": self.handle_heartbeat,
            "LeaveGroup": self.handle_leave_group,
            "OffsetCommit": self.handle_offset_commit,
            "OffsetFetch": self.handle_offset_fetch,
            "DescribeGroups": self.handle_describe_groups,
            "ListGroups": self.handle_list_groups,
            "DeleteGroups": self.handle_delete_groups,
            "OffsetDelete": self.handle_offset_delete,
        }

    # -- entry points -----------------------------------------------------------------------------------------------

    def handles(self, api: str) -> bool:
        return api in self._handlers

    def handle(self, request: dict, respond: Responder, now_ms: int, client_host: str = "/127.0.0.1") -> None:
        """Handle one normalized group request; ``respond`` is called once, now or later."""
        self._handlers[request["api"]](request, respond, now_ms, client_host)

    def fire_due_timers(self, now_ms: int) -> int:
        """Run every timer whose deadline ``now_ms`` has passed, earliest first; return how many ran."""
        fired = 0
        while (action := self.timers.pop_due(now_ms)) is not None:
            action(now_ms)
            fired += 1
        return fired

    def take_appends(self) -> list[AppendRequest]:
        appends, self.appends = self.appends, []
        return appends

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.config.offsets_topic_num_partitions)

    # -- §0.4 -------------------------------------------------------------------------------------------------------

    def _group_status(self, group_id: str) -> ErrorCode | None:
        """validateGroupStatus after the id check: 15, then 14 (loading comes before ownership), then 16."""
        if not self.active:
            return E.COORDINATOR_NOT_AVAILABLE
        partition = self.partition_for(group_id)
        if partition in self.loading:
            return E.COORDINATOR_LOAD_IN_PROGRESS
        if partition not in self.owned:
            return E.NOT_COORDINATOR
        return None

    def _new_group(self, group_id: str, now_ms: int) -> Group:
        group = Group(group_id, self.partition_for(group_id), EMPTY, now_ms)
        self.groups[group_id] = group
        return group

    # -- timers -----------------------------------------------------------------------------------------------------

    def _schedule_session(self, group: Group, member: Member, now_ms: int, timeout_ms: int | None = None) -> None:
        timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
        member_id = member.member_id
        self.timers.schedule(
            ("session", group.group_id, member_id),
            now_ms + timeout,
            lambda now: self._on_session_expired(group, member_id, now),
        )

    def _cancel_session(self, group: Group, member_id: str) -> None:
        self.timers.cancel(("session", group.group_id, member_id))

    def _on_session_expired(self, group: Group, member_id: str, now_ms: int) -> None:
        """§5.2: a new member is removed; a parked one survives; anyone else is removed."""
        member = group.members.get(member_id)
        if group.is_dead() or member is None or self.groups.get(group.group_id) is not group:
            return
        if not member.is_new and (member.awaiting_join is not None or member.awaiting_sync is not None):
            return
        log.info("session expired group=%s member=%s", group.group_id, member_id)
        self._remove_member_and_update_group(group, member, now_ms)

    def _on_pending_member_expired(self, group: Group, member_id: str, now_ms: int) -> None:
        """§5.4: drop the MEMBER_ID_REQUIRED id and see whether the join can complete."""
        if member_id in group.pending_members and member_id not in group.members:
            group.pending_members.discard(member_id)
            if group.state == PREPARING_REBALANCE:
                self._maybe_complete_join(group, now_ms)

    # -- JoinGroup (§2) ---------------------------------------------------------------------------------------------

    def handle_join_group(self, request: dict, respond: Responder, now_ms: int, client_host: str) -> None:
        group_id = request["group_id"]
        member_id = request["member_id"]
        if not group_id:
            return respond(join_response(E.INVALID_GROUP_ID, member_id))
        if (error := self._group_status(group_id)) is not None:
            return respond(join_response(error, member_id))
        session_timeout = request["session_timeout_ms"]
        if not (
            self.config.group_min_session_timeout_ms <= session_timeout <= self.config.group_max_session_timeout_ms
        ):
            return respond(join_response(E.INVALID_SESSION_TIMEOUT, member_id))
        group = self.groups.get(group_id)
        if member_id == "":
            if group is None:
                # Created before the later checks, so it stays cached (Empty) even if this join fails (§2.2 step 3).
                group = self._new_group(group_id, now_ms)
        elif group is None:
            return respond(join_response(E.UNKNOWN_MEMBER_ID, member_id))
        if not self._accept_joining_member(group, member_id):
            member = group.members.get(member_id)
            if member is not None:
                group.remove(member_id)
                self._cancel_session(group, member_id)
            respond(join_response(E.GROUP_MAX_SIZE_REACHED, ""))
        elif member_id == "":
            self._join_unknown_member(group, request, respond, now_ms, client_host)
        else:
            self._join_known_member(group, request, respond, now_ms, client_host)
        if group.state == PREPARING_REBALANCE:
            self._maybe_complete_join(group, now_ms)

    def _accept_joining_member(self, group: Group, member_id: str) -> bool:
        """§2.2 step 4 (GC ``acceptJoiningMember``), with the request's member id."""
        max_size = self.config.group_max_size
        member = group.members.get(member_id)
        if group.state in (EMPTY, DEAD):
            return True
        if group.state == PREPARING_REBALANCE:
            return (member is not None and member.awaiting_join is not None) or group.awaiting_join_count() < max_size
        return member is not None or len(group.members) < max_size

    @staticmethod
    def _protocols(request: dict) -> Protocols:
        return tuple((protocol["name"], protocol["metadata"]) for protocol in request["protocols"])

    def _join_unknown_member(
        self, group: Group, request: dict, respond: Responder, now_ms: int, client_host: str
    ) -> None:
        """§2.3 (GC ``doUnknownJoinGroup``)."""
        if group.is_dead():
            return respond(join_response(E.COORDINATOR_NOT_AVAILABLE, ""))
        protocols = self._protocols(request)
        if not group.supports_protocols(request["protocol_type"], [name for name, _ in protocols]):
            return respond(join_response(E.INCONSISTENT_GROUP_PROTOCOL, ""))
        instance_id = request["group_instance_id"]
        client_id = request["client_id"] or ""
        new_id = self.new_member_id(instance_id if instance_id is not None else client_id)
        if instance_id is not None and instance_id in group.static_members:
            self._replace_static_member(group, instance_id, new_id, protocols, respond, now_ms)
        elif instance_id is None:
            # KIP-394: hand out the id and wait for the member to come back with it; the state stays as it is.
            group.pending_members.add(new_id)
            self.timers.schedule(
                ("pending", group.group_id, new_id),
                now_ms + request["session_timeout_ms"],
                lambda now: self._on_pending_member_expired(group, new_id, now),
            )
            respond(join_response(E.MEMBER_ID_REQUIRED, new_id))
        else:
            self._add_member_and_rebalance(group, new_id, request, protocols, respond, now_ms, client_host)

    def _join_known_member(
        self, group: Group, request: dict, respond: Responder, now_ms: int, client_host: str
    ) -> None:
        """§2.4 (GC ``doJoinGroup``)."""
        member_id = request["member_id"]
        instance_id = request["group_instance_id"]
        if group.is_dead():
            return respond(join_response(E.COORDINATOR_NOT_AVAILABLE, member_id))
        protocols = self._protocols(request)
        if not group.supports_protocols(request["protocol_type"], [name for name, _ in protocols]):
            return respond(join_response(E.INCONSISTENT_GROUP_PROTOCOL, member_id))
        if member_id in group.pending_members and member_id not in group.members:
            if instance_id is not None:
                # Kafka 2.8 throws IllegalStateException here: a pending id is dynamic by construction.
                return respond(
                    join_response(E.UNKNOWN_SERVER_ERROR, member_id, error_message="a pending member id is dynamic")
                )
            return self._add_member_and_rebalance(group, member_id, request, protocols, respond, now_ms, client_host)
        if group.is_static_member_fenced(member_id, instance_id):
            return respond(join_response(E.FENCED_INSTANCE_ID, member_id))
        member = group.members.get(member_id)
        if member is None or (instance_id is not None and instance_id not in group.static_members):
            return respond(join_response(E.UNKNOWN_MEMBER_ID, member_id))
        if group.state == PREPARING_REBALANCE:
            group.update_protocols(member, protocols, respond)
        elif group.state == COMPLETING_REBALANCE:
            if member.protocols == protocols:
                respond(self._current_generation_response(group, member, with_members=member_id == group.leader_id))
            else:
                group.update_protocols(member, protocols, respond)
                self._prepare_rebalance(group, now_ms)
        elif group.state == STABLE:
            if member_id == group.leader_id or member.protocols != protocols:
                # The leader may force a rebalance, e.g. after a topic metadata change (§2.4 step 6).
                group.update_protocols(member, protocols, respond)
                self._prepare_rebalance(group, now_ms)
            else:
                respond(self._current_generation_response(group, member, with_members=False))
        else:
            respond(join_response(E.UNKNOWN_MEMBER_ID, member_id))

    def _current_generation_response(self, group: Group, member: Member, with_members: bool) -> dict:
        return join_response(
            E.NONE,
            member.member_id,
            generation_id=group.generation,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader=group.leader_id or "",
            members=self._member_list(group) if with_members else [],
        )

    @staticmethod
    def _member_list(group: Group) -> list[dict]:
        return [
            {
                "member_id": member.member_id,
                "group_instance_id": member.group_instance_id,
                "metadata": member.metadata(group.protocol_name),
            }
            for member in group.members.values()
        ]

    def _add_member_and_rebalance(
        self,
        group: Group,
        member_id: str,
        request: dict,
        protocols: Protocols,
        respond: Responder,
        now_ms: int,
        client_host: str,
    ) -> None:
        """§2.6 (GC ``addMemberAndRebalance``)."""
        instance_id = request["group_instance_id"]
        member = Member(
            member_id=member_id,
            group_instance_id=instance_id,
            client_id=request["client_id"] or "",
            client_host=client_host,
            rebalance_timeout_ms=request["rebalance_timeout_ms"],
            session_timeout_ms=request["session_timeout_ms"],
            protocol_type=request["protocol_type"],
            protocols=protocols,
            is_new=True,
        )
        # Evaluated before the rebalance starts: the member that moves an Empty group does not set it (§2.6 step 2).
        if group.state == PREPARING_REBALANCE and group.generation == 0:
            group.new_member_added = True
        group.add(member, respond)
        self._schedule_session(group, member, now_ms, NEW_MEMBER_JOIN_TIMEOUT_MS)
        if instance_id is not None:
            group.static_members[instance_id] = member_id
        else:
            group.pending_members.discard(member_id)
            self.timers.cancel(("pending", group.group_id, member_id))
        if group.state in (EMPTY, STABLE, COMPLETING_REBALANCE):
            self._prepare_rebalance(group, now_ms)

    def _replace_static_member(
        self, group: Group, instance_id: str, new_id: str, protocols: Protocols, respond: Responder, now_ms: int
    ) -> None:
        """§3.3 (GC ``updateStaticMemberAndRebalance``): a known instance restarts with a new member id."""
        old_id = group.static_members[instance_id]
        leader_before = group.leader_id
        old_member = group.members[old_id]
        if old_member.awaiting_join is not None:
            old_member.awaiting_join(join_response(E.FENCED_INSTANCE_ID, old_id))
            old_member.awaiting_join = None
        if old_member.awaiting_sync is not None:
            old_member.awaiting_sync(sync_response(E.FENCED_INSTANCE_ID))
            old_member.awaiting_sync = None
        self._cancel_session(group, old_id)
        member = group.replace_static_member(instance_id, old_id, new_id)
        self._schedule_session(group, member, now_ms)
        group.update_protocols(member, protocols, respond)
        if group.state == COMPLETING_REBALANCE:
            # The leader may be assigning to the old id: always rebalance.
            self._prepare_rebalance(group, now_ms)
        elif group.state == STABLE:
            if group.select_protocol() != group.protocol_name:
                self._prepare_rebalance(group, now_ms)
            else:
                self._persist_static_replacement(group, member, instance_id, old_id, leader_before)

    def _persist_static_replacement(
        self, group: Group, member: Member, instance_id: str, old_id: str, leader_before: str | None
    ) -> None:
        """The no-rebalance fast path of §3.3: persist the new id, then answer; revert on failure."""
        generation = group.generation
        new_id = member.member_id

        def on_complete(error: str | None, base_offset: int, now_ms: int) -> None:
            if self.groups.get(group.group_id) is not group or group.members.get(new_id) is not member:
                return
            answer = member.awaiting_join
            member.awaiting_join = None
            if error is None:
                if answer is not None:
                    answer(
                        join_response(
                            E.NONE,
                            new_id,
                            generation_id=generation,
                            protocol_type=group.protocol_type,
                            protocol_name=group.protocol_name,
                            # The leader as it was before the replacement, possibly the old id (Appendix C.3).
                            leader=leader_before or "",
                        )
                    )
                return
            # Kafka 2.8 reads the "old" protocols after the update, so the reverted member keeps the new ones
            # (§3.3 step 2, Appendix C.11).
            self._cancel_session(group, new_id)
            reverted = group.replace_static_member(instance_id, new_id, old_id)
            self._schedule_session(group, reverted, now_ms)
            if answer is not None:
                answer(
                    join_response(
                        mapped_append_error(error, _GROUP_WRITE_ERRORS),
                        "",
                        generation_id=group.generation,
                        protocol_type=group.protocol_type,
                        protocol_name=group.protocol_name,
                        leader=leader_before or "",
                    )
                )

        self._append(group.partition, [(GroupMetadataKey(group.group_id), group.metadata_record())], on_complete)

    # -- rebalance (§2.7–§2.9) --------------------------------------------------------------------------------------

    def _prepare_rebalance(self, group: Group, now_ms: int) -> None:
        """GC ``prepareRebalance``: cancel the sync phase, then start the initial or the regular delayed join."""
        if group.state == COMPLETING_REBALANCE:
            self._propagate_sync_error(group, E.REBALANCE_IN_PROGRESS, now_ms)
        self.timers.cancel(("sync", group.group_id))
        group.pending_sync.clear()
        if group.state == EMPTY:
            delay = self.config.group_initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            group.transition_to(PREPARING_REBALANCE, now_ms)
            self._schedule_initial_join(group, now_ms, delay, remaining)
        else:
            group.transition_to(PREPARING_REBALANCE, now_ms)
            self._schedule_join(group, now_ms)
            self._maybe_complete_join(group, now_ms)

    def _schedule_join(self, group: Group, now_ms: int) -> None:
        """The regular delayed join: completes at the deadline, or earlier once everyone joined (§2.7 step 4)."""
        self.timers.schedule(
            ("join", group.group_id), now_ms + group.rebalance_timeout_ms(), lambda now: self._complete_join(group, now)
        )
        group.initial_join = False

    def _schedule_initial_join(self, group: Group, now_ms: int, delay: int, remaining: int) -> None:
        """§2.7 step 3 (DJ ``InitialDelayedJoin``): never completes early; extended while new members arrive."""

        def on_due(now: int) -> None:
            if group.new_member_added and remaining != 0:
                group.new_member_added = False
                next_delay = min(self.config.group_initial_rebalance_delay_ms, remaining)
                self._schedule_initial_join(group, now, next_delay, max(remaining - delay, 0))
            else:
                self._complete_join(group, now)

        self.timers.schedule(("join", group.group_id), now_ms + delay, on_due)
        group.initial_join = True

    def _maybe_complete_join(self, group: Group, now_ms: int) -> None:
        if (
            group.state == PREPARING_REBALANCE
            and not group.initial_join
            and self.timers.deadline(("join", group.group_id)) is not None
            and group.all_members_joined()
        ):
            self._complete_join(group, now_ms)

    def _complete_join(self, group: Group, now_ms: int) -> None:
        """§2.9 (GC ``onCompleteJoin``)."""
        self.timers.cancel(("join", group.group_id))
        if self.groups.get(group.group_id) is not group or group.state != PREPARING_REBALANCE:
            return
        for member in list(group.members.values()):
            if member.awaiting_join is None and member.group_instance_id is None:
                # Dynamic members that did not rejoin are dropped; static ones stay (KIP-345).
                member.is_leaving = True
                group.remove(member.member_id)
                self._cancel_session(group, member.member_id)
        if group.members and not self._elect_joined_leader(group):
            # Only static non-rejoiners remain: wait another rebalance timeout for them (§2.9 step 3).
            self._schedule_join(group, now_ms)
            return
        group.generation += 1
        group.pending_sync.clear()
        if not group.members:
            group.protocol_name = None
            group.transition_to(EMPTY, now_ms)
            group.subscribed_topics = frozenset() if group.protocol_type == "consumer" else None
            self._append(
                group.partition,
                [(GroupMetadataKey(group.group_id), group.metadata_record())],
                self._log_only("empty group record", group.group_id),
            )
            return
        group.protocol_name = group.select_protocol()
        group.subscribed_topics = group.compute_subscribed_topics()
        group.transition_to(COMPLETING_REBALANCE, now_ms)
        for member in group.members.values():
            if member.awaiting_join is not None:
                answer, member.awaiting_join = member.awaiting_join, None
                is_leader = member.member_id == group.leader_id
                answer(self._current_generation_response(group, member, with_members=is_leader))
            self._schedule_session(group, member, now_ms)
            member.is_new = False
            group.pending_sync.add(member.member_id)
        generation = group.generation
        self.timers.schedule(
            ("sync", group.group_id),
            now_ms + group.rebalance_timeout_ms(),
            lambda now: self._on_pending_sync_expired(group, generation, now),
        )

    @staticmethod
    def _elect_joined_leader(group: Group) -> bool:
        """GM ``maybeElectNewJoinedLeader``: keep a rejoined leader, else promote any rejoined member."""
        leader = group.members.get(group.leader_id) if group.leader_id is not None else None
        if leader is None:
            return False
        if leader.awaiting_join is not None:
            return True
        for member in group.members.values():
            if member.awaiting_join is not None:
                group.leader_id = member.member_id
                return True
        return False

    def _on_pending_sync_expired(self, group: Group, generation: int, now_ms: int) -> None:
        """§4.5: evict members that never sent SyncGroup, then rebalance."""
        if (
            self.groups.get(group.group_id) is not group
            or group.generation != generation
            or group.state not in (COMPLETING_REBALANCE, STABLE)
            or not group.pending_sync
        ):
            return
        for member_id in list(group.pending_sync):
            group.remove(member_id)
            self._cancel_session(group, member_id)
        self._prepare_rebalance(group, now_ms)

    def _propagate_sync_error(self, group: Group, error: int, now_ms: int) -> None:
        """Clear assignments and answer parked SyncGroups with ``error`` (GC ``resetAndPropagateAssignmentError``)."""
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error, now_ms)

    def _propagate_assignment(self, group: Group, error: int, now_ms: int) -> None:
        for member in group.members.values():
            if member.awaiting_sync is None:
                continue
            answer, member.awaiting_sync = member.awaiting_sync, None
            if error == E.NONE:
                answer(sync_response(E.NONE, group.protocol_type, group.protocol_name, member.assignment))
            else:
                answer(sync_response(error))
            self._schedule_session(group, member, now_ms)

    def _remove_member_and_update_group(self, group: Group, member: Member, now_ms: int) -> None:
        """GC ``removeMemberAndUpdateGroup``: a parked JoinGroup gets 25, then rebalance or re-check the join."""
        if member.awaiting_join is not None:
            answer, member.awaiting_join = member.awaiting_join, None
            answer(join_response(E.UNKNOWN_MEMBER_ID, ""))
        group.remove(member.member_id)
        self._cancel_session(group, member.member_id)
        if group.state in (STABLE, COMPLETING_REBALANCE):
            self._prepare_rebalance(group, now_ms)
        elif group.state == PREPARING_REBALANCE:
            self._maybe_complete_join(group, now_ms)

    # -- SyncGroup (§4) ---------------------------------------------------------------------------------------------

    def handle_sync_group(self, request: dict, respond: Responder, now_ms: int, client_host: str) -> None:
        group_id = request["group_id"]
        if not group_id:
            return respond(sync_response(E.INVALID_GROUP_ID))
        if (error := self._group_status(group_id)) is not None:
            # While loading, 27 sends the member back to JoinGroup without a coordinator lookup (§4.2 step 1).
            loading = error == E.COORDINATOR_LOAD_IN_PROGRESS
            return respond(sync_response(E.REBALANCE_IN_PROGRESS if loading else error))
        group, member, error = self._current_member(request)
        if error is not None:
            return respond(sync_response(error))
        member_id = member.member_id
        protocol_type, protocol_name = request["protocol_type"], request["protocol_name"]
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name
        ):
            return respond(sync_response(E.INCONSISTENT_GROUP_PROTOCOL))
        if group.state == EMPTY:
            respond(sync_response(E.UNKNOWN_MEMBER_ID))
        elif group.state == PREPARING_REBALANCE:
            respond(sync_response(E.REBALANCE_IN_PROGRESS))
        elif group.state == COMPLETING_REBALANCE:
            member.awaiting_sync = respond
            self._sync_received(group, member_id)
            if member_id == group.leader_id:
                self._store_assignment(group, request["assignments"] or [])
        else:
            self._sync_received(group, member_id)
            respond(sync_response(E.NONE, group.protocol_type, group.protocol_name, member.assignment))
            self._schedule_session(group, member, now_ms)

    def _current_member(self, request: dict) -> tuple[Group | None, Member | None, ErrorCode | None]:
        """The checks SyncGroup and Heartbeat share (§4.2 steps 2–3, §5.1 steps 2–3), in Kafka's order."""
        group = self.groups.get(request["group_id"])
        member_id = request["member_id"]
        if group is None:
            return None, None, E.UNKNOWN_MEMBER_ID
        if group.is_dead():
            return group, None, E.COORDINATOR_NOT_AVAILABLE
        if group.is_static_member_fenced(member_id, request["group_instance_id"]):
            return group, None, E.FENCED_INSTANCE_ID
        member = group.members.get(member_id)
        if member is None:
            # Pending (MEMBER_ID_REQUIRED) ids are not members: they cannot sync or heartbeat (§5.4).
            return group, None, E.UNKNOWN_MEMBER_ID
        if request["generation_id"] != group.generation:
            return group, member, E.ILLEGAL_GENERATION
        return group, member, None

    def _sync_received(self, group: Group, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.pending_sync:
            self.timers.cancel(("sync", group.group_id))

    def _store_assignment(self, group: Group, entries: list[dict]) -> None:
        """§4.2 step 4: persist the leader's assignment; only then answer the parked SyncGroups."""
        given = {entry["member_id"]: entry["assignment"] for entry in entries}
        assignments = {member_id: given.get(member_id, b"") for member_id in group.members}
        generation = group.generation

        def on_complete(error: str | None, base_offset: int, now_ms: int) -> None:
            if (
                self.groups.get(group.group_id) is not group
                or group.state != COMPLETING_REBALANCE
                or group.generation != generation
            ):
                return
            if error is not None:
                self._propagate_sync_error(group, mapped_append_error(error, _GROUP_WRITE_ERRORS), now_ms)
                self._prepare_rebalance(group, now_ms)
                return
            for member_id, member in group.members.items():
                member.assignment = assignments.get(member_id, b"")
            self._propagate_assignment(group, E.NONE, now_ms)
            group.transition_to(STABLE, now_ms)

        self._append(
            group.partition, [(GroupMetadataKey(group.group_id), group.metadata_record(assignments))], on_complete
        )

    # -- Heartbeat (§5) ---------------------------------------------------------------------------------------------

    def handle_heartbeat(self, request: dict, respond: Responder, now_ms: int, client_host: str) -> None:
        group_id = request["group_id"]
        if not group_id:
            return respond(_error_only(E.INVALID_GROUP_ID))
        if (error := self._group_status(group_id)) is not None:
            # "Respond blindly" while loading so members survive a failover (§5.1 step 1).
            return respond(_error_only(E.NONE if error == E.COORDINATOR_LOAD_IN_PROGRESS else error))
        group, member, error = self._current_member(request)
        if error is not None:
            return respond(_error_only(error))
        if group.state == EMPTY:
            return respond(_error_only(E.UNKNOWN_MEMBER_ID))
        self._schedule_session(group, member, now_ms)
        respond(_error_only(E.REBALANCE_IN_PROGRESS if group.state == PREPARING_REBALANCE else E.NONE))

    # -- LeaveGroup (§6) --------------------------------------------------------------------------------------------

    def handle_leave_group(self, request: dict, respond: Responder, now_ms: int, client_host: str) -> None:
        group_id = request["group_id"]
        identities = request["members"] or []
        if not group_id:
            return respond({"error_code": int(E.INVALID_GROUP_ID), "members": []})
        if (error := self._group_status(group_id)) is not None:
            return respond({"error_code": int(error), "members": []})
        group = self.groups.get(group_id)
        if group is not None and group.is_dead():
            return respond({"error_code": int(E.COORDINATOR_NOT_AVAILABLE), "members": []})
        results = []
        for identity in identities:
            member_id, instance_id = identity["member_id"], identity["group_instance_id"]
            code = E.UNKNOWN_MEMBER_ID if group is None else self._leave(group, member_id, instance_id, now_ms)
            results.append({"member_id": member_id, "group_instance_id": instance_id, "error_code": int(code)})
        respond({"error_code": int(E.NONE), "members": results})

    def _leave(self, group: Group, member_id: str, instance_id: str | None, now_ms: int) -> ErrorCode:
        """§6.2 step 4 for one identity."""
        if member_id != "" and group.is_static_member_fenced(member_id, instance_id):
            return E.FENCED_INSTANCE_ID
        if member_id in group.pending_members and member_id not in group.members:
            group.pending_members.discard(member_id)
            self.timers.cancel(("pending", group.group_id, member_id))
            if group.state == PREPARING_REBALANCE:
                self._maybe_complete_join(group, now_ms)
            return E.NONE
        mapped = group.static_members.get(instance_id) if instance_id is not None else None
        target = group.members.get(mapped if mapped is not None else member_id)
        if target is None:
            return E.UNKNOWN_MEMBER_ID
        target.is_leaving = True
        self._remove_member_and_update_group(group, target, now_ms)
        return E.NONE

    # -- OffsetCommit / OffsetFetch (§7.1–§7.5) ---------------------------------------------------------------------

    def handle_offset_commit(self, request: dict, respond: Responder, now_ms: int, client_host: str) -> None:
        topics = request["topics"] or []
        errors: dict[TopicPartition, int] = {}
        commits: dict[TopicPartition, tuple[int, str]] = {}
        for topic in topics:
            for partition in topic["partitions"] or []:
                tp = TopicPartition(topic["name"], partition["partition_index"])
                if not self._partition_exists(tp):
                    errors[tp] = int(E.UNKNOWN_TOPIC_OR_PARTITION)
                else:
                    commits[tp] = (partition["committed_offset"], partition["committed_metadata"] or "")

        def answer(group_error: int | None = None) -> None:
            if group_error is not None:
                errors.update(dict.fromkeys(commits, int(group_error)))
            respond(_commit_response(topics, errors))

        if not commits:
            return answer()
        group_id = request["group_id"]
        if group_id is None:
            return answer(E.INVALID_GROUP_ID)
        if (error := self._group_status(group_id)) is not None:
            return answer(error)
        group = self.groups.get(group_id)
        generation, member_id = request["generation_id"], request["member_id"] or ""
        if group is None:
            if generation >= 0:
                # A zombie cannot recreate an expired group (§10.4).
                return answer(E.ILLEGAL_GENERATION)
            group = self._new_group(group_id, now_ms)
        if group.is_dead():
            return answer(E.COORDINATOR_NOT_AVAILABLE)
        if group.is_static_member_fenced(member_id, request["group_instance_id"]):
            return answer(E.FENCED_INSTANCE_ID)
        if not (generation < 0 and group.state == EMPTY):
            member = group.members.get(member_id)
            if member is None:
                return answer(E.UNKNOWN_MEMBER_ID)
            if generation != group.generation:
                return answer(E.ILLEGAL_GENERATION)
            if group.state == COMPLETING_REBALANCE:
                return answer(E.REBALANCE_IN_PROGRESS)
            self._schedule_session(group, member, now_ms)
        if_greater = bool(request["if_greater"])
        self._store_offsets(group, commits, request["retention_time_ms"], errors, answer, now_ms, if_greater)

    def _partition_exists(self, tp: TopicPartition) -> bool:
        if self.topics is None:
            return True
        count = self.topics.get(tp.topic)
        return count is not None and 0 <= tp.partition < count

    def _store_offsets(
        self,
        group: Group,
        commits: dict[TopicPartition, tuple[int, str]],
        retention_time_ms: int | None,
        errors: dict[TopicPartition, int],
        answer: Callable[..., None],
        now_ms: int,
        if_greater: bool,
    ) -> None:
        """§7.3: validate metadata sizes, mark pending, append one batch; the cache changes only on success.

        ``if_greater`` (docs/protocol.md, for backfills): a partition whose cached offset is at least the one
        committed, or that has a commit in flight, is left alone and answered 0.
        """
        limit = self.config.offset_metadata_max_bytes
        valid = {}
        for tp, (offset, metadata) in commits.items():
            if _metadata_length(metadata) > limit:
                errors[tp] = int(E.OFFSET_METADATA_TOO_LARGE)
            elif if_greater and self._has_offset_at_least(group, tp, offset):
                errors[tp] = int(E.NONE)
            else:
                valid[tp] = (offset, metadata)
        if not valid:
            return answer()
        expire = NO_EXPIRE_TIMESTAMP if retention_time_ms in (None, -1) else now_ms + retention_time_ms
        values = {tp: OffsetCommitValue(offset, metadata, now_ms, expire) for tp, (offset, metadata) in valid.items()}
        group.pending_offsets.update(values.keys())

        def on_complete(error: str | None, base_offset: int, completed_ms: int) -> None:
            for tp, value in values.items():
                still_pending = group.pending_offsets[tp] > 0
                if still_pending:
                    group.pending_offsets[tp] -= 1
                    if group.pending_offsets[tp] <= 0:
                        del group.pending_offsets[tp]
                cached = group.offsets.get(tp)
                # A partition deleted meanwhile is not re-added; a newer batch in the log keeps its place.
                if error is None and still_pending and (cached is None or cached.log_offset < base_offset):
                    group.offsets[tp] = CommittedOffset.from_value(value, base_offset)
            if error is not None:
                code = mapped_append_error(error, _OFFSET_COMMIT_ERRORS)
                errors.update(dict.fromkeys(values, code))
            else:
                errors.update(dict.fromkeys(values, int(E.NONE)))
            answer()

        records = [(OffsetCommitKey(group.group_id, tp.topic, tp.partition), value) for tp, value in values.items()]
        self._append(group.partition, records, on_complete)

    @staticmethod
    def _has_offset_at_least(group: Group, tp: TopicPartition, offset: int) -> bool:
        """True when ``tp`` has a commit in flight (its outcome is unknown) or a cached offset ≥ ``offset``."""
        if tp in group.pending_offsets:
            return True
        cached = group.offsets.get(tp)
        return cached is not None and cached.offset >= offset

    def handle_offset_fetch(self, request: dict, respond: Responder, now_ms: int, client_host: str) -> None:
        group_id = request["group_id"]
        if group_id is None:
            return respond({"error_code": int(E.INVALID_GROUP_ID), "topics": []})
        if (error := self._group_status(group_id)) is not None:
            return respond({"error_code": int(error), "topics": []})
        group = self.groups.get(group_id)
        offsets = {} if group is None or group.is_dead() else group.offsets
        if request["topics"] is None:
            wanted: dict[str, list[int]] = {}
            for tp in sorted(offsets):
                wanted.setdefault(tp.topic, []).append(tp.partition)
        else:
            wanted = {topic["name"]: list(topic["partition_indexes"] or []) for topic in request["topics"]}
        topics = []
        for name, partitions in wanted.items():
            entries = []
            for index in partitions:
                committed = offsets.get(TopicPartition(name, index))
                entries.append(
                    {
                        "partition_index": index,
                        "committed_offset": -1 if committed is None else committed.offset,
                        "metadata": "" if committed is None else committed.metadata,
                        "error_code": int(E.NONE),
                    }
                )
            topics.append({"name": name, "partitions": entries})
        respond({"error_code": int(E.NONE), "topics": topics})

    # -- admin (§7.7–§7.9) ------------------------------------------------------------------------------------------

    def handle_describe_groups(self, request: dict, respond: Responder, now_ms: int, client_host: str) -> None:
        respond({"groups": [self._describe(group_id) for group_id in request["groups"] or []]})

    def _describe(self, group_id: str | None) -> dict:
        def summary(error: int, state: str = "", protocol_type: str = "", protocol: str = "", members=()) -> dict:
            return {
                "error_code": int(error),
                "group_id": group_id,
                "group_state": state,
                "protocol_type": protocol_type,
                "protocol_data": protocol,
                "members": list(members),
            }

        if group_id is None:
            return summary(E.INVALID_GROUP_ID)
        if (error := self._group_status(group_id)) is not None:
            return summary(error)
        group = self.groups.get(group_id)
        if group is None:
            return summary(E.NONE, DEAD)
        stable = group.state == STABLE
        members = [
            {
                "member_id": member.member_id,
                "group_instance_id": member.group_instance_id,
                "client_id": member.client_id,
                "client_host": member.client_host,
                # Only a Stable group shows metadata and assignments (§7.7).
                "member_metadata": member.metadata(group.protocol_name) if stable else b"",
                "member_assignment": member.assignment if stable else b"",
            }
            for member in group.members.values()
        ]
        protocol = (group.protocol_name or "") if stable else ""
        return summary(E.NONE, group.state, group.protocol_type or "", protocol, members)

    def handle_list_groups(self, request: dict, respond: Responder, now_ms: int, client_host: str) -> None:
        if not self.active:
            return respond({"error_code": int(E.COORDINATOR_NOT_AVAILABLE), "groups": []})
        states = set(request["states_filter"] or ())
        groups = [
            {"group_id": group.group_id, "protocol_type": group.protocol_type or "", "group_state": group.state}
            for group in self.groups.values()
            if not states or group.state in states
        ]
        error = E.COORDINATOR_LOAD_IN_PROGRESS if self.loading else E.NONE
        respond({"error_code": int(error), "groups": groups})

    def handle_delete_groups(self, request: dict, respond: Responder, now_ms: int, client_host: str) -> None:
        results = []
        for group_id in dict.fromkeys(request["groups_names"] or []):
            results.append({"group_id": group_id, "error_code": int(self._delete_group(group_id))})
        respond({"results": results})

    def _delete_group(self, group_id: str | None) -> ErrorCode:
        if group_id is None:
            return E.INVALID_GROUP_ID
        if (error := self._group_status(group_id)) is not None:
            return error
        group = self.groups.get(group_id)
        if group is None or group.is_dead():
            return E.GROUP_ID_NOT_FOUND
        if group.state != EMPTY:
            return E.NON_EMPTY_GROUP
        self._remove_group(group, sorted(group.offsets))
        group.pending_offsets.clear()
        return E.NONE

    def handle_offset_delete(self, request: dict, respond: Responder, now_ms: int, client_host: str) -> None:
        """§7.10 (GC ``handleDeleteOffsets``, KA ``handleOffsetDeleteRequest``): drop committed offsets of a group.

        Unlike Kafka (acks 0, answered at once, cache changed first), the tombstones are a durable append and
        the answer waits for it; the cache drops the offsets only once it succeeded, so a failed delete can be
        retried (docs/protocol.md).
        """
        group_id = request["group_id"]
        if not group_id:
            return respond(_offset_delete_error(E.INVALID_GROUP_ID))
        if (error := self._group_status(group_id)) is not None:
            return respond(_offset_delete_error(error))
        group = self.groups.get(group_id)
        if group is None or group.is_dead():
            # The partition is owned (checked above), so the group does not exist: 69, not 16.
            return respond(_offset_delete_error(E.GROUP_ID_NOT_FOUND))
        requested = _offset_delete_partitions(request["topics"] or [])
        errors: dict[TopicPartition, int] = {}
        known = []
        for tp in requested:
            if self._partition_exists(tp):
                known.append(tp)
            else:
                # Kafka's API layer answers 3 before the coordinator sees the partition.
                errors[tp] = int(E.UNKNOWN_TOPIC_OR_PARTITION)
        if group.state == EMPTY:
            eligible = known
        elif group.protocol_type == "consumer":
            # Kafka's cached subscription of the current generation; unknown (None) counts as subscribed.
            subscribed = group.subscribed_topics
            eligible = []
            for tp in known:
                if subscribed is None or tp.topic in subscribed:
                    errors[tp] = int(E.GROUP_SUBSCRIBED_TO_TOPIC)
                else:
                    eligible.append(tp)
        else:
            return respond(_offset_delete_error(E.NON_EMPTY_GROUP))

        def answer() -> None:
            respond({"error_code": int(E.NONE), "topics": _partition_errors(requested, errors)})

        # A commit still in flight gets a tombstone too: it is in the log before this batch.
        doomed = [tp for tp in eligible if tp in group.offsets or tp in group.pending_offsets]
        if not doomed:
            errors.update(dict.fromkeys(eligible, int(E.NONE)))
            if eligible:
                self._drop_if_emptied(group)
            return answer()

        def on_complete(error: str | None, base_offset: int, completed_ms: int) -> None:
            if error is not None:
                errors.update(dict.fromkeys(eligible, mapped_append_error(error, _OFFSET_COMMIT_ERRORS)))
                return answer()
            for tp in doomed:
                cached = group.offsets.get(tp)
                # A commit written after the tombstones keeps its offset.
                if cached is not None and cached.log_offset < base_offset:
                    del group.offsets[tp]
            errors.update(dict.fromkeys(eligible, int(E.NONE)))
            if self.groups.get(group.group_id) is group:
                self._drop_if_emptied(group)
            answer()

        tombstones: list[tuple[RecordKey, RecordValue | None]] = [
            (OffsetCommitKey(group.group_id, tp.topic, tp.partition), None) for tp in doomed
        ]
        self._append(group.partition, tombstones, on_complete)

    def _drop_if_emptied(self, group: Group) -> None:
        """GMM ``cleanupGroupMetadata``: an Empty group left without offsets goes Dead and leaves the cache."""
        if group.state == EMPTY and not group.offsets and not group.pending_offsets:
            self._remove_group(group, ())

    def _remove_group(self, group: Group, partitions: Iterable[TopicPartition]) -> None:
        """Drop ``group`` from the cache and append tombstones fire-and-forget (§9.4)."""
        group.transition_to(DEAD, group.state_timestamp)
        del self.groups[group.group_id]
        tombstones: list[tuple[RecordKey, RecordValue | None]] = [
            (OffsetCommitKey(group.group_id, tp.topic, tp.partition), None) for tp in partitions
        ]
        group.offsets.clear()
        # An offsets-only group (generation 0) never had a metadata record to delete.
        if group.generation > 0:
            tombstones.append((GroupMetadataKey(group.group_id), None))
        if tombstones:
            self._append(group.partition, tombstones, self._log_only("tombstones", group.group_id))

    # -- offset expiry (§7.6) ---------------------------------------------------------------------------------------

    def _on_expiry_due(self, now_ms: int) -> None:
        self.expire_offsets(now_ms)
        self.timers.schedule(
            ("offset-expiry",), now_ms + self.config.offsets_retention_check_interval_ms, self._on_expiry_due
        )

    def expire_offsets(self, now_ms: int) -> int:
        """One pass of GMM ``cleanupGroupMetadata``; returns how many offsets expired."""
        expired_count = 0
        for group in list(self.groups.values()):
            expired = expired_offsets(group.retention_view(), group.offsets, now_ms, self.config.offsets_retention_ms)
            for tp in expired:
                del group.offsets[tp]
            expired_count += len(expired)
            if group.state == EMPTY and not group.offsets and not group.pending_offsets:
                self._remove_group(group, sorted(expired))
            elif expired:
                self._append(
                    group.partition,
                    [(OffsetCommitKey(group.group_id, tp.topic, tp.partition), None) for tp in sorted(expired)],
                    self._log_only("expired offset tombstones", group.group_id),
                )
        return expired_count

    # -- topics (0.9 design: the coordinator watches partition counts) ----------------------------------------------

    def set_topics(self, topics: Mapping[str, int] | None, now_ms: int) -> list[str]:
        """Take the cluster's topic → partition count; rebalance groups whose subscribed topics changed.

        Returns the ids of the groups that started a rebalance.
        """
        before, self.topics = self.topics, None if topics is None else dict(topics)
        if before is None or topics is None:
            return []
        changed = {topic for topic in before.keys() | topics.keys() if before.get(topic) != topics.get(topic)}
        rebalanced = []
        for group in list(self.groups.values()):
            if group.state not in (STABLE, COMPLETING_REBALANCE) or group.protocol_type != "consumer":
                continue
            subscribed = group.subscribed_topics
            if subscribed is None or subscribed & changed:
                self._prepare_rebalance(group, now_ms)
                rebalanced.append(group.group_id)
        return rebalanced

    # -- loading and unloading (§9.6, §9.7) -------------------------------------------------------------------------

    def begin_loading(self, partition: int) -> None:
        """Mark ``partition`` loading: its groups answer 14 (Sync 27, Heartbeat 0) until :meth:`load_partition`."""
        self.loading.add(partition)

    def load_partition(self, partition: int, store: OffsetStore, now_ms: int) -> int:
        """Build the groups of ``partition`` from a replayed store (§9.6 step 5); mark it owned. Returns #groups."""
        loaded = 0
        try:
            for group_id in sorted(store.group_ids()):
                if self.partition_for(group_id) != partition or group_id in self.groups:
                    continue
                group = Group.from_record(group_id, partition, store.groups.get(group_id), now_ms)
                group.offsets = dict(store.offsets.get(group_id, {}))
                self.groups[group_id] = group
                loaded += 1
                for member in group.members.values():
                    self._schedule_session(group, member, now_ms)
                if len(group.members) > self.config.group_max_size:
                    self._prepare_rebalance(group, now_ms)
        finally:
            # Even a failed load leaves the partition owned (Appendix C.8).
            self.loading.discard(partition)
            self.owned.add(partition)
        return loaded

    def unload_partition(self, partition: int) -> int:
        """§9.7: every group of ``partition`` goes Dead; parked requests get NOT_COORDINATOR. Returns #groups."""
        self.owned.discard(partition)
        self.loading.discard(partition)
        unloaded = [group for group in self.groups.values() if group.partition == partition]
        for group in unloaded:
            previous = group.state
            group.transition_to(DEAD, group.state_timestamp)
            del self.groups[group.group_id]
            for member in group.members.values():
                if previous == PREPARING_REBALANCE and member.awaiting_join is not None:
                    answer, member.awaiting_join = member.awaiting_join, None
                    answer(join_response(E.NOT_COORDINATOR, member.member_id))
                if previous in (STABLE, COMPLETING_REBALANCE) and member.awaiting_sync is not None:
                    answer, member.awaiting_sync = member.awaiting_sync, None
                    answer(sync_response(E.NOT_COORDINATOR))
                self._cancel_session(group, member.member_id)
            for pending_id in group.pending_members:
                self.timers.cancel(("pending", group.group_id, pending_id))
            self.timers.cancel(("join", group.group_id))
            self.timers.cancel(("sync", group.group_id))
        return len(unloaded)

    def shutdown(self) -> None:
        """Stop serving: unload every partition (parked requests get 16); later requests get 15."""
        for partition in sorted(self.owned | self.loading):
            self.unload_partition(partition)
        self.active = False

    # -- appends ----------------------------------------------------------------------------------------------------

    def _append(
        self, partition: int, records: list[tuple[RecordKey, RecordValue | None]], on_complete: AppendCallback
    ) -> None:
        self.appends.append(AppendRequest(partition, records, on_complete))

    @staticmethod
    def _log_only(what: str, group_id: str) -> AppendCallback:
        """Fire-and-forget appends (§9.4, Appendix C.6, C.7): errors are logged, nobody waits."""

        def on_complete(error: str | None, base_offset: int, now_ms: int) -> None:
            if error is not None:
                log.warning("append of %s failed group=%s error=%s", what, group_id, error)

        return on_complete


def _commit_response(topics: list[dict], errors: Mapping[TopicPartition, int]) -> dict:
    """OffsetCommit's per-partition answer, in request order."""
    return {
        "topics": [
            {
                "name": topic["name"],
                "partitions": [
                    {
                        "partition_index": partition["partition_index"],
                        "error_code": errors.get(TopicPartition(topic["name"], partition["partition_index"]), 0),
                    }
                    for partition in topic["partitions"] or []
                ],
            }
            for topic in topics
        ]
    }


def _offset_delete_error(error: int) -> dict:
    """OffsetDelete's answer with a group-level error: no partitions (Kafka's ``getErrorResponse``)."""
    return {"error_code": int(error), "topics": []}


def _offset_delete_partitions(topics: list[dict]) -> list[TopicPartition]:
    """The partitions an OffsetDelete names, each once, in request order."""
    partitions = (
        TopicPartition(topic["name"], partition["partition_index"])
        for topic in topics
        for partition in topic["partitions"] or []
    )
    return list(dict.fromkeys(partitions))


def _partition_errors(partitions: list[TopicPartition], errors: Mapping[TopicPartition, int]) -> list[dict]:
    """``[{name, partitions: [{partition_index, error_code}]}]``, topics in first-seen order."""
    by_topic: dict[str, list[dict]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append({"partition_index": tp.partition, "error_code": errors[tp]})
    return [{"name": name, "partitions": entries} for name, entries in by_topic.items()]
