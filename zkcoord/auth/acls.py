"""Kafka's ACLs as AclAuthorizer (Kafka 3.x, ZooKeeper mode) keeps and checks them, without IO.

The model (:class:`Acl`, :class:`ResourcePattern`, :class:`ResourcePatternFilter`), the znode formats Kafka writes
(a resource's ACLs as JSON, the literal and extended change notifications) and :class:`Authorizer`, whose
``authorize`` is AclAuthorizer's ``authorizeAction``: super users pass; a matching Deny wins; else a matching
Allow (Read, Write, Delete or Alter imply Describe, AlterConfigs implies DescribeConfigs, All is every operation)
allows; a resource with no ACL at all on any pattern that matches it follows ``allow.everyone.if.no.acl.found``.

Names are Kafka's: the ZooKeeper and JSON spellings ("Group", "Read", "Allow"), the pattern types "LITERAL" and
"PREFIXED". What cannot be read raises ``ValueError`` naming the data. Must import no IO.
"""

import ipaddress
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

RESOURCE_TYPES = ("Topic", "Group", "Cluster", "TransactionalId", "DelegationToken", "User")
OPERATIONS = (
    "All",
    "Read",
    "Write",
    "Create",
    "Delete",
    "Alter",
    "Describe",
    "ClusterAction",
    "DescribeConfigs",
    "AlterConfigs",
    "IdempotentWrite",
    "CreateTokens",
    "DescribeTokens",
)
PERMISSIONS = ("Allow", "Deny")
# What Kafka reads an operation or permission name it does not know as: kept, matching no request, but the
# resource then has ACLs, so allow.everyone.if.no.acl.found no longer applies to it.
UNKNOWN = "Unknown"
LITERAL, PREFIXED = "LITERAL", "PREFIXED"
PATTERN_TYPES = (LITERAL, PREFIXED)
FILTER_PATTERN_TYPES = (LITERAL, PREFIXED, "ANY", "MATCH")

WILDCARD_RESOURCE = "*"
WILDCARD_HOST = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"

# Allowing the key's operations allows the value too (AclAuthorizer.authorizeAction); a Deny implies nothing.
IMPLIED_BY = {"Describe": ("Read", "Write", "Delete", "Alter"), "DescribeConfigs": ("AlterConfigs",)}

# AclEntry.supportedOperations: what kafka-acls lets one grant on each resource type (besides All).
SUPPORTED_OPERATIONS = {
    "Topic": ("Read", "Write", "Create", "Describe", "Delete", "Alter", "DescribeConfigs", "AlterConfigs"),
    "Group": ("Read", "Describe", "Delete"),
    "Cluster": ("Create", "ClusterAction", "DescribeConfigs", "AlterConfigs", "IdempotentWrite", "Alter", "Describe"),
    "TransactionalId": ("Describe", "Write"),
    "DelegationToken": ("Describe",),
    "User": ("CreateTokens", "DescribeTokens"),
}

ACLS_VERSION = 1
CHANGE_EVENT_VERSION = 1


def enum_name(name: str) -> str:
    """A Pascal-case name as Kafka's Java enum spells it: ``DescribeConfigs`` → ``DESCRIBE_CONFIGS``."""
    return "".join("_" + c if c.isupper() and i else c for i, c in enumerate(name)).upper()


def _lookup(names: Iterable[str]) -> dict[str, str]:
    # SecurityUtils accepts the Pascal name or its upper case (no underscores); "read" works too, being
    # looked up upper-cased, but "DESCRIBE_CONFIGS" does not.
    return {name.upper(): name for name in names}


_OPERATIONS = _lookup(OPERATIONS)
_PERMISSIONS = _lookup(PERMISSIONS)
_ENUM_RESOURCE_TYPES = {enum_name(name): name for name in RESOURCE_TYPES}


def parse_operation(name: str) -> str:
    """An operation as Kafka's tools take it (``Read``, ``READ``, ``read``, ``DescribeConfigs``); ValueError else."""
    try:
        return _OPERATIONS[name.strip().upper()]
    except KeyError:
        raise ValueError(f"unknown operation {name!r}; valid operations: {', '.join(OPERATIONS)}") from None


def parse_enum_resource_type(name: str) -> str:
    """A resource type by its Java enum name, any case (``GROUP``, ``transactional_id``), as
    ``ResourceType.fromString`` reads change notifications; ValueError else."""
    try:
        return _ENUM_RESOURCE_TYPES[name.upper()]
    except KeyError:
        raise ValueError(f"unknown resource type {name!r}") from None


def parse_principal(text: str) -> str:
    """``Type:name`` as Kafka's ``SecurityUtils.parseKafkaPrincipal`` takes it (split at the first colon)."""
    if ":" not in text:
        raise ValueError(f"expected a principal as principalType:principalName but got {text!r}")
    return text


