"""Which ACL each request of the coordinator's typed APIs needs, and how a refusal looks, as Kafka 3.9's KafkaApis
answers them (docs/security.md, "Which ACL each request needs").

:func:`authorize` takes a typed request and ``allowed(operation, resource_type, name)``, bound by the listener to
the connection's principal and host, and says what to dispatch: the request as it is, a request reduced to what
the principal may touch, or nothing. Its :meth:`Authorized.response` turns the core's answer (None when nothing
was dispatched) into the client's: the refused entries put back, with Kafka's codes, where the request had them.
Both listeners use it: the Kafka listener's group mapping (:mod:`zkcoord.wire.kafka.groups`) reads the answers it
gives like any other answer of the core.

Kafka lists refused entries before or after the others, by API; here they keep their place in the request's
order (clients match entries by name). :func:`authorizing` puts the checks in front of a listener's
``dispatch(request, respond)``.

Pure: imports only msgspec, zkcoord.wire and zkcoord.errors; no IO.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import msgspec

from zkcoord.errors import ErrorCode
from zkcoord.wire import messages as m
from zkcoord.wire.kafka.acl import (
    CLUSTER,
    CLUSTER_NAME,
    DELETE,
    DESCRIBE,
    GROUP,
    READ,
    TOPIC,
    Allowed,
    Denial,
    in_request_order,
)

_GROUP_DENIED = ErrorCode.GROUP_AUTHORIZATION_FAILED
_TOPIC_DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED


def _unchanged(answer: m.Response | None) -> m.Response:
    return answer


@dataclass(frozen=True, slots=True)
class Authorized:
    """What to dispatch for a request (``request``; None: nothing), the checks it failed (``denials``), and the
    rule that turns the core's answer into the client's (:meth:`response`)."""

    request: m.Request | None
    denials: tuple[Denial, ...] = ()
    merge: Callable[[m.Response | None], m.Response] = _unchanged

    def response(self, answer: m.Response | None = None) -> m.Response:
        """The client's answer from the core's ``answer`` to :attr:`request` (None when it was not dispatched)."""
        return self.merge(answer)


def authorize(request: m.Request, allowed: Allowed) -> Authorized:
    """What of ``request`` the principal behind ``allowed`` may have done, and how its answer looks."""
    check = _CHECKS.get(type(request))
    return Authorized(request) if check is None else check(request, allowed)


Respond = Callable[[m.Response], None]
Dispatch = Callable[[m.Request, Respond], None]


def authorizing(dispatch: Dispatch, allowed: Allowed, on_denied: Callable[[Denial], None]) -> Dispatch:
    """``dispatch`` behind the checks of ``allowed``: a refused request is answered at once, a reduced one is
    dispatched and its answer completed; ``on_denied`` gets each refused check (for the log)."""

    def authorized_dispatch(request: m.Request, respond: Respond) -> None:
        authorized = authorize(request, allowed)
        for denial in authorized.denials:
            on_denied(denial)
        if authorized.request is None:
            respond(authorized.response(None))
        elif authorized.merge is _unchanged:  # the hot path (heartbeats, commits) builds no closure
            dispatch(request, respond)
        else:
            dispatch(authorized.request, lambda answer: respond(authorized.response(answer)))

    return authorized_dispatch


def _group(request) -> str:
    return request.group_id or ""


def _refused(denial: Denial, answer: m.Response) -> Authorized:
    return Authorized(None, (denial,), lambda _: answer)


def _topic_results(topics, code: int) -> tuple[m.TopicResult, ...]:
    return tuple(
        m.TopicResult(
            name=topic.name,
            partitions=tuple(
                m.PartitionResult(partition_index=p.partition_index, error_code=code) for p in topic.partitions
            ),
        )
        for topic in topics
    )


# ---- one group, one operation: JoinGroup, SyncGroup, Heartbeat, LeaveGroup ---------------------------------

_GROUP_READ_REFUSALS: dict[type, m.Response] = {
    m.JoinGroupRequest: m.JoinGroupResponse(error_code=_GROUP_DENIED),
    m.SyncGroupRequest: m.SyncGroupResponse(error_code=_GROUP_DENIED),
    m.HeartbeatRequest: m.HeartbeatResponse(error_code=_GROUP_DENIED),
    m.LeaveGroupRequest: m.LeaveGroupResponse(error_code=_GROUP_DENIED),
}


def _group_read(request, allowed: Allowed) -> Authorized:
    if allowed(READ, GROUP, _group(request)):
        return Authorized(request)
    return _refused(Denial(READ, GROUP, _group(request)), _GROUP_READ_REFUSALS[type(request)])


def _find_coordinator(request: m.FindCoordinatorRequest, allowed: Allowed) -> Authorized:
    # The core places every key as a group's (the Kafka listener forwards transactional keys before this), so
    # every key type needs what a group's lookup needs.
    if allowed(DESCRIBE, GROUP, request.key):
        return Authorized(request)
    refusal = m.FindCoordinatorResponse(error_code=_GROUP_DENIED, node_id=-1, host="", port=-1)
    return _refused(Denial(DESCRIBE, GROUP, request.key), refusal)


# ---- a group and its topics: OffsetCommit, OffsetFetch, OffsetDelete ---------------------------------------


def _denied_topics(topics, operation: str, allowed: Allowed) -> dict[int, str]:
    """Index → name of the topics ``operation`` is refused on, each name checked once."""
    verdicts: dict[str, bool] = {}
    for topic in topics:
        if topic.name not in verdicts:
            verdicts[topic.name] = allowed(operation, TOPIC, topic.name)
    return {index: topic.name for index, topic in enumerate(topics) if not verdicts[topic.name]}


def _topic_denials(operation: str, denied: Mapping[int, str]) -> tuple[Denial, ...]:
    return tuple(Denial(operation, TOPIC, name) for name in dict.fromkeys(denied.values()))


def _offset_commit(request: m.OffsetCommitRequest, allowed: Allowed) -> Authorized:
    topics = request.topics
    if not allowed(READ, GROUP, _group(request)):
        return _refused(
            Denial(READ, GROUP, _group(request)), m.OffsetCommitResponse(topics=_topic_results(topics, _GROUP_DENIED))
        )
    denied = _denied_topics(topics, READ, allowed)
    if not denied:
        return Authorized(request)
    refused = dict(zip(denied, _topic_results([topics[index] for index in denied], _TOPIC_DENIED), strict=True))
    kept = tuple(topic for index, topic in enumerate(topics) if index not in denied)
    names = [topic.name for topic in topics]

    def merge(answer: m.Response | None) -> m.Response:
        if answer is None:
            answered = ()
        elif isinstance(answer, m.ErrorResponse):  # refused whole by the core: its code on what was dispatched
            answered = _topic_results(kept, answer.error_code)
        else:
            answered = answer.topics
        return m.OffsetCommitResponse(topics=in_request_order(names, refused, answered, lambda topic: topic.name))

    # Kafka commits nothing when no topic is left; the answer is the refusals alone.
    reduced = msgspec.structs.replace(request, topics=kept) if kept else None
    return Authorized(reduced, _topic_denials(READ, denied), merge)


def _offset_fetch(request: m.OffsetFetchRequest, allowed: Allowed) -> Authorized:
    if not allowed(DESCRIBE, GROUP, _group(request)):
        refusal = m.OffsetFetchResponse(error_code=_GROUP_DENIED)
        return _refused(Denial(DESCRIBE, GROUP, _group(request)), refusal)
    if request.topics is None:
        # Every partition with an offset: the topics the principal may not describe are left out, unlogged.
        def without_hidden(answer: m.Response) -> m.Response:
            if not isinstance(answer, m.OffsetFetchResponse) or answer.error_code:
                return answer
            shown = tuple(topic for topic in answer.topics if allowed(DESCRIBE, TOPIC, topic.name))
            return answer if len(shown) == len(answer.topics) else msgspec.structs.replace(answer, topics=shown)

        return Authorized(request, (), without_hidden)
    topics = request.topics
    denied = _denied_topics(topics, DESCRIBE, allowed)
    if not denied:
        return Authorized(request)
    refused = {
        index: m.OffsetFetchResponseTopic(
            name=topics[index].name,
            partitions=tuple(
                m.OffsetFetchResponsePartition(
                    partition_index=partition, committed_offset=-1, metadata="", error_code=_TOPIC_DENIED
                )
                for partition in topics[index].partition_indexes
            ),
        )
        for index in denied
    }
    names = [topic.name for topic in topics]

    def merge(answer: m.Response) -> m.Response:
        if not isinstance(answer, m.OffsetFetchResponse) or answer.error_code:
            return answer  # a group error: Kafka answers it without the topics
        spliced = in_request_order(names, refused, answer.topics, lambda topic: topic.name)
        return msgspec.structs.replace(answer, topics=spliced)

    # Dispatched even with no topic left, as Kafka does: the group's own errors (16, 14...) still reach the client.
    kept = tuple(topic for index, topic in enumerate(topics) if index not in denied)
    return Authorized(msgspec.structs.replace(request, topics=kept), _topic_denials(DESCRIBE, denied), merge)


def _offset_delete(request: m.OffsetDeleteRequest, allowed: Allowed) -> Authorized:
    if not allowed(DELETE, GROUP, _group(request)):
        return _refused(Denial(DELETE, GROUP, _group(request)), m.OffsetDeleteResponse(error_code=_GROUP_DENIED))
    topics = request.topics
    denied = _denied_topics(topics, READ, allowed)
    if not denied:
        return Authorized(request)
    refused = dict(zip(denied, _topic_results([topics[index] for index in denied], _TOPIC_DENIED), strict=True))
    names = [topic.name for topic in topics]

    def merge(answer: m.Response) -> m.Response:
        if not isinstance(answer, m.OffsetDeleteResponse) or answer.error_code:
            return answer  # a group error replaces the partitions' answers, as Kafka's merge does
        return msgspec.structs.replace(answer, topics=in_request_order(names, refused, answer.topics, lambda t: t.name))

    # Dispatched even with no topic left, as Kafka does: the group's own errors still reach the client.
    kept = tuple(topic for index, topic in enumerate(topics) if index not in denied)
    return Authorized(msgspec.structs.replace(request, topics=kept), _topic_denials(READ, denied), merge)


# ---- several groups: DescribeGroups, DeleteGroups, ListGroups ------------------------------------------------


def _per_group(
    request: m.DescribeGroupsRequest | m.DeleteGroupsRequest,
    allowed: Allowed,
    operation: str,
    field: str,
    entry: Callable[[str | None, int], m.DescribedGroup | m.DeletableGroupResult],
    results: str,
    response_type: type[m.DescribeGroupsResponse | m.DeleteGroupsResponse],
) -> Authorized:
    """Several groups checked one by one: the refused ones answered 30 in their place (``entry(group, code)`` is a
    group's entry of the answer's ``results``), the rest of ``field`` dispatched."""
    given = getattr(request, field)
    names = [group or "" for group in given]
    denied = {index: name for index, name in enumerate(names) if not allowed(operation, GROUP, name)}
    if not denied:
        return Authorized(request)
    refused = {index: entry(given[index], _GROUP_DENIED) for index in denied}
    kept = tuple(group for index, group in enumerate(given) if index not in denied)

    def merge(answer: m.Response | None) -> m.Response:
        if answer is None:
            answered = ()
        elif isinstance(answer, m.ErrorResponse):
            answered = tuple(entry(group, answer.error_code) for group in kept)
        else:
            answered = getattr(answer, results)
        ordered = in_request_order(names, refused, answered, lambda result: result.group_id or "")
        return response_type(**{results: ordered})

    reduced = msgspec.structs.replace(request, **{field: kept}) if kept else None
    denials = tuple(Denial(operation, GROUP, name) for name in dict.fromkeys(denied.values()))
    return Authorized(reduced, denials, merge)


def _describe_groups(request: m.DescribeGroupsRequest, allowed: Allowed) -> Authorized:
    def entry(group: str | None, code: int) -> m.DescribedGroup:
        return m.DescribedGroup(error_code=code, group_id=group)

    return _per_group(request, allowed, DESCRIBE, "groups", entry, "groups", m.DescribeGroupsResponse)


def _delete_groups(request: m.DeleteGroupsRequest, allowed: Allowed) -> Authorized:
    def entry(group: str | None, code: int) -> m.DeletableGroupResult:
        return m.DeletableGroupResult(group_id=group, error_code=code)

    return _per_group(request, allowed, DELETE, "groups_names", entry, "results", m.DeleteGroupsResponse)


def _list_groups(request: m.ListGroupsRequest, allowed: Allowed) -> Authorized:
    if allowed(DESCRIBE, CLUSTER, CLUSTER_NAME):
        return Authorized(request)

    # Only the groups the principal may describe are listed; Kafka logs none of the others.
    def describable(answer: m.Response) -> m.Response:
        if not isinstance(answer, m.ListGroupsResponse):
            return answer
        shown = tuple(group for group in answer.groups if allowed(DESCRIBE, GROUP, group.group_id))
        return answer if len(shown) == len(answer.groups) else msgspec.structs.replace(answer, groups=shown)

    return Authorized(request, (), describable)


# ---- topics: Metadata ----------------------------------------------------------------------------------------


def _metadata(request: m.MetadataRequest, allowed: Allowed) -> Authorized:
    if request.topics is None:
        # Every topic: those the principal may not describe are left out, unlogged, as Kafka does.
        def describable(answer: m.Response) -> m.Response:
            if not isinstance(answer, m.MetadataResponse):
                return answer
            shown = tuple(topic for topic in answer.topics if allowed(DESCRIBE, TOPIC, topic.name))
            return answer if len(shown) == len(answer.topics) else msgspec.structs.replace(answer, topics=shown)

        return Authorized(request, (), describable)
    names = list(request.topics)
    denied = {index: name for index, name in enumerate(names) if not allowed(DESCRIBE, TOPIC, name)}
    if not denied:
        return Authorized(request)
    refused = {
        index: m.MetadataResponseTopic(name=name, error_code=_TOPIC_DENIED, partitions=())
        for index, name in denied.items()
    }

    def merge(answer: m.Response) -> m.Response:
        if not isinstance(answer, m.MetadataResponse):
            return answer
        return msgspec.structs.replace(answer, topics=in_request_order(names, refused, answer.topics, lambda t: t.name))

    # Dispatched even with no topic left: the answer's brokers are the client's to have.
    kept = tuple(name for index, name in enumerate(names) if index not in denied)
    denials = tuple(Denial(DESCRIBE, TOPIC, name) for name in dict.fromkeys(denied.values()))
    return Authorized(m.MetadataRequest(topics=kept), denials, merge)


_CHECKS: dict[type, Callable[[m.Request, Allowed], Authorized]] = {
    **dict.fromkeys(_GROUP_READ_REFUSALS, _group_read),
    m.FindCoordinatorRequest: _find_coordinator,
    m.OffsetCommitRequest: _offset_commit,
    m.OffsetFetchRequest: _offset_fetch,
    m.OffsetDeleteRequest: _offset_delete,
    m.DescribeGroupsRequest: _describe_groups,
    m.DeleteGroupsRequest: _delete_groups,
    m.ListGroupsRequest: _list_groups,
    m.MetadataRequest: _metadata,
}
