"""The client side of the classic group protocol as a pure state machine: inputs in, requests and events out.

:class:`GroupMember` owns everything a consumer's background worker decides: coordinator discovery, JoinGroup,
the leader's assignment, SyncGroup, heartbeats, LeaveGroup, and the commits and offset fetches the poll side asks
for. It sends nothing itself: it queues :class:`Send` effects (a request and the tag its answer comes back with)
and :class:`Reconcile` / :class:`Completed` / :class:`Fatal` events for the poll side, and says when it next needs
to run. Time is an argument. The worker in ``zkcoord.client.worker`` does the IO.

Rebalance callbacks are the poll side's: the member hands it a :class:`Reconcile` (partitions lost, revoked,
assigned) and waits for :meth:`GroupMember.ack` before it goes on — an eager member joins only after its
revocation was acknowledged, which is what makes ownership exclusive. While its session is in doubt
(:meth:`GroupMember.session_in_doubt`) the poll side reads none of its partitions, until the coordinator confirms
the generation (resume, no rebalance) or ends it (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION: the partitions are lost,
the member joins again).

This module is the member's state machine (``MemberState``, with its table in ``zkcoord.membership.states``):
joining, syncing, reconciling, leaving. It hands the rest to its parts: finding the coordinator and heartbeating
to :class:`~zkcoord.membership.coordinator.CoordinatorLink`, the session in doubt and its probe to
:class:`~zkcoord.membership.doubt.SessionDoubt`, topics and their metadata refresh to
:class:`~zkcoord.membership.subscription.TopicSubscription`, the poll side's commits, offset fetches and metadata
requests to :class:`~zkcoord.membership.requests.ApplicationRequests`; request fields and the consumer protocol's
bytes come from ``zkcoord.membership.protocol``, effects and events from ``zkcoord.membership.effects``.

Pure: no IO, no gevent, no clock. Imports zkcoord.assign.consumer, zkcoord.wire.consumer_protocol, zkcoord.errors
and the other zkcoord.membership modules.
"""

import itertools
import logging
from collections.abc import Collection, Sequence
from typing import Any

from zkcoord.assign.consumer import COOPERATIVE, ConsumerAssignor, MemberSubscription, rebalance_protocol
from zkcoord.errors import (
    ErrorCode,
    ZkcoordError,
    error_for,
)
from zkcoord.membership.coordinator import CoordinatorLink
from zkcoord.membership.doubt import SessionDoubt
from zkcoord.membership.effects import (
    ANY_NODE,
    COORDINATOR,
    COORDINATOR_GONE,
    Fatal,
    MembershipConfig,
    Outbox,
    Reconcile,
    Send,
    Transition,
    error_code,
)
from zkcoord.membership.protocol import (
    commit_identity,
    join_group,
    join_protocols,
    leader_assignments,
    leave_group,
    member_identity,
    member_subscriptions,
    received_assignment,
    sync_group,
)
from zkcoord.membership.requests import ApplicationRequests, topic_partition_counts
from zkcoord.membership.states import HEARTBEAT_STATES, CoordinatorState, MemberState, check_member_transition
from zkcoord.membership.subscription import TopicSubscription
from zkcoord.model import TopicPartition
from zkcoord.wire.consumer_protocol import ConsumerProtocolError
from zkcoord.wire.messages import JoinGroupResponseMember, MetadataResponse, Response

log = logging.getLogger(__name__)

E = ErrorCode
S = MemberState
JOIN_TIMEOUT_SLACK_MS = 5000  # Kafka waits rebalance.timeout.ms + 5 s for a JoinGroup answer
# Errors after which the member must join again from scratch; these are not the user's to handle.
_FATAL_JOIN_ERRORS = frozenset(
    {E.INVALID_GROUP_ID, E.INVALID_SESSION_TIMEOUT, E.INCONSISTENT_GROUP_PROTOCOL, E.GROUP_MAX_SIZE_REACHED}
)


