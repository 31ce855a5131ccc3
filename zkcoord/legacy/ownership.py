"""What a legacy member owns: the registry of its partitions, the owner znodes behind it, and what it reports.

:class:`Ownership` keeps the registry (thread, consumed position and ZooKeeper checkpoint per partition) and
publishes it: to the streams as their views, to other threads as ``assignment()``, and as ``legacy.assignment``
trace events. :class:`OwnerNodes` claims and releases the owner znodes (legacy-zk-protocol.md §1.5, §3.4),
pipelined, and remembers those whose fate a lost connection left unknown.

Runs on the member's hub thread. IO: the kazoo client it is given. Does not import the commit, rebalance,
membership or consumer modules.
"""

import contextlib
import time
from collections.abc import Callable, Mapping, Sequence

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError

from zkcoord.legacy.states import Lifecycle
from zkcoord.legacy.stream import Owned, Streams
from zkcoord.model import TopicPartition
from zkcoord.zk import layout


class ZkOps:
    """ZooKeeper requests and round trips spent by one rebalance attempt (pipelined batches count once)."""

    def __init__(self):
        self.requests = 0
        self.round_trips = 0

    def add(self, requests: int) -> None:
        if requests:
            self.requests += requests
            self.round_trips += 1


class ClaimConflict(Exception):
    """Another thread holds a partition this attempt decided to claim (§3.4 step 9)."""

    def __init__(self, released: list, conflicts: list):
        self.released, self.conflicts = released, conflicts


class Ownership:
    """The member's registry and the assignment it reports (hub thread; ``assignment`` is read by any thread).

    While the connection is down the member cannot know whether its session, and so its owner znodes, still
    exist: it then reports owning nothing.
    """

    def __init__(self, streams: Streams, lifecycle: Lifecycle, emit: Callable[..., None]):
        self.registry: dict[TopicPartition, Owned] = {}
        self.thread_ids: list[str] = []  # the threads of the last decision, each reported even when it owns nothing
        self.assignment: dict[str, list[TopicPartition]] = {}
        self._streams = streams
        self._lifecycle = lifecycle
        self._emit = emit

    def publish(self) -> None:
        """Make the registry (or nothing, while disconnected) the assignment others read, and trace it.

        The streams yield from what ``assignment`` reports, except that a rebalance stops them first
        (:meth:`detach_streams`). ``monotonic_before``/``monotonic_after`` bracket the switch, so a checker
        can order the changes of members in one process and prove that no two owned a partition at once.
        """
        connected = self._lifecycle.connected
        threads: dict[str, list[TopicPartition]] = {thread: [] for thread in self.thread_ids}
        if connected:
            for tp, owned in sorted(self.registry.items()):
                threads.setdefault(owned.thread_id, []).append(tp)
        self._streams.show(self.registry if connected else {})
        if threads == self.assignment:
            return
        before = time.monotonic()
        self.assignment = threads  # replaced whole: readers in other threads see one consistent dict
        after = time.monotonic()
        self._emit(
            "legacy.assignment",
            assignment={thread: [list(tp) for tp in tps] for thread, tps in threads.items()},
            connected=connected,
            monotonic_before=before,
            monotonic_after=after,
        )

    def detach_streams(self) -> None:
        """0.8.2's closeFetchers: the streams stop handing out records until the next :meth:`publish`."""
        self._streams.show({})


class OwnerNodes:
    """The owner znodes of this session: ``held`` are known to be ours; ``uncertain`` may be (a create or
    delete that died with the connection). Each attempt releases both before it claims anything."""

    def __init__(self, zk: KazooClient, group: str):
        self._zk = zk
        self._group = group
        self.held: set[TopicPartition] = set()
        self.uncertain: set[TopicPartition] = set()

    def forget(self) -> None:
        """The session expired, and every owner znode of it with it."""
        self.held.clear()
        self.uncertain.clear()

    def claim(self, wanted: Mapping[TopicPartition, str], ops: ZkOps, released: list) -> list[TopicPartition]:
        """reflectPartitionOwnershipDecision (§3.4 step 9, §1.5), pipelined: try every partition; on any
        conflict delete what this attempt created and fail (the conflict names what the attempt ``released``)."""
        creates = {
            tp: self._zk.create_async(
                layout.owner_path(self._group, *tp),
                layout.encode_owner(thread),
                ephemeral=True,
                makepath=True,
            )
            for tp, thread in wanted.items()
        }
        ops.add(len(creates))
        owned, existing, failure = [], [], None
        for tp, result in creates.items():
            try:
                result.get()
                owned.append(tp)
            except NodeExistsError:
                existing.append(tp)
            except KazooException as error:
                self.uncertain.add(tp)  # the create may have been applied before the connection dropped
                failure = failure or error
        reads = {tp: self._zk.get_async(layout.owner_path(self._group, *tp)) for tp in existing}
        ops.add(len(reads))
        conflicts = []
        for tp, result in reads.items():
            try:
                holder = result.get()[0]
            except NoNodeError:
                holder = None  # vanished meanwhile: still a conflict for this attempt
            except KazooException as error:
                failure, holder = failure or error, None
            if holder == layout.encode_owner(wanted[tp]):
                owned.append(tp)  # our own node, e.g. a retry after connection loss
            else:
                conflicts.append([tp.topic, tp.partition, layout.decode_owner(holder)])
        self.held.update(owned)
        if conflicts or failure is not None:
            self.delete_confirmed(owned, ops)
            if failure is not None:
                raise failure
            raise ClaimConflict(released, conflicts)
        return owned

    def delete_confirmed(self, partitions: Sequence[TopicPartition], ops: ZkOps) -> None:
        """Delete owner znodes known to be ours. One whose delete fails becomes uncertain: the delete
        may have been applied, and another member may own the partition by the next attempt."""
        pending = [(tp, self._zk.delete_async(layout.owner_path(self._group, *tp))) for tp in partitions]
        ops.add(len(pending))
        failure = None
        for tp, result in pending:
            self.held.discard(tp)
            try:
                result.get()
            except NoNodeError:
                pass  # already gone: released either way
            except KazooException as error:
                self.uncertain.add(tp)
                failure = failure or error
        if failure is not None:
            raise failure

    def release_uncertain(self, ops: ZkOps) -> None:
        """Delete the uncertain owner znodes that turn out to be ours (``ephemeralOwner`` is our session);
        a node another member created is never touched."""
        if not self.uncertain:
            return
        session_id = self._zk.client_id[0]
        reads = [(tp, self._zk.get_async(layout.owner_path(self._group, *tp))) for tp in sorted(self.uncertain)]
        ops.add(len(reads))
        ours = []
        for tp, result in reads:
            try:
                _, stat = result.get()
            except NoNodeError:
                self.uncertain.discard(tp)
                continue
            if stat.ephemeralOwner == session_id:
                ours.append(tp)
            else:
                self.uncertain.discard(tp)
        deletes = [(tp, self._zk.delete_async(layout.owner_path(self._group, *tp))) for tp in ours]
        ops.add(len(deletes))
        for tp, result in deletes:
            with contextlib.suppress(NoNodeError):
                result.get()  # a failure propagates and the partition stays uncertain
            self.uncertain.discard(tp)
