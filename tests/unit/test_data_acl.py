"""The gateway's own ACL checks on forwarded requests, with kio-encoded requests and upstream answers: Kafka's codes
on what is refused, the allowed rest forwarded (re-encoded) and its answer merged back in the request's order."""

import struct
import uuid
from collections.abc import Callable

import pytest

from zkcoord.wire.kafka import data_acl, versions
from zkcoord.wire.kafka.acl import Denial, Verdict, authorized_operations
from zkcoord.wire.kafka.data_acl import authorize_forwarded
from zkcoord.wire.kafka.entities import build, to_plain
from zkcoord.wire.kafka.frames import (
    encode_request,
    encode_response,
    read_body,
    read_header,
    request_schema,
    response_schema,
)


def _allow(*grants: tuple[str, str, str]) -> Callable[[str, str, str], bool]:
    granted = set(grants)
    return lambda operation, resource_type, name: (operation, resource_type, name) in granted


def _deny_all(*_) -> bool:
    return False


def _frame(api_key: int, version: int, plain: dict) -> bytes:
    """A client's request frame without its size prefix, as the gateway reads it."""
    return encode_request(42, "client", build(request_schema(api_key, version), plain))[4:]


def _check(api_key: int, version: int, plain: dict, allowed) -> Verdict | None:
    frame = _frame(api_key, version, plain)
    return authorize_forwarded(read_header(frame), frame, allowed)


def _forwarded(verdict: Verdict) -> tuple[int, dict]:
    """The correlation id and body of the request the gateway forwards instead of the client's."""
    frame = verdict.forward[4:]
    assert struct.unpack(">i", verdict.forward[:4])[0] == len(frame)
    header = read_header(frame)
    return header.correlation_id, to_plain(read_body(header, frame))


def _upstream(api_key: int, version: int, plain: dict) -> bytes:
    """The upstream broker's answer frame without its size prefix."""
    return encode_response(42, build(response_schema(api_key, version), {"throttle_time": 0, **plain}))[4:]


def _produce(acks: int = -1, transactional_id: str | None = None, topics=("orders", "secret", "payments")) -> dict:
    return {
        "transactional_id": transactional_id,
        "acks": acks,
        "timeout": 1000,
        "topic_data": [
            {"name": name, "partition_data": [{"index": 0, "records": b"batch-" + name.encode()}]} for name in topics
        ],
    }


_WRITES = (("Write", "Topic", "orders"), ("Write", "Topic", "payments"))
_WRITER = _allow(*_WRITES)


def test_a_produce_allowed_on_every_topic_is_forwarded_unchanged():
    assert _check(0, 9, _produce(), _allow(*_WRITES, ("Write", "Topic", "secret"))) is None


def test_a_produce_to_a_topic_without_write_forwards_the_rest_and_answers_29_there():
    verdict = _check(0, 9, _produce(), _WRITER)
    assert verdict.denials == (Denial("Write", "Topic", "secret"),) and not verdict.close and verdict.answer is None
    correlation_id, body = _forwarded(verdict)
    assert correlation_id == 42
    assert [(t["name"], bytes(t["partition_data"][0]["records"])) for t in body["topic_data"]] == [
        ("orders", b"batch-orders"),
        ("payments", b"batch-payments"),
    ]
    answer = {
        "responses": [
            {
                "name": name,
                "partition_responses": [{"index": 0, "error_code": 0, "base_offset": 10, "record_errors": []}],
            }
            for name in ("payments", "orders")
        ]
    }
    merged = to_plain(verdict.reply(_upstream(0, 9, answer)))
    assert [
        (t["name"], [(p["error_code"], p["base_offset"]) for p in t["partition_responses"]])
        for t in merged["responses"]
    ] == [
        ("orders", [(0, 10)]),
        ("secret", [(29, -1)]),
        ("payments", [(0, 10)]),
    ]


def test_a_produce_refused_on_every_topic_is_answered_here():
    verdict = _check(0, 3, _produce(topics=("secret",)), _WRITER)
    assert verdict.forward is None
    answer = to_plain(verdict.answer)
    assert answer["responses"][0]["partition_responses"][0]["error_code"] == 29
    assert encode_response(42, verdict.answer)  # a complete answer of the client's version


