"""The gateway's connections to its upstream broker (:class:`zkcoord.server.gateway.UpstreamBrokers`) on loopback
sockets: how many host lookups a burst of client connections costs."""

import contextlib
import socket as stdlib_socket

import gevent
import pytest
from gevent import socket
from gevent.event import Event

from zkcoord.server import gateway
from zkcoord.server.gateway import UpstreamBrokers, UpstreamUnavailable

CONNECTIONS = 50
BOUND_S = 10.0


@pytest.fixture
def broker_port():
    """A listening socket that never accepts: the kernel completes connections up to its backlog."""
    with contextlib.closing(socket.socket()) as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen(CONNECTIONS * 2)
        yield listening.getsockname()[1]


class HeldLookups:
    """getaddrinfo for the test: counts the lookups and answers 127.0.0.1 once released."""

    def __init__(self):
        self.count = 0
        self.released = Event()

    def __call__(self, host, port, *args, **kwargs):
        self.count += 1
        self.released.wait()
        return [(stdlib_socket.AF_INET, stdlib_socket.SOCK_STREAM, 6, "", ("127.0.0.1", port or 0))]


@pytest.fixture
def lookups(monkeypatch):
    held = HeldLookups()
    monkeypatch.setattr(gateway.socket, "getaddrinfo", held)
    return held


def upstream_at(host: str, port: int) -> UpstreamBrokers:
    upstream = UpstreamBrokers(upstream_timeout_s=BOUND_S)
    upstream.brokers = {0: (host, port)}
    return upstream


def test_connections_opened_together_look_the_broker_name_up_once(broker_port, lookups):
    upstream = upstream_at("broker.invalid", broker_port)
    opening = [gevent.spawn(upstream.connect, 0) for _ in range(CONNECTIONS)]
    gevent.idle()  # every connection waits for the lookup
    lookups.released.set()
    gevent.joinall(opening, timeout=BOUND_S)
    try:
        assert lookups.count == 1
        assert [each.value.getpeername()[1] for each in opening] == [broker_port] * CONNECTIONS
    finally:
        for each in opening:
            if each.successful():
                each.value.close()


def test_a_numeric_broker_address_is_not_looked_up(broker_port, lookups):
    with contextlib.closing(upstream_at("127.0.0.1", broker_port).connect(0)) as sock:
        assert sock.getpeername() == ("127.0.0.1", broker_port)
    assert lookups.count == 0


def test_connections_waiting_for_a_lookup_whose_greenlet_was_killed_fail_instead_of_waiting(broker_port, lookups):
    upstream = upstream_at("broker.invalid", broker_port)
    first, second = gevent.spawn(upstream.connect, 0), gevent.spawn(upstream.connect, 0)
    gevent.idle()
    first.kill()
    second.join(timeout=BOUND_S)
    assert isinstance(second.exception, UpstreamUnavailable)
