"""``Consumer``: a kafka-python-like consumer whose group coordination runs in a background worker.

Two sides (Kafka's consumer threading refactor): the **poll side** is the caller's thread — it fetches records from
the record source, keeps positions, and runs the rebalance listener's callbacks, in order and never concurrently;
the **worker** (``zkcoord.client.worker``) does every coordinator request on a hub of its own in a native thread,
so heartbeats go on while the caller processes records, sleeps or runs CPU-bound code. The sides talk through two
queues: commands to the worker, events (rebalances, completed async commits, fatal errors) back to poll().

Ownership is exclusive because the worker does not go on after a revocation until poll() has run the callbacks
and acknowledged it (eager: before it rejoins; cooperative: before the follow-up rebalance), because poll() hands
out no record while the member's session is in doubt by its own clock (a pause, a partition, a coordinator
failover: nothing confirmed for session.timeout.ms) until the coordinator confirms or ends it, and because it
drops the fetched records of partitions given up or put in doubt while it fetched, as Java's fetcher does.

The poll side's parts: partitions and positions in ``zkcoord.client.subscription``, commits and committed offsets
in ``zkcoord.client.commits``, the rebalance listener and its callbacks in ``zkcoord.client.rebalance``, trace
events in ``zkcoord.client.tracing``.
"""

import logging
import queue
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from zkcoord.assign.consumer import assignor_for
from zkcoord.client.commits import CommitCallback, CommitDone, Commits, Offsets
from zkcoord.client.config import ConsumerConfig
from zkcoord.client.metrics import ClientMetrics, PrometheusCollector
from zkcoord.client.rebalance import ConsumerRebalanceListener, RebalanceCallbacks
from zkcoord.client.subscription import MANUAL, PATTERN, TOPICS, SubscriptionState
from zkcoord.client.tracing import ConsumerTrace
from zkcoord.client.worker import Worker
from zkcoord.clock import SystemClock
from zkcoord.config import build_config
from zkcoord.errors import (
    ConfigError,
    IllegalStateError,
    NoOffsetForPartitionError,
    OffsetOutOfRangeError,
    SourceError,
    WakeupError,
    ZkcoordError,
)
from zkcoord.membership import (
    Completed,
    Fatal,
    GroupMember,
    MembershipConfig,
    MemberState,
    Reconcile,
    Transition,
)
from zkcoord.model import TopicPartition
from zkcoord.sources import Record, RecordSource, SyntheticSource
from zkcoord.trace import TraceSink
from zkcoord.zk.session import ThreadQueue, ThreadResult

log = logging.getLogger(__name__)

