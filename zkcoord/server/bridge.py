"""Mixed groups on a node: the coordinator's members take part in their group's 0.8.2 ZooKeeper protocol.

For a group with a bridge znode (set up by ``zkcoord migrate up`` into DUAL_WRITE), a node that leads the
group's offsets partition runs JoinGroup, SyncGroup and LeaveGroup through :class:`MixedGroups` before and
after the core:

- JoinGroup: a member offering only cooperative assignors, or a subscription 0.8.2's assignment cannot take,
  is refused (23, with the reason); the cooperative assignors of the others are dropped, so the group is
  eager. The member has revoked everything before joining, so the partitions it owned are released
  (:func:`~zkcoord.bridge.core.release_plan`). When the core has admitted it, it is registered under
  ``/consumers/<g>/ids`` before its answer goes out.
- SyncGroup from the leader: the leader's assignment is replaced by 0.8.2's over every registration, and the
  owner znodes are claimed first (:func:`~zkcoord.bridge.core.handover_plan`), with 0.8.2's retries and
  back-off; then the core stores and hands out that assignment. Every SyncGroup answer goes out only once the
  member's partitions' owner znodes name its thread (a member can get a kept assignment back without a handover).
- LeaveGroup: the member's partitions are released and its registration deleted.

Plans are carried out by :mod:`zkcoord.server.bridge_plans`; a periodic check (:mod:`zkcoord.server.bridge_check`)
takes the bridge over after a failover, releases departed members and follows changes of the registrations.
Registrations and owner znodes are persistent and fenced (:mod:`zkcoord.server.bridge_zk`), so they outlive this
node's session.

IO: gevent and the node's gevent kazoo client, each ZooKeeper round bounded in time.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable

import gevent
import msgspec
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException

from zkcoord.bridge import core as bridge
from zkcoord.errors import ErrorCode, ZkcoordError
from zkcoord.group.coordinator import GroupCoordinator
from zkcoord.model import GroupState
from zkcoord.runtime.runtime import Send
from zkcoord.server.bridge_check import BridgeChecks
from zkcoord.server.bridge_plans import (
    ZOOKEEPER_TIMEOUT_S,
    BridgedGroup,
    BridgeSettings,
    PlanRunner,
    consumer_id_in,
)
from zkcoord.server.bridge_zk import (
    BridgeError,
    GroupView,
)
from zkcoord.wire.consumer_protocol import Assignment, ConsumerProtocolError
from zkcoord.wire.kafka.consumer_protocol import encode_assignment_like, read_assignment, read_subscription
from zkcoord.wire.messages import (
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    Request,
    SyncGroupRequest,
    SyncGroupRequestAssignment,
    SyncGroupResponse,
)
from zkcoord.zk import layout
from zkcoord.zk.topic_filter import UnsupportedFilterError

log = logging.getLogger(__name__)


class MixedGroups:
    """A node's bridge; :meth:`start` with the node's kazoo client."""

    def __init__(
        self,
        root: str,
        core: GroupCoordinator,
        submit: Callable[[Request, Send], None],
        enter: Callable,
        epochs: dict[int, int],
        clock,
        settings: BridgeSettings,
    ):
        self.root, self.core, self.submit, self.enter = root, core, submit, enter
        self.clock, self.settings = clock, settings
        self.bridged: dict[str, BridgedGroup] = {}
        self.runner = PlanRunner(root, core, epochs, settings)
        self.checks = BridgeChecks(self.runner, self.bridged, enter, clock)
        self.refusals_total = 0
        self._greenlet: gevent.Greenlet | None = None

    def start(self, zk: KazooClient) -> None:
        self.runner.zk = zk
        zk.ensure_path(layout.bridge_groups_path(self.root))
        zk.ChildrenWatch(layout.bridge_groups_path(self.root), self._on_bridged)
        self._greenlet = gevent.spawn(self.checks.run)

    def stop(self) -> None:
        if self._greenlet is not None:
            self._greenlet.kill(block=False)

    def stats(self) -> dict:
        """The bridge's figures, as metrics and tests read them."""
        return {
            "groups": sum(1 for group in self.bridged if self.core.serves(group)),
            "join_refusals_total": self.refusals_total,
            "claim_conflicts_total": self.runner.claim_conflicts_total,
            "departed_released_total": self.checks.departed_released_total,
            "legacy_retriggers_total": self.checks.pokes_total,
        }

    def _on_bridged(self, groups: list[str]) -> None:
        for group in set(self.bridged) - set(groups):
            del self.bridged[group]
        for group in groups:
            self.bridged.setdefault(group, BridgedGroup())
        self.core.mixed = frozenset(groups)

    # -- requests ---------------------------------------------------------------------------------------------

    def takes(self, request: Request) -> bool:
        """Whether ``request`` goes through the bridge (a Join, Sync or Leave of a bridged group served here)."""
        kind = type(request)
        return (
            kind in (JoinGroupRequest, SyncGroupRequest, LeaveGroupRequest)
            and request.group_id in self.bridged
            and self.core.serves(request.group_id)
        )

    def admit(self, request: Request, respond: Send) -> None:
        """Carry ``request`` through the bridge on a greenlet of its own (it waits for ZooKeeper)."""
        handler = {JoinGroupRequest: self._join, SyncGroupRequest: self._sync, LeaveGroupRequest: self._leave}
        self._spawn(handler[type(request)], request, respond)

    def _spawn(self, handler: Callable, request: Request, respond: Send, *args) -> None:
        gevent.spawn(self._serve, handler, request, respond, *args)

    def _serve(self, handler: Callable, request: Request, respond: Send, *args) -> None:
        """Run ``handler(request, respond, *args)``; whatever stops it, the request still gets an answer."""
        try:
            with gevent.Timeout(ZOOKEEPER_TIMEOUT_S * (self.settings.max_retries + 2)):
                handler(request, respond, *args)
        except (KazooException, gevent.Timeout, ZkcoordError) as error:
            log.warning("bridge cannot serve %s group=%s: %r", type(request).__name__, request.group_id, error)
            respond(_error_response(request, ErrorCode.COORDINATOR_NOT_AVAILABLE, str(error)))
        except Exception:
            log.exception("bridge failed on %s group=%s", type(request).__name__, request.group_id)
            respond(_error_response(request, ErrorCode.UNKNOWN_SERVER_ERROR, "bridge failure"))

    def _group(self, group: str) -> BridgedGroup:
        """The bridged group, or :class:`BridgeError` (answered 15: the member retries and meets the ordinary
        refusal) once the group stopped being a mixed group."""
        bridged = self.bridged.get(group)
        if bridged is None:
            raise BridgeError(f"group {group} is no longer a mixed group")
        return bridged

    def _join(self, request: JoinGroupRequest, respond: Send) -> None:
        group = request.group_id
        eager, refusal = bridge.eager_protocols([p.name for p in request.protocols])
        topics: tuple[str, ...] = ()
        if refusal is None:
            try:
                topics = read_subscription(next(p for p in request.protocols if p.name in eager).metadata).topics
            except ConsumerProtocolError as error:
                refusal = f"a mixed group needs the member's subscription: {error}"
        with self._group(group).lock:
            view = self.runner.read_bridged(group)
            consumer_id = consumer_id_in(view, request.member_id, request.group_instance_id)
            if refusal is None:
                refusal = self._subscription_refusal(view, consumer_id, topics)
            if refusal is None and consumer_id is not None:
                # An eager member revoked everything before it rejoined: its partitions can go.
                self.runner.carry_out(group, view, bridge.release_plan(bridge.owned_by(view.owners, [consumer_id])))
        if refusal is not None:
            self.refusals_total += 1
            log.info("JoinGroup refused group=%s member=%s: %s", group, request.member_id, refusal)
            return respond(_error_response(request, ErrorCode.INCONSISTENT_GROUP_PROTOCOL, refusal))
        self._warn_liveness(group, request)
        request = msgspec.structs.replace(request, protocols=tuple(p for p in request.protocols if p.name in eager))
        self.submit(request, lambda response: self._spawn(self._joined, request, respond, topics, response))

    def _joined(self, request: JoinGroupRequest, respond: Send, topics: tuple[str, ...], response) -> None:
        """Register a member the core admitted before its answer goes out (an error answers 15 through
        :meth:`_serve`, and the member joins again)."""
        if response.error_code != 0:
            return respond(response)
        group = request.group_id
        member = layout.BridgeMember(
            bridge.consumer_id_for(group, response.member_id, request.group_instance_id),
            response.member_id,
            request.group_instance_id,
            topics,
        )
        with self._group(group).lock:
            view = self.runner.read_bridged(group)
            if member not in view.state.members or member.consumer_id not in view.registrations:
                self.runner.writer(group, view).register(member, bridge.registration_for(topics, self.clock.now_ms()))
                log.info(
                    "registered coordinator member group=%s member=%s as %s",
                    group,
                    member.member_id,
                    member.consumer_id,
                )
                before = view.registrations.get(member.consumer_id)
                if before is not None and set(before.subscription) != set(topics):
                    # 0.8.2 members watch the children of ids, not their data: make them read it again.
                    self.checks.poke(group)
        respond(response)

    def _sync(self, request: SyncGroupRequest, respond: Send) -> None:
        """The leader's SyncGroup carries 0.8.2's assignment, claimed first; every answer is checked again."""
        group_id = request.group_id
        answer = functools.partial(self._spawn, self._synced, request, respond)
        group = self.core.groups.get(group_id)
        if not self._handing_over(group, request):
            return self.submit(request, answer)
        bridged = self._group(group_id)
        with bridged.lock:
            claimed, handover = self.runner.claimed(
                group_id,
                lambda view: self._handover_plan(view, group),
                lambda: self._handing_over(group, request),  # a newer rebalance began: the core says so
                bridged.lock,
            )
        if not claimed:
            return self._retry_rebalance(group_id, respond)
        if handover is not None:
            given = handover.assignments
            assignments = tuple(
                SyncGroupRequestAssignment(
                    member_id=member_id,
                    assignment=encode_assignment_like(
                        member.metadata(group.protocol_name), Assignment(given.get(member_id, ()))
                    ),
                )
                for member_id, member in group.members.items()
            )
            request = msgspec.structs.replace(request, assignments=assignments)
        self.submit(request, answer)

    @staticmethod
    def _handing_over(group, request: SyncGroupRequest) -> bool:
        """Whether ``request`` is the leader's SyncGroup of the rebalance the group is completing (a stable
        group keeps its assignment, whatever a leader sends)."""
        return (
            group is not None
            and group.state == GroupState.COMPLETING_REBALANCE
            and group.leader_id == request.member_id
            and group.generation == request.generation_id
        )

    def _synced(self, request: SyncGroupRequest, respond: Send, response: SyncGroupResponse) -> None:
        """Hand a member its partitions only once their owner znodes name its thread: the leader's handover claimed
        them, but an answer can also come from a generation the core kept (a member that rejoined a stable group
        with unchanged metadata gets its assignment back after the bridge released it at its JoinGroup)."""
        if response.error_code != 0:
            return respond(response)
        group_id = request.group_id
        try:
            partitions = read_assignment(response.assignment).assigned_partitions
        except ConsumerProtocolError as error:
            log.warning("group=%s member=%s: unreadable assignment: %s", group_id, request.member_id, error)
            return self._retry_rebalance(group_id, respond)

        def plan(view: GroupView) -> list:
            consumer_id = consumer_id_in(view, request.member_id, request.group_instance_id)
            if consumer_id is None:
                raise BridgeError(f"member {request.member_id} of group {group_id} is not registered")
            owned = bridge.owned_by(view.owners, [consumer_id])
            return bridge.handover_plan({consumer_id: tuple(partitions)}, {consumer_id: request.member_id}, owned)

        bridged = self._group(group_id)
        with bridged.lock:
            claimed, _ = self.runner.claimed(group_id, plan, lambda: True, bridged.lock)
        if not claimed:
            return self._retry_rebalance(group_id, respond)
        respond(response)

    def _retry_rebalance(self, group_id: str, respond: Send) -> None:
        respond(SyncGroupResponse(error_code=ErrorCode.REBALANCE_IN_PROGRESS))
        self.enter(lambda now: self.core.rebalance(group_id, now))

    def _handover_plan(self, view: GroupView, group) -> list:
        consumers = view.consumers_of(group.members)
        given = self.runner.given(view, consumers)
        if given is None:
            given = dict.fromkeys(consumers, ())  # 0.8.2 would throw: no member of the group claims anything
        return bridge.handover_plan(given, consumers, bridge.owned_by(view.owners, view.state.consumer_ids))

    def _leave(self, request: LeaveGroupRequest, respond: Send) -> None:
        self.submit(request, lambda response: gevent.spawn(self._left, request, response, respond))

    def _left(self, request: LeaveGroupRequest, response: LeaveGroupResponse, respond: Send) -> None:
        """The members that left revoked first: their partitions are released, then their registrations."""
        respond(response)
        errors = [m.error_code for m in response.members] or [response.error_code] * len(request.members)
        try:
            with gevent.Timeout(ZOOKEEPER_TIMEOUT_S * 2), self._group(request.group_id).lock:
                for member, error in zip(request.members, errors, strict=False):
                    view = self.runner.read(request.group_id)
                    consumer_id = (
                        None if view is None else consumer_id_in(view, member.member_id, member.group_instance_id)
                    )
                    if consumer_id is not None and error == 0:
                        owned = bridge.owned_by(view.owners, [consumer_id])
                        self.runner.carry_out(request.group_id, view, bridge.leave_plan(consumer_id, owned))
        except (KazooException, gevent.Timeout, ZkcoordError) as error:
            # The periodic check releases them once the core has been without them for the grace period.
            log.warning("cannot release the members that left group=%s yet: %r", request.group_id, error)

    @staticmethod
    def _subscription_refusal(view: GroupView, consumer_id: str | None, topics) -> str | None:
        try:
            subscriptions = bridge.group_subscriptions(view.registrations, sorted(view.partition_counts))
        except UnsupportedFilterError as error:
            return bridge.assignment_error(error)
        return bridge.subscription_refusal(view.state.strategy, consumer_id or "", topics, subscriptions)

    def _warn_liveness(self, group: str, request: JoinGroupRequest) -> None:
        warning = bridge.liveness_warning(request.rebalance_timeout_ms, self.settings.legacy_window_ms)
        warned = self._group(group).warned
        if warning is not None and request.client_id not in warned:
            warned.add(request.client_id)
            log.warning("group=%s client=%s: %s", group, request.client_id, warning)


def _error_response(request: Request, error: ErrorCode, message: str):
    if type(request) is JoinGroupRequest:
        return JoinGroupResponse(error_code=error, member_id=request.member_id, error_message=message)
    if type(request) is SyncGroupRequest:
        return SyncGroupResponse(error_code=error)
    return LeaveGroupResponse(error_code=error)
