"""Kafka's ACL checks for the requests a gateway forwards, made before forwarding, as Kafka 3.9's KafkaApis makes
them; and Kafka's ACL vocabulary (operations, resource types, the operation bits of ``authorized_operations``).

The upstream broker sees only the gateway's own principal, so the gateway checks the client's:
:func:`authorize_forwarded` takes a request frame and ``allowed(operation, resource_type, name)``, bound to the
connection's principal and host, and says what to do (docs/security.md, "Which ACL each request needs"):

- Produce: Write on each topic (and Write on the TransactionalId when the request names one); Fetch: Read on each
  topic (ClusterAction on the Cluster for a replica's fetch); ListOffsets and OffsetForLeaderEpoch: Describe on
  each topic (OffsetForLeaderEpoch also passes with ClusterAction on the Cluster); FindCoordinator for a
  transaction: Describe on each TransactionalId; Metadata: Describe on each topic, and no topic auto-created
  that the principal may not create.
- Kafka answers such a request per topic: the refused topics with 29 (53 for a TransactionalId), the others as
  if alone. The gateway does the same: a request with a refused topic is forwarded *reduced* (re-encoded through
  kio without the refused topics) and the broker's answer gets the refused topics back in the request's order;
  a request refused whole is answered here and nothing is forwarded. Refusing the allowed topics too (one answer
  for the whole request) would be simpler but would lie to the client about topics it may use, and a producer
  would fail batches it was allowed to write. The cost is a decode and an encode, only when something is refused.
- Produce with ``acks=0`` and a refused topic: Kafka appends the rest and closes the connection (the producer
  expects no answer, so the close is how it learns); so does the gateway.
- Fetch v13+ names topics by id, which the gateway cannot check without the broker's id table: with
  authorization on, the listener advertises Fetch up to :data:`FETCH_BY_NAME_MAX` and closes a connection that
  sends a newer one. A fetch session's partitions that the request does not repeat are not checked again
  (Kafka checks them on every fetch): a revoked Read takes effect when the client next names the partition or
  opens a new session.
- A request whose body cannot be read (a version older than kio's) is closed: it cannot be checked.
- Any other forwarded API: :func:`forwarded_operation` says which cluster-wide operation Kafka requires for the
  whole request, or that only super users may send it (the APIs whose checks are per resource: CreateTopics,
  DeleteTopics, the configs APIs, transactions...); a refusal closes the connection.

Metadata's answer is rewritten anyway (:mod:`zkcoord.wire.kafka.rewrite`); :func:`filter_metadata` takes out
what the principal may not see.

Pure: imports only kio and zkcoord.wire.kafka.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple, TypeVar

from zkcoord.wire.kafka.entities import build, to_plain
from zkcoord.wire.kafka.frames import (
    RequestHeader,
    encode_request,
    read_body,
    read_response,
    request_schema,
    response_schema,
)
from zkcoord.wire.kafka.versions import FETCH, FIND_COORDINATOR, METADATA, PRODUCE

# Kafka's ACL names, as its ACL JSON and kafka-acls spell them.
ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = "All", "Read", "Write", "Create", "Delete", "Alter", "Describe"
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS = "ClusterAction", "DescribeConfigs", "AlterConfigs"
IDEMPOTENT_WRITE = "IdempotentWrite"
TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID = "Topic", "Group", "Cluster", "TransactionalId"
CLUSTER_NAME = "kafka-cluster"  # the one Cluster resource's name

Allowed = Callable[[str, str, str], bool]
Entry = TypeVar("Entry")

TOPIC_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED, TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 29, 31, 53
LIST_OFFSETS, INIT_PRODUCER_ID, OFFSET_FOR_LEADER_EPOCH = 2, 22, 23
FETCH_BY_NAME_MAX = 12  # Fetch v13 names topics by id
_METADATA_AUTO_CREATION_FIELD = 4  # the first Metadata version that can ask for no auto-creation
_TRANSACTION_KEY = 1

# Kafka's AclOperation codes, and the operations each resource type supports (AclEntry.supportedOperations).
_OPERATION_CODES = {
    READ: 3,
    WRITE: 4,
    CREATE: 5,
    DELETE: 6,
    ALTER: 7,
    DESCRIBE: 8,
    CLUSTER_ACTION: 9,
    DESCRIBE_CONFIGS: 10,
    ALTER_CONFIGS: 11,
    IDEMPOTENT_WRITE: 12,
}
_SUPPORTED = {
    TOPIC: (READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS),
    GROUP: (READ, DELETE, DESCRIBE),
    CLUSTER: (CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE),
    TRANSACTIONAL_ID: (WRITE, DESCRIBE),
}
_NOT_REQUESTED = -(2**31)  # Kafka's "authorized operations not asked for"


class Denial(NamedTuple):
    """One refused check, for the log: the principal and host are the caller's."""

    operation: str
    resource_type: str
    name: str


