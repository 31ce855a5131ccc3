"""Serving the wire protocol over TCP (wire-protocol.md §1, §2): one greenlet per connection, requests in order.

Owns the listening socket and the client sockets. A connection feeds what it reads into a
:class:`~zkcoord.wire.connection.ServerConnection` (bounded frames, in-order answers), answers bad frames
(error frame, then close) and malformed requests (35/42, connection stays open) itself,
and hands each well-formed request to ``dispatch``, which answers through ``respond`` now or later. As in
Kafka's network layer, a connection neither reads nor dispatches its next request until the previous one has
been answered: responses come back in request order, and a client that pipelines faster than it is served gets
TCP backpressure instead of an unbounded queue on the server.

IO: imports gevent and uses gevent sockets itself (no monkey-patching needed). Pure modules must not import
this one, and it must not import the group state machine, the runtime or the log: it only knows ``dispatch``.
"""

import contextlib
import logging
import socket
import time
from collections.abc import Callable, Mapping

import gevent
from gevent.event import Event
from gevent.server import StreamServer

from zkcoord.errors import ErrorCode
from zkcoord.server.limits import ConnectionLimits
from zkcoord.server.security import NO_SASL, ConnectionSecurity, ListenerSecurity, linger_s, sasl_answer
from zkcoord.wire.codec import encode_response, read_request
from zkcoord.wire.connection import ServerConnection
from zkcoord.wire.framing import DEFAULT_MAX_REQUEST_BYTES, FrameError
from zkcoord.wire.messages import (
    ApiVersionsRequest,
    ErrorResponse,
    Message,
    Request,
    Response,
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

log = logging.getLogger(__name__)

Respond = Callable[[Response], None]
Dispatch = Callable[[Request, Respond], None]

DEFAULT_MAX_CONNECTIONS = 1024
_RECV_BYTES = 65536
# After an error frame the server shuts its side and reads on for a while: closing with unread client bytes
# would send RST, and an RST can make the client drop the error frame before reading it.
_LINGER_SECONDS = 2.0
_ENCODE_ERRORS = (TypeError, ValueError, OverflowError)
_MAX_BATCHED_RESPONSES = 64


def _now_ms() -> float:
    return time.monotonic() * 1000


def _server_error(message: str) -> ErrorResponse:
    return ErrorResponse(error_code=ErrorCode.UNKNOWN_SERVER_ERROR, error_message=message)


class _Reply:
    """The ``respond`` handed to dispatch. The first call wins; later calls, or calls after the connection
    died, change nothing."""

    __slots__ = ("_answered", "_connection", "_message", "response")

    def __init__(self, connection: "_Connection", message: dict):
        self._connection = connection
        self._message = message
        self._answered = Event()
        self.response: object = None

    @property
    def what(self) -> str:
        """The request, as the log names it."""
        message = self._message
        return f"api={message['api']} correlation_id={message['correlation_id']} peer={self._connection.peer}"

    @property
    def answered(self) -> bool:
        return self._answered.is_set()

    def __call__(self, response: Response) -> None:
        if self._answered.is_set():
            log.warning("respond called more than once; later response dropped %s", self.what)
            return
        self.response = response
        self._answered.set()

    def wait(self) -> object:
        self._answered.wait()
        return self.response


class _Connection:
    def __init__(self, server: "WireServer", sock: socket.socket, peer: tuple):
        self._server = server
        self._sock = sock
        self._security: ConnectionSecurity | None = None  # None: a plaintext listener without ACLs
        self._dispatch = server.dispatch
        self.peer = f"{peer[0]}:{peer[1]}"
        self._peer_address = peer
        self.client_host = f"/{peer[0]}"  # as DescribeGroups shows a member's host
        self._protocol = ServerConnection(
            server.max_request_bytes, server.max_idle_ms, server.read_timeout_ms, now_ms=_now_ms()
        )
        self.greenlet = gevent.getcurrent()
        # True from reading a request until its response is written: stop() lets such a connection finish.
        self.busy = False
        self.draining = False
        self._waited = False  # whether it waited for an answer (letting others run) since its last read
        # Responses of pipelined requests answered at once are written together: one send per burst, not one per
        # response (which made a busy connection hold the hub for seconds).
        self._out: list[bytes] = []

    def serve(self) -> None:
        while not self.draining:
            try:
                message = self._protocol.next_request(_now_ms())
            except FrameError as error:
                self._answer_frame_error(error)
                return
            if message is None:
                if not self._receive():
                    return
                continue
            self.busy = True
            try:
                if not self._handle(message):
                    return
                if len(self._out) >= _MAX_BATCHED_RESPONSES and not self._flush():
                    return
            finally:
                self.busy = False
        self.busy = True
        self._flush()

    def secure(self, security: ListenerSecurity) -> None:
        """TLS handshake when the listener asks for it, then this connection's principal and SASL state."""
        try:
            self._sock, self._security = security.accept(self._sock, self._peer_address)
        except OSError as error:  # ssl.SSLError too: a plaintext client on a TLS port, a bad or no certificate
            log.info("TLS handshake failed peer=%s error=%s", self.peer, error)
            raise
        self._dispatch = self._security.dispatching(self._server.dispatch)

    def drain(self) -> None:
        """Finish the request in hand, if any, then close; an idle connection closes now."""
        self.draining = True
        if not self.busy and self.greenlet is not gevent.getcurrent():
            self.greenlet.kill(block=False)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.close()

    def _receive(self) -> bool:
        self.busy = True
        try:
            if not self._flush():
                return False
        finally:
            self.busy = False
        # Yield before reading: a connection whose socket always has data would otherwise never let other
        # connections, timers, accepts or signals run. One that waited for an answer since its last read has.
        if not self._waited:
            gevent.sleep(0)
        self._waited = False
        deadline = self._protocol.read_deadline()
        # The socket's own timeout, not a gevent.Timeout: it costs nothing unless the read has to wait.
        self._sock.settimeout(None if deadline is None else max(0.0, deadline[0] - _now_ms()) / 1000)
        try:
            data = self._sock.recv(_RECV_BYTES)
        except (TimeoutError, BlockingIOError):  # a deadline already past is a timeout of 0: non-blocking
            self._server.connections_expired_total += 1
            log.info("closing connection peer=%s reason=%s", self.peer, deadline[1])
            return False
        except OSError as error:
            log.debug("connection lost peer=%s error=%s", self.peer, error)
            return False
        if not data:
            return False
        self._protocol.feed(data, _now_ms())
        return True

    def _handle(self, message: dict) -> bool:
        """Answer one request; False when the connection can no longer be written to."""
        self._server.requests_total += 1
        correlation_id = message["correlation_id"]
        request = read_request(message, self.client_host)
        security = self._security
        if type(request) is dict:
            return self._send(correlation_id, request)
        if type(request) in _SASL_REQUESTS:
            response, close = _sasl_response(security, request)
        elif security is not None and not security.authenticated and type(request) is not ApiVersionsRequest:
            response, close = _NOT_AUTHENTICATED, True
        else:
            response, close = self._dispatched(request, message), False
        self._send(correlation_id, response)
        if close:
            log.info("closing connection peer=%s: %s", self.peer, getattr(response, "error_message", ""))
            self._flush()
            gevent.sleep(linger_s(security))
        return not close

    def _dispatched(self, request: Request, message: dict) -> object:
        reply = _Reply(self, message)
        try:
            self._dispatch(request, reply)
        except Exception:
            log.exception("dispatch failed %s", reply.what)
            if not reply.answered:
                reply(_server_error("the server failed to handle this request; see its log"))
        if not reply.answered:
            self._flush()  # the client may be waiting for earlier answers while this one is parked
            self._waited = True
        return reply.wait()

    def _encoded(self, correlation_id: int, response: object) -> bytes:
        if isinstance(response, Message):
            response = encode_response(response)
        elif type(response) is not dict:
            log.error("dispatch responded with a %s instead of a response peer=%s", type(response).__name__, self.peer)
            response = encode_response(_server_error("the server produced an invalid response; see its log"))
        try:
            return self._protocol.respond(correlation_id, response, _now_ms())
        except _ENCODE_ERRORS:
            log.exception("response cannot be encoded peer=%s correlation_id=%s", self.peer, correlation_id)
            return self._protocol.respond(
                correlation_id, encode_response(_server_error("the server produced an invalid response")), _now_ms()
            )

    def _write(self, frame: bytes) -> bool:
        # A client that stops reading must not hold its connection's greenlet (and slot) forever: the socket's
        # timeout bounds what is left of the write's time at each wait for room (sendall would ask the kernel
        # its buffer size each time).
        sock, view, sent = self._sock, memoryview(frame), 0
        deadline = time.monotonic() + self._server.send_timeout_seconds
        try:
            while sent < len(frame):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError
                sock.settimeout(left)
                sent += sock.send(view[sent:])
        except TimeoutError:
            log.info("response not read in %ss, closing peer=%s", self._server.send_timeout_seconds, self.peer)
            return False
        except OSError as error:
            log.debug("connection lost while writing peer=%s error=%s", self.peer, error)
            return False
        return True

    def _send(self, correlation_id: int, response: object) -> bool:
        self._out.append(self._encoded(correlation_id, response))
        return True

    def _flush(self) -> bool:
        """Write the responses waiting in order; False when the connection can no longer be written to."""
        if not self._out:
            return True
        frames, self._out = self._out, []
        return self._write(frames[0] if len(frames) == 1 else b"".join(frames))

    def _answer_frame_error(self, error: FrameError) -> None:
        self._server.frame_errors_total += 1
        log.info("bad frame, closing peer=%s correlation_id=%s error=%s", self.peer, error.correlation_id, error)
        self._out.append(self._protocol.error(error))  # after the answers to the requests before it
        if not self._flush():
            return
        try:
            self._sock.shutdown(socket.SHUT_WR)
            self._sock.settimeout(None)  # the linger's own bound, not what the last write left
            with gevent.Timeout(_LINGER_SECONDS, False):
                while self._sock.recv(_RECV_BYTES):
                    pass
        except OSError:
            pass


_SASL_REQUESTS = (SaslHandshakeRequest, SaslAuthenticateRequest)
_NOT_AUTHENTICATED = ErrorResponse(
    error_code=ErrorCode.ILLEGAL_SASL_STATE,
    error_message="this listener needs SaslHandshake and SaslAuthenticate first",
)


def _sasl_response(security: ConnectionSecurity | None, request) -> tuple[Response, bool]:
    """The answer to SaslHandshake or SaslAuthenticate in msgpack's typed responses."""
    handshake = type(request) is SaslHandshakeRequest
    answer = sasl_answer(security, handshake, request.mechanism if handshake else request.auth_bytes)
    if answer is NO_SASL:
        response = ErrorResponse(error_code=answer.error_code, error_message=answer.error_message)
    elif handshake:
        response = SaslHandshakeResponse(error_code=answer.error_code, mechanisms=answer.mechanisms)
    else:
        response = SaslAuthenticateResponse(
            error_code=answer.error_code, error_message=answer.error_message, auth_bytes=answer.auth_bytes
        )
    return response, answer.close


class WireServer:
    """A TCP server of the wire protocol that hands each well-formed request to ``dispatch(request, respond)``.

    ``request`` is the typed request (:mod:`zkcoord.wire.messages`) of a frame that passed
    :func:`~zkcoord.wire.requests.check_request`; a JoinGroup carries the peer's address as DescribeGroups
    reports it. ``dispatch`` must call ``respond(response)`` exactly once, now or later, from this server's
    gevent hub, with a typed response (or a plain map, written as it is); the connection sets
    ``correlation_id``. Until then the connection's later requests wait. An exception from ``dispatch`` is
    logged and, if it had not responded, answered -1 UNKNOWN_SERVER_ERROR.

    Abuse bounds: ``max_connections`` in all and ``max_connections_per_ip`` from one address (None: no bound;
    ``max_connections_per_ip_overrides`` maps an IP to its own bound); a connection is closed after
    ``max_idle_ms`` without a request, or ``read_timeout_ms`` after a request's first byte if the rest is not in.

    Metrics are plain counters: ``connections_open``, ``connections_rejected_total``, ``connections_expired_total``
    (closed idle or slow), ``requests_total`` (every request with a valid header) and ``frame_errors_total``.
    """

    def __init__(
        self,
        host: str,
        port: int,
        dispatch: Dispatch,
        max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        send_timeout_seconds: float = 30.0,
        max_idle_ms: float | None = None,
        read_timeout_ms: float | None = None,
        max_connections_per_ip: int | None = None,
        max_connections_per_ip_overrides: Mapping[str, int] | None = None,
        security: ListenerSecurity | None = None,
    ):
        ServerConnection(max_request_bytes)  # refuses a bad limit now rather than at the first connection
        self.limits = ConnectionLimits(
            "connection", max_connections, max_connections_per_ip, max_connections_per_ip_overrides
        )
        self.dispatch = dispatch
        self.security = security
        self.max_request_bytes = max_request_bytes
        self.send_timeout_seconds = send_timeout_seconds
        self.max_idle_ms = max_idle_ms
        self.read_timeout_ms = read_timeout_ms
        self.connections_expired_total = 0
        self.requests_total = 0
        self.frame_errors_total = 0
        self._connections: set[_Connection] = set()
        self._stopping = False
        self._server = StreamServer((host, port), self._serve_socket)

    @property
    def connections_open(self) -> int:
        return self.limits.open

    @property
    def connections_rejected_total(self) -> int:
        return self.limits.rejected_total

    @property
    def address(self) -> tuple[str, int]:
        """The (host, port) actually bound; with port 0, the port the system picked once started."""
        host, port = self._server.address[:2]
        return host, port

    def start(self) -> None:
        """Bind and accept connections in the background (on the current thread's gevent hub)."""
        self._server.start()
        log.info("wire server listening address=%s:%s", *self.address)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop accepting, let requests in hand finish for up to ``timeout`` seconds, then close every connection.

        Requests read but not yet dispatched are dropped; their clients see the connection close.
        """
        self._stopping = True
        self._server.close()
        connections = list(self._connections)
        for connection in connections:
            connection.drain()
        current = gevent.getcurrent()
        greenlets = [connection.greenlet for connection in connections if connection.greenlet is not current]
        gevent.joinall(greenlets, timeout=timeout)
        late = [greenlet for greenlet in greenlets if not greenlet.dead]
        if late:
            log.warning("closing connections=%d whose requests were not answered in %ss", len(late), timeout)
            gevent.killall(late, block=True, timeout=1.0)
        log.info("wire server stopped")

    def _serve_socket(self, sock: socket.socket, peer: tuple) -> None:
        if not self.limits.admit(peer, self._stopping):
            sock.close()
            return
        connection = _Connection(self, sock, peer)
        self._connections.add(connection)
        try:
            # Responses are small and latency-bound (heartbeats, joins): do not wait to coalesce them.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.security is not None:
                connection.secure(self.security)
            connection.serve()
        except OSError as error:
            log.debug("connection failed peer=%s error=%s", connection.peer, error)
        finally:
            self._connections.discard(connection)
            self.limits.release(peer)
            connection.close()
