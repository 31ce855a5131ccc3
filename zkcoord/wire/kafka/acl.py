"""Kafka's ACL vocabulary as its ACL JSON and kafka-acls spell it, and the pieces every check of a Kafka request
shares: a refused check (:class:`Denial`), what the gateway does with a checked request (:class:`Verdict`), the
bits of ``authorized_operations``, refused entries put back in a request's order.

Pure: imports only kio and zkcoord.wire.kafka.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple, TypeVar

from zkcoord.wire.kafka.entities import build
from zkcoord.wire.kafka.frames import RequestHeader, encode_request, request_schema

ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = "All", "Read", "Write", "Create", "Delete", "Alter", "Describe"
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS = "ClusterAction", "DescribeConfigs", "AlterConfigs"
IDEMPOTENT_WRITE = "IdempotentWrite"
TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID = "Topic", "Group", "Cluster", "TransactionalId"
CLUSTER_NAME = "kafka-cluster"  # the one Cluster resource's name

Allowed = Callable[[str, str, str], bool]
Entry = TypeVar("Entry")
TOPIC_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED = 29, 30, 31
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53

# Kafka's AclOperation codes, and the operations each resource type supports (AclEntry.supportedOperations).
_OPERATION_CODES = {
    READ: 3,
    WRITE: 4,
    CREATE: 5,
    DELETE: 6,
    ALTER: 7,
    DESCRIBE: 8,
    CLUSTER_ACTION: 9,
    DESCRIBE_CONFIGS: 10,
    ALTER_CONFIGS: 11,
    IDEMPOTENT_WRITE: 12,
}
_SUPPORTED = {
    TOPIC: (READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS),
    GROUP: (READ, DELETE, DESCRIBE),
    CLUSTER: (CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE),
    TRANSACTIONAL_ID: (WRITE, DESCRIBE),
}
NOT_REQUESTED = -(2**31)  # Kafka's "authorized operations not asked for"


class Denial(NamedTuple):
    """One refused check, for the log: the principal and host are the caller's."""

    operation: str
    resource_type: str
    name: str


def authorized_operations(allowed: Allowed, resource_type: str, name: str) -> int:
    """Kafka's bit field of the operations ``resource_type`` ``name`` supports that ``allowed`` grants (the
    ``authorized_operations`` of DescribeGroups, Metadata and DescribeCluster)."""
    bits = 0
    for operation in _SUPPORTED[resource_type]:
        if allowed(operation, resource_type, name):
            bits |= 1 << _OPERATION_CODES[operation]
    return bits


@dataclass(frozen=True)
class Verdict:
    """What the gateway does instead of forwarding a request unchanged.

    ``answer``: the kio response to send, nothing forwarded. Otherwise the request is forwarded: as
    ``forward`` (a size-prefixed frame with the client's correlation id) instead of the client's frame when set,
    and ``reply``, when set, turns the upstream's answer frame (without its size prefix) into the kio response
    for the client, which the gateway then rewrites as any answer of its API (Metadata's addresses).
    ``close``: close the connection once the answers before it are written (after forwarding ``forward``, if any).
    """

    denials: tuple[Denial, ...] = ()
    answer: object | None = None
    forward: bytes | None = None
    reply: Callable[[bytes], object] | None = None
    close: bool = False


def in_request_order(
    names: Sequence[str], refused: Mapping[int, Entry], answered: Iterable[Entry], name_of: Callable[[Entry], str]
) -> tuple[Entry, ...]:
    """``answered`` (the answers to the request's entries not in ``refused``) and ``refused`` (by the entry's
    index in ``names``, the request's entry names) in the request's order; answered entries the request did not
    name go last."""
    waiting: dict[str, collections.deque] = collections.defaultdict(collections.deque)
    for entry in answered:
        waiting[name_of(entry)].append(entry)
    spliced = []
    for index, name in enumerate(names):
        if index in refused:
            spliced.append(refused[index])
        elif waiting[name]:
            spliced.append(waiting[name].popleft())
    spliced.extend(entry for left in waiting.values() for entry in left)
    return tuple(spliced)


def reencoded(header: RequestHeader, plain: dict, version: int | None = None) -> bytes:
    """The size-prefixed request ``plain`` of the client's API, at its version unless told."""
    schema = request_schema(header.api_key, header.api_version if version is None else version)
    return encode_request(header.correlation_id, header.client_id, build(schema, plain))
