"""The 0.8.2 assignors: worked examples (legacy-assignment-examples.json) and hypothesis properties."""

import json
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from zkcoord.assign.java import java_string_hash, java_string_key
from zkcoord.assign.legacy import (
    ROUNDROBIN_PRECONDITION_MESSAGE,
    group_assignment,
    hash_ties,
    legacy_assignment,
    roundrobin_listing,
    topic_partition_hash,
)
from zkcoord.errors import LegacyAssignmentError

EXAMPLES = json.loads((Path(__file__).parents[1] / "data" / "legacy-assignment-examples.json").read_text())["cases"]


def _as_lists(assignment):
    return {thread: [list(claim) for claim in claims] for thread, claims in assignment.items()}


@pytest.mark.parametrize("case", EXAMPLES, ids=[case["id"] for case in EXAMPLES])
def test_worked_example(case):
    if case.get("error"):
        for consumer_id in case["consumers"]:
            with pytest.raises(LegacyAssignmentError) as raised:
                legacy_assignment(case["strategy"], case["consumers"], case["partitions"], consumer_id)
            assert raised.value.kind == case["error"]["kind"]
            assert raised.value.message == case["error"]["message"]
        return
    merged = {}
    for consumer_id in case["consumers"]:
        own = legacy_assignment(case["strategy"], case["consumers"], case["partitions"], consumer_id)
        assert all(thread.startswith(consumer_id + "-") for thread in own)
        merged.update(_as_lists(own))
    assert merged == case["expected"]
    claimed = [tuple(c) for claims in merged.values() for c in claims]
    assert (len(claimed) != len(set(claimed))) == case["conflict"]


@pytest.mark.parametrize(
    "case",
    [c for c in EXAMPLES if "rr_sorted_listing_of_first_member" in c],
    ids=lambda c: c["id"],
)
def test_roundrobin_listing_matches_worked_example(case):
    first = next(iter(case["consumers"]))
    listing = roundrobin_listing(case["consumers"][first], case["partitions"])
    assert [[t, p, topic_partition_hash(t, p)] for t, p in listing] == case["rr_sorted_listing_of_first_member"]


def test_java_hash_known_values_spec_4_2():
    assert [topic_partition_hash("t", p) for p in range(4)] == [87540032, 87540063, 87540094, 87540125]
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112
    assert java_string_hash("polygenelubricants") == -(2**31)  # wraps to Integer.MIN_VALUE


def test_java_string_order_uses_utf16_units_spec_2_2():
    # In UTF-16, U+1F600 (D83D DE00) sorts before U+FF5E; by code point it would sort after.
    assert sorted(["\U0001f600", "\uff5e"], key=java_string_key) == ["\U0001f600", "\uff5e"]
    assert sorted(["g_c-10", "g_c-2", "g_c-1"], key=java_string_key) == ["g_c-1", "g_c-10", "g_c-2"]


def test_zero_streams_fail_every_member_with_assertion_error_spec_2_2():
    subscriptions = {"g_a": {"t": 1}, "g_b": {"t": 0}}
    for strategy in ("range", "roundrobin"):
        for consumer_id in subscriptions:
            with pytest.raises(LegacyAssignmentError) as raised:
                legacy_assignment(strategy, subscriptions, {"t": 4}, consumer_id)
            assert raised.value.kind == "AssertionError"


def test_roundrobin_empty_group_is_kafka_1648_npe():
    with pytest.raises(LegacyAssignmentError) as raised:
        legacy_assignment("roundrobin", {"g_a": {}, "g_b": {}}, {"t": 4}, "g_a")
    assert raised.value.kind == "NullPointerException"
    assert legacy_assignment("range", {"g_a": {}}, {"t": 4}, "g_a") == {}


def test_unknown_strategy_means_range_and_unknown_consumer_is_value_error():
    subscriptions = {"g_a": {"t": 2}, "g_b": {"t": 1}}
    assert legacy_assignment("Range!", subscriptions, {"t": 7}, "g_a") == legacy_assignment(
        "range", subscriptions, {"t": 7}, "g_a"
    )
    with pytest.raises(ValueError):
        legacy_assignment("range", subscriptions, {"t": 7}, "g_zzz")


def test_roundrobin_member_without_subscription_owns_nothing_and_is_ignored():
    subscriptions = {"g_a": {"t": 1}, "g_idle": {}}
    assert legacy_assignment("roundrobin", subscriptions, {"t": 3}, "g_idle") == {}
    assert legacy_assignment("roundrobin", subscriptions, {"t": 3}, "g_a") == {"g_a-0": [("t", 0), ("t", 1), ("t", 2)]}


def test_hash_ties_are_reported_for_aa_bb():
    listing = roundrobin_listing({"Aa": 1, "BB": 1}, {"Aa": 1, "BB": 1})
    assert hash_ties(listing) == [[listing[0], listing[1]]]
    assert not hash_ties(roundrobin_listing({"t": 1}, {"t": 8}))


def test_tie_order_follows_registration_key_order_for_up_to_four_topics_spec_4_3():
    # Same topics, other key order: the tie order can differ, as between two JVM members (rr-13).
    orders = {
        tuple(roundrobin_listing(dict.fromkeys(keys, 1), {"Aa": 1, "BB": 1})) for keys in (("Aa", "BB"), ("BB", "Aa"))
    }
    assert all(sorted(order) == [("Aa", 0), ("BB", 0)] for order in orders)


