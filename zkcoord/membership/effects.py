"""What the membership core hands out: requests for its runtime to send and events for the poll side.

:class:`~zkcoord.membership.member.GroupMember` does no IO. It queues each request as a :class:`Send` (where it
goes and the tag its answer comes back with, through ``GroupMember.on_response``) and tells the poll side what
happened with :class:`Reconcile`, :class:`Completed`, :class:`Fatal` and :class:`Transition` events, all in one
:class:`Outbox` so they leave in the order they were decided. Also here: the member's configuration and how an
answer's error code is read.

Pure: imports only the standard library, zkcoord.errors, zkcoord.model and zkcoord.membership.states; must not
import the other zkcoord.membership modules (they import this one).
"""

from dataclasses import dataclass
from typing import Any

from zkcoord.errors import ErrorCode, ZkcoordError
from zkcoord.membership.states import MemberState
from zkcoord.model import TopicPartition
from zkcoord.wire.messages import Response

ANY_NODE = "any"
COORDINATOR = "coordinator"
# Answers after which the member must find its coordinator again.
COORDINATOR_GONE = frozenset({ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR})


@dataclass(frozen=True)
class MembershipConfig:
    group_id: str
    group_instance_id: str | None
    session_timeout_ms: int
    heartbeat_interval_ms: int
    max_poll_interval_ms: int
    retry_backoff_ms: int
    request_timeout_ms: int
    metadata_max_age_ms: int


@dataclass(frozen=True)
class Send:
    """Send ``api`` with ``fields`` to ``target`` (the coordinator, or any node); answer with ``tag``."""

    target: str
    api: str
    fields: dict
    tag: tuple
    timeout_ms: int


@dataclass(frozen=True)
class Reconcile:
    """The poll side must give up ``lost`` (no commit) and ``revoked`` (commit first), then take ``assigned``.

    ``owned`` is what the member owns once this is done. Acknowledge with :meth:`GroupMember.ack` (``event_id``).
    """

    event_id: int
    generation: int
    member_id: str
    lost: tuple[TopicPartition, ...] = ()
    revoked: tuple[TopicPartition, ...] = ()
    assigned: tuple[TopicPartition, ...] = ()
    owned: tuple[TopicPartition, ...] = ()
    run_revoked: bool = False  # eager members call on_partitions_revoked even with nothing to revoke
    run_assigned: bool = False


@dataclass(frozen=True)
class Completed:
    """The answer to an application request (commit, offset fetch, metadata): ``value`` or ``error``."""

    request_id: int
    value: Any = None
    error: ZkcoordError | None = None


@dataclass(frozen=True)
class Fatal:
    """The member cannot go on (fenced static instance, invalid configuration)."""

    error: ZkcoordError


@dataclass(frozen=True)
class Transition:
    """The member state changed (for traces and metrics)."""

    previous: MemberState
    state: MemberState
    generation: int
    member_id: str
    now_ms: int


class Outbox:
    """The requests and events queued since the runtime last took them, each kind in the order it was queued."""

    def __init__(self) -> None:
        self._sends: list[Send] = []
        self._events: list[Any] = []

    def send(self, send: Send) -> None:
        self._sends.append(send)

    def emit(self, event: Any) -> None:
        self._events.append(event)

    def take_sends(self) -> list[Send]:
        sends, self._sends = self._sends, []
        return sends

    def take_events(self) -> list[Any]:
        events, self._events = self._events, []
        return events


def error_code(response: Response | None) -> int | None:
    """The answer's top-level error code (0 for answers without one); None when there is no answer."""
    if response is None:
        return None
    return getattr(response, "error_code", ErrorCode.NONE)
