"""Creating an ephemeral znode that an earlier session of the same process or node may still hold.

ZooKeeper keeps a dead session's ephemerals until the session expires, so a restart finds its own
previous znode in the way. :func:`create_ephemeral` makes one try and says who holds the znode;
the caller judges whether that holder is itself (0.8.2's consumer compares the data, a coordinator node
its identity) and may then :func:`wait_for_owner_to_go`. Works with any kazoo handler.
"""

import time
from typing import NamedTuple

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError


class Holder(NamedTuple):
    """The znode that was in the way: its data and its owner's session id."""

    data: bytes
    owner: int


def create_ephemeral(client: KazooClient, path: str, data: bytes) -> Holder | None:
    """Create ``path`` (and its parents) with ``data``; None if created, else who holds it now."""
    while True:
        try:
            client.create(path, data, ephemeral=True, makepath=True)
            return None
        except NodeExistsError:
            pass
        try:
            held, stat = client.get(path)
        except NoNodeError:
            continue  # its session ended meanwhile: try again
        return Holder(held, stat.ephemeralOwner)


def wait_for_owner_to_go(client: KazooClient, path: str, owner: int, timeout_s: float) -> bool:
    """Until ``path`` is no longer held by session ``owner`` (a watch wakes us); False after ``timeout_s``."""
    changed = client.handler.event_object()
    deadline = time.monotonic() + timeout_s

    def on_change(_event) -> None:
        changed.set()

    while True:
        changed.clear()
        stat = client.exists(path, watch=on_change)
        if stat is None or stat.ephemeralOwner != owner:
            return True
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        changed.wait(remaining)
