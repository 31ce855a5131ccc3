"""Typed, immutable requests and responses of the group APIs, one class per API whatever its version.

Fields carry Kafka's names (the snake_case forms of its JSON schemas, as wire-protocol.md §3 has them), so a
second codec (Kafka's own wire protocol) maps onto the same classes as zkcoord's msgpack one. Version
differences stay in the codecs: the cores see one shape per API. Two fields are zkcoord's own and say so:
OffsetCommit's ``if_greater`` and OffsetFetch's ``log_only`` (docs/protocol.md). JoinGroup also carries the
member's ``client_id`` and ``client_host``, which Kafka takes from the request header and the connection.

Requests are typed as strictly as wire-protocol.md §3 checks them (nullable fields default to None, ints have
Kafka's widths), so converting a request map to its class is also its check. Responses list their fields in
wire order; a codec leaves a response's ``error_message`` out when it is None.
Classes are msgspec Structs: frozen, slotted and cheap to build on the hot path.

Pure: imports only msgspec and zkcoord.model; no IO.
"""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta, Struct

# Kafka's integer widths: a request whose value does not fit is refused (wire-protocol.md §2).
Int8 = Annotated[int, Meta(ge=-(2**7), le=2**7 - 1)]
Int32 = Annotated[int, Meta(ge=-(2**31), le=2**31 - 1)]
Int64 = Annotated[int, Meta(ge=-(2**63), le=2**63 - 1)]

# ---- requests ------------------------------------------------------------------------------------------


class Message(Struct, frozen=True, kw_only=True):
    """Base of every request and response: immutable and built with keywords."""


class ApiVersionsRequest(Message, kw_only=True):
    pass


class MetadataRequest(Message, kw_only=True):
    topics: tuple[str, ...] | None = None  # None: every topic


class FindCoordinatorRequest(Message, kw_only=True):
    key: str
    key_type: Int8


class JoinGroupRequestProtocol(Message, kw_only=True):
    name: str
    metadata: bytes


class JoinGroupRequest(Message, kw_only=True):
    group_id: str | None = None
    session_timeout_ms: Int32
    rebalance_timeout_ms: Int32
    member_id: str
    group_instance_id: str | None = None
    protocol_type: str
    protocols: tuple[JoinGroupRequestProtocol, ...]
    client_id: str = ""
    client_host: str = ""  # as DescribeGroups shows it: "/" and the peer's address
    reason: str | None = None  # why the member (re)joins (KIP-800); logged, not stored


class SyncGroupRequestAssignment(Message, kw_only=True):
    member_id: str
    assignment: bytes


class SyncGroupRequest(Message, kw_only=True):
    group_id: str | None = None
    generation_id: Int32
    member_id: str
    group_instance_id: str | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignments: tuple[SyncGroupRequestAssignment, ...] = ()


class HeartbeatRequest(Message, kw_only=True):
    group_id: str | None = None
    generation_id: Int32
    member_id: str
    group_instance_id: str | None = None


class MemberIdentity(Message, kw_only=True):
    member_id: str
    group_instance_id: str | None = None
    reason: str | None = None


class LeaveGroupRequest(Message, kw_only=True):
    group_id: str | None = None
    members: tuple[MemberIdentity, ...]


class OffsetCommitRequestPartition(Message, kw_only=True):
    partition_index: Int32
    committed_offset: Int64
    committed_leader_epoch: Int32 = -1  # Kafka's; not stored, so OffsetFetch answers -1 (docs/kafka-protocol.md)
    committed_metadata: str | None = None


class OffsetCommitRequestTopic(Message, kw_only=True):
    name: str
    partitions: tuple[OffsetCommitRequestPartition, ...]


class OffsetCommitRequest(Message, kw_only=True):
    group_id: str | None = None
    generation_id: Int32
    member_id: str
    group_instance_id: str | None = None
    retention_time_ms: Int64 | None = None  # None or -1: the server's default
    if_greater: bool = False  # zkcoord's: only where the log has no offset or a smaller one
    topics: tuple[OffsetCommitRequestTopic, ...]


class OffsetFetchRequestTopic(Message, kw_only=True):
    name: str
    partition_indexes: tuple[Int32, ...]


class OffsetFetchRequest(Message, kw_only=True):
    group_id: str | None = None
    topics: tuple[OffsetFetchRequestTopic, ...] | None = None  # None: every partition with an offset
    log_only: bool = False  # zkcoord's: the log's own offsets, never ZooKeeper's
    require_stable: bool = False  # Kafka's (KIP-447); zkcoord has no pending transactional offsets
    member_id: str | None = None  # Kafka's, checked only for KIP-848 groups, which zkcoord does not serve
    member_epoch: Int32 = -1


class DescribeGroupsRequest(Message, kw_only=True):
    groups: tuple[str, ...]
    include_authorized_operations: bool = False


class ListGroupsRequest(Message, kw_only=True):
    states_filter: tuple[str, ...] | None = None  # None or empty: every state
    types_filter: tuple[str, ...] | None = None  # None or empty: every type; zkcoord's groups are all "classic"


class DeleteGroupsRequest(Message, kw_only=True):
    groups_names: tuple[str | None, ...]


class OffsetDeleteRequestPartition(Message, kw_only=True):
    partition_index: Int32


class OffsetDeleteRequestTopic(Message, kw_only=True):
    name: str
    partitions: tuple[OffsetDeleteRequestPartition, ...]


