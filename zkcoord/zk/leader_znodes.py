"""The offsets partitions' znodes: their agreed count, each one's epoch counter and leader znode
(architecture.md "ZooKeeper use", group-coordinator §9.6, §9.7, §10).

Every offsets partition ``p`` has at most one leader: the node whose ephemeral ``partition_leader_path``
exists. Its epoch comes from the partition's persistent counter, raised in the same ZooKeeper transaction
that creates the leader znode, so each new leader of ``p`` has a higher epoch than every earlier one.
:class:`LeaderZnodes` holds the reads and transactions of :class:`~zkcoord.zk.election.PartitionElection`;
the functions are for a node's start, its status and the log's repair tools. Must not import the log, the
runtime or the server.
"""

import contextlib
import logging
from collections.abc import Callable
from typing import NamedTuple

import gevent
from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    KazooException,
    NodeExistsError,
    NoNodeError,
    RolledBackError,
    RuntimeInconsistency,
)

from zkcoord.errors import ConfigError
from zkcoord.zk import layout
from zkcoord.zk.layout import ZnodeDecodeError
from zkcoord.zk.nodes import CALL_TIMEOUT_S

log = logging.getLogger(__name__)


def ensure_partition_count(client: KazooClient, root: str, num_partitions: int) -> int:
    """Store ``offsets.topic.num.partitions`` at the first start; refuse a node configured differently later."""
    if isinstance(num_partitions, bool) or not isinstance(num_partitions, int) or num_partitions < 1:
        raise ConfigError(f"offsets.topic.num.partitions must be an int ≥ 1, not {num_partitions!r}")
    path = layout.offsets_config_path(root)
    try:
        client.create(path, layout.encode_offsets_config(num_partitions), makepath=True)
        return num_partitions
    except NodeExistsError:
        pass
    data, _ = client.get(path)
    stored = layout.decode_offsets_config(path, data)
    if stored != num_partitions:
        raise ConfigError(
            f"offsets.topic.num.partitions is {num_partitions} here but {stored} in ZooKeeper at {path}; "
            "a node configured differently refuses to start (the partition of every group depends on it)"
        )
    return stored


def raise_partition_epoch(client: KazooClient, root: str, partition: int, epoch: int, dry_run: bool = False) -> int:
    """Make the partition's epoch counter at least ``epoch`` (it only ever grows); returns its value before.

    The repair for a partition directory whose ``leader-epoch`` is above ZooKeeper's counter (ZooKeeper's data
    was lost or reset): the next leader is then elected with a higher epoch than the one on disk.
    """
    path = layout.partition_epoch_path(root, partition)
    while True:
        try:
            data, stat = client.get(path)
        except NoNodeError:
            if dry_run:
                return 0
            with contextlib.suppress(NodeExistsError):
                client.create(path, layout.encode_partition_epoch(epoch), makepath=True)
                return 0
            continue
        current = layout.decode_partition_epoch(path, data)
        if current >= epoch or dry_run:
            return current
        with contextlib.suppress(BadVersionError):
            client.set(path, layout.encode_partition_epoch(epoch), version=stat.version)
            return current


def read_leaders(
    client: KazooClient, root: str, num_partitions: int, partitions: list[int] | None = None
) -> dict[int, tuple[int, int]]:
    """``{partition: (node_id, epoch)}`` of the partitions (all, or those listed) that have a leader now."""
    wanted = range(num_partitions) if partitions is None else [p for p in partitions if 0 <= p < num_partitions]
    pending = [(p, client.get_async(layout.partition_leader_path(root, p))) for p in wanted]
    leaders = {}
    for partition, result in pending:
        try:
            data, _ = result.get(timeout=CALL_TIMEOUT_S)
            leaders[partition] = layout.decode_partition_leader(layout.partition_leader_path(root, partition), data)
        except NoNodeError:
            continue
        except ZnodeDecodeError as error:
            log.warning("unreadable leader znode partition=%d error=%s", partition, error)
    return leaders


class Leader(NamedTuple):
    node_id: int
    epoch: int
    owner: int  # the ephemeral owner's session id
    version: int


class Unreadable(NamedTuple):
    reason: str


