"""Which ACL each coordinator request needs and how refusals look, as Kafka's KafkaApis answers them; the answers
also go through the Kafka listener's mapping (groups.kafka_response) as a client of either protocol sees them."""

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zkcoord.auth.requests import Authorized, Denial, authorize, authorizing
from zkcoord.wire import messages as m
from zkcoord.wire.kafka import groups
from zkcoord.wire.kafka.entities import to_plain


def _allow(*grants: tuple[str, str, str]) -> Callable[[str, str, str], bool]:
    """``allowed`` granting exactly ``grants`` and recording every question asked."""
    granted = set(grants)
    return lambda operation, resource_type, name: (operation, resource_type, name) in granted


def _allow_all(*_) -> bool:
    return True


def _deny_all(*_) -> bool:
    return False


def _commit(group: str, *topics: tuple[str, tuple[int, ...]]) -> m.OffsetCommitRequest:
    return m.OffsetCommitRequest(
        group_id=group,
        generation_id=1,
        member_id="m-1",
        topics=tuple(
            m.OffsetCommitRequestTopic(
                name=name,
                partitions=tuple(m.OffsetCommitRequestPartition(partition_index=p, committed_offset=7) for p in parts),
            )
            for name, parts in topics
        ),
    )


def _results(answer: m.OffsetCommitResponse | m.OffsetDeleteResponse) -> list[tuple[str, list[tuple[int, int]]]]:
    return [(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in answer.topics]


def _core_commit_answer(request: m.OffsetCommitRequest, code: int = 0) -> m.OffsetCommitResponse:
    return m.OffsetCommitResponse(
        topics=tuple(
            m.TopicResult(
                name=t.name,
                partitions=tuple(
                    m.PartitionResult(partition_index=p.partition_index, error_code=code) for p in t.partitions
                ),
            )
            for t in request.topics
        )
    )


# ---- worked examples -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("request_", "refusal"),
    [
        (
            m.JoinGroupRequest(
                group_id="g",
                session_timeout_ms=1,
                rebalance_timeout_ms=1,
                member_id="",
                protocol_type="c",
                protocols=(),
            ),
            m.JoinGroupResponse(error_code=30),
        ),
        (m.SyncGroupRequest(group_id="g", generation_id=1, member_id="m"), m.SyncGroupResponse(error_code=30)),
        (m.HeartbeatRequest(group_id="g", generation_id=1, member_id="m"), m.HeartbeatResponse(error_code=30)),
        (
            m.LeaveGroupRequest(group_id="g", members=(m.MemberIdentity(member_id="m"),)),
            m.LeaveGroupResponse(error_code=30),
        ),
    ],
)
def test_membership_requests_need_read_on_the_group(request_, refusal):
    assert authorize(request_, _allow(("Read", "Group", "g"))).request is request_
    for allowed in (_deny_all, _allow(("Describe", "Group", "g"), ("Delete", "Group", "g"))):
        refused = authorize(request_, allowed)
        assert refused.request is None
        assert refused.denials == (Denial("Read", "Group", "g"),)
        assert refused.response(None) == refusal


def test_a_member_without_read_on_the_group_gets_30_at_every_kafka_version():
    leave = m.LeaveGroupRequest(group_id="g", members=(m.MemberIdentity(member_id="m"),))
    for version in (0, 2, 3, 5):  # before v3 the one member's error is the request's
        answer = authorize(leave, _deny_all).response(None)
        assert to_plain(groups.kafka_response(13, version, [leave], [answer]))["error_code"] == 30


def test_a_commit_without_read_on_the_group_answers_30_on_every_partition_and_commits_nothing():
    commit = _commit("g", ("orders", (0, 1)), ("payments", (3,)))
    refused = authorize(commit, _allow(("Read", "Topic", "orders"), ("Read", "Topic", "payments")))
    assert refused.request is None and refused.denials == (Denial("Read", "Group", "g"),)
    assert _results(refused.response(None)) == [("orders", [(0, 30), (1, 30)]), ("payments", [(3, 30)])]


