"""The gateway's own ACL checks on the requests it forwards, made before forwarding as Kafka 3.9's KafkaApis
makes them: the upstream broker sees only the gateway's principal. :func:`authorize_forwarded` takes a request
frame and ``allowed(operation, resource_type, name)``, bound to the connection's principal and host, and says
what to do (docs/security.md, "Which ACL each request needs"). The data APIs and Metadata are checked here, a
transactional producer's requests in :mod:`~zkcoord.wire.kafka.txn_acl`, the admin ones in
:mod:`~zkcoord.wire.kafka.admin_acl`.

- Produce: Write on each topic (and Write on the TransactionalId when the request names one); Fetch: Read on each
  topic (ClusterAction on the Cluster for a replica's fetch); ListOffsets and OffsetForLeaderEpoch: Describe on
  each topic; Metadata: Describe on each topic, and no topic auto-created that the principal may not create.
- Kafka answers such a request per topic: the refused topics with 29, the others as if alone. The gateway does
  the same: a request with a refused topic is forwarded *reduced* (re-encoded through kio without the refused
  topics) and the broker's answer gets the refused topics back in the request's order; a request refused whole
  is answered here and nothing is forwarded. Refusing the allowed topics too (one answer for the whole request)
  would be simpler but would lie to the client about topics it may use, and a producer would fail batches it was
  allowed to write. The cost, a decode and an encode, is paid only when something is refused.
- Produce with ``acks=0`` and a refused topic: Kafka appends the rest and closes the connection (the producer
  expects no answer, so the close is how it learns); so does the gateway.
- Fetch v13+ names topics by id, which the gateway cannot check without the broker's id table: with
  authorization on, the listener advertises Fetch up to :data:`FETCH_BY_NAME_MAX` (:data:`AUTHORIZED_CAPS`) and
  a newer one closes its connection. No fetch session is let exist (see :func:`_fetch`), so every fetch names
  every partition it reads and each is checked.
- A request whose body cannot be read (a version older than kio's) cannot be checked: its connection is closed.
- Any other forwarded API needs what :func:`~zkcoord.wire.kafka.admin_acl.forwarded_operation` says; a refusal
  closes the connection.

Metadata's answer is rewritten anyway (:mod:`zkcoord.wire.kafka.rewrite`); :func:`filter_metadata` takes out
what the principal may not see.

Pure: imports only kio and zkcoord.wire.kafka.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from zkcoord.wire.kafka import admin_acl, txn_acl
from zkcoord.wire.kafka.acl import (
    CLUSTER,
    CLUSTER_ACTION,
    CLUSTER_NAME,
    CREATE,
    DESCRIBE,
    NOT_REQUESTED,
    READ,
    TOPIC,
    TOPIC_AUTHORIZATION_FAILED,
    TRANSACTIONAL_ID,
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    WRITE,
    Allowed,
    Denial,
    Verdict,
    authorized_operations,
    in_request_order,
    reencoded,
)
from zkcoord.wire.kafka.entities import build, to_plain
from zkcoord.wire.kafka.frames import RequestHeader, read_body, read_response, request_schema, response_schema
from zkcoord.wire.kafka.versions import FETCH, FORWARD_CAPS, METADATA, PRODUCE

LIST_OFFSETS, OFFSET_FOR_LEADER_EPOCH = 2, 23
FETCH_BY_NAME_MAX = 12  # Fetch v13 names topics by id
# The forwarded versions' caps with authorization on (versions.advertised's ``caps``).
AUTHORIZED_CAPS = {**FORWARD_CAPS, FETCH: min(FORWARD_CAPS[FETCH], FETCH_BY_NAME_MAX)}
_METADATA_AUTO_CREATION_FIELD = 4  # the first Metadata version that can ask for no auto-creation


def authorize_forwarded(header: RequestHeader, request: bytes | memoryview, allowed: Allowed) -> Verdict | None:
    """What the gateway does with request frame ``request`` (without its size prefix; ``header`` read from it)
    from the principal behind ``allowed``; None: forward it unchanged."""
    api_key = header.api_key
    check = _BODY_CHECKS.get(api_key)
    if check is None:
        requirement = admin_acl.forwarded_operation(api_key)
        if requirement is None or allowed(requirement.operation, requirement.resource_type, CLUSTER_NAME):
            return None
        return Verdict((Denial(requirement.operation, requirement.resource_type, CLUSTER_NAME),), close=True)
    unreadable = request_schema(api_key, header.api_version) is None
    if unreadable or (api_key == FETCH and header.api_version > FETCH_BY_NAME_MAX):
        return Verdict(close=True)
    return check(header, to_plain(read_body(header, request)), allowed)


# ---- the data APIs ---------------------------------------------------------------------------------------------


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

    forward = reencoded(header, {**body, spec.request_list: kept})
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


# ---- Metadata ----------------------------------------------------------------------------------------------


def _metadata(header: RequestHeader, body: dict, allowed: Allowed) -> Verdict:
    """Metadata is always forwarded and its answer filtered. Auto-creation is left to the broker only when the
    principal may describe and create every topic named (Kafka creates those it may and answers 29 for the
    others; the gateway cannot tell which exist before asking). Otherwise the request goes without it: v4+ say
    so themselves; v0-v3, where auto-creation is implicit, go as v4 and the answer is built back at the client's
    version."""
    version = header.api_version
    requested = body.get("topics")
    requested_all = requested is None or (version == 0 and not requested)
    named = [] if requested_all else [topic["name"] for topic in requested]
    by_id = None in named  # v12+ may name topics by id; the broker resolves them
    describable = {name: allowed(DESCRIBE, TOPIC, name) for name in dict.fromkeys(named) if name is not None}
    cluster_create = requested_all or allowed(CREATE, CLUSTER, CLUSTER_NAME)
    creatable = all(ok and (cluster_create or allowed(CREATE, TOPIC, name)) for name, ok in describable.items())
    sent_version, forward = version, None
    if not creatable and body.get("allow_auto_topic_creation", True):
        sent_version = max(version, _METADATA_AUTO_CREATION_FIELD)
        forward = reencoded(header, {**body, "allow_auto_topic_creation": False}, sent_version)
    include_operations = body.get("include_topic_authorized_operations", False)

    def reply(frame: bytes):
        _, upstream = read_response(METADATA, sent_version, frame)
        filtered = filter_metadata(upstream, requested_all, allowed, include_operations, by_id)
        return filtered if sent_version == version else build(response_schema(METADATA, version), to_plain(filtered))

    denials = tuple(Denial(DESCRIBE, TOPIC, name) for name, ok in describable.items() if not ok)
    return Verdict(denials, forward=forward, reply=reply)


def filter_metadata(
    response, requested_all: bool, allowed: Allowed, topic_operations: bool = False, by_id: bool = False
):
    """Metadata answer ``response`` (kio) as the principal behind ``allowed`` may see it: a list-all answer without
    the topics it may not describe, an explicit request's with those marked 29 and no partitions (a topic named
    by id keeps its id and loses its name, as Kafka answers). With ``topic_operations`` (Metadata v8+'s
    include_topic_authorized_operations) each topic's authorized operations are the principal's; the cluster's,
    when asked, are never the gateway's own."""
    plain = to_plain(response)
    topics = []
    for topic in plain["topics"]:
        if topic["name"] is not None and allowed(DESCRIBE, TOPIC, topic["name"]):
            if topic_operations:
                topic = {**topic, "topic_authorized_operations": authorized_operations(allowed, TOPIC, topic["name"])}
            topics.append(topic)
        elif not requested_all:
            topics.append(_refused_topic(topic, by_id))
    plain["topics"] = topics
    if "cluster_authorized_operations" in plain and plain["cluster_authorized_operations"] != NOT_REQUESTED:
        plain["cluster_authorized_operations"] = (
            authorized_operations(allowed, CLUSTER, CLUSTER_NAME) if allowed(DESCRIBE, CLUSTER, CLUSTER_NAME) else 0
        )
    return build(type(response), plain)


