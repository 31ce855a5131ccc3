"""One Kafka group request in the core: the typed requests a Kafka request became, dispatched through the
connection's (ACL-checked) dispatch, and their answers gathered into the kio answer of the request's version.

IO: none of its own; the Kafka listener's connection hands it a slot to fill.
"""

from __future__ import annotations

import logging
from functools import partial

import msgspec
from gevent.event import AsyncResult

from zkcoord.errors import ErrorCode
from zkcoord.wire import messages as m
from zkcoord.wire.kafka import groups
from zkcoord.wire.kafka.frames import RequestHeader, encode_response

log = logging.getLogger(__name__)

CLOSE = b""  # a slot's value that closes the connection once the answers before it are written


class GroupCall:
    """One Kafka group request in the core: its typed requests dispatched, their answers gathered into the kio
    answer of the request's version, which fills the request's slot. ``connection`` is the Kafka listener's
    connection: its ``dispatch``, ``security``, ``peer`` and ``listener.addresses`` are used."""

    def __init__(self, connection, header: RequestHeader, requests: tuple, slot: AsyncResult):
        self.connection = connection
        self.header = header
        self.requests = requests
        self.slot = slot
        self.answers: list[m.Response | None] = [None] * len(requests)
        self.remaining = len(requests)

    def dispatch(self) -> None:
        if not self.requests:
            self._finish()
        for index, request in enumerate(self.requests):
            self._submit(index, request)

    def _submit(self, index: int, request: m.Request) -> None:
        try:
            self.connection.dispatch(request, partial(self._answered, index))
        except Exception:
            log.exception("dispatch failed api=%d peer=%s", self.header.api_key, self.connection.peer)
            self._answered(index, m.ErrorResponse(error_code=ErrorCode.UNKNOWN_SERVER_ERROR))

    def _answered(self, index: int, response: m.Response) -> None:
        request = self.requests[index]
        if self._needs_member_id(request, response):
            # JoinGroup before v4 has no MEMBER_ID_REQUIRED: join again with the id given, as Kafka's broker does
            # for such clients, so they never see the code.
            self._submit(index, msgspec.structs.replace(request, member_id=response.member_id))
            return
        self.answers[index] = response
        self.remaining -= 1
        if not self.remaining:
            self._finish()

    def _needs_member_id(self, request: m.Request, response: m.Response) -> bool:
        return (
            self.header.api_version < 4
            and isinstance(response, m.JoinGroupResponse)
            and response.error_code == ErrorCode.MEMBER_ID_REQUIRED
            and isinstance(request, m.JoinGroupRequest)
            and not request.member_id
        )

    def _finish(self) -> None:
        header = self.header
        try:
            addresses = self.connection.listener.addresses
            security = self.connection.security
            allowed = security.allowed if security is not None and security.authorizes else None
            response = groups.kafka_response(
                header.api_key, header.api_version, self.requests, self.answers, addresses.coordinator, allowed
            )
            self.slot.set(encode_response(header.correlation_id, response))
        except Exception:  # an answer kio cannot carry: the client must not wait for it for ever
            log.exception(
                "answer not encodable api=%d v%d peer=%s", header.api_key, header.api_version, self.connection.peer
            )
            self.slot.set(CLOSE)
