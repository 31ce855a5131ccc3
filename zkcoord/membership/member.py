"""The client side of the classic group protocol as a pure state machine: inputs in, requests and events out.

:class:`GroupMember` owns everything a consumer's background worker decides: coordinator discovery, JoinGroup,
the leader's assignment, SyncGroup, heartbeats, LeaveGroup, and the commits and offset fetches the poll side asks
for. It sends nothing itself: it queues :class:`Send` effects (a request and the tag its answer comes back with)
and :class:`Reconcile` / :class:`Completed` / :class:`Fatal` events for the poll side, and says when it next needs
to run. Time is an argument. The worker in ``zkcoord.client.worker`` does the IO.

Rebalance callbacks are the poll side's: the member hands it a :class:`Reconcile` (partitions lost, revoked,
assigned) and waits for :meth:`GroupMember.ack` before it goes on — an eager member joins only after its
revocation was acknowledged, which is what makes ownership exclusive.

Pure: no IO, no gevent, no clock. Imports zkcoord.assign.consumer, zkcoord.wire.consumer_protocol, zkcoord.errors.
"""

import itertools
import logging
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from zkcoord.assign.consumer import COOPERATIVE, ConsumerAssignor, MemberSubscription, rebalance_protocol
from zkcoord.errors import (
    CommitFailedError,
    CoordinatorResponseError,
    ErrorCode,
    FencedInstanceIdError,
    RebalanceInProgressError,
    ZkcoordError,
)
from zkcoord.membership.states import HEARTBEAT_STATES, CoordinatorState, MemberState, check_member_transition
from zkcoord.model import TopicPartition
from zkcoord.wire.consumer_protocol import (
    Assignment,
    ConsumerProtocolError,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)

log = logging.getLogger(__name__)

E = ErrorCode
S = MemberState
ANY_NODE = "any"
COORDINATOR = "coordinator"
PROTOCOL_TYPE = "consumer"
JOIN_TIMEOUT_SLACK_MS = 5000  # Kafka waits rebalance.timeout.ms + 5 s for a JoinGroup answer
_COORDINATOR_GONE = frozenset({E.COORDINATOR_NOT_AVAILABLE, E.NOT_COORDINATOR})
# Errors after which the member must join again from scratch; these are not the user's to handle.
_FATAL_JOIN_ERRORS = frozenset(
    {E.INVALID_GROUP_ID, E.INVALID_SESSION_TIMEOUT, E.INCONSISTENT_GROUP_PROTOCOL, E.GROUP_MAX_SIZE_REACHED}
)


@dataclass(frozen=True)
class MembershipConfig:
    group_id: str
    group_instance_id: str | None
    session_timeout_ms: int
    heartbeat_interval_ms: int
    max_poll_interval_ms: int
    retry_backoff_ms: int
    request_timeout_ms: int
    metadata_max_age_ms: int


# ---- effects and events ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Send:
    """Send ``api`` with ``fields`` to ``target`` (the coordinator, or any node); answer with ``tag``."""

    target: str
    api: str
    fields: dict
    tag: tuple
    timeout_ms: int


@dataclass(frozen=True)
class Reconcile:
    """The poll side must give up ``lost`` (no commit) and ``revoked`` (commit first), then take ``assigned``.

    ``owned`` is what the member owns once this is done. Acknowledge with :meth:`GroupMember.ack` (``event_id``).
    """

    event_id: int
    generation: int
    member_id: str
    lost: tuple[TopicPartition, ...] = ()
    revoked: tuple[TopicPartition, ...] = ()
    assigned: tuple[TopicPartition, ...] = ()
    owned: tuple[TopicPartition, ...] = ()
    run_revoked: bool = False  # eager members call on_partitions_revoked even with nothing to revoke
    run_assigned: bool = False


@dataclass(frozen=True)
class Completed:
    """The answer to an application request (commit, offset fetch, metadata): ``value`` or ``error``."""

    request_id: int
    value: Any = None
    error: ZkcoordError | None = None


@dataclass(frozen=True)
class Fatal:
    """The member cannot go on (fenced static instance, invalid configuration)."""

    error: ZkcoordError


@dataclass(frozen=True)
class Transition:
    """The member state changed (for traces and metrics)."""

    previous: MemberState
    state: MemberState
    generation: int
    member_id: str
    now_ms: int


@dataclass
class _AppRequest:
    request_id: int
    api: str
    fields: dict
    deadline_ms: int
    sent: bool = False
    not_before_ms: int = 0


