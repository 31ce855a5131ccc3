"""The bridge's periodic check of the mixed groups a node serves (every ``zkcoord.bridge.check.interval.ms``).

For each group, under its lock: take the bridge over under this node's epoch (a new leader's first write), release
the coordinator members the core has been without for ``zkcoord.bridge.release.grace.ms`` (session expiry, not
rejoining), rebalance a stable group's coordinator members when their owner znodes are not what 0.8.2 now gives
them (a legacy member came or went, a departed member was released, here or before a failover), and re-trigger
the legacy members' rebalance when a partition stayed unowned longer than they retry (they gave up until the
next change: this is one).

IO: gevent and the node's gevent kazoo client (through :class:`~zkcoord.server.bridge_plans.PlanRunner`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

import gevent
from kazoo.exceptions import KazooException

from zkcoord.bridge import core as bridge
from zkcoord.model import GroupState
from zkcoord.server.bridge_plans import BridgedGroup, PlanRunner
from zkcoord.server.bridge_zk import BridgeError, GroupView, poke_legacy_members

log = logging.getLogger(__name__)


class BridgeChecks:
    """The check loop of one node's bridge."""

    def __init__(self, runner: PlanRunner, bridged: Mapping[str, BridgedGroup], enter: Callable, clock):
        self.runner, self.bridged, self.enter, self.clock = runner, bridged, enter, clock
        self.core, self.settings = runner.core, runner.settings
        self.pokes_total = 0
        self.departed_released_total = 0

    def run(self) -> None:
        while True:
            gevent.sleep(self.settings.check_interval_ms / 1000)
            for group in list(self.bridged):
                if not self.core.serves(group):
                    continue
                try:
                    self.check(group)
                except (KazooException, gevent.Timeout, BridgeError) as error:
                    log.info("bridge check of group=%s did not finish: %r", group, error)
                except Exception:
                    log.exception("bridge check of group=%s failed", group)

    def check(self, group_id: str) -> None:
        bridged = self.bridged.get(group_id)
        if bridged is None:
            return
        with bridged.lock:
            view = self.runner.read(group_id)
            if view is None:
                return
            writer = self.runner.writer(group_id, view)
            if view.state.epoch < writer.epoch:
                writer.take_over()
                log.info("took over the bridge of group=%s at epoch=%d", group_id, writer.epoch)
                view = self.runner.read(group_id)
            if self._release_departed(group_id, bridged, view):
                view = self.runner.read(group_id)
            if self._unregistered(group_id, view):
                log.info("group=%s has coordinator members not registered in it: rebalancing them", group_id)
                self.enter(lambda now: self.core.rebalance(group_id, now))
            elif self._handover_out_of_date(group_id, view):
                log.info("the registrations of group=%s changed: rebalancing its coordinator members", group_id)
                self.enter(lambda now: self.core.rebalance(group_id, now))
            self._retrigger(group_id, bridged, view)

    def poke(self, group_id: str) -> None:
        poke_legacy_members(self.runner.zk, group_id, f"{group_id}{bridge.BRIDGE_MARK}rebalance")
        self.pokes_total += 1

    def _unregistered(self, group_id: str, view: GroupView) -> bool:
        """Whether a stable group has members the bridge never registered: members that joined before the group
        became mixed (``migrate down`` from LOG_PRIMARY, or a join while this node had not yet seen the bridge).
        Rejoining through the bridge registers them and makes their ownership 0.8.2's."""
        group = self.core.groups.get(group_id)
        if group is None or group.state != GroupState.STABLE:
            return False
        return bool(set(group.members) - {m.member_id for m in view.state.members})

    def _handover_out_of_date(self, group_id: str, view: GroupView) -> bool:
        """Whether a stable group's coordinator members hold other partitions than 0.8.2 now gives them."""
        group = self.core.groups.get(group_id)
        if group is None or group.state != GroupState.STABLE or view.unreadable:
            return False
        given = self.runner.given(view, view.consumers_of(group.members))
        return given is not None and bridge.out_of_date(given, view.owners)

    def _release_departed(self, group_id: str, bridged: BridgedGroup, view: GroupView) -> bool:
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
                self.runner.carry_out(group_id, view, bridge.leave_plan(member.consumer_id, owned))
                self.departed_released_total += 1
                bridged.missing_since.pop(member.consumer_id, None)
                view = self.runner.read(group_id)
                released = True
        return released

    def _retrigger(self, group_id: str, bridged: BridgedGroup, view: GroupView) -> None:
        """Poke the legacy members once a partition stayed unowned longer than they retry while the coordinator
        members are settled: a JVM member that gave up waits for the next change, and this is one."""
        group = self.core.groups.get(group_id)
        counts = view.partition_counts
        unowned = any((t, p) not in view.owners for t in view.legacy_topics() if t in counts for p in range(counts[t]))
        settled = group is None or group.state in (GroupState.STABLE, GroupState.EMPTY)
        now = self.clock.monotonic_ms()
        if not (unowned and settled and view.legacy_ids):
            bridged.unowned_since = None
            return
        if bridged.unowned_since is None:
            bridged.unowned_since = now
        elif now - bridged.unowned_since >= self.settings.legacy_window_ms + self.settings.backoff_ms:
            log.info("group=%s has unowned partitions after the legacy members' retries: re-triggering them", group_id)
            self.poke(group_id)
            bridged.unowned_since = now
