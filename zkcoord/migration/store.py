"""A group's migration state, its members' advertisements and its nodes' acknowledgements in ZooKeeper (IO around
``phases``).

The state znode is changed only by compare-and-set on its version, so two operators (or a rerun after a
crash) cannot overwrite each other's step. Works with any kazoo handler.
"""

import logging
from collections.abc import Callable

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from zkcoord.assign.legacy import thread_id
from zkcoord.migration.phases import (
    LegacyMember,
    MigrationState,
    MigrationStateError,
    NodeAck,
    decode_state,
    encode_state,
)
from zkcoord.zk import layout
from zkcoord.zk.admin import read_owners
from zkcoord.zk.layout import ZnodeDecodeError

log = logging.getLogger(__name__)

NO_VERSION = -1  # the state znode does not exist yet
BRIDGE_TRIES = 5  # teardowns of a bridge that nodes keep writing meanwhile, before giving up


class ConcurrentChangeError(MigrationStateError):
    """Someone else changed the group's migration state since it was read."""


def read_state(client: KazooClient, root: str, group: str) -> tuple[MigrationState | None, int]:
    """``(state, znode version)``; ``(None, NO_VERSION)`` for a group that never started migrating."""
    path = layout.migration_path(root, group)
    try:
        data, stat = client.get(path)
    except NoNodeError:
        return None, NO_VERSION
    return decode_state(path, data), stat.version


def write_state(client: KazooClient, root: str, group: str, state: MigrationState, version: int) -> int:
    """Store ``state`` if the znode is still at ``version`` (NO_VERSION: create it); returns the new version."""
    path = layout.migration_path(root, group)
    try:
        if version == NO_VERSION:
            client.create(path, encode_state(state), makepath=True)
            return 0
        return client.set(path, encode_state(state), version=version).version
    except (BadVersionError, NodeExistsError, NoNodeError):
        raise ConcurrentChangeError(
            f"the migration state of group {group} changed while this command ran; run it again"
        ) from None


def write_state_and_bridge(
    client: KazooClient, root: str, group: str, state: MigrationState, version: int, strategy: str | None
) -> int:
    """Store ``state`` (compare-and-set, as :func:`write_state`) and, in the same transaction, set the group's
    bridge up (``strategy``: the 0.8.2 assignment strategy of its legacy members) or, with None, tear it down:
    the bridge znode goes at the version read, with every registration and owner znode it lists, so a node
    that bridges the group meanwhile makes this fail rather than leave a member behind. A teardown that failed
    only on the bridge's side (a node took the bridge over under its epoch, or a member joined it) is read and
    tried again while the state is still at ``version``. Returns the new version.
    """
    for _ in range(BRIDGE_TRIES):
        results = _state_and_bridge_transaction(client, root, group, state, version, strategy)
        if results is None:  # no bridge to tear down
            return write_state(client, root, group, state, version)
        if not any(isinstance(result, Exception) for result in results):
            return results[-1].version
        if strategy is not None or isinstance(results[-1], BadVersionError):
            break  # the state changed, or the bridge was set up by someone else
    raise ConcurrentChangeError(
        f"the migration state or the mixed-group bridge of group {group} changed while this command ran; run it again"
    )


def _state_and_bridge_transaction(
    client: KazooClient, root: str, group: str, state: MigrationState, version: int, strategy: str | None
) -> list | None:
    """The results of one transaction of :func:`write_state_and_bridge` (the state's write last); None: there is
    no bridge to tear down."""
    path, bridge = layout.migration_path(root, group), layout.bridge_path(root, group)
    transaction = client.transaction()
    if strategy is not None:
        client.ensure_path(layout.bridge_groups_path(root))
        transaction.create(bridge, layout.encode_bridge_state(layout.BridgeState(strategy=strategy)))
    else:
        found = read_bridge_versioned(client, root, group)
        if found is None:
            return None
        held, bridge_version = found
        for path_to_drop in bridge_znodes(client, group, held):
            transaction.delete(path_to_drop)
        transaction.delete(bridge, version=bridge_version)
    transaction.set_data(path, encode_state(state), version=version)
    return transaction.commit()


def bridge_znodes(client: KazooClient, group: str, held: layout.BridgeState) -> list[str]:
    """The owner znodes naming a bridge member's thread, then the bridge members' registrations."""
    threads = {thread_id(cid, 0) for cid in held.consumer_ids}
    owners = [layout.owner_path(group, *tp) for tp, owner in read_owners(client, group).items() if owner in threads]
    registrations = [layout.consumer_path(group, cid) for cid in sorted(held.consumer_ids)]
    return owners + [path for path in registrations if client.exists(path)]


