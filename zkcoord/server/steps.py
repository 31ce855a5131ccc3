"""Offset migration's steps around the coordinator: where :mod:`zkcoord.server.migration` meets the requests.

:class:`MigrationSteps` is the node's :class:`~zkcoord.runtime.RequestSteps`: before a JoinGroup enters the
core, the single-protocol check (a group that ZooKeeper consumers run, or whose offsets are not in the log
yet, takes no coordinator members); after the core answered, an OffsetCommit's accepted partitions go to the
write-behind mirror, and an OffsetFetch in a MAX phase gets ZooKeeper's larger offsets (read on a greenlet of
its own, so the hub never waits for ZooKeeper).

IO: gevent (a greenlet per MAX fetch) and, through GroupMigrations, ZooKeeper.
"""

from __future__ import annotations

import logging

import gevent

from zkcoord.errors import ErrorCode
from zkcoord.group.coordinator import GroupCoordinator
from zkcoord.runtime.runtime import Send
from zkcoord.server.migration import GroupMigrations, ZooKeeperUnavailableError, accepted_offsets
from zkcoord.wire.messages import (
    JoinGroupRequest,
    JoinGroupResponse,
    OffsetCommitRequest,
    OffsetFetchRequest,
    OffsetFetchResponse,
    Request,
    Response,
)

log = logging.getLogger(__name__)


class MigrationSteps:
    """The steps offset migration adds to JoinGroup, OffsetCommit and OffsetFetch."""

    def __init__(self, migrations: GroupMigrations, core: GroupCoordinator):
        self.migrations = migrations
        self.core = core

    def before(self, request: Request) -> Response | None:
        """A JoinGroup refused by single-protocol membership: 23 (or 15 if ZooKeeper cannot tell); else None."""
        if type(request) is not JoinGroupRequest or not self.core.serves(request.group_id):
            return None
        group_id, member_id = request.group_id, request.member_id
        try:
            refusal = self.migrations.join_refusal(group_id)
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
            self.migrations.on_commit_answered(request.group_id, accepted_offsets(request, response))
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
            response = self.migrations.fetch_response(request.group_id, request.topics, response)
        except ZooKeeperUnavailableError as error:
            response = OffsetFetchResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, error_message=str(error))
        except Exception:
            # The connection waits for this answer: a bug must still answer it.
            log.exception("OffsetFetch with ZooKeeper offsets failed group=%s", request.group_id)
            response = OffsetFetchResponse(error_code=ErrorCode.UNKNOWN_SERVER_ERROR)
        send(response)