def partitions_by_topic(partitions: Collection[TopicPartition]) -> dict[str, list[int]]:
    grouped: dict[str, list[int]] = {}
    for topic, partition in sorted(partitions):
        grouped.setdefault(topic, []).append(partition)
    return grouped


def commit_topics(offsets: Mapping[TopicPartition, tuple[int, str | None]]) -> list[dict]:
    grouped: dict[str, list[dict]] = {}
    for (topic, partition), (offset, metadata) in sorted(offsets.items()):
        grouped.setdefault(topic, []).append(
            {"partition_index": partition, "committed_offset": offset, "committed_metadata": metadata}
        )
    return [{"name": topic, "partitions": partitions} for topic, partitions in grouped.items()]


def commit_error(code: int, message: str = "") -> ZkcoordError:
    """The exception a failed commit raises (kafka-python's names where it has them)."""
    if code in (E.ILLEGAL_GENERATION, E.UNKNOWN_MEMBER_ID, E.REBALANCE_IN_PROGRESS):
        return CommitFailedError(
            f"commit cannot be completed since the group has already rebalanced ({E(code).name}); "
            "the partitions may now belong to another member"
        )
    if code == E.FENCED_INSTANCE_ID:
        return FencedInstanceIdError(code, message)
    return CoordinatorResponseError(code, message)


