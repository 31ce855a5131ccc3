"""A node's security settings under Kafka's property names: listeners' protocols, TLS, SASL and the authorizer.

Kafka's rules: a listener's security protocol is its name when the name is one (``SASL_SSL://host:port``), else
``listener.security.protocol.map`` says (``CLIENT:SASL_SSL``); a setting given as
``listener.name.<listener>.<property>`` overrides ``<property>`` for that listener only, and PLAIN's users come
from ``listener.name.<listener>.plain.sasl.jaas.config``. The msgpack listener is the listener named ``ZKCOORD``
(docs/security.md).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field

from zkcoord.config import check_values, coerce, invalid_value, kafka_field, kafka_names, one_of
from zkcoord.errors import ConfigError

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MSGPACK_LISTENER = "ZKCOORD"
LISTENER_PREFIX = "listener.name."
# Kafka's class names (ZooKeeper mode, then its older name); KRaft's StandardAuthorizer keeps ACLs elsewhere.
ACL_AUTHORIZERS = ("kafka.security.authorizer.AclAuthorizer", "kafka.security.auth.SimpleAclAuthorizer")
_CLIENT_AUTH = ("none", "requested", "required")


@dataclass(frozen=True)
class SecurityConfig:
    """TLS, SASL and authorization settings of a node; :meth:`for_listener` applies one listener's overrides."""

    listener_security_protocol_map: str = kafka_field(
        "listener.security.protocol.map", "", "NAME:PROTOCOL,... for listeners not named after their protocol"
    )
    ssl_keystore_type: str = kafka_field("ssl.keystore.type", "PEM", "only PEM is read")
    ssl_keystore_location: str = kafka_field("ssl.keystore.location", "", "PEM file: private key and certificate chain")
    ssl_keystore_key: str = kafka_field("ssl.keystore.key", "", "PEM private key, inline")
    ssl_keystore_certificate_chain: str = kafka_field(
        "ssl.keystore.certificate.chain", "", "PEM certificate chain, inline"
    )
    ssl_key_password: str = kafka_field("ssl.key.password", "", "password of an encrypted private key")
    ssl_truststore_type: str = kafka_field("ssl.truststore.type", "PEM", "only PEM is read")
    ssl_truststore_location: str = kafka_field("ssl.truststore.location", "", "PEM file of trusted certificates")
    ssl_truststore_certificates: str = kafka_field("ssl.truststore.certificates", "", "PEM certificates, inline")
    ssl_client_auth: str = kafka_field("ssl.client.auth", "none", "none, requested or required (mutual TLS)")
    ssl_principal_mapping_rules: str = kafka_field(
        "ssl.principal.mapping.rules", "DEFAULT", "DEFAULT: a certificate's principal is its subject's DN"
    )
    sasl_enabled_mechanisms: str = kafka_field(
        "sasl.enabled.mechanisms", "GSSAPI", "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (Kafka's default GSSAPI is not)"
    )
    authorizer_class_name: str = kafka_field(
        "authorizer.class.name", "", "kafka.security.authorizer.AclAuthorizer: check every request against ACLs"
    )
    super_users: str = kafka_field("super.users", "", "User:a;User:b: principals every ACL check lets through")
    allow_everyone_if_no_acl_found: bool = kafka_field(
        "allow.everyone.if.no.acl.found", False, "a resource without ACLs is open to everyone"
    )
    listener_overrides: Mapping[str, str] = field(default_factory=dict)  # listener.name.* as given

    def __post_init__(self) -> None:
        check_values(self)
        for name in ("ssl.keystore.type", "ssl.truststore.type"):
            if getattr(self, kafka_names(SecurityConfig)[name]).upper() != "PEM":
                raise ConfigError(f"{name}: only PEM is read here; convert a JKS or PKCS12 store to PEM")
        if self.ssl_client_auth.lower() not in _CLIENT_AUTH:
            raise invalid_value("ssl.client.auth", self.ssl_client_auth, one_of(_CLIENT_AUTH))
        if self.ssl_principal_mapping_rules.strip() != "DEFAULT":
            raise ConfigError("ssl.principal.mapping.rules: only DEFAULT (the subject's DN) is supported")
        if self.authorizer_class_name and self.authorizer_class_name not in ACL_AUTHORIZERS:
            raise ConfigError(
                f"authorizer.class.name: {self.authorizer_class_name!r} is not served; "
                f"use {ACL_AUTHORIZERS[0]} (ACLs in ZooKeeper, as Kafka's ZooKeeper mode keeps them)"
            )
        self.protocol_map()

    @property
    def authorizes(self) -> bool:
        return bool(self.authorizer_class_name)

    def protocol_map(self) -> dict[str, str]:
        """Listener name → security protocol: each protocol names itself, ZKCOORD is PLAINTEXT unless mapped."""
        mapping = {protocol: protocol for protocol in PROTOCOLS} | {MSGPACK_LISTENER: "PLAINTEXT"}
        for item in filter(None, (text.strip() for text in self.listener_security_protocol_map.split(","))):
            name, _, protocol = item.partition(":")
            if not name.strip() or protocol.strip().upper() not in PROTOCOLS:
                raise ConfigError(
                    f"listener.security.protocol.map: {item!r} is not NAME:PROTOCOL with PROTOCOL one of "
                    + ", ".join(PROTOCOLS)
                )
            mapping[name.strip().upper()] = protocol.strip().upper()
        return mapping

    def protocol_of(self, listener: str) -> str:
        protocol = self.protocol_map().get(listener.upper())
        if protocol is None:
            raise ConfigError(f"listener {listener}: not in listener.security.protocol.map")
        return protocol

    def for_listener(self, listener: str) -> ListenerSettings:
        """The settings of listener ``listener``: its protocol and this config with its overrides applied."""
        prefix = f"{LISTENER_PREFIX}{listener.lower()}."
        own = {key[len(prefix) :]: value for key, value in self.listener_overrides.items() if key.startswith(prefix)}
        jaas = {key: own.pop(key) for key in list(own) if key.endswith(".sasl.jaas.config")}
        names = kafka_names(SecurityConfig)
        unknown = sorted(set(own) - set(names))
        if unknown:
            raise ConfigError(f"{prefix}{unknown[0]}: not a setting a listener can override")
        config = dataclasses.replace(
            self, **{names[key]: coerce(SecurityConfig, names[key], value) for key, value in own.items()}
        )
        mechanisms = tuple(name.strip().upper() for name in config.sasl_enabled_mechanisms.split(",") if name.strip())
        return ListenerSettings(listener.upper(), self.protocol_of(listener), config, mechanisms, jaas)


