"""Both roles of the sans-IO connection (zkcoord.wire.connection): no sockets, only bytes in and out."""

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from zkcoord.wire.connection import ClientConnection, ProtocolError, ServerConnection
from zkcoord.wire.framing import FrameError, encode_frame


def response_frame(correlation_id: int, **fields) -> bytes:
    return encode_frame({"correlation_id": correlation_id, **fields})


def test_client_numbers_requests_from_1_and_frames_them_with_the_header_first():
    client = ClientConnection("me")
    frame = client.request("Heartbeat", {"group_id": "g"}, tag="hb")
    assert msgpack.unpackb(frame[4:], raw=False) == {
        "api": "Heartbeat",
        "api_version": 0,
        "correlation_id": 1,
        "client_id": "me",
        "group_id": "g",
    }
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    client.request("Heartbeat", {}, tag="hb2")
    assert client.pending == 2


def test_client_hands_back_each_response_with_its_requests_tag_in_order():
    client = ClientConnection("me")
    client.request("A", {}, tag="first")
    client.request("B", {}, tag="second")
    client.feed(response_frame(1, error_code=0) + response_frame(2, error_code=7)[:3])
    assert client.next_response() == ("first", {"correlation_id": 1, "error_code": 0})
    assert client.next_response() is None
    client.feed(response_frame(2, error_code=7)[3:])
    assert client.next_response() == ("second", {"correlation_id": 2, "error_code": 7})
    assert client.pending == 0


def test_a_response_out_of_order_kills_the_client_connection():
    client = ClientConnection("me")
    client.request("A", {}, tag="a")
    client.request("B", {}, tag="b")
    client.feed(response_frame(2))
    with pytest.raises(ProtocolError, match="expected correlation id 1, got 2"):
        client.next_response()
    with pytest.raises(ProtocolError):
        client.next_response()
    assert client.abandon() == ["a", "b"] and client.pending == 0


def test_a_response_nobody_asked_for_kills_the_client_connection():
    client = ClientConnection("me")
    client.feed(response_frame(1))
    with pytest.raises(ProtocolError, match="nobody asked for"):
        client.next_response()


def test_a_response_frame_over_the_limit_is_refused_from_its_length_alone():
    client = ClientConnection("me", max_response_bytes=100)
    client.request("A", {}, tag="a")
    client.feed((101).to_bytes(4, "big"))  # no body yet: the length is enough
    with pytest.raises(ProtocolError, match="exceeds the response limit 100"):
        client.next_response()


@pytest.mark.parametrize("body", [b"\xc1", msgpack.packb([1, 2]), msgpack.packb({"correlation_id": "1"})])
def test_a_response_that_is_no_map_with_an_int_correlation_id_kills_the_client_connection(body):
    client = ClientConnection("me")
    client.request("A", {}, tag="a")
    client.feed(len(body).to_bytes(4, "big") + body)
    with pytest.raises(ProtocolError, match="bad response frame"):
        client.next_response()


def test_correlation_ids_wrap_within_int32():
    client = ClientConnection("me")
    client._next_correlation_id = 2**31 - 1
    first = msgpack.unpackb(client.request("A", {})[4:])
    second = msgpack.unpackb(client.request("A", {})[4:])
    assert (first["correlation_id"], second["correlation_id"]) == (2**31 - 1, 0)


def test_server_reads_requests_and_answers_them_in_order_correlation_id_first():
    server = ServerConnection()
    server.feed(encode_frame({"api": "A", "api_version": 0, "correlation_id": 5}))
    server.feed(encode_frame({"api": "B", "api_version": 0, "correlation_id": 9}))
    assert server.next_request()["correlation_id"] == 5
    assert server.next_request()["correlation_id"] == 9
    assert server.next_request() is None
    with pytest.raises(RuntimeError, match="request order"):
        server.respond(9, {"error_code": 0})
    frame = server.respond(5, {"error_code": 0, "correlation_id": 77})
    assert list(msgpack.unpackb(frame[4:], raw=False).items()) == [("correlation_id", 5), ("error_code", 0)]
    assert server.unanswered == 1


