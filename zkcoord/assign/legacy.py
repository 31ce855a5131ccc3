"""Kafka 0.8.2's RangeAssignor and RoundRobinAssignor, bit for bit (legacy-zk-protocol.md §4).

``legacy_assignment`` is a public, stable API: it answers what one member of a 0.8.2 group decides to
claim, or raises :class:`~zkcoord.errors.LegacyAssignmentError` exactly where 0.8.2 throws.
Pure: no IO, no clock; must not import gevent, kazoo or ``zkcoord.zk``.
"""

from collections.abc import Iterable, Mapping, Sequence

from zkcoord.assign.java import (
    immutable_map_order,
    java_string_hash,
    java_string_key,
    mutable_hashmap_order,
)
from zkcoord.errors import LegacyAssignmentError

RANGE = "range"
ROUNDROBIN = "roundrobin"

# The text of 0.8.2's `require` in RoundRobinAssignor (PA), without Scala's "requirement failed: ".
ROUNDROBIN_PRECONDITION_MESSAGE = (
    "Round-robin assignment is allowed only if all consumers in the group subscribe to the same topics, "
    "AND if the stream counts across topics are identical for a given consumer instance."
)

Subscriptions = Mapping[str, Mapping[str, int]]
Claim = tuple[str, int]


def thread_id(consumer_id: str, stream: int) -> str:
    """``ConsumerThreadId.toString``: ``"<consumerId>-<n>"`` (§2.2)."""
    return f"{consumer_id}-{stream}"


def consumer_of_thread(thread: str) -> str:
    """The consumer id of a thread id (an owner znode's value); a value not of that form is returned as is."""
    consumer, separator, number = thread.rpartition("-")
    return consumer if separator and number.isdigit() else thread


def topic_partition_hash(topic: str, partition: int) -> int:
    """Hash of ``TopicAndPartition.toString`` = ``"[topic,partition]"``, the round-robin sort key (§4.2)."""
    return java_string_hash(f"[{topic},{partition}]")


def threads_per_topic(consumer_id: str, subscription: Mapping[str, int]) -> dict[str, list[str]]:
    """``TopicCount.makeConsumerThreadIdsPerTopic``; asserts ``streams >= 1`` as TC does (§2.2)."""
    threads: dict[str, list[str]] = {}
    for topic, streams in subscription.items():
        if not isinstance(streams, int) or isinstance(streams, bool) or streams < 1:
            raise LegacyAssignmentError(
                "AssertionError",
                "assertion failed",
                f"consumer {consumer_id} registers {streams!r} streams for topic {topic}; 0.8.2 needs >= 1",
            )
        threads[topic] = [thread_id(consumer_id, n) for n in range(streams)]
    return threads


def consumers_per_topic(subscriptions: Subscriptions) -> dict[str, list[str]]:
    """``ZkUtils.getConsumersPerTopic``: every member's threads per topic, in Java string order."""
    per_topic: dict[str, list[str]] = {}
    for consumer_id, subscription in subscriptions.items():
        for topic, threads in threads_per_topic(consumer_id, subscription).items():
            per_topic.setdefault(topic, []).extend(threads)
    return {topic: sorted(threads, key=java_string_key) for topic, threads in per_topic.items()}


def _partition_lists(partitions: Mapping[str, int | Iterable[int]]) -> dict[str, list[int]]:
    return {
        topic: list(range(value)) if isinstance(value, int) else sorted(value) for topic, value in partitions.items()
    }


def roundrobin_listing(subscription: Mapping[str, int], partitions: Mapping[str, int | Iterable[int]]) -> list[Claim]:
    """The topic-partitions of one member's subscription in the order round-robin deals them (§4.2–4.3).

    The listing follows the chain of Scala maps 0.8.2 builds (immutable Map from the registration JSON,
    then three mutable.HashMaps), and is then stably sorted by the signed ``"[t,p]"`` hash.
    """
    partition_lists = _partition_lists(partitions)
    topics = immutable_map_order(list(subscription))
    for _ in range(3):  # M0 (thread ids per topic), M1 (partition map), M2 (sorted partitions)
        topics = mutable_hashmap_order(topics)
    listing = [(topic, p) for topic in topics for p in partition_lists.get(topic, [])]
    listing.sort(key=lambda claim: topic_partition_hash(*claim))
    return listing


