"""Kafka's wire protocol on a coordinator node: group APIs served by the node, everything else forwarded.

One listener owns the node's Kafka port (where clients bootstrap) and its gateway ports (one per upstream
broker id, docs/kafka-protocol.md). On every port a request of a served group API is decoded with kio, mapped
onto zkcoord's typed requests (:mod:`zkcoord.wire.kafka.groups`) and handed to the same ``dispatch`` as the
msgpack listener's, so both listeners share one coordinator. Any other request is forwarded as its bytes to the
broker the port fronts, over an upstream connection of the client connection's own, and its answer comes back
as its bytes, except the answers that carry broker addresses, which are rewritten.

Answers go out in request order, as Kafka's clients require: each request takes a slot in a bounded queue
when it is read, and a writer greenlet sends the slots in order as they are filled. When the queue is full
the connection reads no more (back-pressure through TCP). A frame that cannot be read closes its connection
and nothing else, as on a Kafka broker.

IO: gevent sockets. Knows ``dispatch`` and the gateway, not the core.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import socket
import struct
import time
from collections.abc import Callable
from functools import partial

import gevent
import msgspec
from gevent.event import AsyncResult
from gevent.queue import Full, Queue
from gevent.server import StreamServer

from zkcoord.errors import ErrorCode
from zkcoord.server.gateway import (
    GatewayAddresses,
    UpstreamBrokers,
    UpstreamUnavailable,
    frame_content,
    read_frame,
)
from zkcoord.server.kafka_group_call import CLOSE as _CLOSE
from zkcoord.server.kafka_group_call import GroupCall
from zkcoord.server.limits import ConnectionLimits
from zkcoord.server.security import ConnectionSecurity, ListenerSecurity, linger_s, sasl_answer
from zkcoord.wire import messages as m
from zkcoord.wire.kafka import data_acl, groups, versions
from zkcoord.wire.kafka.entities import build
from zkcoord.wire.kafka.frames import (
    SIZE,
    KafkaFrameError,
    RequestHeader,
    encode_response,
    produce_acks,
    read_body,
    read_header,
    read_response,
    response_schema,
)
from zkcoord.wire.kafka.rewrite import REWRITTEN, rewrite_metadata_frame, rewrite_response
from zkcoord.wire.limits import collapsed, id_length_problem

log = logging.getLogger(__name__)

Dispatch = Callable[[m.Request, Callable[[m.Response], None]], None]
_MAX_IN_FLIGHT = 128  # answers a connection may owe before it stops reading
_NEVER_FORWARDED_OLD = REWRITTEN | versions.SERVED.keys() | versions.REFUSED
_GROUP_KEY, _TRANSACTION_KEY = 0, 1
_SEND_TIMEOUT_S = 30.0  # a peer that reads nothing for this long is dropped (the msgpack listener's bound too)
SASL_MAX_RECEIVE_BYTES = 524_288  # Kafka's sasl.server.max.receive.size
_CORRELATION_ID = struct.Struct(">i")


def _no_groups_listed(version: int):
    """ListGroups on a gateway port: the broker it fronts coordinates none of zkcoord's groups. Admin clients ask
    every broker Metadata names and add the answers up (kafka-python's ``list_groups`` keeps duplicates), so the
    node's groups are listed only where Metadata names the node itself."""
    return groups.kafka_response(versions.LIST_GROUPS, version, (), (m.ListGroupsResponse(error_code=ErrorCode.NONE),))


def _api_versions_answer(version: int, table: dict[int, tuple[int, int]], error: int):
    plain = {
        "error_code": error,
        "api_keys": [{"api_key": key, "min_version": lo, "max_version": hi} for key, (lo, hi) in table.items()],
        "throttle_time": 0,
        "supported_features": [],
        "finalized_features_epoch": -1,
        "finalized_features": [],
        "zk_migration_ready": False,
    }
    return build(response_schema(versions.API_VERSIONS, version), plain)


class KafkaListener:
    """Kafka's protocol on ``host``: the bootstrap ``port`` and ``gateway_ports`` (port → upstream broker id);
    ``addresses`` says where brokers and coordinator nodes are reached."""

    def __init__(
        self,
        host: str,
        port: int,
        gateway_ports: dict[int, int],
        dispatch: Dispatch,
        upstream: UpstreamBrokers,
        addresses: GatewayAddresses,
        max_request_bytes: int,
        limits: ConnectionLimits,
        idle_timeout_s: float,
        security: ListenerSecurity | None = None,
    ):
        self.dispatch = dispatch
        self.security = security  # None: plaintext, every request allowed
        self.upstream = upstream
        self.addresses = addresses
        self.max_request_bytes = max_request_bytes
        self.limits = limits  # max.connections and max.connections.per.ip, as on the msgpack listener
        self.idle_timeout_s = idle_timeout_s
        self.requests_total = 0
        self.forwarded_total = 0
        self.frame_errors_total = 0
        # (api version, SASL, ACLs) → (the upstream table it was built from, the ApiVersions answer's frame)
        self.api_versions_answers: dict[tuple[int, bool, bool], tuple[dict, object]] = {}
        self._connections: set[_Connection] = set()
        self._watchdog: gevent.Greenlet | None = None
        self._servers = {None: StreamServer((host, port), partial(self._serve, None))}
        for gateway_port, broker_id in gateway_ports.items():
            self._servers[broker_id] = StreamServer((host, gateway_port), partial(self._serve, broker_id))

    @property
    def port(self) -> int:
        return self._servers[None].address[1]

    @property
    def connections_open(self) -> int:
        return self.limits.open

    def start(self) -> None:
        for server in self._servers.values():
            server.start()
        self._watchdog = gevent.spawn(self._drop_stuck_connections)
        log.info("kafka listener on port=%d gateway ports=%d", self.port, len(self._servers) - 1)

    def stop(self) -> None:
        if self._watchdog is not None:
            self._watchdog.kill(block=False)
        for server in self._servers.values():
            server.close()
        for connection in list(self._connections):
            connection.close()

    def _drop_stuck_connections(self) -> None:
        while True:
            gevent.sleep(_SEND_TIMEOUT_S / 6)
            now = time.monotonic()
            for connection in [each for each in self._connections if each.stuck(now)]:
                log.info(
                    "kafka connection dropped: its peer read nothing for %ss peer=%s", _SEND_TIMEOUT_S, connection.peer
                )
                connection.close()

    def _serve(self, broker_id: int | None, sock: socket.socket, peer: tuple) -> None:
        if not self.limits.admit(peer):
            sock.close()
            return
        connection = _Connection(self, sock, peer, broker_id)
        self._connections.add(connection)
        try:
            connection.secure()
            connection.serve()
        except OSError as error:  # ssl.SSLError too: a plaintext client on a TLS port, a bad or no certificate
            log.info("kafka connection failed before its first request peer=%s error=%s", connection.peer, error)
        finally:
            self._connections.discard(connection)
            self.limits.release(peer)
            connection.close()


class _Closing(Exception):
    """The connection closes once the answers before it are written (a failed or skipped SASL authentication)."""


class _Connection:
    def __init__(self, listener: KafkaListener, sock: socket.socket, peer: tuple, broker_id: int | None):
        self.listener = listener
        self.sock = sock
        self.peer = f"{peer[0]}:{peer[1]}"
        self.peer_address = peer
        self.client_host = f"/{peer[0]}"
        self.security: ConnectionSecurity | None = None  # None: plaintext, every request allowed
        self.dispatch = listener.dispatch
        self.broker_id = broker_id  # the upstream broker this port fronts; None: the bootstrap port
        self.slots: Queue = Queue(_MAX_IN_FLIGHT)
        self.upstream: socket.socket | None = None
        # (request header, answer slot, what completes the answer after ACL checks refused part of the request)
        self.pending: collections.deque[tuple[RequestHeader, AsyncResult, Callable | None]] = collections.deque()
        self.greenlets: list[gevent.Greenlet] = []
        self.writer: gevent.Greenlet | None = None
        # When a send began that has not ended (None: none), to the client and to the broker: the listener's
        # watchdog drops a connection whose peer reads nothing for _SEND_TIMEOUT_S (a timer per send cost more).
        self.writing_since: float | None = None
        self.forwarding_since: float | None = None

    def stuck(self, now: float) -> bool:
        return any(
            since is not None and now - since > _SEND_TIMEOUT_S for since in (self.writing_since, self.forwarding_since)
        )

    def secure(self) -> None:
        """The TLS handshake when the listener asks for it, then this connection's principal and SASL state."""
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.listener.security is not None:
            self.sock, self.security = self.listener.security.accept(self.sock, self.peer_address)
            self.dispatch = self.security.dispatching(self.listener.dispatch)

    def serve(self) -> None:
        self.sock.settimeout(self.listener.idle_timeout_s)
        self.writer = writer = gevent.spawn(self._write_answers)
        self.greenlets.append(writer)
        try:
            while not writer.dead:
                frame = read_frame(self.sock, self._frame_bound())
                if frame is None:
                    break
                self.listener.requests_total += 1
                request = frame_content(frame)
                self._handle(read_header(request), request, frame)
        except (KafkaFrameError, ValueError) as error:
            self.listener.frame_errors_total += 1
            log.info("bad kafka frame, closing peer=%s error=%s", self.peer, error)
        except (UpstreamUnavailable, _Closing) as error:
            log.info("closing kafka connection peer=%s: %s", self.peer, error)
        except OSError as error:
            log.debug("kafka connection ended peer=%s error=%s", self.peer, error)
        with contextlib.suppress(ConnectionError):
            self._answer(_CLOSE)
        writer.join(timeout=_SEND_TIMEOUT_S)

    def _frame_bound(self) -> int:
        """The largest frame read now: Kafka's ``sasl.server.max.receive.size`` until SASL completes, so that an
        unauthenticated peer cannot make the node allocate ``socket.request.max.bytes`` per connection."""
        if self.security is not None and not self.security.authenticated:
            return min(SASL_MAX_RECEIVE_BYTES, self.listener.max_request_bytes)
        return self.listener.max_request_bytes

    def close(self) -> None:
        gevent.killall([g for g in self.greenlets if g is not gevent.getcurrent()], block=False)
        for sock in (self.sock, self.upstream):
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.close()

    # -- answers, in order -----------------------------------------------------------------------------------

    def _slot(self) -> AsyncResult:
        """The next answer's place; blocks while _MAX_IN_FLIGHT answers are owed (the reader stops reading), and
        raises ConnectionError once the writer is gone (a client that stopped reading its answers)."""
        slot = AsyncResult()
        while True:
            try:
                self.slots.put(slot, timeout=1.0)
                return slot
            except Full:
                if self.writer.dead:
                    raise ConnectionError("the answers are no longer read") from None

    def _answer(self, frame: bytes) -> None:
        self._slot().set(frame)

    def _write_answers(self) -> None:
        while True:
            frame = self.slots.get().get()
            if not frame:  # _CLOSE
                break
            try:
                self.writing_since = time.monotonic()
                # One send for a whole small answer: gevent's sendall asks the socket's buffer size each call.
                sent = self.sock.send(frame)
                if sent < len(frame):
                    self.sock.sendall(memoryview(frame)[sent:])
                self.writing_since = None
            except OSError as error:
                log.debug("kafka connection lost while writing peer=%s error=%s", self.peer, error)
                break
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)

    # -- requests ----------------------------------------------------------------------------------------------

    def _handle(self, header: RequestHeader, request: memoryview, frame: bytearray) -> None:
        """Answer or forward one request; ``frame`` is ``request`` with its size prefix, as it is forwarded."""
        api_key = header.api_key
        if api_key == versions.API_VERSIONS:
            self._answer(self._api_versions(header))
        elif api_key in versions.SASL:
            self._sasl(header, request)
        elif self.security is not None and not self.security.authenticated:
            raise _Closing(f"api {api_key} before SASL authentication")  # Kafka's broker closes too
        elif not header.known:
            if not (header.older and api_key not in _NEVER_FORWARDED_OLD):
                # Never advertised; forwarding it could let an answer carry broker addresses past the rewrite.
                raise KafkaFrameError(f"api {api_key} v{header.api_version} is not known here")
            # A client that does not ask ApiVersions (0.9-era settings) sends data APIs at versions older than
            # kio's; their answers carry no broker address, so they pass through as they are.
            self._forward(header, request, frame)
        elif versions.served(api_key, header.api_version):
            body = read_body(header, request)
            # FindCoordinator v0 has no key_type: it looks up group coordinators only.
            key_type = getattr(body, "key_type", _GROUP_KEY) if api_key == versions.FIND_COORDINATOR else _GROUP_KEY
            if key_type == _TRANSACTION_KEY:
                self._forward(header, request, frame)
            elif key_type != _GROUP_KEY:  # share groups (v6's key type 2) are not served, nor unknown types
                requests = groups.core_requests(api_key, header.api_version, body)
                refusal = groups.refused_response(api_key, header.api_version, requests, ErrorCode.INVALID_REQUEST)
                self._answer(self._encode(header, refusal))
            elif api_key == versions.LIST_GROUPS and self.broker_id is not None:
                self._answer(self._encode(header, _no_groups_listed(header.api_version)))
            else:
                self._serve_group_request(header, body)
        elif api_key in versions.SERVED or api_key in versions.REFUSED:
            self._refuse(header, request)
        else:
            self._forward(header, request, frame)

    def _api_versions(self, header: RequestHeader) -> bytes:
        low, high = versions.SERVED[versions.API_VERSIONS]
        if header.api_version > high:
            # Kafka's answer to an ApiVersions newer than it knows: v0, 35, and its own ApiVersions range.
            answer = _api_versions_answer(0, {versions.API_VERSIONS: (low, high)}, ErrorCode.UNSUPPORTED_VERSION)
            return encode_response(header.correlation_id, answer)
        sasl = bool(self.security is not None and self.security.listener.settings.sasl)
        authorizes = self.security is not None and self.security.authorizes
        upstream = self.listener.upstream.api_versions()
        # Every client connection asks first: the answer is built once per version and kind of listener.
        key = (header.api_version, sasl, authorizes)
        cached = self.listener.api_versions_answers.get(key)
        if cached is None or cached[0] is not upstream:
            caps = data_acl.AUTHORIZED_CAPS if authorizes else versions.FORWARD_CAPS
            answer = _api_versions_answer(header.api_version, versions.advertised(upstream, caps, sasl), 0)
            cached = self.listener.api_versions_answers[key] = (upstream, encode_response(0, answer))
        # Header v0 at every version of ApiVersions: the correlation id alone, right after the size.
        frame = bytearray(cached[1])
        _CORRELATION_ID.pack_into(frame, SIZE.size, header.correlation_id)
        return frame

    def _sasl(self, header: RequestHeader, request: memoryview) -> None:
        """SaslHandshake and SaslAuthenticate, as Kafka's broker answers them; after an error the connection
        closes, and on a listener without SASL (or after authentication) they are 34 ILLEGAL_SASL_STATE."""
        security = self.security
        low, high = versions.SASL[header.api_key]
        if not low <= header.api_version <= high:
            raise KafkaFrameError(f"api {header.api_key} v{header.api_version} is not served here")
        body = read_body(header, request)
        handshake = header.api_key == versions.SASL_HANDSHAKE
        answer = sasl_answer(security, handshake, body.mechanism if handshake else body.auth_bytes)
        plain = {**answer._asdict(), "mechanisms": list(answer.mechanisms)}
        schema = response_schema(header.api_key, header.api_version)
        self._answer(encode_response(header.correlation_id, build(schema, plain)))
        if answer.close:
            gevent.sleep(linger_s(security))
            raise _Closing(f"SASL: {answer.error_message or ErrorCode(answer.error_code).name}")

    def _refuse(self, header: RequestHeader, request: memoryview) -> None:
        """A version of a group API not served, or an API of a protocol zkcoord does not serve: closed, as a Kafka
        broker closes on an API it does not know. TxnOffsetCommit is answered 35 on every partition instead, so
        that an exactly-once producer fails with an error that names the request."""
        log.warning(
            "refusing api=%d v%d (not served by zkcoord) peer=%s", header.api_key, header.api_version, self.peer
        )
        if header.api_key == versions.TXN_OFFSET_COMMIT:  # a version kio knows: _handle closed on the others
            refusal = groups.txn_offset_commit_refusal(header.api_version, read_body(header, request))
            self._answer(self._encode(header, refusal))
            return
        raise KafkaFrameError(f"api {header.api_key} v{header.api_version} is not served here")

    def _serve_group_request(self, header: RequestHeader, body) -> None:
        api_key, version = header.api_key, header.api_version
        try:
            requests = groups.core_requests(api_key, version, body, header.client_id, self.client_host)
        except msgspec.ValidationError as error:  # kio decoded it, so a value beyond Kafka's own types
            raise KafkaFrameError(f"api {api_key} v{version}: {error}") from None
        slot = self._slot()
        problems = [id_length_problem(request, header.client_id) for request in requests]
        if any(problems):
            log.info("refusing api=%d v%d peer=%s: %s", api_key, version, self.peer, next(filter(None, problems)))
            response = groups.refused_response(api_key, version, requests, ErrorCode.INVALID_REQUEST)
            slot.set(self._encode(header, response))
            return
        GroupCall(self, header, tuple(collapsed(request) for request in requests), slot).dispatch()

    def _encode(self, header: RequestHeader, response) -> bytes:
        return encode_response(header.correlation_id, response)

    # -- forwarding -----------------------------------------------------------------------------------------------

    def _forward(self, header: RequestHeader, request: memoryview, frame: bytearray) -> None:
        """Forward the request to the broker this port fronts, after the principal's ACL checks: the broker sees
        only the gateway's own principal, so what the client may do is decided here (docs/security.md)."""
        verdict = self._verdict(header, request)
        if verdict is not None and verdict.answer is not None:
            self._answer(encode_response(header.correlation_id, verdict.answer))
            return
        if verdict is not None and verdict.close and verdict.forward is None:
            raise _Closing(f"api {header.api_key} refused")
        if self.upstream is None:
            self.upstream = self.listener.upstream.connect(self.broker_id)
            self.greenlets.append(gevent.spawn(self._read_upstream, self.upstream))
        reply = None if verdict is None else verdict.reply
        if not (header.api_key == versions.PRODUCE and produce_acks(header, request) == 0):
            self.pending.append((header, self._slot(), reply))
        self.listener.forwarded_total += 1
        self.forwarding_since = time.monotonic()
        self.upstream.sendall(frame if verdict is None or verdict.forward is None else verdict.forward)
        self.forwarding_since = None
        if verdict is not None and verdict.close:
            raise _Closing(f"api {header.api_key} partly refused with acks=0")

    def _verdict(self, header: RequestHeader, request: memoryview) -> data_acl.Verdict | None:
        security = self.security
        if security is None or not security.authorizes:
            return None
        verdict = data_acl.authorize_forwarded(header, request, security.allowed)
        for denial in () if verdict is None else verdict.denials:
            security.denied(denial)
        return verdict

    def _read_upstream(self, upstream: socket.socket) -> None:
        try:
            while True:
                frame = read_frame(upstream, 2**31 - 1)
                if frame is None and not self.pending:
                    # The broker closed an idle connection (its connections.max.idle.ms): the next request that
                    # must be forwarded opens another; the client's connection is none of its business.
                    self._upstream_gone(upstream)
                    return
                if frame is None:
                    raise ConnectionError("the broker closed the connection with answers owed")
                header, slot, reply = self.pending.popleft()
                slot.set(self._answered(header, frame, reply))
        except Exception as error:  # an answer that cannot be read or rewritten must not leave the client waiting
            log.info("upstream connection failed peer=%s error=%s", self.peer, error)
        # The answers owed are lost: the client sees its connection close, as it would with the broker itself.
        self._upstream_gone(upstream)
        while self.pending:
            self.pending.popleft()[1].set(_CLOSE)
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RD)

    def _upstream_gone(self, upstream: socket.socket) -> None:
        if self.upstream is upstream:
            self.upstream = None
        with contextlib.suppress(OSError):
            upstream.close()

    def _answered(self, header: RequestHeader, frame: bytearray, reply) -> bytes:
        """The broker's answer for the client: completed with what the ACL checks refused (``reply``), and with
        broker addresses rewritten to the gateway's."""
        if reply is None and header.api_key not in REWRITTEN:
            return frame
        if reply is None and header.api_key == versions.METADATA:
            return rewrite_metadata_frame(header.api_version, frame_content(frame), self.listener.addresses.view())
        if reply is None:
            correlation_id, response = read_response(header.api_key, header.api_version, frame_content(frame))
        else:
            correlation_id, response = header.correlation_id, reply(bytes(frame_content(frame)))
        if header.api_key in REWRITTEN:
            response = rewrite_response(header.api_key, response, self.listener.addresses.view())
        return encode_response(correlation_id, response)
