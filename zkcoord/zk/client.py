"""Kazoo clients for tools: one block of work (arranging, checking or reading znodes), no session to keep."""

import contextlib
from collections.abc import Iterator

from kazoo.client import KazooClient

from zkcoord.zk.acl import kazoo_client, start_logged_in
from zkcoord.zk.credentials import UNSECURED, ZooKeeperSecurity


def tool_client(hosts: str, session_timeout_s: float = 10.0, security: ZooKeeperSecurity = UNSECURED) -> KazooClient:
    """An unstarted kazoo client on ``hosts`` (chroot included): every tool's ZooKeeper client is made here;
    ``security`` gives its login and ACLs (:mod:`zkcoord.zk.acl`)."""
    return kazoo_client(hosts, security, timeout=session_timeout_s)


@contextlib.contextmanager
def started_client(
    connect: str, timeout: float = 30.0, security: ZooKeeperSecurity = UNSECURED
) -> Iterator[KazooClient]:
    """A kazoo client on ``connect`` (chroot included), started for the block, then stopped and closed."""
    client = tool_client(connect, security=security)
    start_logged_in(client, security, timeout)
    try:
        yield client
    finally:
        client.stop()
        client.close()
