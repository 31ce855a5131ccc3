"""A coordinator on a virtual clock with an in-memory offsets log: the public test harness (stable API).

``CoordinatorHarness(config, owned_partitions)`` takes Kafka property names; ``send(request)`` takes exactly a
wire-protocol request map and returns a :class:`RequestHandle`. Appends complete before ``send`` returns
unless they are made to fail (:meth:`fail_appends`) or held (:meth:`hold_appends`); ``advance(ms)`` moves
the clock, then fires every timer whose deadline the clock has passed (now > deadline), in deadline order.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import msgpack

from zkcoord.clock import ManualClock
from zkcoord.config import build_config
from zkcoord.errors import ErrorCode
from zkcoord.group.config import CoordinatorConfig
from zkcoord.group.coordinator import GroupCoordinator
from zkcoord.group.model import Group, Member
from zkcoord.model import GroupState, TopicPartition
from zkcoord.offsets.records import RecordKey, RecordValue
from zkcoord.offsets.store import CommittedOffset
from zkcoord.runtime import CoordinatorRuntime, MemoryLog
from zkcoord.wire.codec import encode_response, read_request
from zkcoord.wire.messages import MetadataResponseBroker, Response

HARNESS_NODE = MetadataResponseBroker(node_id=0, host="127.0.0.1", port=0)
HARNESS_CLIENT_HOST = "/127.0.0.1"


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
    state: GroupState
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


class _OneNodeCluster:
    """The harness's cluster: one node, coordinator of the partitions its coordinator owns."""

    def __init__(self, coordinator: GroupCoordinator):
        self._coordinator = coordinator

    def brokers(self) -> list[MetadataResponseBroker]:
        return [HARNESS_NODE]

    def coordinator(self, partition: int) -> MetadataResponseBroker | None:
        return HARNESS_NODE if partition in self._coordinator.owned else None


def _error_code(error_name: str) -> ErrorCode:
    """Kafka's error of that name; a name zkcoord does not know is an unknown server error, as Kafka maps it."""
    return ErrorCode.__members__.get(error_name, ErrorCode.UNKNOWN_SERVER_ERROR)


def _as_read(response: Response) -> dict:
    """The response map as a client reads it off the wire (arrays as lists)."""
    return msgpack.unpackb(msgpack.packb(encode_response(response), use_bin_type=True), raw=False)


class CoordinatorHarness:
    """A :class:`GroupCoordinator` in the coordinator runtime, on a virtual clock and an in-memory log."""

    def __init__(self, config: Mapping[str, object], owned_partitions: Iterable[int], seed: int = 0):
        self.config = build_config(CoordinatorConfig, dict(config))
        self._clock = ManualClock(0)
        self._random = random.Random(seed)
        self.coordinator = GroupCoordinator(self.config, self.now, new_member_id=self._member_id)
        self.log = MemoryLog()
        self.runtime = CoordinatorRuntime(self.coordinator, self.log, _OneNodeCluster(self.coordinator), self._clock)
        for partition in owned_partitions:
            self.runtime.load(partition)

    @property
    def now(self) -> int:
        """The virtual clock, in ms."""
        return self._clock.now_ms()

    def _member_id(self, prefix: str) -> str:
        return f"{prefix}-{uuid.UUID(int=self._random.getrandbits(128), version=4)}"

    # -- requests and time ------------------------------------------------------------------------------

    def send(self, request: dict) -> RequestHandle:
        """Handle one wire-protocol request map; the handle is done at once unless the protocol parks it."""
        correlation_id = request.get("correlation_id")
        handle = RequestHandle(correlation_id if isinstance(correlation_id, int) else -1)
        typed = read_request(request, HARNESS_CLIENT_HOST)
        if type(typed) is dict:
            handle.complete(typed)
        else:
            self.runtime.submit(typed, lambda response: handle.complete(_as_read(response)))
        return handle

    def advance(self, ms: int) -> None:
        """Move the clock by ``ms``, then fire every timer with ``now > deadline``, earliest first."""
        if ms < 0:
            raise ValueError("the virtual clock does not go back")
        self._clock.advance(ms)
        self.runtime.fire_due(self.now)

    # -- the in-memory log --------------------------------------------------------------------------------

    def fail_appends(self, error_name: str | None) -> None:
        """Make later appends fail with Kafka error ``error_name`` (e.g. "MESSAGE_TOO_LARGE"); None to stop."""
        self.log.failure = None if error_name is None else _error_code(error_name)

    def hold_appends(self) -> None:
        """Keep later appends in flight until :meth:`complete_held_append` or :meth:`release_appends`."""
        self.log.holding = True

    @property
    def held_appends(self) -> int:
        return len(self.log.held)

    def complete_held_append(self, error_name: str | None = None) -> None:
        """Complete the oldest held append: written, or failed with ``error_name``."""
        self.log.complete_held(None if error_name is None else _error_code(error_name))

    def release_appends(self) -> None:
        """Stop holding appends and complete every held one successfully."""
        self.log.release()

    def append_records(self, partition: int, records: Iterable[tuple[RecordKey, RecordValue | None]]) -> int:
        """Append records straight to ``partition``'s log as one batch (for load tests); returns its base offset."""
        return self.log.write(partition, records)

    def records(self, partition: int) -> list[tuple[RecordKey, RecordValue | None]]:
        """Every record appended to ``partition``, decoded, in log order."""
        return self.log.records(partition)

    # -- partitions -----------------------------------------------------------------------------------------

    def load(self, partition: int) -> None:
        """Rebuild ``partition`` by replaying its log (§9.6); it is owned afterwards."""
        self.runtime.load(partition)

    def unload(self, partition: int) -> None:
        self.runtime.unload(partition)

    def start_loading(self, partition: int) -> None:
        self.runtime.begin_loading(partition)

    # -- inspection and other hooks -----------------------------------------------------------------------------

    def group(self, group_id: str) -> GroupSnapshot | None:
        group = self.coordinator.groups.get(group_id)
        return None if group is None else GroupSnapshot.of(group)

    def expire_offsets(self) -> int:
        """Run one offset-expiry pass now; returns how many offsets expired."""
        return self.runtime.enter(self.coordinator.expire_offsets)

    def set_topics(self, topics: Mapping[str, int] | None) -> list[str]:
        """Set the cluster's topics (name → partition count; None = every topic exists); returns rebalanced groups."""
        return self.runtime.enter(lambda now: self.coordinator.set_topics(topics, now))