def test_a_produce_without_acks_and_with_a_refused_topic_writes_the_rest_and_closes():
    partial = _check(0, 9, _produce(acks=0), _WRITER)
    assert partial.close and partial.reply is None
    assert [t["name"] for t in _forwarded(partial)[1]["topic_data"]] == ["orders", "payments"]
    refused = _check(0, 9, _produce(acks=0, topics=("secret",)), _WRITER)
    assert refused == Verdict((Denial("Write", "Topic", "secret"),), close=True)


def test_a_transactional_produce_needs_write_on_its_transactional_id():
    grants = _allow(("Write", "Topic", "orders"))
    verdict = _check(0, 9, _produce(transactional_id="tx", topics=("orders",)), grants)
    assert verdict.denials == (Denial("Write", "TransactionalId", "tx"),)
    assert to_plain(verdict.answer)["responses"][0]["partition_responses"][0]["error_code"] == 53


def _fetch(replica_id: int = -1) -> dict:
    partition = {"partition": 0, "fetch_offset": 5, "partition_max_bytes": 1024}
    return {
        "replica_id": replica_id,
        "max_wait": 500,
        "min_bytes": 1,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [{"topic": name, "partitions": [partition]} for name in ("secret", "orders")],
        "forgotten_topics_data": [],
        "rack_id": "",
    }


def test_a_fetch_needs_read_on_each_topic():
    verdict = _check(1, 12, _fetch(), _allow(("Read", "Topic", "orders")))
    assert verdict.denials == (Denial("Read", "Topic", "secret"),)
    assert [t["topic"] for t in _forwarded(verdict)[1]["topics"]] == ["orders"]
    answer = {
        "error_code": 0,
        "session_id": 7,
        "responses": [
            {
                "topic": "orders",
                "partitions": [
                    {
                        "partition_index": 0,
                        "error_code": 0,
                        "high_watermark": 9,
                        "aborted_transactions": None,
                        "records": b"r",
                    }
                ],
            }
        ],
    }
    merged = to_plain(verdict.reply(_upstream(1, 12, answer)))
    assert merged["session_id"] == 7
    assert [(t["topic"], t["partitions"][0]["error_code"]) for t in merged["responses"]] == [
        ("secret", 29),
        ("orders", 0),
    ]
    assert bytes(merged["responses"][1]["partitions"][0]["records"]) == b"r"
    session_error = _upstream(1, 12, {"error_code": 70, "session_id": 0, "responses": []})
    assert to_plain(verdict.reply(session_error))["responses"] == []  # answered as the broker answered


def test_no_fetch_session_is_let_exist_so_none_can_be_borrowed():
    # A session is not bound to a principal: the broker would serve its partitions to whoever names it.
    everything = _allow(("Read", "Topic", "orders"), ("Read", "Topic", "secret"))
    assert _check(1, 12, _fetch(), everything) is None  # sessionless: forwarded as it is
    asking = _check(1, 12, {**_fetch(), "session_epoch": 0}, everything)
    assert _forwarded(asking)[1]["session_epoch"] == -1 and not asking.denials
    reduced = _check(1, 12, {**_fetch(), "session_epoch": 0}, _allow(("Read", "Topic", "orders")))
    assert _forwarded(reduced)[1]["session_epoch"] == -1 and [t["topic"] for t in _forwarded(reduced)[1]["topics"]] == [
        "orders"
    ]
    assert _check(1, 12, {**_fetch(), "session_id": 123456789, "session_epoch": 7}, everything) == Verdict(close=True)


def test_a_follower_fetch_needs_cluster_action_and_a_fetch_by_topic_id_is_not_taken():
    follower = _check(1, 12, _fetch(replica_id=3), _allow(("Read", "Topic", "orders"), ("Read", "Topic", "secret")))
    assert follower.denials == (Denial("ClusterAction", "Cluster", "kafka-cluster"),)
    assert {p["error_code"] for t in to_plain(follower.answer)["responses"] for p in t["partitions"]} == {29}
    by_id = {**_fetch(), "topics": [], "forgotten_topics_data": []}
    assert _check(1, data_acl.FETCH_BY_NAME_MAX + 1, by_id, _deny_all) == Verdict(close=True)


