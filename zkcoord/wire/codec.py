"""zkcoord's msgpack protocol onto the typed messages of :mod:`zkcoord.wire.messages`, both ways.

A request map with a valid header becomes its typed request, or the 35/42 response that refuses it, in one
pass (:func:`read_request`): the map is converted to its class, whose types are the checks of
wire-protocol.md §3; only a map that fails is walked again by :func:`zkcoord.wire.requests.check_request`,
for the message naming the field. A typed response becomes the map the wire carries
(:func:`encode_response`): field order as the classes list them, nil where a field is None, and no
``error_message`` unless there is one.

Pure: imports only msgspec, zkcoord.errors and zkcoord.wire; no IO.
"""

from __future__ import annotations

import msgspec

from zkcoord.errors import ErrorCode
from zkcoord.wire import messages as m
from zkcoord.wire.limits import collapsed, id_length_problem
from zkcoord.wire.requests import SUPPORTED_APIS, check_request, refusal_response

REQUEST_TYPES: dict[str, type[m.Request]] = {
    "ApiVersions": m.ApiVersionsRequest,
    "Metadata": m.MetadataRequest,
    "FindCoordinator": m.FindCoordinatorRequest,
    "JoinGroup": m.JoinGroupRequest,
    "SyncGroup": m.SyncGroupRequest,
    "Heartbeat": m.HeartbeatRequest,
    "LeaveGroup": m.LeaveGroupRequest,
    "OffsetCommit": m.OffsetCommitRequest,
    "OffsetFetch": m.OffsetFetchRequest,
    "DescribeGroups": m.DescribeGroupsRequest,
    "ListGroups": m.ListGroupsRequest,
    "DeleteGroups": m.DeleteGroupsRequest,
    "OffsetDelete": m.OffsetDeleteRequest,
    "SaslHandshake": m.SaslHandshakeRequest,
    "SaslAuthenticate": m.SaslAuthenticateRequest,
}
API_NAMES: dict[type[m.Request], str] = {request_type: api for api, request_type in REQUEST_TYPES.items()}
RESPONSE_TYPES: dict[str, type[m.Response]] = {
    "ApiVersions": m.ApiVersionsResponse,
    "Metadata": m.MetadataResponse,
    "FindCoordinator": m.FindCoordinatorResponse,
    "JoinGroup": m.JoinGroupResponse,
    "SyncGroup": m.SyncGroupResponse,
    "Heartbeat": m.HeartbeatResponse,
    "LeaveGroup": m.LeaveGroupResponse,
    "OffsetCommit": m.OffsetCommitResponse,
    "OffsetFetch": m.OffsetFetchResponse,
    "DescribeGroups": m.DescribeGroupsResponse,
    "ListGroups": m.ListGroupsResponse,
    "DeleteGroups": m.DeleteGroupsResponse,
    "OffsetDelete": m.OffsetDeleteResponse,
    "SaslHandshake": m.SaslHandshakeResponse,
    "SaslAuthenticate": m.SaslAuthenticateResponse,
}

# Fields whose nil means the same as their default (wire-protocol §3 allows nil; the class does not need to).
_NIL_MEANS_DEFAULT: dict[str, tuple[str, ...]] = {
    "SyncGroup": ("assignments",),
    "OffsetCommit": ("if_greater",),
    "OffsetFetch": ("log_only",),
}
_BUILTIN_TYPES = (bytes,)  # so that a str is never taken for bytes (msgspec would base64-decode it)
_ID_TYPES = (str, type(None))


def read_request(message: dict, client_host: str = "") -> m.Request | dict:
    """The typed request of a request map with a valid header, or the response map refusing it (35 or 42).

    ``client_host`` is the peer's address, which a JoinGroup keeps for DescribeGroups. Ids longer than
    :mod:`zkcoord.wire.limits` allows are refused with 42; repeated names are collapsed.
    """
    request = _typed(message, client_host)
    if type(request) is dict:
        return request
    problem = id_length_problem(request, message.get("client_id"))
    if problem is not None:
        return refusal_response(message.get("correlation_id"), ErrorCode.INVALID_REQUEST, problem)
    return collapsed(request)


def _typed(message: dict, client_host: str) -> m.Request | dict:
    api, version = message.get("api"), message.get("api_version")
    request_type = REQUEST_TYPES.get(api) if type(api) is str else None
    if (
        request_type is not None
        and type(version) is int
        and SUPPORTED_APIS[api][0] <= version <= SUPPORTED_APIS[api][1]
        and type(message.get("client_id")) in _ID_TYPES
    ):
        prepared = _prepared(api, message, client_host)
        try:
            return msgspec.convert(prepared, request_type, builtin_types=_BUILTIN_TYPES)
        except msgspec.ValidationError:
            pass  # check_request says why, or the map holds keys that are no strings (ignored, as unknown keys are)
    refusal = check_request(message)
    if refusal is not None:
        return refusal
    return msgspec.convert(
        _string_keys_only(_prepared(api, message, client_host)), request_type, builtin_types=_BUILTIN_TYPES
    )


def _prepared(api: str, message: dict, client_host: str) -> dict:
    """``message`` with nil dropped where nil means the default, and a JoinGroup's client id and host."""
    defaulted = _NIL_MEANS_DEFAULT.get(api)
    if defaulted is not None and any(name in message and message[name] is None for name in defaulted):
        message = {name: value for name, value in message.items() if value is not None or name not in defaulted}
    if api == "JoinGroup":
        message = {**message, "client_id": message.get("client_id") or "", "client_host": client_host}
    return message


def _string_keys_only(value: object) -> object:
    if type(value) is dict:
        return {key: _string_keys_only(item) for key, item in value.items() if type(key) is str}
    if type(value) in (list, tuple):
        return [_string_keys_only(item) for item in value]
    return value


def read_response(api: str, fields: dict) -> m.Response | None:
    """The typed response of a response map to an ``api`` request, as a client reads it. An answer that only
    refuses (35, 42, or -1 for a server bug) is an :class:`~zkcoord.wire.messages.ErrorResponse`; a map that is
    neither the response nor a refusal is None, as if nothing had come back."""
    try:
        return msgspec.convert(fields, RESPONSE_TYPES[api], builtin_types=_BUILTIN_TYPES)
    except msgspec.ValidationError:
        pass
    try:
        refusal = msgspec.convert(fields, m.ErrorResponse, builtin_types=_BUILTIN_TYPES)
    except msgspec.ValidationError:
        return None
    return refusal if refusal.error_code != 0 else None


def encode_response(response: m.Response) -> dict:
    """The wire map of a typed response (without the correlation id, which the connection adds)."""
    fields = msgspec.to_builtins(response, builtin_types=_BUILTIN_TYPES)
    if "error_message" in fields and fields["error_message"] is None:
        del fields["error_message"]
    return fields
