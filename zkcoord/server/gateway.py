"""The data brokers behind a node's Kafka listener: who they are (ZooKeeper's ``/brokers/ids``), what they
advertise (their ApiVersions, asked once), one upstream connection per client connection, and the addresses
Kafka clients are given for brokers and coordinator nodes.

Each client connection that sends a data request gets its own connection to the broker its port fronts (the
bootstrap port: the lowest-id broker that answers), so correlation ids and order pass through unchanged, as in
Kroxylicious. A broker that cannot be reached within ``upstream_timeout_s`` closes the client's connection,
which is what a client sees of a broker that is down: it refreshes its metadata, never hangs.

IO: gevent sockets and kazoo. Expects the node's gevent hub.
"""

from __future__ import annotations

import contextlib
import logging
import struct
import time

import gevent
from gevent import socket, ssl
from gevent.event import AsyncResult
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from zkcoord.server.cluster import ZooKeeperCluster
from zkcoord.server.config import ServerConfig
from zkcoord.wire.kafka.frames import SIZE, encode_request, read_response
from zkcoord.wire.kafka.rewrite import GatewayView, gateway_view
from zkcoord.wire.kafka.versions import API_VERSIONS
from zkcoord.wire.messages import FindCoordinatorResponse
from zkcoord.zk import layout
from zkcoord.zk.layout import ZnodeDecodeError

log = logging.getLogger(__name__)

Address = tuple[str, int]
_PROBE_VERSION = 3  # the first flexible ApiVersions: every 2.4+ broker answers it
PROBE_TIMEOUT_S = 1.0


class UpstreamUnavailable(OSError):
    """No data broker could be reached (or none is registered)."""


def read_frame(sock: socket.socket, max_bytes: int) -> bytearray | None:
    """One frame from ``sock`` with its 4-byte size prefix, so it can be passed on as it is (its content starts at
    :data:`~zkcoord.wire.kafka.frames.SIZE`'s size); None at a clean end of stream. Read into one buffer: a large
    answer is neither joined from chunks nor copied again to be forwarded."""
    prefix = bytearray(SIZE.size)
    if not _fill(sock, memoryview(prefix), eof_ok=True):
        return None
    (size,) = SIZE.unpack(prefix)
    if not 0 <= size <= max_bytes:
        raise ValueError(f"frame of {size} bytes (socket.request.max.bytes is {max_bytes})")
    frame = bytearray(SIZE.size + size)
    frame[: SIZE.size] = prefix
    _fill(sock, memoryview(frame)[SIZE.size :])
    return frame


def exchange(sock: socket.socket, client_id: str, request) -> bytearray:
    """Send ``request`` (a kio request entity) and read its answer's frame; ConnectionError if none comes."""
    sock.sendall(encode_request(0, client_id, request))
    frame = read_frame(sock, 1 << 20)
    if frame is None:
        raise ConnectionError("the connection closed without an answer")
    return frame


def frame_content(frame: bytearray) -> memoryview:
    """What follows a frame's size prefix, read-only (as kio's readers require), without a copy."""
    return memoryview(frame).toreadonly()[SIZE.size :]


def _fill(sock: socket.socket, view: memoryview, eof_ok: bool = False) -> bool:
    """Fill ``view`` from ``sock``; False at an end of stream before the first byte when ``eof_ok``."""
    filled = 0
    while filled < len(view):
        received = sock.recv_into(view[filled:])
        if not received:
            if eof_ok and not filled:
                return False
            raise ConnectionError("connection closed inside a frame")
        filled += received
    return True


class HostLookups:
    """The addresses of broker hosts for upstream connections: a numeric host as it is, a name looked up once at a
    time, its answer shared by every connection that asks meanwhile. gevent looks names up in a pool of ten threads
    (numeric ones too, in ``create_connection``), and with a thousand clients connecting at once each queued a lookup
    of the same name there before it could forward anything, reading none of its client's requests meanwhile."""

    def __init__(self):
        self._pending: dict[str, AsyncResult] = {}

    def resolve(self, host: str, port: int) -> list[tuple[int, tuple]]:
        """``(family, socket address)`` of each address of ``host``, in getaddrinfo's order; OSError if none."""
        for family in (socket.AF_INET, socket.AF_INET6):
            with contextlib.suppress(OSError):
                socket.inet_pton(family, host)
                return [(family, (host, port))]
        pending = self._pending.get(host)
        if pending is None:
            pending = self._pending[host] = AsyncResult()
            try:
                pending.set(socket.getaddrinfo(host, None, 0, socket.SOCK_STREAM))
            except OSError as error:
                pending.set_exception(error)
            finally:
                del self._pending[host]
                if not pending.ready():  # this greenlet was killed: the others must not wait for ever
                    pending.set_exception(OSError(f"the lookup of {host} was interrupted"))
        return [(family, (address[0], port, *address[2:])) for family, _, _, _, address in pending.get()]


