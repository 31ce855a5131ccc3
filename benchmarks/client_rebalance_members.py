"""The member side of benchmarks/client_rebalance.py: group members of one process and what they report.

A :class:`Host` runs members (zkcoord.client.Consumer or LegacyConsumer) as threads of the process it lives in:
the benchmark's own process, or a host process (:func:`host_main`) that takes commands from a queue. Each member's
:class:`Probe` (its trace sink) keeps the record-by-record bookkeeping local and reports only what the benchmark
needs, as tuples through ``emit``: state and assignment changes, rebalance attempts, the start and the end of each
processing pause, and the first record. Times are ``time.monotonic()``, one clock for every process of the machine.
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
from collections.abc import Callable

from zkcoord.client import Consumer
from zkcoord.legacy.consumer import LegacyConsumer
from zkcoord.sources import open_source
from zkcoord.trace import JsonLinesTraceWriter

log = logging.getLogger(__name__)

Emit = Callable[[tuple], None]
POLL_TIMEOUT_MS = 100


class Probe:
    """The trace sink of one member instance ``key`` = (slot, incarnation).

    A pause starts at the last record the member processed before it gave partitions up (``client.partitions_
    revoked``/``_lost`` with partitions, or a ``legacy.assignment`` without some partition it had) and ends at the
    next record it processes. ``ownership_gaps`` (a legacy member without streams, so without records): from the
    release to the next claim instead (``monotonic_before`` / ``monotonic_after`` of its ``legacy.assignment``).
    Emits ``("state", key, t, state, generation)``, ``("assignment", key, t, partitions)``, ``("attempt", key, t,
    outcome)``, ``("pending", key, t)``, ``("pause", key, start, end)`` and ``("first", key, t)``.
    """

    def __init__(self, key: tuple[int, int], emit: Emit, ownership_gaps: bool = False, keep=None):
        self.key = key
        self.emit = emit
        self.ownership_gaps = ownership_gaps
        self.keep = keep  # another sink for every event but client.consumed (--trace-dir)
        self.partitions: frozenset = frozenset()
        self.last: float | None = None  # the last record processed
        self.pending: float | None = None  # a pause began here and has not ended yet
        self.max_gap = 0.0  # the longest time between two records since reset_gaps()

    def __call__(self, event: dict) -> None:
        kind = event["type"]
        if kind == "client.consumed":
            self.consumed(event["monotonic"])
            return
        if self.keep is not None:
            self.keep({**event, "monotonic": time.monotonic(), "instance": list(self.key)})
        if kind in ("client.partitions_revoked", "client.partitions_lost"):
            if event["partitions"]:
                self._begin(self.last)
        elif kind == "client.state":
            self.emit(("state", self.key, time.monotonic(), event["state"], event["generation"]))
        elif kind == "client.assignment":
            partitions = sorted(tuple(tp) for tps in event["assignment"].values() for tp in tps)
            self.emit(("assignment", self.key, event["monotonic_after"], partitions))
        elif kind == "legacy.assignment":
            now = frozenset(tuple(tp) for tps in event["assignment"].values() for tp in tps)
            if self.partitions - now:
                self._begin(event["monotonic_before"] if self.ownership_gaps else self.last)
            elif now and self.ownership_gaps and self.pending is not None:
                self._end(event["monotonic_after"])
            self.partitions = now
            self.emit(("assignment", self.key, event["monotonic_after"], sorted(now)))
        elif kind == "legacy.rebalance_attempt":
            self.emit(("attempt", self.key, time.monotonic(), event["outcome"]))

    def _begin(self, start: float | None) -> None:
        if self.pending is None and start is not None:
            self.pending = start
            self.emit(("pending", self.key, start))

    def _end(self, end: float) -> None:
        self.emit(("pause", self.key, self.pending, end))
        self.pending = None

    def consumed(self, now: float) -> None:
        """A record (client: the records of one partition one poll returned) processed at ``now``."""
        if self.last is None:
            self.emit(("first", self.key, now))
        else:
            self.max_gap = max(self.max_gap, now - self.last)
        if self.pending is not None and not self.ownership_gaps:
            self._end(now)
        self.last = now


class ClientMember:
    """A zkcoord.client.Consumer polling (and doing nothing else) in a thread of its own until stopped."""

    def __init__(self, probe: Probe, config: dict, topic: str, source):
        self.probe = probe
        self.consumer = Consumer(topic, source=source, trace=[probe], **config)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"poll-{probe.key}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.consumer.poll(timeout_ms=POLL_TIMEOUT_MS)
            except Exception:
                log.exception("poll failed")
                time.sleep(0.1)

    def stop(self) -> None:
        """Stop polling; the poll side owns the consumer, so close() only after its thread ended."""
        self._stop.set()
        self._thread.join()

    def close(self) -> None:
        self.consumer.close(timeout_ms=10_000)


class LegacyMember:
    """A LegacyConsumer, started; with streams, its one KafkaStream iterated in a thread of its own."""

    def __init__(self, probe: Probe, config: dict, topic: str, source, streams: bool):
        self.probe = probe
        extra = {"source": source} if streams else {}
        self.consumer = LegacyConsumer(config, topics={topic: 1}, trace=[probe], **extra)
        self.consumer.start()
        self._thread = None
        if streams:
            stream = self.consumer.streams()[topic][0]
            self._thread = threading.Thread(target=self._run, args=(stream,), name=f"stream-{probe.key}", daemon=True)
            self._thread.start()

    def _run(self, stream) -> None:
        consumed = self.probe.consumed
        try:
            for _ in stream:
                consumed(time.monotonic())
        except Exception:
            log.exception("stream failed")

    def stop(self) -> None:
        """Nothing: the stream stops yielding when the consumer closes."""

    def close(self) -> None:
        self.consumer.close()
        if self._thread is not None:
            self._thread.join(timeout=10)


class Host:
    """The members of one process, by slot. ``spec``: kind ("client" or "legacy"), config, topic, streams."""

    def __init__(self, emit: Emit, source_spec: str, trace_path: str | None = None):
        self.emit = emit
        self.source = open_source(source_spec)  # a synthetic spec: the same logs in every process
        self.trace = JsonLinesTraceWriter(trace_path) if trace_path else None
        self.members: dict[int, ClientMember | LegacyMember] = {}
        self.lock = threading.Lock()

    def start(self, slot: int, incarnation: int, spec: dict) -> None:
        legacy = spec["kind"] == "legacy"
        probe = Probe((slot, incarnation), self.emit, legacy and not spec["streams"], self.trace)
        if legacy:
            member = LegacyMember(probe, spec["config"], spec["topic"], self.source, spec["streams"])
        else:
            member = ClientMember(probe, spec["config"], spec["topic"], self.source)
        with self.lock:
            self.members[slot] = member

    def close(self, slot: int) -> tuple[float, float | None]:
        """Stop polling, then close: (when close() began, the old instance's last record)."""
        with self.lock:
            member = self.members.pop(slot)
        member.stop()
        closed_at = time.monotonic()
        member.close()
        return closed_at, member.probe.last

    def reset_gaps(self) -> None:
        for member in list(self.members.values()):
            member.probe.max_gap = 0.0

    def gaps(self) -> dict[int, float]:
        return {slot: member.probe.max_gap for slot, member in list(self.members.items())}

    def close_all(self) -> None:
        with self.lock:
            members, self.members = list(self.members.values()), {}
        for member in members:
            member.stop()
        threads = [threading.Thread(target=_quietly, args=(m.close,), daemon=True) for m in members]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)


def _quietly(fn: Callable[[], object]) -> None:
    try:
        fn()
    except Exception:
        log.debug("close failed", exc_info=True)


def host_main(inbox, outbox, source_spec: str, trace_path: str | None) -> None:
    """A host process: run ``(request_id, method, args)`` commands, each in a thread; answer on ``outbox``."""
    logging.basicConfig(level=logging.CRITICAL)
    host = Host(outbox.put, source_spec, trace_path)

    def run(request_id: int, method: str, args: tuple) -> None:
        try:
            outbox.put(("reply", request_id, getattr(host, method)(*args), None))
        except Exception:
            outbox.put(("reply", request_id, None, traceback.format_exc()))

    outbox.put(("ready",))
    while True:
        command = inbox.get()
        if command is None:
            host.close_all()
            if host.trace is not None:
                host.trace.close()
            return
        threading.Thread(target=run, args=command, daemon=True).start()
