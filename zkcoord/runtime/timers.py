"""Keyed timers: the deadlines a core set, kept in a heap so the runtime knows what is due next.

Scheduling a key again replaces its deadline, so a stale timer never fires (style §4). Pure: no clock.
"""

import heapq
import itertools
from collections.abc import Hashable

_COMPACT_SLACK = 1024


class Timers:
    """Deadlines by key; :meth:`pop_due` hands out the keys whose deadline ``now_ms`` has passed, in deadline order."""

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, Hashable]] = []
        self._live: dict[Hashable, tuple[int, int]] = {}
        self._sequence = itertools.count()

    def schedule(self, key: Hashable, deadline_ms: int) -> None:
        """Make ``key`` due once the clock is past ``deadline_ms``, unless rescheduled or cancelled."""
        sequence = next(self._sequence)
        self._live[key] = (deadline_ms, sequence)
        heapq.heappush(self._heap, (deadline_ms, sequence, key))
        if len(self._heap) > 2 * len(self._live) + _COMPACT_SLACK:
            # Heartbeats reschedule session timers far more often than they fire; without this the heap would
            # hold one stale entry per heartbeat for a whole session timeout.
            self._heap = [(deadline, seq, k) for k, (deadline, seq) in self._live.items()]
            heapq.heapify(self._heap)

    def cancel(self, key: Hashable) -> None:
        self._live.pop(key, None)

    def deadline(self, key: Hashable) -> int | None:
        entry = self._live.get(key)
        return None if entry is None else entry[0]

    def next_deadline(self) -> int | None:
        """The earliest live deadline, or None."""
        self._drop_stale()
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now_ms: int) -> Hashable | None:
        """The key of the earliest timer with ``deadline < now_ms`` (Kafka's MockTimer is strict), removed."""
        self._drop_stale()
        if not self._heap or self._heap[0][0] >= now_ms:
            return None
        _, _, key = heapq.heappop(self._heap)
        del self._live[key]
        return key

    def _drop_stale(self) -> None:
        heap, live = self._heap, self._live
        while heap:
            deadline, sequence, key = heap[0]
            entry = live.get(key)
            if entry is not None and entry[1] == sequence:
                return
            heapq.heappop(heap)

    def __len__(self) -> int:
        return len(self._live)

    @property
    def heap_size(self) -> int:
        """Entries in the heap, stale ones included (what compaction bounds)."""
        return len(self._heap)