def test_a_commit_to_a_topic_without_read_answers_29_there_and_commits_the_rest():
    commit = _commit("g", ("orders", (0,)), ("secret", (1, 2)), ("payments", (3,)))
    authorized = authorize(
        commit, _allow(("Read", "Group", "g"), ("Read", "Topic", "orders"), ("Read", "Topic", "payments"))
    )
    assert [t.name for t in authorized.request.topics] == ["orders", "payments"]
    assert authorized.request.member_id == "m-1" and authorized.request.generation_id == 1
    assert authorized.denials == (Denial("Read", "Topic", "secret"),)
    # The core answers in its own order: the client's answer is in the request's.
    core = _core_commit_answer(authorized.request, code=22)
    core = m.OffsetCommitResponse(topics=core.topics[::-1])
    expected = [("orders", [(0, 22)]), ("secret", [(1, 29), (2, 29)]), ("payments", [(3, 22)])]
    assert _results(authorized.response(core)) == expected
    # Refused whole by the core: its code on what was dispatched, 29 stays where it was.
    whole = authorized.response(m.ErrorResponse(error_code=16))
    assert _results(whole) == [("orders", [(0, 16)]), ("secret", [(1, 29), (2, 29)]), ("payments", [(3, 16)])]
    kafka = to_plain(groups.kafka_response(8, 9, [commit], [whole]))
    assert [[p["error_code"] for p in t["partitions"]] for t in kafka["topics"]] == [[16], [29, 29], [16]]


def test_a_commit_to_no_readable_topic_is_not_dispatched():
    commit = _commit("g", ("secret", (0,)), ("secret", (1,)))
    authorized = authorize(commit, _allow(("Read", "Group", "g")))
    assert authorized.request is None
    assert authorized.denials == (Denial("Read", "Topic", "secret"),)  # each name once
    assert _results(authorized.response(None)) == [("secret", [(0, 29)]), ("secret", [(1, 29)])]


def _fetch(group: str, topics) -> m.OffsetFetchRequest:
    if topics is not None:
        topics = tuple(m.OffsetFetchRequestTopic(name=n, partition_indexes=parts) for n, parts in topics)
    return m.OffsetFetchRequest(group_id=group, topics=topics)


def _fetched(*topics: str) -> m.OffsetFetchResponse:
    partition = m.OffsetFetchResponsePartition(partition_index=0, committed_offset=5, metadata="", error_code=0)
    return m.OffsetFetchResponse(
        error_code=0, topics=tuple(m.OffsetFetchResponseTopic(name=t, partitions=(partition,)) for t in topics)
    )


def test_offset_fetch_without_describe_on_the_group_is_30_where_each_version_carries_it():
    request = _fetch("g", [("orders", (0, 1))])
    refused = authorize(request, _allow(("Read", "Group", "other"), ("Describe", "Topic", "orders")))
    assert refused.request is None and refused.denials == (Denial("Describe", "Group", "g"),)
    answer = refused.response(None)
    v1 = to_plain(groups.kafka_response(9, 1, [request], [answer]))
    assert [p["error_code"] for p in v1["topics"][0]["partitions"]] == [30, 30]  # v1 has no group-level error
    assert to_plain(groups.kafka_response(9, 5, [request], [answer]))["error_code"] == 30
    v8 = to_plain(groups.kafka_response(9, 8, [request], [answer]))
    assert v8["groups"][0]["error_code"] == 30


def test_offset_fetch_of_a_topic_not_describable_is_29_and_the_rest_is_fetched():
    request = _fetch("g", [("secret", (0, 1)), ("orders", (0,))])
    authorized = authorize(request, _allow(("Describe", "Group", "g"), ("Describe", "Topic", "orders")))
    assert [t.name for t in authorized.request.topics] == ["orders"]
    answer = authorized.response(_fetched("orders"))
    assert [(t.name, [(p.committed_offset, p.error_code) for p in t.partitions]) for t in answer.topics] == [
        ("secret", [(-1, 29), (-1, 29)]),
        ("orders", [(5, 0)]),
    ]
    assert authorized.response(m.OffsetFetchResponse(error_code=16)) == m.OffsetFetchResponse(error_code=16)


