"""Offset retention (group-coordinator.md §7.6) on group views, and OffsetStore.expire on loaded groups (§9.6 step 5).

The scenarios mirror Kafka's GroupMetadataManagerTest (GMMT) and GroupMetadataTest (GMT) tests named in §7.6.
"""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zkcoord.model import GroupState, TopicPartition
from zkcoord.offsets.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
)
from zkcoord.offsets.retention import (
    GroupView,
    expired_offsets,
    subscribed_topics,
    view_of_loaded_group,
)
from zkcoord.offsets.store import CommittedOffset, OffsetStore
from zkcoord.wire.consumer_protocol import Subscription, encode_subscription

RETENTION_MS = 10080 * 60000  # offsets.retention.minutes default (§0.2)
START = 1_700_000_000_000
FOO0, FOO1, FOO2 = TopicPartition("foo", 0), TopicPartition("foo", 1), TopicPartition("foo", 2)
BAR0, BAR1 = TopicPartition("bar", 0), TopicPartition("bar", 1)


def committed(commit_timestamp: int = START, expire_timestamp: int = -1) -> CommittedOffset:
    return CommittedOffset(37, "", commit_timestamp, expire_timestamp, -1, log_offset=0)


def member(member_id: str = "m", subscription: bytes = b"") -> MemberMetadata:
    return MemberMetadata(member_id, None, "client", "/127.0.0.1", 300000, 10000, subscription, b"")


def consumer_member(*topics: str, member_id: str = "m") -> MemberMetadata:
    return member(member_id, encode_subscription(Subscription(tuple(topics))))


def view(protocol_type, state, *, state_timestamp=START, subscribed=None, pending=frozenset()) -> GroupView:
    return GroupView(protocol_type, state, state_timestamp, 1, subscribed, pending)


def store_with(group: str, offsets: dict[TopicPartition, OffsetCommitValue], record=None) -> OffsetStore:
    store = OffsetStore()
    for log_offset, (partition, value) in enumerate(offsets.items()):
        store.apply(OffsetCommitKey(group, partition.topic, partition.partition), value, log_offset)
    if record is not None:
        store.apply(GroupMetadataKey(group), record, len(offsets))
    return store


def offset_tombstone(group: str, partition: TopicPartition):
    return (OffsetCommitKey(group, partition.topic, partition.partition), None)


# ---- §7.6 on views ----------------------------------------------------------------------------------


def test_expire_offset_gmmt_testExpireOffset_case_c():
    # A group that only stores offsets (no protocol type); old clients set explicit expire timestamps.
    offsets = {FOO0: committed(expire_timestamp=START + 1), FOO1: committed(expire_timestamp=START + 3)}
    no_protocol = view(None, GroupState.EMPTY)
    assert expired_offsets(no_protocol, offsets, START + 2, RETENTION_MS) == {FOO0}
    assert expired_offsets(no_protocol, offsets, START + 3, RETENTION_MS) == {FOO0, FOO1}


def test_explicit_expire_timestamp_is_inclusive_and_overrides_retention_case_a():
    offsets = {FOO0: committed(commit_timestamp=START, expire_timestamp=START + 10)}
    empty = view("consumer", GroupState.EMPTY, state_timestamp=START)
    assert expired_offsets(empty, offsets, START + 9, retention_ms=1) == set()
    assert expired_offsets(empty, offsets, START + 10, retention_ms=10**12) == {FOO0}


