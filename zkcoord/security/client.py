"""The client side of TLS and SASL for zkcoord's own tools and members, from Kafka's client properties.

:class:`ClientSecurity` reads what a Kafka tool's ``--command-config`` file holds, in the Java client's names or
librdkafka's (``security.protocol``, ``sasl.mechanism``, ``sasl.username``/``sasl.password`` or
``sasl.jaas.config``, ``ssl.ca.location`` or ``ssl.truststore.location``...). Its :meth:`connector` is a
drop-in ``create_connection``: it connects, wraps TLS, and authenticates over the msgpack protocol's
SaslHandshake/SaslAuthenticate before handing the socket over, so every caller that takes ``create_connection``
(the channel to coordinators, the admin client, the client's worker) is secured without knowing it;
:meth:`ClientSecurity.kafka_python_options` gives the same settings to kafka-python. A typed client config
inherits :class:`ClientSecurityProperties` to take these properties with its own.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from functools import cached_property

from zkcoord.auth.plain import client_credentials
from zkcoord.auth.sasl import SUPPORTED_MECHANISMS, SaslClient
from zkcoord.config import invalid_value, kafka_field, one_of
from zkcoord.errors import ConfigError, ErrorCode, SaslAuthenticationFailedError, error_name
from zkcoord.security.config import PROTOCOLS, uses_sasl, uses_tls
from zkcoord.security.tls import client_context
from zkcoord.wire.connection import ClientConnection

_RECEIVE_BYTES = 65536
# (Java client's name, librdkafka's): either is accepted, the first given wins.
_ALIASES = {
    "mechanism": ("sasl.mechanism", "sasl.mechanisms"),
    "ca_location": ("ssl.truststore.location", "ssl.ca.location"),
    "certificate_location": ("ssl.keystore.location", "ssl.certificate.location"),
}
Connect = Callable[..., socket.socket]


def _first(properties: Mapping[str, object], names: tuple[str, ...], default: str = "") -> str:
    return next((str(properties[name]) for name in names if properties.get(name) not in (None, "")), default)


@dataclass(frozen=True)
class ClientSecurity:
    """How a client reaches a listener: its protocol, SASL mechanism and credentials, and its TLS files."""

    protocol: str = "PLAINTEXT"
    mechanism: str = ""
    username: str = ""
    password: str = field(default="", repr=False)
    ca_location: str = ""
    ca_certificates: str = ""
    certificate_location: str = ""
    key_location: str = ""
    key_password: str = field(default="", repr=False)
    check_hostname: bool = True

    @classmethod
    def from_properties(cls, properties: Mapping[str, object]) -> ClientSecurity:
        """From Kafka client properties; other keys are left to the caller. ConfigError names a bad value."""
        protocol = _first(properties, ("security.protocol",), "PLAINTEXT").upper()
        if protocol not in PROTOCOLS:
            raise invalid_value("security.protocol", protocol, one_of(PROTOCOLS))
        for name in ("ssl.truststore.type", "ssl.keystore.type"):
            if str(properties.get(name) or "PEM").upper() != "PEM":
                raise ConfigError(f"{name}: only PEM files are read here")
        username, password = _first(properties, ("sasl.username",)), _first(properties, ("sasl.password",))
        jaas = _first(properties, ("sasl.jaas.config",))
        if jaas and not username:
            username, password = client_credentials(jaas)
        mechanism = _first(properties, _ALIASES["mechanism"], "GSSAPI").upper()
        if uses_sasl(protocol):
            if mechanism not in SUPPORTED_MECHANISMS:
                raise ConfigError(
                    f"sasl.mechanism: {mechanism} is not supported (use {', '.join(SUPPORTED_MECHANISMS)}; "
                    "Kafka's default is GSSAPI)"
                )
            if not username:
                raise ConfigError(f"{protocol} needs sasl.username and sasl.password (or sasl.jaas.config)")
        # Kafka's empty value (as a properties file line without one) turns the host name check off.
        algorithm = properties.get("ssl.endpoint.identification.algorithm")
        algorithm = "https" if algorithm is None else str(algorithm).lower()
        return cls(
            protocol,
            mechanism,
            username,
            password,
            ca_location=_first(properties, _ALIASES["ca_location"]),
            ca_certificates=_first(properties, ("ssl.truststore.certificates",)),
            certificate_location=_first(properties, _ALIASES["certificate_location"]),
            key_location=_first(properties, ("ssl.key.location",)),
            key_password=_first(properties, ("ssl.key.password",)),
            check_hostname=algorithm not in ("", "none"),
        )

    @classmethod
    def of(cls, security: ClientSecurity | Mapping[str, object] | None) -> ClientSecurity:
        """``security`` as given to a tool or client: settings, Kafka client properties, or None (plaintext)."""
        if isinstance(security, ClientSecurity):
            return security
        return cls.from_properties(security or {})

    def kafka_python_options(self) -> dict[str, object]:
        """The same settings as kafka-python's keyword arguments (``KafkaAdminClient(**options)``)."""
        if self.ca_certificates:
            raise ConfigError("kafka-python reads trusted certificates from a file: use ssl.truststore.location")
        options: dict[str, object] = {"security_protocol": self.protocol}
        if self.sasl:  # kafka-python's "plain" username and password serve SCRAM too
            options.update(sasl_mechanism=self.mechanism, sasl_plain_username=self.username)
            options.update(sasl_plain_password=self.password)
        if self.tls:
            options.update(
                ssl_cafile=self.ca_location or None,
                ssl_certfile=self.certificate_location or None,
                ssl_keyfile=self.key_location or None,
                ssl_password=self.key_password or None,
                ssl_check_hostname=self.check_hostname,
            )
        return options

    @property
    def tls(self) -> bool:
        return uses_tls(self.protocol)

    @property
    def sasl(self) -> bool:
        return uses_sasl(self.protocol)

    def connector(self, create_connection: Connect = socket.create_connection) -> Connect:
        """``create_connection(address, timeout=None)`` that returns a socket ready for requests; plain
        ``create_connection`` itself for PLAINTEXT. Authentication failures raise
        :class:`~zkcoord.errors.SaslAuthenticationFailedError`, which no caller retries."""
        if not (self.tls or self.sasl):
            return create_connection
        contexts: dict[type, ssl.SSLContext] = {}

        def connect(address, timeout=None, *args, **kwargs) -> socket.socket:
            sock = create_connection(address, timeout, *args, **kwargs)
            try:
                if self.tls:
                    sock = self._wrap(sock, address[0], contexts)
                if self.sasl:
                    self._authenticate(sock, f"{address[0]}:{address[1]}")
            except BaseException:
                sock.close()
                raise
            return sock

        return connect

    def _wrap(self, sock: socket.socket, host: str, contexts: dict[type, ssl.SSLContext]) -> socket.socket:
        context_class = ssl.SSLContext
        if type(sock).__module__.startswith("gevent"):  # a gevent socket needs gevent's TLS to stay cooperative
            from gevent import ssl as gevent_ssl

            context_class = gevent_ssl.SSLContext
        context = contexts.get(context_class)
        if context is None:
            context = contexts[context_class] = client_context(
                self.ca_location,
                self.ca_certificates,
                self.certificate_location,
                self.key_location,
                self.key_password,
                self.check_hostname,
                context_class,
            )
        try:
            return context.wrap_socket(sock, server_hostname=host)
        except ssl.SSLCertVerificationError as error:
            raise SaslAuthenticationFailedError(f"TLS to {host}: {error.verify_message or error}") from None

    def _authenticate(self, sock: socket.socket, where: str) -> None:
        protocol = ClientConnection("zkcoord-sasl")
        handshake = _call(sock, protocol, "SaslHandshake", {"mechanism": self.mechanism}, where)
        if handshake.get("error_code"):
            enabled = ", ".join(handshake.get("mechanisms") or ()) or "none"
            raise SaslAuthenticationFailedError(
                f"{where}: SASL mechanism {self.mechanism}: {error_name(handshake['error_code'])} (enabled: {enabled})"
            )
        client = SaslClient(self.mechanism, self.username, self.password)
        token: bytes | None = client.first()
        while token is not None:
            answer = _call(sock, protocol, "SaslAuthenticate", {"auth_bytes": token}, where)
            if answer.get("error_code"):
                message = answer.get("error_message") or error_name(answer["error_code"])
                raise SaslAuthenticationFailedError(f"{where}: {message}")
            token = client.evaluate(answer.get("auth_bytes") or b"")
        if not client.complete:
            raise SaslAuthenticationFailedError(f"{where}: the SASL exchange ended early")


