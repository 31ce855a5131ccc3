"""The nemesis's primitives (docs/faults.md "Fault injection") against real ZooKeeper and real node processes: the
loopback proxy cuts, stalls and survives a ZooKeeper restart; a node on a full log disk answers errors for the
appends it could not store and serves again once the disk is healed; the fsync shim slows a process's fsync."""

import contextlib
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time

import pytest
from coordinator_requests import commit, fetch
from kazoo.client import KazooClient, KazooState
from wire_client import WireClient

from zkcoord.errors import ErrorCode
from zkcoord.faults.disk import RLIMIT, LogDisk
from zkcoord.faults.fsync import SlowFsync
from zkcoord.faults.proxy import LoopbackProxy
from zkcoord.testing.node_process import NodeProcess
from zkcoord.testing.zookeeper import TEST_TICK_TIME_MS, wait_until
from zkcoord.zk import admin
from zkcoord.zk.server import EmbeddedZooKeeper, free_port

TOPIC = "t"
GROUP = "g"
NODE_OVERRIDES = {
    "offsets.topic.num.partitions": 1,
    "zookeeper.session.timeout.ms": 2000,
    "coordinator.load.retry.backoff.ms": 200,
}


def zookeeper_address(connect: str) -> tuple[str, int]:
    host, port = connect.split("/", 1)[0].split(",")[0].rsplit(":", 1)
    return host, int(port)


class StateLog:
    """Every state a kazoo client went through, in order."""

    def __init__(self, client: KazooClient):
        self.states: list[str] = []
        client.add_listener(self.states.append)

    def saw(self, state: str) -> bool:
        return state in self.states


@contextlib.contextmanager
def kazoo_through(proxy: LoopbackProxy, session_timeout_s: float, chroot: str = ""):
    client = KazooClient(hosts=proxy.connect_string + chroot, timeout=session_timeout_s)
    client.start(timeout=15)
    try:
        yield client
    finally:
        client.stop()
        client.close()


