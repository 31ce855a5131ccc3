"""How ``groups`` shows a group with a migration state: one listing whatever each store lists of it, its state
Unknown only when its coordinator may be one that did not answer, and what its describe says (pure rules)."""

from dataclasses import replace

from zkcoord.admin import render
from zkcoord.admin.migrating import merge_listings
from zkcoord.admin.model import COORDINATOR, LEGACY, GroupDescription, GroupListing
from zkcoord.migration.phases import Phase


def listing(group: str, kind: str, state: str) -> GroupListing:
    return GroupListing(group, kind, state)


COORDINATOR_SIDE = {"orders": listing("orders", COORDINATOR, "Empty"), "audit": listing("audit", COORDINATOR, "Stable")}
LEGACY_SIDE = {"orders": listing("orders", LEGACY, "Stable"), "audit": listing("audit", LEGACY, "Empty")}


def rows(listings: list[GroupListing]) -> list[tuple]:
    return [(g.group_id, g.kind, g.state, g.phase, g.reads_from) for g in listings]


def test_a_migrating_group_is_listed_once_and_a_group_in_both_places_twice():
    merged = merge_listings(COORDINATOR_SIDE, LEGACY_SIDE, {"orders": Phase.DUAL_WRITE}, {"orders"}, True)
    assert rows(merged) == [
        ("audit", COORDINATOR, "Stable", None, "log"),
        ("audit", LEGACY, "Empty", None, "zookeeper"),
        ("orders", "mixed", "Stable", "DUAL_WRITE", "max(zookeeper,log)"),  # live legacy members: Stable
    ]


def test_a_migrating_group_whose_coordinator_did_not_answer_is_unknown_unless_it_does_not_need_one():
    phases = {"orders": Phase.LOG_ONLY, "back": Phase.ZK_ONLY, "typo": Phase.DUAL_WRITE}
    merged = merge_listings({}, {"orders": LEGACY_SIDE["orders"]}, phases, set(), False)
    assert rows(merged) == [
        ("back", "migrating", "Empty", "ZK_ONLY", "zookeeper"),
        ("orders", "migrating", "Unknown", "LOG_ONLY", "log"),
        ("typo", "migrating", "Unknown", "DUAL_WRITE", "max(zookeeper,log)"),
    ]
    answered = merge_listings({"orders": COORDINATOR_SIDE["orders"]}, {}, {"orders": Phase.LOG_ONLY}, set(), False)
    assert rows(answered) == [("orders", "migrating", "Empty", "LOG_ONLY", "log")]  # listed by a node that answered


def test_describe_names_the_phase_and_says_what_an_unreachable_coordinator_leaves_unknown():
    group = GroupDescription("orders", "migrating", "Unknown", "consumer", "", (), None)
    frozen = replace(group, phase="LOG_ONLY", reads_from="log", unreachable="down")
    assert render.migration_header(frozen) == (
        "Consumer group 'orders' is migrating: phase LOG_ONLY; its readers use the log's offsets."
    )
    assert render.state_notice(frozen) is None  # never "has no active members" for a state that is unknown
    notices = render.unreachable_notices(frozen)
    assert notices[0] == "Error: the coordinator of consumer group 'orders' could not be asked: down"
    assert "(frozen since LOG_ONLY) are not what they read" in notices[1]
    assert render.migration_header(group) is None and render.unreachable_notices(group) == []


def test_an_unreadable_state_or_none_read_leaves_phase_and_readers_unknown():
    merged = merge_listings(COORDINATOR_SIDE, LEGACY_SIDE, {"orders": None}, set(), True)
    assert rows(merged)[-1] == ("orders", "migrating", "Stable", "unknown", "unknown")
    coordinator_only = merge_listings(COORDINATOR_SIDE, {}, {}, set(), True, states_read=False)
    assert rows(coordinator_only) == [
        ("audit", COORDINATOR, "Stable", "unknown", "unknown"),
        ("orders", COORDINATOR, "Empty", "unknown", "unknown"),
    ]
