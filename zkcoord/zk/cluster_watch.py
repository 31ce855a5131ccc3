"""The cluster as ZooKeeper has it, kept by watches: every node's registration and every offsets partition's
leader (architecture.md "ZooKeeper use"), so that FindCoordinator and Metadata read no ZooKeeper per request.

Watches and the state listener only enqueue; a worker greenlet makes the reads (each setting its watch again)
and calls ``on_change()`` after each, one at a time, so a later read never loses to an earlier one. kazoo
drops every watch when the connection drops, so each CONNECTED reads everything again; until that read is
done, and while the session is suspended or lost, :attr:`ClusterWatch.current` is False.

A node that finds its own registration unreadable while its own session owns it writes it again (someone wrote
over it with ``set``; nothing else would ever repair it).

kazoo runs with ``SequentialGeventHandler``: create and start this on the hub the client runs on. Must not
import the log, the runtime or the server.
"""

import logging
from collections.abc import Callable

import gevent
import gevent.queue
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import BadVersionError, NoNodeError
from kazoo.protocol.states import EventType, WatchedEvent

from zkcoord.zk import layout
from zkcoord.zk.layout import ZnodeDecodeError
from zkcoord.zk.nodes import CALL_TIMEOUT_S, DISCONNECTED, RETRY_DELAY_S, session_id

log = logging.getLogger(__name__)

_RESYNC = object()


class ClusterWatch:
    """``nodes`` (id → (host, port), or the reason it cannot be read) and ``leaders`` (partition → node id).

    ``own_registration``, when given, is ``(node_id, data)``: this node's id and the registration it writes.
    """

    def __init__(
        self,
        client: KazooClient,
        root: str,
        num_partitions: int,
        on_change: Callable[[], None],
        own_registration: tuple[int, bytes] | None = None,
    ):
        self.client = client
        self.root = root
        self.on_change = on_change
        self.own_registration = own_registration
        self.nodes: dict[int, tuple[str, int] | str] = {}
        self.kafka_listeners: dict[int, layout.KafkaListenerAddress] = {}  # of the readable nodes that have one
        self.leaders: dict[int, int] = {}
        self.current = False
        self._nodes_path = layout.coordinator_nodes_path(root)
        self._leader_paths = {layout.partition_leader_path(root, p): p for p in range(num_partitions)}
        self._events: gevent.queue.Queue = gevent.queue.Queue()
        self._interruptions = 0  # SUSPENDED or LOST seen; a read of everything begun before one is stale
        self._worker: gevent.Greenlet | None = None

    def start(self) -> None:
        self.client.add_listener(self._on_state)
        self._worker = gevent.spawn(self._run)
        self._events.put(_RESYNC)

    def stop(self) -> None:
        self.client.remove_listener(self._on_state)
        if self._worker is not None:
            self._worker.kill()
            self._worker = None
        self.current = False

    # -- kazoo callbacks: enqueue only (and say at once that the view may be stale) ------------------

    def _on_state(self, state: str) -> None:
        if state == KazooState.CONNECTED:
            self._events.put(_RESYNC)
            return
        self._interruptions += 1
        if self.current:
            self.current = False
            self.on_change()

    def _on_watch(self, event: WatchedEvent) -> None:
        if event.type != EventType.NONE:
            self._events.put(event.path)

    # -- the worker ---------------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            item = self._events.get()
            try:
                if item is _RESYNC:
                    self._read_everything()
                elif item == self._nodes_path:
                    self._read_node_list()
                elif item in self._leader_paths:
                    self._read_leader(item)
                elif item.startswith(self._nodes_path + "/"):
                    self._read_node(item)
            except DISCONNECTED:
                continue  # the next CONNECTED reads everything again
            except Exception:
                log.exception("reading the cluster failed, reading it all again in %ss", RETRY_DELAY_S)
                gevent.sleep(RETRY_DELAY_S)
                self._events.put(_RESYNC)
                continue
            self.on_change()

    def _read_everything(self) -> None:
        interruptions = self._interruptions
        self._read_node_list(every=True)
        for path in self._leader_paths:
            self._read_leader(path)
        self.current = interruptions == self._interruptions and self.client.state == KazooState.CONNECTED

    def _read_node_list(self, every: bool = False) -> None:
        """The registered ids, and the registration of each new one (``every``: of each one)."""
        try:
            children = self.client.get_children(self._nodes_path, watch=self._on_watch)
        except NoNodeError:
            children = []
            if self.client.exists(self._nodes_path, watch=self._on_watch) is not None:
                self._events.put(self._nodes_path)
        ids = {int(child) for child in children if child.isdigit()}
        for node_id in set(self.nodes) - ids:
            del self.nodes[node_id]
            self.kafka_listeners.pop(node_id, None)
        for node_id in sorted(ids if every else ids - set(self.nodes)):
            self._read_node(layout.coordinator_node_path(self.root, node_id))

    def _read_node(self, path: str) -> None:
        node_id = int(path.rsplit("/", 1)[1])
        self.kafka_listeners.pop(node_id, None)  # set again below if the registration names one
        try:
            data, stat = self.client.get(path, watch=self._on_watch)
        except NoNodeError:
            self.nodes.pop(node_id, None)  # the list's watch says so too
            return
        try:
            self.nodes[node_id] = layout.decode_coordinator_node(path, data)
            kafka = layout.decode_coordinator_node_kafka(path, data)
            if kafka is not None:
                self.kafka_listeners[node_id] = kafka
        except ZnodeDecodeError as error:
            self.nodes[node_id] = str(error)
            log.warning("unreadable coordinator registration znode=%s error=%s", path, error)
            self._repair_own(node_id, path, stat)

    def _read_leader(self, path: str) -> None:
        partition = self._leader_paths[path]
        try:
            data, _ = self.client.get(path, watch=self._on_watch)
        except NoNodeError:
            self.leaders.pop(partition, None)
            if self.client.exists(path, watch=self._on_watch) is not None:
                self._events.put(path)  # created in between: read it
            return
        try:
            self.leaders[partition] = layout.decode_partition_leader(path, data)[0]
        except ZnodeDecodeError:
            self.leaders.pop(partition, None)  # the election warns about it and keeps the partition blocked

    def _repair_own(self, node_id: int, path: str, stat) -> None:
        if self.own_registration is None or self.own_registration[0] != node_id:
            return
        if stat.ephemeralOwner != session_id(self.client):
            log.error("this node's registration znode=%s is unreadable and not this session's; not rewriting", path)
            return
        try:
            self.client.set_async(path, self.own_registration[1], version=stat.version).get(timeout=CALL_TIMEOUT_S)
        except (NoNodeError, BadVersionError):
            return  # changed again: its watch reads it again
        log.warning("rewrote this node's unreadable registration znode=%s", path)
