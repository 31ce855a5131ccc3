"""A coordinator on a virtual clock with an in-memory offsets log: the public test harness (stable API).

``CoordinatorHarness(config, owned_partitions)`` takes Kafka property names; ``send(request)`` takes exactly a
wire-protocol request map and returns a :class:`RequestHandle`. Appends complete before ``send`` returns
unless they are made to fail (:meth:`fail_appends`) or held (:meth:`hold_appends`); ``advance(ms)`` moves
the clock, then fires every timer whose deadline the clock has passed (now > deadline), in deadline order.
"""

from __future__ import annotations

import random
import uuid
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from zkcoord.config import build_config
from zkcoord.group.config import CoordinatorConfig
from zkcoord.group.coordinator import AppendRequest, GroupCoordinator
from zkcoord.group.model import Group, Member
from zkcoord.model import TopicPartition
from zkcoord.offsets.records import RecordKey, RecordValue, decode_key, decode_value, encode_record
from zkcoord.offsets.store import CommittedOffset, OffsetStore
from zkcoord.wire.requests import check_request, metadata_response, normalized, supported_api_versions

HARNESS_NODE = {"node_id": 0, "host": "127.0.0.1", "port": 0}


class RequestHandle:
    """One sent request: ``done`` once answered, ``response`` the wire-protocol response map."""

    def __init__(self, correlation_id: int):
        self.correlation_id = correlation_id
        self.done = False
        self.response: dict | None = None

    def complete(self, response: dict) -> None:
        if self.done:
            raise AssertionError(f"request {self.correlation_id} answered twice: {self.response} then {response}")
        self.response = {**response, "correlation_id": self.correlation_id}
        self.done = True

    def __repr__(self) -> str:
        return f"RequestHandle({self.correlation_id}, done={self.done}, response={self.response!r})"


@dataclass(frozen=True)
class MemberSnapshot:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]
    assignment: bytes
    awaiting_join: bool
    awaiting_sync: bool
    is_new: bool

    @classmethod
    def of(cls, member: Member) -> MemberSnapshot:
        return cls(
            member.member_id,
            member.group_instance_id,
            member.client_id,
            member.client_host,
            member.session_timeout_ms,
            member.rebalance_timeout_ms,
            member.protocols,
            member.assignment,
            member.awaiting_join is not None,
            member.awaiting_sync is not None,
            member.is_new,
        )


@dataclass(frozen=True)
class GroupSnapshot:
    """A copy of one group's state, for assertions."""

    group_id: str
    state: str
    state_timestamp: int
    generation: int
    protocol_type: str | None
    protocol_name: str | None
    leader: str | None
    members: dict[str, MemberSnapshot]
    static_members: dict[str, str]
    pending_members: frozenset[str]
    pending_sync: frozenset[str]
    subscribed_topics: frozenset[str] | None
    offsets: dict[TopicPartition, CommittedOffset]

    @classmethod
    def of(cls, group: Group) -> GroupSnapshot:
        return cls(
            group.group_id,
            group.state,
            group.state_timestamp,
            group.generation,
            group.protocol_type,
            group.protocol_name,
            group.leader_id,
            {member_id: MemberSnapshot.of(member) for member_id, member in group.members.items()},
            dict(group.static_members),
            frozenset(group.pending_members),
            frozenset(group.pending_sync),
            group.subscribed_topics,
            dict(group.offsets),
        )


