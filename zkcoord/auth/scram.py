"""SCRAM credentials as Kafka keeps them: the salted keys of RFC 5802 and their text form in ZooKeeper.

The text is Kafka's ``ScramCredentialUtils`` format, ``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>``,
so a credential written by ``kafka-configs`` authenticates on zkcoord and the other way round. Pure: no IO.
"""

import base64
import binascii
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass

from zkcoord.errors import ConfigError, ZkcoordError

# Kafka's ScramMechanism: the hash of each mechanism and the fewest iterations a server accepts.
HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MIN_ITERATIONS = 4096
DEFAULT_ITERATIONS = 4096
_FIELDS = ("salt", "stored_key", "server_key", "iterations")
_JAVA_INT = re.compile(r"[+-]?[0-9]+")


class InvalidCredentialError(ZkcoordError, ValueError):
    """A credential's text is not Kafka's format (Kafka's ``Credentials not valid``)."""


@dataclass(frozen=True)
class ScramCredential:
    """What a server keeps of a SCRAM password: never the password, only the salt and the derived keys."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __repr__(self) -> str:  # the keys verify a password offline: keep them out of logs
        return f"ScramCredential(iterations={self.iterations})"

    def format(self) -> str:
        """Kafka's ``ScramCredentialUtils.credentialToString``."""
        b64 = base64.b64encode
        return (
            f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
            f"server_key={b64(self.server_key).decode()},iterations={self.iterations}"
        )

    @classmethod
    def parse(cls, text: str) -> "ScramCredential":
        """Kafka's ``ScramCredentialUtils.credentialFromString``: exactly the four fields, any order."""
        fields = {}
        for token in text.split(","):
            key, sep, value = token.partition("=")
            if not sep or not key:
                raise InvalidCredentialError("credential not valid: every field must be key=value")
            fields[key] = value  # a repeated key overwrites, as java.util.Properties does
        if sorted(fields) != sorted(_FIELDS):
            raise InvalidCredentialError(f"credential not valid: fields {sorted(fields)}, expected {list(_FIELDS)}")
        if not _JAVA_INT.fullmatch(fields["iterations"]) or not -(2**31) <= int(fields["iterations"]) < 2**31:
            raise InvalidCredentialError(f"credential not valid: iterations {fields['iterations']!r}")
        return cls(
            _base64(fields["salt"], "salt"),
            _base64(fields["stored_key"], "stored_key"),
            _base64(fields["server_key"], "server_key"),
            int(fields["iterations"]),
        )


def _base64(text: str, name: str) -> bytes:
    """Java's basic Base64 decoder: the standard alphabet, padding optional."""
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except binascii.Error:
        raise InvalidCredentialError(f"credential not valid: {name} is not base64") from None


def check_mechanism(mechanism: str) -> str:
    """``mechanism`` if it is a SCRAM mechanism Kafka knows, else a ConfigError."""
    if mechanism not in HASHES:
        raise ConfigError(f"unknown SCRAM mechanism {mechanism!r} (known: {', '.join(HASHES)})")
    return mechanism


def make_credential(
    mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS, salt: bytes | None = None
) -> ScramCredential:
    """The credential Kafka's ``ScramFormatter.generateCredential`` makes for ``password``.

    The password is hashed as its UTF-8 bytes, without SASLprep, as Kafka does (RFC 5802 asks for SASLprep; a
    password SASLprep would change gets different keys than an RFC-strict tool would make).
    """
    name = HASHES[check_mechanism(mechanism)]
    if iterations < MIN_ITERATIONS:
        raise ConfigError(f"Iterations {iterations} is less than the minimum {MIN_ITERATIONS} required for {mechanism}")
    if salt is None:
        salt = secrets.token_bytes(24)
    salted = hashlib.pbkdf2_hmac(name, password.encode("utf-8"), salt, iterations)
    client_key = hmac.digest(salted, b"Client Key", name)
    return ScramCredential(
        salt=salt,
        stored_key=hashlib.new(name, client_key).digest(),
        server_key=hmac.digest(salted, b"Server Key", name),
        iterations=iterations,
    )
