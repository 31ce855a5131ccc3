"""The wire server over real sockets on 127.0.0.1 (wire-protocol.md §1, §2), with a toy dispatch.

No monkey-patching: the server runs on this thread's gevent hub, and the clients use ``gevent.socket`` so that
waiting for a response yields to that hub instead of blocking it (a plain blocking recv would stop the very
server it waits for). Everything runs in one thread, so tests can read the server's counters directly.
"""

import struct
import time

import gevent
import gevent.socket
import msgspec
import pytest
from gevent.event import Event
from wire_client import WireClient, frame_bytes

from zkcoord.server.connection import WireServer
from zkcoord.wire.codec import API_NAMES
from zkcoord.wire.messages import HeartbeatRequest

HEARTBEAT = {"group_id": "g", "generation_id": 1, "member_id": "m-1"}
JOIN = {
    "group_id": "g",
    "session_timeout_ms": 10000,
    "rebalance_timeout_ms": 30000,
    "member_id": "",
    "protocol_type": "consumer",
    "protocols": [{"name": "range", "metadata": b"\x80"}],
}
SYNC = {"group_id": "g", "generation_id": 1, "member_id": "m-1", "assignments": []}
FETCH = {"group_id": "g", "topics": None}


class Toy:
    """A dispatch that answers at once by default; ``behaviours[api]`` can answer later or misbehave."""

    def __init__(self):
        self.dispatched: list[dict] = []
        self.parked: list = []
        self.parked_event = Event()
        self.behaviours = {}

    def __call__(self, request, respond):
        self.dispatched.append(request)
        self.behaviours.get(API_NAMES[type(request)], self.echo)(request, respond)

    def echo(self, request, respond):
        respond({"error_code": 0, "api": API_NAMES[type(request)], "request": msgspec.to_builtins(request)})

    def park(self, request, respond):
        self.parked.append(respond)
        self.parked_event.set()

    def apis(self) -> list[str]:
        return [API_NAMES[type(request)] for request in self.dispatched]


