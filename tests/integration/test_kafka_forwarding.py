"""The Kafka listener's forward path against a broker that misbehaves on purpose: a small broker of the test's
own, in this process, answering each request with an empty frame of its correlation id."""

import struct

import gevent
import pytest
from gevent import socket
from gevent.server import StreamServer

from zkcoord.server.gateway import UpstreamBrokers, read_frame
from zkcoord.server.kafka_listener import KafkaListener
from zkcoord.server.limits import ConnectionLimits
from zkcoord.zk.server import free_port_block

HOST = "127.0.0.1"
SIZE = struct.Struct(">i")


def produce_v9(correlation_id: int) -> bytes:
    """A flexible Produce v9 header (acks=1) and a body the gateway never parses."""
    body = struct.pack(">hhih4sB", 0, 9, correlation_id, 4, b"test", 0) + b"\x00" + struct.pack(">hi", 1, 30_000)
    return SIZE.pack(len(body)) + body


class ClosingBroker:
    """Answers ``answers_per_connection`` requests on each connection, then closes it (as a broker closes an idle
    connection after its connections.max.idle.ms)."""

    def __init__(self, answers_per_connection: int):
        self.answers_per_connection = answers_per_connection
        self.connections = 0
        self.server = StreamServer((HOST, 0), self._serve)

    def _serve(self, sock, _peer) -> None:
        self.connections += 1
        for _ in range(self.answers_per_connection):
            frame = read_frame(sock, 1 << 20)
            if frame is None:
                return
            correlation_id = struct.unpack_from(">i", frame, SIZE.size + 4)[0]
            sock.sendall(SIZE.pack(4) + struct.pack(">i", correlation_id))
        sock.close()


PER_IP = 2  # max.connections.per.ip of the gateway under test


@pytest.fixture
def gateway():
    broker = ClosingBroker(answers_per_connection=1)
    broker.server.start()
    upstream = UpstreamBrokers(upstream_timeout_s=5.0)
    upstream.brokers = {0: (HOST, broker.server.address[1])}
    first = free_port_block(HOST, 2)
    limits = ConnectionLimits("t", 16, max_connections_per_ip=PER_IP)
    listener = KafkaListener(HOST, first, {first + 1: 0}, None, upstream, None, 1 << 20, limits, 60)
    listener.start()
    try:
        yield broker, first + 1
    finally:
        listener.stop()
        broker.server.stop()


def _round_trip(sock, correlation_id: int) -> int:
    sock.sendall(produce_v9(correlation_id))
    answer = read_frame(sock, 1 << 20)
    assert answer is not None, "the gateway closed the client's connection"
    return struct.unpack_from(">i", answer, SIZE.size)[0]


def test_a_broker_closing_an_idle_upstream_connection_leaves_the_clients_connection_open(gateway):
    broker, port = gateway

    def client() -> list[int]:
        with socket.create_connection((HOST, port), timeout=10) as sock:
            first = _round_trip(sock, 7)
            gevent.sleep(0.2)  # the broker has closed the upstream connection meanwhile
            return [first, _round_trip(sock, 8)]

    assert gevent.spawn(client).get(timeout=20) == [7, 8]
    assert broker.connections == 2  # the second request opened a new upstream connection


def test_the_kafka_listener_bounds_connections_per_ip_as_the_msgpack_listener_does(gateway):
    _, port = gateway

    def clients() -> list[int | None]:
        socks = [socket.create_connection((HOST, port), timeout=10) for _ in range(PER_IP + 1)]
        try:
            answers = []
            for correlation_id, sock in enumerate(socks):
                sock.sendall(produce_v9(correlation_id))
                answer = read_frame(sock, 1 << 20)
                answers.append(None if answer is None else struct.unpack_from(">i", answer, SIZE.size)[0])
            return answers
        finally:
            for sock in socks:
                sock.close()

    assert gevent.spawn(clients).get(timeout=20) == [0, 1, None]  # the third from 127.0.0.1 is closed at once
