"""What a listener asks of each connection: TLS first, then SASL, then an ACL check of every request.

:class:`ListenerSecurity` is one listener's part (its TLS context, SASL mechanisms and PLAIN users, the node's
authorizer); :class:`ConnectionSecurity` one connection's (principal, SASL exchange, checks). Both listeners —
Kafka's protocol and msgpack — use them the same way, so a principal gets the same answers on either.

IO: the TLS handshake runs on the connection's gevent socket; SCRAM credentials are read from ZooKeeper through
the callable the node passes. Denials are logged as Kafka's authorizer logs them.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable
from typing import NamedTuple

import gevent
from gevent import ssl as gevent_ssl

from zkcoord.auth.acls import Authorizer, kafka_host_address
from zkcoord.auth.plain import plain_users
from zkcoord.auth.requests import Dispatch, authorizing
from zkcoord.auth.sasl import SaslServer, check_mechanisms
from zkcoord.auth.scram import ScramCredential
from zkcoord.errors import ConfigError, ErrorCode, SaslAuthenticationFailedError
from zkcoord.security.config import ListenerSettings
from zkcoord.security.tls import ANONYMOUS, certificate_principal, server_context
from zkcoord.wire.kafka.acl import Denial

log = logging.getLogger(__name__)
authorizer_log = logging.getLogger("zkcoord.authorizer")  # Kafka's kafka.authorizer.logger, by another name

ScramCredentials = Callable[[str, str], "ScramCredential | None"]


class SaslAnswer(NamedTuple):
    """A SaslHandshake's or SaslAuthenticate's answer, in the fields of Kafka's responses, and whether the
    connection then closes (:func:`linger_s` after the answer)."""

    error_code: int
    error_message: str | None = None
    mechanisms: tuple[str, ...] = ()
    auth_bytes: bytes = b""
    close: bool = False


NO_SASL = SaslAnswer(ErrorCode.ILLEGAL_SASL_STATE, "this listener does not take SASL", close=True)


def sasl_answer(security: ConnectionSecurity | None, handshake: bool, value: str | bytes) -> SaslAnswer:
    """The answer to SaslHandshake (``value`` its mechanism) or SaslAuthenticate (``value`` its token) on either
    listener: :data:`NO_SASL` on a listener without SASL."""
    if security is None or not security.listener.settings.sasl:
        return NO_SASL
    return security.handshake(value) if handshake else security.authenticate(value)


def linger_s(security: ConnectionSecurity | None) -> float:
    """How long a connection closed for its authentication waits after its last answer (Kafka's
    connection.failed.authentication.delay.ms): clients read the answer first, and a password guesser is slowed."""
    return 0.0 if security is None else security.listener.failed_authentication_delay_s


class ListenerSecurity:
    """One listener's security: ``settings`` (its protocol and Kafka's ssl/sasl properties), SCRAM credentials
    by (user, mechanism), and the node's ACLs (None: every request is allowed, as without an authorizer)."""

    def __init__(
        self,
        settings: ListenerSettings,
        scram_credentials: ScramCredentials,
        authorizer: Authorizer | None,
        handshake_timeout_s: float,
        failed_authentication_delay_s: float = 0.1,
    ):
        self.settings = settings
        self.failed_authentication_delay_s = failed_authentication_delay_s
        self.scram_credentials = scram_credentials
        self.authorizer = authorizer
        self.handshake_timeout_s = handshake_timeout_s
        self.authentication_failures_total = 0
        self.denials_total = 0
        self.context = None
        if settings.tls:
            self.context = server_context(settings.config, gevent_ssl.SSLContext)
        self.mechanisms: tuple[str, ...] = ()
        self.plain_users: dict[str, str] = {}
        if settings.sasl:
            self.mechanisms = check_mechanisms(settings.mechanisms)
            if "PLAIN" in self.mechanisms:
                jaas = settings.jaas_config("PLAIN")
                if not jaas:
                    raise ConfigError(
                        f"listener {settings.name} enables PLAIN: give its users in "
                        f"listener.name.{settings.name.lower()}.plain.sasl.jaas.config"
                    )
                self.plain_users = plain_users(jaas)

    @property
    def protocol(self) -> str:
        return self.settings.protocol

    def accept(self, sock: socket.socket, peer: tuple) -> tuple[socket.socket, ConnectionSecurity]:
        """The connection's socket (TLS-wrapped after a handshake bounded by the handshake timeout) and its
        security state. Raises OSError (ssl.SSLError among them) when the TLS handshake fails."""
        principal = ANONYMOUS
        if self.context is not None:
            # One deadline for the whole handshake: a socket timeout bounds each read, and a peer that trickles
            # its ClientHello a byte at a time would hold its connection slot for hours.
            with gevent.Timeout(self.handshake_timeout_s, TimeoutError("TLS handshake not done in time")):
                sock = self.context.wrap_socket(sock, server_side=True)
            if not self.settings.sasl:
                principal = certificate_principal(sock.getpeercert())
        return sock, ConnectionSecurity(self, kafka_host_address(peer[0]), principal)


