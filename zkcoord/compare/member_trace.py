"""A comparison member's trace sink: its events tagged with the run, and the ``compare.*`` events derived from
``legacy.*`` and ``client.*`` ones (docs/traces.md). Members that report ``compare.*`` events directly (the
librdkafka member) write them through :meth:`CompareTrace.emit`."""

import threading
import time
from collections.abc import Callable

from zkcoord.trace import make_event


class CompareTrace:
    """The member's trace sink: tags every event and adds the ``compare.*`` events derived from it."""

    def __init__(self, write: Callable[[dict], None], spec: dict):
        self._write = write
        self._tags = {key: spec[key] for key in ("run", "scenario", "variant", "instance")}
        self._group = spec["group"]
        self._member = spec["member"]
        self._owned: list | None = None
        self._stable_generations: set[int] = set()
        self._lock = threading.Lock()

    def __call__(self, event: dict) -> None:
        kind = event["type"]
        if kind != "client.consumed":
            self._put({**event, "member": self._member})
        if kind in ("legacy.assignment", "client.assignment"):
            partitions = sorted({tuple(tp) for tps in event["assignment"].values() for tp in tps})
            if partitions != self._owned:
                self._owned = partitions
                self.emit("compare.assignment", partitions=[list(tp) for tp in partitions])
        elif kind == "legacy.rebalance_attempt" and event["outcome"] == "success":
            self.emit("compare.rebalance", generation=None)
        elif kind == "client.state" and event["state"] == "STABLE":
            if event["generation"] not in self._stable_generations:
                self._stable_generations.add(event["generation"])
                self.emit("compare.rebalance", generation=event["generation"])
        elif kind in ("legacy.committed", "client.committed"):
            self.emit("compare.committed", offsets=event["offsets"], error=event.get("error"))

    def processed(self, topic: str, partition: int, first: int, last: int, time_ms: int) -> None:
        self.emit(
            "compare.processed", time_ms=time_ms, topic=topic, partition=partition, first_offset=first, last_offset=last
        )

    def emit(self, event_type: str, time_ms: int | None = None, **fields) -> None:
        self._put(make_event(event_type, now_ms() if time_ms is None else time_ms, self._group, self._member, **fields))

    def _put(self, event: dict) -> None:
        with self._lock:
            self._write({**event, **self._tags})


def now_ms() -> int:
    """Wall-clock milliseconds, the time of every comparison event."""
    return int(time.time() * 1000)
