"""The one coordinator runtime: it runs the group core's effects, for the node and the test harness alike.

A request enters through :meth:`CoordinatorRuntime.submit` with the function that sends its answer. Group
requests go to the core; cluster requests (ApiVersions, FindCoordinator, Metadata) are answered here from
the caller's :class:`~zkcoord.runtime.cluster.ClusterView`. Then the runtime carries out what the core queued,
until nothing is left: replies go to their senders (after the node's request steps, :class:`RequestSteps`),
appends to the :class:`~zkcoord.runtime.logs.LogWriter`, timers into a keyed heap that :meth:`fire_due`
empties. An append's outcome re-enters the core in the order the partition's batches were appended, whatever
order the log reports them in: one serial queue of completions per offsets partition.

Every entry runs to completion without yielding, so whoever calls in (one gevent hub, or a test) serialises
the core's events without locks. Time comes from the ``clock`` given (a virtual one in tests).

Pure: no IO, no gevent, no clock of its own.
"""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Callable
from typing import Protocol, TypeVar

from zkcoord.errors import ErrorCode
from zkcoord.group.coordinator import GroupCoordinator
from zkcoord.group.effects import Append, Cancel, Reply, Schedule
from zkcoord.runtime.cluster import ClusterView, cluster_response
from zkcoord.runtime.logs import LogWriter
from zkcoord.runtime.timers import Timers
from zkcoord.wire.messages import Request, Response

Send = Callable[[Response], None]
T = TypeVar("T")


class RequestSteps(Protocol):
    """Steps a node adds around the core for some requests (offset migration, :mod:`zkcoord.server.migration`)."""

    def before(self, request: Request) -> Response | None:
        """The answer to give instead of entering the core, or None to enter it (may block, bounded)."""

    def after(self, request: Request, response: Response, send: Send) -> None:
        """Send the core's ``response`` to ``request``, possibly changed or later; ``send`` exactly once."""


class AppendObserver(Protocol):
    def __call__(self, append: Append, error: ErrorCode | None) -> None: ...


class CoordinatorRuntime:
    """Runs one :class:`GroupCoordinator` against ``log`` with ``clock``'s time."""

    def __init__(
        self,
        core: GroupCoordinator,
        log: LogWriter,
        cluster: ClusterView,
        clock,
        steps: RequestSteps | None = None,
        on_append_done: AppendObserver | None = None,
    ):
        self.core = core
        self.log = log
        self.cluster = cluster
        self.clock = clock
        self.steps = steps
        self.timers = Timers()
        self._on_append_done = on_append_done
        self._waiting: dict[int, tuple[Request, Send]] = {}  # request id → the request and who gets its answer
        self._next_request_id = 0
        self._appending: dict[int, deque[Append]] = {}  # per offsets partition, in append order
        self._outcomes: dict[int, tuple[ErrorCode | None, int]] = {}  # batch id → outcome, until its turn
        self._completed: deque[tuple[Append, ErrorCode | None, int]] = deque()
        self._draining = False
        self._drain()

    # -- entries ---------------------------------------------------------------------------------------------

    def submit(self, request: Request, send: Send) -> None:
        """Handle ``request``; ``send`` gets its answer now, or later for a parked or written request."""
        core = self.core
        if not core.handles(request):
            send(cluster_response(request, self.cluster, core.partition_for, core.topics or {}))
            return
        if self.steps is not None:
            answer = self.steps.before(request)
            if answer is not None:
                send(answer)
                return
        request_id = self._next_request_id
        self._next_request_id += 1
        self._waiting[request_id] = (request, send)
        core.handle(request_id, request, self.clock.now_ms())
        self._drain()

    def fire_due(self, now_ms: int) -> int:
        """Fire every timer whose deadline ``now_ms`` has passed, earliest first; returns how many fired.

        None fires while the core has a suspended partition: a stale view must not expire members or offsets.
        """
        if self.core.suspended:
            return 0
        fired = 0
        while (key := self.timers.pop_due(now_ms)) is not None:
            self.core.on_timer(now_ms, key)
            self._drain()
            fired += 1
        return fired

    def next_deadline(self) -> int | None:
        return self.timers.next_deadline()

    def enter(self, action: Callable[[int], T]) -> T:
        """Run ``action(now_ms)`` on the core (set_topics, expire_offsets ...) and carry out what it queued."""
        result = action(self.clock.now_ms())
        self._drain()
        return result

    # -- offsets partitions ----------------------------------------------------------------------------------

    def begin_loading(self, partition: int) -> None:
        self.core.begin_loading(partition)

    def load(self, partition: int, epoch: int | None = None) -> int:
        """Take ``partition`` from the log (replaying its records) and load its groups; returns how many.

        The log's errors (a fenced epoch, a corrupt segment) propagate; the partition then stays loading.
        """
        store = self.log.open(partition, epoch)
        return self.enter(lambda now: self.core.load_partition(partition, store, now))

    def unload(self, partition: int) -> int:
        """Let ``partition`` go: its groups go Dead, parked requests are answered, the log is closed."""
        groups = self.enter(lambda now: self.core.unload_partition(partition))
        self.log.close(partition)
        return groups

    # -- carrying out effects --------------------------------------------------------------------------------

    def _drain(self) -> None:
        """Carry out queued effects, then re-enter completed appends one at a time, until neither is left."""
        if self._draining:
            return  # an append completed while effects run: the loop below picks it up
        self._draining = True
        try:
            core, timers, steps = self.core, self.timers, self.steps
            while True:
                effects = core.take_effects()
                if effects:
                    # One loop, no call per effect: a heartbeat's two effects are most of what the hub does.
                    for effect in effects:
                        kind = type(effect)
                        if kind is Reply:
                            request, send = self._waiting.pop(effect.request_id)
                            if steps is None:
                                send(effect.response)
                            else:
                                steps.after(request, effect.response, send)
                        elif kind is Schedule:
                            timers.schedule(effect.key, effect.deadline_ms)
                        elif kind is Cancel:
                            timers.cancel(effect.key)
                        else:
                            self._append(effect)
                elif self._completed:
                    append, error, base_offset = self._completed.popleft()
                    if self._on_append_done is not None:
                        self._on_append_done(append, error)
                    core.on_append_done(append.batch_id, error, base_offset, self.clock.now_ms())
                else:
                    return
        finally:
            self._draining = False

    def _append(self, append: Append) -> None:
        self._appending.setdefault(append.partition, deque()).append(append)
        done = functools.partial(self._append_done, append.partition, append.batch_id)
        self.log.append(append.partition, append.records, self.clock.now_ms(), done)

    def _append_done(self, partition: int, batch_id: int, error: ErrorCode | None, base_offset: int) -> None:
        self._outcomes[batch_id] = (error, base_offset)
        queue = self._appending[partition]
        while queue and queue[0].batch_id in self._outcomes:
            append = queue.popleft()
            self._completed.append((append, *self._outcomes.pop(append.batch_id)))
        if not queue:
            del self._appending[partition]
        self._drain()