def parse_super_users(text: str) -> frozenset[str]:
    """``super.users``: principals separated by ``;``, each stripped (``User:admin; User:ops``)."""
    if not text:
        return frozenset()
    parts = text.split(";")
    while parts and not parts[-1]:  # Java's split drops trailing empty strings, and only those
        parts.pop()
    return frozenset(parse_principal(part.strip()) for part in parts)


def parse_bool(text: str) -> bool:
    """A boolean property as Scala's ``toBoolean`` reads it after trimming: ``true``/``false`` in any case."""
    value = text.strip().lower()
    if value not in ("true", "false"):
        raise ValueError(f"expected true or false but got {text!r}")
    return value == "true"


def kafka_host_address(address: str) -> str:
    """A client's IP as Java's ``InetAddress.getHostAddress`` writes it, which is what ACL hosts are compared with:
    IPv6 uncompressed without leading zeros (``0:0:0:0:0:0:0:1``), an IPv4-mapped IPv6 address as IPv4."""
    bare, percent, scope = address.partition("%")
    ip = ipaddress.ip_address(bare)
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return ":".join(f"{int(group, 16):x}" for group in ip.exploded.split(":")) + percent + scope
    return str(ip)


@dataclass(frozen=True, order=True)
class Acl:
    """One access control entry: ``principal`` (``User:alice``, ``User:*``), ``host`` (an IP or ``*``),
    ``operation`` (:data:`OPERATIONS`) and ``permission`` (``Allow``/``Deny``), Kafka's JSON spellings."""

    principal: str
    host: str
    operation: str
    permission: str

    def __post_init__(self):
        parse_principal(self.principal)
        if self.operation not in OPERATIONS and self.operation != UNKNOWN:
            raise ValueError(f"unknown operation {self.operation!r}; valid operations: {', '.join(OPERATIONS)}")
        if self.permission not in PERMISSIONS and self.permission != UNKNOWN:
            raise ValueError(f"unknown permission type {self.permission!r}; valid: Allow, Deny")

    def describe(self) -> str:
        """As Kafka's ``AccessControlEntry.toString`` (what kafka-acls prints)."""
        return (
            f"(principal={self.principal}, host={self.host}, operation={enum_name(self.operation)}, "
            f"permissionType={enum_name(self.permission)})"
        )

    def to_json(self) -> dict[str, str]:
        return {
            "principal": self.principal,
            "permissionType": self.permission,
            "host": self.host,
            "operation": self.operation,
        }


@dataclass(frozen=True, order=True)
class ResourcePattern:
    """What ACLs are attached to: ``resource_type`` (:data:`RESOURCE_TYPES`), ``name`` (``*`` is every resource of
    the type when literal) and ``pattern_type`` (``LITERAL`` or ``PREFIXED``: every name that starts with it)."""

    resource_type: str
    name: str
    pattern_type: str = LITERAL

    def __post_init__(self):
        if self.resource_type not in RESOURCE_TYPES:
            raise ValueError(f"unknown resource type {self.resource_type!r}; valid: {', '.join(RESOURCE_TYPES)}")
        if self.pattern_type not in PATTERN_TYPES:
            raise ValueError(f"pattern type must be LITERAL or PREFIXED, not {self.pattern_type!r}")

    def check_storable(self) -> None:
        """ValueError unless the name can be a znode name (AclAuthorizer's ``validateAclBinding``, and ZooKeeper's)."""
        if not self.name or "/" in self.name or self.name in (".", ".."):
            raise ValueError(f"ACL binding contains invalid resource name: {self.name!r}")

    def describe(self) -> str:
        """As Kafka's ``ResourcePattern.toString`` (what kafka-acls prints)."""
        return (
            f"ResourcePattern(resourceType={enum_name(self.resource_type)}, name={self.name}, "
            f"patternType={self.pattern_type})"
        )


@dataclass(frozen=True)
class ResourcePatternFilter:
    """Kafka's ``ResourcePatternFilter``: ``resource_type`` and ``name`` None match any; ``pattern_type`` ``ANY``
    matches either type by exact name, ``MATCH`` every pattern that would apply to the name."""

    resource_type: str | None = None
    name: str | None = None
    pattern_type: str = "ANY"

    def __post_init__(self):
        if self.resource_type is not None and self.resource_type not in RESOURCE_TYPES:
            raise ValueError(f"unknown resource type {self.resource_type!r}; valid: {', '.join(RESOURCE_TYPES)}")
        if self.pattern_type not in FILTER_PATTERN_TYPES:
            raise ValueError(f"pattern type must be one of {', '.join(FILTER_PATTERN_TYPES)}: {self.pattern_type!r}")

    def matches(self, pattern: ResourcePattern) -> bool:
        if self.resource_type is not None and self.resource_type != pattern.resource_type:
            return False
        if self.pattern_type not in ("ANY", "MATCH") and self.pattern_type != pattern.pattern_type:
            return False
        if self.name is None:
            return True
        if self.pattern_type in ("ANY", pattern.pattern_type):
            return self.name == pattern.name
        if pattern.pattern_type == LITERAL:
            return self.name == pattern.name or pattern.name == WILDCARD_RESOURCE
        return self.name.startswith(pattern.name)

    def describe(self) -> str:
        kind = "ANY" if self.resource_type is None else enum_name(self.resource_type)
        name = "<any>" if self.name is None else self.name
        return f"ResourcePattern(resourceType={kind}, name={name}, patternType={self.pattern_type})"


