"""OffsetDelete (KIP-496; group-coordinator.md §7.10, GC ``handleDeleteOffsets``) through the test harness.

Driven with exactly the wire-protocol request maps, like test_coordinator_scenarios.py. zkcoord answers
after the tombstones are appended and drops the offsets from its cache only then (docs/protocol.md); Kafka
answers at once with an acks-0 append.
"""

import pytest
from coordinator_requests import (
    COORDINATOR_LOAD_IN_PROGRESS,
    COORDINATOR_NOT_AVAILABLE,
    G_PARTITION,
    INITIAL_DELAY,
    INVALID_COMMIT_OFFSET_SIZE,
    INVALID_GROUP_ID,
    NON_EMPTY_GROUP,
    NONE,
    NOT_COORDINATOR,
    OTHER,
    UNKNOWN_TOPIC_OR_PARTITION,
    G,
    _request,
    assert_joined,
    commit,
    commit_errors,
    error,
    fetched_offset,
    fx_one,
    join4,
    leave,
    leave_errors,
    new_harness,
    parked,
    pending_id,
    reply,
    sync,
)

from zkcoord.model import TopicPartition
from zkcoord.offsets.records import GroupMetadataKey, OffsetCommitKey
from zkcoord.wire.consumer_protocol import Subscription, encode_subscription

GROUP_ID_NOT_FOUND = 69
GROUP_SUBSCRIBED_TO_TOPIC = 86
INVALID_REQUEST = 42

TOPIC_0 = TopicPartition("topic", 0)
TOPIC_1 = TopicPartition("topic", 1)
OTHER_0 = TopicPartition("other", 0)


@pytest.fixture
def h():
    return new_harness()


def offset_delete(partitions, group=G) -> dict:
    """An OffsetDelete request for ``partitions`` ((topic, partition) pairs), topics in first-seen order."""
    topics: dict[str, list[dict]] = {}
    for topic, partition in partitions:
        topics.setdefault(topic, []).append({"partition_index": partition})
    return _request(
        "OffsetDelete",
        group_id=group,
        topics=[{"name": name, "partitions": entries} for name, entries in topics.items()],
    )


def delete_errors(handle) -> dict[TopicPartition, int]:
    """The per-partition errors of an OffsetDelete answered with top-level NONE."""
    response = reply(handle)
    assert response["error_code"] == NONE, response
    return {
        TopicPartition(topic["name"], partition["partition_index"]): partition["error_code"]
        for topic in response["topics"]
        for partition in topic["partitions"]
    }


def group_error(handle) -> int:
    """The top-level error of an OffsetDelete that failed as a whole: it carries no partitions."""
    response = reply(handle)
    assert response["topics"] == [], response
    return response["error_code"]


def simple_commit(h, offsets, group=G) -> None:
    """An offsets-only commit (generation -1) that must succeed."""
    handle = h.send(commit("", -1, offsets, group=group))
    assert set(commit_errors(handle).values()) == {NONE}


def stable_consumer(h, *topics: str) -> str:
    """One dynamic "consumer" member subscribed to ``topics``: Stable at generation 1. Returns its id."""
    protocols = (("range", encode_subscription(Subscription(tuple(topics)))),)
    member = pending_id(h)
    joined = h.send(join4(member, protocols))
    h.advance(INITIAL_DELAY + 1)
    assert_joined(joined, 1, leader=member)
    assert error(h.send(sync(member, 1, {member: b""}))) == NONE
    assert h.group(G).state == "Stable"
    return member


def reload(h, partition: int = G_PARTITION) -> None:
    h.unload(partition)
    h.load(partition)


def tombstoned(h, partition: int = G_PARTITION) -> list:
    return [key for key, value in h.records(partition) if value is None]


# ---- deletion --------------------------------------------------------------------------------------------------


def test_deleted_offset_fetches_as_minus_one_and_others_stay(h):
    simple_commit(h, {TOPIC_0: 5, TOPIC_1: 6})
    handle = h.send(offset_delete([TOPIC_0]))
    assert reply(handle) == {
        "correlation_id": handle.correlation_id,
        "error_code": NONE,
        "topics": [{"name": "topic", "partitions": [{"partition_index": 0, "error_code": NONE}]}],
    }
    assert fetched_offset(h, TOPIC_0) == -1
    assert fetched_offset(h, TOPIC_1) == 6
    assert tombstoned(h) == [OffsetCommitKey(G, "topic", 0)]
    assert h.group(G).state == "Empty"


