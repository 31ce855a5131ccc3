"""The bridge's ZooKeeper side: one read of a mixed group as 0.8.2 sees it, and fenced writes.

Every write the bridge makes (a registration, an owner znode, its own state) is a transaction that also sets
the group's bridge znode (:func:`zkcoord.zk.layout.bridge_path`) at the version last read, with the writer's
offsets-partition epoch in it. A node deposed by a newer leader, a second node that believes it leads, and
``zkcoord migrate`` tearing the bridge down (which deletes that znode in its own transaction) therefore exclude
each other: whoever writes second fails and reads again.

IO: the node's gevent kazoo client; every call bounded by the caller.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError, RolledBackError

from zkcoord.errors import ZkcoordError
from zkcoord.migration.store import read_bridge_versioned
from zkcoord.model import TopicPartition
from zkcoord.zk import layout
from zkcoord.zk.admin import read_owners
from zkcoord.zk.layout import BridgeState, ConsumerRegistration, ZnodeDecodeError
from zkcoord.zk.topic_filter import UnsupportedFilterError, expand


class BridgeError(ZkcoordError):
    """A step of a bridge plan that did not happen; the request that needed it gets a retriable error."""


class BridgeFenced(BridgeError):
    """The bridge znode changed since it was read (another writer, a newer epoch, or the bridge torn down)."""


class ClaimConflict(ZkcoordError):
    """An owner znode the bridge wants names another thread."""

    def __init__(self, partition: TopicPartition, owner: str | None):
        super().__init__(f"{partition} is owned by {owner}")
        self.partition = partition
        self.owner = owner


@dataclass(frozen=True)
class GroupView:
    """A mixed group as ZooKeeper holds it: the bridge state (and its znode version), every registration,
    the owner znodes of the subscribed topics, and the cluster's topics with their partition counts."""

    state: BridgeState
    version: int
    registrations: Mapping[str, ConsumerRegistration]
    unreadable: tuple[str, ...]  # consumer ids whose registration 0.8.2 could not read either
    owners: Mapping[TopicPartition, str]
    partition_counts: Mapping[str, int]

    def consumers_of(self, member_ids: Iterable[str]) -> dict[str, str]:
        """Consumer id → member id of the registered coordinator members among ``member_ids``."""
        wanted = set(member_ids)
        return {m.consumer_id: m.member_id for m in self.state.members if m.member_id in wanted}

    @property
    def legacy_ids(self) -> frozenset[str]:
        return frozenset(self.registrations) - self.state.consumer_ids

    def legacy_topics(self) -> set[str]:
        """The topics the legacy members subscribe to, their wildcards matched against the cluster's topics."""
        legacy = {cid: self.registrations[cid] for cid in self.legacy_ids}
        return _subscribed_topics(legacy, list(self.partition_counts))


def read_group(zk: KazooClient, root: str, group: str) -> GroupView | None:
    """Everything the bridge decides from, pipelined; None when the group is not bridged."""
    found = read_bridge_versioned(zk, root, group)
    if found is None:
        return None
    state, version = found
    try:
        ids = zk.get_children(layout.ids_path(group))
    except NoNodeError:
        ids = []
    replies = {cid: zk.get_async(layout.consumer_path(group, cid)) for cid in ids}
    topics = zk.get_children(layout.BROKER_TOPICS_PATH)
    counts = {t: zk.get_children_async(f"{layout.topic_path(t)}/partitions") for t in topics}
    registrations, unreadable = {}, []
    for cid, reply in replies.items():
        try:
            registrations[cid] = layout.decode_consumer_registration(group, cid, reply.get()[0])
        except NoNodeError:
            continue
        except ZnodeDecodeError:
            unreadable.append(cid)
    partition_counts = {}
    for topic, reply in counts.items():
        try:
            partition_counts[topic] = len(reply.get())
        except NoNodeError:
            continue
    owners = read_owners(zk, group, _subscribed_topics(registrations, topics))
    return GroupView(state, version, registrations, tuple(sorted(unreadable)), owners, partition_counts)


