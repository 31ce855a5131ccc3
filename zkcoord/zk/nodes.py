"""Coordinator nodes in ZooKeeper: each node's ephemeral registration under zkcoord's root, and the read of
the live ones (architecture.md "ZooKeeper use", group-coordinator §9.6).

kazoo runs with ``SequentialGeventHandler``: create :class:`NodeRegistry` on the hub the client runs on.
:func:`read_nodes` works with any kazoo handler. Must not import the log, the runtime or the server.
"""

import logging

import gevent
import gevent.event
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    BadVersionError,
    ConnectionClosedError,
    ConnectionLoss,
    NodeExistsError,
    NoNodeError,
    SessionExpiredError,
)

from zkcoord.errors import ConfigError
from zkcoord.model import Address
from zkcoord.zk import layout
from zkcoord.zk.layout import DEFAULT_ROOT, ZnodeDecodeError

log = logging.getLogger(__name__)

CALL_TIMEOUT_S = 30.0  # ZooKeeper calls of the workers; a lost connection interrupts them sooner
RETRY_DELAY_S = 1.0
DISCONNECTED = (ConnectionLoss, SessionExpiredError, ConnectionClosedError)


def read_nodes(client: KazooClient, root: str = DEFAULT_ROOT) -> dict[int, tuple[str, int]]:
    """``{node_id: (host, port)}`` of the live coordinator nodes; registrations that cannot be read are skipped."""
    try:
        children = client.get_children(layout.coordinator_nodes_path(root))
    except NoNodeError:
        return {}
    ids = sorted(int(child) for child in children if child.isdigit())
    pending = {node_id: client.get_async(layout.coordinator_node_path(root, node_id)) for node_id in ids}
    nodes = {}
    for node_id, result in pending.items():
        path = layout.coordinator_node_path(root, node_id)
        try:
            data, _ = result.get(timeout=CALL_TIMEOUT_S)
            nodes[node_id] = layout.decode_coordinator_node(path, data)
        except NoNodeError:
            continue
        except ZnodeDecodeError as error:
            log.warning("skipping an unreadable coordinator registration error=%s", error)
    return nodes


class NodeRegistry:
    """This node's ephemeral registration, ``{"version":1,"host":..,"port":..}``, kept across session loss."""

    def __init__(self, client: KazooClient, root: str, node_id: int, host: str, port: int):
        self.client = client
        self.root = root
        self.node_id = node_id
        self.path = layout.coordinator_node_path(root, node_id)
        self._data = layout.encode_coordinator_node(host, port)
        self._wake = gevent.event.Event()
        self._worker: gevent.Greenlet | None = None
        self._stopped = False

    def register(self) -> None:
        """Register now, and again after every reconnect; ConfigError if another live session holds this node id."""
        self._stopped = False
        self._register()
        self.client.add_listener(self._on_state)
        self._worker = gevent.spawn(self._run)

    def stop(self) -> None:
        """Stop re-registering and remove the registration (the session's end would remove it too)."""
        self._stopped = True
        self.client.remove_listener(self._on_state)
        if self._worker is not None:
            self._worker.kill()
            self._worker = None
        if self.client.connected:
            try:
                _, stat = self.client.get(self.path)
                if stat.ephemeralOwner == session_id(self.client):
                    self.client.delete(self.path, version=stat.version)
            except (NoNodeError, BadVersionError, *DISCONNECTED):
                pass

    def nodes(self) -> dict[int, tuple[str, int]]:
        """``{node_id: (host, port)}`` of every live coordinator node."""
        return read_nodes(self.client, self.root)

    def _on_state(self, state: str) -> None:
        if state == KazooState.CONNECTED:
            self._wake.set()

    def _run(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            if self._stopped:
                return
            try:
                self._register()
            except DISCONNECTED:
                continue  # the next CONNECTED wakes us
            except ConfigError as error:
                log.error("cannot register again, retrying node=%d: %s", self.node_id, error)
                gevent.sleep(RETRY_DELAY_S)
                self._wake.set()
            except Exception:
                log.exception("registering failed, retrying node=%d", self.node_id)
                gevent.sleep(RETRY_DELAY_S)
                self._wake.set()

    def _register(self) -> None:
        while True:
            try:
                self.client.create(self.path, self._data, ephemeral=True, makepath=True)
                log.info("registered coordinator node=%d path=%s", self.node_id, self.path)
                return
            except NodeExistsError:
                pass
            try:
                _, stat = self.client.get(self.path)
            except NoNodeError:
                continue
            if stat.ephemeralOwner == session_id(self.client):
                return
            raise ConfigError(
                f"coordinator node id {self.node_id} is already registered at {self.path} by another live "
                "session; give every node its own id"
            )


def session_id(client: KazooClient) -> int | None:
    """The client's current session id (None before it first connects): the owner of its ephemeral znodes."""
    client_id = client.client_id
    return client_id[0] if client_id else None


def discover_nodes(client: KazooClient, root: str = DEFAULT_ROOT) -> list[Address]:
    """The live coordinator nodes registered under ``root`` (ordered by node id)."""
    return [address for _, address in sorted(read_nodes(client, root).items())]
