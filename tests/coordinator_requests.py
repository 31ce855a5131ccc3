"""Request builders and fixtures for the group-coordinator acceptance scenarios.

The shorthand of /work/shared/specs/coordinator-scenarios.md ("Request shorthand", "Fixtures") turned into
functions that build exactly the request maps of wire-protocol.md §3, plus the fixtures FX-ONE, FX-TWO,
FX-STATIC, FX-THREE and FX-PENDING, run against a ``zkcoord.testing.CoordinatorHarness``.

JoinGroup on our wire protocol always has v4+ semantics (KIP-394), so ``JOIN3`` for a *new dynamic*
member is the two-step join: JoinGroup answered MEMBER_ID_REQUIRED (79), then the same JoinGroup with the
id handed out, at the same virtual time (:func:`join3`). A static JOIN3 and a JOIN3 with a known member id
are ordinary JoinGroups.
"""

import itertools
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from zkcoord.model import TopicPartition

# ---- harness conventions ---------------------------------------------------------------------------------

G = "groupId"  # its offsets partition (0 of 2) is owned
OTHER = "otherGroup"  # "O" in the scenarios: partition 1, not owned
CLIENT_ID = "clientId"
CONSUMER = "consumer"

HARNESS_CONFIG = {
    "group.min.session.timeout.ms": 10,
    "group.max.session.timeout.ms": 600000,
    "group.max.size": 4,
    "group.initial.rebalance.delay.ms": 50,
    "offsets.topic.num.partitions": 2,
}
OWNED_PARTITIONS = frozenset({0})
G_PARTITION = 0
OTHER_PARTITION = 1

SESSION = 500
REBALANCE = 500
INITIAL_DELAY = 50

P = (("range", b""),)
PS = (("range", b""), ("roundrobin", b""))

STATES = ("Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead")

# ---- error codes (wire-protocol.md §5) ----------------------------------------------------------------

UNKNOWN_SERVER_ERROR = -1
NONE = 0
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
OFFSET_METADATA_TOO_LARGE = 12
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
ILLEGAL_GENERATION = 22
INCONSISTENT_GROUP_PROTOCOL = 23
INVALID_GROUP_ID = 24
UNKNOWN_MEMBER_ID = 25
INVALID_SESSION_TIMEOUT = 26
REBALANCE_IN_PROGRESS = 27
INVALID_COMMIT_OFFSET_SIZE = 28
NON_EMPTY_GROUP = 68
GROUP_ID_NOT_FOUND = 69
MEMBER_ID_REQUIRED = 79
GROUP_MAX_SIZE_REACHED = 81
FENCED_INSTANCE_ID = 82

UUID_PATTERN = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


def new_harness(**config: Any):
    """A harness with the scenario file's broker configuration (plus ``config``), owning partition 0."""
    from zkcoord.testing import CoordinatorHarness

    return CoordinatorHarness({**HARNESS_CONFIG, **config}, set(OWNED_PARTITIONS))


# ---- request maps ----------------------------------------------------------------------------------------

_correlation_ids = itertools.count(1)


def _request(api: str, **fields: Any) -> dict:
    return {"api": api, "api_version": 0, "correlation_id": next(_correlation_ids), "client_id": CLIENT_ID, **fields}


def join4(
    member_id: str = "",
    protocols: Iterable[tuple[str, bytes]] = P,
    instance: str | None = None,
    session: int = SESSION,
    rebalance: int = REBALANCE,
    *,
    group: str = G,
    protocol_type: str = CONSUMER,
) -> dict:
    """JOIN4: a JoinGroup request (v4+ semantics: a new dynamic member gets MEMBER_ID_REQUIRED)."""
    return _request(
        "JoinGroup",
        group_id=group,
        session_timeout_ms=session,
        rebalance_timeout_ms=rebalance,
        member_id=member_id,
        group_instance_id=instance,
        protocol_type=protocol_type,
        protocols=[{"name": name, "metadata": metadata} for name, metadata in protocols],
    )


