"""Carrying out the bridge's plans on a node: each step against ZooKeeper, in order, under one group's lock.

:class:`PlanRunner` reads a mixed group as 0.8.2 sees it (:func:`~zkcoord.server.bridge_zk.read_group`), computes
what 0.8.2 gives its coordinator members, and runs a plan of :mod:`zkcoord.bridge.core` step by step through a
:class:`~zkcoord.server.bridge_zk.FencedWriter` under the node's epoch for the group's offsets partition; a Flush
writes the core's committed offsets into ZooKeeper once no commit of those partitions is in flight. A claim that
finds another owner is retried as 0.8.2 retries its own (:meth:`PlanRunner.claimed`).

IO: gevent and the node's gevent kazoo client, each ZooKeeper round bounded in time.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import gevent
import gevent.event
import gevent.lock
from kazoo.client import KazooClient

from zkcoord.bridge import core as bridge
from zkcoord.errors import LegacyAssignmentError
from zkcoord.group.coordinator import GroupCoordinator
from zkcoord.model import TopicPartition
from zkcoord.server.bridge_zk import BridgeError, ClaimConflict, FencedWriter, GroupView, read_group
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
class BridgedGroup:
    """What a node keeps of a mixed group between plans: the lock that orders them, and the check's clocks."""

    lock: gevent.lock.Semaphore = field(default_factory=gevent.lock.Semaphore)
    missing_since: dict[str, float] = field(default_factory=dict)  # consumer id → when the core lost its member
    unowned_since: float | None = None
    warned: set[str] = field(default_factory=set)  # client ids told about their rebalance timeout


class PlanRunner:
    """Runs plans for the groups of one node; :attr:`zk` is set when the node starts."""

    def __init__(self, root: str, core: GroupCoordinator, epochs: Mapping[int, int], settings: BridgeSettings):
        self.root, self.core, self.epochs, self.settings = root, core, epochs, settings
        self.zk: KazooClient | None = None
        self.claim_conflicts_total = 0

    def read(self, group: str) -> GroupView | None:
        with gevent.Timeout(ZOOKEEPER_TIMEOUT_S):
            return read_group(self.zk, self.root, group)

    def read_bridged(self, group: str) -> GroupView:
        """:meth:`read`, for a caller that cannot go on without the bridge: :class:`BridgeError` (answered 15,
        so the member joins again and meets the ordinary rules) once the group is no longer mixed."""
        view = self.read(group)
        if view is None:
            raise BridgeError(f"group {group} is no longer a mixed group")
        return view

    def writer(self, group: str, view: GroupView) -> FencedWriter:
        epoch = self.epochs.get(self.core.partition_for(group), -1)
        return FencedWriter(self.zk, self.root, group, view.state, view.version, epoch)

    def given(self, view: GroupView, consumers: Iterable[str]) -> dict[str, tuple[TopicPartition, ...]] | None:
        """What 0.8.2 gives ``consumers`` over every registration; None where 0.8.2 itself would fail."""
        try:
            subscriptions = bridge.group_subscriptions(view.registrations, sorted(view.partition_counts))
            return bridge.assignments(view.state.strategy, subscriptions, view.partition_counts, consumers)
        except (LegacyAssignmentError, UnsupportedFilterError) as error:
            log.warning("group view: %s", bridge.assignment_error(error))
            return None

    def carry_out(self, group: str, view: GroupView, plan: list) -> bridge.Handover | None:
        """Run ``plan``'s steps in order; the first that fails raises and the rest do not run."""
        writer = self.writer(group, view)
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

    def claimed(
        self,
        group: str,
        plan_of: Callable[[GroupView], list],
        still_wanted: Callable[[], bool],
        lock: gevent.lock.Semaphore,
    ) -> tuple[bool, bridge.Handover | None]:
        """Carry out ``plan_of(view)``, reading again and retrying as 0.8.2 does while a claim conflicts; (False,
        None) when it never went through, (True, None) when it is no longer wanted. Called holding the group's
        ``lock``, which is let go while waiting for an owner znode to go: a JoinGroup, LeaveGroup or check that
        releases it may be the one it waits for. :class:`BridgeError` when the group is no longer bridged."""
        attempts = self.settings.max_retries + 1
        for attempt in range(1, attempts + 1):
            view = self.read_bridged(group)
            if not still_wanted():
                return True, None
            try:
                return True, self.carry_out(group, view, plan_of(view))
            except ClaimConflict as conflict:
                self.claim_conflicts_total += 1
                log.info(
                    "group=%s claim of %s conflicts (owner %s), attempt %d of %d",
                    group,
                    conflict.partition,
                    conflict.owner,
                    attempt,
                    attempts,
                )
                if attempt < attempts:
                    lock.release()
                    try:
                        self._wait_released(group, conflict.partition, self.settings.backoff_ms / 1000)
                    finally:
                        lock.acquire()
        return False, None

    def _wait_released(self, group: str, partition: TopicPartition, timeout_s: float) -> None:
        """Up to 0.8.2's back-off, but no longer than the owner znode lives: a legacy member usually releases
        within milliseconds of seeing the registrations change, and waiting out the whole back-off each time
        would pause every coordinator member for it."""
        changed = gevent.event.Event()
        if self.zk.exists(layout.owner_path(group, *partition), watch=lambda event: changed.set()) is not None:
            changed.wait(timeout_s)

    def _flush(self, group_id: str, partitions: tuple[TopicPartition, ...]) -> None:
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


def consumer_id_in(view: GroupView, member_id: str, instance_id: str | None) -> str | None:
    """The consumer id the bridge registered a member under (by member id, or a static member's instance id)."""
    for member in view.state.members:
        if member.member_id == member_id or (instance_id and member.instance_id == instance_id):
            return member.consumer_id
    return None
