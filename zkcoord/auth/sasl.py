"""One connection's SASL exchange, both sides, without IO: PLAIN and SCRAM-SHA-256/512 as Kafka serves them.

The listener feeds :class:`SaslServer` each SaslAuthenticate token and sends back what ``evaluate`` returns; a
tool feeds :class:`SaslClient` the server's tokens. The SCRAM messages are scramp's (RFC 5802), checked first
against Kafka's ``ScramMessages`` grammar so that what Kafka refuses is refused here too. Failures raise
:class:`~zkcoord.errors.SaslAuthenticationFailedError` with the message Kafka's ``SaslServerAuthenticator`` sends: the
generic one whenever the reason could tell an attacker whether the user exists; ``reason`` says it for logs.

Where scramp is stricter than Kafka (a client never meets these with Kafka's or librdkafka's clients): a
client-first with an authorization id, even one equal to the user name, or with SCRAM extensions (Kafka's
``tokenauth`` delegation tokens, which zkcoord does not serve) is refused; so is a credential whose salt is
shorter than 12 bytes (Kafka makes salts of about 25 bytes).
"""

import hmac
import re
from collections.abc import Callable, Iterable, Mapping

from scramp import ScramClient, ScramException, ScramMechanism
from scramp.utils import saslprep

from zkcoord.auth.scram import HASHES, MIN_ITERATIONS, ScramCredential
from zkcoord.errors import ConfigError, ErrorCode, IllegalStateError, SaslAuthenticationFailedError

PLAIN = "PLAIN"
SUPPORTED_MECHANISMS = (PLAIN, *HASHES)
ENABLED_DEFAULT = ("GSSAPI",)  # Kafka's default sasl.enabled.mechanisms, which zkcoord cannot serve
PRINCIPAL_TYPE = "User"

# Kafka's ScramMessages.ClientFirstMessage: gs2 header "n", an optional authzid, ASCII names with ',' and '='
# escaped, a printable nonce, then extensions.
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_CLIENT_FIRST = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,(?:m=[\x01-\x2b\x2d-\x7f]+,)?n=(?P<saslname>{_SASLNAME}),"
    r"r=[\x21-\x2b\x2d-\x7e]+(?:,[A-Za-z]+=[\x01-\x2b\x2d-\x7f]+)*"
)


def check_mechanisms(names: Iterable[str]) -> tuple[str, ...]:
    """``sasl.enabled.mechanisms`` checked: the names in order, once each; a ConfigError for one zkcoord lacks."""
    enabled = tuple(dict.fromkeys(name.strip() for name in names if name.strip()))
    unsupported = [name for name in enabled if name not in SUPPORTED_MECHANISMS]
    if unsupported:
        raise ConfigError(
            f"sasl.enabled.mechanisms: {', '.join(unsupported)} not supported "
            f"(zkcoord serves {', '.join(SUPPORTED_MECHANISMS)}; Kafka's default is {', '.join(ENABLED_DEFAULT)})"
        )
    if not enabled:
        raise ConfigError("sasl.enabled.mechanisms is empty: a SASL listener needs at least one mechanism")
    return enabled


def _check_supported(mechanism: str) -> None:
    if mechanism not in SUPPORTED_MECHANISMS:
        raise ConfigError(f"SASL mechanism {mechanism!r} is not supported (supported: {SUPPORTED_MECHANISMS})")


def _kafka_username(saslname: str) -> str:
    """Kafka's ``ScramFormatter.username``: ``=2C`` is ',' and ``=3D`` is '='."""
    return saslname.replace("=2C", ",").replace("=3D", "=")


