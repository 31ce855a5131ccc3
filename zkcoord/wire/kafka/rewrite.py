"""A gateway's rewrite of the broker addresses in forwarded answers, and where each upstream broker is served.

Clients must reach every broker through a zkcoord node, so every address an answer carries is replaced:
Metadata's and DescribeCluster's brokers (their ids kept, so partition leaders and ``controller_id`` stay
right), and FindCoordinator's transaction coordinators. Metadata and DescribeCluster also list the coordinator
nodes, under ids disjoint from the brokers', because clients only trust a coordinator that Metadata names.

Every node answers alike: upstream broker ``b`` (the ``i``-th in id order) is served by the ``i mod n``-th node
with a Kafka listener, at that node's gateway port for ``b``. So clients that ask different nodes see one
address per broker, and the brokers' traffic spreads over the nodes.

Pure: imports only zkcoord.wire.kafka and zkcoord.errors.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from zkcoord.errors import ErrorCode
from zkcoord.wire.kafka.entities import build, item_class, to_plain
from zkcoord.wire.kafka.frames import SIZE, array_bytes, read_array, response_array, response_schema
from zkcoord.wire.kafka.versions import DESCRIBE_CLUSTER, FIND_COORDINATOR, METADATA

Address = tuple[str, int]
# The answers that carry broker addresses (FindCoordinator's only for transactions: groups are answered here).
REWRITTEN = frozenset((METADATA, FIND_COORDINATOR, DESCRIBE_CLUSTER))


@dataclass(frozen=True)
class GatewayView:
    """What a node needs to rewrite: where each upstream broker and each coordinator node is reached."""

    brokers: Mapping[int, Address]  # upstream broker id → the gateway address clients use
    coordinators: Mapping[int, Address]  # coordinator id as Kafka clients see it → its Kafka listener

    def broker(self, broker_id: int) -> Address | None:
        return self.brokers.get(broker_id)


Listener = tuple[str, int, int, int]  # host, Kafka port, first gateway port, gateway ports


def gateway_view(
    broker_ids: Collection[int],
    listeners: Mapping[int, Listener],
    lowest_broker_id: int,
    coordinator_id_base: int,
    fronting: Mapping[int, Listener] | None = None,
) -> GatewayView:
    """The view from ``broker_ids`` and the nodes' ``listeners`` (node id → (host, port, first gateway port,
    gateway ports)); brokers are spread over ``fronting`` (default: every listener), coordinators are every
    listener. A broker whose id has no port in its node's range is left out."""
    fronting = listeners if fronting is None else fronting
    nodes = sorted(fronting)
    brokers = {}
    for index, broker_id in enumerate(sorted(broker_ids)):
        if nodes:
            host, _, gateway_port, count = fronting[nodes[index % len(nodes)]]
            if 0 <= broker_id - lowest_broker_id < count:
                brokers[broker_id] = (host, gateway_port + broker_id - lowest_broker_id)
    coordinators = {coordinator_id_base + node: listener[:2] for node, listener in sorted(listeners.items())}
    return GatewayView(brokers, coordinators)


def _with_coordinators(listed: list[dict], view: GatewayView, id_field: str) -> list[dict]:
    rewritten = []
    for broker in listed:
        address = view.broker(broker[id_field])
        if address is not None:
            rewritten.append({**broker, "host": address[0], "port": address[1]})
    known = {broker[id_field] for broker in rewritten}
    for node_id, (host, port) in sorted(view.coordinators.items()):
        if node_id not in known:
            rewritten.append({id_field: node_id, "host": host, "port": port, "rack": None, "is_fenced": False})
    return rewritten


def rewrite_response(api_key: int, response, view: GatewayView):
    """``response`` (of an API in :data:`REWRITTEN`) with every broker address replaced by the gateway's."""
    if api_key == METADATA:
        return _with_brokers_rewritten(response, view, "node_id")
    if api_key == DESCRIBE_CLUSTER:
        return _with_brokers_rewritten(response, view, "broker_id")
    plain = to_plain(response)
    if "coordinators" in plain:
        plain["coordinators"] = [_coordinator(each, view) for each in plain["coordinators"]]
    else:
        plain = _coordinator(plain, view)
    return build(type(response), plain)


def rewrite_metadata_frame(version: int, content, view: GatewayView) -> bytes:
    """A Metadata answer's frame (``content``: without its size) with its brokers rewritten as
    :func:`rewrite_response` rewrites them. Only the brokers are read and written again: what follows them (the
    topics, a partition each: hundreds in a large group's answer, asked by every member) is copied as it came."""
    schema = response_schema(METADATA, version)
    before = 4 if dataclasses.fields(schema)[0].name == "throttle_time" else 0  # an int32 before them from v3 on
    _, start, end = response_array(METADATA, version, content, before, item_class(schema, "brokers"))
    addresses = (tuple(sorted(view.brokers.items())), tuple(sorted(view.coordinators.items())))
    encoded = _gateway_brokers(version, bytes(content[start:end]), addresses)
    size = SIZE.pack(start + len(encoded) + len(content) - end)
    return b"".join((size, content[:start], encoded, content[end:]))


@functools.lru_cache(maxsize=64)
def _gateway_brokers(version: int, upstream: bytes, addresses: tuple) -> bytes:
    """The gateway's brokers array for the upstream one, both encoded: every member's answer has the same."""
    schema = response_schema(METADATA, version)
    broker_class = item_class(schema, "brokers")
    brokers, _ = read_array(upstream, 0, broker_class, schema.__flexible__)
    view = GatewayView(dict(addresses[0]), dict(addresses[1]))
    listed = _with_coordinators([to_plain(broker) for broker in brokers], view, "node_id")
    return array_bytes([build(broker_class, broker) for broker in listed], broker_class, schema.__flexible__)


def _with_brokers_rewritten(response, view: GatewayView, id_field: str):
    """Only the brokers are converted: Metadata's topics (a partition each, hundreds in a large group's answer,
    asked by every member) pass as they were read."""
    listed = _with_coordinators([to_plain(broker) for broker in response.brokers], view, id_field)
    broker_class = item_class(type(response), "brokers")
    return dataclasses.replace(response, brokers=tuple(build(broker_class, broker) for broker in listed))


def _coordinator(answer: dict, view: GatewayView) -> dict:
    if answer["error_code"]:
        return answer
    address = view.broker(answer["node_id"])
    if address is None:  # a broker no gateway port serves: its own address would lead the client past the gateway
        return {**answer, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE, "node_id": -1, "host": "", "port": -1}
    return {**answer, "host": address[0], "port": address[1]}
