"""What the group core asks of its runtime, as data: replies, appends, timers.

Handlers queue effects; the runtime takes them (:meth:`Effects.take`) and carries them out, then reports back
through the core's entry points: an append's outcome as ``on_append_done(batch_id, error, base_offset)``, a
due timer as ``on_timer(now_ms, key)``. A parked request is its request id; an append in flight is its batch
id and a :class:`Completion` that says what its outcome does, so nothing in the core holds a callback.

Timer keys are readable tuples (``("session", group, member)``); scheduling a key again moves it, so a stale
timer never fires. The core keeps the deadlines it set (:attr:`Effects.deadlines`) to ask about them.

Pure: imports only msgspec, zkcoord.errors, zkcoord.offsets.records and zkcoord.wire.messages.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import TYPE_CHECKING, Protocol

from msgspec import Struct

from zkcoord.errors import ErrorCode
from zkcoord.offsets.records import RecordKey, RecordValue
from zkcoord.wire.messages import Response

if TYPE_CHECKING:
    from zkcoord.group.coordinator import GroupCoordinator

TimerKey = Hashable
Records = tuple[tuple[RecordKey, RecordValue | None], ...]


class Reply(Struct, frozen=True):
    """Answer request ``request_id`` with ``response``."""

    request_id: int
    response: Response


class Append(Struct, frozen=True):
    """Append ``records`` to offsets partition ``partition`` as one batch; report back with ``batch_id``."""

    batch_id: int
    partition: int
    records: Records


class Schedule(Struct, frozen=True):
    """Call ``on_timer(now_ms, key)`` once the clock is past ``deadline_ms`` (replaces the key's deadline)."""

    key: TimerKey
    deadline_ms: int


class Cancel(Struct, frozen=True):
    """Forget the timer ``key``."""

    key: TimerKey


Effect = Reply | Append | Schedule | Cancel


class Completion(Protocol):
    """What an append's outcome does to the core: answer parked requests, apply the records, or log."""

    def finish(self, core: GroupCoordinator, error: ErrorCode | None, base_offset: int, now_ms: int) -> None: ...


class Effects:
    """The queue of effects one core fills, the deadlines it set and the appends it waits for."""

    __slots__ = ("_queue", "deadlines", "completions", "_next_batch_id")

    def __init__(self) -> None:
        self._queue: list[Effect] = []
        self.deadlines: dict[TimerKey, int] = {}
        self.completions: dict[int, Completion] = {}
        self._next_batch_id = 0

    def reply(self, request_id: int, response: Response) -> None:
        self._queue.append(Reply(request_id, response))

    def append(self, partition: int, records: Records, completion: Completion) -> int:
        """Queue an append whose outcome ``completion`` handles; returns its batch id."""
        batch_id = self._next_batch_id
        self._next_batch_id += 1
        self.completions[batch_id] = completion
        self._queue.append(Append(batch_id, partition, records))
        return batch_id

    def schedule(self, key: TimerKey, deadline_ms: int) -> None:
        self.deadlines[key] = deadline_ms
        self._queue.append(Schedule(key, deadline_ms))

    def cancel(self, key: TimerKey) -> None:
        if self.deadlines.pop(key, None) is not None:
            self._queue.append(Cancel(key))

    def fired(self, key: TimerKey) -> bool:
        """Whether ``key`` is live (then it is forgotten, as a fired timer is): a stale firing does nothing."""
        return self.deadlines.pop(key, None) is not None

    def take(self) -> list[Effect]:
        """Every effect queued since the last call, in order."""
        effects, self._queue = self._queue, []
        return effects
