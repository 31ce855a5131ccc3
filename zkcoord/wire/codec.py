"""zkcoord's msgpack protocol onto the typed messages of :mod:`zkcoord.wire.messages`, both ways.

A request map that passed :func:`zkcoord.wire.requests.check_request` becomes its typed request
(:func:`decode_request`); a typed response becomes the map the wire carries (:func:`encode_response`). The
maps are exactly those of wire-protocol.md §3: field order as the classes list them, nil where a field is
None, and no ``error_message`` unless there is one.

Pure: imports only msgspec and zkcoord.wire; no IO.
"""

from __future__ import annotations

import msgspec

from zkcoord.wire import messages as m

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
}
API_NAMES: dict[type[m.Request], str] = {request_type: api for api, request_type in REQUEST_TYPES.items()}

# Fields whose nil means the same as their default (wire-protocol §3 allows nil; the class does not need to).
_NIL_MEANS_DEFAULT: dict[str, tuple[str, ...]] = {
    "SyncGroup": ("assignments",),
    "OffsetCommit": ("if_greater",),
    "OffsetFetch": ("log_only",),
}
_BUILTIN_TYPES = (bytes,)


def decode_request(message: dict, client_host: str = "") -> m.Request:
    """The typed request of a checked request map; ``client_host`` is the peer's address (JoinGroup keeps it)."""
    api = message["api"]
    defaulted = _NIL_MEANS_DEFAULT.get(api)
    if defaulted is not None and any(message.get(name) is None for name in defaulted):
        message = {name: value for name, value in message.items() if value is not None or name not in defaulted}
    if api == "JoinGroup":
        message = {**message, "client_id": message.get("client_id") or "", "client_host": client_host}
    try:
        return msgspec.convert(message, REQUEST_TYPES[api])
    except msgspec.ValidationError:
        # Unknown keys are ignored, even keys that are no strings (a map inside a key): drop those and retry.
        return msgspec.convert(_string_keys_only(message), REQUEST_TYPES[api])


def _string_keys_only(value: object) -> object:
    if type(value) is dict:
        return {key: _string_keys_only(item) for key, item in value.items() if type(key) is str}
    if type(value) in (list, tuple):
        return [_string_keys_only(item) for item in value]
    return value


def encode_response(response: m.Response) -> dict:
    """The wire map of a typed response (without the correlation id, which the connection adds)."""
    fields = msgspec.to_builtins(response, builtin_types=_BUILTIN_TYPES)
    if "error_message" in fields and fields["error_message"] is None:
        del fields["error_message"]
    return fields
