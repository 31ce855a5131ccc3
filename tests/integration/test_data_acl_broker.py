"""The gateway's reduced requests against a real Kafka 3.9 broker: a Produce, a Fetch and a Metadata re-encoded
without what the principal may not touch are what the broker accepts, and its answers merge back."""

import socket
import uuid

from kafka.record.memory_records import MemoryRecordsBuilder

from zkcoord.server.gateway import frame_content, read_frame
from zkcoord.wire.kafka.data_acl import authorize_forwarded
from zkcoord.wire.kafka.entities import build, to_plain
from zkcoord.wire.kafka.frames import encode_request, read_header, request_schema


def _allow(*grants):
    granted = set(grants)
    return lambda operation, resource_type, name: (operation, resource_type, name) in granted


def _records(*values: bytes) -> bytes:
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    for value in values:
        builder.append(timestamp=None, key=None, value=value)
    builder.close()
    return bytes(builder.buffer())


def _through_the_gateway(kafka, api_key: int, version: int, plain: dict, allowed):
    """The client's answer when the gateway checks ``plain`` and forwards what it allows to the broker."""
    frame = encode_request(7, "client", build(request_schema(api_key, version), plain))[4:]
    verdict = authorize_forwarded(read_header(frame), frame, allowed)
    assert verdict is not None and verdict.forward is not None
    host, port = kafka.bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(verdict.forward)
        answer = read_frame(sock, 1 << 24)
    assert answer is not None
    return to_plain(verdict.reply(frame_content(answer)))


def test_a_reduced_produce_and_fetch_reach_the_broker_and_merge_back(kafka):
    mine, theirs = f"acl-mine-{uuid.uuid4().hex[:8]}", f"acl-theirs-{uuid.uuid4().hex[:8]}"
    for topic in (mine, theirs):
        kafka.create_topic(topic, 1)
    produce = {
        "transactional_id": None,
        "acks": -1,
        "timeout": 10_000,
        "topic_data": [
            {"name": topic, "partition_data": [{"index": 0, "records": _records(b"a", b"b")}]}
            for topic in (theirs, mine)
        ],
    }
    writer = _allow(("Write", "Topic", mine))
    produced = _through_the_gateway(kafka, 0, 9, produce, writer)
    assert [(t["name"], t["partition_responses"][0]["error_code"]) for t in produced["responses"]] == [
        (theirs, 29),
        (mine, 0),
    ]
    assert kafka.end_offsets(mine) == {0: 2} and kafka.end_offsets(theirs) == {0: 0}

    partition = {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}
    fetch = {
        "replica_id": -1,
        "max_wait": 100,
        "min_bytes": 1,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [partition]} for topic in (mine, theirs)],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
    fetched = _through_the_gateway(kafka, 1, 12, fetch, _allow(("Read", "Topic", mine)))
    assert [(t["topic"], t["partitions"][0]["error_code"]) for t in fetched["responses"]] == [(mine, 0), (theirs, 29)]
    assert fetched["responses"][0]["partitions"][0]["high_watermark"] == 2
    assert len(fetched["responses"][0]["partitions"][0]["records"]) > 0


def test_an_old_metadata_request_kept_from_auto_creating_goes_as_v4_and_comes_back_as_v1(kafka):
    # The test broker creates no topic on its own anyway: this is about the versions the broker takes and gives.
    absent = f"acl-absent-{uuid.uuid4().hex[:8]}"
    described = _through_the_gateway(kafka, 3, 1, {"topics": [{"name": absent}]}, _allow(("Describe", "Topic", absent)))
    assert [(t["name"], t["error_code"]) for t in described["topics"]] == [(absent, 3)]
    assert "cluster_id" not in described and described["brokers"]  # v1's fields only
