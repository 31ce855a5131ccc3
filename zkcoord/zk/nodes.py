"""Coordinator nodes in ZooKeeper: each node's ephemeral registration under zkcoord's root, and the read of
the live ones (architecture.md "ZooKeeper use", group-coordinator §9.6).

kazoo runs with ``SequentialGeventHandler``: create :class:`NodeRegistry` on the hub the client runs on.
:func:`read_nodes` works with any kazoo handler. Must not import the log, the runtime or the server.
"""

import enum
import logging
import time

import gevent
import gevent.event
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    BadVersionError,
    ConnectionClosedError,
    ConnectionLoss,
    NoNodeError,
    SessionExpiredError,
)

from zkcoord.errors import ConfigError
from zkcoord.model import Address
from zkcoord.zk import layout
from zkcoord.zk.ephemeral import create_ephemeral, wait_for_owner_to_go
from zkcoord.zk.layout import DEFAULT_ROOT, ZnodeDecodeError

log = logging.getLogger(__name__)

CALL_TIMEOUT_S = 30.0  # ZooKeeper calls of the workers; a lost connection interrupts them sooner
RETRY_DELAY_S = 1.0
DISCONNECTED = (ConnectionLoss, SessionExpiredError, ConnectionClosedError)
# ZooKeeper expires a session between one timeout and one tick after it last heard from it; a tick is at most
# half the timeout (minSessionTimeout is two ticks).
EXPIRY_MARGIN = 1.5


class RegistrationHolder(enum.Enum):
    """Who holds a node id's registration, as :func:`judge_registration` sees it."""

    THIS_SESSION = "this session"
    PREVIOUS_SESSION = "a previous session of this node"  # same identity: its process is gone
    OTHER_PROCESS = "another live process"


def judge_registration(
    held_identity: str | None, held_owner: int, identity: str | None, session: int | None
) -> RegistrationHolder:
    """Whether the registration in the way is ours, our previous incarnation's, or another process's.

    The identity is that of the node's log directory, which one process at a time holds
    (:mod:`zkcoord.server.identity`); a registration without one is never taken for our own.
    """
    if session is not None and held_owner == session:
        return RegistrationHolder.THIS_SESSION
    if identity is not None and held_identity == identity:
        return RegistrationHolder.PREVIOUS_SESSION
    return RegistrationHolder.OTHER_PROCESS


def previous_session_wait_s(session_timeout_ms: int) -> float:
    """How long a restarted node waits for the registration of its previous session to expire."""
    return session_timeout_ms * EXPIRY_MARGIN / 1000.0


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
    """This node's ephemeral registration, ``{"version":1,"host":..,"port":..,"identity":..}``, kept across
    session loss.

    A registration left by a previous session of this node (same ``identity``: the process was killed and
    restarted at once) is waited for, up to ``previous_session_wait_s``, until ZooKeeper expires it; one of
    another process is refused. Without an identity every other session's registration is refused.
    """

    def __init__(
        self,
        client: KazooClient,
        root: str,
        node_id: int,
        host: str,
        port: int,
        identity: str | None = None,
        previous_session_wait_s: float = 0.0,
        kafka: layout.KafkaListenerAddress | None = None,
    ):
        self.client = client
        self.root = root
        self.node_id = node_id
        self.path = layout.coordinator_node_path(root, node_id)
        self.identity = identity
        self.previous_session_wait_s = previous_session_wait_s
        self.data = layout.encode_coordinator_node(host, port, identity, kafka)  # what the registration holds
        self._wake = gevent.event.Event()
        self._worker: gevent.Greenlet | None = None
        self._stopped = False

    def register(self) -> None:
        """Register now (waiting for a previous session of this node to expire), and again after every reconnect;
        ConfigError if another live process holds this node id."""
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
            holder = create_ephemeral(self.client, self.path, self.data)
            if holder is None:
                log.info("registered coordinator node=%d path=%s", self.node_id, self.path)
                return
            try:
                held_identity = layout.decode_coordinator_node_identity(self.path, holder.data)
            except ZnodeDecodeError:
                held_identity = None
            verdict = judge_registration(held_identity, holder.owner, self.identity, session_id(self.client))
            if verdict is RegistrationHolder.THIS_SESSION:
                return
            if verdict is RegistrationHolder.OTHER_PROCESS:
                raise ConfigError(
                    f"coordinator node id {self.node_id} is already registered at {self.path} by another live "
                    f"process (registration {holder.data.decode('utf-8', 'replace')}); give every node its own id"
                )
            self._wait_for_previous_session(holder.owner)

    def _wait_for_previous_session(self, owner: int) -> None:
        """ZooKeeper deletes the registration when the dead process's session expires; ConfigError if it lasts."""
        log.warning(
            "waiting up to %g s for the registration of node %d by a previous session of this node to expire "
            "path=%s session=0x%x",
            self.previous_session_wait_s,
            self.node_id,
            self.path,
            owner,
        )
        started = time.monotonic()
        if not wait_for_owner_to_go(self.client, self.path, owner, self.previous_session_wait_s):
            raise ConfigError(
                f"coordinator node id {self.node_id} is still registered at {self.path} by session 0x{owner:x} "
                f"of this node's log directory after {self.previous_session_wait_s:g} s; is the previous "
                "process still running elsewhere, or was it configured with a longer zookeeper.session.timeout.ms?"
            )
        log.info(
            "the previous session's registration expired node=%d after %.1f s",
            self.node_id,
            time.monotonic() - started,
        )


def session_id(client: KazooClient) -> int | None:
    """The client's current session id (None before it first connects): the owner of its ephemeral znodes."""
    client_id = client.client_id
    return client_id[0] if client_id else None


def discover_nodes(client: KazooClient, root: str = DEFAULT_ROOT) -> list[Address]:
    """The live coordinator nodes registered under ``root`` (ordered by node id)."""
    return [address for _, address in sorted(read_nodes(client, root).items())]