def hash_ties(listing: Sequence[Claim]) -> list[list[Claim]]:
    """Groups of claims in a round-robin listing that share a hash: their order is Scala's, not sorted."""
    by_hash: dict[int, list[Claim]] = {}
    for claim in listing:
        by_hash.setdefault(topic_partition_hash(*claim), []).append(claim)
    return [claims for claims in by_hash.values() if len(claims) > 1]


def _range_decision(
    own: Mapping[str, list[str]], per_topic: Mapping[str, list[str]], partition_lists: Mapping[str, list[int]]
) -> dict[Claim, str]:
    decision: dict[Claim, str] = {}
    for topic, own_threads in own.items():
        group_threads = per_topic[topic]
        topic_partitions = partition_lists.get(topic, [])
        per_thread, extra = divmod(len(topic_partitions), len(group_threads))
        for thread in own_threads:
            position = group_threads.index(thread)
            start = per_thread * position + min(position, extra)
            count = per_thread + (1 if position < extra else 0)
            for partition in topic_partitions[start : start + count]:
                decision[(topic, partition)] = thread
    return decision


def _roundrobin_decision(
    consumer_id: str,
    subscription: Mapping[str, int],
    per_topic: Mapping[str, list[str]],
    partition_lists: Mapping[str, list[int]],
) -> dict[Claim, str]:
    if not per_topic:
        # KAFKA-1648: `.head` of an empty HashMap; fixed only in 0.9.0.0 (§4.2 step 2).
        raise LegacyAssignmentError(
            "NullPointerException", "no member of the group subscribes to any topic", "KAFKA-1648"
        )
    thread_sets = {topic: frozenset(threads) for topic, threads in per_topic.items()}
    head_topic, head_threads = next(iter(thread_sets.items()))
    for topic, threads in thread_sets.items():
        if threads != head_threads:
            raise LegacyAssignmentError(
                "IllegalArgumentException",
                ROUNDROBIN_PRECONDITION_MESSAGE,
                f"topic {topic} has streams {sorted(threads)}; topic {head_topic} has {sorted(head_threads)}",
            )
    threads = sorted(head_threads, key=java_string_key)
    owner_prefix = consumer_id + "-"
    decision: dict[Claim, str] = {}
    for i, claim in enumerate(roundrobin_listing(subscription, partition_lists)):
        thread = threads[i % len(threads)]
        # threadId.consumer == consumerId: the thread is ours when it is "<consumer_id>-<digits>".
        if thread.startswith(owner_prefix) and thread[len(owner_prefix) :].isdigit():
            decision[claim] = thread
    return decision


def legacy_assignment(
    strategy: str,
    subscriptions: Subscriptions,
    partitions: Mapping[str, int | Iterable[int]],
    consumer_id: str,
) -> dict[str, list[Claim]]:
    """What ``consumer_id`` decides to claim in a 0.8.2 group, per thread id.

    ``strategy``: ``"roundrobin"``, anything else means range (as in 0.8.2).
    ``subscriptions``: consumer id → ordered ``{topic: streams}`` (key order as in the registration JSON).
    ``partitions``: ``{topic: count}``; a topic missing here has no ``/brokers/topics`` node.
    Returns every thread id of ``consumer_id`` (Java string order) mapped to its sorted claims.
    Raises ``ValueError`` if ``consumer_id`` is not in ``subscriptions`` and
    :class:`LegacyAssignmentError` where 0.8.2 throws.
    """
    if consumer_id not in subscriptions:
        raise ValueError(f"consumer {consumer_id!r} is not in the group's subscriptions")
    own_subscription = subscriptions[consumer_id]
    own = threads_per_topic(consumer_id, own_subscription)
    per_topic = consumers_per_topic(subscriptions)
    partition_lists = _partition_lists(partitions)
    if strategy == ROUNDROBIN:
        decision = _roundrobin_decision(consumer_id, own_subscription, per_topic, partition_lists)
    else:
        decision = _range_decision(own, per_topic, partition_lists)
    result: dict[str, list[Claim]] = {
        thread: [] for thread in sorted({t for ts in own.values() for t in ts}, key=java_string_key)
    }
    for claim, thread in decision.items():
        result[thread].append(claim)
    for claims in result.values():
        claims.sort()
    return result


def group_assignment(
    strategy: str, subscriptions: Subscriptions, partitions: Mapping[str, int | Iterable[int]]
) -> dict[str, list[Claim]]:
    """Every member's own decision, merged: thread id → claims. Conflicting decisions both appear."""
    merged: dict[str, list[Claim]] = {}
    for consumer_id in subscriptions:
        merged.update(legacy_assignment(strategy, subscriptions, partitions, consumer_id))
    return merged