def test_response_lists_each_partition_once_in_request_order(h):
    simple_commit(h, {TOPIC_0: 5, OTHER_0: 1})
    # A topic may come twice, and a partition too (Kafka's request collections allow it).
    request = _request(
        "OffsetDelete",
        group_id=G,
        topics=[
            {"name": "topic", "partitions": [{"partition_index": 1}]},
            {"name": "other", "partitions": [{"partition_index": 0}]},
            {"name": "topic", "partitions": [{"partition_index": 0}, {"partition_index": 1}]},
        ],
    )
    response = reply(h.send(request))
    assert response["topics"] == [
        {
            "name": "topic",
            "partitions": [{"partition_index": 1, "error_code": NONE}, {"partition_index": 0, "error_code": NONE}],
        },
        {"name": "other", "partitions": [{"partition_index": 0, "error_code": NONE}]},
    ]
    # One tombstone per offset that existed; none for topic-1, which had none.
    assert tombstoned(h) == [OffsetCommitKey(G, "other", 0), OffsetCommitKey(G, "topic", 0)]


def test_partition_without_offset_answers_none_and_writes_nothing(h):
    simple_commit(h, {TOPIC_0: 5})
    records_before = len(h.records(G_PARTITION))
    assert delete_errors(h.send(offset_delete([OTHER_0]))) == {OTHER_0: NONE}
    assert len(h.records(G_PARTITION)) == records_before
    assert fetched_offset(h, TOPIC_0) == 5


def test_empty_topic_list_answers_none_with_no_topics(h):
    simple_commit(h, {TOPIC_0: 5})
    assert reply(h.send(offset_delete([])))["topics"] == []
    assert fetched_offset(h, TOPIC_0) == 5


def test_subscribed_topic_is_refused_while_other_topics_are_deleted(h):
    member = stable_consumer(h, "topic")
    assert set(commit_errors(h.send(commit(member, 1, {TOPIC_0: 5, OTHER_0: 7}))).values()) == {NONE}
    errors = delete_errors(h.send(offset_delete([TOPIC_0, OTHER_0])))
    assert errors == {TOPIC_0: GROUP_SUBSCRIBED_TO_TOPIC, OTHER_0: NONE}
    assert fetched_offset(h, TOPIC_0) == 5
    assert fetched_offset(h, OTHER_0) == -1
    assert tombstoned(h) == [OffsetCommitKey(G, "other", 0)]
    assert h.group(G).state == "Stable"


def test_unknown_subscription_counts_as_subscribed(h):
    """GM ``isSubscribedToTopic``: metadata that is not a consumer subscription leaves the topics unknown."""
    member = fx_one(h)  # its metadata is b"", which does not parse
    assert h.group(G).subscribed_topics is None
    assert commit_errors(h.send(commit(member, 1, {OTHER_0: 7}))) == {OTHER_0: NONE}
    assert delete_errors(h.send(offset_delete([OTHER_0]))) == {OTHER_0: GROUP_SUBSCRIBED_TO_TOPIC}
    assert fetched_offset(h, OTHER_0) == 7


def test_first_rebalance_has_no_subscription_yet(h):
    """A group in its first PreparingRebalance has no generation, so no known subscription: all refused."""
    simple_commit(h, {OTHER_0: 7})
    protocols = (("range", encode_subscription(Subscription(("topic",)))),)
    joined = h.send(join4(pending_id(h), protocols))
    assert parked(joined)
    assert h.group(G).state == "PreparingRebalance"
    assert delete_errors(h.send(offset_delete([OTHER_0]))) == {OTHER_0: GROUP_SUBSCRIBED_TO_TOPIC}


def test_empty_group_deletes_everything_and_goes_away(h):
    member = stable_consumer(h, "topic")
    assert set(commit_errors(h.send(commit(member, 1, {TOPIC_0: 5, TOPIC_1: 6}))).values()) == {NONE}
    assert leave_errors(h.send(leave(member))) == [NONE]
    assert h.group(G).state == "Empty"
    errors = delete_errors(h.send(offset_delete([TOPIC_0, TOPIC_1])))
    assert errors == {TOPIC_0: NONE, TOPIC_1: NONE}
    assert fetched_offset(h, TOPIC_0) == -1
    assert fetched_offset(h, TOPIC_1) == -1
    # GMM cleanupGroupMetadata: Empty and without offsets, the group is Dead and gone, its record tombstoned.
    assert h.group(G) is None
    assert tombstoned(h)[-1] == GroupMetadataKey(G)
    assert group_error(h.send(offset_delete([TOPIC_0]))) == GROUP_ID_NOT_FOUND


