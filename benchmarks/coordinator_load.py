"""Processes for benchmarks/coordinator.py: the coordinator node under test and the load generators.

``python benchmarks/coordinator_load.py serve ...`` runs one coordinator node as ``zkcoord coordinator start``
does (:class:`~zkcoord.server.node.CoordinatorNode` from :func:`~zkcoord.server.config.node_config`, SIGTERM
stops it gracefully), and prints ``coordinator node N serving on HOST:PORT``, after ``coordinator node N kafka
listener on HOST:PORT`` when its settings ask for a Kafka listener (``listeners``). Two extra signals serve the
benchmark: SIGUSR1 prints one JSON line of the node's counters (CPU seconds, fsyncs, requests, timers), SIGUSR2
starts cProfile and, the second time, stops it and writes the stats to ``--profile``. The counters include the
longest time the gevent hub was kept from waking a 10 ms sleep since the previous SIGUSR1.

Every other function here is the body of a load-generator process started with multiprocessing (spawn): it
connects, sets up, reports ``("ready", info)`` on its outbox, waits for ``("go", start_at, end_at)`` (times of
``time.monotonic``, which is one clock for every process of the machine), counts what completes inside that
window, and reports ``("result", ...)``. Clients are gevent greenlets on gevent sockets (no monkey-patching),
members follow the real group protocol (wire-protocol.md §3, §4). The heartbeat and commit loads connect as
their ``security`` parameter says (Kafka client properties, as a ``--command-config`` file holds them: TLS, SASL),
plaintext without it.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import queue
import signal
import struct
import sys
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable

import gevent
import gevent.event
import msgpack
from gevent import socket as gsocket

from zkcoord.model import TopicPartition
from zkcoord.security.client import ClientSecurity, Connect
from zkcoord.wire.consumer_protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)

_LENGTH = struct.Struct(">I")
REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, MEMBER_ID_REQUIRED = 27, 22, 25, 79
RETRIABLE_COORDINATOR = (14, 15, 16)


def frame(api: str, correlation_id: int, **fields) -> bytes:
    body = msgpack.packb(
        {"api": api, "api_version": 0, "correlation_id": correlation_id, "client_id": "bench", **fields},
        use_bin_type=True,
    )
    return _LENGTH.pack(len(body)) + body


def connector(params: dict) -> Connect:
    """A gevent ``create_connection`` that sets up TLS and SASL as ``params["security"]`` says (plaintext without)."""
    return ClientSecurity.from_properties(params.get("security", {})).connector(gsocket.create_connection)


def unpack(frame: bytearray) -> dict:
    return msgpack.unpackb(frame, raw=False)


class Connection:
    """One connection on gevent sockets: ``call`` one request at a time, or ``send``/``read_some`` pipelined.

    ``decode`` turns each response frame (after its 4-byte size) into what ``read_some`` returns: msgpack's map,
    or for Kafka's protocol (the same framing) ``bytes``, the frame itself."""

    def __init__(
        self,
        address: tuple[str, int],
        connect: Connect = gsocket.create_connection,
        decode: Callable[[bytearray], object] = unpack,
    ):
        self.sock = connect(address, timeout=60)
        self.sock.setsockopt(gsocket.IPPROTO_TCP, gsocket.TCP_NODELAY, 1)
        self._buffer = bytearray()
        self._correlation = 0
        self._decode = decode

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_some(self) -> list:
        """Every complete response in the buffer after at least one more recv (blocks until one is complete)."""
        responses: list[dict] = []
        while not responses:
            data = self.sock.recv(262144)
            if not data:
                raise ConnectionError("the coordinator closed the connection")
            buffer = self._buffer
            buffer += data
            position, size = 0, len(buffer)
            while size - position >= 4:
                (length,) = _LENGTH.unpack_from(buffer, position)
                end = position + 4 + length
                if end > size:
                    break
                responses.append(self._decode(buffer[position + 4 : end]))
                position = end
            del buffer[:position]
        return responses

    def call(self, api: str, **fields) -> dict:
        self._correlation += 1
        self.send(frame(api, self._correlation, **fields))
        (response,) = self.read_some()
        if response.get("correlation_id") != self._correlation:
            raise RuntimeError(f"{api}: correlation id {response.get('correlation_id')} != {self._correlation}")
        return response

    def close(self) -> None:
        self.sock.close()