# ---- properties ---------------------------------------------------------------------------------

topic_names = st.sampled_from(["t", "orders", "Aa", "BB", "x1", "x2", "__consumer_offsets", "t-10"])
consumer_names = st.text(alphabet="abcAB019-_.", min_size=1, max_size=6).map(lambda s: "g_" + s)


@st.composite
def groups(draw, same_topics=False):
    topics = draw(st.lists(topic_names, min_size=1, max_size=4, unique=True))
    consumers = draw(st.lists(consumer_names, min_size=1, max_size=6, unique=True))
    subscriptions = {}
    for consumer in consumers:
        if same_topics:
            streams = draw(st.integers(1, 4))
            subscriptions[consumer] = {t: streams for t in draw(st.permutations(topics))}
        else:
            mine = draw(st.lists(st.sampled_from(topics), min_size=1, max_size=len(topics), unique=True))
            subscriptions[consumer] = {t: draw(st.integers(1, 4)) for t in mine}
    partitions = {t: draw(st.integers(0, 40)) for t in topics if draw(st.integers(0, 4))}  # some have no node
    return subscriptions, partitions


def _claims(assignment):
    return [claim for claims in assignment.values() for claim in claims]


def _subscribed_partitions(subscriptions, partitions):
    subscribed = {t for s in subscriptions.values() for t in s}
    return {(t, p) for t in subscribed for p in range(partitions.get(t, 0))}


@given(groups())
def test_range_claims_each_subscribed_partition_exactly_once(group):
    subscriptions, partitions = group
    claims = _claims(group_assignment("range", subscriptions, partitions))
    assert len(claims) == len(set(claims))
    assert set(claims) == _subscribed_partitions(subscriptions, partitions)


@given(groups())
def test_range_balances_each_topic_within_one(group):
    subscriptions, partitions = group
    assignment = group_assignment("range", subscriptions, partitions)
    for topic in {t for s in subscriptions.values() for t in s}:
        subscribers = [f"{c}-{n}" for c, s in subscriptions.items() if topic in s for n in range(s[topic])]
        counts = [sum(1 for t, _ in assignment[thread] if t == topic) for thread in subscribers]
        assert max(counts) - min(counts) <= 1


@given(groups(same_topics=True))
def test_roundrobin_claims_each_partition_once_and_balances_threads(group):
    subscriptions, partitions = group
    listing = roundrobin_listing(next(iter(subscriptions.values())), partitions)
    assume(not hash_ties(listing))  # with ties members may disagree: that is 0.8.2's defect (rr-13)
    assignment = group_assignment("roundrobin", subscriptions, partitions)
    claims = _claims(assignment)
    assert len(claims) == len(set(claims))
    assert set(claims) == _subscribed_partitions(subscriptions, partitions)
    counts = [len(claims) for claims in assignment.values()]
    assert max(counts) - min(counts) <= 1


@given(groups(), st.sampled_from(["range", "roundrobin"]), st.randoms())
def test_independent_of_member_order_and_deterministic(group, strategy, rnd):
    subscriptions, partitions = group
    shuffled_members = list(subscriptions.items())
    rnd.shuffle(shuffled_members)
    shuffled = dict(shuffled_members)
    for consumer_id in subscriptions:
        try:
            expected = legacy_assignment(strategy, subscriptions, partitions, consumer_id)
        except LegacyAssignmentError as error:
            with pytest.raises(LegacyAssignmentError) as again:
                legacy_assignment(strategy, shuffled, partitions, consumer_id)
            assert again.value.kind == error.kind
            continue
        assert legacy_assignment(strategy, shuffled, partitions, consumer_id) == expected
        assert legacy_assignment(strategy, subscriptions, partitions, consumer_id) == expected


@given(groups(), st.randoms())
def test_range_is_independent_of_topic_key_order(group, rnd):
    subscriptions, partitions = group
    reordered = {}
    for consumer_id, subscription in subscriptions.items():
        items = list(subscription.items())
        rnd.shuffle(items)
        reordered[consumer_id] = dict(items)
    assert group_assignment("range", reordered, partitions) == group_assignment("range", subscriptions, partitions)


@given(groups())
def test_roundrobin_precondition_fails_on_every_member_or_none(group):
    subscriptions, partitions = group
    thread_sets = {}
    for consumer, subscription in subscriptions.items():
        for topic, streams in subscription.items():
            thread_sets.setdefault(topic, set()).update(f"{consumer}-{n}" for n in range(streams))
    consistent = len({frozenset(s) for s in thread_sets.values()}) == 1
    outcomes = Counter()
    for consumer_id in subscriptions:
        try:
            legacy_assignment("roundrobin", subscriptions, partitions, consumer_id)
            outcomes["ok"] += 1
        except LegacyAssignmentError as error:
            assert error.kind == "IllegalArgumentException"
            assert error.message == ROUNDROBIN_PRECONDITION_MESSAGE
            outcomes["failed"] += 1
    assert set(outcomes) == ({"ok"} if consistent else {"failed"})