def authorized_operations(allowed: Allowed, resource_type: str, name: str) -> int:
    """Kafka's bit field of the operations ``resource_type`` ``name`` supports that ``allowed`` grants (the
    ``authorized_operations`` of DescribeGroups, Metadata and DescribeCluster)."""
    bits = 0
    for operation in _SUPPORTED[resource_type]:
        if allowed(operation, resource_type, name):
            bits |= 1 << _OPERATION_CODES[operation]
    return bits


@dataclass(frozen=True)
class Verdict:
    """What the gateway does instead of forwarding a request unchanged.

    ``answer``: the kio response to send, nothing forwarded. Otherwise the request is forwarded: as
    ``forward`` (a size-prefixed frame with the client's correlation id) instead of the client's frame when set,
    and ``reply``, when set, turns the upstream's answer frame (without its size prefix) into the kio response
    for the client, which the gateway then rewrites as any answer of its API (Metadata's addresses).
    ``close``: close the connection once the answers before it are written (after forwarding ``forward``, if any).
    """

    denials: tuple[Denial, ...] = ()
    answer: object | None = None
    forward: bytes | None = None
    reply: Callable[[bytes], object] | None = None
    close: bool = False


class _Topics(NamedTuple):
    """Where an API keeps its topics: the request's list and name field, the answer's, and the answer's entry
    for a partition refused with ``code`` (partition field, then the other fields)."""

    request_list: str
    request_name: str
    request_partitions: str
    request_partition: str
    response_list: str
    response_name: str
    response_partitions: str
    refused_partition: Callable[[int, int], dict]


_PER_TOPIC = {
    PRODUCE: _Topics(
        "topic_data",
        "name",
        "partition_data",
        "index",
        "responses",
        "name",
        "partition_responses",
        lambda index, code: {
            "index": index,
            "error_code": code,
            "base_offset": -1,
            "log_append_time": None,
            "log_start_offset": -1,
            "record_errors": [],
            "error_message": None,
        },
    ),
    FETCH: _Topics(
        "topics",
        "topic",
        "partitions",
        "partition",
        "responses",
        "topic",
        "partitions",
        lambda index, code: {
            "partition_index": index,
            "error_code": code,
            "high_watermark": -1,
            "last_stable_offset": -1,
            "log_start_offset": -1,
            "aborted_transactions": None,
            "preferred_read_replica": -1,
            "records": None,
        },
    ),
    LIST_OFFSETS: _Topics(
        "topics",
        "name",
        "partitions",
        "partition_index",
        "topics",
        "name",
        "partitions",
        lambda index, code: {"partition_index": index, "error_code": code, "timestamp": -1, "offset": -1},
    ),
    OFFSET_FOR_LEADER_EPOCH: _Topics(
        "topics",
        "topic",
        "partitions",
        "partition",
        "topics",
        "topic",
        "partitions",
        lambda index, code: {"partition": index, "error_code": code, "leader_epoch": -1, "end_offset": -1},
    ),
}
_TOPIC_OPERATION = {PRODUCE: WRITE, FETCH: READ, LIST_OFFSETS: DESCRIBE, OFFSET_FOR_LEADER_EPOCH: DESCRIBE}


def authorize_forwarded(header: RequestHeader, request: bytes, allowed: Allowed) -> Verdict | None:
    """What the gateway does with request frame ``request`` (without its size prefix; ``header`` read from it)
    from the principal behind ``allowed``; None: forward it unchanged."""
    api_key = header.api_key
    check = _BODY_CHECKS.get(api_key)
    if check is None:
        requirement = forwarded_operation(api_key)
        if allowed(requirement.operation, requirement.resource_type, CLUSTER_NAME):
            return None
        return Verdict((Denial(requirement.operation, requirement.resource_type, CLUSTER_NAME),), close=True)
    unreadable = request_schema(api_key, header.api_version) is None
    if unreadable or (api_key == FETCH and header.api_version > FETCH_BY_NAME_MAX):
        return Verdict(close=True)
    return check(header, to_plain(read_body(header, request)), allowed)


