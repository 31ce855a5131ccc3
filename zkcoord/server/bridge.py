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
  back-off; then the core stores and hands out that assignment.
- LeaveGroup: the member's partitions are released and its registration deleted.

A check every ``zkcoord.bridge.check.interval.ms`` takes the bridge over under this node's epoch, releases
members the core no longer has after ``zkcoord.bridge.release.grace.ms``, rebalances the coordinator members
when the legacy registrations changed, and re-triggers the legacy members' rebalance when a partition has
stayed unowned for longer than they retry. Registrations and owner znodes are persistent and fenced
(:mod:`zkcoord.server.bridge_zk`), so they outlive this node's session.

IO: gevent and the node's gevent kazoo client, each ZooKeeper round bounded in time.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

import gevent
import gevent.event
import gevent.lock
import msgspec
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException

from zkcoord.bridge import core as bridge
from zkcoord.errors import ErrorCode, LegacyAssignmentError
from zkcoord.group.coordinator import GroupCoordinator
from zkcoord.model import GroupState
from zkcoord.runtime.runtime import Send
from zkcoord.server.bridge_zk import (
    BridgeError,
    ClaimConflict,
    FencedWriter,
    GroupView,
    poke_legacy_members,
    read_group,
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
from zkcoord.zk.offsets import write_offsets_if_greater
from zkcoord.zk.topic_filter import UnsupportedFilterError

log = logging.getLogger(__name__)

ZOOKEEPER_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class BridgeSettings:
    max_retries: int = 4  # 0.8.2's rebalance.max.retries
    backoff_ms: int = 2000  # 0.8.2's rebalance.backoff.ms
    release_grace_ms: int = 5000
    check_interval_ms: int = 500

    @property
    def legacy_window_ms(self) -> int:
        """How long a JVM member keeps retrying its claims before it gives up until the next change."""
        return self.max_retries * self.backoff_ms


@dataclass
class _Bridged:
    lock: gevent.lock.Semaphore = field(default_factory=gevent.lock.Semaphore)
    missing_since: dict[str, float] = field(default_factory=dict)  # consumer id → when the core lost its member
    unowned_since: float | None = None
    warned: set[str] = field(default_factory=set)


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
        self.epochs, self.clock, self.settings = epochs, clock, settings
        self.zk: KazooClient | None = None
        self.bridged: dict[str, _Bridged] = {}
        self.pokes_total = 0
        self.refusals_total = 0
        self.claim_conflicts_total = 0
        self.departed_released_total = 0
        self._greenlet: gevent.Greenlet | None = None

    def start(self, zk: KazooClient) -> None:
        self.zk = zk
        zk.ensure_path(layout.bridge_groups_path(self.root))
        zk.ChildrenWatch(layout.bridge_groups_path(self.root), self._on_bridged)
        self._greenlet = gevent.spawn(self._run_checks)

    def stop(self) -> None:
        if self._greenlet is not None:
            self._greenlet.kill(block=False)

    def stats(self) -> dict:
        """The bridge's figures, as metrics and tests read them."""
        return {
            "groups": sum(1 for group in self.bridged if self.core.serves(group)),
            "join_refusals_total": self.refusals_total,
            "claim_conflicts_total": self.claim_conflicts_total,
            "departed_released_total": self.departed_released_total,
            "legacy_retriggers_total": self.pokes_total,
        }

    def _on_bridged(self, groups: list[str]) -> None:
        for group in set(self.bridged) - set(groups):
            del self.bridged[group]
        for group in groups:
            self.bridged.setdefault(group, _Bridged())
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
        except (KazooException, gevent.Timeout, BridgeError) as error:
            log.warning("bridge cannot serve %s group=%s: %r", type(request).__name__, request.group_id, error)
            respond(_error_response(request, ErrorCode.COORDINATOR_NOT_AVAILABLE, str(error)))
        except Exception:
            log.exception("bridge failed on %s group=%s", type(request).__name__, request.group_id)
            respond(_error_response(request, ErrorCode.UNKNOWN_SERVER_ERROR, "bridge failure"))

    def _join(self, request: JoinGroupRequest, respond: Send) -> None:
        group = request.group_id
        eager, refusal = bridge.eager_protocols([p.name for p in request.protocols])
        topics: tuple[str, ...] = ()
        if refusal is None:
            try:
                topics = read_subscription(next(p for p in request.protocols if p.name in eager).metadata).topics
            except ConsumerProtocolError as error:
                refusal = f"a mixed group needs the member's subscription: {error}"
        with self.bridged[group].lock:
            view = self._read(group)
            if view is None:
                return self.submit(request, respond)
            consumer_id = self._consumer_id(view, request.member_id, request.group_instance_id)
            if refusal is None:
                refusal = self._subscription_refusal(view, consumer_id, topics)
            if refusal is None and consumer_id is not None:
                # An eager member revoked everything before it rejoined: its partitions can go.
                self._carry_out(group, view, bridge.release_plan(bridge.owned_by(view.owners, [consumer_id])))
        if refusal is not None:
            self.refusals_total += 1
            log.info("JoinGroup refused group=%s member=%s: %s", group, request.member_id, refusal)
            return respond(_error_response(request, ErrorCode.INCONSISTENT_GROUP_PROTOCOL, refusal))
        self._warn_liveness(group, request)
        request = msgspec.structs.replace(request, protocols=tuple(p for p in request.protocols if p.name in eager))
        self.submit(request, lambda response: gevent.spawn(self._joined, request, topics, response, respond))

    def _joined(self, request: JoinGroupRequest, topics: tuple[str, ...], response, respond: Send) -> None:
        if response.error_code != 0:
            return respond(response)
        group = request.group_id
        member = layout.BridgeMember(
            bridge.consumer_id_for(group, response.member_id, request.group_instance_id),
            response.member_id,
            request.group_instance_id,
            topics,
        )
        try:
            with gevent.Timeout(ZOOKEEPER_TIMEOUT_S), self.bridged[group].lock:
                view = self._read(group)
                if view is not None and (
                    member not in view.state.members or member.consumer_id not in view.registrations
                ):
                    writer = self._writer(group, view)
                    writer.register(member, bridge.registration_for(topics, self.clock.now_ms()))
                    log.info(
                        "registered coordinator member group=%s member=%s as %s",
                        group,
                        member.member_id,
                        member.consumer_id,
                    )
                    before = view.registrations.get(member.consumer_id)
                    if before is not None and set(before.subscription) != set(topics):
                        # 0.8.2 members watch the children of ids, not their data: make them read it again.
                        self._poke(group)
        except (KazooException, gevent.Timeout, BridgeError) as error:
            log.warning("cannot register member group=%s member=%s: %r", group, member.member_id, error)
            response = msgspec.structs.replace(response, error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
        respond(response)

    def _sync(self, request: SyncGroupRequest, respond: Send) -> None:
        """The leader's SyncGroup carries 0.8.2's assignment, claimed first; every answer is checked again."""
        group_id = request.group_id
        answer = functools.partial(self._spawn, self._synced, request, respond)
        group = self.core.groups.get(group_id)
        if group is None or group.leader_id != request.member_id or group.generation != request.generation_id:
            return self.submit(request, answer)
        with self.bridged[group_id].lock:
            claimed, handover = self._claimed(
                group_id,
                lambda view: self._handover_plan(view, group),
                lambda: group.generation == request.generation_id,  # a newer rebalance began: the core says so
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
            consumer_id = self._consumer_id(view, request.member_id, request.group_instance_id)
            if consumer_id is None:
                raise BridgeError(f"member {request.member_id} of group {group_id} is not registered")
            owned = bridge.owned_by(view.owners, [consumer_id])
            return bridge.handover_plan({consumer_id: tuple(partitions)}, {consumer_id: request.member_id}, owned)

        with self.bridged[group_id].lock:
            claimed, _ = self._claimed(group_id, plan, lambda: True)
        if not claimed:
            return self._retry_rebalance(group_id, respond)
        respond(response)

    def _claimed(self, group_id: str, plan_of, still_wanted) -> tuple[bool, bridge.Handover | None]:
        """Carry out ``plan_of(view)``, reading again and retrying as 0.8.2 does while a claim conflicts; (False,
        None) when it never went through, (True, None) when it is no longer wanted or the group is not bridged."""
        for attempt in range(self.settings.max_retries + 1):
            view = self._read(group_id)
            if view is None or not still_wanted():
                return True, None
            try:
                return True, self._carry_out(group_id, view, plan_of(view))
            except ClaimConflict as conflict:
                self.claim_conflicts_total += 1
                log.info(
                    "group=%s claim of %s conflicts (owner %s), attempt %d of %d",
                    group_id,
                    conflict.partition,
                    conflict.owner,
                    attempt + 1,
                    self.settings.max_retries + 1,
                )
                self._wait_released(group_id, conflict.partition, self.settings.backoff_ms / 1000)
        return False, None

    def _wait_released(self, group_id: str, partition, timeout_s: float) -> None:
        """Up to 0.8.2's back-off, but no longer than the owner znode lives: a legacy member usually releases
        within milliseconds of seeing the registrations change, and waiting out the whole back-off each time
        would pause every coordinator member for it."""
        changed = gevent.event.Event()
        if self.zk.exists(layout.owner_path(group_id, *partition), watch=lambda event: changed.set()) is not None:
            changed.wait(timeout_s)

    def _retry_rebalance(self, group_id: str, respond: Send) -> None:
        respond(SyncGroupResponse(error_code=ErrorCode.REBALANCE_IN_PROGRESS))
        self.enter(lambda now: self.core.rebalance(group_id, now))

    def _handover_plan(self, view: GroupView, group) -> list:
        members = {m.member_id: m.consumer_id for m in view.state.members if m.member_id in group.members}
        consumers = {cid: member_id for member_id, cid in members.items()}
        try:
            subscriptions = bridge.group_subscriptions(view.registrations, sorted(view.partition_counts))
            given = bridge.assignments(view.state.strategy, subscriptions, view.partition_counts, consumers)
        except (LegacyAssignmentError, UnsupportedFilterError) as error:
            log.warning(
                "group=%s: %s; its coordinator members get nothing", group.group_id, bridge.assignment_error(error)
            )
            given = dict.fromkeys(consumers, ())
        return bridge.handover_plan(given, consumers, bridge.owned_by(view.owners, view.state.consumer_ids))

    def _leave(self, request: LeaveGroupRequest, respond: Send) -> None:
        self.submit(request, lambda response: gevent.spawn(self._left, request, response, respond))

    def _left(self, request: LeaveGroupRequest, response: LeaveGroupResponse, respond: Send) -> None:
        """The members that left revoked first: their partitions are released, then their registrations."""
        respond(response)
        errors = [m.error_code for m in response.members] or [response.error_code] * len(request.members)
        try:
            with gevent.Timeout(ZOOKEEPER_TIMEOUT_S * 2), self.bridged[request.group_id].lock:
                for member, error in zip(request.members, errors, strict=False):
                    view = self._read(request.group_id)
                    consumer_id = (
                        None if view is None else self._consumer_id(view, member.member_id, member.group_instance_id)
                    )
                    if consumer_id is not None and error == 0:
                        owned = bridge.owned_by(view.owners, [consumer_id])
                        self._carry_out(request.group_id, view, bridge.leave_plan(consumer_id, owned))
        except (KazooException, gevent.Timeout, BridgeError) as error:
            # The periodic check releases them once the core has been without them for the grace period.
            log.warning("cannot release the members that left group=%s yet: %r", request.group_id, error)

    # -- carrying out plans ----------------------------------------------------------------------------------

    def _read(self, group: str) -> GroupView | None:
        with gevent.Timeout(ZOOKEEPER_TIMEOUT_S):
            return read_group(self.zk, self.root, group)

    def _writer(self, group: str, view: GroupView) -> FencedWriter:
        epoch = self.epochs.get(self.core.partition_for(group), -1)
        return FencedWriter(self.zk, self.root, group, view.state, view.version, epoch)

    def _carry_out(self, group: str, view: GroupView, plan: list) -> bridge.Handover | None:
        """Run ``plan``'s steps in order; the first that fails raises and the rest do not run."""
        writer = self._writer(group, view)
        for step in plan:
            kind = type(step)
            if kind is bridge.Flush:
                self._flush(group, step.partitions)
            elif kind is bridge.Release:
                writer.release(step.partition, step.thread)
            elif kind is bridge.Claim:
                writer.claim(step.partition, step.thread)
            elif kind is bridge.Unregister:
                writer.unregister(step.consumer_id)
            else:
                return step
        return None

    def _flush(self, group_id: str, partitions) -> None:
        """The log's committed offsets of ``partitions`` into ZooKeeper, once their commits in flight are written."""
        late = BridgeError(f"commits of group {group_id} still in flight after {ZOOKEEPER_TIMEOUT_S}s")
        with gevent.Timeout(ZOOKEEPER_TIMEOUT_S, late):
            while (group := self.core.groups.get(group_id)) is not None and any(
                group.pending_offsets[tp] for tp in partitions
            ):
                gevent.sleep(0.005)
        offsets = {} if group is None else {tp: group.offsets[tp].offset for tp in partitions if tp in group.offsets}
        with gevent.Timeout(ZOOKEEPER_TIMEOUT_S):
            outcome = write_offsets_if_greater(self.zk, group_id, offsets)
        if outcome.failed:
            raise BridgeError(f"offsets of group {group_id} not written into ZooKeeper: {outcome.failed}")

    @staticmethod
    def _consumer_id(view: GroupView, member_id: str, instance_id: str | None) -> str | None:
        for member in view.state.members:
            if member.member_id == member_id or (instance_id and member.instance_id == instance_id):
                return member.consumer_id
        return None

    @staticmethod
    def _subscription_refusal(view: GroupView, consumer_id: str | None, topics) -> str | None:
        try:
            subscriptions = bridge.group_subscriptions(view.registrations, sorted(view.partition_counts))
        except UnsupportedFilterError as error:
            return bridge.assignment_error(error)
        return bridge.subscription_refusal(view.state.strategy, consumer_id or "", topics, subscriptions)

    def _warn_liveness(self, group: str, request: JoinGroupRequest) -> None:
        warning = bridge.liveness_warning(request.rebalance_timeout_ms, self.settings.legacy_window_ms)
        warned = self.bridged[group].warned
        if warning is not None and request.client_id not in warned:
            warned.add(request.client_id)
            log.warning("group=%s client=%s: %s", group, request.client_id, warning)

    # -- the periodic check -----------------------------------------------------------------------------------

    def _run_checks(self) -> None:
        while True:
            gevent.sleep(self.settings.check_interval_ms / 1000)
            for group in list(self.bridged):
                if not self.core.serves(group):
                    continue
                try:
                    self._check(group)
                except (KazooException, gevent.Timeout, BridgeError) as error:
                    log.info("bridge check of group=%s did not finish: %r", group, error)
                except Exception:
                    log.exception("bridge check of group=%s failed", group)

    def _check(self, group_id: str) -> None:
        bridged = self.bridged.get(group_id)
        if bridged is None:
            return
        with bridged.lock:
            view = self._read(group_id)
            if view is None:
                return
            writer = self._writer(group_id, view)
            if view.state.epoch < writer.epoch:
                writer.take_over()
                log.info("took over the bridge of group=%s at epoch=%d", group_id, writer.epoch)
                view = self._read(group_id)
            if self._release_departed(group_id, bridged, view):
                view = self._read(group_id)
            if self._handover_out_of_date(group_id, view):
                log.info("the registrations of group=%s changed: rebalancing its coordinator members", group_id)
                self.enter(lambda now: self.core.rebalance(group_id, now))
            self._retrigger(group_id, bridged, view)

    def _handover_out_of_date(self, group_id: str, view: GroupView) -> bool:
        """Whether a stable group's coordinator members hold other partitions than 0.8.2 now gives them: a legacy
        member came or went, or the bridge released a departed member (on this node, or before a failover)."""
        group = self.core.groups.get(group_id)
        if group is None or group.state != GroupState.STABLE or view.unreadable:
            return False
        consumers = [m.consumer_id for m in view.state.members if m.member_id in group.members]
        try:
            subscriptions = bridge.group_subscriptions(view.registrations, sorted(view.partition_counts))
            given = bridge.assignments(view.state.strategy, subscriptions, view.partition_counts, consumers)
        except (LegacyAssignmentError, UnsupportedFilterError):
            return False
        return bridge.out_of_date(given, view.owners)

    def _release_departed(self, group_id: str, bridged: _Bridged, view: GroupView) -> bool:
        """Release the members the core has been without for the grace; whether any was released."""
        released = False
        group = self.core.groups.get(group_id)
        present = set() if group is None else set(group.members)
        now = self.clock.monotonic_ms()
        for member in view.state.members:
            if member.member_id in present:
                bridged.missing_since.pop(member.consumer_id, None)
                continue
            since = bridged.missing_since.setdefault(member.consumer_id, now)
            if now - since >= self.settings.release_grace_ms:
                log.info("releasing departed coordinator member group=%s member=%s", group_id, member.member_id)
                owned = bridge.owned_by(view.owners, [member.consumer_id])
                self._carry_out(group_id, view, bridge.leave_plan(member.consumer_id, owned))
                self.departed_released_total += 1
                bridged.missing_since.pop(member.consumer_id, None)
                view = self._read(group_id)
                released = True
        return released

    def _retrigger(self, group_id: str, bridged: _Bridged, view: GroupView) -> None:
        """Poke the legacy members once a partition stayed unowned longer than they retry while the coordinator
        members are settled: a JVM member that gave up waits for the next change, and this is one."""
        group = self.core.groups.get(group_id)
        topics = {t for cid in view.legacy_ids for t in view.registrations[cid].subscription}
        unowned = any(
            (t, p) not in view.owners
            for t in topics
            if t in view.partition_counts
            for p in range(view.partition_counts[t])
        )
        settled = group is None or group.state in (GroupState.STABLE, GroupState.EMPTY)
        now = self.clock.monotonic_ms()
        if not (unowned and settled and view.legacy_ids):
            bridged.unowned_since = None
            return
        if bridged.unowned_since is None:
            bridged.unowned_since = now
        elif now - bridged.unowned_since >= self.settings.legacy_window_ms + self.settings.backoff_ms:
            log.info("group=%s has unowned partitions after the legacy members' retries: re-triggering them", group_id)
            self._poke(group_id)
            bridged.unowned_since = now

    def _poke(self, group_id: str) -> None:
        poke_legacy_members(self.zk, group_id, f"{group_id}{bridge.BRIDGE_MARK}rebalance")
        self.pokes_total += 1


def _error_response(request: Request, error: ErrorCode, message: str):
    if type(request) is JoinGroupRequest:
        return JoinGroupResponse(error_code=error, member_id=request.member_id, error_message=message)
    if type(request) is SyncGroupRequest:
        return SyncGroupResponse(error_code=error)
    return LeaveGroupResponse(error_code=error)
