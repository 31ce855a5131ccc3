"""ZooKeeper for tests: one server per test session, a fresh chroot per test, real session expiry.

Server choice: ``ZKCOORD_ZK_CONNECT`` (an external ensemble), else ``ZKCOORD_ZK_BACKEND=docker``
(a testcontainers ZooKeeper, when a Docker engine answers), else an embedded server from the jars
inside ``pyspark`` with a short ``tickTime`` so that expiry costs well under a second.
"""

import contextlib
import socket
import time
import uuid
from collections.abc import Callable, Iterator

from kazoo.client import KazooClient

from zkcoord import env
from zkcoord.zk.client import started_client
from zkcoord.zk.server import EmbeddedZooKeeper, is_serving

TEST_TICK_TIME_MS = 100
TEST_MAX_SESSION_TIMEOUT_MS = 60_000
ZOOKEEPER_IMAGE = "zookeeper:3.9"


def docker_unavailable_reason() -> str | None:
    """None when a Docker engine answers; otherwise why not (for a clear skip reason)."""
    try:
        import docker
    except ImportError:
        return "the docker package is not installed"
    try:
        client = docker.from_env(timeout=3)
        client.ping()
        client.close()
    except Exception as error:  # docker raises many kinds for "no engine": all mean the same here
        return f"no Docker engine answers ({type(error).__name__})"
    return None


@contextlib.contextmanager
def container_zookeeper(tick_time_ms: int = TEST_TICK_TIME_MS) -> Iterator[str]:
    """A ZooKeeper container through testcontainers; yields its connect string."""
    from testcontainers.core.container import DockerContainer

    container = (
        DockerContainer(ZOOKEEPER_IMAGE)
        .with_env("ZOO_TICK_TIME", str(tick_time_ms))
        .with_env("ZOO_MAX_SESSION_TIMEOUT", str(TEST_MAX_SESSION_TIMEOUT_MS))
        .with_env("ZOO_4LW_COMMANDS_WHITELIST", "srvr,ruok")
        .with_exposed_ports(2181)
    )
    with container:
        host, port = container.get_container_host_ip(), int(container.get_exposed_port(2181))
        wait_until(lambda: is_serving(host, port), timeout=60, what="the ZooKeeper container to serve")
        yield f"{host}:{port}"


@contextlib.contextmanager
def zookeeper_for_tests() -> Iterator[str]:
    """The test session's ZooKeeper connect string (no chroot)."""
    external = env.zookeeper_connect()
    if external:
        yield external
    elif env.zookeeper_backend() == "docker":
        with container_zookeeper() as connect:
            yield connect
    else:
        with EmbeddedZooKeeper(
            tick_time_ms=TEST_TICK_TIME_MS, max_session_timeout_ms=TEST_MAX_SESSION_TIMEOUT_MS
        ) as zk:
            yield zk.connect_string


def fresh_chroot(connect: str, prefix: str = "zkcoord-test") -> str:
    """Create an empty chroot under ``connect`` and return the connect string that uses it."""
    chroot = f"/{prefix}-{uuid.uuid4().hex[:12]}"
    with started_client(connect, timeout=15) as client:
        client.ensure_path(chroot)
    return connect + chroot


def _hosts(client: KazooClient) -> str:
    return ",".join(f"{host}:{port}" for host, port in client.hosts)


def expire_session(client: KazooClient, timeout: float = 15) -> None:
    """Really expire ``client``'s session: open a second connection on the same session id and
    password, then close it; the server ends the session and the first client finds it expired."""
    wait_until(lambda: client.connected and client.client_id, timeout=timeout, what="a session to expire")
    session_id, password = client.client_id
    twin = KazooClient(hosts=_hosts(client), client_id=(session_id, password))
    twin.start(timeout=timeout)
    twin.stop()
    twin.close()


def drop_connection(client: KazooClient) -> None:
    """Cut ``client``'s TCP connection without ending its session (the client sees SUSPENDED)."""
    sock = client._connection._socket  # kazoo keeps no public handle on the socket
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


def wait_until(
    condition: Callable[[], object], timeout: float = 20.0, interval: float = 0.02, what: str = ""
) -> object:
    """Poll ``condition`` until it returns a true value; raise ``TimeoutError`` naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what or condition}")
        time.sleep(interval)
