"""``Consumer``: a kafka-python-like consumer whose group coordination runs in a background worker.

Two sides (Kafka's consumer threading refactor): the **poll side** is the caller's thread — it fetches records from
the record source, keeps positions, and runs the rebalance listener's callbacks, in order and never concurrently;
the **worker** (``zkcoord.client.worker``) does every coordinator request on a hub of its own in a native thread,
so heartbeats go on while the caller processes records, sleeps or runs CPU-bound code. The sides talk through two
queues: commands to the worker, events (rebalances, completed async commits, fatal errors) back to poll().

Ownership is exclusive because the worker does not go on after a revocation until poll() has run the callbacks
and acknowledged it (eager: before it rejoins; cooperative: before the follow-up rebalance).
"""

import logging
import queue
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple, Protocol

from zkcoord.assign.consumer import assignor_for
from zkcoord.client.config import ConsumerConfig
from zkcoord.client.metrics import ClientMetrics, PrometheusCollector
from zkcoord.client.worker import Worker
from zkcoord.clock import SystemClock
from zkcoord.config import build_config
from zkcoord.errors import (
    ConfigError,
    IllegalStateError,
    NoOffsetForPartitionError,
    OffsetOutOfRangeError,
    WakeupError,
    ZkcoordError,
)
from zkcoord.legacy.trace import TraceSink, make_event
from zkcoord.membership import (
    Completed,
    Fatal,
    GroupMember,
    MembershipConfig,
    MemberState,
    Reconcile,
    Transition,
)
from zkcoord.membership.requests import commit_topics, partitions_by_topic
from zkcoord.model import TopicPartition
from zkcoord.sources import Record, RecordSource, SyntheticSource
from zkcoord.zk.session import ThreadQueue, ThreadResult

log = logging.getLogger(__name__)

_WAKEUP = object()


class OffsetAndMetadata(NamedTuple):
    offset: int
    metadata: str | None = None


class ConsumerRebalanceListener(Protocol):
    """kafka-python's listener; every method is optional. ``on_partitions_lost`` defaults to ``..._revoked``."""

    def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None: ...

    def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None: ...

    def on_partitions_lost(self, lost: list[TopicPartition]) -> None: ...