# -- formats in ZooKeeper ------------------------------------------------------------------------------------------


def encode_acls(acls: Iterable[Acl]) -> bytes:
    """A resource znode's data byte for byte as Kafka 3.9 writes one ACL (its keys in the order of Java's HashMap):
    ``{"acls":[{"principal":"User:alice","permissionType":"Allow","host":"*","operation":"Read"}],"version":1}``."""
    entries = [acl.to_json() for acl in sorted(set(acls))]
    return json.dumps({"acls": entries, "version": ACLS_VERSION}, separators=(",", ":"), ensure_ascii=False).encode()


def decode_acls(data: bytes | None) -> frozenset[Acl]:
    """A resource znode's ACLs, read as ``AclEntry.fromBytes`` reads them (no data or JSON null: none)."""
    if not data:
        return frozenset()
    try:
        document = json.loads(data)
        if document is None:
            return frozenset()
        version = document.get("version")
        if type(version) is not int or version != ACLS_VERSION:
            raise ValueError(f"version must be {ACLS_VERSION}")
        return frozenset(_decode_entry(entry) for entry in document["acls"])
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise ValueError(f"unreadable ACLs {_shown(data)}: {_reason(error)}") from None


def _decode_entry(entry: Mapping[str, object]) -> Acl:
    principal, permission, host, operation = (
        entry["principal"],
        entry["permissionType"],
        entry["host"],
        entry["operation"],
    )
    if not all(isinstance(value, str) for value in (principal, permission, host, operation)):
        raise ValueError("principal, permissionType, host and operation must be strings")
    return Acl(
        parse_principal(principal),
        host,
        _OPERATIONS.get(operation.upper(), UNKNOWN),
        _PERMISSIONS.get(permission.upper(), UNKNOWN),
    )


def encode_literal_change(pattern: ResourcePattern) -> bytes:
    """A ``/kafka-acl-changes`` notification's data: ``GROUP:name``, the Java enum name of the type (not the
    ZooKeeper directory's ``Group``), as ``LiteralAclChangeStore`` writes it."""
    if pattern.pattern_type != LITERAL:
        raise ValueError("only literal resource patterns go to the literal change notifications")
    return f"{enum_name(pattern.resource_type)}:{pattern.name}".encode()


def decode_literal_change(data: bytes) -> ResourcePattern:
    """The literal resource a ``/kafka-acl-changes`` notification names."""
    text = data.decode("utf-8", errors="replace")
    resource_type, separator, name = text.partition(":")
    try:
        if not separator:
            raise ValueError("expected ResourceType:ResourceName")
        return ResourcePattern(parse_enum_resource_type(resource_type), name, LITERAL)
    except ValueError as error:
        raise ValueError(f"unreadable ACL change notification {_shown(data)}: {error}") from None


def encode_extended_change(pattern: ResourcePattern) -> bytes:
    """A ``/kafka-acl-extended-changes`` notification's data, as ``ExtendedAclChangeStore`` writes it."""
    if pattern.pattern_type == LITERAL:
        raise ValueError("literal resource patterns go to the literal change notifications")
    event = {
        "version": CHANGE_EVENT_VERSION,
        "resourceType": enum_name(pattern.resource_type),
        "name": pattern.name,
        "patternType": pattern.pattern_type,
    }
    return json.dumps(event, separators=(",", ":"), ensure_ascii=False).encode()


def decode_extended_change(data: bytes) -> ResourcePattern:
    """The resource pattern a ``/kafka-acl-extended-changes`` notification names."""
    try:
        event = json.loads(data)
        if event["version"] > CHANGE_EVENT_VERSION:
            raise ValueError(f"unsupported version {event['version']}")
        name = event["name"]
        if not isinstance(name, str):
            raise ValueError("name must be a string")
        return ResourcePattern(parse_enum_resource_type(event["resourceType"]), name, event["patternType"])
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise ValueError(f"unreadable ACL change notification {_shown(data)}: {_reason(error)}") from None


