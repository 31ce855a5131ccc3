"""The bridge's decisions and plans, pure: no IO, no clock (``now_ms`` is given).

A coordinator member of a mixed group is a 0.8.2 consumer with one stream per topic it subscribes to: consumer
id :func:`consumer_id_for`, thread ``<consumer id>-0``, registration :func:`registration_for`. The group is
assigned as 0.8.2 assigns it (:func:`assignments`, over every registration, with the group's strategy), so the
leader's own assignor is never asked. Ownership changes hands through 0.8.2's owner znodes, in the order the
plans below fix; each plan is a list of effects the runtime carries out one after another, stopping at the
first that fails:

- :func:`release_plan`: the log's committed offsets of the partitions into ZooKeeper (:class:`Flush`), then
  their owner znodes deleted (:class:`Release`): a JVM member that claims one next reads the latest offset.
- :func:`handover_plan`: the owner znodes created (:class:`Claim`) before SyncGroup hands the partitions over
  (:class:`Handover`): no coordinator member fetches a partition a legacy member still owns.
- :func:`leave_plan`: a departed member's owner znodes before its registration (:class:`Unregister`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from zkcoord.assign.legacy import ROUNDROBIN, legacy_assignment, thread_id
from zkcoord.errors import LegacyAssignmentError
from zkcoord.model import TopicPartition
from zkcoord.zk.layout import ConsumerRegistration, encode_consumer_registration
from zkcoord.zk.topic_filter import UnsupportedFilterError, expand

STRATEGIES = ("range", ROUNDROBIN)
COOPERATIVE_ASSIGNORS = frozenset({"cooperative-sticky"})  # the assignors Kafka's clients rebalance incrementally
BRIDGE_MARK = "_zkcoord-"  # in every bridge consumer id: "<group>_zkcoord-<key>"
_KEY = re.compile(r"[^A-Za-z0-9._-]")


def consumer_id_for(group: str, member_id: str, instance_id: str | None) -> str:
    """The member's 0.8.2 consumer id: stable across restarts for a static member (from its instance id),
    a digest of its member id otherwise. Legal in a znode name, as 0.8.2's own ids are."""
    if instance_id:
        key = "static-" + _KEY.sub("_", instance_id)[:64]
        if key != "static-" + instance_id:
            key += "-" + hashlib.sha1(instance_id.encode()).hexdigest()[:8]
    else:
        key = hashlib.sha1(member_id.encode()).hexdigest()[:16]
    return f"{group}{BRIDGE_MARK}{key}"


def thread_of(consumer_id: str) -> str:
    """The one thread id of a coordinator member: it consumes every partition it is given."""
    return thread_id(consumer_id, 0)


def registration_for(topics: Iterable[str], now_ms: int) -> bytes:
    """The byte-exact 0.8.2 registration of a member with one stream per topic, in the member's topic order."""
    return encode_consumer_registration(
        ConsumerRegistration(subscription=dict.fromkeys(topics, 1), timestamp_ms=now_ms)
    )


# ---- who may join ---------------------------------------------------------------------------------------------


def eager_protocols(names: Sequence[str]) -> tuple[list[str], str | None]:
    """The member's protocols a mixed group serves (every one but the cooperative ones), or a refusal."""
    eager = [name for name in names if name not in COOPERATIVE_ASSIGNORS]
    if eager:
        return eager, None
    return [], (
        f"a mixed group (Kafka 0.8.2 and coordinator members) rebalances eagerly, and this member offers only "
        f"cooperative assignors ({', '.join(names) or 'none'}); add range or roundrobin to "
        "partition.assignment.strategy"
    )


def group_subscriptions(
    registrations: Mapping[str, ConsumerRegistration], topics: Sequence[str], exclude_internal_topics: bool = True
) -> dict[str, dict[str, int]]:
    """Every registration as 0.8.2 reads it, ``{consumer id: {topic: streams}}``, wildcards matched against the
    cluster's ``topics``. Raises :class:`~zkcoord.zk.topic_filter.UnsupportedFilterError` for a pattern Python
    cannot match as Java would."""
    return {cid: expand(reg, topics, exclude_internal_topics) for cid, reg in registrations.items()}


def subscription_refusal(
    strategy: str, consumer_id: str, topics: Sequence[str], others: Mapping[str, Mapping[str, int]]
) -> str | None:
    """Why a coordinator member subscribing to ``topics`` would break the 0.8.2 members' assignment, or None.

    Under roundrobin 0.8.2 requires every consumer to subscribe to the same topics with the same stream count
    on each of its topics; a coordinator member has one stream per topic, so the others' topic set must be its
    own. Under range every topic is assigned on its own and any subscription fits.
    """
    if not topics:
        return "a coordinator member of a mixed group must subscribe to at least one topic"
    if strategy != ROUNDROBIN:
        return None
    for other, subscription in sorted(others.items()):
        if other == consumer_id or not subscription:
            continue  # a registration with no topics (the bridge's re-trigger) has no threads in 0.8.2
        if set(subscription) != set(topics):
            return (
                f"the group is assigned by 0.8.2's roundrobin, which requires every consumer to subscribe to the same "
                f"topics: {other} subscribes to {sorted(subscription)}, this member to {sorted(topics)}"
            )
    return None


