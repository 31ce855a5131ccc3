"""Offset migration's steps around the coordinator: where the groups' phases meet the requests.

:class:`MigrationSteps` is the node's :class:`~zkcoord.runtime.RequestSteps`: before a JoinGroup enters the
core, the single-protocol check (a group that ZooKeeper consumers run, or whose offsets are not in the log
yet, takes no coordinator members, unless it is a mixed group that :mod:`zkcoord.server.bridge` runs); after
the core answered, an OffsetCommit's accepted partitions go to the write-behind mirror
(:mod:`zkcoord.server.mirror`), and an OffsetFetch in a MAX phase gets ZooKeeper's larger offsets (read on a
greenlet of its own, so the hub never waits for ZooKeeper). The phases come from
:mod:`zkcoord.server.migration`. :func:`max_fetch_response` and :func:`join_refusal_message` are the pure
halves of the two ZooKeeper reads.

IO: gevent (a greenlet per MAX fetch) and the node's gevent kazoo client, bounded in time.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable, Mapping

import gevent
import msgspec
from gevent.event import AsyncResult
from kazoo.exceptions import KazooException, NoNodeError

from zkcoord.errors import ErrorCode
from zkcoord.group.coordinator import GroupCoordinator
from zkcoord.migration.phases import MAX, RULES, Phase
from zkcoord.runtime.runtime import Send
from zkcoord.server.migration import GroupMigrations, ZooKeeperUnavailableError, managed_name
from zkcoord.server.mirror import OffsetMirror
from zkcoord.wire.messages import (
    JoinGroupRequest,
    JoinGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchRequestTopic,
    OffsetFetchResponse,
    OffsetFetchResponsePartition,
    OffsetFetchResponseTopic,
    Request,
    Response,
)
from zkcoord.zk import layout
from zkcoord.zk.layout import ZnodeDecodeError
from zkcoord.zk.offsets import Partition, read_group_offsets

log = logging.getLogger(__name__)

MAX_IDS_SHOWN = 2


class MigrationSteps:
    """The steps offset migration adds to JoinGroup, OffsetCommit and OffsetFetch."""

    def __init__(
        self,
        migrations: GroupMigrations,
        mirror: OffsetMirror,
        core: GroupCoordinator,
        bridged: Callable[[str], bool] = lambda group: False,
    ):
        self.migrations = migrations
        self.mirror = mirror
        self.core = core
        self.bridged = bridged  # whether a group has the mixed-group bridge (zkcoord.server.bridge)
        self._legacy_id_reads = ReadRounds(self._read_legacy_ids)

    def before(self, request: Request) -> Response | None:
        """A JoinGroup refused by single-protocol membership: 23 (or 15 if ZooKeeper cannot tell); else None."""
        if type(request) is not JoinGroupRequest or not self.core.serves(request.group_id):
            return None
        group_id, member_id = request.group_id, request.member_id
        try:
            refusal = self._join_refusal(group_id)
        except ZooKeeperUnavailableError as error:
            return JoinGroupResponse(
                error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id=member_id, error_message=str(error)
            )
        if refusal is None:
            return None
        log.info("JoinGroup refused group=%s member=%s: %s", group_id, member_id, refusal)
        return JoinGroupResponse(
            error_code=ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id, error_message=refusal
        )

    def after(self, request: Request, response: Response, send: Send) -> None:
        kind = type(request)
        if kind is OffsetCommitRequest and not request.if_greater:
            # A backfill's conditional commits copy ZooKeeper's own offsets: mirroring them back never writes.
            send(response)
            self.mirror.on_commit_answered(request.group_id, accepted_offsets(request, response))
        elif (
            kind is OffsetFetchRequest
            and response.error_code == 0
            and not request.log_only
            and self.migrations.fetch_may_read_zookeeper(request.group_id)
        ):
            gevent.spawn(self._answer_fetch, request, response, send)
        else:
            send(response)

    def _answer_fetch(self, request: OffsetFetchRequest, response: OffsetFetchResponse, send: Send) -> None:
        try:
            response = self._fetch_response(request.group_id, request.topics, response)
        except ZooKeeperUnavailableError as error:
            response = OffsetFetchResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, error_message=str(error))
        except Exception:
            # The connection waits for this answer: a bug must still answer it.
            log.exception("OffsetFetch with ZooKeeper offsets failed group=%s", request.group_id)
            response = OffsetFetchResponse(error_code=ErrorCode.UNKNOWN_SERVER_ERROR)
        send(response)

    # -- ZooKeeper reads for requests -------------------------------------------------------------------------

    @contextlib.contextmanager
    def _reading(self, what: str):
        """Bound a ZooKeeper read in time; a timeout or a kazoo error becomes :class:`ZooKeeperUnavailableError`."""
        late = ZooKeeperUnavailableError(f"{what} not read within {self.migrations.read_timeout_s}s")
        try:
            with gevent.Timeout(self.migrations.read_timeout_s, late):
                yield
        except KazooException as error:
            raise ZooKeeperUnavailableError(f"{what} cannot be read: {error!r}") from None

    def _zookeeper_offsets(self, group: str, partitions: Iterable[Partition] | None) -> dict[Partition, int]:
        """The group's ZooKeeper offsets of ``partitions`` (None: all of them), pipelined and bounded in time.

        A znode that does not hold an offset counts as no offset (and is logged).
        """
        with self._reading(f"ZooKeeper offsets of group {group}"):
            if partitions is not None:
                return self._read_offsets(group, partitions)
            found = read_group_offsets(self.migrations.zk, group)
        for (topic, partition), data in found.unreadable.items():
            log.warning("ignoring a foreign ZooKeeper offset group=%s %s-%d: %r", group, topic, partition, data)
        return found.offsets

    def _read_offsets(self, group: str, partitions: Iterable[Partition]) -> dict[Partition, int]:
        wanted = sorted({(t, p) for t, p in partitions if layout.is_legal_name(t) and p >= 0})
        pending = [(tp, self.migrations.zk.get_async(layout.offset_path(group, *tp))) for tp in wanted]
        offsets = {}
        for tp, reply in pending:
            try:
                data, _ = reply.get()
            except NoNodeError:
                continue
            try:
                offsets[tp] = layout.decode_offset(layout.offset_path(group, *tp), data)
            except ZnodeDecodeError as error:
                log.warning("ignoring a foreign ZooKeeper offset group=%s: %s", group, error)
        return offsets

    def _legacy_ids(self, group: str) -> list[str]:
        """The consumer ids registered under ``/consumers/<group>/ids`` (a ZooKeeper read shared by the JoinGroups
        that wait for it, bounded)."""
        with self._reading(layout.ids_path(group)):
            return self._legacy_id_reads.get(group)

    def _read_legacy_ids(self, group: str) -> list[str]:
        try:
            return sorted(self.migrations.zk.get_children(layout.ids_path(group)))
        except NoNodeError:
            return []

    def _fetch_response(
        self, group: str | None, topics: tuple[OffsetFetchRequestTopic, ...] | None, response: OffsetFetchResponse
    ) -> OffsetFetchResponse:
        """OffsetFetch's answer given the log's ``response``: in a MAX phase, with ZooKeeper's larger offsets.

        Blocks on ZooKeeper (bounded); raises :class:`ZooKeeperUnavailableError`.
        """
        phase = self.migrations.phase(group)
        if phase is None or RULES[phase].coordinator_fetch != MAX:
            return response
        asked = None if topics is None else [(t.name, p) for t in topics for p in t.partition_indexes]
        return max_fetch_response(response, self._zookeeper_offsets(group, asked), topics is None)

    def _join_refusal(self, group: str) -> str | None:
        """Why a JoinGroup for ``group`` must be refused, or None (reads ZooKeeper, bounded; see
        :func:`join_refusal_message`). Raises :class:`ZooKeeperUnavailableError`."""
        if not managed_name(group):
            return None
        phase = self.migrations.phase(group)
        if phase is not None and RULES[phase].mixed_members and self.bridged(group):
            return None  # legacy members are welcome: the bridge runs the 0.8.2 protocol for this member
        return join_refusal_message(group, self._legacy_ids(group), phase)


class ReadRounds:
    """Reads of ``read(key)`` shared by the callers that wait meanwhile, in rounds: a caller gets the answer of a
    read that started after it asked, and every caller that asked while one read ran shares the next. A thousand
    members joining at once made a thousand ZooKeeper reads, one by one through the node's one session, while
    their JoinGroups waited outside the group and their sessions ran out."""

    def __init__(self, read: Callable[[str], object]):
        self._read = read
        self._next: dict[str, AsyncResult] = {}  # key → the round whose read has not started
        self._reading: set[str] = set()

    def get(self, key: str):
        """The answer of a read of ``key`` that starts after this call (raises what the read raised)."""
        answer = self._next.get(key)
        if answer is None:
            answer = self._next[key] = AsyncResult()
            if key not in self._reading:
                self._reading.add(key)
                gevent.spawn(self._read_rounds, key)
        return answer.get()

    def _read_rounds(self, key: str) -> None:
        answer = None
        try:
            while key in self._next:
                answer = self._next.pop(key)  # who asks from now on waits for the next round
                try:
                    answer.set(self._read(key))
                except Exception as error:
                    answer.set_exception(error)
        finally:
            self._reading.discard(key)
            for waiting in (answer, self._next.pop(key, None)):  # this greenlet was killed: none waits for ever
                if waiting is not None and not waiting.ready():
                    waiting.set_exception(ZooKeeperUnavailableError(f"the read of {key} was interrupted"))


# ---- the pure halves of the requests that involve ZooKeeper -------------------------------------------------


def accepted_offsets(request: OffsetCommitRequest, response: OffsetCommitResponse) -> dict[Partition, int]:
    """The partitions of an OffsetCommit answered error_code 0, with the offsets committed (last one wins)."""
    accepted = {}
    for topic, answered in zip(request.topics, response.topics, strict=False):
        for partition, result in zip(topic.partitions, answered.partitions, strict=False):
            if result.error_code == 0:
                accepted[(topic.name, partition.partition_index)] = partition.committed_offset
    return accepted


def max_fetch_response(
    response: OffsetFetchResponse, zookeeper: Mapping[Partition, int], every_partition: bool
) -> OffsetFetchResponse:
    """OffsetFetch's answer in a MAX phase: each partition's larger offset of the log's answer and ZooKeeper's.

    Metadata stays the log's ("" where the log has none). ``every_partition`` (the request's ``topics`` was
    nil): every partition either store has, sorted by topic and partition, as the log-only answer is.
    """
    entries = {(topic.name, entry.partition_index): entry for topic in response.topics for entry in topic.partitions}
    if every_partition:
        for topic, partition in zookeeper:
            entries.setdefault(
                (topic, partition),
                OffsetFetchResponsePartition(partition_index=partition, committed_offset=-1, metadata="", error_code=0),
            )
    for key, entry in entries.items():
        if key in zookeeper and zookeeper[key] > entry.committed_offset:
            entries[key] = msgspec.structs.replace(entry, committed_offset=zookeeper[key])
    if every_partition:
        by_topic: dict[str, list[OffsetFetchResponsePartition]] = {}
        for (topic, _), entry in sorted(entries.items()):
            by_topic.setdefault(topic, []).append(entry)
        pairs = by_topic.items()
    else:
        pairs = (
            (topic.name, [entries[(topic.name, entry.partition_index)] for entry in topic.partitions])
            for topic in response.topics
        )
    topics = tuple(OffsetFetchResponseTopic(name=name, partitions=tuple(partitions)) for name, partitions in pairs)
    return msgspec.structs.replace(response, topics=topics)


def join_refusal_message(group: str, legacy_ids: list[str], phase: Phase | None) -> str | None:
    """Why a JoinGroup for ``group`` is refused (single-protocol membership), or None to let it in."""
    if legacy_ids:
        shown = ", ".join(legacy_ids[:MAX_IDS_SHOWN])
        more = len(legacy_ids) - MAX_IDS_SHOWN
        listed = f"{shown} and {more} more" if more > 0 else shown
        return (
            f"group {group} is run by ZooKeeper (Kafka 0.8.2) consumers ({listed} under "
            f"{layout.ids_path(group)}); only a mixed group has members of both protocols: "
            f"`zkcoord migrate up --group {group} --to 0001_dual_commit` makes it one (docs/mixed-groups.md)"
        )
    if phase is not None and RULES[phase].client_member is None:
        return (
            f"the offsets of group {group} are still in ZooKeeper (migration phase {phase.name}); "
            f"run `zkcoord migrate up --group {group}` to move it to DUAL_WRITE first"
        )
    return None