def _shown(data: bytes) -> str:
    text = data.decode("utf-8", errors="replace")
    return repr(text if len(text) <= 200 else text[:200] + "...")


def _reason(error: Exception) -> str:
    return f"missing field {error}" if isinstance(error, KeyError) else str(error)


# -- the decision --------------------------------------------------------------------------------------------------

_Key = tuple[str, str, str]  # (resource type, pattern type, name): no object built per lookup


class Authorizer:
    """Every resource pattern's ACLs, and AclAuthorizer's decision over them.

    Reads never iterate the table and a change replaces one entry, so one thread may ``set_acls`` while others
    ``authorize``.
    """

    def __init__(self, super_users: Iterable[str] = (), allow_everyone_if_no_acl_found: bool = False):
        self.super_users = frozenset(parse_principal(principal) for principal in super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._acls: dict[_Key, frozenset[Acl]] = {}
        # Resource type → its prefixed patterns' names, replaced whole on a change: a check tests these few
        # prefixes, never every prefix of a (possibly huge, client-given) name.
        self._prefixes: dict[str, frozenset[str]] = {}

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> "Authorizer":
        """An authorizer configured by Kafka's ``super.users`` and ``allow.everyone.if.no.acl.found``."""
        return cls(
            parse_super_users(properties.get("super.users", "").strip()),
            parse_bool(properties.get("allow.everyone.if.no.acl.found", "false")),
        )

    def set_acls(self, pattern: ResourcePattern, acls: Iterable[Acl]) -> None:
        """Replace ``pattern``'s ACLs (none: forget the pattern), as a change notification does."""
        key = (pattern.resource_type, pattern.pattern_type, pattern.name)
        entries = frozenset(acls)
        if entries:
            self._acls[key] = entries
        else:
            self._acls.pop(key, None)
        if pattern.pattern_type == PREFIXED:
            prefixes = self._prefixes.get(pattern.resource_type, frozenset())
            prefixes = prefixes | {pattern.name} if entries else prefixes - {pattern.name}
            self._prefixes[pattern.resource_type] = prefixes

    def acls(self, pattern: ResourcePattern) -> frozenset[Acl]:
        return self._acls.get((pattern.resource_type, pattern.pattern_type, pattern.name), frozenset())

    def patterns(self) -> list[ResourcePattern]:
        """Every pattern that has ACLs, sorted."""
        return sorted(ResourcePattern(kind, name, pattern_type) for kind, pattern_type, name in list(self._acls))

    def matching_acls(self, resource_type: str, name: str) -> list[Acl]:
        """The ACLs of every pattern that applies to the resource: its prefixes, the wildcard, its literal name."""
        found: list[Acl] = []
        for prefix in self._prefixes.get(resource_type, ()):
            if name.startswith(prefix):
                found.extend(self._acls.get((resource_type, PREFIXED, prefix), ()))
        found.extend(self._acls.get((resource_type, LITERAL, WILDCARD_RESOURCE), ()))
        found.extend(self._acls.get((resource_type, LITERAL, name), ()))
        return found

    def any_acl_on(self, resource_type: str, name: str) -> bool:
        """Whether any pattern that applies to the resource has ACLs (if none, ``allow.everyone.if.no.acl.found``
        decides)."""
        return bool(self.matching_acls(resource_type, name))

    def authorize(self, principal: str, host: str, operation: str, resource_type: str, name: str) -> bool:
        """Whether ``principal`` (``User:alice``) from ``host`` (see :func:`kafka_host_address`) may do
        ``operation`` on the literal resource ``name`` of ``resource_type``."""
        if operation not in _OPERATION_SET:
            raise ValueError(f"unknown operation {operation!r}")
        if resource_type not in _RESOURCE_TYPE_SET:
            raise ValueError(f"unknown resource type {resource_type!r}")
        if principal in self.super_users:
            return True
        acls = self.matching_acls(resource_type, name)
        if not acls:
            return self.allow_everyone_if_no_acl_found
        if any(_applies(acl, "Deny", (operation,), principal, host) for acl in acls):
            return False
        allowing = (operation, *IMPLIED_BY.get(operation, ()))
        return any(_applies(acl, "Allow", allowing, principal, host) for acl in acls)


_OPERATION_SET = frozenset(OPERATIONS)
_RESOURCE_TYPE_SET = frozenset(RESOURCE_TYPES)


def _applies(acl: Acl, permission: str, operations: tuple[str, ...], principal: str, host: str) -> bool:
    # User:* matches a principal of any type: AclAuthorizer compares with WILDCARD_PRINCIPAL, not its type.
    return (
        acl.permission == permission
        and (acl.principal == principal or acl.principal == WILDCARD_PRINCIPAL)
        and (acl.operation in operations or acl.operation == "All")
        and (acl.host == host or acl.host == WILDCARD_HOST)
    )
