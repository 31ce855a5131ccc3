"""Kafka's ACL checks of the forwarded requests a transactional producer sends, as Kafka 3.9's KafkaApis makes
them: Write on its TransactionalId for InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn and EndTxn (with Write
on each topic added, and Read on the group whose offsets join); Describe on each TransactionalId looked up with
FindCoordinator. Each check takes a request's plain body (:func:`zkcoord.wire.kafka.entities.to_plain`); refusals
are answered by the gateway and nothing is forwarded, except a partly refused FindCoordinator batch, whose allowed
keys are. :data:`CHECKS` is :func:`zkcoord.wire.kafka.data_acl.authorize_forwarded`'s for these APIs.

Pure: imports only kio and zkcoord.wire.kafka.
"""

from __future__ import annotations

from collections.abc import Callable

from zkcoord.wire.kafka.acl import (
    CLUSTER,
    CLUSTER_ACTION,
    CLUSTER_NAME,
    DESCRIBE,
    GROUP,
    GROUP_AUTHORIZATION_FAILED,
    READ,
    TOPIC,
    TOPIC_AUTHORIZATION_FAILED,
    TRANSACTIONAL_ID,
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    WRITE,
    Allowed,
    Denial,
    Verdict,
    in_request_order,
    reencoded,
)
from zkcoord.wire.kafka.entities import build, to_plain
from zkcoord.wire.kafka.frames import RequestHeader, read_response, response_schema
from zkcoord.wire.kafka.versions import FIND_COORDINATOR

INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN = 22, 24, 25, 26
_TRANSACTION_KEY = 1
_OPERATION_NOT_ATTEMPTED = 55
_CLIENT_VERSIONS_MAX = 3  # AddPartitionsToTxn v4+ batches transactions and comes only from brokers

Check = Callable[[RequestHeader, dict, Allowed], Verdict | None]


def _answer(header: RequestHeader, plain: dict):
    return build(response_schema(header.api_key, header.api_version), {"throttle_time": 0, **plain})


def _write_on_transactional_id(header: RequestHeader, transactional_id: str | None, allowed: Allowed, answer: dict):
    """The refusal ``answer`` when Write on ``transactional_id`` is not allowed, else None."""
    if transactional_id is None or allowed(WRITE, TRANSACTIONAL_ID, transactional_id):
        return None
    return Verdict((Denial(WRITE, TRANSACTIONAL_ID, transactional_id),), answer=_answer(header, answer))


def _init_producer_id(header: RequestHeader, body: dict, allowed: Allowed) -> Verdict | None:
    """Write on the TransactionalId. An idempotent producer (no id) passes: Kafka asks IdempotentWrite on the
    Cluster or Write on any topic, and ``allowed`` cannot ask "any"; a producer id grants nothing by itself, since
    every Produce is checked per topic."""
    refused = {"error_code": TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "producer_id": -1, "producer_epoch": -1}
    return _write_on_transactional_id(header, body.get("transactional_id"), allowed, refused)


def _end_txn(header: RequestHeader, body: dict, allowed: Allowed) -> Verdict | None:
    refused = {"error_code": TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    return _write_on_transactional_id(header, body["transactional_id"], allowed, refused)


def _add_offsets_to_txn(header: RequestHeader, body: dict, allowed: Allowed) -> Verdict | None:
    refused = {"error_code": TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    verdict = _write_on_transactional_id(header, body["transactional_id"], allowed, refused)
    if verdict is not None or allowed(READ, GROUP, body["group_id"]):
        return verdict
    answer = _answer(header, {"error_code": GROUP_AUTHORIZATION_FAILED})
    return Verdict((Denial(READ, GROUP, body["group_id"]),), answer=answer)


def _add_partitions_to_txn(header: RequestHeader, body: dict, allowed: Allowed) -> Verdict | None:
    """A client's (v0-v3): Write on the TransactionalId, then on each topic. Kafka adds no partition unless all
    may be added: the refused ones answer 29, the others 55 OPERATION_NOT_ATTEMPTED. Later versions come from
    brokers: ClusterAction on the Cluster, else the connection is closed."""
    if header.api_version > _CLIENT_VERSIONS_MAX:
        if allowed(CLUSTER_ACTION, CLUSTER, CLUSTER_NAME):
            return None
        return Verdict((Denial(CLUSTER_ACTION, CLUSTER, CLUSTER_NAME),), close=True)
    topics = body["v3_and_below_topics"]

    def every_partition(code_of: Callable[[str], int]) -> dict:
        results = [
            {
                "name": topic["name"],
                "results_by_partition": [
                    {"partition_index": partition, "partition_error_code": code_of(topic["name"])}
                    for partition in topic["partitions"]
                ],
            }
            for topic in topics
        ]
        return {"error_code": 0, "results_by_topic_v3_and_below": results}

    transactional_id = body["v3_and_below_transactional_id"]
    refused = every_partition(lambda _: TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    verdict = _write_on_transactional_id(header, transactional_id, allowed, refused)
    if verdict is not None:
        return verdict
    writable = {name: allowed(WRITE, TOPIC, name) for name in dict.fromkeys(topic["name"] for topic in topics)}
    if all(writable.values()):
        return None
    denials = tuple(Denial(WRITE, TOPIC, name) for name, ok in writable.items() if not ok)
    codes = every_partition(lambda name: _OPERATION_NOT_ATTEMPTED if writable[name] else TOPIC_AUTHORIZATION_FAILED)
    return Verdict(denials, answer=_answer(header, codes))


def _transaction_coordinator(header: RequestHeader, body: dict, allowed: Allowed) -> Verdict | None:
    """Describe on each TransactionalId looked up (group keys are served by the coordinator, never forwarded)."""
    if body.get("key_type", 0) != _TRANSACTION_KEY:
        return None
    keys = body["coordinator_keys"] if header.api_version >= 4 else [body["key"]]
    verdicts = {key: allowed(DESCRIBE, TRANSACTIONAL_ID, key) for key in dict.fromkeys(keys)}
    denied = {index: key for index, key in enumerate(keys) if not verdicts[key]}
    if not denied:
        return None
    denials = tuple(Denial(DESCRIBE, TRANSACTIONAL_ID, key) for key, ok in verdicts.items() if not ok)
    refused = {index: _refused_coordinator(key) for index, key in denied.items()}
    if header.api_version < 4:
        return Verdict(denials, answer=_answer(header, refused[0]))
    kept = [key for index, key in enumerate(keys) if index not in denied]
    if not kept:
        return Verdict(denials, answer=_answer(header, {"coordinators": list(refused.values())}))

    def reply(frame: bytes):
        _, upstream = read_response(FIND_COORDINATOR, header.api_version, frame)
        plain = to_plain(upstream)
        plain["coordinators"] = in_request_order(keys, refused, plain["coordinators"], lambda each: each["key"])
        return build(type(upstream), plain)

    return Verdict(denials, forward=reencoded(header, {**body, "coordinator_keys": kept}), reply=reply)


def _refused_coordinator(key: str) -> dict:
    return {
        "key": key,
        "error_code": TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        "error_message": None,
        "node_id": -1,
        "host": "",
        "port": -1,
    }


CHECKS: dict[int, Check] = {
    INIT_PRODUCER_ID: _init_producer_id,
    ADD_PARTITIONS_TO_TXN: _add_partitions_to_txn,
    ADD_OFFSETS_TO_TXN: _add_offsets_to_txn,
    END_TXN: _end_txn,
    FIND_COORDINATOR: _transaction_coordinator,
}