class GroupMember:
    """One consumer's membership in its group; see the module docstring. Drive it from one thread only."""

    def __init__(self, config: MembershipConfig, assignors: Sequence[ConsumerAssignor], now_ms: int):
        self.config = config
        self.assignors = list(assignors)
        self.protocol = rebalance_protocol(self.assignors)
        self.state = S.UNJOINED
        self.member_id = ""
        self.generation = -1
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.owned: frozenset[TopicPartition] = frozenset()
        self.fatal_error: ZkcoordError | None = None
        self._outbox = Outbox()
        self._tags = itertools.count(1)
        self._event_ids = itertools.count(1)
        self._link = CoordinatorLink(config, self._outbox, self._tag, now_ms)
        self._subscription = TopicSubscription(config, self._outbox, self._tag)
        self._requests = ApplicationRequests(config, self._outbox, self._tag)
        self._doubt = SessionDoubt(config, self._outbox, self._tag, self._link, self._requests, now_ms)
        self._pending: Reconcile | None = None
        self._group_request: tuple | None = None  # tag of the in-flight JoinGroup/SyncGroup/leader Metadata
        self._sync_sent_ms = now_ms
        self._rejoin_needed = False
        self._not_before_ms = now_ms  # backoff for discovery and joins
        self._last_poll_ms = now_ms
        self._poll_timed_out = False
        self._leader_members: list[MemberSubscription] = []

    # ---- outputs ---------------------------------------------------------------------------------------------

    def take_sends(self) -> list[Send]:
        return self._outbox.take_sends()

    def take_events(self) -> list[Any]:
        return self._outbox.take_events()

    @property
    def coordinator(self) -> tuple[int, str, int] | None:
        """The coordinator's node id, host and port; None until it is found."""
        return self._link.coordinator

    @property
    def coordinator_state(self) -> CoordinatorState:
        return self._link.state

    @property
    def last_heartbeat_ms(self) -> int:
        """When the last heartbeat the coordinator answered (or the sync that started the heartbeats) was sent."""
        return self._link.last_heartbeat_ms

    def session_in_doubt(self, now_ms: int) -> bool:
        """Whether the member holds a generation its coordinator confirmed nothing of for session.timeout.ms.

        The coordinator may have expired the member by then and handed its partitions to others, or it may be
        failing over and keep the member: only its next answer tells. Meanwhile the poll side hands out no record.
        It asks this from its own thread: the member reads only values the worker replaces whole.
        """
        return self._doubt.in_doubt(now_ms, self.state in HEARTBEAT_STATES)

    @property
    def poll_timed_out(self) -> bool:
        """The member left for max.poll.interval.ms and waits for the next poll to join again."""
        return self._poll_timed_out

    @property
    def topics(self) -> frozenset[str]:
        """The topics subscribed to: as given, or those the pattern matches."""
        return self._subscription.topics

    @property
    def subscribed(self) -> bool:
        return self._subscription.subscribed

    def next_wakeup_ms(self, now_ms: int) -> int:
        """When :meth:`tick` must run next, at the latest, if no input arrives meanwhile.

        Call it right after :meth:`tick`: whatever was due and possible is done, so a deadline already passed is
        waiting for an input (a coordinator, an answer) and must not make the caller spin.
        """
        deadlines = [now_ms + 1000, self._last_poll_ms + self.config.max_poll_interval_ms + 1, self._not_before_ms]
        deadlines += self._link.deadlines()
        deadlines += self._subscription.deadlines()
        deadlines += self._requests.deadlines()
        deadlines += self._doubt.deadlines(self.session_in_doubt(now_ms))
        return min(d for d in deadlines if d > now_ms)

    # ---- inputs from the poll side ---------------------------------------------------------------------------

    def subscribe(self, topics: Collection[str] = (), pattern: str | None = None, now_ms: int = 0) -> None:
        """Subscribe to ``topics`` or to the topics matching ``pattern``; a change triggers a rebalance."""
        self._change_topics(self._subscription.subscribe(topics, pattern, now_ms), now_ms)

    def unsubscribe(self, now_ms: int) -> None:
        """Leave the group (dynamic members) and drop every partition, as Kafka's unsubscribe."""
        self._subscription.clear()
        self.owned = frozenset()  # the poll side revoked them (with callbacks) before it called this
        self._requests.keep_committed(())
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
        # A partition the member did not own throughout may have been committed by another member meanwhile.
        self._requests.keep_committed(self.owned & frozenset(pending.owned))
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
        self._requests.add(request_id, api, fields, now_ms + timeout_ms)
        if self.fatal_error is not None:  # nothing is sent any more: answer with what stopped the member
            self._requests.fail_all(self.fatal_error)
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
        self._link.lost(now_ms, reason)

    def on_response(self, tag: tuple, response: Response | None, now_ms: int) -> None:
        """The answer to the :class:`Send` with ``tag``; ``None`` when the request failed (connection, timeout)."""
        kind = tag[0]
        if kind == "find":
            if self._link.on_find(tag, response, now_ms):
                self._backoff(now_ms)
        elif kind == "join":
            self._on_join(tag, response, now_ms)
        elif kind == "assign-metadata":
            self._on_assign_metadata(tag, response, now_ms)
        elif kind == "sync":
            self._on_sync(tag, response, now_ms)
        elif kind == "heartbeat":
            self._on_heartbeat(tag, response, now_ms)
        elif kind == "probe":
            self._on_probe(tag, response, now_ms)
        elif kind == "leave":
            self._transition(S.LEFT, now_ms)
        elif kind == "metadata":
            self._on_metadata(tag, response, now_ms)
        elif kind == "app":
            self._on_application_answer(tag, response, now_ms)
        self.tick(now_ms)

    # ---- timers ----------------------------------------------------------------------------------------------

    def tick(self, now_ms: int) -> None:
        """Do whatever is due: discovery, joins, heartbeats, poll timeout, application requests."""
        if self.state in (S.LEFT, S.FATAL):
            return
        self._check_poll_timeout(now_ms)
        self._doubt.report(self.session_in_doubt(now_ms), self.member_id, self.generation)
        if self._link.needs_discovery and now_ms >= self._not_before_ms:
            self._link.find()
        self._subscription.refresh(now_ms)
        if self.coordinator is not None:
            self._maybe_join(now_ms)
            self._maybe_heartbeat(now_ms)
            self._maybe_probe(now_ms)
        if self.coordinator is None:
            self._doubt.forget()  # the probe went to a coordinator given up: ask the next one
        self._send_application_requests(now_ms)

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

    def _send_join(self, now_ms: int) -> None:
        self._rejoin_needed = False
        if self.coordinator is None:
            self._transition(S.UNJOINED, now_ms)  # joins once the coordinator is found
            return
        if self.state != S.PREPARING_REBALANCE:
            self._transition(S.PREPARING_REBALANCE, now_ms)
        owned = self.owned if self.protocol == COOPERATIVE else ()
        fields = join_group(self.config, self.member_id, join_protocols(self.assignors, self.topics, owned))
        self._group_request = self._tag("join")
        timeout = self.config.max_poll_interval_ms + JOIN_TIMEOUT_SLACK_MS
        self._outbox.send(Send(COORDINATOR, "JoinGroup", fields, self._group_request, timeout))

    def _on_join(self, tag: tuple, response: Response | None, now_ms: int) -> None:
        if tag != self._group_request:
            return
        self._group_request = None
        code = error_code(response)
        if self.state != S.PREPARING_REBALANCE:
            return  # left or failed meanwhile
        if code == E.NONE:
            self.member_id = response.member_id
            self.generation = response.generation_id
            self.protocol_name = response.protocol_name
            self.leader_id = response.leader
            self._transition(S.COMPLETING_REBALANCE, now_ms)
            if self.leader_id == self.member_id:
                self._lead(response.members, now_ms)
            else:
                self._send_sync([], now_ms)
            return
        if code == E.MEMBER_ID_REQUIRED:  # KIP-394: join again with the id we were given
            self.member_id = response.member_id
            self._send_join(now_ms)
            return
        if code == E.UNKNOWN_MEMBER_ID:
            self.member_id = ""
        self._join_failed(code, response, now_ms)

    def _join_failed(self, code: int, response: Response | None, now_ms: int) -> None:
        """A JoinGroup or SyncGroup failed: join again (after discovery or a backoff) or give up."""
        if code == E.FENCED_INSTANCE_ID or code in _FATAL_JOIN_ERRORS:
            self._fail(code, getattr(response, "error_message", None) or "", now_ms)
            return
        if code in (E.ILLEGAL_GENERATION, E.UNKNOWN_MEMBER_ID):
            self.generation = -1
            if code == E.UNKNOWN_MEMBER_ID:
                self.member_id = ""
        if code is None or code in COORDINATOR_GONE:
            self.coordinator_lost(now_ms, f"{'no answer' if code is None else E(code).name}")
        if code not in (E.REBALANCE_IN_PROGRESS, E.MEMBER_ID_REQUIRED):
            self._backoff(now_ms)
        if self.owned and self.protocol == COOPERATIVE and self.generation < 0:
            self._lose_everything(now_ms)
            return
        self._transition(S.UNJOINED, now_ms)

    def _lead(self, members: Sequence[JoinGroupResponseMember], now_ms: int) -> None:
        self._leader_members = member_subscriptions(self.config.group_id, members)
        wanted = sorted({t for m in self._leader_members for t in m.subscription.topics})
        self._group_request = self._tag("assign-metadata")
        self._outbox.send(Send(ANY_NODE, "Metadata", {"topics": wanted}, self._group_request, self._timeout()))

    def _on_assign_metadata(self, tag: tuple, response: Response | None, now_ms: int) -> None:
        if tag != self._group_request:
            return
        self._group_request = None
        if self.state != S.COMPLETING_REBALANCE:
            return
        if type(response) is not MetadataResponse:
            # The node answering Metadata failed, not the coordinator: join again after a backoff.
            self._backoff(now_ms)
            self._transition(S.UNJOINED, now_ms)
            return
        self._subscription.assigned(topic_partition_counts(response), now_ms)
        assignor = next(a for a in self.assignors if a.name == self.protocol_name)
        assignments = leader_assignments(
            assignor, self._subscription.partition_counts, self._leader_members, self.generation
        )
        self._send_sync(assignments, now_ms)

    def _send_sync(self, assignments: list[dict], now_ms: int) -> None:
        fields = sync_group(self.config, self.generation, self.member_id, self.protocol_name, assignments)
        self._group_request = self._tag("sync")
        self._sync_sent_ms = now_ms
        self._outbox.send(Send(COORDINATOR, "SyncGroup", fields, self._group_request, self._timeout()))

    def _on_sync(self, tag: tuple, response: Response | None, now_ms: int) -> None:
        if tag != self._group_request:
            return
        self._group_request = None
        if self.state != S.COMPLETING_REBALANCE:
            return
        code = error_code(response)
        if code != E.NONE:
            self._join_failed(code, response, now_ms)
            return
        try:
            assignment = received_assignment(response.assignment)
        except ConsumerProtocolError as error:
            log.warning("group=%s unreadable assignment, rejoining: %s", self.config.group_id, error)
            self._backoff(now_ms)
            self._transition(S.UNJOINED, now_ms)
            return
        assignor = next((a for a in self.assignors if a.name == self.protocol_name), None)
        if assignor is not None:
            assignor.on_assignment(assignment, self.generation)
        new = frozenset(TopicPartition(*tp) for tp in assignment.assigned_partitions)
        self._link.start_heartbeats(now_ms, self._sync_sent_ms)  # first: the poll side reads the session's deadline
        self._transition(S.ASSIGNING_PARTITIONS, now_ms)
        revoked = tuple(sorted(self.owned - new))
        if self.protocol == COOPERATIVE:
            added = tuple(sorted(new - self.owned))
            self._deliver(revoked=revoked, assigned=added, owned=tuple(sorted(new)), run_assigned=True)
        else:
            self._deliver(revoked=revoked, assigned=tuple(sorted(new)), owned=tuple(sorted(new)), run_assigned=True)

    # ---- heartbeats ------------------------------------------------------------------------------------------

    def _maybe_heartbeat(self, now_ms: int) -> None:
        if self.state in HEARTBEAT_STATES:
            self._link.heartbeat(now_ms, self._identity)

    def _on_heartbeat(self, tag: tuple, response: Response | None, now_ms: int) -> None:
        if not self._link.heartbeat_answered(tag) or self.state not in HEARTBEAT_STATES or tag[1] != self.generation:
            return
        code = self._link.heartbeat_done(response, now_ms, probing=self._doubt.probing(self.owned))
        self._on_generation_answer(code, response, now_ms)

    def _maybe_probe(self, now_ms: int) -> None:
        self._doubt.probe(now_ms, self.session_in_doubt(now_ms), self.owned, self._identity)

    def _on_probe(self, tag: tuple, response: Response | None, now_ms: int) -> None:
        if not self._doubt.probe_answered(tag) or self.state not in HEARTBEAT_STATES or tag[1] != self.generation:
            return
        code = self._doubt.probe_done(response)
        if code is None or code in COORDINATOR_GONE:
            self.coordinator_lost(now_ms, f"probe commit: {'no answer' if code is None else E(code).name}")
        else:  # COORDINATOR_LOAD_IN_PROGRESS and partition errors leave the member in doubt: it asks again
            self._on_generation_answer(code, response, now_ms)

    def _on_generation_answer(self, code: int | None, response: Response | None, now_ms: int) -> None:
        """What a heartbeat's or a probe's answer says about the member's generation."""
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
            self._fail(code, getattr(response, "error_message", None) or "", now_ms)

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
            fields = leave_group(self.config, self.member_id, None)
            self._outbox.send(Send(COORDINATOR, "LeaveGroup", fields, self._tag("left"), self._timeout()))
        self.generation = -1
        self.member_id = ""
        self._group_request = None
        self._lose_everything(now_ms)

    def _lose_everything(self, now_ms: int) -> None:
        self._link.stop_heartbeats()
        self._group_request = None
        self._doubt.forget()
        self._requests.keep_committed(())
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
        fields = leave_group(self.config, self.member_id, self.config.group_instance_id)
        self._outbox.send(Send(COORDINATOR, "LeaveGroup", fields, self._tag("leave"), self._timeout()))

    def _fail(self, code: int, message: str, now_ms: int) -> None:
        if code == E.FENCED_INSTANCE_ID:
            message = (
                f"group.instance.id {self.config.group_instance_id!r} is used by another consumer of group "
                f"{self.config.group_id!r}; this consumer is fenced and must be closed"
            )
        self.fail(error_for(code, message or "JoinGroup refused"), now_ms)

    def fail(self, error: ZkcoordError, now_ms: int) -> None:
        """Stop for good on ``error`` (fenced, refused, or a node that refuses the client's credentials): pending
        and later application requests fail with it, and the poll side gets it as :class:`Fatal`."""
        if self.state == S.FATAL:
            return
        self.fatal_error = error
        self._group_request = None
        self._link.stop_heartbeats()
        self.state, previous = S.FATAL, self.state
        self._outbox.emit(Transition(previous, S.FATAL, self.generation, self.member_id, now_ms))
        self._outbox.emit(Fatal(error))
        self._requests.fail_all(error)

    # ---- metadata refresh: pattern matches, partition counts ---------------------------------------------------

    def _on_metadata(self, tag: tuple, response: Response | None, now_ms: int) -> None:
        change = self._subscription.on_refresh(tag, response, now_ms, leader=self.leader_id == self.member_id)
        if change is None:
            return
        if change.matching is not None:
            self._change_topics(change.matching, now_ms)
        if change.resized and self.state == S.STABLE:
            log.info(
                "group=%s partition count of %s changed since the assignment: rejoining",
                self.config.group_id,
                ", ".join(change.resized),
            )
            self._rejoin_needed = True
            self._start_rebalance(now_ms)

    def _change_topics(self, topics: frozenset[str], now_ms: int) -> None:
        if topics == self._subscription.topics:
            return
        self._subscription.topics = topics
        if self.state in (S.STABLE, S.ASSIGNING_PARTITIONS, S.COMPLETING_REBALANCE, S.PREPARING_REBALANCE):
            self._rejoin_needed = True
            if self.state == S.STABLE:
                self._start_rebalance(now_ms)

    # ---- application requests --------------------------------------------------------------------------------

    def _send_application_requests(self, now_ms: int) -> None:
        identity = commit_identity(self.config, self.generation, self.member_id)
        rebalancing = self.state in (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE)
        self._requests.send_due(now_ms, self.coordinator_state, identity, rebalancing)

    def _on_application_answer(self, tag: tuple, response: Response | None, now_ms: int) -> None:
        answer = self._requests.on_response(tag, response, now_ms)
        if answer.confirmed_sent_ms is not None and tag[1] == self.generation and self.state in HEARTBEAT_STATES:
            # The coordinator checked this generation and member id and renewed the session as it took the commit.
            self._link.confirmed(answer.confirmed_sent_ms)
        if answer.coordinator_lost is not None:
            self.coordinator_lost(now_ms, answer.coordinator_lost)
        if answer.fenced is not None:
            self._fail(E.FENCED_INSTANCE_ID, answer.fenced, now_ms)
        if answer.partition_counts is not None:
            self._subscription.partition_counts.update(answer.partition_counts)

    # ---- helpers ---------------------------------------------------------------------------------------------

    def _deliver(self, **fields: Any) -> None:
        event = Reconcile(next(self._event_ids), self.generation, self.member_id, **fields)
        self._pending = event
        self._outbox.emit(event)

    def _transition(self, state: MemberState, now_ms: int) -> None:
        if state == self.state:
            return
        check_member_transition(self.state, state)
        previous, self.state = self.state, state
        self._outbox.emit(Transition(previous, state, self.generation, self.member_id, now_ms))

    def _backoff(self, now_ms: int) -> None:
        self._not_before_ms = now_ms + self.config.retry_backoff_ms

    def _identity(self) -> dict:
        """The generation's fields of a Heartbeat or a probe, as they are when it is sent."""
        return member_identity(self.config, self.generation, self.member_id)

    def _timeout(self) -> int:
        return self.config.request_timeout_ms

    def _tag(self, kind: str, *extra: Any) -> tuple:
        return (kind, self.generation, next(self._tags), *extra)