def test_offset_expiration_semantics_gmmt_testOffsetExpirationSemantics_cases_a_d():
    offsets = {
        FOO0: committed(expire_timestamp=START + 1),  # old clients: explicit expiry
        FOO1: committed(expire_timestamp=START + 3),
        FOO2: committed(),  # new clients: the group's offsets expire together
    }
    # Active (rebalancing) group: nothing expires, even past an explicit expire timestamp (case (d)).
    rebalancing = view("consumer", GroupState.COMPLETING_REBALANCE, subscribed=frozenset({"foo"}))
    assert expired_offsets(rebalancing, offsets, START + 2, RETENTION_MS) == set()

    # The group becomes Empty at START + 2: the retention clock starts then, not at commit time (case (a)).
    emptied_at = START + 2
    empty = view("consumer", GroupState.EMPTY, state_timestamp=emptied_at, subscribed=frozenset())
    assert expired_offsets(empty, offsets, START + 2, RETENTION_MS) == {FOO0}
    assert expired_offsets(empty, offsets, START + 4, RETENTION_MS) == {FOO0, FOO1}
    assert expired_offsets(empty, offsets, emptied_at + RETENTION_MS - 1, RETENTION_MS) == {FOO0, FOO1}
    assert expired_offsets(empty, offsets, emptied_at + RETENTION_MS, RETENTION_MS) == {FOO0, FOO1, FOO2}


def test_empty_group_without_state_timestamp_uses_commit_timestamp_case_a():
    # A group loaded from an old record has no current_state_timestamp (-1).
    offsets = {FOO0: committed(commit_timestamp=START), FOO1: committed(commit_timestamp=START + 5)}
    old_record = view("consumer", GroupState.EMPTY, state_timestamp=-1)
    assert expired_offsets(old_record, offsets, START + RETENTION_MS, RETENTION_MS) == {FOO0}
    assert expired_offsets(old_record, offsets, START + RETENTION_MS + 5, RETENTION_MS) == {FOO0, FOO1}


def test_offset_expiration_of_simple_consumer_gmmt_testOffsetExpirationOfSimpleConsumer_case_c():
    offsets = {FOO0: committed(commit_timestamp=START)}
    simple = view(None, GroupState.EMPTY, state_timestamp=START + 10**9)  # case (c) ignores the state clock
    assert expired_offsets(simple, offsets, START + RETENTION_MS - 1, RETENTION_MS) == set()
    assert expired_offsets(simple, offsets, START + RETENTION_MS, RETENTION_MS) == {FOO0}


def test_offset_expiration_of_active_group_gmmt_testOffsetExpirationOfActiveGroupSemantics_case_b():
    offsets = {FOO0: committed(), FOO1: committed(), BAR0: committed(), BAR1: committed()}
    long_after = START + RETENTION_MS + 2
    both = view("consumer", GroupState.STABLE, subscribed=frozenset({"foo", "bar"}))
    assert expired_offsets(both, offsets, long_after, RETENTION_MS) == set()
    # The next generation subscribes to foo only: bar's offsets expire by their commit timestamp.
    foo_only = view("consumer", GroupState.STABLE, state_timestamp=long_after, subscribed=frozenset({"foo"}))
    assert expired_offsets(foo_only, offsets, long_after, RETENTION_MS) == {BAR0, BAR1}
    assert expired_offsets(foo_only, offsets, START + RETENTION_MS - 1, RETENTION_MS) == set()


def test_stable_consumer_group_with_unknown_subscription_expires_nothing_case_d():
    offsets = {FOO0: committed(), BAR0: committed(expire_timestamp=START)}
    unknown = view("consumer", GroupState.STABLE, subscribed=None)
    assert expired_offsets(unknown, offsets, START + RETENTION_MS * 2, RETENTION_MS) == set()


@pytest.mark.parametrize("state", [GroupState.STABLE, GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE])
def test_non_consumer_protocol_that_is_not_empty_expires_nothing_case_d(state):
    offsets = {FOO0: committed(expire_timestamp=START)}
    connect = view("connect", state, subscribed=None)
    assert expired_offsets(connect, offsets, START + RETENTION_MS * 2, RETENTION_MS) == set()


@pytest.mark.parametrize("state", [GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE])
def test_rebalancing_consumer_group_expires_nothing_kafka_13636_case_d(state):
    # GMT testOffsetRemovalDuringTransitionFromEmptyToNonEmpty: a member joined an Empty group.
    offsets = {FOO0: committed(), BAR0: committed()}
    rebalancing = view("consumer", state, subscribed=frozenset({"foo"}))
    assert expired_offsets(rebalancing, offsets, START + RETENTION_MS * 2, RETENTION_MS) == set()