def wait_until(predicate, timeout: float = 5.0) -> None:
    """For state with no event to wait on (the server noticing a peer's close): poll on the hub."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        gevent.sleep(0.005)


@pytest.fixture
def toy():
    return Toy()


@pytest.fixture
def servers(toy):
    started = []

    def make(**options) -> WireServer:
        server = WireServer("127.0.0.1", 0, toy, **options)
        server.start()
        started.append(server)
        return server

    yield make
    for server in started:
        server.stop(timeout=1)


@pytest.fixture
def server(servers):
    return servers()


@pytest.fixture
def connect():
    clients = []

    def make(server: WireServer) -> WireClient:
        client = WireClient(*server.address, socket_module=gevent.socket)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


# ---- requests and responses --------------------------------------------------------------------------------


def test_address_is_the_bound_port(server):
    host, port = server.address
    assert host == "127.0.0.1"
    assert port > 0


def test_call_gets_its_response_and_dispatch_a_typed_request(server, connect, toy):
    client = connect(server)
    response = client.call("Heartbeat", **HEARTBEAT, unknown_key=[1, 2])
    assert response["error_code"] == 0
    assert response["api"] == "Heartbeat"
    (request,) = toy.dispatched
    assert request == HeartbeatRequest(**HEARTBEAT, group_instance_id=None)
    assert server.requests_total == 1


def test_a_join_carries_the_client_id_and_the_peers_host(server, connect, toy):
    client = connect(server)
    client.call("JoinGroup", **JOIN)
    (request,) = toy.dispatched
    assert (request.client_id, request.client_host) == ("wire-test-client", "/127.0.0.1")


def test_response_correlation_id_is_the_requests_and_comes_first_spec_2(server, connect, toy):
    toy.behaviours["Heartbeat"] = lambda request, respond: respond({"error_code": 0, "correlation_id": 999})
    client = connect(server)
    correlation_id = client.send("Heartbeat", **HEARTBEAT, correlation_id=-(2**31))
    response = client.receive()
    assert response == {"correlation_id": correlation_id, "error_code": 0}
    assert next(iter(response)) == "correlation_id"


def test_pipelined_requests_wait_behind_a_parked_one_spec_1(server, connect, toy):
    toy.behaviours["JoinGroup"] = toy.park
    client = connect(server)
    client.send_raw(
        frame_bytes({"api": "JoinGroup", "api_version": 0, "correlation_id": 1, **JOIN})
        + frame_bytes({"api": "Heartbeat", "api_version": 0, "correlation_id": 2, **HEARTBEAT})
        + frame_bytes({"api": "Heartbeat", "api_version": 0, "correlation_id": 3, **HEARTBEAT})
    )
    assert toy.parked_event.wait(timeout=5)
    # Waiting for something that must not happen needs a timeout: the hub runs the server meanwhile.
    with pytest.raises(TimeoutError):
        client.receive(timeout=0.2)
    assert toy.apis() == ["JoinGroup"]
    toy.parked[0]({"error_code": 79, "member_id": "m-1"})
    assert [client.receive()["correlation_id"] for _ in range(3)] == [1, 2, 3]
    assert toy.apis() == ["JoinGroup", "Heartbeat", "Heartbeat"]


def test_responses_answered_later_from_other_greenlets_keep_request_order(server, connect, toy):
    toy.behaviours["SyncGroup"] = lambda request, respond: gevent.spawn_later(
        0.05, respond, {"error_code": 0, "assignment": b"late"}
    )
    toy.behaviours["OffsetFetch"] = lambda request, respond: gevent.spawn(respond, {"error_code": 0, "topics": []})
    client = connect(server)
    sent = [
        client.send("SyncGroup", **SYNC),
        client.send("Heartbeat", **HEARTBEAT),
        client.send("OffsetFetch", **FETCH),
        client.send("SyncGroup", **SYNC),
    ]
    responses = [client.receive() for _ in sent]
    assert [response["correlation_id"] for response in responses] == sent
    assert [response.get("assignment") for response in responses] == [b"late", None, None, b"late"]
    assert responses[2]["topics"] == []


def test_a_frame_fed_in_pieces_is_answered(server, connect):
    client = connect(server)
    data = frame_bytes({"api": "Heartbeat", "api_version": 0, "correlation_id": 5, **HEARTBEAT})
    for index in range(len(data)):
        client.send_raw(data[index : index + 1])
        gevent.sleep(0)  # let the server read each piece on its own
    assert client.receive()["correlation_id"] == 5


def test_requests_sent_before_a_half_close_are_still_answered(server, connect):
    client = connect(server)
    first, second = client.send("Heartbeat", **HEARTBEAT), client.send("ApiVersions")
    client.half_close()
    assert [client.receive()["correlation_id"], client.receive()["correlation_id"]] == [first, second]
    assert client.closed_by_peer()


def test_respond_twice_sends_one_response(server, connect, toy):
    def twice(request, respond):
        respond({"error_code": 0})
        respond({"error_code": 27})

    toy.behaviours["Heartbeat"] = twice
    client = connect(server)
    assert client.call("Heartbeat", **HEARTBEAT)["error_code"] == 0
    assert client.call("ApiVersions")["api"] == "ApiVersions"


# ---- requests refused before dispatch (§2) -----------------------------------------------------------------


def test_unknown_api_gets_35_and_the_connection_stays_usable_spec_2(server, connect, toy):
    client = connect(server)
    response = client.call("Produce", topic="t")
    assert response["error_code"] == 35
    assert "Produce" in response["error_message"]
    assert client.call("Heartbeat", **HEARTBEAT, api_version=1)["error_code"] == 35
    assert client.call("Heartbeat", **HEARTBEAT)["error_code"] == 0
    assert toy.apis() == ["Heartbeat"]


def test_invalid_field_gets_42_naming_it_and_the_connection_stays_usable_spec_2(server, connect, toy):
    client = connect(server)
    bad_join = {**JOIN, "protocols": [{"name": "range", "metadata": "not bin"}]}
    response = client.call("JoinGroup", **bad_join)
    assert response["error_code"] == 42
    assert response["error_message"] == "JoinGroup.protocols[0].metadata must be bin, got str"
    assert client.call("Heartbeat", **HEARTBEAT)["error_code"] == 0
    assert toy.apis() == ["Heartbeat"]
    assert server.frame_errors_total == 0


# ---- bad frames (§1) ---------------------------------------------------------------------------------------

HEADER = {"api": "Heartbeat", "api_version": 0}
BAD_FRAMES = {
    # A length over the limit and only a few body bytes: the answer must not wait for the 2000000 bytes.
    "too-long": (struct.pack(">I", 2_000_000) + b"\x80" * 10, -1, "frame length 2000000 exceeds max.request.bytes"),
    "zero-length": (b"\x00\x00\x00\x00", -1, "frame length 0 is not allowed"),
    "garbage": (b"\x00\x00\x00\x03\xc1\xc1\xc1", -1, "frame is not valid MessagePack"),
    "not-a-map": (frame_bytes(["api", "Heartbeat"]), -1, "frame is not a MessagePack map"),
    "no-header": (frame_bytes({"correlation_id": 9, **HEARTBEAT}), 9, "header field 'api' is missing"),
    "bad-correlation-id": (frame_bytes({**HEADER, "correlation_id": "9"}), -1, "header field 'correlation_id'"),
    "bad-api-version": (frame_bytes({**HEADER, "api_version": "0", "correlation_id": 4}), 4, "'api_version'"),
}


@pytest.mark.parametrize(("data", "correlation_id", "message"), BAD_FRAMES.values(), ids=BAD_FRAMES.keys())
def test_bad_frame_gets_an_error_frame_and_a_close_while_others_carry_on_spec_1(
    server, connect, toy, data, correlation_id, message
):
    bystander = connect(server)
    assert bystander.call("Heartbeat", **HEARTBEAT)["error_code"] == 0
    client = connect(server)
    client.send_raw(data)
    response = client.receive()
    assert response["correlation_id"] == correlation_id
    assert response["error_code"] == 42
    assert message in response["error_message"]
    assert client.closed_by_peer()
    assert server.frame_errors_total == 1
    assert bystander.call("Heartbeat", **HEARTBEAT)["error_code"] == 0
    assert len(toy.dispatched) == 2  # the bystander's two; nothing from the bad connection
    client.close()  # the server reads on until the client closes, so its close cannot turn into a reset
    wait_until(lambda: server.connections_open == 1)


def test_requests_before_a_bad_frame_are_answered_first_spec_1(server, connect, toy):
    client = connect(server)
    client.send_raw(
        frame_bytes({**HEADER, "correlation_id": 1, **HEARTBEAT})
        + b"\x00\x00\x00\x00"
        + frame_bytes({**HEADER, "correlation_id": 3, **HEARTBEAT})
    )
    assert client.receive()["correlation_id"] == 1
    assert client.receive() == {
        "correlation_id": -1,
        "error_code": 42,
        "error_message": "frame length 0 is not allowed",
    }
    assert client.closed_by_peer()
    assert len(toy.dispatched) == 1


def test_max_request_bytes_is_the_servers(servers, connect, toy):
    server = servers(max_request_bytes=128)
    client = connect(server)
    assert client.call("Heartbeat", **HEARTBEAT)["error_code"] == 0
    client.send("Heartbeat", **HEARTBEAT, padding="x" * 128)
    assert "exceeds max.request.bytes 128" in client.receive()["error_message"]
    assert client.closed_by_peer()


# ---- failures inside dispatch ------------------------------------------------------------------------------


def test_exception_in_dispatch_gets_unknown_server_error_and_the_server_carries_on(server, connect, toy):
    def boom(request, respond):
        raise RuntimeError("handler bug")

    toy.behaviours["Heartbeat"] = boom
    client = connect(server)
    response = client.call("Heartbeat", **HEARTBEAT)
    assert response["error_code"] == -1
    assert "handler bug" not in response["error_message"]
    assert client.call("ApiVersions")["error_code"] == 0
    assert connect(server).call("ApiVersions")["error_code"] == 0


def test_exception_after_responding_keeps_the_response(server, connect, toy):
    def answer_then_fail(request, respond):
        respond({"error_code": 0, "ok": True})
        raise RuntimeError("after the fact")

    toy.behaviours["Heartbeat"] = answer_then_fail
    assert connect(server).call("Heartbeat", **HEARTBEAT)["ok"] is True


@pytest.mark.parametrize("response", [{"error_code": 0, "value": object()}, ["not", "a", "map"], None])
def test_a_response_that_cannot_be_sent_becomes_unknown_server_error(server, connect, toy, response):
    toy.behaviours["Heartbeat"] = lambda request, respond: respond(response)
    client = connect(server)
    assert client.call("Heartbeat", **HEARTBEAT)["error_code"] == -1
    assert client.call("ApiVersions")["error_code"] == 0


def test_respond_after_the_client_left_is_a_no_op(server, connect, toy):
    toy.behaviours["JoinGroup"] = toy.park
    client = connect(server)
    client.send("JoinGroup", **JOIN)
    assert toy.parked_event.wait(timeout=5)
    client.close()
    toy.parked[0]({"error_code": 0})  # must not raise
    wait_until(lambda: server.connections_open == 0)
    toy.parked[0]({"error_code": 0})
    assert connect(server).call("ApiVersions")["error_code"] == 0


# ---- limits and lifecycle ----------------------------------------------------------------------------------


def test_max_connections_closes_the_extra_one_at_once(servers, connect):
    server = servers(max_connections=2)
    first, second = connect(server), connect(server)
    for client in (first, second):  # answered: both are being served
        assert client.call("ApiVersions")["error_code"] == 0
    extra = connect(server)
    assert extra.closed_by_peer()
    assert server.connections_rejected_total == 1
    assert server.connections_open == 2
    assert first.call("ApiVersions")["error_code"] == 0
    first.close()
    wait_until(lambda: server.connections_open == 1)
    assert connect(server).call("ApiVersions")["error_code"] == 0


def test_stop_lets_the_request_in_hand_finish_and_closes_idle_connections(servers, connect, toy):
    toy.behaviours["JoinGroup"] = toy.park
    server = servers()
    busy, idle = connect(server), connect(server)
    assert idle.call("ApiVersions")["error_code"] == 0
    joined = busy.send("JoinGroup", **JOIN)
    busy.send("Heartbeat", **HEARTBEAT)  # read but not dispatched: dropped by stop
    assert toy.parked_event.wait(timeout=5)

    stopping = gevent.spawn(server.stop, 5)
    assert idle.closed_by_peer()
    with pytest.raises(ConnectionRefusedError):
        WireClient(*server.address, socket_module=gevent.socket)
    assert not stopping.dead
    toy.parked[0]({"error_code": 0, "member_id": "m-1"})
    assert busy.receive()["correlation_id"] == joined
    assert busy.closed_by_peer()
    stopping.get(timeout=5)
    assert toy.apis() == ["ApiVersions", "JoinGroup"]
    assert server.connections_open == 0


def test_stop_closes_unanswered_requests_after_its_timeout(servers, connect, toy):
    toy.behaviours["JoinGroup"] = toy.park
    server = servers()
    client = connect(server)
    client.send("JoinGroup", **JOIN)
    assert toy.parked_event.wait(timeout=5)
    started = time.monotonic()
    server.stop(timeout=0.2)
    assert time.monotonic() - started < 2
    assert client.closed_by_peer()
    assert server.connections_open == 0
    toy.parked[0]({"error_code": 0})  # too late: a no-op
    with pytest.raises(ConnectionError):
        client.receive()


def test_a_response_larger_than_the_socket_buffers_arrives_whole(server, connect, toy):
    blob = bytes(range(256)) * (16 << 12)  # 16 MiB: written in many sends
    toy.behaviours["Heartbeat"] = lambda request, respond: respond({"error_code": 0, "blob": blob})
    client = connect(server)
    assert client.call("Heartbeat", **HEARTBEAT, receive_timeout=30)["blob"] == blob
    assert client.call("Heartbeat", **HEARTBEAT, receive_timeout=30)["blob"] == blob  # and the next one too


def test_a_client_that_stops_reading_is_closed_after_the_send_timeout(servers, connect, toy):
    toy.behaviours["Heartbeat"] = lambda request, respond: respond({"error_code": 0, "blob": bytes(32 << 20)})
    server = servers(send_timeout_seconds=0.2)
    client = connect(server)
    client.send("Heartbeat", **HEARTBEAT)  # and never reads the answer
    wait_until(lambda: server.connections_open == 0, timeout=10)
    other = connect(server)  # the server goes on serving others
    toy.behaviours.pop("Heartbeat")
    assert other.call("Heartbeat", **HEARTBEAT)["error_code"] == 0
