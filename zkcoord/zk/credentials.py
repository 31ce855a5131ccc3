"""ZooKeeper credentials taken the way Kafka and ZooKeeper's Java client take them (docs/security.md, "ZooKeeper").

A JAAS file's ``Client`` section names ``DigestLoginModule`` with ``username`` and ``password``; the file is found
through ``java.security.auth.login.config``, given as a property or as ``-D...`` inside ``$KAFKA_OPTS``, as
Kafka's scripts pass it to the JVM. ``zookeeper.sasl.client`` (default true) turns SASL off and
``zookeeper.sasl.clientconfig`` (default ``Client``) names another section, as in ZooKeeper's client.
"""

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from zkcoord import env
from zkcoord.auth.plain import parse_jaas_file
from zkcoord.errors import ConfigError

LOGIN_CONFIG = "java.security.auth.login.config"
SASL_CLIENT = "zookeeper.sasl.client"
SASL_CLIENT_CONFIG = "zookeeper.sasl.clientconfig"
SET_ACL = "zookeeper.set.acl"
DEFAULT_SECTION = "Client"
DIGEST_LOGIN_MODULE = "org.apache.zookeeper.server.auth.DigestLoginModule"


@dataclass(frozen=True)
class DigestCredentials:
    """The SASL DIGEST-MD5 identity zkcoord logs in to ZooKeeper with (ZooKeeper calls it ``sasl:<username>``)."""

    username: str
    password: str = field(repr=False)
    source: str = ""


@dataclass(frozen=True)
class ZooKeeperSecurity:
    """How a process talks to ZooKeeper: its credentials (None: unauthenticated) and whether the znodes it creates
    get Kafka's ACLs (``zookeeper.set.acl``)."""

    credentials: DigestCredentials | None = None
    set_acl: bool = False

    def sasl_options(self) -> dict | None:
        """kazoo's ``sasl_options``."""
        if self.credentials is None:
            return None
        return {"mechanism": "DIGEST-MD5", "username": self.credentials.username, "password": self.credentials.password}


UNSECURED = ZooKeeperSecurity()


def kafka_opts_properties(kafka_opts: str | None) -> dict[str, str]:
    """The ``-Dkey=value`` system properties in a ``$KAFKA_OPTS`` value."""
    properties = {}
    for word in shlex.split(kafka_opts or ""):
        if word.startswith("-D"):
            key, _, value = word[2:].partition("=")
            properties[key] = value
    return properties


def zookeeper_security(
    properties: Mapping[str, object] | None = None, set_acl: bool | None = None
) -> ZooKeeperSecurity:
    """The ZooKeeper security of a node or tool: ``properties`` first, then ``-D`` options in ``$KAFKA_OPTS``.

    ``set_acl`` None follows ``zookeeper.set.acl`` in ``properties`` when present, else does as Kafka's tools:
    znodes are secured whenever the tool authenticates. ConfigError for a JAAS file without the section or with
    bad syntax, and for ``zookeeper.set.acl=true`` without credentials (Kafka's broker refuses to start then too).
    """
    given = {key: str(value) for key, value in (properties or {}).items() if value is not None and value != ""}
    system = kafka_opts_properties(env.kafka_opts())
    setting = {key: given.get(key, system.get(key)) for key in (LOGIN_CONFIG, SASL_CLIENT, SASL_CLIENT_CONFIG)}
    credentials = None
    if setting[LOGIN_CONFIG] and _true(SASL_CLIENT, setting[SASL_CLIENT] or "true"):
        credentials = read_credentials(setting[LOGIN_CONFIG], setting[SASL_CLIENT_CONFIG] or DEFAULT_SECTION)
    if set_acl is None:
        set_acl = _true(SET_ACL, given[SET_ACL]) if SET_ACL in given else credentials is not None
    if set_acl and credentials is None:
        raise ConfigError(
            f"{SET_ACL} is true, but zkcoord has no ZooKeeper credentials: give {LOGIN_CONFIG} (a property or "
            f"-D{LOGIN_CONFIG}=FILE in $KAFKA_OPTS) naming a JAAS file with a {DEFAULT_SECTION} section"
        )
    return ZooKeeperSecurity(credentials, set_acl)


def read_credentials(path: str, section: str = DEFAULT_SECTION) -> DigestCredentials:
    """The DigestLoginModule username and password of ``section`` in the JAAS file at ``path``."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"JAAS file {path} ({LOGIN_CONFIG}): cannot be read: {error.strerror}") from None
    sections = parse_jaas_file(text, f"JAAS file {path}")
    if section not in sections:
        raise ConfigError(
            f"JAAS file {path}: no {section} section (found: {', '.join(sections) or 'none'}); "
            f"{SASL_CLIENT}=false connects to ZooKeeper without a login"
        )
    for module in sections[section]:
        if module.login_module == DIGEST_LOGIN_MODULE:
            missing = [key for key in ("username", "password") if key not in module.options]
            if missing:
                raise ConfigError(f"JAAS file {path}: section {section}: {DIGEST_LOGIN_MODULE} lacks {missing[0]}")
            return DigestCredentials(module.options["username"], module.options["password"], path)
    raise ConfigError(
        f"JAAS file {path}: section {section} has no {DIGEST_LOGIN_MODULE} (only SASL/digest is supported)"
    )


def _true(name: str, value: str) -> bool:
    if value.strip().lower() not in ("true", "false"):
        raise ConfigError(f"{name}: {value!r} is not true or false")
    return value.strip().lower() == "true"