def sync(
    member_id: str,
    generation: int,
    assignments: Mapping[str, bytes] | None = None,
    instance: str | None = None,
    ptype: str | None = None,
    pname: str | None = None,
    *,
    group: str = G,
) -> dict:
    """SYNC: a SyncGroup request; ``assignments`` (leader only) maps member id to assignment bytes."""
    return _request(
        "SyncGroup",
        group_id=group,
        generation_id=generation,
        member_id=member_id,
        group_instance_id=instance,
        protocol_type=ptype,
        protocol_name=pname,
        assignments=[{"member_id": member, "assignment": data} for member, data in (assignments or {}).items()],
    )


def hb(member_id: str, generation: int, instance: str | None = None, *, group: str = G) -> dict:
    """HB: a Heartbeat request."""
    return _request(
        "Heartbeat", group_id=group, generation_id=generation, member_id=member_id, group_instance_id=instance
    )


def _topic_partition(tp: tuple[str, int]) -> TopicPartition:
    return tp if isinstance(tp, TopicPartition) else TopicPartition(*tp)


def commit(
    member_id: str,
    generation: int,
    offsets: Mapping[tuple[str, int], int | tuple[int, str | None]],
    instance: str | None = None,
    *,
    group: str = G,
    retention_time_ms: int = -1,
) -> dict:
    """COMMIT: an OffsetCommit request; ``offsets`` maps (topic, partition) to an offset or (offset, metadata)."""
    topics: dict[str, list[dict]] = {}
    for tp, value in offsets.items():
        offset, metadata = value if isinstance(value, tuple) else (value, "")
        tp = _topic_partition(tp)
        topics.setdefault(tp.topic, []).append(
            {"partition_index": tp.partition, "committed_offset": offset, "committed_metadata": metadata}
        )
    return _request(
        "OffsetCommit",
        group_id=group,
        generation_id=generation,
        member_id=member_id,
        group_instance_id=instance,
        retention_time_ms=retention_time_ms,
        topics=[{"name": name, "partitions": partitions} for name, partitions in topics.items()],
    )


ALL = None  # FETCH(group, ALL)


def fetch(group: str = G, partitions: Iterable[tuple[str, int]] | None = ALL) -> dict:
    """FETCH: an OffsetFetch request for ``partitions``, or for every committed offset with ALL (None)."""
    if partitions is None:
        return _request("OffsetFetch", group_id=group, topics=None)
    topics: dict[str, list[int]] = {}
    for tp in partitions:
        tp = _topic_partition(tp)
        topics.setdefault(tp.topic, []).append(tp.partition)
    return _request(
        "OffsetFetch",
        group_id=group,
        topics=[{"name": name, "partition_indexes": indexes} for name, indexes in topics.items()],
    )


def identity(member_id: str = "", instance: str | None = None) -> dict:
    """One ``{member_id, group_instance_id}`` entry of a LeaveGroup batch."""
    return {"member_id": member_id, "group_instance_id": instance}


def leave(*members: str | dict, group: str = G) -> dict:
    """LEAVE: a LeaveGroup (v3+ batch) request; each member is a member id or an :func:`identity`."""
    return _request(
        "LeaveGroup",
        group_id=group,
        members=[identity(member) if isinstance(member, str) else member for member in members],
    )


def describe(*groups: str) -> dict:
    """DESCRIBE: a DescribeGroups request."""
    return _request("DescribeGroups", groups=list(groups))


def list_groups(*states: str) -> dict:
    """LIST: a ListGroups request; no states means every group."""
    return _request("ListGroups", states_filter=list(states))


def delete(*groups: str) -> dict:
    """DELETE: a DeleteGroups request."""
    return _request("DeleteGroups", groups_names=list(groups))


# ---- reading responses -----------------------------------------------------------------------------------


def reply(handle) -> dict:
    """The response of a request that must have been answered."""
    assert handle.done, "the request is still parked (no response yet)"
    assert handle.response is not None
    return handle.response


def error(handle) -> int:
    """The top-level ``error_code`` of an answered request."""
    return reply(handle)["error_code"]