class LeaderZnodes:
    """One node's reads (watched with ``on_watch``) and transactions on every partition's znodes.

    ``wait(result)`` answers an async kazoo call (the election's worker: it raises when the session is lost).
    """

    def __init__(
        self,
        client: KazooClient,
        root: str,
        node_id: int,
        num_partitions: int,
        wait: Callable,
        on_watch: Callable,
    ):
        self.client = client
        self.root = root
        self.node_id = node_id
        self.num_partitions = num_partitions
        self._wait = wait
        self._on_watch = on_watch

    def ensure_nodes_path(self) -> None:
        self._wait(self.client.ensure_path_async(layout.coordinator_nodes_path(self.root)))

    def live_nodes(self) -> dict[int, int]:
        """``{node_id: czxid of its registration}``, watching the list."""
        path = layout.coordinator_nodes_path(self.root)
        children = self._wait(self.client.get_children_async(path, watch=self._on_watch))
        ids = [int(child) for child in children if child.isdigit()]
        pending = [(i, self.client.exists_async(layout.coordinator_node_path(self.root, i))) for i in ids]
        live = {}
        for node_id, result in pending:
            stat = self._wait(result)
            if stat is not None:
                live[node_id] = stat.czxid
        return live

    def leaders(self) -> dict[int, Leader | Unreadable]:
        """Every partition's leader, watching each leader znode."""
        paths = [layout.partition_leader_path(self.root, p) for p in range(self.num_partitions)]
        watched = [self.client.exists_async(path, watch=self._on_watch) for path in paths]
        present = [p for p, result in enumerate(watched) if self._wait(result) is not None]
        pending = [(p, self.client.get_async(paths[p])) for p in present]
        leaders: dict[int, Leader | Unreadable] = {}
        for partition, result in pending:
            try:
                data, stat = self._wait(result)
            except NoNodeError:
                continue  # deleted since: its watch wakes us
            try:
                node_id, epoch = layout.decode_partition_leader(paths[partition], data)
            except ZnodeDecodeError as error:
                log.warning("partition blocked by an unreadable leader znode partition=%d error=%s", partition, error)
                leaders[partition] = Unreadable(str(error))
                continue
            leaders[partition] = Leader(node_id, epoch, stat.ephemeralOwner, stat.version)
        return leaders

    def _next_epoch(self, partition: int) -> tuple[int, int]:
        """``(epoch + 1, version)`` of the partition's counter, creating it at 0 if needed."""
        path = layout.partition_epoch_path(self.root, partition)
        while True:
            try:
                data, stat = self._wait(self.client.get_async(path))
            except NoNodeError:
                with contextlib.suppress(NodeExistsError):
                    self._wait(self.client.create_async(path, layout.encode_partition_epoch(0), makepath=True))
                continue
            return layout.decode_partition_epoch(path, data) + 1, stat.version

    def create(self, partition: int) -> int | None:
        """Raise the epoch and create the leader znode in one transaction: the new epoch, or None when another
        node leads (NodeExists)."""
        leader_path = layout.partition_leader_path(self.root, partition)

        def create_leader(transaction, epoch: int) -> None:
            transaction.create(leader_path, layout.encode_partition_leader(self.node_id, epoch), ephemeral=True)

        return self._raise_epoch_with(partition, create_leader, NodeExistsError)

    def take_over(self, partition: int, version: int) -> int | None:
        """Raise the epoch and rewrite this session's leader znode (at ``version``) in one transaction: the new
        epoch, or None when the znode changed under us."""
        leader_path = layout.partition_leader_path(self.root, partition)

        def rewrite_leader(transaction, epoch: int) -> None:
            encoded = layout.encode_partition_leader(self.node_id, epoch)
            transaction.set_data(leader_path, encoded, version=version)

        return self._raise_epoch_with(partition, rewrite_leader, (BadVersionError, NoNodeError))

    def _raise_epoch_with(self, partition: int, leader_op: Callable, lost: type | tuple) -> int | None:
        """Raise the partition's epoch and apply ``leader_op(transaction, epoch)`` to its leader znode in one
        transaction, again while the epoch moved meanwhile: the new epoch, or None if the leader op failed with
        ``lost``."""
        epoch_path = layout.partition_epoch_path(self.root, partition)
        while True:
            epoch, version = self._next_epoch(partition)
            transaction = self.client.transaction()
            transaction.set_data(epoch_path, layout.encode_partition_epoch(epoch), version=version)
            leader_op(transaction, epoch)
            results = self._wait(transaction.commit_async())
            if isinstance(results[0], BadVersionError):
                continue
            if isinstance(results[1], lost):
                return None
            _raise_failure(results)
            return epoch

    def delete(self, partition: int, version: int) -> None:
        """Delete the leader znode at ``version``; gone or changed already is fine (its watch wakes us)."""
        with contextlib.suppress(NoNodeError, BadVersionError):
            self._wait(self.client.delete_async(layout.partition_leader_path(self.root, partition), version))

    def delete_owned_by(self, session: int | None) -> None:
        """Delete every leader znode of ``session`` (on stop: the others need not wait for the session's end)."""
        paths = [layout.partition_leader_path(self.root, p) for p in range(self.num_partitions)]
        try:
            stats = [(path, self.client.exists_async(path)) for path in paths]
            deletions = [
                self.client.delete_async(path, stat.version)
                for path, result in stats
                if (stat := result.get(timeout=CALL_TIMEOUT_S)) is not None and stat.ephemeralOwner == session
            ]
            for deletion in deletions:
                with contextlib.suppress(NoNodeError, BadVersionError):
                    deletion.get(timeout=CALL_TIMEOUT_S)
        except (KazooException, gevent.Timeout) as error:
            log.warning("could not delete leader znodes on stop node=%d error=%r", self.node_id, error)


def _raise_failure(results: list) -> None:
    """Raise the operation's error that failed a transaction (the others only say they were rolled back)."""
    failures = [result for result in results if isinstance(result, Exception)]
    for failure in failures:
        if not isinstance(failure, (RolledBackError, RuntimeInconsistency)):
            raise failure
    if failures:
        raise failures[0]
