"""Bounds on what one request may name (docs/coordinator.md "Limits"), applied once to every typed request.

Repeated topics or groups in one request collapse to their first occurrence, so an answer grows with the
distinct names asked for, not with the size of the request (a 1 MB Metadata naming one topic 500,000 times
asked for a 140 MB answer). Ids a client chooses have a length bound; a longer one refuses the request with
42 INVALID_REQUEST naming the field. Group ids and topic names are checked where they are answered, with
Kafka's codes: 24 INVALID_GROUP_ID (:data:`MAX_GROUP_ID_LENGTH`) and 17 INVALID_TOPIC_EXCEPTION
(:func:`legal_topic_name`).

Pure: imports only msgspec and zkcoord.wire.messages; no IO.
"""

from __future__ import annotations

import re

import msgspec

from zkcoord.wire import messages as m

# Kafka's Topic.validate: at most 249 characters of [a-zA-Z0-9._-], and neither "." nor "..".
MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_CHARS = re.compile(r"[a-zA-Z0-9._\-]+")
# 0.8.2's Config.validateChars bound for group and client ids.
MAX_GROUP_ID_LENGTH = 255
MAX_CLIENT_ID_LENGTH = 1024  # also bounds group_instance_id
# A member id is the client or instance id, "-" and a UUID (37 characters): this leaves room for it.
MAX_MEMBER_ID_LENGTH = 2048


def legal_name(name: str, max_length: int) -> bool:
    """Kafka's ``validateChars``: 1 to ``max_length`` characters of ``[a-zA-Z0-9._-]``, neither "." nor ".."."""
    return 0 < len(name) <= max_length and bool(_LEGAL_CHARS.fullmatch(name)) and name not in (".", "..")


def legal_topic_name(name: str) -> bool:
    """Whether Kafka would accept ``name`` as a topic name."""
    return legal_name(name, MAX_TOPIC_NAME_LENGTH)


def group_id_too_long(group_id: str) -> bool:
    return len(group_id) > MAX_GROUP_ID_LENGTH


def id_length_problem(request: m.Request, client_id: object) -> str | None:
    """What names an id longer than its bound in ``request`` (or its header's ``client_id``), else None."""
    if type(client_id) is str and len(client_id) > MAX_CLIENT_ID_LENGTH:
        return f"client_id is longer than {MAX_CLIENT_ID_LENGTH} characters"
    identities = [request]
    identities += getattr(request, "members", ())
    identities += getattr(request, "assignments", ())
    for identity in identities:
        member_id = getattr(identity, "member_id", None)
        if member_id is not None and len(member_id) > MAX_MEMBER_ID_LENGTH:
            return f"member_id is longer than {MAX_MEMBER_ID_LENGTH} characters"
        instance_id = getattr(identity, "group_instance_id", None)
        if instance_id is not None and len(instance_id) > MAX_CLIENT_ID_LENGTH:
            return f"group_instance_id is longer than {MAX_CLIENT_ID_LENGTH} characters"
    return None


def collapsed(request: m.Request) -> m.Request:
    """``request`` with repeated topics, groups and partitions dropped after their first occurrence."""
    kind = type(request)
    if kind is m.MetadataRequest and request.topics is not None:
        return msgspec.structs.replace(request, topics=tuple(dict.fromkeys(request.topics)))
    if kind is m.DescribeGroupsRequest:
        return msgspec.structs.replace(request, groups=tuple(dict.fromkeys(request.groups)))
    if kind is m.DeleteGroupsRequest:
        return msgspec.structs.replace(request, groups_names=tuple(dict.fromkeys(request.groups_names)))
    if kind is m.OffsetFetchRequest and request.topics is not None:
        partitions: dict[str, dict[int, None]] = {}
        for topic in request.topics:
            partitions.setdefault(topic.name, {}).update(dict.fromkeys(topic.partition_indexes))
        topics = tuple(
            m.OffsetFetchRequestTopic(name=name, partition_indexes=tuple(indexes))
            for name, indexes in partitions.items()
        )
        return msgspec.structs.replace(request, topics=topics)
    return request
