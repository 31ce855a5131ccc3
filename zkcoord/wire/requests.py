"""Request schemas of the wire protocol (wire-protocol.md §2, §3) and the checks made before any handler runs.

A request that got through zkcoord.wire.framing has a valid header; this module says whether its api and
api_version are served (else 35 UNSUPPORTED_VERSION) and whether its body has every field with the right type
(else 42 INVALID_REQUEST naming the field). Nullability follows Kafka's schemas, with one difference: group ids
may be nil here, because the coordinator answers 24 INVALID_GROUP_ID for nil and "" itself
(group-coordinator.md §0.4). An absent key means nil; unknown keys are ignored. zkcoord.wire.codec types a
request by the same rules in one pass and asks :func:`check_request` only for the message of a refusal.

Pure: imports only zkcoord.errors; no IO, no gevent.
"""

from collections.abc import Mapping
from dataclasses import dataclass

from zkcoord.errors import ErrorCode


@dataclass(frozen=True, slots=True)
class Scalar:
    """A msgpack scalar: ``str``, ``bin``, ``bool`` or an int of Kafka's width (``int8``, ``int32``, ``int64``)."""

    name: str


@dataclass(frozen=True, slots=True)
class Array:
    """A msgpack array whose items all have one type."""

    items: "Scalar | Array | Struct"
    items_nullable: bool = False


@dataclass(frozen=True, slots=True)
class Field:
    name: str
    type: "Scalar | Array | Struct"
    nullable: bool = False


@dataclass(frozen=True, slots=True)
class Struct:
    """A msgpack map with these fields (and possibly others, which are ignored)."""

    fields: tuple[Field, ...]


FieldType = Scalar | Array | Struct

STR = Scalar("str")
BIN = Scalar("bin")
BOOL = Scalar("bool")
INT8 = Scalar("int8")
INT32 = Scalar("int32")
INT64 = Scalar("int64")

_INT_RANGES = {"int8": 2**7, "int32": 2**31, "int64": 2**63}


def _group_id(name: str = "group_id") -> Field:
    # Kafka's schemas say non-null; nil and "" both reach the coordinator, which answers 24 for them.
    return Field(name, STR, nullable=True)


_MEMBER_ID = Field("member_id", STR)
_GROUP_INSTANCE_ID = Field("group_instance_id", STR, nullable=True)
_GENERATION_ID = Field("generation_id", INT32)

REQUEST_SCHEMAS: dict[str, Struct] = {
    "ApiVersions": Struct(()),
    "Metadata": Struct((Field("topics", Array(STR), nullable=True),)),
    "FindCoordinator": Struct((Field("key", STR), Field("key_type", INT8))),
    "JoinGroup": Struct(
        (
            _group_id(),
            Field("session_timeout_ms", INT32),
            Field("rebalance_timeout_ms", INT32),
            _MEMBER_ID,
            _GROUP_INSTANCE_ID,
            Field("protocol_type", STR),
            Field("protocols", Array(Struct((Field("name", STR), Field("metadata", BIN))))),
        )
    ),
    "SyncGroup": Struct(
        (
            _group_id(),
            _GENERATION_ID,
            _MEMBER_ID,
            _GROUP_INSTANCE_ID,
            Field("protocol_type", STR, nullable=True),
            Field("protocol_name", STR, nullable=True),
            # "leader only" (wire-protocol §3): a follower may leave it out.
            Field("assignments", Array(Struct((_MEMBER_ID, Field("assignment", BIN)))), nullable=True),
        )
    ),
    "Heartbeat": Struct((_group_id(), _GENERATION_ID, _MEMBER_ID, _GROUP_INSTANCE_ID)),
    "LeaveGroup": Struct((_group_id(), Field("members", Array(Struct((_MEMBER_ID, _GROUP_INSTANCE_ID)))))),
    "OffsetCommit": Struct(
        (
            _group_id(),
            _GENERATION_ID,
            _MEMBER_ID,
            _GROUP_INSTANCE_ID,
            Field("retention_time_ms", INT64, nullable=True),  # absent: -1, the server's default
            # Not in wire-protocol.md §3: conditional commit for backfills (docs/protocol.md); absent: false.
            Field("if_greater", BOOL, nullable=True),
            Field(
                "topics",
                Array(
                    Struct(
                        (
                            Field("name", STR),
                            Field(
                                "partitions",
                                Array(
                                    Struct(
                                        (
                                            Field("partition_index", INT32),
                                            Field("committed_offset", INT64),
                                            Field("committed_metadata", STR, nullable=True),
                                        )
                                    )
                                ),
                            ),
                        )
                    )
                ),
            ),
        )
    ),
    "OffsetFetch": Struct(
        (
            _group_id(),
            Field(
                "topics",
                Array(Struct((Field("name", STR), Field("partition_indexes", Array(INT32))))),
                nullable=True,
            ),
            # Not in wire-protocol.md §3: the log's own offsets for migration tools (docs/protocol.md).
            Field("log_only", BOOL, nullable=True),
        )
    ),
    "DescribeGroups": Struct((Field("groups", Array(STR)),)),
    "ListGroups": Struct((Field("states_filter", Array(STR), nullable=True),)),  # nil or empty: all (§7.8)
    "DeleteGroups": Struct((Field("groups_names", Array(STR, items_nullable=True)),)),
    # Not in wire-protocol.md §3: Kafka's OffsetDelete v0 (KIP-496), added for admin tools (docs/protocol.md).
    "OffsetDelete": Struct(
        (
            _group_id(),
            Field(
                "topics",
                Array(
                    Struct(
                        (
                            Field("name", STR),
                            Field("partitions", Array(Struct((Field("partition_index", INT32),)))),
                        )
                    )
                ),
            ),
        )
    ),
    # Not in wire-protocol.md §3: Kafka's SASL pair, answered by the connection itself (docs/protocol.md).
    "SaslHandshake": Struct((Field("mechanism", STR),)),
    "SaslAuthenticate": Struct((Field("auth_bytes", BIN),)),
}

