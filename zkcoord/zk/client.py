"""Kazoo clients for tools: one block of work (arranging, checking or reading znodes), no session to keep."""

import contextlib
from collections.abc import Iterator

from kazoo.client import KazooClient


def tool_client(hosts: str, session_timeout_s: float = 10.0) -> KazooClient:
    """An unstarted kazoo client on ``hosts`` (chroot included): every tool's ZooKeeper client is made here."""
    return KazooClient(hosts=hosts, timeout=session_timeout_s)


@contextlib.contextmanager
def started_client(connect: str, timeout: float = 30.0) -> Iterator[KazooClient]:
    """A kazoo client on ``connect`` (chroot included), started for the block, then stopped and closed."""
    client = tool_client(connect)
    client.start(timeout=timeout)
    try:
        yield client
    finally:
        client.stop()
        client.close()
