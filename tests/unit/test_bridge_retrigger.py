"""The bridge's check re-triggers the legacy members of a mixed group when a partition they subscribe to stayed
unowned longer than they retry: static subscriptions and wildcards alike (a wildcard's keys are a pattern, not
topics)."""

from types import SimpleNamespace

import pytest

from zkcoord.clock import ManualClock
from zkcoord.model import TopicPartition
from zkcoord.server.bridge_check import BridgeChecks
from zkcoord.server.bridge_plans import BridgedGroup
from zkcoord.server.bridge_zk import GroupView
from zkcoord.zk.layout import PATTERN_STATIC, PATTERN_WHITELIST, BridgeState, ConsumerRegistration

WINDOW_MS, BACKOFF_MS = 2000, 200
COUNTS = {"orders": 2, "payments": 1}


def view(registration: ConsumerRegistration, owners: dict) -> GroupView:
    return GroupView(BridgeState(), 0, {"g_c1": registration}, (), owners, COUNTS)


def checks(clock: ManualClock) -> tuple[BridgeChecks, list[str]]:
    settings = SimpleNamespace(legacy_window_ms=WINDOW_MS, backoff_ms=BACKOFF_MS)
    runner = SimpleNamespace(core=SimpleNamespace(groups={}), settings=settings)
    check = BridgeChecks(runner, {}, enter=None, clock=clock)
    poked: list[str] = []
    check.poke = poked.append
    return check, poked


@pytest.mark.parametrize(
    "registration",
    [
        ConsumerRegistration({"orders": 1}, PATTERN_STATIC),
        ConsumerRegistration({"ord.*": 1}, PATTERN_WHITELIST),
    ],
    ids=["static", "wildcard"],
)
def test_a_partition_unowned_past_the_legacy_retries_pokes_the_legacy_members(registration):
    clock = ManualClock(0)
    check, poked = checks(clock)
    bridged = BridgedGroup()
    half_owned = view(registration, {TopicPartition("orders", 0): "g_c1-0"})
    check._retrigger("g", bridged, half_owned)
    clock.advance(WINDOW_MS + BACKOFF_MS)
    check._retrigger("g", bridged, half_owned)
    assert poked == ["g"]


def test_a_wildcard_whose_topics_are_all_owned_pokes_no_one():
    clock = ManualClock(0)
    check, poked = checks(clock)
    bridged = BridgedGroup()
    owned = view(
        ConsumerRegistration({"ord.*": 1}, PATTERN_WHITELIST),
        {TopicPartition("orders", 0): "g_c1-0", TopicPartition("orders", 1): "g_c1-0"},
    )
    for _ in range(3):
        check._retrigger("g", bridged, owned)
        clock.advance(WINDOW_MS + BACKOFF_MS)
    assert poked == [] and bridged.unowned_since is None