class SaslServer:
    """The server side of one SASL exchange; ``complete`` and ``principal`` once the client proved who it is.

    ``scram_credential(username, mechanism)`` looks a user's credential up (None for an unknown user);
    ``plain_users`` maps PLAIN user names to passwords.
    """

    def __init__(
        self,
        mechanism: str,
        scram_credential: Callable[[str, str], ScramCredential | None],
        plain_users: Mapping[str, str],
    ):
        _check_supported(mechanism)
        self.mechanism = mechanism
        self._scram_credential = scram_credential
        self._plain_users = plain_users
        self._scram = None
        self._state = "first"
        self.username: str | None = None

    @property
    def complete(self) -> bool:
        return self._state == "complete"

    @property
    def principal(self) -> str:
        """``User:<name>``, Kafka's principal for a SASL user (KafkaPrincipal's toString)."""
        if not self.complete:
            raise IllegalStateError("Authentication exchange has not completed")
        return f"{PRINCIPAL_TYPE}:{self.username}"

    def evaluate(self, token: bytes) -> bytes:
        """The server's answer to the client's ``token``; a SaslAuthenticationFailedError ends the exchange."""
        state, self._state = self._state, "failed"  # until this token is handled in full
        if state in ("complete", "failed"):
            raise SaslAuthenticationFailedError(
                f"Unexpected SASL token in server state {state.upper()}", ErrorCode.ILLEGAL_SASL_STATE
            )
        if self.mechanism == PLAIN:
            answer = self._plain(token)
            self._state = "complete"
        elif state == "first":
            answer = self._scram_first(token)
            self._state = "final"
        else:
            answer = self._scram_final(token)
            self._state = "complete"
        return answer

    def _invalid(self, reason: str) -> SaslAuthenticationFailedError:
        return SaslAuthenticationFailedError(
            "Authentication failed during authentication due to invalid credentials with SASL mechanism "
            + self.mechanism,
            reason=reason,
        )

    def _plain(self, token: bytes) -> bytes:
        """Kafka's ``PlainSaslServer``: ``authzid NUL user NUL password``, messages as it sends them."""
        tokens = token.decode("utf-8", "replace").split("\0")
        if len(tokens) != 3:
            got = min(len(tokens), 4)  # Kafka splits at most four times
            raise SaslAuthenticationFailedError(f"Invalid SASL/PLAIN response: expected 3 tokens, got {got}")
        authzid, username, password = tokens
        if not username:
            raise SaslAuthenticationFailedError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationFailedError("Authentication failed: password not specified")
        expected = self._plain_users.get(username)
        # Compared even for an unknown user, so that the time taken does not tell which users exist.
        matches = hmac.compare_digest(password.encode("utf-8"), (expected or "\0").encode("utf-8"))
        if expected is None or not matches:
            raise SaslAuthenticationFailedError(
                "Authentication failed: Invalid username or password",
                reason=f"PLAIN user {username!r} " + ("unknown" if expected is None else "gave a wrong password"),
            )
        if authzid and authzid != username:
            raise SaslAuthenticationFailedError(
                "Authentication failed: Client requested an authorization id that is different from username"
            )
        self.username = username
        return b""

    def _scram_first(self, token: bytes) -> bytes:
        text = token.decode("utf-8", "replace")
        message = _CLIENT_FIRST.fullmatch(text)
        if message is None:
            raise self._invalid("invalid SCRAM client first message format")
        username = _kafka_username(message["saslname"])
        try:
            credential = self._scram_credential(username, self.mechanism)
        except Exception as error:  # Kafka: "Credentials could not be obtained", whatever the store raised
            raise self._invalid(f"credentials of {username!r} could not be obtained: {error}") from error
        if credential is None:
            raise self._invalid(f"no {self.mechanism} credential for user {username!r}")
        if message["authzid"] and message["authzid"] != username:
            raise SaslAuthenticationFailedError(
                "Authentication failed: Client requested an authorization id that is different from username"
            )
        if credential.iterations < MIN_ITERATIONS:
            raise self._invalid(f"iterations {credential.iterations} of {username!r} below {MIN_ITERATIONS}")
        auth_info = (credential.salt, credential.stored_key, credential.server_key, credential.iterations)
        self._scram = ScramMechanism(self.mechanism).make_server(lambda _name: auth_info)
        try:
            self._scram.set_client_first(text)
            answer = self._scram.get_server_first()
        except ScramException as error:
            raise self._invalid(f"SCRAM client first message of {username!r} refused: {error}") from None
        self.username = username
        return answer.encode("ascii")

    def _scram_final(self, token: bytes) -> bytes:
        try:
            self._scram.set_client_final(token.decode("utf-8", "replace"))
            answer = self._scram.get_server_final()
        except ScramException as error:
            raise self._invalid(f"SCRAM client final message of {self.username!r} refused: {error}") from None
        return answer.encode("ascii")


class SaslClient:
    """The client side of one SASL exchange: send ``first()``, then ``evaluate`` each server token and send what
    it returns until it returns None; ``complete`` once the server proved it knows the credential (SCRAM)."""

    def __init__(self, mechanism: str, username: str, password: str):
        _check_supported(mechanism)
        self.mechanism = mechanism
        self.complete = False
        self._server_tokens = 0
        if mechanism == PLAIN:
            self._plain_token = f"\0{username}\0{password}".encode()
            self._scram = None
            return
        try:
            prepared = saslprep(password)
            self._scram = ScramClient([mechanism], username, password)
        except ScramException as error:
            raise ConfigError(f"SASL/{mechanism} cannot use this user name or password: {error}") from None
        if prepared != password:
            # scramp hashes the SASLprep'd password, Kafka the password as typed: the keys would differ.
            raise ConfigError(f"SASL/{mechanism}: a password that SASLprep changes is not supported")

    def first(self) -> bytes:
        """The client's first token."""
        if self._scram is None:
            return self._plain_token
        return self._scram.get_client_first().encode("ascii")

    def evaluate(self, server_token: bytes) -> bytes | None:
        """The answer to ``server_token``, or None when the exchange is over (``complete`` is then True)."""
        if self._scram is None:
            self.complete = True
            return None
        self._server_tokens += 1
        try:
            if self._server_tokens == 1:
                self._scram.set_server_first(server_token.decode("utf-8"))
                return self._scram.get_client_final().encode("utf-8")
            self._scram.set_server_final(server_token.decode("utf-8"))
        except (ScramException, UnicodeDecodeError) as error:
            raise SaslAuthenticationFailedError(f"SASL/{self.mechanism} exchange failed: {error}") from None
        self.complete = True
        return None