def test_server_turns_a_bad_frame_into_its_error_frame():
    server = ServerConnection(max_request_bytes=10)
    server.feed((11).to_bytes(4, "big"))
    with pytest.raises(FrameError) as raised:
        server.next_request()
    assert msgpack.unpackb(server.error(raised.value)[4:], raw=False) == {
        "correlation_id": -1,
        "error_code": 42,
        "error_message": "frame length 11 exceeds max.request.bytes 10",
    }


INT64 = st.integers(-(2**63), 2**63 - 1)
FIELDS = st.dictionaries(st.text(min_size=1, max_size=5), INT64 | st.text(max_size=5) | st.none(), max_size=3)


@given(st.lists(FIELDS, min_size=1, max_size=8), st.integers(1, 64))
def test_requests_and_responses_cross_both_ends_in_order_whatever_the_chunking(bodies, chunk):
    client, server = ClientConnection("me"), ServerConnection()
    sent = b"".join(client.request("Api", {"body": body}, tag=index) for index, body in enumerate(bodies))
    requests = []
    for start in range(0, len(sent), chunk):
        server.feed(sent[start : start + chunk])
        while (request := server.next_request()) is not None:
            requests.append(request)
    assert [request["body"] for request in requests] == bodies
    answers = b"".join(server.respond(r["correlation_id"], {"echo": r["body"]}) for r in requests)
    received = []
    for start in range(0, len(answers), chunk):
        client.feed(answers[start : start + chunk])
        while (answered := client.next_response()) is not None:
            received.append((answered[0], answered[1]["echo"]))
    assert received == list(enumerate(bodies))


# ---- read deadlines: idle connections and trickled frames --------------------------------------------------

HEARTBEAT = encode_frame({"api": "Heartbeat", "api_version": 0, "correlation_id": 1})


def timed_server(now_ms: float = 1000.0) -> ServerConnection:
    return ServerConnection(max_idle_ms=600, read_timeout_ms=50, now_ms=now_ms)


def test_a_new_connection_must_send_within_the_idle_bound():
    assert timed_server(1000.0).read_deadline() == (1600.0, "idle")


def test_a_started_frame_must_be_complete_within_the_read_timeout_however_slowly_it_trickles():
    server = timed_server()
    for offset, byte in enumerate(HEARTBEAT[:-1]):
        server.feed(bytes([byte]), now_ms=1100.0 + offset)
        assert server.next_request(now_ms=1100.0 + offset) is None
    assert server.read_deadline() == (1150.0, "slow request")  # from the first byte, not the latest


def test_the_idle_clock_restarts_at_each_request_and_answer():
    server = timed_server()
    server.feed(HEARTBEAT, now_ms=1200.0)
    assert server.next_request(now_ms=1201.0) is not None
    assert server.read_deadline() == (1801.0, "idle")
    server.respond(1, {"error_code": 0}, now_ms=1300.0)
    assert server.read_deadline() == (1900.0, "idle")


def test_bytes_of_the_next_frame_read_with_one_request_start_its_read_clock():
    server = timed_server()
    server.feed(HEARTBEAT + HEARTBEAT[:3], now_ms=1200.0)
    assert server.next_request(now_ms=1210.0) is not None
    assert server.read_deadline() == (1260.0, "slow request")


def test_a_connection_without_bounds_has_no_read_deadline():
    server = ServerConnection()
    assert server.read_deadline() is None
    server.feed(HEARTBEAT[:2])
    assert server.read_deadline() is None


def test_a_frame_pipelined_behind_a_parked_request_is_timed_from_the_answer():
    server = timed_server()
    server.feed(HEARTBEAT + HEARTBEAT[:3], now_ms=1200.0)
    assert server.next_request(now_ms=1200.0) is not None
    server.respond(1, {"error_code": 0}, now_ms=90_000.0)  # parked for a long time: the server read nothing
    assert server.read_deadline() == (90_050.0, "slow request")
