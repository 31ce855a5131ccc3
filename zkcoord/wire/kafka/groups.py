"""The group APIs of Kafka's protocol mapped onto zkcoord's typed messages, at every served version.

:func:`core_requests` turns one kio request into the typed requests the coordinator handles (one, or one per
group or key for the batched OffsetFetch v8+ and FindCoordinator v4+); :func:`kafka_response` builds the kio
response of the request's version from their typed answers. :func:`kafka_request` is the way back, for a
client of the protocol and for the codec's round-trip tests. Version differences live here and nowhere else,
as in Kafka's own request handlers: renamed fields, fields a version lacks, errors an old version puts on its
partitions.

Pure: imports only kio, msgspec and zkcoord.wire.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import msgspec

from zkcoord.errors import ErrorCode
from zkcoord.wire import messages as m
from zkcoord.wire.kafka.acl import GROUP, Allowed, authorized_operations
from zkcoord.wire.kafka.entities import build, to_plain
from zkcoord.wire.kafka.frames import request_schema, response_schema

# Kafka's field name → zkcoord's, where they differ.
_RENAMED = {
    "session_timeout": "session_timeout_ms",
    "rebalance_timeout": "rebalance_timeout_ms",
    "retention_time": "retention_time_ms",
    "generation_id_or_member_epoch": "generation_id",
}
_KAFKA_NAMES = {ours: theirs for theirs, ours in _RENAMED.items()}
_NO_AUTHORIZED_OPERATIONS = -(2**31)  # Kafka's "not requested"
_BUILTIN_TYPES = (bytes,)

REQUEST_TYPES: dict[int, type[m.Request]] = {
    10: m.FindCoordinatorRequest,
    11: m.JoinGroupRequest,
    14: m.SyncGroupRequest,
    12: m.HeartbeatRequest,
    13: m.LeaveGroupRequest,
    8: m.OffsetCommitRequest,
    9: m.OffsetFetchRequest,
    15: m.DescribeGroupsRequest,
    16: m.ListGroupsRequest,
    42: m.DeleteGroupsRequest,
    47: m.OffsetDeleteRequest,
}


def _renamed(plain: dict, names: dict[str, str]) -> dict:
    return {names.get(key, key): value for key, value in plain.items()}


def _typed(request_type: type, plain: dict) -> m.Request:
    return msgspec.convert(plain, request_type, builtin_types=_BUILTIN_TYPES)


def core_requests(api_key: int, version: int, body, client_id: str | None = None, client_host: str = "") -> tuple:
    """The typed requests of kio request ``body`` (api ``api_key`` at ``version``); msgspec.ValidationError
    when a value does not fit zkcoord's types."""
    plain = _renamed(to_plain(body), _RENAMED)
    request_type = REQUEST_TYPES[api_key]
    if api_key == 11:
        plain.setdefault("rebalance_timeout_ms", plain["session_timeout_ms"])  # v0 has one timeout for both
        plain.update(client_id=client_id or "", client_host=client_host)
    elif api_key == 13 and version < 3:
        plain = {"group_id": plain["group_id"], "members": [{"member_id": plain["member_id"]}]}
    elif api_key == 10:
        if version >= 4:
            keys = plain.pop("coordinator_keys")
            return tuple(_typed(request_type, {**plain, "key": key}) for key in keys)
        plain.setdefault("key_type", 0)
    elif api_key == 9 and version >= 8:
        return tuple(
            _typed(request_type, {**group, "require_stable": plain["require_stable"]}) for group in plain["groups"]
        )
    return (_typed(request_type, plain),)


def _struct_plain(value: object) -> object:
    if isinstance(value, msgspec.Struct):
        return {name: _struct_plain(getattr(value, name)) for name in value.__struct_fields__}
    if isinstance(value, tuple):
        return [_struct_plain(item) for item in value]
    return value


def kafka_request(api_key: int, version: int, requests: Sequence[m.Request]):
    """The kio request of ``version`` that :func:`core_requests` reads as ``requests``."""
    # Both names: "generation_id" is Kafka's own in SyncGroup and Heartbeat, renamed only in OffsetCommit.
    plains = [{**plain, **_renamed(plain, _KAFKA_NAMES)} for plain in map(_struct_plain, requests)]
    plain = plains[0] if plains else {}
    if api_key == 13 and version < 3:
        plain = {"group_id": plain["group_id"], "member_id": plain["members"][0]["member_id"]}
    elif api_key == 10 and version >= 4:
        plain = {"key_type": plain.get("key_type", 0), "coordinator_keys": [each["key"] for each in plains]}
    elif api_key == 9 and version >= 8:
        plain = {"groups": plains, "require_stable": bool(plains) and plains[0]["require_stable"]}
    return build(request_schema(api_key, version), plain)


# ---- responses ----------------------------------------------------------------------------------------------


def _error(response: m.Response) -> int:
    return getattr(response, "error_code", ErrorCode.NONE)


def _offset_fetch_topics(response: m.Response, request: m.OffsetFetchRequest, version: int) -> list[dict]:
    """OffsetFetch's topics; before v2 a group-level error is on each requested partition instead."""
    if isinstance(response, m.OffsetFetchResponse) and (response.error_code == ErrorCode.NONE or version >= 2):
        return [
            {
                "name": topic.name,
                "partitions": [{**_struct_plain(p), "committed_leader_epoch": -1} for p in topic.partitions],
            }
            for topic in response.topics
        ]
    return [
        {
            "name": topic.name,
            "partitions": [
                {
                    "partition_index": index,
                    "committed_offset": -1,
                    "committed_leader_epoch": -1,
                    "metadata": "",
                    "error_code": _error(response),
                }
                for index in topic.partition_indexes
            ],
        }
        for topic in request.topics or ()
    ]