class Consumer:
    """Consume ``topics`` as a member of ``group.id`` (or, after :meth:`assign`, without a group).

    Configure with Kafka's property names (``Consumer("t", **{"group.id": "g"})``) or snake_case keywords
    (``group_id="g"``); see :class:`~zkcoord.client.config.ConsumerConfig`. ``source`` is where records come from
    (default: a :class:`~zkcoord.sources.SyntheticSource`). Not thread-safe, like kafka-python's consumer, except
    :meth:`wakeup`.
    """

    def __init__(
        self,
        *topics: str,
        source: RecordSource | None = None,
        trace: TraceSink | Iterable[TraceSink] = (),
        clock=None,
        **config: Any,
    ):
        self.config: ConsumerConfig = build_config(ConsumerConfig, None, **config)
        self._clock = clock or SystemClock()
        self._owns_source = source is None
        self._source = source if source is not None else SyntheticSource()
        self._sinks: tuple[TraceSink, ...] = (trace,) if callable(trace) else tuple(trace)
        self.name = self.config.group_instance_id or f"{self.config.client_id}-{uuid.uuid4().hex[:8]}"
        self._assignors = [assignor_for(name) for name in self.config.assignment_strategies]
        if not self._assignors:
            raise ConfigError("partition.assignment.strategy names no assignor")
        membership = MembershipConfig(
            group_id=self.config.group_id or "",
            group_instance_id=self.config.group_instance_id,
            session_timeout_ms=self.config.session_timeout_ms,
            heartbeat_interval_ms=self.config.heartbeat_interval_ms,
            max_poll_interval_ms=self.config.max_poll_interval_ms,
            retry_backoff_ms=self.config.retry_backoff_ms,
            request_timeout_ms=self.config.request_timeout_ms,
            metadata_max_age_ms=self.config.metadata_max_age_ms,
        )
        self._member = GroupMember(membership, self._assignors, self._clock.now_ms())
        self._events = ThreadQueue()  # the worker thread puts, the poll side gets
        self._metrics = ClientMetrics()
        self._worker = Worker(self.config, self._member, self._clock, self._events.put)
        self._worker.observers.append(self._metrics.on_event)
        self._listener: Any = None
        self._subscription: str | None = None  # "topics", "pattern" or "manual"
        self._assigned: set[TopicPartition] = set()
        self._positions: dict[TopicPartition, int] = {}
        self._paused: set[TopicPartition] = set()
        self._generation = -1
        self._member_id = ""
        self._request_ids = iter(range(1, 1 << 62))
        self._next_auto_commit = time.monotonic() + self.config.auto_commit_interval_ms / 1000
        self._fetch_start = 0
        self._iterator_records: list[Record] = []
        self._fatal: ZkcoordError | None = None
        self._closed = False
        self._metrics_server = None
        self._worker.start(f"zkcoord-consumer-{self.name}")
        if self.config.metrics_port is not None:
            self._serve_metrics(self.config.metrics_port)
        if topics:
            self.subscribe(topics)

    # ---- subscription and assignment -------------------------------------------------------------------------

    def subscribe(
        self, topics: Iterable[str] = (), pattern: str | None = None, listener: ConsumerRebalanceListener | None = None
    ) -> None:
        """Join the group for ``topics`` (or every topic matching ``pattern``); replaces an earlier subscription."""
        self._ensure_open()
        if self._subscription == "manual":
            raise IllegalStateError("subscribe() after assign(): call unassign() first")
        if not self.config.group_id:
            raise ConfigError("subscribe() needs group.id; use assign() to consume without a group")
        topics = [topics] if isinstance(topics, str) else list(topics)
        if bool(topics) == (pattern is not None):
            raise ValueError("give topics or a pattern, not both")
        self._subscription = "pattern" if pattern is not None else "topics"
        self._listener = listener
        self._worker.submit(lambda member, now: member.subscribe(topics, pattern, now))

    def subscription(self) -> set[str]:
        return set(self._member.topics) if self._subscription in ("topics", "pattern") else set()

    def unsubscribe(self) -> None:
        """Give up every partition (commit first with auto-commit on) and leave the group."""
        self._ensure_open()
        if self._subscription in ("topics", "pattern"):
            self._revoke(sorted(self._assigned))
            self._worker.submit(lambda member, now: member.unsubscribe(now))
        self._subscription = None
        self._assigned.clear()
        self._positions.clear()
        self._paused.clear()

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Consume exactly ``partitions``, with no group membership (commits, if any, use generation -1)."""
        self._ensure_open()
        if self._subscription in ("topics", "pattern"):
            raise IllegalStateError("assign() while subscribed: call unsubscribe() first")
        wanted = {TopicPartition(*tp) for tp in partitions}
        self._subscription = "manual" if wanted else None
        for partition in self._assigned - wanted:
            self._positions.pop(partition, None)
            self._paused.discard(partition)
        self._assigned = wanted
        self._trace_assignment(time.monotonic())

    def unassign(self) -> None:
        self.assign(())

    def assignment(self) -> set[TopicPartition]:
        return set(self._assigned)

    # ---- consuming -------------------------------------------------------------------------------------------

    def poll(self, timeout_ms: int = 0, max_records: int | None = None) -> dict[TopicPartition, list[Record]]:
        """Records by partition, at most ``max_records`` (default ``max.poll.records``), waiting up to ``timeout_ms``.

        Runs pending rebalance callbacks and async-commit callbacks first, and auto-commits when due.
        """
        self._ensure_open()
        if self._subscription is None:
            raise IllegalStateError("poll() needs subscribe() or assign() first")
        limit = max_records or self.config.max_poll_records
        deadline = time.monotonic() + timeout_ms / 1000
        self._worker.last_poll_ms = self._clock.now_ms()
        if self._member.poll_timed_out:
            self._worker.wake()  # evicted for not polling: rejoin now rather than at the worker's next deadline
        while True:
            self._handle_events(block_s=0)
            self._maybe_auto_commit()
            records = self._fetch(limit)
            if records:
                return records
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return {}
            self._handle_events(block_s=min(remaining, self.config.fetch_backoff_ms / 1000))

    def __iter__(self) -> "Consumer":
        return self

    def __next__(self) -> Record:
        """The next record; StopIteration after ``consumer.timeout.ms`` without one (never, by default)."""
        if not self._iterator_records:
            started = time.monotonic()
            while not self._iterator_records:
                wait_ms = self.config.consumer_timeout_ms
                if wait_ms >= 0 and (time.monotonic() - started) * 1000 >= wait_ms:
                    raise StopIteration
                batch = self.poll(timeout_ms=100 if wait_ms < 0 else min(100, wait_ms))
                self._iterator_records = [r for records in batch.values() for r in records][::-1]
        return self._iterator_records.pop()

    def _fetchable(self) -> list[TopicPartition]:
        return sorted(tp for tp in self._assigned if tp not in self._paused)

    def _fetch(self, limit: int) -> dict[TopicPartition, list[Record]]:
        partitions = self._fetchable()
        if not partitions:
            return {}
        self._resolve_positions(partitions)
        result: dict[TopicPartition, list[Record]] = {}
        count = 0
        start = self._fetch_start % len(partitions)
        self._fetch_start += 1  # rotate so no partition starves the others
        for partition in partitions[start:] + partitions[:start]:
            if count >= limit:
                break
            position = self._positions.get(partition)
            if position is None:
                continue
            try:
                records = self._source.fetch(partition, position, limit - count)
            except OffsetOutOfRangeError:
                log.info(
                    "%s: offset %d out of range; resetting (%s)", partition, position, self.config.auto_offset_reset
                )
                self._positions[partition] = self._reset_offsets([partition])[partition]
                continue
            if records:
                result[partition] = records
                count += len(records)
                self._positions[partition] = records[-1].offset + 1
        if result and self._sinks:
            moment = time.monotonic()
            for partition, records in result.items():
                self._emit(
                    "client.consumed",
                    topic=partition.topic,
                    partition=partition.partition,
                    first_offset=records[0].offset,
                    last_offset=records[-1].offset,
                    monotonic=moment,
                )
        return result

    def _resolve_positions(self, partitions: Iterable[TopicPartition]) -> None:
        missing = [tp for tp in partitions if tp not in self._positions]
        if not missing:
            return
        committed = self._fetch_committed(missing) if self.config.group_id else {}
        unknown = [tp for tp in missing if committed.get(tp) is None]
        reset = self._reset_offsets(unknown) if unknown else {}
        for partition in missing:
            found = committed.get(partition)
            self._positions[partition] = found.offset if found is not None else reset[partition]

    def _reset_offsets(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        policy = self.config.auto_offset_reset
        if policy == "earliest":
            return self._source.beginning_offsets(partitions)
        if policy == "latest":
            return self._source.end_offsets(partitions)
        raise NoOffsetForPartitionError(
            f"no committed offset for {', '.join(map(str, partitions))} and auto.offset.reset=none"
        )

    # ---- positions -------------------------------------------------------------------------------------------

    def position(self, partition: TopicPartition) -> int:
        """The offset of the next record poll() returns for ``partition`` (resolved now if unknown)."""
        partition = self._assigned_partition(partition)
        self._resolve_positions([partition])
        return self._positions[partition]

    def seek(self, partition: TopicPartition, offset: int) -> None:
        self._positions[self._assigned_partition(partition)] = int(offset)

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        chosen = [self._assigned_partition(tp) for tp in partitions] or sorted(self._assigned)
        self._positions.update(self._source.beginning_offsets(chosen))

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        chosen = [self._assigned_partition(tp) for tp in partitions] or sorted(self._assigned)
        self._positions.update(self._source.end_offsets(chosen))

    def pause(self, *partitions: TopicPartition) -> None:
        self._paused.update(self._assigned_partition(tp) for tp in partitions)

    def resume(self, *partitions: TopicPartition) -> None:
        self._paused.difference_update(TopicPartition(*tp) for tp in partitions)

    def paused(self) -> set[TopicPartition]:
        return set(self._paused)

    def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._source.beginning_offsets([TopicPartition(*tp) for tp in partitions])

    def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._source.end_offsets([TopicPartition(*tp) for tp in partitions])

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        """Partition numbers of ``topic`` from the coordinator's metadata (None for an unknown topic)."""
        counts = self._call("Metadata", {"topics": [topic]})
        return set(range(counts[topic])) if topic in counts else None

    def topics(self) -> set[str]:
        return set(self._call("Metadata", {"topics": None}))

    def _assigned_partition(self, partition: TopicPartition) -> TopicPartition:
        partition = TopicPartition(*partition)
        if partition not in self._assigned:
            raise IllegalStateError(f"{partition} is not assigned to this consumer")
        return partition

    # ---- commits ---------------------------------------------------------------------------------------------

    def commit(self, offsets: Mapping[TopicPartition, int | OffsetAndMetadata] | None = None) -> None:
        """Commit ``offsets`` (default: the positions of every assigned partition) and wait for the answer.

        Raises CommitFailedError when the group rebalanced meanwhile (the partitions may belong to another member).
        """
        self._ensure_open()
        chosen = self._commit_offsets(offsets)
        if chosen:
            started = time.monotonic()
            try:
                self._call("OffsetCommit", {"topics": commit_topics(chosen)})
            except ZkcoordError as error:
                self._trace_commit(chosen, error)
                raise
            self._trace_commit(chosen, None, (time.monotonic() - started) * 1000)

    def commit_async(
        self,
        offsets: Mapping[TopicPartition, int | OffsetAndMetadata] | None = None,
        callback: Callable[[dict, Exception | None], None] | None = None,
    ) -> None:
        """Commit without waiting; ``callback(offsets, error_or_None)`` runs in a later poll()."""
        self._ensure_open()
        chosen = self._commit_offsets(offsets)
        if not chosen:
            return
        started = time.monotonic()

        def completed(event: Completed) -> None:  # worker thread: hand the result to the poll side
            self._events.put(("commit", chosen, event.error, callback, (time.monotonic() - started) * 1000))

        self._request("OffsetCommit", {"topics": commit_topics(chosen)}, completed)

    def committed(self, partition: TopicPartition) -> int | None:
        """The group's committed offset for ``partition`` (None when there is none)."""
        found = self._fetch_committed([TopicPartition(*partition)]).get(TopicPartition(*partition))
        return None if found is None else found.offset

    def _commit_offsets(self, offsets) -> dict[TopicPartition, tuple[int, str | None]]:
        if not self.config.group_id:
            raise ConfigError("commits need group.id")
        if offsets is None:
            return {tp: (self._positions[tp], None) for tp in sorted(self._assigned) if tp in self._positions}
        chosen = {}
        for partition, value in offsets.items():
            offset, metadata = (value, None) if isinstance(value, int) else (value[0], value[1])
            chosen[TopicPartition(*partition)] = (int(offset), metadata)
        return chosen

    def _fetch_committed(self, partitions: list[TopicPartition]) -> dict[TopicPartition, OffsetAndMetadata | None]:
        if not self.config.group_id:
            return {}
        topics = [{"name": t, "partition_indexes": ps} for t, ps in partitions_by_topic(partitions).items()]
        found = self._call("OffsetFetch", {"group_id": self.config.group_id, "topics": topics})
        return {tp: (OffsetAndMetadata(*found[tp]) if found.get(tp) else None) for tp in partitions}

    def _maybe_auto_commit(self) -> None:
        if not self.config.enable_auto_commit or not self.config.group_id or not self._assigned:
            return
        if time.monotonic() < self._next_auto_commit:
            return
        self._next_auto_commit = time.monotonic() + self.config.auto_commit_interval_ms / 1000

        def done(offsets, error):
            if error is not None:
                log.warning("auto-commit of %d offsets failed: %s", len(offsets), error)

        self.commit_async(callback=done)

    def _commit_quietly(self) -> None:
        """The commit before a revocation or close, with auto-commit on; a failure is logged, not raised."""
        if self.config.enable_auto_commit and self.config.group_id and self._assigned:
            try:
                self.commit()
            except ZkcoordError as error:
                log.warning("commit before revocation failed: %s", error)

    # ---- requests to the worker ------------------------------------------------------------------------------

    def _request(self, api: str, fields: dict, on_done: Callable[[Completed], None]) -> None:
        """Queue ``api`` in the worker; ``on_done`` runs in the worker thread with the answer (commits are timed)."""
        request_id = next(self._request_ids)

        def command(member: GroupMember, now: int) -> None:
            def done(event: Completed) -> None:
                if api == "OffsetCommit":
                    finished = self._clock.now_ms()
                    self._metrics.on_commit(finished, finished - now)
                on_done(event)

            self._worker.completions[request_id] = done
            member.request(request_id, api, fields, now, self.config.default_api_timeout_ms)

        self._worker.submit(command)

    def _call(self, api: str, fields: dict) -> Any:
        """Send through the worker and wait for the answer (raising its error)."""
        self._ensure_open()
        result = ThreadResult()
        self._request(api, fields, lambda event: result.set(event.value, event.error))
        return result.get(self.config.default_api_timeout_ms / 1000 + 5)

    # ---- events from the worker ------------------------------------------------------------------------------

    def _handle_events(self, block_s: float) -> None:
        """Run what the worker reported, in order; wait up to ``block_s`` for the first event."""
        try:
            event = self._events.get(timeout=block_s)
        except queue.Empty:
            return
        while True:
            self._handle(event)
            try:
                event = self._events.get()
            except queue.Empty:
                return

    def _handle(self, event: Any) -> None:
        if event is _WAKEUP:
            raise WakeupError("wakeup() was called")
        if isinstance(event, Reconcile):
            self._reconcile(event)
        elif isinstance(event, Transition):
            self._generation, self._member_id = event.generation, event.member_id
            self._emit(
                "client.state",
                time_ms=event.now_ms,
                state=event.state.name,
                previous=event.previous.name,
                generation=event.generation,
                member_id=event.member_id,
            )
        elif isinstance(event, Fatal):
            self._fatal = event.error
            raise event.error
        elif isinstance(event, tuple) and event[0] == "commit":
            _, offsets, error, callback, latency_ms = event
            self._trace_commit(offsets, error, latency_ms)
            if callback is not None:
                callback({tp: OffsetAndMetadata(*value) for tp, value in offsets.items()}, error)

    def _reconcile(self, event: Reconcile) -> None:
        """Run the callbacks of one rebalance step, then let the worker go on (exclusive ownership hinges on it)."""
        if self._subscription not in ("topics", "pattern"):
            self._worker.submit(lambda member, now: member.ack(event.event_id, now))
            return
        if event.lost:
            self._assigned.difference_update(event.lost)
            self._forget(event.lost)
            self._run_listener("on_partitions_lost", list(event.lost))
            self._trace_assignment(time.monotonic(), event)
        if event.revoked or event.run_revoked:
            self._revoke(list(event.revoked), event=event)
        if event.run_assigned:
            before = time.monotonic()
            self._assigned.update(event.assigned)
            self._trace_assignment(before, event)
            self._run_listener("on_partitions_assigned", list(event.assigned))
        self._worker.submit(lambda member, now: member.ack(event.event_id, now))

    def _revoke(self, partitions: list[TopicPartition], event: Reconcile | None = None, commit: bool = True) -> None:
        """Commit (with auto-commit on), run on_partitions_revoked, then stop owning ``partitions``."""
        if commit:
            self._commit_quietly()
        self._run_listener("on_partitions_revoked", partitions)
        self._assigned.difference_update(partitions)
        self._forget(partitions)
        self._trace_assignment(time.monotonic(), event)

    def _forget(self, partitions: Iterable[TopicPartition]) -> None:
        for partition in partitions:
            self._positions.pop(partition, None)
            self._paused.discard(partition)

    def _run_listener(self, method: str, partitions: list[TopicPartition]) -> None:
        self._emit(f"client.{method.removeprefix('on_')}", partitions=[list(tp) for tp in partitions])
        listener = self._listener
        if listener is None:
            return
        callback = getattr(listener, method, None)
        if callback is None and method == "on_partitions_lost":
            callback = getattr(listener, "on_partitions_revoked", None)  # Kafka's default onPartitionsLost
        if callback is not None:
            callback(partitions)

    # ---- life cycle ------------------------------------------------------------------------------------------

    def wakeup(self) -> None:
        """Make the current (or next) poll() raise WakeupError; safe from any thread."""
        self._events.put(_WAKEUP)

    def close(self, autocommit: bool = True, timeout_ms: int | None = None) -> None:
        """Commit (when ``autocommit`` and auto-commit are on), revoke, leave the group (dynamic members only: a static
        member sends no LeaveGroup, KIP-345), stop the worker."""
        if self._closed:
            return
        timeout_s = (timeout_ms or self.config.default_api_timeout_ms) / 1000
        try:
            if self._fatal is None and self._subscription in ("topics", "pattern"):
                try:
                    self._revoke(sorted(self._assigned), commit=autocommit)
                except ZkcoordError as error:
                    log.warning("revocation at close failed: %s", error)
            elif autocommit and self._subscription == "manual":
                self._commit_quietly()
            left = ThreadResult()

            def leave(member: GroupMember, now: int) -> None:
                def on_event(event) -> None:
                    if isinstance(event, Transition) and event.state == MemberState.LEFT:
                        left.set()

                self._worker.observers.append(on_event)
                member.leave(now)

            self._worker.submit(leave)
            try:
                left.get(timeout_s)
            except (TimeoutError, RuntimeError):
                log.warning("no LeaveGroup answer within %.1fs", timeout_s)
        finally:
            self._closed = True
            if self._metrics_server is not None:
                self._worker.call(self._metrics_server.stop)
            self._worker.stop()
            self._emit("client.closed")
            if self._owns_source:
                self._source.close()

    def __enter__(self) -> "Consumer":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def _ensure_open(self) -> None:
        if self._closed:
            raise IllegalStateError("this consumer is closed")
        if self._fatal is not None:
            raise self._fatal

    # ---- observability ---------------------------------------------------------------------------------------

    def metrics(self) -> dict[str, float]:
        """Kafka's consumer-coordinator-metrics by name (``join-rate``, ``rebalance-latency-avg``, ...); any thread."""
        member = self._member  # plain reads of values the worker replaces whole; no lock needed
        heartbeat = member.last_heartbeat_ms if member.generation >= 0 else None
        return self._metrics.snapshot(self._clock.now_ms(), heartbeat, len(member.owned))

    @property
    def member_state(self) -> str:
        """The member's state in the group protocol (``STABLE``, ``PREPARING_REBALANCE``, ...)."""
        return self._member.state.name

    def _serve_metrics(self, port: int) -> None:
        from prometheus_client import CollectorRegistry

        from zkcoord.server.metrics import serve_metrics

        registry = CollectorRegistry()
        registry.register(PrometheusCollector(self.metrics, self.config.client_id, self.config.group_id or ""))
        self._metrics_server = self._worker.call(lambda: serve_metrics(registry, "127.0.0.1", port))

    def _emit(self, event_type: str, time_ms: int | None = None, **fields: Any) -> None:
        if not self._sinks:
            return
        event = make_event(
            event_type,
            time_ms if time_ms is not None else self._clock.now_ms(),
            self.config.group_id or "",
            self.name,
            **fields,
        )
        for sink in self._sinks:
            sink(event)

    def _trace_assignment(self, before: float, event: Reconcile | None = None) -> None:
        if self._sinks:
            self._emit(
                "client.assignment",
                assignment={self.name: [list(tp) for tp in sorted(self._assigned)]},
                generation=event.generation if event else self._generation,
                member_id=event.member_id if event else self._member_id,
                monotonic_before=before,
                monotonic_after=time.monotonic(),
            )

    def _trace_commit(self, offsets: Mapping, error: Exception | None, latency_ms: float | None = None) -> None:
        if self._sinks:
            self._emit(
                "client.committed",
                offsets=[[tp.topic, tp.partition, value[0]] for tp, value in sorted(offsets.items())],
                error=None if error is None else f"{type(error).__name__}: {error}",
                latency_ms=latency_ms,
            )
