"""Where coordinator nodes are: ``bootstrap.servers`` as given, or discovered under zkcoord's ZooKeeper root.

Pure parsing plus one ZooKeeper read through a client the caller started (so a gevent or a threading
kazoo client both work).
"""

from collections.abc import Iterable

from kazoo.client import KazooClient

from zkcoord.errors import ConfigError
from zkcoord.zk.layout import DEFAULT_ROOT
from zkcoord.zk.nodes import read_nodes

Address = tuple[str, int]


def parse_bootstrap_servers(servers: str | Iterable[str]) -> list[Address]:
    """``"h1:9092,h2:9092"`` or ``["h1:9092", ...]`` → ``[("h1", 9092), ...]`` (IPv6 as ``[::1]:9092``)."""
    items = servers.split(",") if isinstance(servers, str) else list(servers)
    addresses = []
    for item in (text.strip() for text in items):
        if not item:
            continue
        host, separator, port = item.rpartition(":")
        if not separator or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(f"bootstrap.servers: {item!r} is not host:port")
        addresses.append((host.strip("[]"), int(port)))
    if not addresses:
        raise ConfigError("bootstrap.servers: no host:port given")
    return addresses


def discover_nodes(client: KazooClient, root: str = DEFAULT_ROOT) -> list[Address]:
    """The live coordinator nodes registered under ``root`` (ordered by node id)."""
    return [address for _, address in sorted(read_nodes(client, root).items())]