def run_drivers(driver, connections: int) -> tuple[int, Counter, float]:
    """Run ``driver(i)`` for each connection on its own greenlet; total count, error codes and CPU seconds."""
    cpu = process_cpu()
    greenlets = [gevent.spawn(driver, i) for i in range(connections)]
    gevent.joinall(greenlets, raise_error=True)
    cpu = process_cpu() - cpu
    errors: Counter = Counter()
    for greenlet in greenlets:
        errors.update(greenlet.value[1])
    return sum(greenlet.value[0] for greenlet in greenlets), errors, cpu


def pump(
    conn: Connection,
    make_frame: Callable[[int], bytes],
    check: Callable[[dict], int],
    depth: int,
    start_at: float,
    end_at: float,
) -> tuple[int, Counter]:
    """Keep ``depth`` requests in flight on ``conn`` until ``end_at``; responses arriving in the window count.

    Returns (responses counted, error codes seen over the whole run). Requests freed by one read are sent back as
    one write, so the client spends one system call per batch, not per request.
    """
    sent = counted = 0
    errors: Counter = Counter()
    conn.send(b"".join(make_frame(i) for i in range(depth)))
    sent = outstanding = depth
    while outstanding:
        responses = conn.read_some()
        now = time.monotonic()
        done = len(responses)
        outstanding -= done
        for response in responses:
            code = check(response)
            if code:
                errors[code] += 1
        if start_at <= now < end_at:
            counted += done
        if now < end_at:
            conn.send(b"".join(make_frame(sent + k) for k in range(done)))
            sent += done
            outstanding += done
    return counted, errors


# ---- members ------------------------------------------------------------------------------------------------


def range_assign(members: list[dict], partitions: dict[str, int]) -> list[dict]:
    """Kafka's RangeAssignor over the JoinGroup members: per topic, members sorted by id take contiguous ranges."""
    subscribed: dict[str, list[str]] = {}
    for member in members:
        for topic in decode_subscription(member["metadata"]).topics:
            subscribed.setdefault(topic, []).append(member["member_id"])
    owned: dict[str, list[TopicPartition]] = {member["member_id"]: [] for member in members}
    for topic, consumers in subscribed.items():
        consumers.sort()
        count = partitions.get(topic, 0)
        per, extra = divmod(count, len(consumers))
        for index, member_id in enumerate(consumers):
            start = index * per + min(index, extra)
            length = per + (1 if index < extra else 0)
            owned[member_id].extend(TopicPartition(topic, p) for p in range(start, start + length))
    return [
        {"member_id": member_id, "assignment": encode_assignment(Assignment(tuple(tps)))}
        for member_id, tps in owned.items()
    ]