class OffsetDeleteRequest(Message, kw_only=True):
    group_id: str | None = None
    topics: tuple[OffsetDeleteRequestTopic, ...]


class SaslHandshakeRequest(Message, kw_only=True):
    mechanism: str


class SaslAuthenticateRequest(Message, kw_only=True):
    auth_bytes: bytes


GroupRequest = (
    JoinGroupRequest
    | SyncGroupRequest
    | HeartbeatRequest
    | LeaveGroupRequest
    | OffsetCommitRequest
    | OffsetFetchRequest
    | DescribeGroupsRequest
    | ListGroupsRequest
    | DeleteGroupsRequest
    | OffsetDeleteRequest
)
ClusterRequest = ApiVersionsRequest | MetadataRequest | FindCoordinatorRequest
Request = GroupRequest | ClusterRequest
# Answered by the connection itself before any request reaches the coordinator (docs/protocol.md, SASL).
SaslRequest = SaslHandshakeRequest | SaslAuthenticateRequest

# ---- responses -----------------------------------------------------------------------------------------


class ErrorResponse(Message, kw_only=True):
    """A request-level failure with no API-specific fields (a server bug, a request no handler took)."""

    error_code: int
    error_message: str | None = None


class ApiVersion(Message, kw_only=True):
    api: str
    min_version: int
    max_version: int


class ApiVersionsResponse(Message, kw_only=True):
    error_code: int
    apis: tuple[ApiVersion, ...]


class MetadataResponseBroker(Message, kw_only=True):
    node_id: int
    host: str
    port: int


class MetadataResponsePartition(Message, kw_only=True):
    partition_index: int
    error_code: int


class MetadataResponseTopic(Message, kw_only=True):
    name: str
    error_code: int
    partitions: tuple[MetadataResponsePartition, ...]


class MetadataResponse(Message, kw_only=True):
    nodes: tuple[MetadataResponseBroker, ...]
    topics: tuple[MetadataResponseTopic, ...]


class FindCoordinatorResponse(Message, kw_only=True):
    error_code: int
    node_id: int
    host: str
    port: int


class JoinGroupResponseMember(Message, kw_only=True):
    member_id: str
    group_instance_id: str | None
    metadata: bytes


class JoinGroupResponse(Message, kw_only=True):
    error_code: int
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    member_id: str = ""
    members: tuple[JoinGroupResponseMember, ...] = ()
    error_message: str | None = None


class SyncGroupResponse(Message, kw_only=True):
    error_code: int
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


class HeartbeatResponse(Message, kw_only=True):
    error_code: int


class MemberResponse(Message, kw_only=True):
    member_id: str
    group_instance_id: str | None
    error_code: int


class LeaveGroupResponse(Message, kw_only=True):
    error_code: int
    members: tuple[MemberResponse, ...] = ()


class PartitionResult(Message, kw_only=True):
    """One partition's outcome in OffsetCommit's and OffsetDelete's answers."""

    partition_index: int
    error_code: int


class TopicResult(Message, kw_only=True):
    name: str
    partitions: tuple[PartitionResult, ...]


class OffsetCommitResponse(Message, kw_only=True):
    topics: tuple[TopicResult, ...]


class OffsetFetchResponsePartition(Message, kw_only=True):
    partition_index: int
    committed_offset: int  # -1: none
    metadata: str
    error_code: int


class OffsetFetchResponseTopic(Message, kw_only=True):
    name: str
    partitions: tuple[OffsetFetchResponsePartition, ...]


class OffsetFetchResponse(Message, kw_only=True):
    error_code: int
    error_message: str | None = None
    topics: tuple[OffsetFetchResponseTopic, ...] = ()


class DescribedGroupMember(Message, kw_only=True):
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    member_metadata: bytes
    member_assignment: bytes


class DescribedGroup(Message, kw_only=True):
    error_code: int
    group_id: str | None = None
    group_state: str = ""
    protocol_type: str = ""
    protocol_data: str = ""
    members: tuple[DescribedGroupMember, ...] = ()


class DescribeGroupsResponse(Message, kw_only=True):
    groups: tuple[DescribedGroup, ...]


class ListedGroup(Message, kw_only=True):
    group_id: str
    protocol_type: str
    group_state: str


class ListGroupsResponse(Message, kw_only=True):
    error_code: int
    groups: tuple[ListedGroup, ...] = ()


class DeletableGroupResult(Message, kw_only=True):
    group_id: str | None = None
    error_code: int


class DeleteGroupsResponse(Message, kw_only=True):
    results: tuple[DeletableGroupResult, ...]


class OffsetDeleteResponse(Message, kw_only=True):
    error_code: int
    topics: tuple[TopicResult, ...] = ()


class SaslHandshakeResponse(Message, kw_only=True):
    error_code: int
    mechanisms: tuple[str, ...] = ()


class SaslAuthenticateResponse(Message, kw_only=True):
    error_code: int
    error_message: str | None = None
    auth_bytes: bytes = b""
    session_lifetime_ms: int = 0


Response = (
    ErrorResponse
    | ApiVersionsResponse
    | MetadataResponse
    | FindCoordinatorResponse
    | JoinGroupResponse
    | SyncGroupResponse
    | HeartbeatResponse
    | LeaveGroupResponse
    | OffsetCommitResponse
    | OffsetFetchResponse
    | DescribeGroupsResponse
    | ListGroupsResponse
    | DeleteGroupsResponse
    | OffsetDeleteResponse
    | SaslHandshakeResponse
    | SaslAuthenticateResponse
)
