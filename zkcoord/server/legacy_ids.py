"""The ZooKeeper consumers of each group, as JoinGroup's single-protocol check needs them without waiting.

A coordinator refuses a JoinGroup while ``/consumers/<g>/ids`` has children (docs/protocol.md). A rebalance
brings every member's JoinGroup at once, and a ZooKeeper read on the path of each made the last one wait for
ZooKeeper behind the node's busy hub (hundreds of milliseconds with 1,000 members). :class:`LegacyIds` reads a
group's ids once, keeps them while a ZooKeeper watch guards them, and reads again after the watch fires, as the
migration phase is kept (:mod:`zkcoord.server.migration`); reads that miss are shared (:class:`FreshReads`).

IO: the node's gevent kazoo client, and a greenlet per read.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

import gevent
from gevent.event import AsyncResult
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from kazoo.protocol.states import WatchedEvent

from zkcoord.zk import layout

T = TypeVar("T")
MAX_GROUPS = 10_000  # groups whose ids are kept; the least recently asked go first


class LegacyIds:
    """The sorted consumer ids under ``/consumers/<group>/ids`` per group, kept by watches while connected.

    Without a connection to ZooKeeper nothing is answered from memory (a watch could not tell of a change):
    every call reads, and fails as the read does. A change reaches the cache when ZooKeeper's notification
    does, as with any watch-kept view.
    """

    def __init__(self, client: Callable[[], KazooClient], max_groups: int = MAX_GROUPS):
        self._client = client
        self._max_groups = max_groups
        self._kept: OrderedDict[str, list[str]] = OrderedDict()
        self._changes = 0  # watch events seen: a read that overlapped one may hold stale ids, so it is not kept
        self._reads = FreshReads(self._read)

    def ids(self, group: str) -> list[str]:
        """The group's ZooKeeper consumer ids (blocks on a read when not kept; its errors propagate)."""
        kept = self._kept.get(group)
        if kept is not None and self._client().connected:
            self._kept.move_to_end(group)
            return kept
        return self._reads.get(group)

    def _read(self, group: str) -> list[str]:
        zk, path = self._client(), layout.ids_path(group)
        changes = self._changes
        while True:
            try:
                ids = sorted(zk.get_children(path, watch=self._changed))
                break
            except NoNodeError:
                if zk.exists(path, watch=self._changed) is None:  # its creation fires the watch
                    ids = []
                    break
        if changes == self._changes:
            self._kept[group] = ids
            self._kept.move_to_end(group)
            while len(self._kept) > self._max_groups:
                self._kept.popitem(last=False)
        return ids

    def _changed(self, event: WatchedEvent) -> None:
        """A kazoo watch: children or existence changed, or (no path) the session was reset and every watch with
        it."""
        self._changes += 1
        if event.path is None:
            self._kept.clear()
        else:
            self._kept.pop(group_of_ids_path(event.path), None)


def group_of_ids_path(path: str) -> str | None:
    """The group whose ``/consumers/<group>/ids`` is ``path``, or None."""
    head, tail = f"{layout.CONSUMERS_PATH}/", "/ids"
    if not (path.startswith(head) and path.endswith(tail)):
        return None
    group = path[len(head) : -len(tail)]
    return group if group and layout.ids_path(group) == path else None


class FreshReads(Generic[T]):
    """``read(key)`` for concurrent callers, who share reads: each gets the value of a read begun after it asked.

    A caller waits for the read queued behind the key's running one (it begins when the running read ends), or
    begins a read if none runs: per key, at most one read runs and one waits.
    """

    def __init__(self, read: Callable[[str], T]):
        self._read = read
        self._running: dict[str, AsyncResult] = {}
        self._queued: dict[str, AsyncResult] = {}

    def get(self, key: str) -> T:
        """The value of a read of ``key`` begun after this call; blocks (unbounded: the caller bounds it)."""
        result = self._queued.get(key)
        if result is None:
            result = AsyncResult()
            if key in self._running:
                self._queued[key] = result
            else:
                self._begin(key, result)
        return result.get()

    def _begin(self, key: str, result: AsyncResult) -> None:
        self._running[key] = result
        gevent.spawn(self._run, key, result)

    def _run(self, key: str, result: AsyncResult) -> None:
        try:
            result.set(self._read(key))
        except Exception as error:  # every caller waiting for this read raises it
            result.set_exception(error)
        finally:
            del self._running[key]
            queued = self._queued.pop(key, None)
            if queued is not None:
                self._begin(key, queued)