class UpstreamBrokers:
    """The registered data brokers (``/brokers/ids`` of the node's ZooKeeper, watched) and their API versions."""

    def __init__(self, upstream_timeout_s: float):
        self.upstream_timeout_s = upstream_timeout_s
        self.lookups = HostLookups()
        self.brokers: dict[int, Address] = {}
        self._versions: dict[int, tuple[int, int]] | None = None
        self._retry_versions_at = 0.0
        self._client: KazooClient | None = None

    def watch(self, client: KazooClient) -> None:
        self._client = client
        client.ensure_path(layout.BROKER_IDS_PATH)
        client.ChildrenWatch(layout.BROKER_IDS_PATH, self._on_children)

    def _on_children(self, children: list[str]) -> None:
        brokers = {}
        for child in children:
            if not child.isdigit():
                continue
            try:
                data, _ = self._client.get(layout.broker_path(child))
                registration = layout.decode_broker_registration(int(child), data)
            except NoNodeError:
                continue
            except ZnodeDecodeError as error:
                log.warning("unreadable broker registration, not served error=%s", error)
                continue
            if registration.host is not None:
                brokers[registration.broker_id] = (registration.host, registration.port)
        if brokers != self.brokers:
            log.info("upstream brokers %s", brokers)
        self.brokers = brokers

    def connect(self, broker_id: int | None) -> socket.socket:
        """A connection to ``broker_id`` (None: the first broker that answers); UpstreamUnavailable if none."""
        candidates = [broker_id] if broker_id is not None else sorted(self.brokers)
        for candidate in candidates:
            address = self.brokers.get(candidate)
            if address is None:
                continue
            try:
                sock = self._open(*address)
            except OSError as error:
                log.info("upstream broker unreachable broker=%s address=%s:%s error=%s", candidate, *address, error)
                continue
            sock.settimeout(None)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return sock
        raise UpstreamUnavailable(f"no reachable broker among {candidates} ({self.brokers})")

    def _open(self, host: str, port: int) -> socket.socket:
        """A connection to the first of the host's addresses that takes one, as ``create_connection`` makes it."""
        failure: OSError | None = None
        for family, address in self.lookups.resolve(host, port):
            sock = socket.socket(family, socket.SOCK_STREAM)
            try:
                sock.settimeout(self.upstream_timeout_s)
                sock.connect(address)
                return sock
            except OSError as error:
                sock.close()
                failure = error
        raise failure or OSError(f"{host} has no address")

    def api_versions(self) -> dict[int, tuple[int, int]]:
        """The API versions the brokers advertise (asked once, of the first that answers); UpstreamUnavailable
        while none answers (asked again at most once a second), so that no client takes a table without data
        APIs for the life of its connection."""
        if self._versions is None:
            if time.monotonic() < self._retry_versions_at:
                raise UpstreamUnavailable("no broker answered ApiVersions in the last second")
            try:
                self._versions = self._ask_versions()
            except (OSError, ValueError, struct.error) as error:
                self._retry_versions_at = time.monotonic() + 1.0
                raise UpstreamUnavailable(f"no broker answered ApiVersions: {error}") from None
        return self._versions

    def _ask_versions(self) -> dict[int, tuple[int, int]]:
        from kio.schema.api_versions.v3.request import ApiVersionsRequest

        request = ApiVersionsRequest(client_software_name="zkcoord-gateway", client_software_version="1")
        with contextlib.closing(self.connect(None)) as sock, gevent.Timeout(self.upstream_timeout_s, OSError):
            frame = exchange(sock, "zkcoord-gateway", request)
        _, response = read_response(API_VERSIONS, _PROBE_VERSION, frame_content(frame))
        return {int(each.api_key): (int(each.min_version), int(each.max_version)) for each in response.api_keys}