def _per_topic(header: RequestHeader, body: dict, allowed: Allowed) -> Verdict | None:
    api_key, spec = header.api_key, _PER_TOPIC[header.api_key]
    topics = body[spec.request_list]
    names = [topic[spec.request_name] for topic in topics]
    everything_refused = _whole_request_refusal(api_key, body, allowed)
    if everything_refused is not None:
        code, denial = everything_refused
        denied, denials = set(range(len(topics))), (denial,)
    else:
        code, operation = TOPIC_AUTHORIZATION_FAILED, _TOPIC_OPERATION[api_key]
        verdicts = {name: allowed(operation, TOPIC, name) for name in dict.fromkeys(names)}
        denied = {index for index, name in enumerate(names) if not verdicts[name]}
        denials = tuple(Denial(operation, TOPIC, name) for name, ok in verdicts.items() if not ok)
    if not denied:
        return None
    refused = {
        index: {
            spec.response_name: topics[index][spec.request_name],
            spec.response_partitions: [
                spec.refused_partition(partition[spec.request_partition], code)
                for partition in topics[index][spec.request_partitions]
            ],
        }
        for index in denied
    }
    kept = [topic for index, topic in enumerate(topics) if index not in denied]
    close = api_key == PRODUCE and body["acks"] == 0
    if not kept:
        if close:
            return Verdict(denials, close=True)
        answer = {
            "throttle_time": 0,
            "error_code": 0,
            "session_id": 0,
            spec.response_list: [refused[i] for i in sorted(refused)],
        }
        return Verdict(denials, answer=build(response_schema(api_key, header.api_version), answer))

    def reply(frame: bytes):
        _, upstream = read_response(api_key, header.api_version, frame)
        plain = to_plain(upstream)
        if plain.get("error_code"):  # a Fetch refused whole (a session error): the refusals would not be read
            return upstream
        answered = plain[spec.response_list]
        plain[spec.response_list] = in_request_order(names, refused, answered, lambda topic: topic[spec.response_name])
        return build(type(upstream), plain)

    forward = _reencoded(header, {**body, spec.request_list: kept})
    return Verdict(denials, forward=forward, reply=None if close else reply, close=close)


def _whole_request_refusal(api_key: int, body: dict, allowed: Allowed) -> tuple[int, Denial] | None:
    """The code and denial when Kafka refuses every partition of the request at once, or None."""
    transactional_id = body.get("transactional_id") if api_key == PRODUCE else None
    # Kafka checks this only when the batches are transactional; a producer with an id sends no others.
    if transactional_id is not None and not allowed(WRITE, TRANSACTIONAL_ID, transactional_id):
        return TRANSACTIONAL_ID_AUTHORIZATION_FAILED, Denial(WRITE, TRANSACTIONAL_ID, transactional_id)
    follower = api_key == FETCH and body.get("replica_id", -1) >= 0
    if follower and not allowed(CLUSTER_ACTION, CLUSTER, CLUSTER_NAME):
        return TOPIC_AUTHORIZATION_FAILED, Denial(CLUSTER_ACTION, CLUSTER, CLUSTER_NAME)
    return None


def in_request_order(
    names: Sequence[str], refused: Mapping[int, Entry], answered: Iterable[Entry], name_of: Callable[[Entry], str]
) -> tuple[Entry, ...]:
    """``answered`` (the answers to the request's entries not in ``refused``) and ``refused`` (by the entry's
    index in ``names``, the request's entry names) in the request's order; answered entries the request did not
    name go last."""
    waiting: dict[str, collections.deque] = collections.defaultdict(collections.deque)
    for entry in answered:
        waiting[name_of(entry)].append(entry)
    spliced = []
    for index, name in enumerate(names):
        if index in refused:
            spliced.append(refused[index])
        elif waiting[name]:
            spliced.append(waiting[name].popleft())
    spliced.extend(entry for left in waiting.values() for entry in left)
    return tuple(spliced)


def _reencoded(header: RequestHeader, plain: dict, version: int | None = None) -> bytes:
    """The size-prefixed request ``plain`` of the client's API, at its version unless told."""
    schema = request_schema(header.api_key, header.api_version if version is None else version)
    return encode_request(header.correlation_id, header.client_id, build(schema, plain))


