"""Valid example requests of every served API (wire-protocol.md §3), shared by the wire tests.

Written from the document, not read off the implementation: the request checks and the codec are tested
against them.
"""


def request(api: str, **fields) -> dict:
    """A v0 request map of ``api`` with the header filled in and ``fields`` as its body."""
    return {"api": api, "api_version": 0, "correlation_id": 11, "client_id": "c", **fields}


VALID = {
    "ApiVersions": request("ApiVersions"),
    "Metadata": request("Metadata", topics=["orders", "payments"]),
    "FindCoordinator": request("FindCoordinator", key="g", key_type=0),
    "JoinGroup": request(
        "JoinGroup",
        group_id="g",
        session_timeout_ms=10000,
        rebalance_timeout_ms=30000,
        member_id="",
        group_instance_id="i-1",
        protocol_type="consumer",
        protocols=[{"name": "range", "metadata": b"\x80"}, {"name": "roundrobin", "metadata": b""}],
    ),
    "SyncGroup": request(
        "SyncGroup",
        group_id="g",
        generation_id=1,
        member_id="m-1",
        group_instance_id="i-1",
        protocol_type="consumer",
        protocol_name="range",
        assignments=[{"member_id": "m-1", "assignment": b"a"}, {"member_id": "m-2", "assignment": b""}],
    ),
    "Heartbeat": request("Heartbeat", group_id="g", generation_id=1, member_id="m-1", group_instance_id="i-1"),
    "LeaveGroup": request(
        "LeaveGroup",
        group_id="g",
        members=[{"member_id": "m-1", "group_instance_id": "i-1"}, {"member_id": "", "group_instance_id": "i-2"}],
    ),
    "OffsetCommit": request(
        "OffsetCommit",
        group_id="g",
        generation_id=-1,
        member_id="",
        group_instance_id="i-1",
        retention_time_ms=-1,
        if_greater=False,
        topics=[
            {
                "name": "orders",
                "partitions": [
                    {"partition_index": 0, "committed_offset": 5, "committed_metadata": "m"},
                    {"partition_index": 1, "committed_offset": 2**63 - 1, "committed_metadata": ""},
                ],
            }
        ],
    ),
    "OffsetFetch": request(
        "OffsetFetch", group_id="g", topics=[{"name": "orders", "partition_indexes": [0, 1]}], log_only=False
    ),
    "DescribeGroups": request("DescribeGroups", groups=["g", "h"]),
    "ListGroups": request("ListGroups", states_filter=["Stable"]),
    "DeleteGroups": request("DeleteGroups", groups_names=["g", "h"]),
    "OffsetDelete": request(
        "OffsetDelete",
        group_id="g",
        topics=[{"name": "orders", "partitions": [{"partition_index": 0}, {"partition_index": 1}]}],
    ),
    "SaslHandshake": request("SaslHandshake", mechanism="SCRAM-SHA-256"),
    "SaslAuthenticate": request("SaslAuthenticate", auth_bytes=b"n,,n=alice,r=nonce"),
}