def _subscribed_topics(registrations: Mapping[str, ConsumerRegistration], topics: list[str]) -> set[str]:
    """The topics some registration subscribes to, wildcards matched as 0.8.2 matches them (every topic when a
    wildcard cannot be matched: the owners are then read, and the assignment refused, as a whole)."""
    try:
        return {t for reg in registrations.values() for t in expand(reg, topics, True)}
    except UnsupportedFilterError:
        return set(topics)


class FencedWriter:
    """Writes for one group, each fenced by the bridge znode's version; the version moves on with every write."""

    def __init__(self, zk: KazooClient, root: str, group: str, state: BridgeState, version: int, epoch: int):
        self.zk, self.group, self.path = zk, group, layout.bridge_path(root, group)
        if state.epoch > epoch:
            raise BridgeFenced(f"group {group} is bridged by a newer leader (epoch {state.epoch} > {epoch})")
        self.state, self.version, self.epoch = replace(state, epoch=epoch), version, epoch

    def _commit(self, state: BridgeState, *ops) -> None:
        transaction = self.zk.transaction()
        transaction.set_data(self.path, layout.encode_bridge_state(state), version=self.version)
        for op, args in ops:
            getattr(transaction, op)(*args)
        results = transaction.commit()
        errors = [r for r in results if isinstance(r, Exception) and not isinstance(r, RolledBackError)]
        if not errors:
            self.state, self.version = state, results[0].version
            return
        if isinstance(results[0], Exception) and not isinstance(results[0], RolledBackError):
            raise BridgeFenced(f"the bridge znode of group {self.group} changed ({type(results[0]).__name__})")
        raise errors[0]

    def take_over(self) -> None:
        """Write this writer's epoch into the bridge znode (the new leader's first write)."""
        self._commit(self.state)

    def register(self, member: layout.BridgeMember, data: bytes) -> None:
        """Add ``member`` to the state and create (or rewrite) its registration."""
        path = layout.consumer_path(self.group, member.consumer_id)
        others = tuple(m for m in self.state.members if m.consumer_id != member.consumer_id)
        state = replace(self.state, members=(*others, member))
        if self.zk.exists(path):
            self._commit(state, ("set_data", (path, data)))
        else:
            self.zk.ensure_path(layout.ids_path(self.group))
            self._commit(state, ("create", (path, data)))

    def unregister(self, consumer_id: str) -> None:
        """Delete the registration (if any), then drop the member from the state."""
        state = replace(self.state, members=tuple(m for m in self.state.members if m.consumer_id != consumer_id))
        path = layout.consumer_path(self.group, consumer_id)
        self._commit(state, *([("delete", (path,))] if self.zk.exists(path) else []))

    def claim(self, partition: TopicPartition, thread: str) -> None:
        """Create the owner znode naming ``thread`` (persistent); :class:`ClaimConflict` if another owns it."""
        path = layout.owner_path(self.group, *partition)
        self.zk.ensure_path(layout.owners_path(self.group, partition.topic))
        try:
            self._commit(self.state, ("create", (path, layout.encode_owner(thread))))
        except NodeExistsError:
            owner = self._owner(path)
            if owner != thread:
                raise ClaimConflict(partition, owner) from None

    def release(self, partition: TopicPartition, thread: str) -> None:
        """Delete the owner znode if it still names ``thread``."""
        path = layout.owner_path(self.group, *partition)
        try:
            data, stat = self.zk.get(path)
        except NoNodeError:
            return
        if layout.decode_owner(data) == thread:
            try:
                self._commit(self.state, ("delete", (path, stat.version)))
            except NoNodeError:
                return

    def _owner(self, path: str) -> str | None:
        try:
            return layout.decode_owner(self.zk.get(path)[0])
        except NoNodeError:
            return None


def poke_legacy_members(zk: KazooClient, group: str, name: str) -> None:
    """Make the 0.8.2 members rebalance: a registration with no subscription appears and goes (two child
    changes of ``/consumers/<g>/ids``). 0.8.2 gives a consumer with no topics no threads, so the assignment
    they compute is the one they would have computed anyway."""
    path = layout.consumer_path(group, name)
    data = layout.encode_consumer_registration(ConsumerRegistration(subscription={}))
    with contextlib.suppress(NodeExistsError):
        zk.create(path, data, ephemeral=True)
    zk.delete(path)