# ---- Metadata ----------------------------------------------------------------------------------------------


def _metadata(header: RequestHeader, body: dict, allowed: Allowed) -> Verdict:
    """Metadata is always forwarded and its answer filtered. A request that would auto-create a topic the
    principal may not create goes without auto-creation: v4+ say so themselves; v0-v3, where auto-creation is
    implicit, go as v4 and the answer is built back at the client's version."""
    version = header.api_version
    requested = body.get("topics")
    requested_all = requested is None or (version == 0 and not requested)
    names = [] if requested_all else [topic["name"] for topic in requested]
    refused = [name for name in dict.fromkeys(names) if not allowed(DESCRIBE, TOPIC, name)]
    may_create = requested_all or allowed(CREATE, CLUSTER, CLUSTER_NAME)
    uncreatable = not may_create and any(not allowed(CREATE, TOPIC, name) for name in names)
    sent_version, forward = version, None
    if uncreatable and body.get("allow_auto_topic_creation", True):
        sent_version = max(version, _METADATA_AUTO_CREATION_FIELD)
        forward = _reencoded(header, {**body, "allow_auto_topic_creation": False}, sent_version)
    include_operations = body.get("include_topic_authorized_operations", False)

    def reply(frame: bytes):
        _, upstream = read_response(METADATA, sent_version, frame)
        filtered = filter_metadata(upstream, requested_all, allowed, topic_operations=include_operations)
        return filtered if sent_version == version else build(response_schema(METADATA, version), to_plain(filtered))

    return Verdict(tuple(Denial(DESCRIBE, TOPIC, name) for name in refused), forward=forward, reply=reply)


def filter_metadata(response, requested_all: bool, allowed: Allowed, topic_operations: bool = False):
    """Metadata answer ``response`` (kio) as the principal behind ``allowed`` may see it: a list-all answer without
    the topics it may not describe, an explicit request's with those marked 29 and no partitions (whether they
    exist is not disclosed). With ``topic_operations`` (Metadata v8+'s include_topic_authorized_operations) each
    topic's authorized operations are the principal's; the cluster's, when asked, are never the gateway's own."""
    plain = to_plain(response)
    topics = []
    for topic in plain["topics"]:
        if allowed(DESCRIBE, TOPIC, topic["name"]):
            if topic_operations:
                topic = {**topic, "topic_authorized_operations": authorized_operations(allowed, TOPIC, topic["name"])}
            topics.append(topic)
        elif not requested_all:
            topics.append(_refused_topic(topic["name"]))
    plain["topics"] = topics
    if "cluster_authorized_operations" in plain and plain["cluster_authorized_operations"] != _NOT_REQUESTED:
        plain["cluster_authorized_operations"] = (
            authorized_operations(allowed, CLUSTER, CLUSTER_NAME) if allowed(DESCRIBE, CLUSTER, CLUSTER_NAME) else 0
        )
    return build(type(response), plain)


def _refused_topic(name: str) -> dict:
    return {
        "name": name,
        "error_code": TOPIC_AUTHORIZATION_FAILED,
        "topic_id": None,
        "is_internal": False,
        "partitions": [],
    }


# ---- FindCoordinator for transactions ---------------------------------------------------------------------------


def _transaction_coordinator(header: RequestHeader, body: dict, allowed: Allowed) -> Verdict | None:
    """Describe on each TransactionalId looked up (group keys are served, not forwarded)."""
    if body.get("key_type", 0) != _TRANSACTION_KEY:
        return None
    keys = body["coordinator_keys"] if header.api_version >= 4 else [body["key"]]
    verdicts = {key: allowed(DESCRIBE, TRANSACTIONAL_ID, key) for key in dict.fromkeys(keys)}
    denied = {index: key for index, key in enumerate(keys) if not verdicts[key]}
    if not denied:
        return None
    denials = tuple(Denial(DESCRIBE, TRANSACTIONAL_ID, key) for key, ok in verdicts.items() if not ok)
    schema = response_schema(FIND_COORDINATOR, header.api_version)
    refused = {index: _refused_coordinator(key) for index, key in denied.items()}
    if header.api_version < 4:
        return Verdict(denials, answer=build(schema, {"throttle_time": 0, **refused[0]}))
    kept = [key for index, key in enumerate(keys) if index not in denied]
    if not kept:
        return Verdict(denials, answer=build(schema, {"throttle_time": 0, "coordinators": list(refused.values())}))

    def reply(frame: bytes):
        _, upstream = read_response(FIND_COORDINATOR, header.api_version, frame)
        plain = to_plain(upstream)
        plain["coordinators"] = in_request_order(keys, refused, plain["coordinators"], lambda each: each["key"])
        return build(schema, plain)

    return Verdict(denials, forward=_reencoded(header, {**body, "coordinator_keys": kept}), reply=reply)