def read_bridge(client: KazooClient, root: str, group: str) -> layout.BridgeState | None:
    """The group's mixed-group bridge, or None when it has none (not in DUAL_WRITE)."""
    found = read_bridge_versioned(client, root, group)
    return None if found is None else found[0]


def read_bridge_versioned(client: KazooClient, root: str, group: str) -> tuple[layout.BridgeState, int] | None:
    """The group's bridge and its znode version (what a fenced write compares against), or None."""
    path = layout.bridge_path(root, group)
    try:
        data, stat = client.get(path)
    except NoNodeError:
        return None
    return layout.decode_bridge_state(path, data), stat.version


def watch_state(
    client: KazooClient,
    root: str,
    group: str,
    on_change: Callable[[MigrationState | None], None],
    on_unreadable: Callable[[MigrationStateError], None] | None = None,
) -> Callable[[], None]:
    """Call ``on_change`` with the group's state now and on every change (None: no state). Foreign data goes to
    ``on_unreadable``; without it, it is logged and treated as no state. Returns a function that ends the watch."""
    path = layout.migration_path(root, group)
    stopped = []

    def on_data(data, stat, event=None) -> bool:
        if stopped:
            return False
        state = None
        if data is not None:
            try:
                state = decode_state(path, data)
            except MigrationStateError as error:
                if on_unreadable is not None:
                    on_unreadable(error)
                    return True
                log.warning("ignoring foreign migration state group=%s: %s", group, error)
        on_change(state)
        return True

    client.DataWatch(path, on_data)
    return lambda: stopped.append(True)


def advertise(client: KazooClient, root: str, group: str, consumer_id: str, data: bytes) -> None:
    """Create or replace a legacy member's ephemeral advertisement (see ``layout.encode_legacy_advert``)."""
    _put_ephemeral(client, layout.legacy_advert_path(root, group, consumer_id), data)


def _put_ephemeral(client: KazooClient, path: str, data: bytes) -> None:
    """Replace the data of this session's ephemeral at ``path``, creating it if it does not exist; a concurrent
    writer (a node's watch acknowledging while a request starts a new watch) may create it between the two."""
    try:
        client.set(path, data)
    except NoNodeError:
        try:
            client.create(path, data, ephemeral=True, makepath=True)
        except NodeExistsError:
            client.set(path, data)


def live_legacy_members(client: KazooClient, root: str, group: str) -> list[LegacyMember]:
    """The group's registered 0.8.2 members, each with the phase epoch it advertises (pipelined reads); the
    registrations of a mixed group's coordinator members are not legacy members and are left out."""
    try:
        ids = sorted(client.get_children(layout.ids_path(group)))
    except NoNodeError:
        return []
    bridge = read_bridge(client, root, group)
    if bridge is not None:
        ids = [cid for cid in ids if cid not in bridge.consumer_ids]
    pending = [(cid, client.get_async(layout.legacy_advert_path(root, group, cid))) for cid in ids]
    members = []
    for consumer_id, reply in pending:
        try:
            data, _ = reply.get()
        except NoNodeError:
            members.append(LegacyMember(consumer_id))
            continue
        path = layout.legacy_advert_path(root, group, consumer_id)
        try:
            _, epoch = layout.decode_legacy_advert(path, data)
        except ZnodeDecodeError as error:
            log.warning("unreadable advertisement, treating the member as ZooKeeper-only: %s", error)
            members.append(LegacyMember(consumer_id))
            continue
        members.append(LegacyMember(consumer_id, advertised=True, epoch=epoch))
    return members


def write_node_ack(client: KazooClient, root: str, group: str, node_id: int, epoch: int) -> None:
    """Create or replace a coordinator node's ephemeral acknowledgement of the epoch it has applied."""
    _put_ephemeral(client, layout.node_ack_path(root, group, node_id), layout.encode_node_ack(epoch))


def node_acks(client: KazooClient, root: str, group: str) -> list[NodeAck]:
    """The coordinator nodes that cache the group's state, each with the epoch it acknowledged (pipelined).

    Read after a write of the state by the same session, this sees every acknowledgement created before
    that write: a ZooKeeper server answers a session's requests in order, after every earlier transaction."""
    try:
        ids = sorted(client.get_children(layout.node_acks_path(root, group)), key=lambda name: (len(name), name))
    except NoNodeError:
        return []
    pending = [(name, client.get_async(layout.node_ack_path(root, group, name))) for name in ids]
    acks = []
    for name, reply in pending:
        try:
            data, _ = reply.get()
        except NoNodeError:
            continue  # its session ended meanwhile
        path = layout.node_ack_path(root, group, name)
        try:
            acks.append(NodeAck(name, layout.decode_node_ack(path, data)))
        except ZnodeDecodeError as error:
            acks.append(NodeAck(name, unreadable=str(error)))
    return acks