def _call(sock: socket.socket, protocol: ClientConnection, api: str, fields: dict, where: str) -> dict:
    sock.sendall(protocol.request(api, fields))
    while True:
        answered = protocol.next_response()
        if answered is not None:
            return answered[1]
        data = sock.recv(_RECEIVE_BYTES)
        if not data:
            raise SaslAuthenticationFailedError(
                f"{where} closed the connection during SASL (a listener without SASL answers "
                f"{ErrorCode.ILLEGAL_SASL_STATE.name}; check security.protocol)"
            )
        protocol.feed(data)


@dataclass(frozen=True, kw_only=True)
class ClientSecurityProperties:
    """The client properties :class:`ClientSecurity` reads, as fields a client's typed config inherits (so that
    ``build_config`` takes them by Kafka name or snake_case); None is unset. A subclass's ``__post_init__`` calls
    this one's, so that a bad value fails at construction."""

    security_protocol: str | None = kafka_field("security.protocol", None, "PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL")
    sasl_mechanism: str | None = kafka_field("sasl.mechanism", None, "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
    sasl_mechanisms: str | None = kafka_field("sasl.mechanisms", None, "librdkafka's name of sasl.mechanism")
    sasl_username: str | None = kafka_field("sasl.username", None)
    sasl_password: str | None = kafka_field("sasl.password", None, secret=True)
    sasl_jaas_config: str | None = kafka_field(
        "sasl.jaas.config", None, "username and password, as Java clients", secret=True
    )
    ssl_truststore_location: str | None = kafka_field("ssl.truststore.location", None, "PEM file of trusted CAs")
    ssl_ca_location: str | None = kafka_field("ssl.ca.location", None, "librdkafka's name of the trusted CAs file")
    ssl_truststore_certificates: str | None = kafka_field("ssl.truststore.certificates", None, "trusted CAs, inline")
    ssl_truststore_type: str | None = kafka_field("ssl.truststore.type", None, "PEM only")
    ssl_keystore_location: str | None = kafka_field("ssl.keystore.location", None, "PEM: client key and chain")
    ssl_certificate_location: str | None = kafka_field("ssl.certificate.location", None, "PEM client certificate")
    ssl_key_location: str | None = kafka_field("ssl.key.location", None, "PEM client key")
    ssl_key_password: str | None = kafka_field("ssl.key.password", None, secret=True)
    ssl_keystore_type: str | None = kafka_field("ssl.keystore.type", None, "PEM only")
    ssl_endpoint_identification_algorithm: str | None = kafka_field(
        "ssl.endpoint.identification.algorithm", None, "https (default) checks the host name; empty turns it off"
    )

    def __post_init__(self) -> None:
        self.client_security  # noqa: B018 - reading it checks the values

    @cached_property
    def client_security(self) -> ClientSecurity:
        """These properties read as :class:`ClientSecurity` (PLAINTEXT when none is set)."""
        given = {}
        for each in fields(ClientSecurityProperties):
            value = getattr(self, each.name)
            if value is not None:
                given[each.metadata["kafka"]] = value
        return ClientSecurity.from_properties(given)
