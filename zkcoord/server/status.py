"""``zkcoord coordinator status``: the cluster as ZooKeeper and each node see it.

ZooKeeper tells which nodes are registered and which node leads each offsets partition at which epoch;
each node answers ListGroups over the wire protocol with its groups and whether it is still loading.
"""

from __future__ import annotations

import socket

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from zkcoord.channel import WireConnection
from zkcoord.errors import ErrorCode, ZkcoordError
from zkcoord.zk import layout
from zkcoord.zk.leader_znodes import read_leaders
from zkcoord.zk.nodes import read_nodes


def cluster_status(
    client: KazooClient,
    root: str = layout.DEFAULT_ROOT,
    timeout: float = 5.0,
    create_connection=socket.create_connection,
) -> dict:
    """Nodes (address, partitions led, loading, groups) and partitions (leader, epoch) as plain data; nodes are
    reached with ``create_connection`` (with TLS and SASL: :meth:`ClientSecurity.connector`)."""
    nodes = {
        node_id: {"node_id": node_id, "host": host, "port": port, "partitions": 0}
        for node_id, (host, port) in read_nodes(client, root).items()
    }
    try:
        count = layout.decode_offsets_config(
            layout.offsets_config_path(root), client.get(layout.offsets_config_path(root))[0]
        )
    except NoNodeError:
        count = 0
    leaders = read_leaders(client, root, count)
    partitions = []
    for partition in range(count):
        leader, epoch = leaders.get(partition, (None, None))
        partitions.append({"partition": partition, "leader": leader, "epoch": epoch})
        if leader in nodes:
            nodes[leader]["partitions"] += 1
    for node in nodes.values():
        node.update(loading=None, groups=None, error="")
        try:
            with WireConnection(
                node["host"], node["port"], timeout=timeout, create_connection=create_connection
            ) as connection:
                response = connection.call("ListGroups", states_filter=[])
            node["loading"] = response["error_code"] == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
            node["groups"] = len(response["groups"])
        except (OSError, ZkcoordError) as exc:
            node["error"] = f"{type(exc).__name__}: {exc}"
    return {"nodes": list(nodes.values()), "partitions": partitions, "offsets_partitions": count}
