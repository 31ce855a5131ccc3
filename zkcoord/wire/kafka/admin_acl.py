"""Kafka's ACL checks of the forwarded admin requests, as Kafka 3.9's KafkaApis makes them, as far as the gateway
makes them itself: DescribeConfigs per resource (:data:`CHECKS`), the APIs whose check is one operation on the
Cluster for the whole request, and a policy for the rest (:func:`forwarded_operation`).

Pure: imports only kio and zkcoord.wire.kafka.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from zkcoord.wire.kafka.acl import (
    ALL,
    ALTER,
    ALTER_CONFIGS,
    CLUSTER,
    CLUSTER_ACTION,
    CLUSTER_AUTHORIZATION_FAILED,
    CLUSTER_NAME,
    DESCRIBE,
    DESCRIBE_CONFIGS,
    TOPIC,
    TOPIC_AUTHORIZATION_FAILED,
    Allowed,
    Denial,
    Verdict,
    in_request_order,
    reencoded,
)
from zkcoord.wire.kafka.entities import build, to_plain
from zkcoord.wire.kafka.frames import RequestHeader, read_response, response_schema

DESCRIBE_CONFIGS_API = 32
_TOPIC_RESOURCE = 2  # ConfigResource.Type: the others (broker, broker logger, client metrics) are the Cluster's


def _describe_configs(header: RequestHeader, body: dict, allowed: Allowed) -> Verdict | None:
    """DescribeConfigs on each Topic resource (29), on the Cluster for every other resource (31); the allowed
    resources are described, the refused ones answered in place."""
    resources = body["resources"]
    keys = [(resource["resource_type"], resource["resource_name"]) for resource in resources]

    def check(key: tuple[int, str]) -> tuple[str, str]:
        return (TOPIC, key[1]) if key[0] == _TOPIC_RESOURCE else (CLUSTER, CLUSTER_NAME)

    verdicts = {key: allowed(DESCRIBE_CONFIGS, *check(key)) for key in dict.fromkeys(keys)}
    denied = {index: key for index, key in enumerate(keys) if not verdicts[key]}
    if not denied:
        return None
    denials = tuple(dict.fromkeys(Denial(DESCRIBE_CONFIGS, *check(key)) for key in denied.values()))
    refused = {
        index: {
            "error_code": TOPIC_AUTHORIZATION_FAILED if key[0] == _TOPIC_RESOURCE else CLUSTER_AUTHORIZATION_FAILED,
            "error_message": None,
            "resource_type": key[0],
            "resource_name": key[1],
            "configs": [],
        }
        for index, key in denied.items()
    }
    kept = [resource for index, resource in enumerate(resources) if index not in denied]
    schema = response_schema(DESCRIBE_CONFIGS_API, header.api_version)
    if not kept:
        return Verdict(denials, answer=build(schema, {"throttle_time": 0, "results": list(refused.values())}))

    def reply(frame: bytes):
        _, upstream = read_response(DESCRIBE_CONFIGS_API, header.api_version, frame)
        plain = to_plain(upstream)
        plain["results"] = in_request_order(
            keys, refused, plain["results"], lambda result: (result["resource_type"], result["resource_name"])
        )
        return build(schema, plain)

    return Verdict(denials, forward=reencoded(header, {**body, "resources": kept}), reply=reply)


CHECKS: dict[int, Callable[[RequestHeader, dict, Allowed], Verdict | None]] = {DESCRIBE_CONFIGS_API: _describe_configs}


class Requirement(NamedTuple):
    """An operation on the Cluster that Kafka requires for a whole request."""

    operation: str
    resource_type: str = CLUSTER


# The forwarded APIs whose Kafka check is one operation on the Cluster for the whole request.
_CLUSTER_WIDE = {
    29: Requirement(DESCRIBE),  # DescribeAcls
    30: Requirement(ALTER),  # CreateAcls
    31: Requirement(ALTER),  # DeleteAcls
    34: Requirement(ALTER),  # AlterReplicaLogDirs
    35: Requirement(DESCRIBE),  # DescribeLogDirs
    43: Requirement(ALTER),  # ElectLeaders
    45: Requirement(ALTER),  # AlterPartitionReassignments
    46: Requirement(DESCRIBE),  # ListPartitionReassignments
    48: Requirement(DESCRIBE_CONFIGS),  # DescribeClientQuotas
    49: Requirement(ALTER_CONFIGS),  # AlterClientQuotas
    50: Requirement(DESCRIBE),  # DescribeUserScramCredentials
    51: Requirement(ALTER),  # AlterUserScramCredentials
    57: Requirement(ALTER),  # UpdateFeatures
    # Kafka checks nothing unless the cluster's authorized operations are asked for; the broker would answer them
    # for the gateway's principal, so the gateway asks what Kafka asks then.
    60: Requirement(DESCRIBE),  # DescribeCluster
    **{key: Requirement(CLUSTER_ACTION) for key in (4, 5, 6, 7, 27, 56, 67)},  # between brokers and controllers
}
# Kafka checks nothing: a client's telemetry (KIP-714), which Java clients send on their own when it is advertised.
_UNCHECKED = frozenset((71, 72))
# Kafka's All matches only an ACL granting All (and super users): a cluster administrator's.
_CLUSTER_ADMIN = Requirement(ALL)


def forwarded_operation(api_key: int) -> Requirement | None:
    """The operation on the Cluster that a forwarded request of ``api_key`` whose body the gateway does not check
    needs: Kafka's own where Kafka's check is one operation on the Cluster; None where Kafka checks nothing; All
    on the Cluster (super users and cluster administrators) where Kafka's check is per resource named in the body
    (CreateTopics: Create; DeleteTopics, DeleteRecords: Delete; CreatePartitions: Alter; AlterConfigs and
    IncrementalAlterConfigs: AlterConfigs per resource; DescribeProducers, DescribeTransactions,
    ListTransactions, the delegation-token APIs...)."""
    if api_key in _UNCHECKED:
        return None
    return _CLUSTER_WIDE.get(api_key, _CLUSTER_ADMIN)