def test_empty_group_keeps_the_offsets_not_named(h):
    member = fx_one(h)
    assert commit_errors(h.send(commit(member, 1, {TOPIC_0: 5, TOPIC_1: 6}))) == {TOPIC_0: NONE, TOPIC_1: NONE}
    assert leave_errors(h.send(leave(member))) == [NONE]
    assert delete_errors(h.send(offset_delete([TOPIC_0]))) == {TOPIC_0: NONE}
    assert h.group(G).state == "Empty"
    assert fetched_offset(h, TOPIC_1) == 6


def test_non_consumer_group_that_is_not_empty_gets_68(h):
    simple_commit(h, {TOPIC_0: 5})
    member = pending_id(h, protocol_type="connect")
    joined = h.send(join4(member, protocol_type="connect"))
    h.advance(INITIAL_DELAY + 1)
    assert_joined(joined, 1)
    assert group_error(h.send(offset_delete([TOPIC_0]))) == NON_EMPTY_GROUP
    assert fetched_offset(h, TOPIC_0) == 5


def test_unknown_topic_gets_3_when_topics_are_known(h):
    simple_commit(h, {TOPIC_0: 5})
    h.set_topics({"topic": 1})
    errors = delete_errors(h.send(offset_delete([TOPIC_0, TOPIC_1, OTHER_0])))
    assert errors == {TOPIC_0: NONE, TOPIC_1: UNKNOWN_TOPIC_OR_PARTITION, OTHER_0: UNKNOWN_TOPIC_OR_PARTITION}


# ---- group-level errors ----------------------------------------------------------------------------------------


def test_unknown_group_gets_69(h):
    assert group_error(h.send(offset_delete([TOPIC_0], group="nobody-here"))) == GROUP_ID_NOT_FOUND


@pytest.mark.parametrize("group_id", [None, ""])
def test_nil_or_empty_group_id_gets_24(h, group_id):
    """§0.4: OffsetDelete needs a non-empty group id."""
    assert group_error(h.send(offset_delete([TOPIC_0], group=group_id))) == INVALID_GROUP_ID


def test_group_of_a_partition_not_owned_gets_16(h):
    assert group_error(h.send(offset_delete([TOPIC_0], group=OTHER))) == NOT_COORDINATOR


def test_loading_partition_gets_14(h):
    simple_commit(h, {TOPIC_0: 5})
    h.start_loading(G_PARTITION)
    assert group_error(h.send(offset_delete([TOPIC_0]))) == COORDINATOR_LOAD_IN_PROGRESS


def test_stopped_coordinator_gets_15(h):
    h.coordinator.shutdown()
    assert group_error(h.send(offset_delete([TOPIC_0]))) == COORDINATOR_NOT_AVAILABLE


# ---- durability ----------------------------------------------------------------------------------------------


def test_answer_waits_for_the_tombstones(h):
    simple_commit(h, {TOPIC_0: 5})
    h.hold_appends()
    handle = h.send(offset_delete([TOPIC_0]))
    assert parked(handle)
    assert fetched_offset(h, TOPIC_0) == 5  # the cache changes only once the append succeeded
    h.complete_held_append()
    assert delete_errors(handle) == {TOPIC_0: NONE}
    assert fetched_offset(h, TOPIC_0) == -1


@pytest.mark.parametrize(
    ("append_error", "code"),
    [("NOT_LEADER_OR_FOLLOWER", NOT_COORDINATOR), ("MESSAGE_TOO_LARGE", INVALID_COMMIT_OFFSET_SIZE)],
)
def test_failed_append_maps_errors_as_commits_do_and_keeps_the_offsets(h, append_error, code):
    simple_commit(h, {TOPIC_0: 5})
    h.fail_appends(append_error)
    assert delete_errors(h.send(offset_delete([TOPIC_0, OTHER_0]))) == {TOPIC_0: code, OTHER_0: code}
    h.fail_appends(None)
    assert fetched_offset(h, TOPIC_0) == 5
    # Nothing was lost, so the delete can simply be retried.
    assert delete_errors(h.send(offset_delete([TOPIC_0]))) == {TOPIC_0: NONE}
    assert fetched_offset(h, TOPIC_0) == -1