_WAKEUP = object()


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
        sinks: tuple[TraceSink, ...] = (trace,) if callable(trace) else tuple(trace)
        self.name = self.config.group_instance_id or f"{self.config.client_id}-{uuid.uuid4().hex[:8]}"
        self._trace = ConsumerTrace(sinks, self._clock.now_ms, self.config.group_id or "", self.name)
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
        self._state = SubscriptionState()
        self._commits = Commits(
            self.config,
            self._state,
            self._trace,
            request=self._request,
            call=self._call,
            report=self._events.put,
            ensure_open=self._ensure_open,
        )
        self._rebalance = RebalanceCallbacks(self._state, self._trace, self._commits.commit_quietly, self._ack)
        self._request_ids = iter(range(1, 1 << 62))
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
        if self._state.kind == MANUAL:
            raise IllegalStateError("subscribe() after assign(): call unassign() first")
        if not self.config.group_id:
            raise ConfigError("subscribe() needs group.id; use assign() to consume without a group")
        topics = [topics] if isinstance(topics, str) else list(topics)
        if bool(topics) == (pattern is not None):
            raise ValueError("give topics or a pattern, not both")
        self._state.kind = PATTERN if pattern is not None else TOPICS
        self._rebalance.listener = listener
        self._worker.submit(lambda member, now: member.subscribe(topics, pattern, now))

    def subscription(self) -> set[str]:
        return set(self._member.topics) if self._state.in_group else set()

    def unsubscribe(self) -> None:
        """Give up every partition (commit first with auto-commit on) and leave the group."""
        self._ensure_open()
        if self._state.in_group:
            self._rebalance.revoke(sorted(self._state.assigned))
            self._worker.submit(lambda member, now: member.unsubscribe(now))
        self._state.clear()

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Consume exactly ``partitions``, with no group membership (commits, if any, use generation -1)."""
        self._ensure_open()
        if self._state.in_group:
            raise IllegalStateError("assign() while subscribed: call unsubscribe() first")
        wanted = {TopicPartition(*tp) for tp in partitions}
        self._state.kind = MANUAL if wanted else None
        self._state.remove(self._state.assigned - wanted)
        self._state.add(wanted)
        self._trace.assignment(self._state.assigned, time.monotonic())

    def unassign(self) -> None:
        self.assign(())

    def assignment(self) -> set[TopicPartition]:
        return set(self._state.assigned)

    # ---- consuming -------------------------------------------------------------------------------------------

    def poll(self, timeout_ms: int = 0, max_records: int | None = None) -> dict[TopicPartition, list[Record]]:
        """Records by partition, at most ``max_records`` (default ``max.poll.records``), waiting up to ``timeout_ms``.

        Runs pending rebalance callbacks and async-commit callbacks first, and auto-commits when due.
        """
        self._ensure_open()
        if self._state.kind is None:
            raise IllegalStateError("poll() needs subscribe() or assign() first")
        limit = max_records or self.config.max_poll_records
        deadline = time.monotonic() + timeout_ms / 1000
        self._worker.last_poll_ms = self._clock.now_ms()
        if self._member.poll_timed_out:
            self._worker.wake()  # evicted for not polling: rejoin now rather than at the worker's next deadline
        while True:
            self._handle_events(block_s=0)
            self._await_loss()
            if not self._session_in_doubt():
                self._commits.maybe_auto_commit()
            fetched = self._fetch(limit)
            if fetched:
                # What happened while the source answered: a session in doubt, partitions revoked or lost.
                self._handle_events(block_s=0)
                self._await_loss()
                records = self._take(fetched)
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

    def _session_in_doubt(self) -> bool:
        """Whether the group may have given this member's partitions away unconfirmed: none of them is read then."""
        return self._state.in_group and self._member.session_in_doubt(self._clock.now_ms())

    def _await_loss(self) -> None:
        """A generation the worker already gave up may still have its loss on the way to this thread: run that
        before a record goes out."""
        if self._state.in_group and self._member.generation < 0 and self._state.assigned:
            self._worker.catch_up(self.config.default_api_timeout_ms / 1000)
            self._handle_events(block_s=0)

    def _take(self, fetched: dict[TopicPartition, tuple[int, list[Record]]]) -> dict[TopicPartition, list[Record]]:
        """The records of partitions still read from the position they were fetched at, each position moved past
        them; Java's fetcher drops the rest likewise (revoked, lost or sought since the fetch). None while the
        session is in doubt."""
        if self._session_in_doubt():
            return {}
        records = {
            partition: batch
            for partition, (position, batch) in fetched.items()
            if self._state.positions.get(partition) == position
        }
        for partition, batch in records.items():
            self._state.positions[partition] = batch[-1].offset + 1
        self._trace.consumed(records)
        return records

    def _fetch(self, limit: int) -> dict[TopicPartition, tuple[int, list[Record]]]:
        """Up to ``limit`` records, by partition with the position each was read from; positions do not move."""
        partitions = [] if self._session_in_doubt() else self._state.fetchable()
        if not partitions:
            return {}
        self._resolve_positions(partitions)
        result: dict[TopicPartition, tuple[int, list[Record]]] = {}
        count = 0
        start = self._fetch_start % len(partitions)
        self._fetch_start += 1  # rotate so no partition starves the others
        for partition in partitions[start:] + partitions[:start]:
            if count >= limit:
                break
            position = self._state.positions.get(partition)
            if position is None:
                continue
            try:
                records = self._source.fetch(partition, position, limit - count)
            except OffsetOutOfRangeError:
                log.info(
                    "%s: offset %d out of range; resetting (%s)", partition, position, self.config.auto_offset_reset
                )
                self._state.positions[partition] = self._reset_offsets([partition])[partition]
                continue
            except SourceError:
                if result:  # earlier partitions' records are handed out; the next poll meets the error again
                    break
                raise
            if records:
                result[partition] = (position, records)
                count += len(records)
        return result

    def _resolve_positions(self, partitions: Iterable[TopicPartition]) -> None:
        missing = [tp for tp in partitions if tp not in self._state.positions]
        if not missing:
            return
        committed = self._commits.committed(missing) if self.config.group_id else {}
        unknown = [tp for tp in missing if committed.get(tp) is None]
        reset = self._reset_offsets(unknown) if unknown else {}
        for partition in missing:
            found = committed.get(partition)
            self._state.positions[partition] = found.offset if found is not None else reset[partition]

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
        partition = self._state.assigned_partition(partition)
        self._resolve_positions([partition])
        return self._state.positions[partition]

    def seek(self, partition: TopicPartition, offset: int) -> None:
        self._state.positions[self._state.assigned_partition(partition)] = int(offset)

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        chosen = [self._state.assigned_partition(tp) for tp in partitions] or sorted(self._state.assigned)
        self._state.positions.update(self._source.beginning_offsets(chosen))

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        chosen = [self._state.assigned_partition(tp) for tp in partitions] or sorted(self._state.assigned)
        self._state.positions.update(self._source.end_offsets(chosen))

    def pause(self, *partitions: TopicPartition) -> None:
        self._state.paused.update(self._state.assigned_partition(tp) for tp in partitions)

    def resume(self, *partitions: TopicPartition) -> None:
        self._state.paused.difference_update(TopicPartition(*tp) for tp in partitions)

    def paused(self) -> set[TopicPartition]:
        return set(self._state.paused)

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

    # ---- commits ---------------------------------------------------------------------------------------------

    def commit(self, offsets: Offsets | None = None) -> None:
        """Commit ``offsets`` (default: the positions of every assigned partition) and wait for the answer.

        Raises CommitFailedError when the group rebalanced meanwhile (the partitions may belong to another member).
        """
        self._commits.commit(offsets)

    def commit_async(self, offsets: Offsets | None = None, callback: CommitCallback | None = None) -> None:
        """Commit without waiting; ``callback(offsets, error_or_None)`` runs in a later poll()."""
        self._commits.commit_async(offsets, callback)

    def committed(self, partition: TopicPartition) -> int | None:
        """The group's committed offset for ``partition`` (None when there is none)."""
        found = self._commits.committed([TopicPartition(*partition)]).get(TopicPartition(*partition))
        return None if found is None else found.offset

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
            self._rebalance.reconcile(event)
        elif isinstance(event, Transition):
            self._trace.state(event)
        elif isinstance(event, Fatal):
            self._fatal = event.error
            raise event.error
        elif isinstance(event, CommitDone):
            self._commits.done(event)

    def _ack(self, event_id: int) -> None:
        self._worker.submit(lambda member, now: member.ack(event_id, now))

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
            if self._fatal is None and self._state.in_group:
                try:
                    self._rebalance.revoke(sorted(self._state.assigned), commit=autocommit)
                except ZkcoordError as error:
                    log.warning("revocation at close failed: %s", error)
            elif autocommit and self._state.kind == MANUAL:
                self._commits.commit_quietly()
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
            self._trace.emit("client.closed")
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
    def member_id(self) -> str:
        """The member id the coordinator gave this member ("" before its first join; confluent's ``memberid()``)."""
        return self._member.member_id

    @property
    def member_state(self) -> str:
        """The member's state in the group protocol (``STABLE``, ``PREPARING_REBALANCE``, ...)."""
        return self._member.state.name

    def _serve_metrics(self, port: int) -> None:
        from prometheus_client import CollectorRegistry

        from zkcoord.metrics_http import serve_metrics

        registry = CollectorRegistry()
        registry.register(PrometheusCollector(self.metrics, self.config.client_id, self.config.group_id or ""))
        self._metrics_server = self._worker.call(lambda: serve_metrics(registry, "127.0.0.1", port))