def assignments(
    strategy: str,
    subscriptions: Mapping[str, Mapping[str, int]],
    partition_counts: Mapping[str, int],
    consumers: Iterable[str],
) -> dict[str, tuple[TopicPartition, ...]]:
    """What 0.8.2 gives each of ``consumers`` over every registration in ``subscriptions``.

    Raises :class:`~zkcoord.errors.LegacyAssignmentError` where 0.8.2 would throw (no member of the group can
    then claim anything, so neither does the bridge).
    """
    result = {}
    for consumer in consumers:
        claims = legacy_assignment(strategy, subscriptions, partition_counts, consumer)
        result[consumer] = tuple(sorted(TopicPartition(t, p) for threads in claims.values() for t, p in threads))
    return result


# ---- plans ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Flush:
    """Write the log's committed offsets of ``partitions`` into ZooKeeper, set-if-greater, and wait for it."""

    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True)
class Release:
    """Delete the owner znode of ``partition`` if it still names ``thread``."""

    partition: TopicPartition
    thread: str


@dataclass(frozen=True)
class Claim:
    """Create the owner znode of ``partition`` naming ``thread``; fails while another thread owns it."""

    partition: TopicPartition
    thread: str


@dataclass(frozen=True)
class Handover:
    """SyncGroup may now give each member (by member id) these partitions."""

    assignments: Mapping[str, tuple[TopicPartition, ...]]


@dataclass(frozen=True)
class Unregister:
    """Delete the member's registration under ``/consumers/<g>/ids``."""

    consumer_id: str


Step = Flush | Release | Claim | Handover | Unregister


def release_plan(owned: Mapping[TopicPartition, str]) -> list[Step]:
    """Give up ``owned`` (partition → owning thread): offsets into ZooKeeper first, then the owner znodes."""
    if not owned:
        return []
    partitions = tuple(sorted(owned))
    return [Flush(partitions), *(Release(tp, owned[tp]) for tp in partitions)]


def handover_plan(
    given: Mapping[str, tuple[TopicPartition, ...]], member_ids: Mapping[str, str], owned: Mapping[TopicPartition, str]
) -> list[Step]:
    """Hand ``given`` (consumer id → partitions) to the members (``member_ids``: consumer id → member id).

    Owner znodes the bridge holds that the new assignment moves elsewhere are released first (a member that
    did not rejoin, such as a static one inside its session); then every partition is claimed for its thread;
    only then are the partitions handed over.
    """
    threads = {tp: thread_of(cid) for cid, partitions in given.items() for tp in partitions}
    moved = {tp: thread for tp, thread in owned.items() if threads.get(tp) != thread}
    claims = [Claim(tp, thread) for tp, thread in sorted(threads.items()) if owned.get(tp) != thread]
    handover = Handover({member_ids[cid]: partitions for cid, partitions in given.items() if cid in member_ids})
    return [*release_plan(moved), *claims, handover]


def leave_plan(consumer_id: str, owned: Mapping[TopicPartition, str]) -> list[Step]:
    """A departed member: its partitions released (offsets first), then its registration."""
    return [*release_plan(owned), Unregister(consumer_id)]


def owned_by(owners: Mapping[TopicPartition, str], consumer_ids: Iterable[str]) -> dict[TopicPartition, str]:
    """The owner znodes (partition → thread) that name a thread of one of ``consumer_ids``."""
    threads = {thread_of(cid) for cid in consumer_ids}
    return {tp: thread for tp, thread in owners.items() if thread in threads}


def out_of_date(given: Mapping[str, tuple[TopicPartition, ...]], owners: Mapping[TopicPartition, str]) -> bool:
    """Whether the owner znodes of the coordinator members' threads differ from ``given`` (consumer id →
    partitions 0.8.2 gives it now): then the coordinator members must rebalance to follow."""
    for consumer_id, partitions in given.items():
        thread = thread_of(consumer_id)
        if {tp for tp, owner in owners.items() if owner == thread} != set(partitions):
            return True
    return False


def assignment_error(error: LegacyAssignmentError | UnsupportedFilterError) -> str:
    return f"the group's 0.8.2 assignment cannot be computed: {error}"


def liveness_warning(rebalance_timeout_ms: int, legacy_window_ms: int) -> str | None:
    """Numbers for an operator when a member may revoke later than a JVM member keeps retrying its claims.

    An eager member revokes in its next poll, which may come as late as its rebalance timeout (Kafka's
    ``max.poll.interval.ms``) after the rebalance began; a JVM member gives up after ``rebalance.max.retries`` ×
    ``rebalance.backoff.ms``. The bridge re-triggers the JVM members' rebalance when that happened, so this is a
    warning, not a refusal. (The heartbeat interval, the other delay, is not in JoinGroup.)
    """
    if rebalance_timeout_ms <= legacy_window_ms:
        return None
    return (
        f"this member may take up to {rebalance_timeout_ms} ms (max.poll.interval.ms) to revoke its partitions in "
        f"a rebalance, while a JVM member gives up its claims after {legacy_window_ms} ms (rebalance.max.retries × "
        "rebalance.backoff.ms); the bridge then re-triggers the JVM members' rebalance once the partitions are free"
    )