def parked(handle) -> bool:
    return not handle.done


def commit_errors(handle) -> dict[TopicPartition, int]:
    """OffsetCommit response: (topic, partition) → error code."""
    return {
        TopicPartition(topic["name"], partition["partition_index"]): partition["error_code"]
        for topic in reply(handle)["topics"]
        for partition in topic["partitions"]
    }


class Fetched(NamedTuple):
    offset: int
    metadata: str
    error_code: int


def fetched(handle) -> dict[TopicPartition, Fetched]:
    """OffsetFetch response: (topic, partition) → (committed_offset, metadata, error_code)."""
    return {
        TopicPartition(topic["name"], partition["partition_index"]): Fetched(
            partition["committed_offset"], partition["metadata"], partition["error_code"]
        )
        for topic in reply(handle)["topics"]
        for partition in topic["partitions"]
    }


def fetched_offset(h, tp: tuple[str, int], group: str = G) -> int:
    """The committed offset OffsetFetch reports for one partition (-1 if none), checking every error is NONE."""
    tp = _topic_partition(tp)
    handle = h.send(fetch(group, [tp]))
    assert error(handle) == NONE
    result = fetched(handle)
    assert set(result) == {tp}
    assert result[tp].error_code == NONE
    return result[tp].offset


def leave_errors(handle) -> list[int]:
    """LeaveGroup response: the per-member error codes, in request order."""
    return [member["error_code"] for member in reply(handle)["members"]]


def described(handle, group: str = G) -> dict:
    """The DescribeGroups entry of ``group``."""
    entries = [entry for entry in reply(handle)["groups"] if entry["group_id"] == group]
    assert len(entries) == 1, reply(handle)
    return entries[0]


def described_state(h, group: str = G) -> str:
    entry = described(h.send(describe(group)), group)
    assert entry["error_code"] == NONE
    return entry["group_state"]


def listed(handle) -> list[tuple[str, str, str]]:
    """ListGroups response: (group_id, protocol_type, group_state) of every group listed."""
    return [(entry["group_id"], entry["protocol_type"], entry["group_state"]) for entry in reply(handle)["groups"]]


def deleted(handle) -> dict[str, int]:
    """DeleteGroups response: group id → error code."""
    return {result["group_id"]: result["error_code"] for result in reply(handle)["results"]}


def member_ids(response: dict) -> list[str]:
    """The member ids of a JoinGroup response's ``members`` (the leader's list), in response order."""
    return [member["member_id"] for member in response["members"]]


def member_instances(response: dict) -> set[str | None]:
    return {member["group_instance_id"] for member in response["members"]}


# ---- JOIN3 ----------------------------------------------------------------------------------------------


def join3(h, member_id: str = "", protocols: Iterable[tuple[str, bytes]] = P, instance: str | None = None, **kw):
    """JOIN3 (no member-id requirement). A new dynamic member runs the two-step join at the same virtual time:
    JoinGroup answered 79, then JoinGroup with the id handed out. Returns the handle of the last JoinGroup sent
    (the first one if it was not answered 79, e.g. 23 for an inconsistent protocol)."""
    protocols = tuple(protocols)
    if member_id or instance is not None:
        return h.send(join4(member_id, protocols, instance, **kw))
    first = h.send(join4("", protocols, None, **kw))
    if not first.done or first.response["error_code"] != MEMBER_ID_REQUIRED:
        return first
    return h.send(join4(first.response["member_id"], protocols, None, **kw))


def pending_id(h, **kw) -> str:
    """JOIN4("") → 79: the member id handed out (the member is now pending)."""
    handle = h.send(join4("", **kw))
    assert error(handle) == MEMBER_ID_REQUIRED, reply(handle)
    return reply(handle)["member_id"]


def assert_joined(handle, generation: int, leader: str | None = None, member_id: str | None = None) -> dict:
    """The JoinGroup was answered NONE at ``generation`` (and with ``leader`` / ``member_id`` if given)."""
    response = reply(handle)
    assert response["error_code"] == NONE, response
    assert response["generation_id"] == generation, response
    if leader is not None:
        assert response["leader"] == leader, response
    if member_id is not None:
        assert response["member_id"] == member_id, response
    return response