def test_offset_fetch_with_no_describable_topic_still_asks_the_core_for_the_group():
    authorized = authorize(_fetch("g", [("secret", (0,))]), _allow(("Describe", "Group", "g")))
    assert authorized.request.topics == ()  # NOT_COORDINATOR and the like must still reach the client
    assert authorized.response(m.OffsetFetchResponse(error_code=14)).error_code == 14


def test_fetching_every_offset_leaves_out_the_topics_not_describable_unlogged():
    authorized = authorize(_fetch("g", None), _allow(("Describe", "Group", "g"), ("Describe", "Topic", "orders")))
    assert authorized.request.topics is None and authorized.denials == ()
    assert [t.name for t in authorized.response(_fetched("secret", "orders")).topics] == ["orders"]


def test_describe_groups_answers_30_per_group_in_the_request_order():
    request = m.DescribeGroupsRequest(groups=("a", "secret", "b"), include_authorized_operations=True)
    authorized = authorize(request, _allow(("Describe", "Group", "a"), ("Describe", "Group", "b")))
    assert authorized.request.groups == ("a", "b")
    assert authorized.denials == (Denial("Describe", "Group", "secret"),)
    core = m.DescribeGroupsResponse(
        groups=(m.DescribedGroup(error_code=0, group_id="b"), m.DescribedGroup(error_code=0, group_id="a"))
    )
    allowed = _allow(("Describe", "Group", "a"), ("Describe", "Group", "b"), ("Read", "Group", "b"))
    kafka = to_plain(groups.kafka_response(15, 5, [request], [authorized.response(core)], allowed=allowed))
    # Authorized operations are the principal's (Read 3, Delete 6, Describe 8), only on groups described.
    assert [(g["group_id"], g["error_code"], g["authorized_operations"]) for g in kafka["groups"]] == [
        ("a", 0, 1 << 8),
        ("secret", 30, -(2**31)),
        ("b", 0, (1 << 3) | (1 << 8)),
    ]
    with_no_authorizer = to_plain(groups.kafka_response(15, 5, [request], [core]))
    assert {g["authorized_operations"] for g in with_no_authorizer["groups"]} == {(1 << 3) | (1 << 6) | (1 << 8)}
    nothing = authorize(request, _deny_all)
    assert nothing.request is None
    assert [g.error_code for g in nothing.response(None).groups] == [30, 30, 30]


def test_list_groups_shows_only_describable_groups_unless_the_cluster_is_describable():
    listed = m.ListGroupsResponse(
        error_code=0,
        groups=tuple(m.ListedGroup(group_id=g, protocol_type="consumer", group_state="Stable") for g in "abc"),
    )
    request = m.ListGroupsRequest()
    some = authorize(request, _allow(("Describe", "Group", "b")))
    assert some.request is request and some.denials == ()
    assert [g.group_id for g in some.response(listed).groups] == ["b"]
    assert authorize(request, _allow(("Describe", "Cluster", "kafka-cluster"))).response(listed) is listed


def test_delete_groups_needs_delete_per_group():
    request = m.DeleteGroupsRequest(groups_names=("mine", "theirs"))
    authorized = authorize(request, _allow(("Delete", "Group", "mine"), ("Read", "Group", "theirs")))
    assert authorized.request.groups_names == ("mine",)
    core = m.DeleteGroupsResponse(results=(m.DeletableGroupResult(group_id="mine", error_code=0),))
    kafka = to_plain(groups.kafka_response(42, 2, [request], [authorized.response(core)]))
    assert [(r["group_id"], r["error_code"]) for r in kafka["results"]] == [("mine", 0), ("theirs", 30)]
    assert authorized.denials == (Denial("Delete", "Group", "theirs"),)