def _refused_coordinator(key: str) -> dict:
    return {
        "key": key,
        "error_code": TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        "error_message": None,
        "node_id": -1,
        "host": "",
        "port": -1,
    }


# ---- InitProducerId ------------------------------------------------------------------------------------------------


def _init_producer_id(header: RequestHeader, body: dict, allowed: Allowed) -> Verdict | None:
    """Write on the TransactionalId for a transactional producer. An idempotent one passes: Kafka asks
    IdempotentWrite on the Cluster or Write on any topic, and ``allowed`` cannot ask "any"; a producer id grants
    nothing by itself, since every Produce is checked per topic."""
    transactional_id = body.get("transactional_id")
    if transactional_id is None or allowed(WRITE, TRANSACTIONAL_ID, transactional_id):
        return None
    answer = {
        "throttle_time": 0,
        "error_code": TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        "producer_id": -1,
        "producer_epoch": -1,
    }
    schema = response_schema(INIT_PRODUCER_ID, header.api_version)
    return Verdict((Denial(WRITE, TRANSACTIONAL_ID, transactional_id),), answer=build(schema, answer))


# ---- everything else forwarded ------------------------------------------------------------------------------------


class Requirement(NamedTuple):
    """A cluster-wide operation Kafka requires for a whole request."""

    operation: str
    resource_type: str = CLUSTER


# The forwarded APIs whose Kafka check is one operation on the Cluster for the whole request.
_CLUSTER_WIDE = {
    29: Requirement(DESCRIBE),  # DescribeAcls
    30: Requirement(ALTER),  # CreateAcls
    31: Requirement(ALTER),  # DeleteAcls
    34: Requirement(ALTER),  # AlterReplicaLogDirs
    35: Requirement(DESCRIBE),  # DescribeLogDirs
    43: Requirement(ALTER),  # ElectLeaders
    45: Requirement(ALTER),  # AlterPartitionReassignments
    46: Requirement(DESCRIBE),  # ListPartitionReassignments
    48: Requirement(DESCRIBE_CONFIGS),  # DescribeClientQuotas
    49: Requirement(ALTER_CONFIGS),  # AlterClientQuotas
    50: Requirement(DESCRIBE),  # DescribeUserScramCredentials
    51: Requirement(ALTER),  # AlterUserScramCredentials
    57: Requirement(ALTER),  # UpdateFeatures
    # Kafka checks nothing unless the cluster's authorized operations are asked for; the broker would answer them
    # for the gateway's principal, so the gateway asks what Kafka asks then.
    60: Requirement(DESCRIBE),  # DescribeCluster
    **{key: Requirement(CLUSTER_ACTION) for key in (4, 5, 6, 7, 27, 56, 67)},  # between brokers and controllers
}
# Kafka's ALL matches an ACL granting ALL (and super users) only: a cluster administrator's.
_CLUSTER_ADMIN = Requirement(ALL)


def forwarded_operation(api_key: int) -> Requirement:
    """The operation on the Cluster that Kafka requires for a whole request of ``api_key`` that the gateway
    forwards and does not check per topic; All on the Cluster (super users and cluster administrators) where
    Kafka's check is per resource named in the body (CreateTopics: Create; DeleteTopics, DeleteRecords: Delete;
    CreatePartitions: Alter; the configs APIs: DescribeConfigs/AlterConfigs per resource; AddPartitionsToTxn,
    AddOffsetsToTxn, EndTxn: Write on the TransactionalId; the delegation-token APIs...), which the gateway does
    not decode."""
    return _CLUSTER_WIDE.get(api_key, _CLUSTER_ADMIN)


_BODY_CHECKS: dict[int, Callable[[RequestHeader, dict, Allowed], Verdict | None]] = {
    **dict.fromkeys(_PER_TOPIC, _per_topic),
    METADATA: _metadata,
    FIND_COORDINATOR: _transaction_coordinator,
    INIT_PRODUCER_ID: _init_producer_id,
}
