"""Coordinator node processes on a real ZooKeeper, and a retrying wire-protocol client for them (tests only).

A :class:`Cluster` runs ``zkcoord coordinator start`` processes (bound to 127.0.0.1, each logging to its own
file) and kills whatever is still running when it is closed. A :class:`GroupClient` speaks the wire protocol
through ``wire_client.WireClient`` as a real client would: FindCoordinator on any live node, then the
coordinator; COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR and a dead connection
mean "look the coordinator up again and retry" (wire-protocol.md §5), until a deadline.

Placement and ZooKeeper reads follow the documents (wire-protocol.md §6, zkcoord/zk/layout.py).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path

import msgpack
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from wire_client import WireClient

from zkcoord.testing.node_process import STARTUP_SECONDS, NodeProcess
from zkcoord.zk import layout

ROOT = layout.DEFAULT_ROOT
RETRIABLE = frozenset({14, 15, 16})  # look the coordinator up again (wire-protocol.md §5)


def eventually(check: Callable[[], object], timeout: float, what: str, interval: float = 0.05) -> object:
    """Poll ``check`` until it returns a true value; AssertionError naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


# ---- placement (wire-protocol.md §6) ----------------------------------------------------------------------


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode``: over UTF-16 code units, 32-bit overflow."""
    data = text.encode("utf-16-be")
    value = 0
    for index in range(0, len(data), 2):
        value = (31 * value + int.from_bytes(data[index : index + 2], "big")) & 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def group_partition(group: str, num_partitions: int) -> int:
    value = java_string_hash(group)
    return (0 if value == -(1 << 31) else abs(value)) % num_partitions


# ---- ZooKeeper, as zkcoord lays it out --------------------------------------------------------------------


def read_leaders(zk: KazooClient, num_partitions: int) -> dict[int, tuple[int, int]]:
    """``{partition: (leader node id, epoch)}`` for the partitions that have a leader now."""
    leaders = {}
    for partition in range(num_partitions):
        path = layout.partition_leader_path(ROOT, partition)
        try:
            data, _ = zk.get(path)
        except NoNodeError:
            continue
        leaders[partition] = layout.decode_partition_leader(path, data)
    return leaders


def registered_nodes(zk: KazooClient) -> list[int]:
    try:
        return sorted(int(child) for child in zk.get_children(layout.coordinator_nodes_path(ROOT)))
    except NoNodeError:
        return []


def preferred_layout(node_ids: list[int], num_partitions: int) -> dict[int, int]:
    """``{partition: node}`` once the election settles: ``sorted(live ids)[p % len(live ids)]``."""
    ids = sorted(node_ids)
    return {partition: ids[partition % len(ids)] for partition in range(num_partitions)}


# ---- the consumer protocol (wire-protocol.md §4), built from the document ----------------------------------


def subscription(topics: list[str]) -> bytes:
    return msgpack.packb({"version": 0, "topics": topics, "user_data": None, "owned_partitions": []})


def assignment(partitions: dict[str, list[int]]) -> bytes:
    assigned = [{"topic": topic, "partitions": numbers} for topic, numbers in sorted(partitions.items())]
    return msgpack.packb({"version": 0, "assigned_partitions": assigned, "user_data": None})


# ---- node processes -----------------------------------------------------------------------------------------


class Cluster:
    """Coordinator nodes sharing ``log_dir``; :meth:`close` kills every one still running."""

    def __init__(self, zk_connect: str, log_dir: Path, workdir: Path, overrides: dict):
        self.zk_connect = zk_connect
        self.log_dir = log_dir
        self.workdir = workdir
        self.overrides = overrides
        self.nodes: dict[int, NodeProcess] = {}
        self._on_close: list[Callable[[], None]] = []
        self.num_partitions = int(overrides["offsets.topic.num.partitions"])

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def start(self, node_ids: list[int]) -> None:
        for node_id in node_ids:  # all at once, then wait: start-up costs overlap
            self.nodes[node_id] = NodeProcess(node_id, self.zk_connect, self.log_dir, self.overrides, self.workdir)
        for node_id in node_ids:
            self.nodes[node_id].wait_serving()

    def live_ids(self) -> list[int]:
        return sorted(node_id for node_id, node in self.nodes.items() if node.alive())

    def addresses(self) -> dict[int, tuple[str, int]]:
        """Bootstrap addresses of every node started (dead ones included: a client cannot know)."""
        return {node_id: node.address for node_id, node in self.nodes.items() if node.port is not None}

    def node_at(self, address: tuple[str, int]) -> int | None:
        return next((node_id for node_id, known in self.addresses().items() if known == tuple(address)), None)

    def wait_balanced(self, zk: KazooClient, timeout: float = STARTUP_SECONDS) -> dict[int, tuple[int, int]]:
        """Until every partition is led by its preferred live node and no node is still loading."""
        live = self.live_ids()
        wanted = preferred_layout(live, self.num_partitions)

        def settled():
            if registered_nodes(zk) != live:
                return None
            leaders = read_leaders(zk, self.num_partitions)
            if {p: leader[0] for p, leader in leaders.items()} != wanted:
                return None
            for node_id in live:
                with contextlib.suppress(OSError), WireClient(*self.nodes[node_id].address, timeout=2) as client:
                    if client.call("ListGroups", states_filter=[], receive_timeout=2)["error_code"] == 0:
                        continue
                return None  # loading, or not answering
            return leaders

        try:
            return eventually(settled, timeout, f"partition leaders {wanted} and no node loading")
        except AssertionError as error:
            leaders = read_leaders(zk, self.num_partitions)
            raise AssertionError(f"{error}\nleaders now: {leaders}\n{self.logs()}") from None

    def logs(self, chars: int = 3000) -> str:
        return "\n".join(f"--- node {n} log tail ---\n{node.log_tail(chars)}" for n, node in sorted(self.nodes.items()))

    def on_close(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` (e.g. close a client) when the cluster closes, before its nodes are killed."""
        self._on_close.append(callback)

    def close(self) -> None:
        try:
            for callback in self._on_close:
                callback()
        finally:
            for node in self.nodes.values():
                node.close()