def _partition_errors(request, code: int) -> list[dict]:
    """``code`` on every partition of ``request``'s topics (a typed OffsetCommit or OffsetDelete, or a kio
    TxnOffsetCommit: the same field names)."""
    return [
        {
            "name": topic.name,
            "partitions": [{"partition_index": p.partition_index, "error_code": code} for p in topic.partitions],
        }
        for topic in request.topics
    ]


CoordinatorAddress = Callable[[m.FindCoordinatorResponse], tuple[int, str, int] | None]


def kafka_response(
    api_key: int,
    version: int,
    requests: Sequence[m.Request],
    responses: Sequence[m.Response],
    coordinator_address: CoordinatorAddress | None = None,
    allowed: Allowed | None = None,
):
    """The kio response of ``version`` to the request that became ``requests``, from their ``responses``.

    A response may be an :class:`~zkcoord.wire.messages.ErrorResponse` (a request the core refused whole): its
    code goes where the version carries errors. ``coordinator_address`` gives a FindCoordinator answer's
    ``(node_id, host, port)`` on this protocol (None: not available). ``allowed`` answers for the connection's
    principal the checks behind DescribeGroups' authorized operations (None: no authorizer, every operation).
    """
    plain = {"throttle_time": 0, **_response_plain(api_key, version, requests, responses, coordinator_address)}
    if api_key == 15:
        _authorized_operations(plain["groups"], requests[0].include_authorized_operations, allowed or _everything)
    return build(response_schema(api_key, version), plain)


def _authorized_operations(described: list[dict], asked: bool, allowed: Allowed) -> None:
    """DescribeGroups' authorized operations, as Kafka sets them: only when asked for, on groups described."""
    for group in described:
        ok = asked and group["error_code"] == ErrorCode.NONE
        group["authorized_operations"] = (
            authorized_operations(allowed, GROUP, group["group_id"] or "") if ok else _NO_AUTHORIZED_OPERATIONS
        )


def _everything(*_) -> bool:
    return True


def _response_plain(api_key, version, requests, responses, coordinator_address) -> dict:  # noqa: C901
    first, request = responses[0] if responses else None, requests[0] if requests else None
    if api_key == 10:
        pairs = zip(requests, responses, strict=True)
        found = [_coordinator(each, request_for, coordinator_address) for request_for, each in pairs]
        return {"coordinators": found} if version >= 4 else found[0]
    if api_key == 9:
        groups = [
            {
                "group_id": each_request.group_id,
                "error_code": _error(each),
                "topics": _offset_fetch_topics(each, each_request, version),
            }
            for each_request, each in zip(requests, responses, strict=True)
        ]
        return {"groups": groups} if version >= 8 else groups[0]
    if isinstance(first, m.ErrorResponse):
        return _refused(api_key, request, first.error_code)
    plain = _struct_plain(first)
    if api_key == 13 and version < 3 and plain["error_code"] == ErrorCode.NONE and plain["members"]:
        plain["error_code"] = plain["members"][0]["error_code"]  # one member: its error is the request's
    elif api_key == 16:
        for group in plain["groups"]:
            group["group_type"] = "classic"
    return plain


def _coordinator(response: m.Response, request: m.FindCoordinatorRequest, coordinator_address) -> dict:
    answer = {
        "key": request.key,
        "error_code": _error(response),
        "error_message": None,
        "node_id": -1,
        "host": "",
        "port": -1,
    }
    if isinstance(response, m.FindCoordinatorResponse) and response.error_code == ErrorCode.NONE:
        address = coordinator_address(response) if coordinator_address else None
        if address is None:
            answer["error_code"] = ErrorCode.COORDINATOR_NOT_AVAILABLE
        else:
            answer["node_id"], answer["host"], answer["port"] = address
    return answer


def _refused(api_key: int, request: m.Request, code: int) -> dict:
    """A request the core refused whole, in the shape of its API's response."""
    if api_key == 8:
        return {"topics": _partition_errors(request, code)}
    if api_key == 47:
        return {"error_code": code, "topics": []}
    if api_key == 15:
        return {
            "groups": [
                {
                    "error_code": code,
                    "group_id": group,
                    "group_state": "",
                    "protocol_type": "",
                    "protocol_data": "",
                    "members": [],
                    "authorized_operations": _NO_AUTHORIZED_OPERATIONS,
                }
                for group in request.groups
            ]
        }
    if api_key == 42:
        return {"results": [{"group_id": group, "error_code": code} for group in request.groups_names]}
    return {
        "error_code": code,
        "members": [],
        "groups": [],
        "assignment": b"",
        "generation_id": -1,
        "protocol_type": None,
        "protocol_name": None,
        "leader": "",
        "member_id": "",
    }


def refused_response(api_key: int, version: int, requests: Sequence[m.Request], code: int):
    """The kio response refusing every part of a request with ``code`` (e.g. 42 for a request the codec could
    read but zkcoord's checks refuse)."""
    return kafka_response(api_key, version, requests, [m.ErrorResponse(error_code=code)] * max(1, len(requests)))


def txn_offset_commit_refusal(version: int, body):
    """TxnOffsetCommit answered 35 UNSUPPORTED_VERSION on every partition: zkcoord's log keeps no transactional
    offsets, and an exactly-once producer must fail rather than believe its offsets were committed."""
    topics = _partition_errors(body, ErrorCode.UNSUPPORTED_VERSION)
    return build(response_schema(28, version), {"throttle_time": 0, "topics": topics})
