"""Whether a group is anywhere a migration could start from, and forgetting a group's migration state.

``migrate up`` of a group that has no member, no committed offset and no coordinator record is refused unless the
operator says the group is new (a typo would otherwise leave migration state for a group that exists nowhere);
``migrate forget`` removes a group's migration state, refused while something still follows it.

IO: a kazoo client (any handler) and a :class:`~zkcoord.channel.CoordinatorChannel`.
"""

from dataclasses import dataclass

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NoNodeError

from zkcoord.channel import CoordinatorChannel
from zkcoord.migration import store
from zkcoord.migration.phases import MigrationError, MigrationState, Phase
from zkcoord.migration.verify import describe_group, fetch_log_offsets
from zkcoord.model import GroupState
from zkcoord.zk import layout
from zkcoord.zk.offsets import read_group_offsets

# What :func:`find_group` looks at, as the refusal names it.
LOOKED_FOR = (
    "legacy members (/consumers/<g>/ids), ZooKeeper offsets (/consumers/<g>/offsets), coordinator members, "
    "committed log offsets, a coordinator group record, a migration state"
)


@dataclass(frozen=True)
class GroupPresence:
    """What exists of a group; the coordinator's fields are None when no coordinator node is registered.
    ``version`` is the state znode's version when it was read (what :func:`forget` deletes at);
    ``zookeeper_offsets`` counts the offset znodes, ``unreadable_offsets`` those whose data is not an offset."""

    group: str
    state: MigrationState | None
    version: int
    legacy_members: int
    zookeeper_offsets: int
    unreadable_offsets: int
    coordinator_members: int | None
    coordinator_record: bool | None
    log_offsets: int | None

    @property
    def exists(self) -> bool:
        return bool(
            self.state is not None
            or self.legacy_members
            or self.zookeeper_offsets
            or self.coordinator_members
            or self.coordinator_record
            or self.log_offsets
        )

    @property
    def live_members(self) -> int:
        return self.legacy_members + (self.coordinator_members or 0)

    @property
    def offsets(self) -> int:
        return self.zookeeper_offsets + (self.log_offsets or 0)


def find_group(zk: KazooClient, channel: CoordinatorChannel, root: str, group: str) -> GroupPresence:
    """Look for ``group`` in ZooKeeper and, when a coordinator node is registered, at its coordinator."""
    state, version = store.read_state(zk, root, group)
    legacy = len(store.live_legacy_members(zk, root, group))
    stored = read_group_offsets(zk, group)  # foreign data in an offset znode is still something of the group
    zookeeper = (legacy, len(stored.offsets) + len(stored.unreadable), len(stored.unreadable))
    if not channel.addresses():
        return GroupPresence(group, state, version, *zookeeper, None, None, None)
    described = describe_group(channel, group)
    members = len(described.get("members") or [])
    record = described.get("group_state", GroupState.DEAD) != GroupState.DEAD
    log_offsets = len(fetch_log_offsets(channel, group))
    return GroupPresence(group, state, version, *zookeeper, members, record, log_offsets)


def unreadable_warning(presence: GroupPresence) -> str | None:
    """The warning for offset znodes whose data is not an offset (None: there are none)."""
    if not presence.unreadable_offsets:
        return None
    return (
        f"group {presence.group}: {presence.unreadable_offsets} ZooKeeper offset znode(s) under "
        f"/consumers/{presence.group}/offsets hold data that is not an offset; counted as committed offsets"
    )


def not_found_message(group: str, presence: GroupPresence) -> str:
    """The refusal of a group that exists nowhere: what was looked for, and what to do."""
    where = "" if presence.coordinator_members is not None else " (no coordinator node is registered to ask)"
    return (
        f"group '{group}' was not found: it has no {LOOKED_FOR}{where}. Check the name with `zkcoord groups list`; "
        "to migrate a group that has none of these yet, pass --allow-new-group"
    )


def forget_refusals(presence: GroupPresence) -> list[str]:
    """Why removing the group's migration state would change what someone reads (empty: it is safe).

    Live members follow the state (it wins over their own ``offsets.storage``); past ZK_ONLY the group's readers
    use the log, and without the state a legacy reader would go back to ZooKeeper's offsets."""
    state = presence.state
    if state is None:
        return []
    reasons = []
    if presence.live_members:
        coordinator = "?" if presence.coordinator_members is None else presence.coordinator_members
        reasons.append(
            f"the group has live members ({presence.legacy_members} legacy, {coordinator} coordinator) that follow "
            f"its phase {state.phase.name}: without the state they follow their own offsets.storage"
        )
    migrated = state.phase != Phase.ZK_ONLY or state.applied or state.pending is not None
    if migrated and (presence.offsets or presence.log_offsets is None):
        offsets = "unknown log offsets" if presence.log_offsets is None else f"{presence.offsets} committed offset(s)"
        reasons.append(
            f"the group is at {state.phase.name} with {offsets}: its readers would go back to ZooKeeper's offsets; "
            "walk it down first (`zkcoord migrate down --group G --to zero`)"
        )
    return reasons


def forget(zk: KazooClient, root: str, group: str, version: int) -> None:
    """Remove the group's migration state at ``version`` (the one :func:`find_group` read and the refusals judged)
    and its mixed-group bridge (with the registrations and owner znodes the bridge holds) in one transaction;
    :class:`~zkcoord.migration.store.ConcurrentChangeError` when the state changed or went since."""
    transaction = zk.transaction()
    found = store.read_bridge_versioned(zk, root, group)
    if found is not None:
        held, bridge_version = found
        for path in store.bridge_znodes(zk, group, held):
            transaction.delete(path)
        transaction.delete(layout.bridge_path(root, group), version=bridge_version)
    transaction.delete(layout.migration_path(root, group), version=version)
    results = transaction.commit()
    if any(isinstance(result, (BadVersionError, NoNodeError)) for result in results):
        raise store.ConcurrentChangeError(
            f"group {group}: the migration state changed since it was checked, so it was not removed; "
            "run `zkcoord migrate forget` again to check it anew"
        )
    if any(isinstance(result, Exception) for result in results):
        raise MigrationError(f"group {group}: the migration state was not removed: {results}")
