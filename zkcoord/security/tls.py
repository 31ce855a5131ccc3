"""TLS contexts from Kafka's PEM settings, and a client certificate's principal as Kafka names it.

Servers and clients share the PEM rules: a key and its chain come from one file (``ssl.keystore.location``,
librdkafka's ``ssl.certificate.location`` + ``ssl.key.location``) or inline text (``ssl.keystore.key`` +
``ssl.keystore.certificate.chain``); trusted certificates from a file or inline text. Python's ``ssl`` reads
a key only from a file, so inline text passes through a private temporary file.
"""

from __future__ import annotations

import contextlib
import os
import ssl
import tempfile
from collections.abc import Iterator

from zkcoord.errors import ConfigError
from zkcoord.security.config import SecurityConfig

ANONYMOUS = "User:ANONYMOUS"
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
# RFC 2253's keywords, as Java's X500Principal.getName() writes them (Kafka's DEFAULT principal).
_RFC2253_KEYWORDS = {
    "commonName": "CN",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}


@contextlib.contextmanager
def _pem_file(text: str) -> Iterator[str]:
    descriptor, path = tempfile.mkstemp(suffix=".pem")  # mode 0600
    try:
        with os.fdopen(descriptor, "w") as file:
            file.write(text)
        yield path
    finally:
        os.unlink(path)


def _load_key_and_chain(context: ssl.SSLContext, certificate: str, key: str, inline: bool, password: str) -> None:
    try:
        if inline:
            with _pem_file(f"{key.strip()}\n{certificate.strip()}\n") as path:
                context.load_cert_chain(path, password=password or None)
        else:
            context.load_cert_chain(certificate, key or None, password=password or None)
    except (OSError, ssl.SSLError) as error:
        where = "the inline key and chain" if inline else certificate
        raise ConfigError(f"TLS key and certificate chain from {where}: {error}") from None


def _load_trusted(context: ssl.SSLContext, location: str, certificates: str) -> None:
    try:
        if location:
            context.load_verify_locations(cafile=location)
        if certificates:
            context.load_verify_locations(cadata=certificates)
    except (OSError, ssl.SSLError) as error:
        raise ConfigError(f"trusted certificates from {location or 'the inline text'}: {error}") from None


def server_context(config: SecurityConfig, context_class: type[ssl.SSLContext] = ssl.SSLContext) -> ssl.SSLContext:
    """A listener's context: its key and chain, trusted client CAs and ``ssl.client.auth``. ``context_class``:
    gevent's for a gevent server."""
    context = context_class(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if config.ssl_keystore_location:
        _load_key_and_chain(context, config.ssl_keystore_location, "", False, config.ssl_key_password)
    elif config.ssl_keystore_key and config.ssl_keystore_certificate_chain:
        _load_key_and_chain(
            context, config.ssl_keystore_certificate_chain, config.ssl_keystore_key, True, config.ssl_key_password
        )
    else:
        raise ConfigError(
            "a TLS listener needs ssl.keystore.location, or ssl.keystore.key and ssl.keystore.certificate.chain"
        )
    context.verify_mode = _CLIENT_AUTH[config.ssl_client_auth.lower()]
    if context.verify_mode != ssl.CERT_NONE:
        if not (config.ssl_truststore_location or config.ssl_truststore_certificates):
            raise ConfigError("ssl.client.auth needs ssl.truststore.location or ssl.truststore.certificates")
        _load_trusted(context, config.ssl_truststore_location, config.ssl_truststore_certificates)
    return context


def client_context(
    ca_location: str = "",
    ca_certificates: str = "",
    certificate_location: str = "",
    key_location: str = "",
    key_password: str = "",
    check_hostname: bool = True,
    context_class: type[ssl.SSLContext] = ssl.SSLContext,
) -> ssl.SSLContext:
    """A client's context: the CAs it trusts (the system's when none are given), its own key for mutual TLS, and
    whether the server's name must match its certificate (Kafka's ``ssl.endpoint.identification.algorithm``)."""
    context = context_class(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = check_hostname
    if ca_location or ca_certificates:
        _load_trusted(context, ca_location, ca_certificates)
    else:
        context.load_default_certs()
    if certificate_location:
        _load_key_and_chain(context, certificate_location, key_location, False, key_password)
    return context


# Attributes without an RFC 2253 keyword: Java writes them as OID=#<DER of the value> (tag, length, bytes).
_HEX_ENCODED = {"emailAddress": ("1.2.840.113549.1.9.1", 0x16), "serialNumber": ("2.5.4.5", 0x13)}


def _escaped(value: str) -> str:
    # Java's X500Principal.getName() escapes = and # too, wherever they are.
    escaped = "".join(f"\\{char}" if char in ',+"\\<>;=#' else char for char in value)
    if escaped.startswith(" "):
        escaped = "\\" + escaped
    if escaped.endswith(" ") and not escaped.endswith("\\ "):
        escaped = escaped[:-1] + "\\ "
    return escaped


def _der_hex(tag: int, value: str) -> str:
    data = value.encode()
    length = bytes([len(data)]) if len(data) < 128 else bytes([0x80 | 2]) + len(data).to_bytes(2, "big")
    return "#" + (bytes([tag]) + length + data).hex()


def _attribute(key: str, value: str) -> str:
    if key in _HEX_ENCODED:
        oid, tag = _HEX_ENCODED[key]
        return f"{oid}={_der_hex(tag, value)}"
    return f"{_RFC2253_KEYWORDS.get(key, key)}={_escaped(value)}"


def certificate_principal(certificate: dict | None) -> str:
    """``User:<subject DN>`` as Kafka's default principal builder names a TLS client (Java's RFC 2253 form: most
    specific first, ``CN=alice,OU=eng,O=example``); ANONYMOUS without a certificate."""
    if not certificate or not certificate.get("subject"):
        return ANONYMOUS
    relative_names = [
        "+".join(_attribute(key, value) for key, value in rdn) for rdn in reversed(certificate["subject"])
    ]
    return "User:" + ",".join(relative_names)
