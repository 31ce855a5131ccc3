"""One observation of consumer groups for ``zkcoord lag``: per partition the offset the group's readers would
start from, the log end from the brokers, and whether a live member owns it (:mod:`zkcoord.lag.windows`).

A group in one place is read as ``describe --offsets`` reads it (a mixed group by its phase's rule); a migrating
group in both places by the offsets its phase's readers use (``AdminClient._effective_committed``).

IO: through the admin client. Must not import the CLI, the renderer, the server or gevent.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from zkcoord.admin.client import AdminClient
from zkcoord.admin.migrating import READS_FROM
from zkcoord.admin.model import COORDINATOR
from zkcoord.errors import CoordinatorNotAvailableError, GroupIdNotFoundError
from zkcoord.lag.windows import PartitionObservation
from zkcoord.migration.phases import ZK
from zkcoord.model import TopicPartition


@dataclass(frozen=True)
class GroupObservation:
    """One poll of a group's partitions, whether a coordinator holds the group, and how many members it has."""

    partitions: dict[TopicPartition, PartitionObservation]
    on_coordinator: bool
    members: int


def every_group(client: AdminClient) -> list[str]:
    """Each group id once, whatever the places it is in; CoordinatorNotAvailableError when a node did not answer."""
    overview = client.list_groups()
    if overview.unreachable:
        raise CoordinatorNotAvailableError("; ".join(overview.unreachable))
    return sorted({listing.group_id for listing in overview.listings})


def check_coordinator_groups(client: AdminClient, missing: Iterable[str]) -> None:
    """CoordinatorNotAvailableError when groups seen on a coordinator before are ``missing`` now and no coordinator
    node can be asked: the coordinators being down must not read as the groups being gone."""
    missing = sorted(missing)
    if missing and (absent := client.no_coordinator_node()) is not None:
        raise CoordinatorNotAvailableError(f"{absent}; cannot read coordinator group(s) {', '.join(missing)}")


def observe_groups(client: AdminClient, group_ids: Iterable[str]) -> dict[str, GroupObservation | None]:
    """Each group's observation; None for a group that exists nowhere."""
    return {group_id: observe_group(client, group_id) for group_id in group_ids}


def observe_group(client: AdminClient, group_id: str) -> GroupObservation | None:
    try:
        described = client.describe_consumer_group_offsets([group_id])
    except GroupIdNotFoundError:
        return None
    if unreachable := [d.description.unreachable for d in described if d.description.unreachable]:
        raise CoordinatorNotAvailableError(f"group {group_id}: {unreachable[0]}")
    # One place, or several without a migration (a migrating group is one description of what its readers read):
    # the coordinator's, listed first, is what a consumer reads.
    read, rows = described[0].description, described[0].rows
    writes = client.legacy_offset_writes(group_id) if read.reads_from == READS_FROM[ZK] else {}
    committed = {TopicPartition(r.topic, r.partition): r.current_offset for r in rows if r.current_offset is not None}
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
    partitions = {
        tp: PartitionObservation(offset, ends.get(tp), tp in owned, writes.get(tp))
        for tp, offset in sorted(committed.items())
    }
    members = len({(d.description.kind, m.member_id) for d in described for m in d.description.members})
    return GroupObservation(partitions, any(d.description.kind == COORDINATOR for d in described), members)
