"""A plain (threading) kazoo client for one block of work: arranging, checking or reading znodes."""

import contextlib
from collections.abc import Iterator

from kazoo.client import KazooClient

from zkcoord.zk.acl import kazoo_client, start_logged_in
from zkcoord.zk.credentials import UNSECURED, ZooKeeperSecurity


@contextlib.contextmanager
def started_client(
    connect: str, timeout: float = 30.0, security: ZooKeeperSecurity = UNSECURED
) -> Iterator[KazooClient]:
    """A kazoo client on ``connect`` (chroot included), started for the block, then stopped and closed."""
    client = kazoo_client(connect, security)
    start_logged_in(client, security, timeout)
    try:
        yield client
    finally:
        client.stop()
        client.close()
