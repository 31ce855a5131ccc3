"""The consumer's trace events (``client.*``, docs/traces.md): its state, its assignment, what it consumed and
committed, its listener's callbacks.

Events go to the sinks given to the consumer; without sinks nothing is built. Assignments traced outside a
rebalance carry the generation and member id of the member's last state change.

Imports zkcoord.trace (the trace schema), zkcoord.membership's events, zkcoord.model and zkcoord.sources
(for Record); must not import the worker or the consumer. Its only IO is the sinks it is given.
"""

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from zkcoord.membership import Reconcile, Transition
from zkcoord.model import TopicPartition
from zkcoord.sources import Record
from zkcoord.trace import TraceSink, make_event


class ConsumerTrace:
    """Emits one consumer's trace events as ``member`` of ``group``, timed by ``now_ms`` unless told otherwise."""

    def __init__(self, sinks: tuple[TraceSink, ...], now_ms: Callable[[], int], group: str, member: str):
        self._sinks = sinks
        self._now_ms = now_ms
        self._group = group
        self._member = member
        self._generation = -1
        self._member_id = ""

    def emit(self, event_type: str, time_ms: int | None = None, **fields: Any) -> None:
        if not self._sinks:
            return
        event = make_event(
            event_type, time_ms if time_ms is not None else self._now_ms(), self._group, self._member, **fields
        )
        for sink in self._sinks:
            sink(event)

    def state(self, event: Transition) -> None:
        self._generation, self._member_id = event.generation, event.member_id
        self.emit(
            "client.state",
            time_ms=event.now_ms,
            state=event.state.name,
            previous=event.previous.name,
            generation=event.generation,
            member_id=event.member_id,
        )

    def assignment(self, assigned: Iterable[TopicPartition], before: float, event: Reconcile | None = None) -> None:
        """The partitions now owned; ``before`` is when the change began (monotonic seconds)."""
        if self._sinks:
            self.emit(
                "client.assignment",
                assignment={self._member: [list(tp) for tp in sorted(assigned)]},
                generation=event.generation if event else self._generation,
                member_id=event.member_id if event else self._member_id,
                monotonic_before=before,
                monotonic_after=time.monotonic(),
            )

    def listener(self, method: str, partitions: list[TopicPartition]) -> None:
        """The rebalance listener's ``method`` runs for ``partitions``."""
        self.emit(f"client.{method.removeprefix('on_')}", partitions=[list(tp) for tp in partitions])

    def consumed(self, records: Mapping[TopicPartition, list[Record]]) -> None:
        if records and self._sinks:
            moment = time.monotonic()
            for partition, batch in records.items():
                self.emit(
                    "client.consumed",
                    topic=partition.topic,
                    partition=partition.partition,
                    first_offset=batch[0].offset,
                    last_offset=batch[-1].offset,
                    monotonic=moment,
                )

    def committed(self, offsets: Mapping, error: Exception | None, latency_ms: float | None = None) -> None:
        if self._sinks:
            self.emit(
                "client.committed",
                offsets=[[tp.topic, tp.partition, value[0]] for tp, value in sorted(offsets.items())],
                error=None if error is None else f"{type(error).__name__}: {error}",
                latency_ms=latency_ms,
            )