class Member:
    """A consumer of the classic protocol on its own connection: join (79 → rejoin with the id), the leader assigns
    by range, everyone syncs; then heartbeats every ``interval_ms`` and rejoins on 27/22 (25: as a new member)."""

    def __init__(
        self,
        address: tuple[str, int],
        group: str,
        topics: dict[str, int],
        session_timeout_ms: int,
        interval_ms: int,
        rebalance_timeout_ms: int = 60_000,
        on_synced: Callable[[Member], None] | None = None,
        connect: Connect = gsocket.create_connection,
    ):
        self.conn = Connection(address, connect)
        self.group = group
        self.topics = topics
        self.session_timeout_ms = session_timeout_ms
        self.interval = interval_ms / 1000
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.on_synced = on_synced
        self.member_id = ""
        self.generation = -1
        self.is_leader = False
        self.assignment: tuple[TopicPartition, ...] | None = None
        self.joined_at = self.synced_at = self.next_heartbeat = 0.0
        self.first_join_at: float | None = None  # its very first JoinGroup (a newcomer's trigger)
        self.rejoin_sent_at: float | None = None  # when it last sent a JoinGroup because of a rebalance
        self.leave = gevent.event.Event()
        self.left_at: float | None = None
        self.unexpected: Counter = Counter()
        self.metadata = encode_subscription(Subscription(tuple(sorted(topics))))

    def join(self) -> None:
        """JoinGroup and SyncGroup until synced; then the heartbeat timer restarts (Kafka resets it too)."""
        self.joined_at = time.monotonic()
        if self.first_join_at is None:
            self.first_join_at = self.joined_at
        while True:
            response = self.conn.call(
                "JoinGroup",
                group_id=self.group,
                session_timeout_ms=self.session_timeout_ms,
                rebalance_timeout_ms=self.rebalance_timeout_ms,
                member_id=self.member_id,
                group_instance_id=None,
                protocol_type="consumer",
                protocols=[{"name": "range", "metadata": self.metadata}],
            )
            code = response["error_code"]
            if code == MEMBER_ID_REQUIRED:
                self.member_id = response["member_id"]
                continue
            if code == UNKNOWN_MEMBER_ID:
                self.member_id = ""
                continue
            if code:
                self.unexpected[f"JoinGroup {code}"] += 1
                gevent.sleep(0.05 if code in RETRIABLE_COORDINATOR else 0.2)
                continue
            generation = response["generation_id"]
            self.is_leader = response["leader"] == self.member_id
            assignments = range_assign(response["members"], self.topics) if self.is_leader else []
            sync = self.conn.call(
                "SyncGroup",
                group_id=self.group,
                generation_id=generation,
                member_id=self.member_id,
                group_instance_id=None,
                protocol_type="consumer",
                protocol_name="range",
                assignments=assignments,
            )
            code = sync["error_code"]
            if code:
                if code not in (REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION):
                    self.unexpected[f"SyncGroup {code}"] += 1
                if code == UNKNOWN_MEMBER_ID:
                    self.member_id = ""
                continue
            self.generation = generation
            self.assignment = decode_assignment(sync["assignment"]).assigned_partitions
            self.synced_at = time.monotonic()
            self.next_heartbeat = self.synced_at + self.interval
            if self.on_synced is not None:
                self.on_synced(self)
            return

    def heartbeat(self) -> int:
        return self.conn.call(
            "Heartbeat",
            group_id=self.group,
            generation_id=self.generation,
            member_id=self.member_id,
            group_instance_id=None,
        )["error_code"]

    def run(self) -> None:
        """Join, then heartbeat on schedule until asked to leave."""
        self.join()
        while True:
            if self.leave.wait(max(0.0, self.next_heartbeat - time.monotonic())):
                self.left_at = time.monotonic()
                self.conn.call(
                    "LeaveGroup",
                    group_id=self.group,
                    members=[{"member_id": self.member_id, "group_instance_id": None}],
                )
                self.conn.close()
                return
            sent = time.monotonic()
            self.next_heartbeat = sent + self.interval
            code = self.heartbeat()
            if code in (REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID):
                if code == UNKNOWN_MEMBER_ID:
                    self.unexpected["Heartbeat 25"] += 1
                    self.member_id = ""
                self.rejoin_sent_at = time.monotonic()
                self.join()
            elif code:
                self.unexpected[f"Heartbeat {code}"] += 1


def join_and_settle(members: list[Member]) -> int:
    """Join every member at once, then heartbeat each until a whole round answers 0; returns the generation."""
    gevent.joinall([gevent.spawn(member.join) for member in members], raise_error=True)
    for _ in range(20):
        codes = [greenlet.value for greenlet in gevent.joinall([gevent.spawn(m.heartbeat) for m in members])]
        if all(code == 0 for code in codes) and len({m.generation for m in members}) == 1:
            return members[0].generation
        again = [m for m, code in zip(members, codes, strict=True) if code != 0]
        gevent.joinall([gevent.spawn(m.join) for m in again], raise_error=True)
    raise RuntimeError(f"group {members[0].group} did not settle")


def leave_all(conn: Connection, group: str, member_ids: list[str]) -> None:
    conn.call("LeaveGroup", group_id=group, members=[{"member_id": m, "group_instance_id": None} for m in member_ids])