def test_offset_delete_needs_delete_on_the_group_and_read_on_each_topic():
    request = m.OffsetDeleteRequest(
        group_id="g",
        topics=tuple(
            m.OffsetDeleteRequestTopic(name=n, partitions=(m.OffsetDeleteRequestPartition(partition_index=0),))
            for n in ("secret", "orders")
        ),
    )
    no_group = authorize(request, _allow(("Read", "Group", "g"), ("Read", "Topic", "orders")))
    assert no_group.request is None and no_group.response(None) == m.OffsetDeleteResponse(error_code=30)
    authorized = authorize(request, _allow(("Delete", "Group", "g"), ("Read", "Topic", "orders")))
    assert [t.name for t in authorized.request.topics] == ["orders"]
    core = m.OffsetDeleteResponse(
        error_code=0,
        topics=(m.TopicResult(name="orders", partitions=(m.PartitionResult(partition_index=0, error_code=0),)),),
    )
    assert _results(authorized.response(core)) == [("secret", [(0, 29)]), ("orders", [(0, 0)])]
    group_error = m.OffsetDeleteResponse(error_code=68)
    assert authorized.response(group_error) is group_error  # Kafka's merge keeps a group error alone


def test_find_coordinator_needs_describe_on_the_group():
    request = m.FindCoordinatorRequest(key="g", key_type=0)
    refused = authorize(request, _allow(("Read", "Group", "g")))
    assert refused.request is None and refused.denials == (Denial("Describe", "Group", "g"),)
    kafka = to_plain(groups.kafka_response(10, 4, [request], [refused.response(None)]))
    assert kafka["coordinators"][0]["error_code"] == 30 and kafka["coordinators"][0]["node_id"] == -1
    # The core places any key type as a group's, so any key type needs Describe on that group.
    other_type = m.FindCoordinatorRequest(key="t", key_type=1)
    assert authorize(other_type, _deny_all).denials == (Denial("Describe", "Group", "t"),)


def test_metadata_marks_requested_topics_not_describable_29_and_hides_them_from_a_full_listing():
    def answer(*names):
        topics = tuple(m.MetadataResponseTopic(name=n, error_code=0, partitions=()) for n in names)
        return m.MetadataResponse(nodes=(m.MetadataResponseBroker(node_id=1, host="h", port=1),), topics=topics)

    allowed = _allow(("Describe", "Topic", "orders"))
    named = authorize(m.MetadataRequest(topics=("secret", "orders")), allowed)
    assert named.request.topics == ("orders",) and named.denials == (Denial("Describe", "Topic", "secret"),)
    assert [(t.name, t.error_code) for t in named.response(answer("orders")).topics] == [("secret", 29), ("orders", 0)]
    every = authorize(m.MetadataRequest(), allowed)
    assert every.request.topics is None
    shown = every.response(answer("secret", "orders"))
    assert [t.name for t in shown.topics] == ["orders"] and shown.nodes == answer().nodes


def test_api_versions_needs_nothing():
    request = m.ApiVersionsRequest()
    assert authorize(request, _deny_all) == Authorized(request)


def test_a_listener_dispatch_behind_the_checks_answers_refusals_itself_and_completes_the_rest():
    dispatched, answers, denied = [], [], []

    def core(request, respond):
        dispatched.append(request)
        respond(_core_commit_answer(request))

    dispatch = authorizing(core, _allow(("Read", "Group", "g"), ("Read", "Topic", "orders")), denied.append)
    dispatch(m.HeartbeatRequest(group_id="h", generation_id=1, member_id="m"), answers.append)
    dispatch(_commit("g", ("secret", (0,)), ("orders", (1,))), answers.append)
    assert [type(r).__name__ for r in dispatched] == ["OffsetCommitRequest"]
    assert [t.name for t in dispatched[0].topics] == ["orders"]
    assert answers[0] == m.HeartbeatResponse(error_code=30)
    assert _results(answers[1]) == [("secret", [(0, 29)]), ("orders", [(1, 0)])]
    assert denied == [Denial("Read", "Group", "h"), Denial("Read", "Topic", "secret")]
    heartbeat = m.HeartbeatRequest(group_id="g", generation_id=1, member_id="m")
    seen = []
    authorizing(lambda request, respond: seen.append((request, respond)), _allow_all, denied.append)(heartbeat, print)
    assert seen == [(heartbeat, print)]  # allowed whole: the listener's own respond, nothing wrapped