def _refused_topic(topic: dict, by_id: bool) -> dict:
    """Kafka's answer for a topic not describable: nothing about it but what the request said."""
    return {
        "name": None if by_id else topic["name"],
        "topic_id": topic.get("topic_id") if by_id else None,
        "error_code": TOPIC_AUTHORIZATION_FAILED,
        "is_internal": False,
        "partitions": [],
    }


def _fetch(header: RequestHeader, body: dict, allowed: Allowed) -> Verdict | None:
    """Fetch's topics as the other data APIs', and no fetch session (KIP-227): a session is not bound to a principal,
    and the broker re-checks its partitions against the gateway's principal only, so a client that guessed another's
    session id would read what it may not. A full fetch asking for a new session (epoch 0) goes as a sessionless one
    (epoch -1): the broker answers session id 0 and the client goes on with full fetches, each checked here. A fetch
    naming a session, which the gateway never let exist, closes the connection."""
    if body.get("session_id", 0) != 0:
        return Verdict(close=True)
    if body.get("session_epoch", -1) != 0:
        return _per_topic(header, body, allowed)
    sessionless = {**body, "session_epoch": -1}
    verdict = _per_topic(header, sessionless, allowed)
    return Verdict(forward=reencoded(header, sessionless)) if verdict is None else verdict


_BODY_CHECKS: dict[int, Callable[[RequestHeader, dict, Allowed], Verdict | None]] = {
    **dict.fromkeys(_PER_TOPIC, _per_topic),
    FETCH: _fetch,
    METADATA: _metadata,
    **txn_acl.CHECKS,
    **admin_acl.CHECKS,
}
