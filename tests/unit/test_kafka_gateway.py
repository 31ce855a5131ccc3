"""The gateway's pure parts: which versions are advertised, where each broker is served, the address rewrites,
and the Kafka listener's settings."""

import uuid

import pytest
from kio.index import load_response_schema

from zkcoord.errors import ConfigError
from zkcoord.server.config import node_config
from zkcoord.wire.kafka import versions
from zkcoord.wire.kafka.entities import build, to_plain
from zkcoord.wire.kafka.frames import SIZE, encode_response
from zkcoord.wire.kafka.rewrite import gateway_view, rewrite_metadata_frame, rewrite_response

BASE = 1_000_000_000
LISTENERS = {1: ("zk-a", 9192, 9193, 8), 2: ("zk-b", 9192, 9193, 8)}


def test_advertised_versions_serve_groups_cap_addressed_data_apis_and_drop_refused_ones():
    upstream = {0: (0, 11), 1: (0, 17), 3: (0, 12), 8: (0, 9), 28: (0, 4), 68: (0, 0), 4: (0, 7), 9999: (0, 1)}
    table = versions.advertised(upstream)
    assert table[8] == versions.SERVED[8]  # a group API: zkcoord's range, not the broker's
    assert table[0] == (3, 9) and table[1] == (4, 15)  # kio's lowest; below KIP-951's NodeEndpoints
    assert table[3] == (0, 12)
    assert 28 not in table and 68 not in table  # TxnOffsetCommit, ConsumerGroupHeartbeat
    assert 4 not in table and 9999 not in table  # inter-broker LeaderAndIsr, unknown to kio
    assert set(versions.SERVED) <= set(table)


def test_every_node_serves_the_same_broker_at_the_same_address_spread_over_the_nodes():
    view = gateway_view([0, 1, 2], LISTENERS, lowest_broker_id=0, coordinator_id_base=BASE)
    assert view.brokers == {0: ("zk-a", 9193), 1: ("zk-b", 9194), 2: ("zk-a", 9195)}
    assert view.coordinators == {BASE + 1: ("zk-a", 9192), BASE + 2: ("zk-b", 9192)}
    shifted = gateway_view([1001, 1002], LISTENERS, lowest_broker_id=1001, coordinator_id_base=BASE)
    assert shifted.brokers == {1001: ("zk-a", 9193), 1002: ("zk-b", 9194)}
    # ids outside the range have no port: left out, never given another port (the bootstrap's, one past the range)
    assert gateway_view([0, 1, 9, 1001], LISTENERS, lowest_broker_id=1, coordinator_id_base=BASE).brokers == {
        1: ("zk-b", 9193)
    }
    assert gateway_view([0], {}, 0, BASE).brokers == {}


def test_a_node_that_does_not_answer_fronts_no_broker_but_stays_a_coordinator():
    view = gateway_view([0, 1, 2], LISTENERS, 0, BASE, fronting={2: LISTENERS[2]})
    assert view.brokers == {0: ("zk-b", 9193), 1: ("zk-b", 9194), 2: ("zk-b", 9195)}
    assert set(view.coordinators) == {BASE + 1, BASE + 2}  # clients still find node 1's groups until it is gone


def _metadata(brokers, controller_id=0, version=12):
    schema = load_response_schema(3, version)
    return build(
        schema,
        {
            "throttle_time": 0,
            "brokers": [{"node_id": b, "host": "10.0.0.9", "port": 9092 + b, "rack": None} for b in brokers],
            "cluster_id": "c",
            "controller_id": controller_id,
            "error_code": 0,
            "topics": [
                {
                    "error_code": 0,
                    "name": "orders",
                    "topic_id": uuid.UUID(int=7),
                    "is_internal": False,
                    "partitions": [
                        {
                            "error_code": 0,
                            "partition_index": 0,
                            "leader_id": 1,
                            "leader_epoch": 0,
                            "replica_nodes": [1],
                            "isr_nodes": [1],
                            "offline_replicas": [],
                        }
                    ],
                    "topic_authorized_operations": -(2**31),
                }
            ],
        },
    )


def test_metadata_names_every_broker_through_the_gateway_and_every_coordinator_node():
    view = gateway_view([0, 1], LISTENERS, 0, BASE)
    rewritten = to_plain(rewrite_response(3, _metadata([0, 1], controller_id=1), view))
    assert [(b["node_id"], b["host"], b["port"]) for b in rewritten["brokers"]] == [
        (0, "zk-a", 9193),
        (1, "zk-b", 9194),
        (BASE + 1, "zk-a", 9192),
        (BASE + 2, "zk-b", 9192),
    ]
    assert rewritten["controller_id"] == 1 and rewritten["topics"][0]["partitions"][0]["leader_id"] == 1


def test_metadata_topics_pass_through_the_rewrite_as_they_were_read():
    """Only the brokers are rewritten: a large group's members each ask Metadata of hundreds of partitions."""
    answer = _metadata([0, 1], controller_id=1)
    rewritten = rewrite_response(3, answer, gateway_view([0, 1], LISTENERS, 0, BASE))
    assert rewritten.topics is answer.topics
    assert type(rewritten) is type(answer) and rewritten.brokers != answer.brokers


