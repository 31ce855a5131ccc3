"""Which Kafka APIs a node's Kafka listener serves, forwards or refuses, and at which versions.

Group APIs are served at the versions Kafka 3.9 advertises intersected with those kio can decode (a table that
tests check against a real 3.9 broker's ApiVersions). Everything else is forwarded to the data brokers at the
versions they advertise, within what kio knows and below the versions that carry broker addresses the gateway
would have to rewrite inside data responses (KIP-951's ``NodeEndpoints``). The APIs of protocols zkcoord does
not serve are refused and never advertised.

Pure: imports only kio.
"""

from __future__ import annotations

from collections.abc import Mapping

from kio.schema.index import api_key_map, schema_name_map

API_VERSIONS = 18
FIND_COORDINATOR = 10
METADATA = 3
DESCRIBE_CLUSTER = 60
PRODUCE = 0
FETCH = 1
TXN_OFFSET_COMMIT = 28
LIST_GROUPS = 16
SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
# Answered by the listener itself on a SASL listener, never forwarded. SaslHandshake v0 (tokens without Kafka
# headers afterwards) is older than every client that speaks SaslAuthenticate.
SASL: dict[int, tuple[int, int]] = {SASL_HANDSHAKE: (1, 1), SASL_AUTHENTICATE: (0, 2)}

# Kafka 3.9's advertised range ∩ kio's (OffsetCommit starts at v2 and OffsetFetch at v1 in kio).
SERVED: dict[int, tuple[int, int]] = {
    API_VERSIONS: (0, 4),
    FIND_COORDINATOR: (0, 6),
    11: (0, 9),  # JoinGroup
    14: (0, 5),  # SyncGroup
    12: (0, 4),  # Heartbeat
    13: (0, 5),  # LeaveGroup
    8: (2, 9),  # OffsetCommit
    9: (1, 9),  # OffsetFetch
    15: (0, 5),  # DescribeGroups
    16: (0, 5),  # ListGroups
    42: (0, 2),  # DeleteGroups
    47: (0, 0),  # OffsetDelete
}

# Never advertised, answered with an error if sent anyway: transactional offset commits (zkcoord's log has no
# transaction markers), KIP-848's consumer groups, share groups and streams groups.
REFUSED = frozenset(
    key
    for key, name in api_key_map.items()
    if name == "txn_offset_commit" or "share" in name or name.startswith(("consumer_group_", "streams_group_"))
)

# Produce v10+ and Fetch v16+ may carry NodeEndpoints (broker addresses) in their answers, DescribeQuorum v2+ its
# voters' endpoints.
DESCRIBE_QUORUM = 55
FORWARD_CAPS = {PRODUCE: 9, FETCH: 15, DESCRIBE_QUORUM: 1}


def kio_versions(api_key: int) -> tuple[int, int] | None:
    """The versions of ``api_key`` kio can decode, or None for an API kio does not know."""
    name = api_key_map.get(api_key)
    if name is None or name not in schema_name_map:
        return None
    versions = schema_name_map[name]
    return min(versions), max(versions)


def advertised(
    upstream: Mapping[int, tuple[int, int]], caps: Mapping[int, int] = FORWARD_CAPS, sasl: bool = False
) -> dict[int, tuple[int, int]]:
    """The ApiVersions table: the served group APIs (and SASL's on a SASL listener), and each API the brokers
    advertise (``upstream``, api key → versions) that is not served or refused, within kio's versions and ``caps``
    (api key → highest version; authorization caps more: ``data_acl.AUTHORIZED_CAPS``)."""
    table = dict(SERVED) | (SASL if sasl else {})
    for key, (low, high) in upstream.items():
        known = kio_versions(key)
        if key in SERVED or key in REFUSED or key in SASL or known is None:
            continue
        low, high = max(low, known[0]), min(high, known[1], caps.get(key, high))
        if low <= high:
            table[key] = (low, high)
    return dict(sorted(table.items()))


def served(api_key: int, version: int) -> bool:
    low, high = SERVED.get(api_key, (0, -1))
    return low <= version <= high
