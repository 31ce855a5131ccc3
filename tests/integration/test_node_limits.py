"""A node process under abuse (docs/coordinator.md "Limits"): idle and trickling sockets are cut, per-IP
quotas keep one address from taking every slot, and repeated names or long ids cannot inflate answers or
state. Attackers bind 127.0.0.2; the well-behaved client is 127.0.0.1. Timeouts are configured small so
that each test takes a few seconds."""

import contextlib
import selectors
import socket
import struct
import time

import pytest
from wire_client import WireClient

from zkcoord.testing.node_process import NodeProcess

ATTACKER = "127.0.0.2"
MAX_CONNECTIONS = 1024
WAIT_SECONDS = 20.0


@contextlib.contextmanager
def running_node(zk_connect, tmp_path, overrides):
    node = NodeProcess(1, zk_connect, tmp_path / "log", {"offsets.topic.num.partitions": 1, **overrides}, tmp_path)
    try:
        node.wait_serving()
        yield node
    finally:
        node.stop()


@contextlib.contextmanager
def attacker_sockets(port, count, first_bytes=b""):
    """``count`` connections from ATTACKER, each having sent ``first_bytes``; all closed on exit."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sockets.append(sock)
            sock.bind((ATTACKER, 0))
            sock.connect(("127.0.0.1", port))
            if first_bytes:
                sock.sendall(first_bytes)
        yield sockets
    finally:
        for sock in sockets:
            sock.close()


def closed_by_server(sockets, timeout):
    """How many of ``sockets`` the server closed (EOF or reset) within ``timeout`` seconds."""
    selector = selectors.DefaultSelector()
    for sock in sockets:
        selector.register(sock, selectors.EVENT_READ)
    closed = 0
    deadline = time.monotonic() + timeout
    while closed < len(sockets) and time.monotonic() < deadline:
        for key, _ in selector.select(max(0.0, deadline - time.monotonic())):
            try:
                data = key.fileobj.recv(4096)
            except OSError:
                data = b""
            if not data:
                selector.unregister(key.fileobj)
                closed += 1
    selector.close()
    return closed


def served(port, timeout=5.0) -> bool:
    """True when a fresh client from 127.0.0.1 gets an answer to a request."""
    try:
        with WireClient("127.0.0.1", port, timeout=timeout) as client:
            return "error_code" in client.call("FindCoordinator", key="g", key_type=0, receive_timeout=timeout)
    except (ConnectionError, TimeoutError, OSError):
        return False


def eventually_served(port, timeout=WAIT_SECONDS) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if served(port, timeout=2.0):
            return time.monotonic() - started
        time.sleep(0.1)
    raise AssertionError(f"127.0.0.1 was not served within {timeout}s")


# A 4-byte length announcing a 1000-byte request, then a single byte of it.
TRICKLE = struct.pack(">I", 1000) + b"\x85"


@pytest.mark.parametrize(
    ("first_bytes", "overrides", "reason"),
    [
        (b"", {"connections.max.idle.ms": 1000, "request.read.timeout.ms": 60_000}, "idle"),
        (TRICKLE, {"connections.max.idle.ms": 60_000, "request.read.timeout.ms": 1000}, "slow request"),
    ],
    ids=["idle", "trickling"],
)
def test_a_full_node_of_idle_or_trickling_connections_frees_its_slots_for_a_new_client(
    zk, zk_connect, tmp_path, first_bytes, overrides, reason
):
    with running_node(zk_connect, tmp_path, {"max.connections": MAX_CONNECTIONS, **overrides}) as node:
        port = node.wait_serving()
        with attacker_sockets(port, MAX_CONNECTIONS, first_bytes) as sockets:
            assert closed_by_server(sockets, WAIT_SECONDS) == MAX_CONNECTIONS, node.log_tail()
            eventually_served(port)
        assert f"reason={reason}" in node.log_tail(10**6)


def test_a_per_ip_quota_refuses_the_attackers_address_but_serves_another(zk, zk_connect, tmp_path):
    overrides = {"max.connections.per.ip": 8, "max.connections.per.ip.overrides": "127.0.0.1:20"}
    with running_node(zk_connect, tmp_path, overrides) as node:
        port = node.wait_serving()
        with attacker_sockets(port, 8) as kept:
            with attacker_sockets(port, 4) as refused:
                assert closed_by_server(refused, WAIT_SECONDS) == 4
            clients = [WireClient("127.0.0.1", port) for _ in range(12)]  # beyond 8: the override applies
            try:
                for client in clients:
                    assert "error_code" in client.call("FindCoordinator", key="g", key_type=0)
            finally:
                for client in clients:
                    client.close()
            assert closed_by_server(kept, 0.5) == 0  # the attacker's first 8 stay connected
        refusals = [line for line in node.log_tail(10**6).splitlines() if "connection refused" in line]
        assert len(refusals) == 1 and "reason=max_connections_per_ip" in refusals[0]  # 4 refused, one line logged


def test_a_request_repeating_one_name_gets_a_bounded_answer_and_long_group_ids_are_refused(zk, zk_connect, tmp_path):
    with running_node(zk_connect, tmp_path, {}) as node, WireClient("127.0.0.1", node.wait_serving()) as client:
        deadline = time.monotonic() + WAIT_SECONDS
        while client.call("FindCoordinator", key="g", key_type=0)["error_code"] != 0:  # leads the partition
            assert time.monotonic() < deadline, node.log_tail()
            time.sleep(0.05)
        metadata = client.call("Metadata", topics=["some-topic"] * 80_000)
        assert [topic["name"] for topic in metadata["topics"]] == ["some-topic"]
        described = client.call("DescribeGroups", groups=["g"] * 50_000)["groups"]
        assert [group["group_id"] for group in described] == ["g"]
        long_id = "g" * 100_000
        assert client.call("DescribeGroups", groups=[long_id])["groups"][0]["error_code"] == 24
        assert client.call("OffsetFetch", group_id=long_id, topics=None)["error_code"] == 24
