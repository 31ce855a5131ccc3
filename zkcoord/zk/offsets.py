"""Bulk reads and guarded writes of ``/consumers/<g>/offsets`` (legacy-zk-protocol.md §1.6), pipelined.

Reads issue every request before waiting for any answer, so a group of N partitions costs a few round
trips, not N. Writes made on someone else's behalf (the coordinator's mirror, a backfill, a rollback) are
set-if-greater: the value is read with its version, and only a larger offset is written, with that
version as the condition; a lost race is read again. A lagging write therefore never moves an offset back.

Works with any kazoo handler (the callers use gevent in the node and threading in tools).
"""

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from zkcoord.zk import layout
from zkcoord.zk.layout import ZnodeDecodeError

log = logging.getLogger(__name__)

Partition = tuple[str, int]
BATCH = 2000  # requests in flight at once: bounded memory, and still only a few round trips per batch
MAX_ROUNDS = 20  # set-if-greater retries against concurrent writers before giving up on a partition


@dataclass
class GroupOffsets:
    """A group's ZooKeeper offsets; znodes whose data is not an offset are listed apart, never dropped."""

    offsets: dict[Partition, int] = field(default_factory=dict)
    unreadable: dict[Partition, str] = field(default_factory=dict)
    requests: int = 0


def _children_async(client: KazooClient, paths: Iterable[str]) -> dict[str, list[str]]:
    pending = [(path, client.get_children_async(path)) for path in paths]
    found = {}
    for path, result in pending:
        try:
            found[path] = result.get()
        except NoNodeError:
            found[path] = []
    return found


def _batches(items: list, size: int = BATCH):
    for start in range(0, len(items), size):
        yield items[start : start + size]


def read_group_offsets(client: KazooClient, group: str) -> GroupOffsets:
    """Every offset under ``/consumers/<group>/offsets``: topics, partitions, values, each level pipelined."""
    return read_groups_offsets(client, [group])[group]


def read_groups_offsets(client: KazooClient, groups: Iterable[str]) -> dict[str, GroupOffsets]:
    """:func:`read_group_offsets` for many groups at once (one pipeline per level across all groups)."""
    groups = list(groups)
    result = {group: GroupOffsets() for group in groups}
    topics = _children_async(client, [layout.offsets_path(g) for g in groups])
    for group in groups:
        result[group].requests += 1
    topic_paths = [(g, t) for g in groups for t in topics[layout.offsets_path(g)]]
    partitions = _children_async(client, [layout.offsets_path(g, t) for g, t in topic_paths])
    wanted: list[tuple[str, str, int]] = []
    for group, topic in topic_paths:
        result[group].requests += 1
        for name in partitions[layout.offsets_path(group, topic)]:
            if name.isdigit():
                wanted.append((group, topic, int(name)))
    for batch in _batches(wanted):
        pending = [(g, t, p, client.get_async(layout.offset_path(g, t, p))) for g, t, p in batch]
        for group, topic, partition, reply in pending:
            result[group].requests += 1
            try:
                data, _ = reply.get()
            except NoNodeError:
                continue  # deleted meanwhile
            path = layout.offset_path(group, topic, partition)
            try:
                result[group].offsets[(topic, partition)] = layout.decode_offset(path, data)
            except ZnodeDecodeError:
                result[group].unreadable[(topic, partition)] = (data or b"").decode("utf-8", "replace")
    return result


@dataclass
class GuardedWrite:
    """What a set-if-greater write did: partitions written, left alone (ZooKeeper already as far), failed."""

    written: dict[Partition, int] = field(default_factory=dict)
    kept: dict[Partition, int] = field(default_factory=dict)
    failed: dict[Partition, str] = field(default_factory=dict)
    requests: int = 0


def write_offsets_if_greater(client: KazooClient, group: str, offsets: Mapping[Partition, int]) -> GuardedWrite:
    """Raise each partition's ZooKeeper offset to ``offsets[p]`` unless it already is at least that far.

    A znode holding something that is not an offset is reported as failed and left untouched.
    """
    outcome = GuardedWrite()
    todo = dict(offsets)
    for _ in range(MAX_ROUNDS):
        if not todo:
            break
        todo = _guarded_round(client, group, todo, outcome)
    for partition, offset in todo.items():
        outcome.failed[partition] = f"still racing with other writers after {MAX_ROUNDS} tries (wanted {offset})"
    return outcome


def _guarded_round(
    client: KazooClient, group: str, todo: Mapping[Partition, int], outcome: GuardedWrite
) -> dict[Partition, int]:
    """One read-then-conditional-write pass; returns the partitions that lost a race and must go again."""
    again: dict[Partition, int] = {}
    for batch in _batches(sorted(todo.items())):
        paths = {p: layout.offset_path(group, *p) for p, _ in batch}
        reads = [(p, o, client.get_async(paths[p])) for p, o in batch]
        writes = []
        for partition, offset, reply in reads:
            outcome.requests += 1
            try:
                data, stat = reply.get()
            except NoNodeError:
                writes.append((partition, offset, client.create_async(paths[partition], _value(offset), makepath=True)))
                continue
            try:
                current = layout.decode_offset(paths[partition], data)
            except ZnodeDecodeError as error:
                outcome.failed[partition] = str(error)
                continue
            if current >= offset:
                outcome.kept[partition] = current
                continue
            writes.append((partition, offset, client.set_async(paths[partition], _value(offset), version=stat.version)))
        for partition, offset, reply in writes:
            outcome.requests += 1
            try:
                reply.get()
            except (BadVersionError, NodeExistsError):
                again[partition] = offset  # someone wrote meanwhile: compare with their value
            else:
                outcome.written[partition] = offset
    return again


def _value(offset: int) -> bytes:
    return layout.encode_offset(offset)


def write_offsets(client: KazooClient, group: str, offsets: Mapping[Partition, int]) -> int:
    """Set each offset whatever ZooKeeper holds (an explicit rewind); pipelined; returns how many."""
    for batch in _batches(sorted(offsets.items())):
        sets = [(p, o, client.set_async(layout.offset_path(group, *p), _value(o))) for p, o in batch]
        creates = []
        for partition, offset, reply in sets:
            try:
                reply.get()
            except NoNodeError:
                path = layout.offset_path(group, *partition)
                creates.append((path, offset, client.create_async(path, _value(offset), makepath=True)))
        for path, offset, reply in creates:
            try:
                reply.get()
            except NodeExistsError:
                client.set(path, _value(offset))
    return len(offsets)
