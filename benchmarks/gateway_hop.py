"""The gateway's forward path alone, for benchmarks/gateway.py: a client, a node's KafkaListener and an echo
broker in this one process, greenlets of one gevent hub on loopback, so no process has to be woken up and other
processes blur the figures less.

The echo broker answers every request with a frame of ``answer_bytes`` carrying its correlation id. The client
sends Produce v9 requests (acks=1, 200 bytes of records) one at a time, through the listener's gateway port and
straight to the echo broker; the difference of the CPU per round trip is what forwarding one request costs the
node's code (both sockets' system calls included).
"""

from __future__ import annotations

import contextlib
import statistics
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass

import gevent
from gevent import socket
from gevent.server import StreamServer

from zkcoord.server.gateway import UpstreamBrokers
from zkcoord.server.kafka_listener import KafkaListener
from zkcoord.server.limits import ConnectionLimits
from zkcoord.zk.server import free_port_block

HOST = "127.0.0.1"
SIZE = struct.Struct(">i")
CLIENT_ID = b"rdkafka"
# Produce v9 (flexible): api key, version, correlation id, client id, no tagged fields; no transactional id,
# acks=1, timeout 30 s; then 200 bytes standing for the topics (never parsed on the way through)
_PRODUCE_HEAD = struct.Struct(f">hhih{len(CLIENT_ID)}sBBhi")
_RECORDS = b"x" * 200


def _read_exactly(sock: socket.socket, size: int) -> bytearray:
    data = bytearray(size)
    view = memoryview(data)
    while view:
        received = sock.recv_into(view)
        if not received:
            raise ConnectionError("connection closed inside a frame")
        view = view[received:]
    return data


def _produce_request(correlation_id: int) -> bytes:
    body = _PRODUCE_HEAD.pack(0, 9, correlation_id, len(CLIENT_ID), CLIENT_ID, 0, 0, 1, 30_000) + _RECORDS
    return SIZE.pack(len(body)) + body


def _echo_broker(answer_bytes: int):
    """A connection handler that answers each request with ``answer_bytes`` after the correlation id."""

    def serve(sock: socket.socket, _peer) -> None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        answer = bytearray(SIZE.pack(4 + 1 + answer_bytes) + b"\0\0\0\0\0" + b"r" * answer_bytes)
        with contextlib.suppress(ConnectionError, OSError):
            while True:
                (size,) = SIZE.unpack(_read_exactly(sock, SIZE.size))
                answer[4:8] = _read_exactly(sock, size)[4:8]  # its correlation id
                sock.sendall(answer)

    return serve


@contextlib.contextmanager
def forwarding(answer_bytes: int) -> Iterator[dict[str, int]]:
    """An echo broker and a listener whose one gateway port fronts it: the port of each route."""
    broker = StreamServer((HOST, 0), _echo_broker(answer_bytes))
    broker.start()
    upstream = UpstreamBrokers(upstream_timeout_s=5.0)
    upstream.brokers = {0: (HOST, broker.address[1])}
    first = free_port_block(HOST, 2)

    def unexpected(*_):
        raise AssertionError("only forwarded requests are sent here")

    listener = KafkaListener(
        HOST, first, {first + 1: 0}, unexpected, upstream, unexpected, 1 << 20, ConnectionLimits("bench", 16), 60
    )
    listener.start()
    try:
        yield {"gateway": first + 1, "direct": broker.address[1]}
    finally:
        listener.stop()
        broker.stop()


def _round_trips(port: int, count: int) -> float:
    """CPU seconds of this process per round trip of ``count`` requests, one at a time, on ``port``."""
    sock = socket.create_connection((HOST, port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        started = time.process_time()
        for correlation_id in range(count):
            sock.sendall(_produce_request(correlation_id))
            (size,) = SIZE.unpack(_read_exactly(sock, SIZE.size))
            _read_exactly(sock, size)
        return (time.process_time() - started) / count
    finally:
        sock.close()


@dataclass(frozen=True)
class HopCost:
    answer_bytes: int
    gateway_cpu_s: float  # per round trip, median; client, listener and echo broker together
    direct_cpu_s: float  # the same without the listener

    @property
    def forwarding_s(self) -> float:
        return self.gateway_cpu_s - self.direct_cpu_s


def measure(answer_bytes: int, count: int, repeats: int) -> HopCost:
    """One untimed round, then ``repeats`` rounds of both routes in turn: the median CPU per round trip of each."""
    cpu: dict[str, list[float]] = {"gateway": [], "direct": []}
    with forwarding(answer_bytes) as ports:
        for round_number in range(repeats + 1):
            for route, port in ports.items():
                per_round_trip = gevent.spawn(_round_trips, port, count).get()
                if round_number:
                    cpu[route].append(per_round_trip)
    return HopCost(answer_bytes, statistics.median(cpu["gateway"]), statistics.median(cpu["direct"]))