@pytest.mark.parametrize("version", [1, 9])
def test_list_offsets_needs_describe_on_each_topic(version):
    plain = {
        "replica_id": -1,
        "isolation_level": 0,
        "topics": [{"name": n, "partitions": [{"partition_index": 0, "timestamp": -1}]} for n in ("orders", "secret")],
    }
    verdict = _check(2, version, plain, _allow(("Describe", "Topic", "orders")))
    assert [t["name"] for t in _forwarded(verdict)[1]["topics"]] == ["orders"]
    answer = {"topics": [{"name": "orders", "partitions": [{"partition_index": 0, "error_code": 0, "offset": 4}]}]}
    merged = to_plain(verdict.reply(_upstream(2, version, answer)))
    assert [(t["name"], t["partitions"][0]["error_code"], t["partitions"][0]["offset"]) for t in merged["topics"]] == [
        ("orders", 0, 4),
        ("secret", 29, -1),
    ]


def test_offset_for_leader_epoch_needs_describe_on_each_topic_or_cluster_action():
    plain = {"replica_id": -1, "topics": [{"topic": "secret", "partitions": [{"partition": 2, "leader_epoch": 1}]}]}
    verdict = _check(23, 4, plain, _allow(("Read", "Topic", "secret")))
    assert verdict.denials == (Denial("Describe", "Topic", "secret"),)
    assert to_plain(verdict.answer)["topics"][0]["partitions"][0] == {
        "error_code": 29,
        "partition": 2,
        "leader_epoch": -1,
        "end_offset": -1,
    }


def _metadata_request(*names: str | None, **fields) -> dict:
    """Metadata's request (any version): ``names`` None for every topic."""
    topics = None if names == (None,) else [{"name": name, "topic_id": None} for name in names]
    return {"topics": topics, "allow_auto_topic_creation": True, "include_topic_authorized_operations": False, **fields}


def _metadata_answer(version: int, *names: str) -> bytes:
    topics = [
        {"name": n, "topic_id": None, "error_code": 0, "partitions": [], "topic_authorized_operations": 12345}
        for n in names
    ]
    brokers = [{"node_id": 1, "host": "broker", "port": 9092}]
    return _upstream(3, version, {"brokers": brokers, "topics": topics, "cluster_authorized_operations": 999})


def test_metadata_of_every_topic_shows_only_the_describable_ones_unlogged():
    verdict = _check(3, 12, _metadata_request(None), _allow(("Describe", "Topic", "orders")))
    assert verdict.forward is None and verdict.denials == ()
    shown = to_plain(verdict.reply(_metadata_answer(12, "secret", "orders")))
    assert [t["name"] for t in shown["topics"]] == ["orders"] and shown["brokers"][0]["host"] == "broker"


def test_metadata_of_named_topics_marks_those_not_describable_29_without_their_partitions():
    allowed = _allow(("Describe", "Topic", "orders"), ("Create", "Cluster", "kafka-cluster"))
    verdict = _check(3, 12, _metadata_request("secret", "orders"), allowed)
    assert verdict.denials == (Denial("Describe", "Topic", "secret"),)
    assert _forwarded(verdict)[1]["allow_auto_topic_creation"] is False  # a topic it may not see is not created
    shown = to_plain(verdict.reply(_metadata_answer(12, "secret", "orders")))
    assert [(t["name"], t["error_code"], t["partitions"]) for t in shown["topics"]] == [
        ("secret", 29, []),
        ("orders", 0, []),
    ]


def test_metadata_of_a_topic_named_by_id_and_not_describable_keeps_its_id_and_loses_its_name():
    topic_id = uuid.UUID(int=7)
    plain = {**_metadata_request(), "topics": [{"name": None, "topic_id": topic_id}]}
    verdict = _check(3, 12, plain, _deny_all)
    answer = {"brokers": [], "topics": [{"name": "secret", "topic_id": topic_id, "error_code": 0, "partitions": []}]}
    shown = to_plain(verdict.reply(_upstream(3, 12, answer)))
    assert [(t["name"], t["topic_id"], t["error_code"]) for t in shown["topics"]] == [(None, topic_id, 29)]


