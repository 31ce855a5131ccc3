"""SASL/PLAIN users from Kafka's JAAS property, ``listener.name.<listener>.plain.sasl.jaas.config``.

The value is one login module entry, as Kafka's ``JaasConfig`` reads it::

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";

A server takes the ``user_<name>`` options as its users and passwords; a client takes ``username``/``password``.
Pure: no IO.
"""

import re
from dataclasses import dataclass, field

from zkcoord.errors import ConfigError

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
USER_PREFIX = "user_"
CONTROL_FLAGS = ("required", "requisite", "sufficient", "optional")

# The tokens of java.io.StreamTokenizer as JaasConfig sets it up: comments, quoted strings, words (which may
# continue with digits and dots, and may hold '-', '_' and '$'), and single characters.
_TOKENS = re.compile(
    r"""(?P<space>\s+|//[^\n]*|/\*.*?\*/)
      | "(?P<dquoted>(?:[^"\\\n]|\\.)*)"
      | '(?P<squoted>(?:[^'\\\n]|\\.)*)'
      | (?P<word>[A-Za-z_$\-\u00a0-\u00ff][A-Za-z0-9_$.\-\u00a0-\u00ff]*)
      | (?P<char>.)""",
    re.VERBOSE | re.DOTALL,
)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}


@dataclass(frozen=True)
class JaasEntry:
    """One login module entry: its class, its control flag and its options."""

    login_module: str
    control_flag: str
    options: dict[str, str] = field(default_factory=dict)


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)), text)


def _tokens(value: str) -> list[tuple[str, str]]:
    """(kind, text) pairs: kind "word" for words and quoted strings, "char" for any other character."""
    tokens = []
    for match in _TOKENS.finditer(value):
        kind = match.lastgroup
        if kind == "space":
            continue
        if kind in ("dquoted", "squoted"):
            tokens.append(("word", _unescape(match.group(kind))))
        else:
            tokens.append((kind, match.group(kind)))
    return tokens


def parse_jaas_config(value: str) -> tuple[JaasEntry, ...]:
    """The login module entries of a ``sasl.jaas.config`` value; a ConfigError says what is malformed."""
    return _entries(_tokens(value))


def parse_jaas_file(text: str, source: str = "JAAS file") -> dict[str, tuple[JaasEntry, ...]]:
    """The sections of a JAAS login configuration file (``Name { entry; ... };``, what
    ``java.security.auth.login.config`` names), each with its entries; a ConfigError, starting with ``source``,
    says what is malformed."""
    tokens = _tokens(text)
    sections: dict[str, tuple[JaasEntry, ...]] = {}
    position = 0
    while position < len(tokens):
        kind, name = tokens[position]
        if kind != "word" or tokens[position + 1 : position + 2] != [("char", "{")]:
            raise ConfigError(f"{source}: expected a section name and '{{', found {name!r}")
        try:
            end = tokens.index(("char", "}"), position + 2)
        except ValueError:
            raise ConfigError(f"{source}: section {name} has no closing '}}'") from None
        if tokens[end + 1 : end + 2] != [("char", ";")]:
            raise ConfigError(f"{source}: section {name} is not terminated by '}};'")
        try:
            sections[name] = sections.get(name, ()) + _entries(tokens[position + 2 : end])
        except ConfigError as error:
            raise ConfigError(f"{source}: section {name}: {error}") from None
        position = end + 2
    return sections


def _entries(tokens: list[tuple[str, str]]) -> tuple[JaasEntry, ...]:
    entries = []
    position = 0
    while position < len(tokens):
        kind, module = tokens[position]
        if kind != "word":
            raise ConfigError(f"JAAS config: expected a login module class, found {module!r}")
        if position + 1 >= len(tokens):
            raise ConfigError("JAAS config: login module control flag not specified")
        flag = tokens[position + 1][1]
        if flag.lower() not in CONTROL_FLAGS:
            raise ConfigError(f"JAAS config: invalid login module control flag {flag!r}")
        position += 2
        options = {}
        while position < len(tokens) and tokens[position] != ("char", ";"):
            kind, key = tokens[position]
            rest = tokens[position + 1 : position + 3]
            if kind != "word" or len(rest) < 2 or rest[0] != ("char", "=") or rest[1][0] != "word":
                raise ConfigError(f"JAAS config: value not specified for key {key!r} (quote values)")
            options[key] = rest[1][1]
            position += 3
        if position >= len(tokens):
            raise ConfigError("JAAS config entry not terminated by semi-colon")
        entries.append(JaasEntry(module, flag.lower(), options))
        position += 1
    if not entries:
        raise ConfigError("JAAS config: login module not specified")
    return tuple(entries)


def _entry(value: str, modules: tuple[str, ...] = (PLAIN_LOGIN_MODULE,)) -> JaasEntry:
    entries = parse_jaas_config(value)
    if len(entries) != 1:
        raise ConfigError(f"JAAS config property contains {len(entries)} login modules, should be 1 module")
    if entries[0].login_module not in modules:
        raise ConfigError(f"JAAS config names {entries[0].login_module}, not {' or '.join(modules)}")
    return entries[0]


def plain_users(value: str) -> dict[str, str]:
    """The ``user_<name>="<password>"`` options of a PLAIN server's JAAS value, by user name."""
    options = _entry(value).options
    return {key[len(USER_PREFIX) :]: password for key, password in options.items() if key.startswith(USER_PREFIX)}


def client_credentials(value: str) -> tuple[str, str]:
    """The ``username`` and ``password`` options of a PLAIN or SCRAM client's JAAS value (``sasl.jaas.config``)."""
    options = _entry(value, (PLAIN_LOGIN_MODULE, SCRAM_LOGIN_MODULE)).options
    missing = [key for key in ("username", "password") if key not in options]
    if missing:
        raise ConfigError(f"JAAS config has no {' or '.join(missing)}")
    return options["username"], options["password"]