def test_commit_in_flight_before_the_delete_is_deleted_too(h):
    h.hold_appends()
    committed = h.send(commit("", -1, {TOPIC_0: 5}))
    deleted = h.send(offset_delete([TOPIC_0]))
    assert parked(committed) and parked(deleted)
    h.release_appends()
    assert commit_errors(committed) == {TOPIC_0: NONE}
    assert delete_errors(deleted) == {TOPIC_0: NONE}
    assert fetched_offset(h, TOPIC_0) == -1
    assert h.group(G) is None
    reload(h)
    assert fetched_offset(h, TOPIC_0) == -1


def test_commit_after_the_delete_survives_it(h):
    simple_commit(h, {TOPIC_0: 5})
    h.hold_appends()
    deleted = h.send(offset_delete([TOPIC_0]))
    committed = h.send(commit("", -1, {TOPIC_0: 9}))
    h.release_appends()
    assert delete_errors(deleted) == {TOPIC_0: NONE}
    assert commit_errors(committed) == {TOPIC_0: NONE}
    assert fetched_offset(h, TOPIC_0) == 9
    reload(h)
    assert fetched_offset(h, TOPIC_0) == 9


def test_reload_after_deletion_keeps_it_deleted(h):
    member = stable_consumer(h, "topic")
    assert set(commit_errors(h.send(commit(member, 1, {TOPIC_0: 5, OTHER_0: 7}))).values()) == {NONE}
    errors = delete_errors(h.send(offset_delete([TOPIC_0, OTHER_0])))
    assert errors == {TOPIC_0: GROUP_SUBSCRIBED_TO_TOPIC, OTHER_0: NONE}
    before = h.group(G)
    reload(h)
    after = h.group(G)
    assert after.state == "Stable" and after.generation == before.generation
    assert after.offsets.keys() == before.offsets.keys() == {TOPIC_0}
    assert fetched_offset(h, TOPIC_0) == 5
    assert fetched_offset(h, OTHER_0) == -1


def test_reload_after_emptied_group_was_removed_finds_nothing(h):
    member = fx_one(h)
    assert commit_errors(h.send(commit(member, 1, {TOPIC_0: 5}))) == {TOPIC_0: NONE}
    assert leave_errors(h.send(leave(member))) == [NONE]
    assert delete_errors(h.send(offset_delete([TOPIC_0]))) == {TOPIC_0: NONE}
    assert h.group(G) is None
    reload(h)
    assert h.group(G) is None
    assert fetched_offset(h, TOPIC_0) == -1


def test_offsets_only_group_deleted_entirely_survives_reload_as_nothing(h):
    simple_commit(h, {TOPIC_0: 5})
    assert delete_errors(h.send(offset_delete([TOPIC_0]))) == {TOPIC_0: NONE}
    assert h.group(G) is None
    # Generation 0: there never was a group record to tombstone.
    assert GroupMetadataKey(G) not in tombstoned(h)
    reload(h)
    assert h.group(G) is None


# ---- request schema ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"topics": None}, "OffsetDelete.topics must be array, got nil"),
        ({"topics": [{"partitions": []}]}, "OffsetDelete.topics[0].name must be str, got nil"),
        ({"topics": [{"name": "t"}]}, "OffsetDelete.topics[0].partitions must be array, got nil"),
        (
            {"topics": [{"name": "t", "partitions": [{"partition_index": "0"}]}]},
            "OffsetDelete.topics[0].partitions[0].partition_index must be int32, got str",
        ),
        (
            {"topics": [{"name": "t", "partitions": [{"partition_index": 2**31}]}]},
            f"OffsetDelete.topics[0].partitions[0].partition_index must be int32, got int {2**31}",
        ),
        ({"group_id": 5}, "OffsetDelete.group_id must be str or nil, got int 5"),
    ],
)
def test_request_schema_errors_get_42(h, fields, message):
    simple_commit(h, {TOPIC_0: 5})
    handle = h.send({**offset_delete([TOPIC_0]), **fields})
    assert reply(handle) == {
        "correlation_id": handle.correlation_id,
        "error_code": INVALID_REQUEST,
        "error_message": message,
    }
    assert fetched_offset(h, TOPIC_0) == 5


def test_api_versions_lists_offset_delete_at_version_0(h):
    apis = reply(h.send(_request("ApiVersions")))["apis"]
    assert {"api": "OffsetDelete", "min_version": 0, "max_version": 0} in apis
    handle = h.send({**offset_delete([TOPIC_0]), "api_version": 1})
    assert reply(handle)["error_code"] == 35