def rss_mib() -> float:
    with open("/proc/self/statm") as file:
        return int(file.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def process_cpu() -> float:
    times = os.times()
    return times.user + times.system


# ---- load generators -------------------------------------------------------------------------------------------


def heartbeat_load(params: dict, inbox, outbox) -> None:
    """Join ``members`` members to each group (one connection each), then pipeline heartbeats for all of them over
    ``connections`` connections, ``depth`` in flight on each."""
    address, connect = tuple(params["address"]), connector(params)
    topics = {params["topic"]: params["partitions"]}
    joined: list[tuple[str, str, int]] = []
    for group in params["groups"]:
        members = [
            Member(address, group, topics, params["session_timeout_ms"], 3000, connect=connect)
            for _ in range(params["members"])
        ]
        generation = join_and_settle(members)
        joined.extend((group, m.member_id, generation) for m in members)
        for member in members:
            member.conn.close()
    conns = [Connection(address, connect) for _ in range(params["connections"])]
    outbox.put(("ready", {"members": len(joined), "connections": len(conns)}))
    _, start_at, end_at = inbox.get()

    def driver(index: int) -> tuple[int, Counter]:
        mine = joined[index :: len(conns)]
        frames = [
            frame("Heartbeat", n, group_id=g, generation_id=gen, member_id=m, group_instance_id=None)
            for n, (g, m, gen) in enumerate(mine)
        ]
        return pump(
            conns[index],
            lambda i: frames[i % len(frames)],
            lambda response: response["error_code"],
            params["depth"],
            start_at,
            end_at,
        )

    count, errors, cpu = run_drivers(driver, len(conns))
    by_group: dict[str, list[str]] = {}
    for group, member_id, _ in joined:
        by_group.setdefault(group, []).append(member_id)
    for group, member_ids in by_group.items():
        leave_all(conns[0], group, member_ids)
    outbox.put(("result", {"count": count, "errors": dict(errors), "cpu": cpu}))


def commit_load(params: dict, inbox, outbox) -> None:
    """Simple (generation -1) OffsetCommits, one group per connection, ``partitions_per_request`` partitions each
    (a sliding window over the topic's partitions), ``depth`` in flight per connection. With ``bootstrap`` (an
    address) each connection goes to its group's coordinator, as FindCoordinator there names it."""
    connect = connector(params)
    topic, topic_partitions, per_request = params["topic"], params["topic_partitions"], params["partitions_per_request"]
    groups = params["groups"]
    if "bootstrap" in params:
        addresses = find_coordinators(tuple(params["bootstrap"]), groups, connect)
    else:
        addresses = [tuple(params["address"])] * len(groups)
    conns = [Connection(address, connect) for address in addresses]

    def frames(index: int) -> Callable[[int], bytes]:
        group = groups[index]

        def make_frame(n: int) -> bytes:
            first = n * per_request
            partitions = [
                {"partition_index": (first + k) % topic_partitions, "committed_offset": n, "committed_metadata": ""}
                for k in range(per_request)
            ]
            return frame(
                "OffsetCommit",
                n,
                group_id=group,
                generation_id=-1,
                member_id="",
                group_instance_id=None,
                retention_time_ms=-1,
                topics=[{"name": topic, "partitions": partitions}],
            )

        return make_frame

    def check(response: dict) -> int:
        for entry in response["topics"]:
            for partition in entry["partitions"]:
                if partition["error_code"]:
                    return partition["error_code"]
        return 0

    commit_windows(conns, [frames(i) for i in range(len(conns))], check, params["depth"], inbox, outbox)


def find_coordinators(bootstrap: tuple[str, int], groups: list[str], connect: Connect) -> list[tuple[str, int]]:
    """Each group's coordinator, from FindCoordinator on the msgpack protocol (docs/protocol.md), as a client finds
    it; retried while the group's offsets partition has no leader (15)."""
    conn = Connection(bootstrap, connect)
    try:
        found = []
        for group in groups:
            for _ in range(100):
                answer = conn.call("FindCoordinator", key=group, key_type=0)
                if answer["error_code"] not in RETRIABLE_COORDINATOR:
                    break
                gevent.sleep(0.1)
            if answer["error_code"]:
                raise RuntimeError(f"FindCoordinator {group}: error {answer['error_code']}")
            found.append((answer["host"], answer["port"]))
        return found
    finally:
        conn.close()


def commit_windows(
    conns: list[Connection],
    make_frames: list[Callable[[int], bytes]],
    check: Callable,
    depth: int,
    inbox,
    outbox,
) -> None:
    """What every commit load does once its connections are open: each group commits once (the node's one-time
    work for a new group, such as its migration-state read, happens before the window), then ``ready``, then
    commits pipelined ``depth`` deep on every connection over the window. Errors of the first commits count too."""

    def first_commit(index: int) -> tuple[int, Counter]:
        return pump(conns[index], make_frames[index], check, 1, 0.0, 0.0)

    _, errors, _ = run_drivers(first_commit, len(conns))
    outbox.put(("ready", {"connections": len(conns)}))
    _, start_at, end_at = inbox.get()

    def driver(index: int) -> tuple[int, Counter]:
        return pump(conns[index], make_frames[index], check, depth, start_at, end_at)

    count, window_errors, cpu = run_drivers(driver, len(conns))
    errors.update(window_errors)
    for conn in conns:
        conn.close()
    outbox.put(("result", {"count": count, "errors": dict(errors), "cpu": cpu}))


KAFKA_FRAMES_PER_GROUP = 16  # pre-encoded requests per group, used in turn (partition and offset vary)
KAFKA_SAMPLE_EVERY = 256  # responses between two fully decoded ones, which check the cheap error-code read


def kafka_commit_load(params: dict, inbox, outbox) -> None:
    """The same simple single-partition OffsetCommits over Kafka's wire protocol (the node's Kafka listener), from
    frames encoded ahead by kio (OffsetCommit ``version``): each group's :data:`KAFKA_FRAMES_PER_GROUP` requests,
    sent in turn. A response's error code is read at its fixed place from the frame's end; every
    :data:`KAFKA_SAMPLE_EVERY`-th response is decoded in full by kio, and a disagreement counts as an error."""
    from zkcoord.wire import messages as m
    from zkcoord.wire.kafka.frames import encode_request, read_response, response_schema
    from zkcoord.wire.kafka.groups import kafka_request

    address, version = tuple(params["address"]), params["version"]
    topic, topic_partitions = params["topic"], params["topic_partitions"]
    # After the error code: nothing (v2-v7), or the tagged fields of the partition, the topic and the body (v8+).
    error_at = slice(-5, -3) if response_schema(8, version).__flexible__ else slice(-2, None)

    def encoded(group: str, n: int) -> bytes:
        partition = m.OffsetCommitRequestPartition(
            partition_index=n % topic_partitions, committed_offset=n, committed_metadata=""
        )
        request = m.OffsetCommitRequest(
            group_id=group,
            generation_id=-1,
            member_id="",
            retention_time_ms=-1,
            topics=(m.OffsetCommitRequestTopic(name=topic, partitions=(partition,)),),
        )
        return encode_request(n, "bench", kafka_request(8, version, [request]))

    make_frames = []
    for group in params["groups"]:
        prepared = [encoded(group, n) for n in range(KAFKA_FRAMES_PER_GROUP)]
        make_frames.append(lambda n, prepared=prepared: prepared[n % KAFKA_FRAMES_PER_GROUP])
    seen = [0]

    def check(response: bytes) -> int | str:
        code = int.from_bytes(response[error_at], "big", signed=True)
        seen[0] += 1
        if seen[0] % KAFKA_SAMPLE_EVERY == 1:
            _, body = read_response(8, version, response)
            decoded = body.topics[0].partitions[0].error_code
            if decoded != code:
                return f"error code read {code}, decoded {decoded}"
        return code

    conns = [Connection(address, decode=bytes) for _ in params["groups"]]
    commit_windows(conns, make_frames, check, params["depth"], inbox, outbox)


def zookeeper_load(params: dict, inbox, outbox) -> None:
    """0.8.2-style offset commits: one ``set`` of ``/consumers/[g]/offsets/[t]/[p]`` per partition, synchronous
    (one at a time) or pipelined (``set_async`` with ``window`` in flight)."""
    from kazoo.client import KazooClient

    from zkcoord.zk import layout

    client = KazooClient(hosts=params["connect"])
    client.start(timeout=30)
    try:
        paths = [layout.offset_path(params["group"], params["topic"], p) for p in range(params["partitions"])]
        client.ensure_path(layout.offsets_path(params["group"], params["topic"]))
        for result in [client.create_async(path, layout.encode_offset(0)) for path in paths]:
            try:
                result.get()
            except Exception as error:  # NodeExistsError when a run before left it: fine
                if type(error).__name__ != "NodeExistsError":
                    raise
        outbox.put(("ready", {"znodes": len(paths)}))
        _, start_at, end_at = inbox.get()
        counted = 0
        errors: Counter = Counter()
        cpu = process_cpu()
        if params["mode"] == "sync":
            n = 0
            while time.monotonic() < end_at:
                client.set(paths[n % len(paths)], layout.encode_offset(n))
                n += 1
                if start_at <= time.monotonic() < end_at:
                    counted += 1
        else:
            window = threading.BoundedSemaphore(params["window"])
            lock = threading.Lock()
            done = [0]

            def completed(result) -> None:
                now = time.monotonic()
                with lock:
                    if result.exception is not None:
                        errors[type(result.exception).__name__] += 1
                    elif start_at <= now < end_at:
                        done[0] += 1
                window.release()

            n = 0
            while time.monotonic() < end_at:
                window.acquire()
                client.set_async(paths[n % len(paths)], layout.encode_offset(n)).rawlink(completed)
                n += 1
            for _ in range(params["window"]):
                window.acquire(timeout=30)
            counted = done[0]
        cpu = process_cpu() - cpu
        outbox.put(("result", {"count": counted, "errors": dict(errors), "cpu": cpu}))
    finally:
        client.stop()
        client.close()


def rebalance_load(params: dict, inbox, outbox) -> None:
    """``members`` real-protocol members of one group, one connection each: this process's share of a group the
    benchmark spreads over several processes, as the members of a real group are (one process holding them all
    would make its own CPU a queue every heartbeat round and every rebalance waits in). The process that is sent
    join and leave also holds the member that triggers rebalances, the newcomer.

    Commands on the inbox, answered in order: ``("join",)`` starts the newcomer, ``("leave",)`` makes it leave
    (LeaveGroup), ``("await", generation, timeout)`` answers ``("status", records)`` once every member here (the
    newcomer while it is in) has synced on a later generation, or at the timeout; ``("stop",)`` answers
    ``("result", ...)`` and ends. A record is one member's id, generation, times (``time.monotonic``, one clock
    for every process of the machine) and assigned partitions."""
    address = tuple(params["address"])
    topics = {params["topic"]: params["partitions"]}
    synced = gevent.event.Event()

    def on_synced(_member: Member) -> None:
        synced.set()

    def member() -> Member:
        return Member(
            address,
            params["group"],
            topics,
            params["session_timeout_ms"],
            params["interval_ms"],
            on_synced=on_synced,
        )

    members = [member() for _ in range(params["members"])]
    greenlets = [gevent.spawn(m.run) for m in members]
    newcomers: list[Member] = []
    outbox.put(("ready", {"members": len(members)}))

    def in_group() -> list[Member]:
        return members + [m for m in newcomers[-1:] if not m.leave.is_set()]

    def await_generation(after: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while any(m.generation <= after for m in in_group()) and time.monotonic() < deadline:
            synced.clear()
            synced.wait(min(0.05, max(0.0, deadline - time.monotonic())))
        records = [member_record(m, is_newcomer=False) for m in members]
        records += [member_record(m, is_newcomer=True) for m in newcomers[-1:]]
        outbox.put(("status", records))

    while True:
        command = next_command(inbox)
        if command[0] == "join":
            newcomers.append(member())
            greenlets.append(gevent.spawn(newcomers[-1].run))
        elif command[0] == "leave":
            newcomers[-1].leave.set()
        elif command[0] == "await":
            await_generation(command[1], command[2])
        elif command[0] == "stop":
            break
    for m in members:
        m.leave.set()
    gevent.joinall(greenlets, timeout=10)
    unexpected: Counter = Counter()
    for m in members + newcomers:
        unexpected.update(m.unexpected)
    outbox.put(("result", {"unexpected": dict(unexpected)}))


def next_command(inbox) -> tuple:
    """The next command on a multiprocessing inbox, polled so that the members' greenlets keep running."""
    while True:
        try:
            return inbox.get_nowait()
        except queue.Empty:
            gevent.sleep(0.005)


def member_record(member: Member, is_newcomer: bool) -> dict:
    return {
        "member_id": member.member_id,
        "newcomer": is_newcomer,
        "generation": member.generation,
        "synced_at": member.synced_at,
        "first_join_at": member.first_join_at,
        "rejoin_sent_at": member.rejoin_sent_at,
        "left_at": member.left_at,
        "partitions": [tp.partition for tp in member.assignment or ()],
    }


def settled_generation(records: list[dict], after: int, partitions: int) -> int | None:
    """The generation every record is synced on, if it is later than ``after`` and their assignments hold every
    partition exactly once; else None."""
    generations = {record["generation"] for record in records}
    if len(generations) != 1 or (generation := generations.pop()) <= after:
        return None
    owned = [partition for record in records for partition in record["partitions"]]
    return generation if len(owned) == partitions and len(set(owned)) == partitions else None


def rebalance_row(trigger: str, members: list[dict], newcomer: dict) -> dict:
    """One trigger's times (ms) from the settled records of the group's members and of the newcomer."""
    started = newcomer["first_join_at"] if trigger == "join" else newcomer["left_at"]
    expected = [*members, newcomer] if trigger == "join" else members
    done = max(record["synced_at"] for record in expected)
    rejoins = [record["rejoin_sent_at"] for record in members]
    detected = max([started, *(at for at in rejoins if at is not None and at >= started)])
    return {
        "trigger": trigger,
        "total_ms": (done - started) * 1000,
        "detect_ms": (detected - started) * 1000,
        "join_sync_ms": (done - detected) * 1000,
    }


def zookeeper_raw_load(params: dict, inbox, outbox) -> None:
    """Pipelined setData of the same znodes over ZooKeeper's own wire protocol (jute), ``window`` in flight, from
    pre-built frames: a client that costs little CPU, to show what ZooKeeper itself can take when kazoo is not in
    the way. Expects the znodes to exist (the kazoo loads create them)."""
    import socket

    host, _, rest = params["connect"].partition(":")
    port, _, chroot = rest.partition("/")
    from zkcoord.zk import layout

    paths = [
        (f"/{chroot}" if chroot else "") + layout.offset_path(params["group"], params["topic"], p)
        for p in range(params["partitions"])
    ]
    sock = socket.create_connection((host, int(port)), timeout=30)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    # ConnectRequest: protocolVersion, lastZxidSeen, timeOut, sessionId, passwd (16 zero bytes), readOnly
    body = struct.pack(">iqiqi16s?", 0, 0, 30_000, 0, 16, b"\0" * 16, False)
    sock.sendall(_LENGTH.pack(len(body)) + body)
    buffer = bytearray()

    def responses() -> list[bytes]:
        found: list[bytes] = []
        while not found:
            data = sock.recv(262144)
            if not data:
                raise ConnectionError("ZooKeeper closed the connection")
            buffer.extend(data)
            position = 0
            while len(buffer) - position >= 4:
                (length,) = _LENGTH.unpack_from(buffer, position)
                if len(buffer) - position - 4 < length:
                    break
                found.append(bytes(buffer[position + 4 : position + 4 + length]))
                position += 4 + length
            del buffer[:position]
        return found

    responses()  # ConnectResponse
    encoded = [path.encode() for path in paths]

    def set_data(xid: int) -> bytes:
        path, data = encoded[xid % len(encoded)], layout.encode_offset(xid)
        body = struct.pack(f">iii{len(path)}si{len(data)}si", xid, 5, len(path), path, len(data), data, -1)
        return _LENGTH.pack(len(body)) + body

    outbox.put(("ready", {"znodes": len(paths)}))
    _, start_at, end_at = inbox.get()
    window = params["window"]
    errors: Counter = Counter()
    counted, xid = 0, 1
    sock.sendall(b"".join(set_data(xid + k) for k in range(window)))
    xid += window
    outstanding = window
    while outstanding:
        found = responses()
        now = time.monotonic()
        outstanding -= len(found)
        for response in found:
            _, _, err = struct.unpack_from(">iqi", response)
            if err:
                errors[f"zk error {err}"] += 1
        if start_at <= now < end_at:
            counted += len(found)
        if now < end_at:
            sock.sendall(b"".join(set_data(xid + k) for k in range(len(found))))
            xid += len(found)
            outstanding += len(found)
    sock.close()
    outbox.put(("result", {"count": counted, "errors": dict(errors), "cpu": 0.0}))


LOADS = {
    "heartbeat": heartbeat_load,
    "commit": commit_load,
    "kafka-commit": kafka_commit_load,
    "zookeeper": zookeeper_load,
    "zookeeper-raw": zookeeper_raw_load,
    "rebalance": rebalance_load,
}


def worker_main(kind: str, params: dict, inbox, outbox) -> None:
    """Entry point of a load-generator process: runs ``LOADS[kind]``, reporting any failure on the outbox."""
    try:
        LOADS[kind](params, inbox, outbox)
    except BaseException:
        outbox.put(("error", f"{kind} load generator failed:\n{traceback.format_exc()}"))


# ---- the node under test ---------------------------------------------------------------------------------------


def serve(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="coordinator_load.py serve")
    parser.add_argument("--node-id", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--zookeeper", required=True)
    parser.add_argument("--log-dir", required=True)
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--profile", help="where SIGUSR2 (the second time) writes cProfile stats")
    args = parser.parse_args(argv)

    import logging

    from zkcoord.server.config import node_config
    from zkcoord.server.node import CoordinatorNode, tune_garbage_collector

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    properties = dict(pair.split("=", 1) for pair in args.override)
    node = CoordinatorNode(args.node_id, args.host, args.port, args.zookeeper, args.log_dir, node_config(properties))
    stop = gevent.event.Event()
    profiler: list[cProfile.Profile] = []
    lag = {"max": 0.0, "asleep": time.monotonic()}

    def watch_lag() -> None:
        """How late a 10 ms sleep wakes up: how long the hub can be kept from timers, accepts and signals."""
        while True:
            lag["asleep"] = time.monotonic()
            gevent.sleep(0.01)
            lag["max"] = max(lag["max"], time.monotonic() - lag["asleep"] - 0.01)

    def stats() -> None:
        timers = node.runtime.timers
        figures = {
            "t": time.monotonic(),
            "cpu": process_cpu(),
            "hub_cpu": time.thread_time(),  # the hub's thread alone: the thread pool's fsyncs are the rest
            "fsyncs": node.logs.fsync_count(),
            "fsync_rounds": node.logs.syncer.rounds,
            "requests": node.server.requests_total,
            "kafka_requests": 0 if node.kafka is None else node.kafka.requests_total,
            "connections": node.server.connections_open,
            "owned": len(node.coordinator.owned),
            "loading": len(node.coordinator.loading),
            "groups": len(node.coordinator.groups),
            # groups whose first migration-state read or acknowledgement in ZooKeeper has not answered yet: the
            # one-time work of a group new to the node
            "migration_reads": sum(
                not entry.ready.is_set() or entry.acking for entry in node.migrations._states.values()
            ),
            "timers": len(timers),
            "timer_heap": timers.heap_size,
            "rss_mb": rss_mib(),
            # since the previous stats, counting the sleep in progress (a hub kept busy has not ended it yet)
            "lag_max_ms": max(lag["max"], time.monotonic() - lag["asleep"] - 0.01) * 1000,
        }
        lag["max"] = 0.0
        print(json.dumps(figures), flush=True)

    def toggle_profile() -> None:
        if not profiler:
            profiler.append(cProfile.Profile())
            profiler[0].enable()
            print(json.dumps({"profiling": True}), flush=True)
        else:
            profile = profiler.pop()
            profile.disable()
            profile.dump_stats(args.profile)
            print(json.dumps({"profile": args.profile}), flush=True)

    for signum in (signal.SIGTERM, signal.SIGINT):
        gevent.signal_handler(signum, stop.set)
    # Plain Python handlers, not gevent's: they run at the next bytecode of whatever greenlet holds the hub, so
    # the benchmark's window edges stay sharp even while a busy connection keeps the hub from its event loop.
    signal.signal(signal.SIGUSR1, lambda *_: stats())
    signal.signal(signal.SIGUSR2, lambda *_: toggle_profile())
    node.start()
    tune_garbage_collector()  # as `zkcoord coordinator start` does
    gevent.spawn(watch_lag)
    if node.kafka_port is not None:  # the same line as ``zkcoord coordinator start``'s, before the serving line
        print(f"coordinator node {args.node_id} kafka listener on {args.host}:{node.kafka_port}", flush=True)
    print(f"coordinator node {args.node_id} serving on {args.host}:{node.port}", flush=True)
    try:
        stop.wait()
    finally:
        node.stop()
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] != ["serve"]:
        sys.exit("usage: coordinator_load.py serve --node-id N --zookeeper Z --log-dir D [--override k=v ...]")
    sys.exit(serve(sys.argv[2:]))
