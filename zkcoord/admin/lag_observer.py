"""One observation of consumer groups for ``zkcoord lag``: per partition the offset the group's readers would
start from, the log end from the brokers, and whether a live member owns it (:mod:`zkcoord.lag.windows`).

A group in one place is read as ``describe --offsets`` reads it (a mixed group by its phase's rule); a migrating
group in both places by the offsets its phase's readers use (``AdminClient._effective_committed``).

IO: through the admin client. Must not import the CLI, the renderer, the server or gevent.
"""

from __future__ import annotations

from collections.abc import Iterable

from zkcoord.admin.client import AdminClient
from zkcoord.admin.model import GroupOffsetsDescription
from zkcoord.errors import GroupIdNotFoundError
from zkcoord.lag.windows import PartitionObservation
from zkcoord.model import TopicPartition

Observation = dict[TopicPartition, PartitionObservation]


def every_group(client: AdminClient) -> list[str]:
    """Each group id once, whatever the places it is in."""
    return sorted({listing.group_id for listing in client.list_consumer_groups()})


def observe_groups(client: AdminClient, group_ids: Iterable[str]) -> dict[str, Observation | None]:
    """Each group's observation; None for a group that exists nowhere."""
    return {group_id: observe_group(client, group_id) for group_id in group_ids}


def observe_group(client: AdminClient, group_id: str) -> Observation | None:
    try:
        described = client.describe_consumer_group_offsets([group_id])
    except GroupIdNotFoundError:
        return None
    committed = _readers_committed(client, group_id, described)
    ends: dict[TopicPartition, int] = {}
    owned: set[TopicPartition] = set()
    for result in described:
        for row in result.rows:
            if row.topic is None:
                continue
            tp = TopicPartition(row.topic, row.partition)
            if row.log_end_offset is not None:
                ends[tp] = row.log_end_offset
            if row.consumer_id is not None:
                owned.add(tp)
    return {tp: PartitionObservation(offset, ends.get(tp), tp in owned) for tp, offset in sorted(committed.items())}


def _readers_committed(
    client: AdminClient, group_id: str, described: list[GroupOffsetsDescription]
) -> dict[TopicPartition, int]:
    phase = client._migration_phase(group_id) if len(described) > 1 else None
    if phase is not None:
        return client._effective_committed(group_id, phase)
    # One place (or several without a migration: the coordinator's, listed first, is what a consumer reads).
    rows = described[0].rows if described else ()
    return {TopicPartition(r.topic, r.partition): r.current_offset for r in rows if r.current_offset is not None}