class GatewayAddresses:
    """Where Kafka clients reach brokers and coordinator nodes, from the node's cluster view and the brokers.

    A node that does not answer a probe of its Kafka listener (an ApiVersions each
    ``zkcoord.gateway.probe.interval.ms``) fronts no broker until it answers again: a node that died or hangs
    keeps its ZooKeeper registration until its session expires, and until then the clients whose broker it
    fronted would have no way to that broker. With ``probe_tls`` the probe speaks TLS (the nodes' Kafka listeners
    share their security protocol); it checks liveness only, so it verifies no certificate and sends no secret.
    """

    def __init__(
        self,
        cluster: ZooKeeperCluster,
        upstream: UpstreamBrokers,
        config: ServerConfig,
        node_id: int,
        probe_tls: bool = False,
    ):
        self._probe_context = _unverified_tls_context() if probe_tls else None
        self._cluster = cluster
        self._upstream = upstream
        self._config = config
        self._node_id = node_id
        self.unresponsive: frozenset[int] = frozenset()
        self._unserved: list[int] = []  # broker ids no gateway port serves, as last logged
        self._prober: gevent.Greenlet | None = None

    def start(self) -> None:
        if self._config.gateway_probe_interval_ms > 0:
            self._prober = gevent.spawn(self._probe_forever, self._config.gateway_probe_interval_ms / 1000)

    def stop(self) -> None:
        if self._prober is not None:
            self._prober.kill(block=False)

    def view(self) -> GatewayView:
        listeners = {
            node_id: (address.host, address.port, address.gateway_port, address.gateway_ports)
            for node_id, address in self._cluster.kafka_listeners().items()
        }
        fronting = {node_id: listener for node_id, listener in listeners.items() if node_id not in self.unresponsive}
        view = gateway_view(
            self._upstream.brokers,
            listeners,
            self._config.gateway_lowest_broker_id,
            self._config.gateway_coordinator_id_base,
            fronting=fronting or listeners,
        )
        unserved = sorted(set(self._upstream.brokers) - set(view.brokers)) if listeners else []
        if unserved != self._unserved:
            self._unserved = unserved
            if unserved:
                log.error(
                    "brokers %s have no gateway port: zkcoord.gateway.lowest.broker.id and zkcoord.gateway.port.range "
                    "must cover every broker id; Metadata leaves them out",
                    unserved,
                )
        return view

    def coordinator(self, found: FindCoordinatorResponse) -> tuple[int, str, int] | None:
        """A FindCoordinator answer of the core as ``(node id, host, port)`` on Kafka's protocol, or None when
        that node serves no Kafka listener."""
        address = self._cluster.kafka_listeners().get(found.node_id)
        if address is None:
            return None
        return self._config.gateway_coordinator_id_base + found.node_id, address.host, address.port

    def _probe_forever(self, interval_s: float) -> None:
        while True:
            gevent.sleep(interval_s)
            others = {n: a for n, a in self._cluster.kafka_listeners().items() if n != self._node_id}
            probes = {
                node_id: gevent.spawn(_answers, (a.host, a.port), self._probe_context) for node_id, a in others.items()
            }
            gevent.joinall(list(probes.values()))
            unresponsive = frozenset(node_id for node_id, probe in probes.items() if not probe.value)
            for node_id in sorted(unresponsive ^ self.unresponsive):
                state = "does not answer: its brokers move" if node_id in unresponsive else "answers again"
                log.warning("kafka listener of node %d %s", node_id, state)
            self.unresponsive = unresponsive


def _unverified_tls_context() -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def _answers(address: Address, tls_context: ssl.SSLContext | None) -> bool:
    """Whether a Kafka listener answers an ApiVersions (answered before SASL, as by Kafka) within PROBE_TIMEOUT_S."""
    from kio.schema.api_versions.v0.request import ApiVersionsRequest

    try:
        with gevent.Timeout(PROBE_TIMEOUT_S), contextlib.ExitStack() as closing:
            sock = closing.enter_context(contextlib.closing(socket.create_connection(address)))
            if tls_context is not None:
                sock = closing.enter_context(contextlib.closing(tls_context.wrap_socket(sock)))
            exchange(sock, "zkcoord-gateway-probe", ApiVersionsRequest())
            return True
    except (OSError, ValueError, gevent.Timeout):
        return False