class CoordinatorHarness:
    """A :class:`GroupCoordinator` driven by a virtual clock, with one in-memory log per offsets partition."""

    def __init__(self, config: Mapping[str, object], owned_partitions: Iterable[int], seed: int = 0):
        self.config = build_config(CoordinatorConfig, dict(config))
        self.now = 0
        self._random = random.Random(seed)
        self.coordinator = GroupCoordinator(self.config, self.now, new_member_id=self._member_id)
        self._logs: dict[int, list[tuple[int, list[tuple[bytes, bytes | None]]]]] = {}
        self._next_offset: dict[int, int] = {}
        self._failure: str | None = None
        self._holding = False
        self._held: deque[AppendRequest] = deque()
        self._correlation = 0
        for partition in owned_partitions:
            self.coordinator.load_partition(partition, OffsetStore(), self.now)

    def _member_id(self, prefix: str) -> str:
        return f"{prefix}-{uuid.UUID(int=self._random.getrandbits(128), version=4)}"

    # -- requests and time ------------------------------------------------------------------------------

    def send(self, request: dict) -> RequestHandle:
        """Handle one wire-protocol request map; the handle is done at once unless the protocol parks it."""
        correlation_id = request.get("correlation_id")
        handle = RequestHandle(correlation_id if isinstance(correlation_id, int) else -1)
        error = check_request(request)
        if error is not None:
            handle.complete(error)
            return handle
        request = normalized(request)
        api = request["api"]
        if self.coordinator.handles(api):
            self.coordinator.handle(request, handle.complete, self.now)
            self._run_appends()
        else:
            handle.complete(self._cluster_response(request))
        return handle

    def _cluster_response(self, request: dict) -> dict:
        """ApiVersions, FindCoordinator and Metadata as a one-node cluster would answer them."""
        api = request["api"]
        if api == "ApiVersions":
            return {"error_code": 0, "apis": supported_api_versions()}
        if api == "FindCoordinator":
            key = request["key"] or ""
            if self.coordinator.partition_for(key) in self.coordinator.owned:
                return {"error_code": 0, **HARNESS_NODE}
            return {"error_code": 15, "node_id": -1, "host": "", "port": -1}
        return metadata_response([HARNESS_NODE], self.coordinator.topics or {}, request["topics"])

    def advance(self, ms: int) -> None:
        """Move the clock by ``ms``, then fire every timer with ``now > deadline``, earliest first."""
        if ms < 0:
            raise ValueError("the virtual clock does not go back")
        self.now += ms
        while (action := self.coordinator.timers.pop_due(self.now)) is not None:
            action(self.now)
            self._run_appends()

    # -- the in-memory log --------------------------------------------------------------------------------

    def _run_appends(self) -> None:
        while appends := self.coordinator.take_appends():
            for append in appends:
                if self._holding:
                    self._held.append(append)
                elif self._failure is not None:
                    append.on_complete(self._failure, -1, self.now)
                else:
                    self._complete(append)

    def _complete(self, append: AppendRequest) -> None:
        base_offset = self._write(append.partition, append.records)
        append.on_complete(None, base_offset, self.now)

    def _write(self, partition: int, records: Iterable[tuple[RecordKey, RecordValue | None]]) -> int:
        encoded = [encode_record(key, value) for key, value in records]
        base_offset = self._next_offset.get(partition, 0)
        self._logs.setdefault(partition, []).append((base_offset, encoded))
        self._next_offset[partition] = base_offset + len(encoded)
        return base_offset

    def fail_appends(self, error_name: str | None) -> None:
        """Make later appends fail with Kafka error ``error_name`` (e.g. "MESSAGE_TOO_LARGE"); None to stop."""
        self._failure = error_name

    def hold_appends(self) -> None:
        """Keep later appends in flight until :meth:`complete_held_append` or :meth:`release_appends`."""
        self._holding = True

    @property
    def held_appends(self) -> int:
        return len(self._held)

    def complete_held_append(self, error_name: str | None = None) -> None:
        """Complete the oldest held append: written, or failed with ``error_name``."""
        append = self._held.popleft()
        if error_name is None:
            self._complete(append)
        else:
            append.on_complete(error_name, -1, self.now)
        holding, self._holding = self._holding, False
        try:
            self._run_appends()
        finally:
            self._holding = holding

    def release_appends(self) -> None:
        """Stop holding appends and complete every held one successfully."""
        self._holding = False
        while self._held:
            self._complete(self._held.popleft())
            self._run_appends()

    def append_records(self, partition: int, records: Iterable[tuple[RecordKey, RecordValue | None]]) -> int:
        """Append records straight to ``partition``'s log as one batch (for load tests); returns its base offset."""
        return self._write(partition, records)

    def records(self, partition: int) -> list[tuple[RecordKey, RecordValue | None]]:
        """Every record appended to ``partition``, decoded, in log order."""
        decoded = []
        for base_offset, batch in self._logs.get(partition, []):
            for delta, (key_bytes, value_bytes) in enumerate(batch):
                key = decode_key(key_bytes, base_offset + delta)
                decoded.append((key, decode_value(key, value_bytes, base_offset + delta)))
        return decoded

    # -- partitions -----------------------------------------------------------------------------------------

    def load(self, partition: int) -> None:
        """Rebuild ``partition`` by replaying its log (§9.6); it is owned afterwards."""
        store = OffsetStore()
        for base_offset, batch in self._logs.get(partition, []):
            for delta, (key_bytes, value_bytes) in enumerate(batch):
                key = decode_key(key_bytes, base_offset + delta)
                # The cache keeps the batch's base offset (§7.3 step 5), as a live commit does.
                store.apply(key, decode_value(key, value_bytes, base_offset + delta), base_offset)
        self.coordinator.load_partition(partition, store, self.now)
        self._run_appends()

    def unload(self, partition: int) -> None:
        self.coordinator.unload_partition(partition)

    def start_loading(self, partition: int) -> None:
        self.coordinator.begin_loading(partition)

    # -- inspection and other hooks -----------------------------------------------------------------------------

    def group(self, group_id: str) -> GroupSnapshot | None:
        group = self.coordinator.groups.get(group_id)
        return None if group is None else GroupSnapshot.of(group)

    def expire_offsets(self) -> int:
        """Run one offset-expiry pass now; returns how many offsets expired."""
        expired = self.coordinator.expire_offsets(self.now)
        self._run_appends()
        return expired

    def set_topics(self, topics: Mapping[str, int] | None) -> list[str]:
        """Set the cluster's topics (name → partition count; None = every topic exists); returns rebalanced groups."""
        rebalanced = self.coordinator.set_topics(topics, self.now)
        self._run_appends()
        return rebalanced