def test_metadata_never_auto_creates_a_topic_the_principal_may_not_create():
    allowed = _allow(("Describe", "Topic", "new"))
    v12 = _check(3, 12, _metadata_request("new"), allowed)
    assert _forwarded(v12)[1]["allow_auto_topic_creation"] is False
    # v0-v3 create implicitly: they go as v4, and the answer comes back at the client's version.
    v1 = _check(3, 1, _metadata_request("new"), allowed)
    forwarded = read_header(v1.forward[4:])
    assert (forwarded.api_version, _forwarded(v1)[1]["allow_auto_topic_creation"]) == (4, False)
    answer = v1.reply(_metadata_answer(4, "new"))
    assert type(answer) is response_schema(3, 1)
    creator = _allow(("Describe", "Topic", "new"), ("Create", "Topic", "new"))
    assert _check(3, 12, _metadata_request("new"), creator).forward is None


def test_metadata_authorized_operations_are_the_principals_not_the_gateways():
    allowed = _allow(("Describe", "Topic", "orders"), ("Read", "Topic", "orders"))
    plain = _metadata_request("orders", include_topic_authorized_operations=True)
    verdict = _check(3, 10, {**plain, "include_cluster_authorized_operations": True}, allowed)
    shown = to_plain(verdict.reply(_metadata_answer(10, "orders")))
    assert shown["topics"][0]["topic_authorized_operations"] == (1 << 3) | (1 << 8)
    assert shown["cluster_authorized_operations"] == 0  # no Describe on the Cluster


def test_a_transaction_coordinator_lookup_needs_describe_on_each_transactional_id():
    v3 = _check(10, 3, {"key": "tx", "key_type": 1}, _deny_all)
    assert v3.denials == (Denial("Describe", "TransactionalId", "tx"),)
    assert to_plain(v3.answer)["error_code"] == 53
    v4 = _check(
        10, 4, {"key_type": 1, "coordinator_keys": ["tx", "mine"]}, _allow(("Describe", "TransactionalId", "mine"))
    )
    assert _forwarded(v4)[1]["coordinator_keys"] == ["mine"]
    found = {"key": "mine", "node_id": 1, "host": "b", "port": 1, "error_code": 0, "error_message": None}
    merged = to_plain(v4.reply(_upstream(10, 4, {"coordinators": [found]})))
    assert [(c["key"], c["error_code"]) for c in merged["coordinators"]] == [("tx", 53), ("mine", 0)]
    assert _check(10, 3, {"key": "tx", "key_type": 1}, _allow(("Describe", "TransactionalId", "tx"))) is None


def test_init_producer_id_needs_write_on_a_transactional_id_and_nothing_for_an_idempotent_producer():
    plain = {"transaction_timeout": 60000, "producer_id": -1, "producer_epoch": -1}
    assert _check(22, 4, {**plain, "transactional_id": None}, _deny_all) is None
    refused = _check(22, 4, {**plain, "transactional_id": "tx"}, _deny_all)
    assert refused.denials == (Denial("Write", "TransactionalId", "tx"),)
    assert to_plain(refused.answer)["error_code"] == 53


def test_other_forwarded_apis_need_their_cluster_operation_or_are_for_cluster_administrators():
    create_acls = {"creations": []}
    assert _check(30, 3, create_acls, _allow(("Alter", "Cluster", "kafka-cluster"))) is None
    refused = _check(30, 3, create_acls, _allow(("Describe", "Cluster", "kafka-cluster")))
    assert refused == Verdict((Denial("Alter", "Cluster", "kafka-cluster"),), close=True)
    create_topics = {"topics": [], "timeout": 1000, "validate_only": False}
    assert _check(19, 7, create_topics, _allow(("Create", "Cluster", "kafka-cluster"))).close
    assert _check(19, 7, create_topics, _allow(("All", "Cluster", "kafka-cluster"))) is None


def test_a_request_older_than_its_schema_cannot_be_checked_and_is_closed():
    old_produce = struct.pack(">hhih", 0, 2, 42, -1) + b"\x00\x01"  # Produce v2: header, then an opaque body
    header = read_header(old_produce)
    assert header.older
    assert authorize_forwarded(header, old_produce, _deny_all) == Verdict(close=True)