# ---- a client that finds the coordinator and retries -------------------------------------------------------


class Retry(Exception):
    """This answer means "find the coordinator again and retry"."""


def top_level_retriable(response: dict) -> bool:
    return response.get("error_code") in RETRIABLE


def commit_retriable(response: dict) -> bool:
    """OffsetCommit has no top-level error: a coordinator problem shows on every partition."""
    codes = {p["error_code"] for t in response["topics"] for p in t["partitions"]}
    return bool(codes) and codes <= RETRIABLE


class GroupClient:
    """Wire connections of one thread, by address; requests go to the group's coordinator of the moment."""

    def __init__(self, bootstrap: Callable[[], dict[int, tuple[str, int]]], timeout: float = 5.0):
        self.bootstrap = bootstrap
        self.timeout = timeout
        self._connections: dict[tuple[str, int], WireClient] = {}

    def close(self) -> None:
        for connection in self._connections.values():
            connection.close()
        self._connections.clear()

    def connection(self, address: tuple[str, int]) -> WireClient:
        address = tuple(address)
        if address not in self._connections:
            self._connections[address] = WireClient(*address, timeout=self.timeout)
        return self._connections[address]

    def drop(self, address: tuple[str, int]) -> None:
        connection = self._connections.pop(tuple(address), None)
        if connection is not None:
            connection.close()

    def call_at(self, address: tuple[str, int], api: str, **fields) -> dict:
        """One request to ``address``; a dead or hung connection is dropped and raised as :class:`Retry`."""
        try:
            return self.connection(address).call(api, receive_timeout=self.timeout, **fields)
        except (OSError, ConnectionError, TimeoutError) as error:
            self.drop(address)
            raise Retry(f"{api} to {address}: {type(error).__name__}: {error}") from error

    def find_coordinator(self, group: str) -> tuple[str, int]:
        """Ask the bootstrap nodes in turn; Retry if none names a coordinator."""
        problems = []
        for address in self.bootstrap().values():
            try:
                response = self.call_at(address, "FindCoordinator", key=group, key_type=0)
            except Retry as error:
                problems.append(str(error))
                continue
            if response["error_code"] == 0:
                return response["host"], response["port"]
            problems.append(f"FindCoordinator at {address}: {response}")
        raise Retry("; ".join(problems))

    def call(
        self,
        group: str,
        api: str,
        deadline: float,
        retriable: Callable[[dict], bool] = top_level_retriable,
        **fields,
    ) -> tuple[dict, tuple[str, int]]:
        """Send to the group's coordinator until the answer is not retriable; (response, coordinator address)."""
        last = "nothing tried"
        while True:
            try:
                address = self.find_coordinator(group)
                response = self.call_at(address, api, **fields)
                if not retriable(response):
                    return response, address
                last = f"{api} at {address}: {response}"
            except Retry as error:
                last = str(error)
            if time.monotonic() > deadline:
                raise AssertionError(f"{api} for {group} not answered by a coordinator in time; last: {last}")
            time.sleep(0.05)