# ---- properties ----------------------------------------------------------------------------------------------

_TOPIC_NAMES = st.sampled_from(["a", "b", "c", "d"])
_PARTITIONS = st.lists(st.integers(0, 5), min_size=1, max_size=3, unique=True).map(tuple)
_COMMITS = st.lists(st.tuples(_TOPIC_NAMES, _PARTITIONS), max_size=5).map(lambda topics: _commit("g", *topics))
_GROUP_NAMES = st.lists(st.sampled_from(["g", "h", "k"]), min_size=1, max_size=4).map(tuple)
_GROUP_REQUESTS = st.one_of(
    _COMMITS,
    st.lists(st.tuples(_TOPIC_NAMES, _PARTITIONS), max_size=4).map(lambda topics: _fetch("g", topics)),
    st.just(_fetch("g", None)),
    _GROUP_NAMES.map(lambda names: m.DescribeGroupsRequest(groups=names)),
    _GROUP_NAMES.map(lambda names: m.DeleteGroupsRequest(groups_names=names)),
    st.just(m.HeartbeatRequest(group_id="g", generation_id=1, member_id="m")),
    st.just(m.SyncGroupRequest(group_id="g", generation_id=1, member_id="m")),
    st.just(m.FindCoordinatorRequest(key="g", key_type=0)),
    st.just(m.OffsetDeleteRequest(group_id="g", topics=())),
)
_REQUESTS = _GROUP_REQUESTS | st.just(m.ListGroupsRequest()) | st.just(m.MetadataRequest(topics=("a", "b")))


def _codes(answer: m.Response) -> list[int]:
    """Every error code an answer carries, wherever its API carries them."""
    if isinstance(answer, m.OffsetCommitResponse):
        return [p.error_code for t in answer.topics for p in t.partitions]
    if isinstance(answer, m.DescribeGroupsResponse):
        return [g.error_code for g in answer.groups]
    if isinstance(answer, m.DeleteGroupsResponse):
        return [r.error_code for r in answer.results]
    return [answer.error_code]


@given(_REQUESTS)
def test_with_every_operation_allowed_requests_and_answers_pass_unchanged(request):
    authorized = authorize(request, _allow_all)
    answer = object()  # whatever the core answers
    assert authorized.request is request and authorized.denials == () and authorized.response(answer) is answer


@given(_GROUP_REQUESTS)
def test_with_nothing_allowed_nothing_is_dispatched_and_every_entry_is_refused(request):
    authorized = authorize(request, _deny_all)
    assert authorized.request is None and authorized.denials
    assert all(code in (29, 30) for code in _codes(authorized.response(None)))


@given(_COMMITS, st.sets(_TOPIC_NAMES), st.randoms(use_true_random=False), st.sampled_from([0, 22, 27]))
def test_a_commit_split_by_topic_merges_back_in_the_request_order(commit, readable, random, code):
    grants = {("Read", "Group", "g")} | {("Read", "Topic", name) for name in readable}
    authorized = authorize(commit, _allow(*grants))
    dispatched = authorized.request.topics if authorized.request is not None else ()
    assert [t.name for t in dispatched] == [t.name for t in commit.topics if t.name in readable]
    core = list(_core_commit_answer(m.OffsetCommitRequest(**{**_fields(commit), "topics": dispatched}), code).topics)
    # The core may answer topics in another order; entries of one name keep theirs (nothing else tells them apart).
    names = list(dict.fromkeys(t.name for t in core))
    random.shuffle(names)
    core.sort(key=lambda t: names.index(t.name))
    core_answer = m.OffsetCommitResponse(topics=tuple(core))
    answer = authorized.response(core_answer if authorized.request else None)
    if not authorized.denials:
        assert answer is core_answer
        return
    assert _results(answer) == [
        (t.name, [(p.partition_index, code if t.name in readable else 29) for p in t.partitions]) for t in commit.topics
    ]


def _fields(struct) -> dict:
    return {name: getattr(struct, name) for name in struct.__struct_fields__}
