"""Consumer groups held by coordinator nodes, as the admin client reads and changes them (wire-protocol.md).

FindCoordinator on any node, then the group's coordinator, retrying 14/15/16 with backoff until
``request_timeout_ms``; answers become the results and errors of :mod:`zkcoord.admin.model`.

IO: blocking sockets (``zkcoord.channel``) under timeouts. Must not import kazoo, the CLI, the
renderer, the server or gevent.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable, Iterable, Mapping, Sequence

from zkcoord.admin.model import (
    CONSUMER_PROTOCOL_TYPES,
    COORDINATOR,
    GroupDescription,
    GroupListing,
    MemberRemoval,
    Node,
    OffsetAndMetadata,
    commit_failure,
    coordinator_group,
    offset_delete_refusal,
)
from zkcoord.channel import RETRIABLE, CoordinatorChannel, Unreachable
from zkcoord.channel import top_level_error as _top_level
from zkcoord.errors import (
    CoordinatorNotAvailableError,
    CoordinatorResponseError,
    ErrorCode,
    error_for,
)
from zkcoord.model import Address, TopicPartition
from zkcoord.wire.consumer_protocol import ConsumerProtocolError, decode_assignment
from zkcoord.wire.requests import simple_offset_commit

log = logging.getLogger(__name__)


class CoordinatorGroups:
    """Kafka's admin-client group calls against coordinator nodes; ``addresses()`` gives the nodes to ask first,
    ``create_connection`` connects to one (with TLS and SASL: :meth:`ClientSecurity.connector`)."""

    def __init__(
        self,
        addresses: Callable[[], list[Address]],
        client_id: str,
        request_timeout_ms: int,
        create_connection=socket.create_connection,
    ):
        self._channel = CoordinatorChannel(
            addresses,
            client_id,
            request_timeout_ms,
            unavailable=CoordinatorNotAvailableError,
            error_for=error_for,
            create_connection=create_connection,
        )

    def close(self) -> None:
        self._channel.close()

    def nodes(self) -> list[Node]:
        """Every node, as Metadata on any node lists them."""
        response = self._channel.call_any_node("Metadata", topics=[])
        nodes = [Node(n["node_id"], n["host"], n["port"]) for n in response.get("nodes") or []]
        return sorted(nodes, key=lambda n: n.node_id)

    def list(self, nodes: Iterable[Node], states: list[str]) -> list[GroupListing]:
        """The consumer groups (protocol type "consumer" or "") that ``nodes`` hold, in ``states`` (all if empty)."""
        return [
            GroupListing(group["group_id"], COORDINATOR, group["group_state"], group["protocol_type"])
            for node in nodes
            for group in self._list_node_groups(node, states)
            if group["protocol_type"] in CONSUMER_PROTOCOL_TYPES
        ]

    def describe(self, group_id: str) -> GroupDescription:
        """DescribeGroups on the group's coordinator (state Dead when it holds no such group)."""
        response, node = self._call(
            group_id,
            "DescribeGroups",
            retriable=lambda r: _first_code(r, "groups") in RETRIABLE,
            groups=[group_id],
        )
        groups = response.get("groups") or []
        if not groups:
            raise error_for(_top_level(response) or ErrorCode.UNKNOWN_SERVER_ERROR, response.get("error_message"))
        group = groups[0]
        if group["error_code"] != 0:
            raise error_for(group["error_code"])
        return coordinator_group(group_id, group, lambda member: _assignment(group_id, member), node)

    def committed(self, group_id: str) -> dict[TopicPartition, OffsetAndMetadata]:
        """OffsetFetch of every partition the group has committed, by partition."""
        response, _ = self._call(group_id, "OffsetFetch", group_id=group_id, topics=None)
        if (code := _top_level(response)) != 0:
            raise error_for(code, response.get("error_message"))
        offsets = {}
        for topic in response.get("topics") or []:
            for partition in topic["partitions"]:
                if partition.get("error_code", 0) == 0 and partition["committed_offset"] >= 0:
                    offsets[TopicPartition(topic["name"], partition["partition_index"])] = OffsetAndMetadata(
                        partition["committed_offset"], partition.get("metadata") or ""
                    )
        return dict(sorted(offsets.items()))

    def commit(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        """OffsetCommit outside any generation; the first failed partition raises."""
        response, _ = self._call(
            group_id,
            "OffsetCommit",
            retriable=_all_partitions_retriable,
            **simple_offset_commit(group_id, offsets),
        )
        if (code := _top_level(response)) != 0:
            raise error_for(code, response.get("error_message"))
        failed = {
            TopicPartition(t["name"], p["partition_index"]): p["error_code"]
            for t in response.get("topics") or []
            for p in t["partitions"]
            if p["error_code"] != 0
        }
        if failed:
            raise commit_failure(group_id, failed)

    def delete(self, group_id: str) -> None:
        """DeleteGroups of one group; its error raises."""
        response, _ = self._call(
            group_id,
            "DeleteGroups",
            retriable=lambda r: _first_code(r, "results") in RETRIABLE,
            groups_names=[group_id],
        )
        code = _first_code(response, "results")
        if code != 0:
            raise error_for(code, response.get("error_message"))

    def delete_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, CoordinatorResponseError | None]:
        """KIP-496 OffsetDelete: a top-level refusal raises; per-partition errors are returned."""
        by_topic: dict[str, list[dict]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append({"partition_index": tp.partition})
        response, _ = self._call(
            group_id,
            "OffsetDelete",
            group_id=group_id,
            topics=[{"name": name, "partitions": entries} for name, entries in by_topic.items()],
        )
        code = _top_level(response)
        if (refusal := offset_delete_refusal(group_id, code)) is not None:
            raise refusal
        codes = {
            TopicPartition(t["name"], p["partition_index"]): p["error_code"]
            for t in response.get("topics") or []
            for p in t.get("partitions") or []
        }
        if code != 0 and not any(codes.values()):
            raise error_for(code, response.get("error_message"))
        return {tp: error_for(codes[tp]) if codes.get(tp, 0) else None for tp in partitions}

    def remove_members(self, group_id: str, instance_ids: Sequence[str]) -> list[MemberRemoval]:
        """KIP-345 LeaveGroup of static members by ``group.instance.id``; a top-level error raises."""
        members = [{"member_id": "", "group_instance_id": instance_id} for instance_id in instance_ids]
        response, _ = self._call(group_id, "LeaveGroup", group_id=group_id, members=members)
        if (code := _top_level(response)) != 0:
            raise error_for(code, response.get("error_message"))
        codes = {m["group_instance_id"]: m["error_code"] for m in response.get("members") or []}
        return [
            MemberRemoval(instance_id, error_for(codes[instance_id]) if codes.get(instance_id, 0) else None)
            for instance_id in instance_ids
        ]

    def partition_counts(self, topics: Sequence[str]) -> dict[str, int]:
        """Partitions per topic, from Metadata on any node; topics it does not know are left out."""
        response = self._channel.call_any_node("Metadata", topics=list(topics))
        return {
            topic["name"]: len(topic["partitions"])
            for topic in response.get("topics") or []
            if topic["error_code"] == 0
        }

    def _list_node_groups(self, node: Node, states: list[str]) -> list[dict]:
        """ListGroups on one node, again while it loads (14); CoordinatorNotAvailableError when it still loads at the
        deadline (the groups it lists then may not be all it holds)."""
        deadline = self._channel.deadline()
        backoff = self._channel.backoff()
        while True:
            try:
                response = self._channel.call((node.host, node.port), "ListGroups", states_filter=states)
            except Unreachable as error:
                if time.monotonic() + backoff > deadline:
                    raise CoordinatorNotAvailableError(f"ListGroups on node {node}: {error}") from None
            else:
                code = _top_level(response)
                if code == 0:
                    return response.get("groups") or []
                if code not in RETRIABLE:
                    raise error_for(code, response.get("error_message"))
                if time.monotonic() + backoff > deadline:
                    waited = self._channel.request_timeout_ms
                    raise CoordinatorNotAvailableError(f"ListGroups on node {node}: still loading after {waited} ms")
            time.sleep(backoff)
            backoff = self._channel.backoff(backoff)

    def _call(self, key: str, api: str, **kwargs) -> tuple[dict, Node]:
        """Send to the coordinator of group ``key`` until the answer is not retriable; (response, coordinator)."""
        response, (node_id, (host, port)) = self._channel.call_coordinator(key, api, **kwargs)
        return response, Node(node_id, host, port)


def _first_code(response: dict, field: str) -> int:
    entries = response.get(field) or []
    return entries[0]["error_code"] if entries else _top_level(response) or ErrorCode.UNKNOWN_SERVER_ERROR


def _all_partitions_retriable(response: dict) -> bool:
    """OffsetCommit has no top-level error: a coordinator problem shows on every partition."""
    codes = {p["error_code"] for t in response.get("topics") or [] for p in t["partitions"]}
    return bool(codes) and codes <= RETRIABLE


def _assignment(group_id: str, member: dict) -> tuple[TopicPartition, ...]:
    data = member.get("member_assignment") or b""
    if not data:
        return ()
    try:
        return tuple(decode_assignment(data).assigned_partitions)
    except ConsumerProtocolError as error:
        log.warning("unreadable assignment group=%s member=%s error=%s", group_id, member.get("member_id"), error)
        return ()