class GroupMember:
    """One consumer's membership in its group; see the module docstring. Drive it from one thread only."""

    def __init__(self, config: MembershipConfig, assignors: Sequence[ConsumerAssignor], now_ms: int):
        self.config = config
        self.assignors = list(assignors)
        self.protocol = rebalance_protocol(self.assignors)
        self.state = S.UNJOINED
        self.coordinator_state = CoordinatorState.INITIALIZED if config.group_id else CoordinatorState.DOWN
        self.coordinator: tuple[int, str, int] | None = None
        self.member_id = ""
        self.generation = -1
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.owned: frozenset[TopicPartition] = frozenset()
        self.topics: frozenset[str] = frozenset()  # explicit subscription, or the pattern's matches
        self.pattern: re.Pattern | None = None
        self.partition_counts: dict[str, int] = {}
        self.fatal_error: ZkcoordError | None = None
        self._sends: list[Send] = []
        self._events: list[Any] = []
        self._event_ids = itertools.count(1)
        self._tags = itertools.count(1)
        self._pending: Reconcile | None = None
        self._group_request: tuple | None = None  # tag of the in-flight JoinGroup/SyncGroup/leader Metadata
        self._heartbeat_tag: tuple | None = None
        self._find_tag: tuple | None = None
        self._metadata_tag: tuple | None = None
        self._app: dict[int, _AppRequest] = {}
        self._app_tags: dict[tuple, int] = {}
        self._rejoin_needed = False
        self._not_before_ms = now_ms  # backoff for discovery and joins
        self._next_heartbeat_ms: int | None = None
        self._last_heartbeat_ok_ms = now_ms
        self._session_timer_ms = now_ms  # Kafka's Heartbeat.sessionTimer: restarted by an answer or a new coordinator
        self._last_poll_ms = now_ms
        self._poll_timed_out = False
        # Metadata is refreshed every metadata.max.age.ms for a pattern (which topics match) and by the leader
        # (did a subscribed topic's partition count change since it assigned: then rejoin, as Kafka's leader).
        self._metadata_refresh_ms: int | None = None
        self._leader_members: list[MemberSubscription] = []
        self._assigned_counts: dict[str, int] = {}  # the partition counts the leader last assigned

    # ---- outputs ---------------------------------------------------------------------------------------------

    def take_sends(self) -> list[Send]:
        sends, self._sends = self._sends, []
        return sends

    def take_events(self) -> list[Any]:
        events, self._events = self._events, []
        return events

    @property
    def last_heartbeat_ms(self) -> int:
        """When the coordinator last answered a heartbeat (or the sync that started the heartbeats)."""
        return self._last_heartbeat_ok_ms

    @property
    def poll_timed_out(self) -> bool:
        """The member left for max.poll.interval.ms and waits for the next poll to join again."""
        return self._poll_timed_out

    @property
    def subscribed(self) -> bool:
        return bool(self.topics) or self.pattern is not None

    def next_wakeup_ms(self, now_ms: int) -> int:
        """When :meth:`tick` must run next, at the latest, if no input arrives meanwhile.

        Call it right after :meth:`tick`: whatever was due and possible is done, so a deadline already passed is
        waiting for an input (a coordinator, an answer) and must not make the caller spin.
        """
        deadlines = [now_ms + 1000, self._last_poll_ms + self.config.max_poll_interval_ms + 1, self._not_before_ms]
        if self._next_heartbeat_ms is not None and self.coordinator is not None:
            deadlines.append(self._session_started_ms() + self.config.session_timeout_ms + 1)
            if self._heartbeat_tag is None:
                deadlines.append(self._next_heartbeat_ms)
        if self._metadata_refresh_ms is not None:
            deadlines.append(self._metadata_refresh_ms)
        for request in self._app.values():
            deadlines += [request.deadline_ms, request.not_before_ms]
        return min(d for d in deadlines if d > now_ms)

    # ---- inputs from the poll side ---------------------------------------------------------------------------

    def subscribe(self, topics: Collection[str] = (), pattern: str | None = None, now_ms: int = 0) -> None:
        """Subscribe to ``topics`` or to the topics matching ``pattern``; a change triggers a rebalance."""
        self.pattern = re.compile(pattern) if pattern is not None else None
        new_topics = frozenset(topics) if pattern is None else self.topics
        if pattern is not None:
            self._metadata_refresh_ms = now_ms
        self._change_topics(new_topics, now_ms)

    def unsubscribe(self, now_ms: int) -> None:
        """Leave the group (dynamic members) and drop every partition, as Kafka's unsubscribe."""
        self.pattern = None
        self._metadata_refresh_ms = None
        self.topics = frozenset()
        self.owned = frozenset()  # the poll side revoked them (with callbacks) before it called this
        if self.state in (S.UNJOINED, S.LEFT, S.FATAL):
            return
        self._drop_everything("unsubscribed", now_ms, leave=True)

    def polled(self, now_ms: int) -> None:
        """The poll side called poll(): the max.poll.interval.ms timer restarts; a timed-out member rejoins."""
        self._last_poll_ms = now_ms
        if self._poll_timed_out:
            self._poll_timed_out = False
            self._not_before_ms = now_ms

    def ack(self, event_id: int, now_ms: int) -> None:
        """The poll side finished the callbacks of :class:`Reconcile` ``event_id``."""
        pending = self._pending
        if pending is None or pending.event_id != event_id:
            return
        self._pending = None
        self.owned = frozenset(pending.owned)
        if self.state == S.REVOKING_PARTITIONS:
            self._transition(S.PARTITIONS_REVOKED, now_ms)
            self._send_join(now_ms)
        elif self.state == S.ASSIGNING_PARTITIONS:
            self._transition(S.STABLE, now_ms)
            # Cooperative: partitions were revoked, so a follow-up round hands them to their new owners.
            if pending.revoked and self.protocol == COOPERATIVE:
                self._rejoin_needed = True
            if self._rejoin_needed:
                self._start_rebalance(now_ms)
        self.tick(now_ms)

    def request(self, request_id: int, api: str, fields: dict, now_ms: int, timeout_ms: int) -> None:
        """Queue an application request: ``OffsetCommit`` (offsets), ``OffsetFetch`` or ``Metadata``."""
        self._app[request_id] = _AppRequest(request_id, api, fields, now_ms + timeout_ms)
        self.tick(now_ms)

    def leave(self, now_ms: int) -> None:
        """Close: a dynamic member with a generation sends LeaveGroup; a static one never does (KIP-345)."""
        if self.state in (S.LEFT, S.LEAVING):
            return
        if self.state == S.FATAL or self.generation < 0 or self.config.group_instance_id is not None:
            self._transition(S.LEFT, now_ms)
            return
        self._send_leave(now_ms)

    # ---- inputs from the network -----------------------------------------------------------------------------

    def coordinator_lost(self, now_ms: int, reason: str) -> None:
        """The connection to the coordinator died or it said it is no longer the coordinator."""
        if self.coordinator is not None:
            log.info("group=%s coordinator %s unknown: %s", self.config.group_id, self.coordinator, reason)
        self.coordinator = None
        if self.coordinator_state != CoordinatorState.DOWN:
            self.coordinator_state = CoordinatorState.INITIALIZED

    def on_response(self, tag: tuple, response: dict | None, now_ms: int) -> None:
        """The answer to the :class:`Send` with ``tag``; ``None`` when the request failed (connection, timeout)."""
        kind = tag[0]
        if kind == "find":
            self._on_find(tag, response, now_ms)
        elif kind == "join":
            self._on_join(tag, response, now_ms)
        elif kind == "assign-metadata":
            self._on_assign_metadata(tag, response, now_ms)
        elif kind == "sync":
            self._on_sync(tag, response, now_ms)
        elif kind == "heartbeat":
            self._on_heartbeat(tag, response, now_ms)
        elif kind == "leave":
            self._transition(S.LEFT, now_ms)
        elif kind == "metadata":
            self._on_metadata(tag, response, now_ms)
        elif kind == "app":
            self._on_app_response(tag, response, now_ms)
        self.tick(now_ms)

    # ---- timers ----------------------------------------------------------------------------------------------

    def tick(self, now_ms: int) -> None:
        """Do whatever is due: discovery, joins, heartbeats, poll timeout, application requests."""
        if self.state in (S.LEFT, S.FATAL):
            return
        self._check_poll_timeout(now_ms)
        if self.coordinator_state != CoordinatorState.DOWN and self.coordinator is None:
            self._find_coordinator(now_ms)
        if self._metadata_refresh_ms is not None and now_ms >= self._metadata_refresh_ms and self._metadata_tag is None:
            self._metadata_tag = self._tag("metadata")
            self._sends.append(Send(ANY_NODE, "Metadata", {"topics": None}, self._metadata_tag, self._timeout()))
        if self.coordinator is not None:
            self._maybe_join(now_ms)
            self._maybe_heartbeat(now_ms)
        self._run_app_requests(now_ms)

    # ---- discovery -------------------------------------------------------------------------------------------

    def _find_coordinator(self, now_ms: int) -> None:
        if self._find_tag is not None or now_ms < self._not_before_ms:
            return
        self.coordinator_state = CoordinatorState.COORDINATOR_DISCOVERY
        self._find_tag = self._tag("find")
        fields = {"key": self.config.group_id, "key_type": 0}
        self._sends.append(Send(ANY_NODE, "FindCoordinator", fields, self._find_tag, self._timeout()))

    def _on_find(self, tag: tuple, response: dict | None, now_ms: int) -> None:
        if tag != self._find_tag:
            return
        self._find_tag = None
        code = self._code(response)
        if code == E.NONE:
            self.coordinator = (response["node_id"], response["host"], response["port"])
            self.coordinator_state = CoordinatorState.STABLE
            # Kafka's heartbeat.resetSessionTimeout(): a coordinator found after a long failover gets a whole
            # session to answer a heartbeat before it is given up as unreachable.
            self._session_timer_ms = now_ms
            return
        self._backoff(now_ms)

    # ---- join / sync -----------------------------------------------------------------------------------------

    def _maybe_join(self, now_ms: int) -> None:
        if not self.subscribed or self._poll_timed_out or self._group_request is not None:
            return
        if now_ms < self._not_before_ms or self._pending is not None:
            return
        if self.state == S.UNJOINED or self.state == S.STABLE and self._rejoin_needed:
            self._start_rebalance(now_ms)
        elif self.state == S.PARTITIONS_REVOKED:
            self._send_join(now_ms)

    def _start_rebalance(self, now_ms: int) -> None:
        """Eager members revoke everything first; cooperative ones (and members owning nothing) join now."""
        if self._group_request is not None or self._pending is not None or not self.subscribed:
            self._rejoin_needed = True
            return
        if self.state == S.STABLE and self.protocol != COOPERATIVE:
            self._transition(S.PREPARE_REVOCATION, now_ms)
            self._transition(S.REVOKING_PARTITIONS, now_ms)
            self._deliver(revoked=tuple(sorted(self.owned)), owned=(), run_revoked=True)
            return
        self._send_join(now_ms)

    def _subscription(self, assignor: ConsumerAssignor) -> bytes:
        owned = tuple(sorted(self.owned)) if self.protocol == COOPERATIVE else ()
        topics = tuple(sorted(self.topics))
        return encode_subscription(Subscription(topics, assignor.subscription_user_data(topics), owned))

    def _send_join(self, now_ms: int) -> None:
        self._rejoin_needed = False
        if self.coordinator is None:
            self._transition(S.UNJOINED, now_ms)  # joins once the coordinator is found
            return
        if self.state != S.PREPARING_REBALANCE:
            self._transition(S.PREPARING_REBALANCE, now_ms)
        fields = {
            "group_id": self.config.group_id,
            "session_timeout_ms": self.config.session_timeout_ms,
            "rebalance_timeout_ms": self.config.max_poll_interval_ms,
            "member_id": self.member_id,
            "group_instance_id": self.config.group_instance_id,
            "protocol_type": PROTOCOL_TYPE,
            "protocols": [{"name": a.name, "metadata": self._subscription(a)} for a in self.assignors],
        }
        self._group_request = self._tag("join")
        timeout = self.config.max_poll_interval_ms + JOIN_TIMEOUT_SLACK_MS
        self._sends.append(Send(COORDINATOR, "JoinGroup", fields, self._group_request, timeout))

    def _on_join(self, tag: tuple, response: dict | None, now_ms: int) -> None:
        if tag != self._group_request:
            return
        self._group_request = None
        code = self._code(response)
        if self.state != S.PREPARING_REBALANCE:
            return  # left or failed meanwhile
        if code == E.NONE:
            self.member_id = response["member_id"]
            self.generation = response["generation_id"]
            self.protocol_name = response["protocol_name"]
            self.leader_id = response["leader"]
            self._transition(S.COMPLETING_REBALANCE, now_ms)
            if self.leader_id == self.member_id:
                self._lead(response["members"], now_ms)
            else:
                self._send_sync([], now_ms)
            return
        if code == E.MEMBER_ID_REQUIRED:  # KIP-394: join again with the id we were given
            self.member_id = response["member_id"]
            self._send_join(now_ms)
            return
        if code == E.UNKNOWN_MEMBER_ID:
            self.member_id = ""
        self._join_failed(code, response, now_ms)

    def _join_failed(self, code: int, response: dict | None, now_ms: int) -> None:
        """A JoinGroup or SyncGroup failed: join again (after discovery or a backoff) or give up."""
        if code == E.FENCED_INSTANCE_ID or code in _FATAL_JOIN_ERRORS:
            self._fail(code, (response or {}).get("error_message") or "", now_ms)
            return
        if code in (E.ILLEGAL_GENERATION, E.UNKNOWN_MEMBER_ID):
            self.generation = -1
            if code == E.UNKNOWN_MEMBER_ID:
                self.member_id = ""
        if code is None or code in _COORDINATOR_GONE:
            self.coordinator_lost(now_ms, f"{'no answer' if code is None else E(code).name}")
        if code not in (E.REBALANCE_IN_PROGRESS, E.MEMBER_ID_REQUIRED):
            self._backoff(now_ms)
        if self.owned and self.protocol == COOPERATIVE and self.generation < 0:
            self._lose_everything(now_ms)
            return
        self._transition(S.UNJOINED, now_ms)

    def _lead(self, members: list[dict], now_ms: int) -> None:
        subscriptions = []
        try:
            for member in members:
                subscription = decode_subscription(member["metadata"])
                subscriptions.append(MemberSubscription(member["member_id"], member["group_instance_id"], subscription))
        except ConsumerProtocolError as error:
            # A member with unreadable metadata gets nothing; the others are still assigned.
            log.warning("group=%s leader cannot read a member's subscription: %s", self.config.group_id, error)
        self._leader_members = subscriptions
        wanted = sorted({t for m in subscriptions for t in m.subscription.topics})
        self._group_request = self._tag("assign-metadata")
        self._sends.append(Send(ANY_NODE, "Metadata", {"topics": wanted}, self._group_request, self._timeout()))

    def _on_assign_metadata(self, tag: tuple, response: dict | None, now_ms: int) -> None:
        if tag != self._group_request:
            return
        self._group_request = None
        if self.state != S.COMPLETING_REBALANCE:
            return
        if response is None or not isinstance(response.get("topics"), list):
            # The node answering Metadata failed, not the coordinator: join again after a backoff.
            self._backoff(now_ms)
            self._transition(S.UNJOINED, now_ms)
            return
        self._assigned_counts = _partition_counts(response)
        self.partition_counts.update(self._assigned_counts)
        if self._metadata_refresh_ms is None:
            self._metadata_refresh_ms = now_ms + self.config.metadata_max_age_ms
        assignor = next(a for a in self.assignors if a.name == self.protocol_name)
        assignments = assignor.assign(self.partition_counts, self._leader_members, self.generation)
        payload = [
            {"member_id": member_id, "assignment": encode_assignment(assignment)}
            for member_id, assignment in sorted(assignments.items())
        ]
        self._send_sync(payload, now_ms)

    def _send_sync(self, assignments: list[dict], now_ms: int) -> None:
        fields = {
            "group_id": self.config.group_id,
            "generation_id": self.generation,
            "member_id": self.member_id,
            "group_instance_id": self.config.group_instance_id,
            "protocol_type": PROTOCOL_TYPE,
            "protocol_name": self.protocol_name,
            "assignments": assignments,
        }
        self._group_request = self._tag("sync")
        self._sends.append(Send(COORDINATOR, "SyncGroup", fields, self._group_request, self._timeout()))

    def _on_sync(self, tag: tuple, response: dict | None, now_ms: int) -> None:
        if tag != self._group_request:
            return
        self._group_request = None
        if self.state != S.COMPLETING_REBALANCE:
            return
        code = self._code(response)
        if code != E.NONE:
            self._join_failed(code, response, now_ms)
            return
        try:
            assignment = decode_assignment(response["assignment"]) if response["assignment"] else Assignment(())
        except ConsumerProtocolError as error:
            log.warning("group=%s unreadable assignment, rejoining: %s", self.config.group_id, error)
            self._backoff(now_ms)
            self._transition(S.UNJOINED, now_ms)
            return
        assignor = next((a for a in self.assignors if a.name == self.protocol_name), None)
        if assignor is not None:
            assignor.on_assignment(assignment, self.generation)
        new = frozenset(TopicPartition(*tp) for tp in assignment.assigned_partitions)
        self._transition(S.ASSIGNING_PARTITIONS, now_ms)
        self._last_heartbeat_ok_ms = now_ms
        self._next_heartbeat_ms = now_ms + self.config.heartbeat_interval_ms
        revoked = tuple(sorted(self.owned - new))
        if self.protocol == COOPERATIVE:
            added = tuple(sorted(new - self.owned))
            self._deliver(revoked=revoked, assigned=added, owned=tuple(sorted(new)), run_assigned=True)
        else:
            self._deliver(revoked=revoked, assigned=tuple(sorted(new)), owned=tuple(sorted(new)), run_assigned=True)

    # ---- heartbeats ------------------------------------------------------------------------------------------

    def _session_started_ms(self) -> int:
        """Kafka's session timer: restarted by a heartbeat answer, the sync starting heartbeats, a new coordinator."""
        return max(self._last_heartbeat_ok_ms, self._session_timer_ms)

    def _maybe_heartbeat(self, now_ms: int) -> None:
        if self.state not in HEARTBEAT_STATES or self._next_heartbeat_ms is None:
            return
        if now_ms - self._session_started_ms() > self.config.session_timeout_ms:
            # Kafka's heartbeat thread: no answer for a whole session means the coordinator is unreachable, also
            # with a heartbeat in flight (a paused or partitioned coordinator never answers it; a late answer is
            # stale).
            self._session_timer_ms = now_ms
            self._heartbeat_tag = None
            self.coordinator_lost(now_ms, "no heartbeat answer within session.timeout.ms")
            return
        if self._heartbeat_tag is not None or now_ms < self._next_heartbeat_ms:
            return
        fields = {
            "group_id": self.config.group_id,
            "generation_id": self.generation,
            "member_id": self.member_id,
            "group_instance_id": self.config.group_instance_id,
        }
        self._heartbeat_tag = self._tag("heartbeat")
        self._sends.append(Send(COORDINATOR, "Heartbeat", fields, self._heartbeat_tag, self._timeout()))

    def _on_heartbeat(self, tag: tuple, response: dict | None, now_ms: int) -> None:
        if tag != self._heartbeat_tag:
            return
        self._heartbeat_tag = None
        code = self._code(response)
        if self.state not in HEARTBEAT_STATES or tag[1] != self.generation:
            return
        self._next_heartbeat_ms = now_ms + self.config.heartbeat_interval_ms
        if code in (E.NONE, E.REBALANCE_IN_PROGRESS):
            self._last_heartbeat_ok_ms = now_ms
        if code == E.REBALANCE_IN_PROGRESS:
            if self.state == S.STABLE:
                self._start_rebalance(now_ms)
            else:
                self._rejoin_needed = True
        elif code in (E.ILLEGAL_GENERATION, E.UNKNOWN_MEMBER_ID):
            # Kafka's resetGenerationOnResponseError: the group moved on without us; our partitions are lost.
            self.generation = -1
            if code == E.UNKNOWN_MEMBER_ID:
                self.member_id = ""
            self._lose_everything(now_ms)
        elif code == E.FENCED_INSTANCE_ID:
            self._fail(code, response.get("error_message") or "", now_ms)
        elif code is None or code in _COORDINATOR_GONE:
            self.coordinator_lost(now_ms, "heartbeat failed")
            self._next_heartbeat_ms = now_ms + self.config.retry_backoff_ms

    # ---- leaving, losing, failing ----------------------------------------------------------------------------

    def _check_poll_timeout(self, now_ms: int) -> None:
        if self._poll_timed_out or not self.subscribed or self.state in (S.UNJOINED, S.LEAVING):
            return
        if now_ms - self._last_poll_ms <= self.config.max_poll_interval_ms:
            return
        log.warning(
            "group=%s member=%s: poll() not called within max.poll.interval.ms=%d; leaving the group",
            self.config.group_id,
            self.member_id,
            self.config.max_poll_interval_ms,
        )
        self._poll_timed_out = True
        self._drop_everything("max.poll.interval.ms exceeded", now_ms, leave=True)

    def _drop_everything(self, reason: str, now_ms: int, leave: bool) -> None:
        """Forget the generation (sending LeaveGroup if dynamic and asked) and report owned partitions lost."""
        if leave and self.generation >= 0 and self.config.group_instance_id is None and self.coordinator:
            fields = {
                "group_id": self.config.group_id,
                "members": [{"member_id": self.member_id, "group_instance_id": None}],
            }
            self._sends.append(Send(COORDINATOR, "LeaveGroup", fields, self._tag("left"), self._timeout()))
        self.generation = -1
        self.member_id = ""
        self._group_request = None
        self._lose_everything(now_ms)

    def _lose_everything(self, now_ms: int) -> None:
        self._heartbeat_tag = None
        self._next_heartbeat_ms = None
        self._group_request = None
        if self._pending is not None:
            # Callbacks for the superseded event may still run; what was to be owned is lost now.
            lost = tuple(sorted(set(self._pending.owned) | self.owned))
            self._pending = None
        else:
            lost = tuple(sorted(self.owned))
        self._transition(S.UNJOINED, now_ms)
        if lost:
            self._deliver(lost=lost, owned=())
            self.owned = frozenset()

    def _send_leave(self, now_ms: int) -> None:
        self._transition(S.LEAVING, now_ms)
        fields = {
            "group_id": self.config.group_id,
            "members": [{"member_id": self.member_id, "group_instance_id": self.config.group_instance_id}],
        }
        self._sends.append(Send(COORDINATOR, "LeaveGroup", fields, self._tag("leave"), self._timeout()))

    def _fail(self, code: int, message: str, now_ms: int) -> None:
        if code == E.FENCED_INSTANCE_ID:
            error: ZkcoordError = FencedInstanceIdError(
                code,
                f"group.instance.id {self.config.group_instance_id!r} is used by another consumer of group "
                f"{self.config.group_id!r}; this consumer is fenced and must be closed",
            )
        else:
            error = CoordinatorResponseError(code, message or "JoinGroup refused")
        self.fatal_error = error
        self._group_request = None
        self._heartbeat_tag = None
        self._next_heartbeat_ms = None
        self.state, previous = S.FATAL, self.state
        self._events.append(Transition(previous, S.FATAL, self.generation, self.member_id, now_ms))
        self._events.append(Fatal(error))
        for request in list(self._app.values()):
            self._complete(request.request_id, error=error)

    # ---- metadata refresh: pattern matches, partition counts ---------------------------------------------------

    def _on_metadata(self, tag: tuple, response: dict | None, now_ms: int) -> None:
        if tag != self._metadata_tag:
            return
        self._metadata_tag = None
        leads = self.leader_id == self.member_id and bool(self._assigned_counts)
        if self.pattern is None and not leads:
            self._metadata_refresh_ms = None
            return
        if response is None or not isinstance(response.get("topics"), list):
            self._metadata_refresh_ms = now_ms + self.config.retry_backoff_ms
            return
        self._metadata_refresh_ms = now_ms + self.config.metadata_max_age_ms
        counts = _partition_counts(response)
        self.partition_counts.update(counts)
        if self.pattern is not None:
            self._change_topics(frozenset(t for t in counts if self.pattern.fullmatch(t)), now_ms)
        changed = sorted(t for t, count in self._assigned_counts.items() if counts.get(t, count) != count)
        if leads and changed and self.state == S.STABLE:
            log.info(
                "group=%s partition count of %s changed since the assignment: rejoining",
                self.config.group_id,
                ", ".join(changed),
            )
            self._rejoin_needed = True
            self._start_rebalance(now_ms)

    def _change_topics(self, topics: frozenset[str], now_ms: int) -> None:
        if topics == self.topics:
            return
        self.topics = topics
        if self.state in (S.STABLE, S.ASSIGNING_PARTITIONS, S.COMPLETING_REBALANCE, S.PREPARING_REBALANCE):
            self._rejoin_needed = True
            if self.state == S.STABLE:
                self._start_rebalance(now_ms)

    # ---- application requests --------------------------------------------------------------------------------

    def _run_app_requests(self, now_ms: int) -> None:
        for request in list(self._app.values()):
            if request.sent:
                continue
            if now_ms >= request.deadline_ms:
                self._complete(
                    request.request_id,
                    error=CoordinatorResponseError(E.REQUEST_TIMED_OUT, f"{request.api} not answered in time"),
                )
                continue
            if now_ms < request.not_before_ms:
                continue
            target = ANY_NODE if request.api == "Metadata" else COORDINATOR
            if target == COORDINATOR and self.coordinator is None:
                if self.coordinator_state == CoordinatorState.DOWN:
                    self._complete(request.request_id, error=ZkcoordError(f"{request.api} needs a group.id"))
                continue
            if request.api == "OffsetCommit" and self.state in (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE):
                # Kafka's generationIfStable(): sent now, the commit would queue behind the parked JoinGroup (or the
                # SyncGroup) on the coordinator connection for the whole rebalance, then fail with the generation it
                # carried although a cooperative member still owns its partitions.
                self._complete(
                    request.request_id,
                    error=RebalanceInProgressError(
                        "commit not sent: the group is being rebalanced; commit again once poll() completed it"
                    ),
                )
                continue
            fields = dict(request.fields)
            if request.api == "OffsetCommit":
                fields.update(self._commit_identity())
            tag = self._tag("app", request.request_id)
            self._app_tags[tag] = request.request_id
            request.sent = True
            self._sends.append(Send(target, request.api, fields, tag, request.deadline_ms - now_ms))

    def _commit_identity(self) -> dict:
        """Kafka commits with the member's generation when it has one, else as a simple (-1) commit."""
        if self.generation >= 0:
            return {
                "group_id": self.config.group_id,
                "generation_id": self.generation,
                "member_id": self.member_id,
                "group_instance_id": self.config.group_instance_id,
            }
        return {"group_id": self.config.group_id, "generation_id": -1, "member_id": "", "group_instance_id": None}

    def _on_app_response(self, tag: tuple, response: dict | None, now_ms: int) -> None:
        request_id = self._app_tags.pop(tag, None)
        request = self._app.get(request_id)
        if request is None:
            return
        request.sent = False
        if response is None:
            if request.api != "Metadata":
                self.coordinator_lost(now_ms, f"{request.api} failed")
            request.not_before_ms = now_ms + self.config.retry_backoff_ms
            return
        code = self._code(response)
        if request.api == "OffsetCommit":
            codes = {p["error_code"] for t in response.get("topics", []) for p in t.get("partitions", [])}
            code = next((c for c in codes if c != E.NONE), E.NONE)
        if code in _COORDINATOR_GONE or code == E.COORDINATOR_LOAD_IN_PROGRESS:
            if code in _COORDINATOR_GONE:
                self.coordinator_lost(now_ms, f"{request.api}: {E(code).name}")
            request.not_before_ms = now_ms + self.config.retry_backoff_ms
            return
        if code != E.NONE:
            message = response.get("error_message") or ""
            error = (
                commit_error(code, message)
                if request.api == "OffsetCommit"
                else CoordinatorResponseError(code, message)
            )
            if code == E.FENCED_INSTANCE_ID:
                self._fail(code, message, now_ms)
            self._complete(request.request_id, error=error)
            return
        if request.api == "OffsetFetch":
            value = {
                TopicPartition(t["name"], p["partition_index"]): (
                    None if p["committed_offset"] < 0 else (p["committed_offset"], p.get("metadata"))
                )
                for t in response["topics"]
                for p in t["partitions"]
            }
        elif request.api == "Metadata":
            value = _partition_counts(response)
            self.partition_counts.update(value)
        else:
            value = None
        self._complete(request.request_id, value=value)

    def _complete(self, request_id: int, value: Any = None, error: ZkcoordError | None = None) -> None:
        if self._app.pop(request_id, None) is not None:
            self._events.append(Completed(request_id, value, error))

    # ---- helpers ---------------------------------------------------------------------------------------------

    def _deliver(self, **fields: Any) -> None:
        event = Reconcile(next(self._event_ids), self.generation, self.member_id, **fields)
        self._pending = event
        self._events.append(event)

    def _transition(self, state: MemberState, now_ms: int) -> None:
        if state == self.state:
            return
        check_member_transition(self.state, state)
        previous, self.state = self.state, state
        self._events.append(Transition(previous, state, self.generation, self.member_id, now_ms))

    def _backoff(self, now_ms: int) -> None:
        self._not_before_ms = now_ms + self.config.retry_backoff_ms

    def _timeout(self) -> int:
        return self.config.request_timeout_ms

    def _tag(self, kind: str, *extra: Any) -> tuple:
        return (kind, self.generation, next(self._tags), *extra)

    @staticmethod
    def _code(response: dict | None) -> int | None:
        if response is None:
            return None
        return response.get("error_code", E.NONE)


def _partition_counts(response: dict) -> dict[str, int]:
    return {
        topic["name"]: len(topic["partitions"])
        for topic in response.get("topics", [])
        if topic.get("error_code", 0) == E.NONE and topic.get("partitions")
    }
