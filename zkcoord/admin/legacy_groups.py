"""Legacy (0.8.2 ZooKeeper) consumer groups, as the admin client reads and changes them under
``/consumers/<g>`` (legacy-zk-protocol.md §1), with the results and errors of :mod:`zkcoord.admin.model`.

IO: a threading kazoo client, connected on first use within ``ZOOKEEPER_CONNECT_TIMEOUT_S``. Must not
import the wire protocol, the CLI, the renderer, the server or gevent.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping, Sequence

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError, NotEmptyError
from kazoo.handlers.threading import KazooTimeoutError

from zkcoord.admin.model import (
    LEGACY,
    GroupDescription,
    GroupListing,
    MemberDescription,
    OffsetAndMetadata,
    ZooKeeperUnreachableError,
)
from zkcoord.assign.legacy import consumer_of_thread
from zkcoord.errors import (
    CoordinatorResponseError,
    GroupIdNotFoundError,
    GroupNotEmptyError,
    GroupSubscribedToTopicError,
)
from zkcoord.model import GroupState, TopicPartition
from zkcoord.zk import admin as zk_admin
from zkcoord.zk import layout
from zkcoord.zk.acl import start_logged_in
from zkcoord.zk.client import tool_client
from zkcoord.zk.credentials import ZooKeeperSecurity, zookeeper_security

log = logging.getLogger(__name__)

ZOOKEEPER_CONNECT_TIMEOUT_S = 10.0


class LegacyGroups:
    """The admin-client group calls for 0.8.2 groups in the ZooKeeper at ``connect`` ("h:p[,h:p][/chroot]").

    ``security`` None takes ZooKeeper credentials as Kafka's tools do (``$KAFKA_OPTS``, :mod:`zkcoord.zk.credentials`).
    """

    def __init__(self, connect: str, security: ZooKeeperSecurity | None = None):
        self.connect = connect
        self.security = zookeeper_security() if security is None else security
        self._zk: KazooClient | None = None

    def zookeeper(self) -> KazooClient:
        """The started kazoo client (ZooKeeperUnreachableError when ZooKeeper does not answer in time)."""
        if self._zk is None:
            client = tool_client(self.connect, ZOOKEEPER_CONNECT_TIMEOUT_S, self.security)
            try:
                start_logged_in(client, self.security, ZOOKEEPER_CONNECT_TIMEOUT_S)
            except KazooTimeoutError:
                client.close()
                raise ZooKeeperUnreachableError(
                    f"cannot connect to ZooKeeper at {self.connect} within {ZOOKEEPER_CONNECT_TIMEOUT_S:g} s"
                ) from None
            self._zk = client
        return self._zk

    def close(self) -> None:
        if self._zk is not None:
            self._zk.stop()
            self._zk.close()
            self._zk = None

    def list(self, states: list[str]) -> list[GroupListing]:
        """Children of ``/consumers``: "Stable" with live members under ``ids``, else "Empty"; in ``states``
        (all if empty)."""
        zk = self.zookeeper()
        listings = []
        for group_id in _children(zk, layout.CONSUMERS_PATH):
            state = GroupState.STABLE if _children(zk, layout.ids_path(group_id)) else GroupState.EMPTY
            if not states or state in states:
                listings.append(GroupListing(group_id, LEGACY, state, "consumer"))
        return listings

    def describe(self, group_id: str) -> GroupDescription | None:
        """The group's members and the partitions their threads own; None when ``/consumers/<g>`` is absent."""
        snapshot = zk_admin.read_group(self.zookeeper(), group_id)
        if not snapshot.exists:
            return None
        live = sorted(set(snapshot.members) | set(snapshot.bad_members))
        owned: dict[str, list[TopicPartition]] = {}
        for tp, thread in snapshot.owners.items():
            owned.setdefault(consumer_of_thread(thread), []).append(tp)
        members = tuple(MemberDescription(c, None, None, None, tuple(sorted(owned.get(c, ()))), LEGACY) for c in live)
        return GroupDescription(
            group_id, LEGACY, GroupState.STABLE if live else GroupState.EMPTY, "consumer", "", members, None
        )

    def committed(self, group_id: str) -> dict[TopicPartition, OffsetAndMetadata]:
        """The offsets under ``/consumers/<g>/offsets``; values that are not offsets are logged and skipped."""
        offsets = {}
        for topic, partition, offset in zk_admin.read_offsets(self.zookeeper(), group_id):
            if isinstance(offset, int):
                offsets[TopicPartition(topic, partition)] = OffsetAndMetadata(offset)
            else:
                log.warning("skipping an unreadable offset group=%s topic=%s partition=%d", group_id, topic, partition)
        return offsets

    def offset_writes(self, group_id: str) -> dict[TopicPartition, int]:
        """ZooKeeper's id of the last write of each offset (a new id is a new commit, even of the same offset)."""
        return {TopicPartition(*tp): mzxid for tp, mzxid in zk_admin.offset_writes(self.zookeeper(), group_id).items()}

    def write_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        """Write each offset znode (as ImportZkOffsets); the caller checks the partitions exist."""
        entries = [(layout.offset_path(group_id, tp.topic, tp.partition), offset) for tp, offset in offsets.items()]
        zk_admin.import_offsets(self.zookeeper(), entries)

    def delete(self, group_id: str) -> None:
        """Remove ``/consumers/<g>``, unless a member is registered (GroupNotEmptyError)."""
        zk = self.zookeeper()
        if zk.exists(layout.group_path(group_id)) is None:
            raise GroupIdNotFoundError("The group id does not exist.")
        if _children(zk, layout.ids_path(group_id)):
            raise GroupNotEmptyError("The group is not empty.")
        try:
            zk.delete(layout.group_path(group_id), recursive=True)
        except NotEmptyError:  # a member registered meanwhile
            raise GroupNotEmptyError("The group is not empty.") from None
        except NoNodeError:
            pass

    def delete_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, CoordinatorResponseError | None]:
        """Delete the offsets of partitions of topics no member subscribes to; the others get an error."""
        zk = self.zookeeper()
        snapshot = zk_admin.read_group(zk, group_id)
        subscribed = {topic for subscription in snapshot.members.values() for topic in subscription}
        outcome: dict[TopicPartition, CoordinatorResponseError | None] = {}
        for tp in partitions:
            if tp.topic in subscribed:
                outcome[tp] = GroupSubscribedToTopicError("The consumer group is actively subscribed to the topic")
                continue
            with contextlib.suppress(NoNodeError):
                zk.delete(layout.offset_path(group_id, tp.topic, tp.partition))
            outcome[tp] = None
        for topic in {tp.topic for tp, error in outcome.items() if error is None}:
            with contextlib.suppress(NoNodeError, NotEmptyError):
                zk.delete(layout.offsets_path(group_id, topic))  # only when no partition of it is left
        return outcome

    def partition_counts(self, topics: Sequence[str]) -> dict[str, int]:
        """Partitions per topic under ``/brokers/topics``; topics absent or unreadable there are left out."""
        listed = zk_admin.list_topics(self.zookeeper())
        return {t: len(p) for t, p in listed.items() if t in topics and isinstance(p, list)}


def _children(client: KazooClient, path: str) -> list[str]:
    try:
        return client.get_children(path)
    except NoNodeError:
        return []