SUPPORTED_APIS: dict[str, tuple[int, int]] = dict.fromkeys(REQUEST_SCHEMAS, (0, 0))


def supported_api_versions() -> list[dict]:
    """``apis`` as ApiVersions answers it: ``[{api, min_version, max_version}]``."""
    return [{"api": api, "min_version": low, "max_version": high} for api, (low, high) in SUPPORTED_APIS.items()]


# ---- checking ------------------------------------------------------------------------------------------


def _wire_type(value: object) -> str:
    if value is None:
        return "nil"
    if type(value) is int:
        return f"int {value}"
    names = {str: "str", bytes: "bin", bool: "bool", float: "float", tuple: "array", list: "array", dict: "map"}
    return names.get(type(value), "ext")


def _expected(field_type: FieldType, nullable: bool) -> str:
    if isinstance(field_type, Scalar):
        name = field_type.name
    elif isinstance(field_type, Array):
        name = "array"
    else:
        name = "map"
    return f"{name} or nil" if nullable else name


def _scalar_ok(value: object, scalar: Scalar) -> bool:
    if scalar.name == "str":
        return type(value) is str
    if scalar.name == "bin":
        return type(value) is bytes
    if scalar.name == "bool":
        return type(value) is bool
    bound = _INT_RANGES[scalar.name]
    return type(value) is int and -bound <= value < bound


def _problem(value: object, field_type: FieldType, nullable: bool, path: str) -> str | None:
    """What is wrong with ``value`` at ``path``, or None when it fits."""
    if value is None:
        return None if nullable else f"{path} must be {_expected(field_type, nullable)}, got nil"
    if isinstance(field_type, Scalar):
        fits = _scalar_ok(value, field_type)
    elif isinstance(field_type, Array):
        fits = type(value) in (tuple, list)
    else:
        fits = type(value) is dict
    if not fits:
        return f"{path} must be {_expected(field_type, nullable)}, got {_wire_type(value)}"
    if isinstance(field_type, Array):
        for index, item in enumerate(value):
            problem = _problem(item, field_type.items, field_type.items_nullable, f"{path}[{index}]")
            if problem is not None:
                return problem
    elif isinstance(field_type, Struct):
        return _struct_problem(value, field_type, path)
    return None


def _struct_problem(message: dict, struct: Struct, path: str) -> str | None:
    for field in struct.fields:
        problem = _problem(message.get(field.name), field.type, field.nullable, f"{path}.{field.name}")
        if problem is not None:
            return problem
    return None


def refusal_response(correlation_id: object, error_code: ErrorCode, message: str) -> dict:
    """The answer refusing a request before any handler: its error code and why."""
    return {"correlation_id": correlation_id, "error_code": int(error_code), "error_message": message}


def check_request(message: dict) -> dict | None:
    """None when ``message`` (a map with a valid header) may go to a handler; else the response to send.

    35 UNSUPPORTED_VERSION for an api or api_version not served (ApiVersions also gets ``apis``, as in Kafka, so
    a client can pick a version); 42 INVALID_REQUEST naming the first field that is nil or of the wrong type.
    """
    correlation_id = message.get("correlation_id")
    api = message.get("api")
    version = message.get("api_version")
    if type(api) is not str or api not in SUPPORTED_APIS:
        shown = repr(api) if type(api) is str else _wire_type(api)
        return refusal_response(correlation_id, ErrorCode.UNSUPPORTED_VERSION, f"api {shown} is not supported")
    low, high = SUPPORTED_APIS[api]
    if type(version) is not int or not low <= version <= high:
        response = refusal_response(
            correlation_id,
            ErrorCode.UNSUPPORTED_VERSION,
            f"{api} api_version {version!r} is not supported (supported: {low} to {high})",
        )
        if api == "ApiVersions":
            response["apis"] = supported_api_versions()
        return response
    client_id = message.get("client_id")
    if client_id is not None and type(client_id) is not str:
        return refusal_response(
            correlation_id, ErrorCode.INVALID_REQUEST, f"client_id must be str or nil, got {_wire_type(client_id)}"
        )
    problem = _struct_problem(message, REQUEST_SCHEMAS[api], api)
    if problem is not None:
        return refusal_response(correlation_id, ErrorCode.INVALID_REQUEST, problem)
    return None


def simple_offset_commit(group_id: str, offsets: Mapping[tuple[str, int], int], **fields) -> dict:
    """The fields of a simple OffsetCommit: generation -1 and no member, as 0.8.2's v1 commit and an admin's
    commit send it; ``offsets`` maps (topic, partition) to the offset, committed with metadata ""."""
    topics: dict[str, list[dict]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        topics.setdefault(topic, []).append(
            {"partition_index": partition, "committed_offset": offset, "committed_metadata": ""}
        )
    return {
        "group_id": group_id,
        "generation_id": -1,
        "member_id": "",
        "group_instance_id": None,
        "retention_time_ms": -1,
        "topics": [{"name": name, "partitions": partitions} for name, partitions in topics.items()],
        **fields,
    }


def partition_error_codes(response: dict) -> dict[tuple[str, int], int]:
    """(topic, partition) → error code of an OffsetCommit response."""
    return {
        (topic["name"], entry["partition_index"]): entry.get("error_code", 0)
        for topic in response.get("topics") or []
        for entry in topic.get("partitions") or []
    }