class ConnectionSecurity:
    """One connection's principal, its SASL exchange while unauthenticated, and the ACL checks of its requests."""

    def __init__(self, listener: ListenerSecurity, host: str, principal: str):
        self.listener = listener
        self.host = host
        self.principal = principal
        self.authenticated = not listener.settings.sasl
        self._sasl: SaslServer | None = None

    def handshake(self, mechanism: str) -> SaslAnswer:
        """SaslHandshake: Kafka's error code and the listener's mechanisms; an error closes the connection."""
        mechanisms = self.listener.mechanisms
        if self.authenticated or self._sasl is not None:
            return SaslAnswer(ErrorCode.ILLEGAL_SASL_STATE, mechanisms=mechanisms, close=True)
        if mechanism not in mechanisms:
            log.info("SASL mechanism %r is not enabled peer=%s", mechanism, self.host)
            return SaslAnswer(ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms=mechanisms, close=True)
        self._sasl = SaslServer(mechanism, self.listener.scram_credentials, self.listener.plain_users)
        return SaslAnswer(ErrorCode.NONE, mechanisms=mechanisms)

    def authenticate(self, token: bytes) -> SaslAnswer:
        """SaslAuthenticate: the next server token; a failure answers 58 and closes, as Kafka's broker does."""
        if self.authenticated or self._sasl is None:
            return SaslAnswer(ErrorCode.ILLEGAL_SASL_STATE, "SaslAuthenticate before SaslHandshake", close=True)
        try:
            answer = self._sasl.evaluate(token)
        except SaslAuthenticationFailedError as error:
            self.listener.authentication_failures_total += 1
            log.warning("authentication failed peer=%s mechanism=%s: %s", self.host, self._sasl.mechanism, error.reason)
            return SaslAnswer(error.error_code, error.message, close=True)
        if self._sasl.complete:
            self.principal = self._sasl.principal
            self.authenticated = True
            log.info("authenticated principal=%s peer=%s", self.principal, self.host)
        return SaslAnswer(ErrorCode.NONE, auth_bytes=answer)

    @property
    def authorizes(self) -> bool:
        return self.listener.authorizer is not None

    def allowed(self, operation: str, resource_type: str, name: str) -> bool:
        """Whether this connection's principal may do ``operation`` on the resource (True without an authorizer)."""
        authorizer = self.listener.authorizer
        return authorizer is None or authorizer.authorize(self.principal, self.host, operation, resource_type, name)

    def denied(self, denial: Denial) -> None:
        """Log a refused check as Kafka's authorizer logs it."""
        self.listener.denials_total += 1
        authorizer_log.info(
            "Principal = %s is Denied Operation = %s from host = %s on resource = %s:LITERAL:%s",
            self.principal,
            denial.operation,
            self.host,
            denial.resource_type,
            denial.name,
        )

    def dispatching(self, dispatch: Dispatch) -> Dispatch:
        """``dispatch`` behind this connection's ACL checks; ``dispatch`` itself without an authorizer."""
        return authorizing(dispatch, self.allowed, self.denied) if self.authorizes else dispatch
