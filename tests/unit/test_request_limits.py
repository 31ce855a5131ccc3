"""Bounds on what one request may name (zkcoord.wire.limits, docs/coordinator.md "Limits"): repeated names
collapse, over-long ids are refused. Driven with wire request maps through the harness, which reads them as
a node does (zkcoord.wire.codec.read_request)."""

import pytest
from coordinator_requests import (
    INVALID_GROUP_ID,
    NONE,
    UNKNOWN_TOPIC_OR_PARTITION,
    G,
    _request,
    commit,
    delete,
    describe,
    error,
    fetch,
    join4,
    new_harness,
    reply,
)

from zkcoord.runtime.cluster import metadata_response
from zkcoord.wire.codec import read_request
from zkcoord.wire.limits import (
    MAX_CLIENT_ID_LENGTH,
    MAX_GROUP_ID_LENGTH,
    MAX_MEMBER_ID_LENGTH,
    MAX_TOPIC_NAME_LENGTH,
)

INVALID_TOPIC_EXCEPTION = 17
INVALID_REQUEST = 42


@pytest.fixture
def h():
    return new_harness()


# ---- repeated names collapse ----------------------------------------------------------------------------


def test_metadata_naming_one_topic_many_times_is_answered_once():
    request = read_request(_request("Metadata", topics=["t", "u", "t"] * 10_000))
    assert request.topics == ("t", "u")
    response = metadata_response((), {"t": 3}, request.topics)
    assert [(topic.name, topic.error_code) for topic in response.topics] == [("t", NONE), ("u", 3)]


def test_offset_fetch_merges_repeated_topics_and_partitions_in_first_seen_order(h):
    simple = h.send(commit("", -1, {("t", 0): 5, ("t", 1): 6}))
    assert reply(simple)
    request = _request(
        "OffsetFetch",
        group_id=G,
        topics=[{"name": "t", "partition_indexes": [1, 0, 1]}, {"name": "t", "partition_indexes": [0, 1]}] * 500,
    )
    topics = reply(h.send(request))["topics"]
    assert [(topic["name"], [p["partition_index"] for p in topic["partitions"]]) for topic in topics] == [("t", [1, 0])]


def test_describe_and_delete_groups_answer_each_group_once(h):
    described = reply(h.send(describe(G, "other", G, G)))["groups"]
    assert [group["group_id"] for group in described] == [G, "other"]
    deleted = reply(h.send(delete(G, G, "other")))["results"]
    assert [result["group_id"] for result in deleted] == [G, "other"]


# ---- id lengths -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "legal, name",
    [
        (True, "t" * MAX_TOPIC_NAME_LENGTH),
        (False, "t" * (MAX_TOPIC_NAME_LENGTH + 1)),
        (False, "a/b"),
        (False, ".."),
        (False, ""),
    ],
)
def test_metadata_answers_17_for_a_topic_name_kafka_would_not_accept(legal, name):
    response = metadata_response((), {}, (name,))
    assert response.topics[0].error_code == (UNKNOWN_TOPIC_OR_PARTITION if legal else INVALID_TOPIC_EXCEPTION)


def long_owned_group_id(h) -> str:
    """A group id one character over the bound whose offsets partition the harness owns."""
    for suffix in range(100):
        group_id = f"{suffix:03d}".ljust(MAX_GROUP_ID_LENGTH + 1, "g")
        if h.coordinator.partition_for(group_id) in h.coordinator.owned:
            return group_id
    raise AssertionError("no owned partition")


def test_every_group_request_refuses_an_over_long_group_id_with_24_and_stores_nothing(h):
    long_id = long_owned_group_id(h)
    assert error(h.send(join4(group=long_id))) == INVALID_GROUP_ID
    assert error(h.send(fetch(group=long_id, partitions=[("t", 0)]))) == INVALID_GROUP_ID
    committed = reply(h.send(commit("", -1, {("t", 0): 1}, group=long_id)))
    assert committed["topics"][0]["partitions"][0]["error_code"] == INVALID_GROUP_ID
    assert reply(h.send(describe(long_id)))["groups"][0]["error_code"] == INVALID_GROUP_ID
    assert reply(h.send(delete(long_id)))["results"][0]["error_code"] == INVALID_GROUP_ID
    assert long_id not in h.coordinator.groups


def test_a_group_stored_before_the_bound_can_still_be_deleted(h, monkeypatch):
    long_id = long_owned_group_id(h)
    monkeypatch.setattr("zkcoord.wire.limits.MAX_GROUP_ID_LENGTH", 10**6)
    committed = reply(h.send(commit("", -1, {("t", 0): 1}, group=long_id)))
    assert committed["topics"][0]["partitions"][0]["error_code"] == NONE
    monkeypatch.undo()
    assert reply(h.send(delete(long_id)))["results"][0]["error_code"] == NONE
    assert long_id not in h.coordinator.groups


def test_a_group_id_at_the_bound_is_served(h):
    bounded = "g" * MAX_GROUP_ID_LENGTH
    assert reply(h.send(describe(bounded)))["groups"][0]["error_code"] != INVALID_GROUP_ID


@pytest.mark.parametrize(
    "message",
    [
        {**join4(), "client_id": "c" * (MAX_CLIENT_ID_LENGTH + 1)},
        join4(member_id="m" * (MAX_MEMBER_ID_LENGTH + 1)),
        join4(instance="i" * (MAX_CLIENT_ID_LENGTH + 1)),
        _request("LeaveGroup", group_id=G, members=[{"member_id": "m" * (MAX_MEMBER_ID_LENGTH + 1)}]),
        _request(
            "SyncGroup",
            group_id=G,
            generation_id=1,
            member_id="m",
            assignments=[{"member_id": "m" * (MAX_MEMBER_ID_LENGTH + 1), "assignment": b""}],
        ),
    ],
    ids=["client_id", "member_id", "group_instance_id", "leave_member_id", "assignment_member_id"],
)
def test_an_over_long_client_member_or_instance_id_is_refused_with_42_naming_it(message):
    refusal = read_request(message)
    assert refusal["error_code"] == INVALID_REQUEST
    assert refusal["correlation_id"] == message["correlation_id"]
    assert "longer than" in refusal["error_message"]


def test_ids_at_their_bounds_are_read():
    message = {**join4(member_id="m" * MAX_MEMBER_ID_LENGTH), "client_id": "c" * MAX_CLIENT_ID_LENGTH}
    assert read_request(message).member_id == "m" * MAX_MEMBER_ID_LENGTH