@pytest.mark.parametrize(
    "group_view",
    [
        view(None, GroupState.EMPTY),
        view("consumer", GroupState.EMPTY),
        view("consumer", GroupState.STABLE, subscribed=frozenset()),
    ],
    ids=["case-c", "case-a", "case-b"],
)
def test_pending_commits_never_expire_spec_7_6(group_view):
    offsets = {FOO0: committed(), FOO1: committed(expire_timestamp=START)}
    pending_view = GroupView(
        group_view.protocol_type,
        group_view.state,
        group_view.current_state_timestamp,
        group_view.generation,
        group_view.subscribed_topics,
        pending=frozenset({FOO0}),
    )
    now = START + RETENTION_MS * 2
    assert expired_offsets(group_view, offsets, now, RETENTION_MS) == {FOO0, FOO1}
    assert expired_offsets(pending_view, offsets, now, RETENTION_MS) == {FOO1}


@given(
    st.sampled_from([None, "", "consumer", "connect"]),
    st.sampled_from(
        [GroupState.EMPTY, GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE, GroupState.STABLE]
    ),
    st.none() | st.frozensets(st.sampled_from(["foo", "bar"])),
    st.integers(0, 3 * RETENTION_MS),
)
def test_expiry_is_monotonic_in_time(protocol_type, state, subscribed, elapsed):
    # Whatever expired at some time has also expired at any later time, and only known offsets expire.
    offsets = {FOO0: committed(), FOO1: committed(START - 5), BAR0: committed(expire_timestamp=START + 7)}
    group_view = view(protocol_type, state, state_timestamp=START + 3, subscribed=subscribed)
    earlier = expired_offsets(group_view, offsets, START + elapsed, RETENTION_MS)
    later = expired_offsets(group_view, offsets, START + elapsed + RETENTION_MS // 2, RETENTION_MS)
    assert earlier <= later <= set(offsets)


def test_group_view_rejects_unknown_states():
    with pytest.raises(ValueError, match="unknown group state 'Awaiting'"):
        GroupView(None, "Awaiting", -1, 0, None)
    assert GroupView(None, GroupState.DEAD, -1, 0, None).state == GroupState.DEAD


# ---- subscribed topics (§7.6; GMT testSubscribedTopics, testSubscribedTopicsNonConsumerGroup) -------------


def test_subscribed_topics_gmt_testSubscribedTopics():
    group = GroupMetadataValue(
        "consumer", 1, "range", "m1", START, (consumer_member("foo", member_id="m1"), consumer_member("foo", "bar"))
    )
    assert subscribed_topics(group) == frozenset({"foo", "bar"})


def test_subscribed_topics_of_a_consumer_group_without_members_is_empty():
    assert subscribed_topics(GroupMetadataValue("consumer", 2, None, None, START)) == frozenset()


def test_subscribed_topics_unknown_when_a_subscription_does_not_parse():
    group = GroupMetadataValue(
        "consumer", 1, "range", "m1", START, (consumer_member("foo", member_id="m1"), member("m2", b"\xc1"))
    )
    assert subscribed_topics(group) is None


def test_subscribed_topics_unknown_without_a_chosen_protocol():
    # Kafka only parses the members' metadata for the chosen protocol (GM computeSubscribedTopics).
    assert subscribed_topics(GroupMetadataValue("consumer", 1, None, None, START, (consumer_member("foo"),))) is None


@pytest.mark.parametrize("protocol_type", ["connect", "", "Consumer"])
def test_subscribed_topics_gmt_testSubscribedTopicsNonConsumerGroup(protocol_type):
    group = GroupMetadataValue(protocol_type, 1, "range", "m", START, (consumer_member("foo"),))
    assert subscribed_topics(group) is None
    assert subscribed_topics(GroupMetadataValue(protocol_type, 1, None, None, START)) is None


# ---- groups as loaded (§9.6 step 5) ---------------------------------------------------------------


def test_loaded_group_with_members_is_stable():
    record = GroupMetadataValue("consumer", 7, "range", "m", START, (consumer_member("foo"),))
    assert view_of_loaded_group(record) == GroupView("consumer", GroupState.STABLE, START, 7, frozenset({"foo"}))


def test_loaded_group_without_members_is_empty():
    record = GroupMetadataValue("consumer", 7, None, None, -1)
    assert view_of_loaded_group(record) == GroupView("consumer", GroupState.EMPTY, -1, 7, frozenset())


def test_offsets_only_group_is_empty_with_no_protocol_type():
    assert view_of_loaded_group(None) == GroupView(None, GroupState.EMPTY, -1, 0, None)


def test_empty_protocol_type_is_no_protocol_type_for_an_empty_group():
    # Records store "no protocol type" as "" (§9.3); Kafka's GM loadGroup reads it back as None (case (c)).
    record = GroupMetadataValue("", 4, None, None, START)
    assert view_of_loaded_group(record).protocol_type is None
    offsets = {FOO0: committed(commit_timestamp=START - RETENTION_MS)}
    assert expired_offsets(view_of_loaded_group(record), offsets, START, RETENTION_MS) == {FOO0}


def test_empty_protocol_type_is_kept_for_a_group_with_members():
    # Kafka's GM add() sets the protocol type from the loaded members, "" included: case (d), nothing expires.
    record = GroupMetadataValue("", 4, "p", "m", START, (member(),))
    assert view_of_loaded_group(record).protocol_type == ""
    offsets = {FOO0: committed(commit_timestamp=START - RETENTION_MS)}
    assert expired_offsets(view_of_loaded_group(record), offsets, START, RETENTION_MS) == set()


# ---- OffsetStore.expire: removal and tombstones (§7.6 "After removal") --------------------------------


def test_store_expire_offset_gmmt_testExpireOffset():
    store = store_with(
        "g",
        {
            FOO0: OffsetCommitValue(37, "", START, expire_timestamp=START + 1),
            FOO1: OffsetCommitValue(37, "", START, expire_timestamp=START + 3),
        },
    )
    assert store.expire(START + 2, RETENTION_MS) == [offset_tombstone("g", FOO0)]
    assert store.offset("g", FOO0) is None
    assert store.offset("g", FOO1).offset == 37
    assert store.group_ids() == {"g"}


@pytest.mark.parametrize("protocol_type", ["", "consumer"])
def test_store_group_metadata_removal_gmmt_testGroupMetadataRemoval(protocol_type):
    # An Empty group of generation 5 with no offsets becomes Dead: only its metadata tombstone is written.
    store = store_with("g", {}, record=GroupMetadataValue(protocol_type, 5, None, None, START))
    assert store.expire(START, RETENTION_MS) == [(GroupMetadataKey("g"), None)]
    assert store == OffsetStore()


def test_store_expire_group_with_offsets_only_gmmt_testExpireGroupWithOffsetsOnly():
    store = store_with(
        "g",
        {
            FOO0: OffsetCommitValue(37, "", START, expire_timestamp=START + 1),
            FOO1: OffsetCommitValue(37, "", START, expire_timestamp=START + 3),
        },
    )
    # No group tombstone: an offsets-only group has no metadata record to delete.
    assert store.expire(START + 4, RETENTION_MS) == [offset_tombstone("g", FOO0), offset_tombstone("g", FOO1)]
    assert store == OffsetStore()
    assert store.group_ids() == set()


def test_store_group_tombstone_only_for_generation_above_zero_spec_7_6():
    store = store_with("g", {FOO0: OffsetCommitValue(37, "", START)}, record=GroupMetadataValue("c", 0, None, None, 0))
    assert store.expire(START + RETENTION_MS, RETENTION_MS) == [offset_tombstone("g", FOO0)]
    assert store == OffsetStore()


def test_store_offset_expiration_semantics_gmmt_testOffsetExpirationSemantics():
    emptied_at = START + 2
    store = store_with(
        "g",
        {
            FOO0: OffsetCommitValue(37, "", START, expire_timestamp=START + 1),
            FOO1: OffsetCommitValue(37, "", START, expire_timestamp=START + 3),
            FOO2: OffsetCommitValue(37, "", START),
        },
        record=GroupMetadataValue("consumer", 1, None, None, emptied_at),
    )
    assert store.expire(START + 2, RETENTION_MS) == [offset_tombstone("g", FOO0)]
    assert store.expire(START + 4, RETENTION_MS) == [offset_tombstone("g", FOO1)]
    assert store.expire(emptied_at + RETENTION_MS - 1, RETENTION_MS) == []
    assert store.offset("g", FOO2).offset == 37
    assert store.expire(emptied_at + RETENTION_MS + 1, RETENTION_MS) == [
        offset_tombstone("g", FOO2),
        (GroupMetadataKey("g"), None),
    ]
    assert store == OffsetStore()


def test_store_offset_expiration_of_simple_consumer_gmmt_testOffsetExpirationOfSimpleConsumer():
    store = store_with("g", {FOO0: OffsetCommitValue(37, "", START)})
    assert store.expire(START + RETENTION_MS - 1, RETENTION_MS) == []
    assert store.offset("g", FOO0).offset == 37
    assert store.expire(START + RETENTION_MS + 1, RETENTION_MS) == [offset_tombstone("g", FOO0)]
    assert store.group_ids() == set()


def test_store_stable_group_keeps_subscribed_offsets_gmmt_testOffsetExpirationOfActiveGroupSemantics():
    record = GroupMetadataValue("consumer", 2, "range", "m", START, (consumer_member("foo"),))
    store = store_with(
        "g",
        {offset: OffsetCommitValue(37, "", START) for offset in (FOO0, FOO1, BAR0, BAR1)},
        record=record,
    )
    assert store.expire(START + RETENTION_MS + 2, RETENTION_MS) == [
        offset_tombstone("g", BAR0),
        offset_tombstone("g", BAR1),
    ]
    assert store.groups == {"g": record}  # a Stable group stays
    assert set(store.offsets["g"]) == {FOO0, FOO1}


def test_store_stable_group_stays_when_all_its_offsets_expire():
    record = GroupMetadataValue("consumer", 2, "range", "m", START, (consumer_member("foo"),))
    store = store_with("g", {BAR0: OffsetCommitValue(37, "", START)}, record=record)
    assert store.expire(START + RETENTION_MS, RETENTION_MS) == [offset_tombstone("g", BAR0)]
    assert store.groups == {"g": record}
    assert store.offsets == {}
    assert store.group_ids() == {"g"}


def test_store_empty_group_with_live_offsets_is_kept():
    record = GroupMetadataValue("consumer", 3, None, None, START)
    store = store_with("g", {FOO0: OffsetCommitValue(37, "", START)}, record=record)
    assert store.expire(START + RETENTION_MS - 1, RETENTION_MS) == []
    assert store.groups == {"g": record}


def test_store_expire_tombstones_are_sorted_across_groups():
    store = OffsetStore()
    for group in ("b", "a", "c"):
        for partition in (BAR1, FOO0, BAR0):
            store.apply(OffsetCommitKey(group, partition.topic, partition.partition), OffsetCommitValue(1, "", 0), 0)
        store.apply(GroupMetadataKey(group), GroupMetadataValue("consumer", 1, None, None, 0), 1)
    tombstones = store.expire(RETENTION_MS, RETENTION_MS)
    expected = []
    for group in ("a", "b", "c"):
        expected += [offset_tombstone(group, partition) for partition in (BAR0, BAR1, FOO0)]
        expected.append((GroupMetadataKey(group), None))
    assert tombstones == expected
    assert store == OffsetStore()


def test_store_expire_twice_writes_nothing_new():
    store = store_with("g", {FOO0: OffsetCommitValue(37, "", START)})
    assert store.expire(START + RETENTION_MS, RETENTION_MS) == [offset_tombstone("g", FOO0)]
    assert store.expire(START + RETENTION_MS, RETENTION_MS) == []