def test_authorized_operations_are_kafkas_bits_of_the_granted_supported_operations():
    assert authorized_operations(_allow(("Read", "Group", "g"), ("Write", "Group", "g")), "Group", "g") == 1 << 3
    everything = authorized_operations(lambda *_: True, "Group", "g")
    assert everything == (1 << 3) | (1 << 6) | (1 << 8)  # zkcoord's answer with no authorizer


def test_with_authorization_fetch_is_advertised_up_to_the_last_version_that_names_topics():
    table = versions.advertised({1: (0, 17), 0: (0, 11)}, caps=data_acl.AUTHORIZED_CAPS)
    assert table[1] == (4, data_acl.FETCH_BY_NAME_MAX) and table[0] == versions.advertised({0: (0, 11)})[0]


_TXN = {"transactional_id": "tx", "producer_id": 5, "producer_epoch": 1}


def test_ending_a_transaction_needs_write_on_its_transactional_id():
    assert _check(26, 3, {**_TXN, "committed": True}, _allow(("Write", "TransactionalId", "tx"))) is None
    refused = _check(26, 3, {**_TXN, "committed": True}, _allow(("Describe", "TransactionalId", "tx")))
    assert refused.denials == (Denial("Write", "TransactionalId", "tx"),) and refused.forward is None
    assert to_plain(refused.answer)["error_code"] == 53


def test_adding_offsets_to_a_transaction_needs_read_on_the_group_too():
    writer = _allow(("Write", "TransactionalId", "tx"))
    refused = _check(25, 3, {**_TXN, "group_id": "g"}, writer)
    assert refused.denials == (Denial("Read", "Group", "g"),) and to_plain(refused.answer)["error_code"] == 30
    assert (
        _check(25, 3, {**_TXN, "group_id": "g"}, _allow(("Write", "TransactionalId", "tx"), ("Read", "Group", "g")))
        is None
    )


def test_adding_partitions_to_a_transaction_adds_none_unless_every_topic_is_writable():
    plain = {
        "v3_and_below_transactional_id": "tx",
        "v3_and_below_producer_id": 5,
        "v3_and_below_producer_epoch": 1,
        "v3_and_below_topics": [{"name": "orders", "partitions": [0, 1]}, {"name": "secret", "partitions": [2]}],
    }
    refused = _check(24, 3, plain, _allow(("Write", "TransactionalId", "tx"), ("Write", "Topic", "orders")))
    assert refused.denials == (Denial("Write", "Topic", "secret"),)
    results = to_plain(refused.answer)["results_by_topic_v3_and_below"]
    assert [[p["partition_error_code"] for p in t["results_by_partition"]] for t in results] == [[55, 55], [29]]
    no_id = to_plain(_check(24, 3, plain, _allow(("Write", "Topic", "orders"), ("Write", "Topic", "secret"))).answer)
    assert {
        p["partition_error_code"] for t in no_id["results_by_topic_v3_and_below"] for p in t["results_by_partition"]
    } == {53}


def test_describe_configs_needs_describe_configs_on_each_topic_or_the_cluster_for_a_broker():
    resources = [
        {"resource_type": 4, "resource_name": "1", "configuration_keys": None},
        {"resource_type": 2, "resource_name": "orders", "configuration_keys": None},
        {"resource_type": 2, "resource_name": "secret", "configuration_keys": None},
    ]
    plain = {"resources": resources, "include_synonyms": False, "include_documentation": False}
    verdict = _check(32, 4, plain, _allow(("DescribeConfigs", "Topic", "orders")))
    assert verdict.denials == (
        Denial("DescribeConfigs", "Cluster", "kafka-cluster"),
        Denial("DescribeConfigs", "Topic", "secret"),
    )
    assert [r["resource_name"] for r in _forwarded(verdict)[1]["resources"]] == ["orders"]
    answered = {"error_code": 0, "error_message": None, "resource_type": 2, "resource_name": "orders", "configs": []}
    merged = to_plain(verdict.reply(_upstream(32, 4, {"results": [answered]})))
    assert [(r["resource_name"], r["error_code"]) for r in merged["results"]] == [
        ("1", 31),
        ("orders", 0),
        ("secret", 29),
    ]


def test_client_telemetry_is_forwarded_unchecked_as_kafka_does():
    assert _check(71, 0, {"client_instance_id": None}, _deny_all) is None