@pytest.mark.parametrize("version", range(versions.kio_versions(3)[0], versions.kio_versions(3)[1] + 1))
def test_a_metadata_frame_rewritten_in_place_is_the_frame_of_the_rewritten_answer(version):
    view = gateway_view([0, 1], LISTENERS, 0, BASE)
    answer = _metadata([0, 1], controller_id=1, version=version)
    frame = encode_response(42, answer)
    assert rewrite_metadata_frame(version, memoryview(frame)[SIZE.size :], view) == encode_response(
        42, rewrite_response(3, answer, view)
    )


def test_a_transaction_coordinator_is_reached_through_the_gateway():
    view = gateway_view([0, 1], LISTENERS, 0, BASE)
    found = build(
        load_response_schema(10, 4),
        {
            "throttle_time": 0,
            "coordinators": [
                {"key": "tx", "node_id": 1, "host": "10.0.0.9", "port": 9093, "error_code": 0, "error_message": None}
            ],
        },
    )
    coordinator = to_plain(rewrite_response(10, found, view))["coordinators"][0]
    assert (coordinator["node_id"], coordinator["host"], coordinator["port"]) == (1, "zk-b", 9194)
    old = build(
        load_response_schema(10, 2),
        {"throttle_time": 0, "error_code": 0, "error_message": None, "node_id": 0, "host": "10.0.0.9", "port": 9092},
    )
    rewritten = to_plain(rewrite_response(10, old, view))
    assert (rewritten["host"], rewritten["port"]) == ("zk-a", 9193)


def test_the_kafka_listener_takes_kafkas_listener_properties():
    assert node_config({}).server.kafka_listener(None) is None
    settings = node_config(
        {"listeners": "PLAINTEXT://0.0.0.0:9192", "advertised.listeners": "PLAINTEXT://zk-a.example:19192"}
    ).server.kafka_listener(None)
    assert (settings.name, settings.host, settings.port) == ("PLAINTEXT", "0.0.0.0", 9192)
    assert settings.advertised == ("zk-a.example", 19192)
    assert settings.gateway_ports() == {9193 + i: i for i in range(8)}
    ranged = node_config({"zkcoord.gateway.port.range": "7000-7002", "zkcoord.gateway.lowest.broker.id": 1001})
    assert ranged.server.kafka_listener(9300).gateway_ports() == {7000: 1001, 7001: 1002, 7002: 1003}


@pytest.mark.parametrize(
    ("properties", "kafka_port", "message"),
    [
        ({"listeners": "h:9093"}, None, "is not NAME://host:port"),
        ({"listeners": "PLAINTEXT://h"}, None, "is not NAME://host:port"),
        ({"listeners": "SSL://h:9093", "advertised.listeners": "PLAINTEXT://h:9093"}, None, "not the listener SSL"),
        ({"zkcoord.gateway.port.range": "9000"}, 9192, "START-END"),
        ({"zkcoord.gateway.port.range": "9010-9000"}, 9192, "START-END"),
        ({}, 0, "must be given"),
        ({"listeners": "PLAINTEXT://a:9092,PLAINTEXT://b:9093"}, None, "one Kafka listener"),
        ({"listeners": "PLAINTEXT://a:65532"}, None, "past port 65535"),
        ({"zkcoord.gateway.port.range": "9090-9095"}, 9092, "holds the Kafka port"),
    ],
)
def test_misspelt_listener_settings_are_refused_by_name(properties, kafka_port, message):
    with pytest.raises(ConfigError, match=message):
        node_config(properties).server.kafka_listener(kafka_port)


def _any_version(api_key: int, version: int, broker_ids: list[int]):
    """A response of ``api_key`` at ``version`` naming ``broker_ids`` at their own (upstream) addresses."""
    brokers = [
        {"node_id": b, "broker_id": b, "host": "10.0.0.9", "port": 9092 + b, "rack": None, "is_fenced": False}
        for b in broker_ids
    ]
    found = {"node_id": broker_ids[0], "host": "10.0.0.9", "port": 9092, "error_code": 0, "error_message": None}
    plain = {
        "throttle_time": 0,
        "error_code": 0,
        "error_message": None,
        "brokers": brokers,
        "cluster_id": "c",
        "controller_id": broker_ids[0],
        "topics": [],
        "cluster_authorized_operations": -(2**31),
        "endpoint_type": 1,
        **found,
        "coordinators": [{"key": "tx", **found}],
    }
    return build(load_response_schema(api_key, version), plain)


@pytest.mark.parametrize(
    ("api_key", "version"),
    [
        (api_key, v)
        for api_key in (3, 10, 60)
        for v in range(*[f(versions.kio_versions(api_key)) for f in (lambda r: r[0], lambda r: r[1] + 1)])
    ],
)
def test_every_version_of_every_rewritten_answer_goes_through_the_gateway(api_key, version):
    view = gateway_view([0, 1], LISTENERS, 0, BASE)
    plain = to_plain(rewrite_response(api_key, _any_version(api_key, version, [0, 1]), view))
    addresses = [(b["host"], b["port"]) for b in plain.get("brokers", [])]
    addresses += [(c["host"], c["port"]) for c in plain.get("coordinators", [])]
    if "host" in plain:
        addresses.append((plain["host"], plain["port"]))
    assert addresses and all(host in ("zk-a", "zk-b") for host, _ in addresses), addresses