@contextlib.contextmanager
def echo_server():
    """A TCP echo server on 127.0.0.1; yields (address, the bytes it has received so far)."""
    listener = socket.create_server(("127.0.0.1", 0))
    received = bytearray()

    def echo(conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):  # a cut resets it
            while data := conn.recv(4096):
                received.extend(data)
                conn.sendall(data)

    def accept() -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = listener.accept()
                threading.Thread(target=echo, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield listener.getsockname(), received
    finally:
        with contextlib.suppress(OSError):
            listener.shutdown(socket.SHUT_RDWR)
        listener.close()


def receive_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        assert chunk, f"connection ended after {len(data)} of {size} bytes"
        data += chunk
    return data


# -- the proxy ---------------------------------------------------------------------------------------------------


def test_bytes_read_during_a_stall_arrive_after_heal_and_a_cut_resets_connections():
    with echo_server() as (upstream, received), LoopbackProxy(upstream, "echo") as proxy:
        with socket.create_connection(proxy.address, timeout=10) as client:
            client.sendall(b"before")
            assert receive_exactly(client, 6) == b"before"
            proxy.stall()
            client.sendall(b"held")
            late = socket.create_connection(proxy.address, timeout=10)  # accepted and held, not refused
            late.sendall(b"late")
            wait_until(lambda: proxy.connections == 2, 5, what="the late connection accepted")
            assert bytes(received) == b"before"
            proxy.heal()
            assert receive_exactly(client, 4) == b"held"
            assert receive_exactly(late, 4) == b"late"
            proxy.cut()
            with pytest.raises(ConnectionResetError):
                client.recv(4096)
            late.close()
        # The reset may come while connecting or at the first read, depending on who runs first.
        with pytest.raises(ConnectionResetError), socket.create_connection(proxy.address, timeout=10) as refused:
            refused.recv(4096)
        proxy.heal()
        with socket.create_connection(proxy.address, timeout=10) as client:
            client.sendall(b"healed")
            assert receive_exactly(client, 6) == b"healed"


def test_a_cut_suspends_a_zookeeper_session_and_heal_reconnects_it(zk_server):
    with LoopbackProxy(zookeeper_address(zk_server), "zk") as proxy, kazoo_through(proxy, 10.0) as client:
        states = StateLog(client)
        session = client.client_id
        proxy.cut()
        wait_until(lambda: states.saw(KazooState.SUSPENDED), 10, what="SUSPENDED")
        proxy.heal()
        wait_until(lambda: client.state == KazooState.CONNECTED, 15, what="reconnected")
        assert client.client_id == session
        assert not states.saw(KazooState.LOST)


def test_a_stall_past_the_session_timeout_expires_the_session(zk_connect, zk):
    chroot = zk_connect[zk_connect.index("/") :]
    proxy = LoopbackProxy(zookeeper_address(zk_connect), "zk")
    with proxy.start(), kazoo_through(proxy, 1.0, chroot) as client:
        states = StateLog(client)
        client.create("/stalled", ephemeral=True)
        proxy.stall()
        # The server, not the client, expires the session: its ephemeral goes while the proxy holds every byte.
        wait_until(lambda: zk.exists("/stalled") is None, 15, what="the server expires the session")
        proxy.heal()
        wait_until(lambda: states.saw(KazooState.LOST), 15, what="the client learns its session is LOST")
        wait_until(lambda: client.state == KazooState.CONNECTED, 15, what="a new session")


def test_a_zookeeper_restart_behind_the_proxy_keeps_the_session(tmp_path):
    port = free_port("127.0.0.1")
    data_dir = tmp_path / "zookeeper"
    server = EmbeddedZooKeeper(port=port, data_dir=data_dir, tick_time_ms=TEST_TICK_TIME_MS).start()
    try:
        with LoopbackProxy(("127.0.0.1", port), "zk") as proxy, kazoo_through(proxy, 20.0) as client:
            states = StateLog(client)
            session = client.client_id
            client.create("/survives", b"x")
            server.stop()
            wait_until(lambda: states.saw(KazooState.SUSPENDED), 10, what="SUSPENDED")
            server = EmbeddedZooKeeper(port=port, data_dir=data_dir, tick_time_ms=TEST_TICK_TIME_MS).start()
            wait_until(lambda: client.state == KazooState.CONNECTED, 20, what="reconnected to the new server")
            assert client.client_id == session
            assert client.get("/survives")[0] == b"x"
    finally:
        server.stop()


def test_clients_reach_a_node_at_its_advertised_proxy_port(zk_connect, tmp_path):
    with LoopbackProxy(("127.0.0.1", 1), "node-1") as proxy:
        node = NodeProcess(1, zk_connect, tmp_path / "log", NODE_OVERRIDES, tmp_path, advertised_port=proxy.port)
        try:
            node.wait_serving()
            proxy.upstream = node.address
            with WireClient(*proxy.address, timeout=10) as client:

                def coordinator() -> dict:
                    answer = client.call("FindCoordinator", key=GROUP, key_type=0, receive_timeout=10)
                    return answer if answer["error_code"] == 0 else None

                answer = wait_until(coordinator, 20, what="a coordinator for the group")
            assert (answer["host"], answer["port"]) == proxy.address
        finally:
            node.stop()


# -- a full log disk ---------------------------------------------------------------------------------------------


def call(client: WireClient, request: dict) -> dict:
    return client.call(request.pop("api"), receive_timeout=10, **request)


def commit_error(client: WireClient, offset: int) -> int:
    answer = call(client, commit("", -1, {(TOPIC, 0): offset}, group=GROUP))
    return answer["topics"][0]["partitions"][0]["error_code"]


def fetched_offset(client: WireClient) -> int:
    answer = call(client, fetch(GROUP, [(TOPIC, 0)]))
    assert answer["error_code"] == 0, answer
    return answer["topics"][0]["partitions"][0]["committed_offset"]


@contextlib.contextmanager
def node_on(zk, zk_connect, log_dir, workdir, env=None):
    admin.create_topic(zk, TOPIC, 1)
    node = NodeProcess(1, zk_connect, log_dir, NODE_OVERRIDES, workdir, env=env)
    try:
        node.wait_serving()
        with WireClient(*node.address, timeout=10) as client:
            wait_until(lambda: commit_error(client, 0) == 0, 20, what="the node serves the group")
            yield node, client
    finally:
        node.stop()


@pytest.mark.parametrize("mode", [RLIMIT, None], ids=["rlimit", "tmpfs-if-allowed"])
def test_a_node_on_a_full_disk_refuses_unstored_commits_and_serves_again_after_heal(zk, zk_connect, tmp_path, mode):
    with (
        LogDisk(tmp_path / "log", size_mb=4, mode=mode) as disk,
        node_on(zk, zk_connect, disk.directory, tmp_path) as (
            node,
            client,
        ),
    ):
        assert mode is None or disk.mode == mode
        acknowledged = 0
        disk.fill(node.process.pid)
        # tmpfs: appends into the page the segment already has still fit (about 60 commits of this size).
        for offset in range(1, 500):
            error = commit_error(client, offset)
            if error != 0:
                break
            acknowledged = offset
        assert error == ErrorCode.NOT_COORDINATOR  # Kafka's answer to a commit that met KAFKA_STORAGE_ERROR
        for offset in range(500, 505):
            assert commit_error(client, offset) != 0
        assert fetched_offset(client) >= acknowledged  # nothing acknowledged was lost
        assert node.alive()
        disk.heal(node.process.pid)
        wait_until(lambda: commit_error(client, 1000) == 0, 20, what="commits acknowledged again after heal")
        assert fetched_offset(client) == 1000


# -- a slow fsync ------------------------------------------------------------------------------------------------

FSYNC_TIMER = textwrap.dedent(
    """
    import os, sys, tempfile, time
    with tempfile.TemporaryFile() as file:
        file.write(b"x")
        started = time.monotonic()
        os.fsync(file.fileno())
        print(int((time.monotonic() - started) * 1000))
    """
)


def fsync_ms(slow: SlowFsync) -> int:
    environment = {**os.environ, **slow.env()}
    command = [sys.executable, "-c", FSYNC_TIMER]
    done = subprocess.run(command, env=environment, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return int(done.stdout)


def test_the_fsync_shim_delays_fsync_until_healed(tmp_path):
    slow = SlowFsync(tmp_path / "fsync-delay")
    assert slow.available, "no C compiler: the shim could not be built"
    slow.slow(2000)
    assert fsync_ms(slow) >= 2000
    slow.heal()
    assert fsync_ms(slow) < 2000  # an fsync of a small file takes milliseconds, even on a loaded machine


def test_the_fsync_shim_slows_a_nodes_commits(zk, zk_connect, tmp_path):
    slow = SlowFsync(tmp_path / "fsync-delay")
    with node_on(zk, zk_connect, tmp_path / "log", tmp_path, env=slow.env()) as (_, client):
        slow.slow(300)
        started = time.monotonic()
        assert commit_error(client, 1) == 0
        assert time.monotonic() - started >= 0.3  # the log fsyncs before it acknowledges
        slow.heal()
        assert commit_error(client, 2) == 0