# ---- fixtures -------------------------------------------------------------------------------------------


def fx_one(h, session: int = SESSION) -> str:
    """FX-ONE: one dynamic member A, Stable at generation 1. Returns A."""
    a = pending_id(h, session=session)
    joined = h.send(join4(a, session=session))
    assert parked(joined)
    h.advance(INITIAL_DELAY + 1)
    response = assert_joined(joined, 1, leader=a, member_id=a)
    assert member_ids(response) == [a]
    assert error(h.send(sync(a, 1, {a: b""}))) == NONE
    assert h.group(G).state == "Stable"
    return a


def fx_two(h) -> tuple[str, str]:
    """FX-TWO: FX-ONE, then a new member B and A's rejoin: CompletingRebalance at generation 2, leader A."""
    a = fx_one(h)
    b_join = join3(h)
    assert parked(b_join)
    assert h.group(G).state == "PreparingRebalance"
    a_join = join3(h, a)
    assert_joined(a_join, 2, leader=a, member_id=a)
    b = assert_joined(b_join, 2, leader=a)["member_id"]
    assert h.group(G).state == "CompletingRebalance"
    return a, b


def fx_static(h, session: int = SESSION) -> tuple[str, str]:
    """FX-STATIC: static "leader" L and "follower" F (protocols PS), Stable at generation 1. Returns (L, F)."""
    leader_join = join3(h, instance="leader", protocols=PS, session=session)
    follower_join = join3(h, instance="follower", protocols=PS, session=session)
    h.advance(INITIAL_DELAY + 1)
    h.advance(REBALANCE + 1)
    leader = assert_joined(leader_join, 1)["member_id"]
    follower = assert_joined(follower_join, 1, leader=leader)["member_id"]
    assert reply(leader_join)["leader"] == leader
    assert leader.startswith("leader-") and follower.startswith("follower-")
    assert error(h.send(sync(leader, 1, {leader: b""}))) == NONE
    assert h.group(G).state == "Stable"
    follower_sync = reply(h.send(sync(follower, 1)))
    assert follower_sync["error_code"] == NONE and follower_sync["assignment"] == b""
    return leader, follower


def fx_three(h) -> tuple[str, str, str]:
    """FX-THREE: three dynamic members M1, M2, M3, CompletingRebalance at generation 1, leader M1."""
    ids = [pending_id(h) for _ in range(3)]
    joins = [h.send(join4(member)) for member in ids]
    h.advance(INITIAL_DELAY + 1)
    h.advance(REBALANCE + 1)
    for member, handle in zip(ids, joins, strict=True):
        assert_joined(handle, 1, leader=ids[0], member_id=member)
    assert h.group(G).state == "CompletingRebalance"
    return ids[0], ids[1], ids[2]


class Pending(NamedTuple):
    a: str
    b: str
    c: str  # pending (MEMBER_ID_REQUIRED), pending timer of 100 ms
    a_join: Any  # parked JoinGroup of A
    b_join: Any  # parked JoinGroup of B


def fx_pending(h) -> Pending:
    """FX-PENDING (GCT setupGroupWithPendingMember): A and B parked in PreparingRebalance, blocked by pending C."""
    a = fx_one(h)
    b_join = join3(h)
    a_join = join3(h, a)
    assert_joined(a_join, 2, leader=a)
    b = assert_joined(b_join, 2, leader=a)["member_id"]
    assert error(h.send(sync(a, 2, {a: b""}))) == NONE
    assert h.group(G).state == "Stable"
    a_join = join3(h, a)
    assert parked(a_join)
    assert h.group(G).state == "PreparingRebalance"
    c = pending_id(h, session=100)
    b_join = join3(h, b)
    assert parked(a_join) and parked(b_join)
    group = h.group(G)
    assert group.state == "PreparingRebalance"
    assert group.pending_members == frozenset({c})
    return Pending(a, b, c, a_join, b_join)