@dataclass(frozen=True)
class ListenerSettings:
    """One listener's protocol, its settings, its SASL mechanisms and its JAAS values (``plain.sasl.jaas.config``
    → text)."""

    name: str
    protocol: str
    config: SecurityConfig
    mechanisms: tuple[str, ...]
    jaas: Mapping[str, str]

    @property
    def tls(self) -> bool:
        return uses_tls(self.protocol)

    @property
    def sasl(self) -> bool:
        return uses_sasl(self.protocol)

    def jaas_config(self, mechanism: str) -> str:
        """``listener.name.<listener>.<mechanism>.sasl.jaas.config``; '' when not given."""
        return self.jaas.get(f"{mechanism.lower()}.sasl.jaas.config", "")


def uses_tls(protocol: str) -> bool:
    return protocol in ("SSL", "SASL_SSL")


def uses_sasl(protocol: str) -> bool:
    return protocol.startswith("SASL_")


def split_listener_overrides(properties: Mapping[str, object]) -> tuple[dict[str, object], dict[str, str]]:
    """The properties without ``listener.name.*``, and those (which no config field names)."""
    overrides = {key: str(value) for key, value in properties.items() if key.startswith(LISTENER_PREFIX)}
    return {key: value for key, value in properties.items() if key not in overrides}, overrides
