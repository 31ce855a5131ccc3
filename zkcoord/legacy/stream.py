"""A legacy member's streams: 0.8.2's KafkaStream and ConsumerIterator, and the view of ownership each one reads.

Records reach the application through :class:`KafkaStream`, iterated in user threads that fetch from the
member's :class:`~zkcoord.sources.RecordSource` themselves. Ownership and consumed positions belong to the
member's hub thread; each stream sees its share through a view the hub thread replaces under the stream's
lock, the only lock here, held for a few bytecodes at a time. :class:`Streams` is the member's set of them.

A stream runs in the caller's thread: this module imports neither kazoo nor the member's hub-side parts, and
takes from gevent only the unpatched ``_thread`` lock.
"""

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass

from gevent import monkey

from zkcoord.assign.legacy import thread_id
from zkcoord.errors import ConsumerTimeoutError, OffsetOutOfRangeError, UnknownPartitionError
from zkcoord.legacy.config import AUTO_OFFSET_RESET_SMALLEST, LegacyConsumerConfig
from zkcoord.model import TopicPartition
from zkcoord.sources import Record, RecordSource
from zkcoord.zk.layout import ConsumerRegistration

log = logging.getLogger(__name__)

# The key of streams() for a wildcard member: its streams take every matched topic (createMessageStreamsByFilter).
WILDCARD_STREAMS = "*"
# How often an idle stream looks again for new records, a new assignment or close().
STREAM_IDLE_CHECK_S = 0.005
# Unpatched, so a stream's lock stays a real lock when the application monkey-patched threading.
_allocate_lock = monkey.get_original("_thread", "allocate_lock")


@dataclass
class Owned:
    """The registry entry of a partition the member owns."""

    thread_id: str
    position: int  # the consumed offset: next offset to consume (§1.6)
    checkpointed: int | None  # last value written to or read from ZooKeeper; None: not known


class KafkaStream:
    """One 0.8.2 stream: iterating it yields the records of the partitions its thread owns now.

    ``for record in stream`` hands out :class:`~zkcoord.sources.Record` s in offset order per
    partition, taking up to ``fetch.message.max.records`` from one partition before moving on to the
    next (round robin), each fetched from the member's consumed position. Handing out a record moves
    that position to ``offset + 1`` (the ConsumerIterator's consumed offset), which is what
    ``commit()`` and auto-commit write. A rebalance that releases a partition stops the stream from
    yielding its records at once (0.8.2 clears the queues; records already handed out stay consumed).

    ``next()`` blocks while nothing is available, or raises :class:`~zkcoord.errors.ConsumerTimeoutError`
    after ``consumer.timeout.ms`` (the stream stays usable), and raises ``StopIteration`` once the
    consumer closes. A :class:`~zkcoord.errors.SourceError` of the source propagates likewise. Iterate
    each stream from one thread at a time; different streams may be iterated in parallel.
    """

    def __init__(
        self, thread: str, topic: str | None, *, config: LegacyConsumerConfig, source: RecordSource, consumer_id: str
    ):
        self.thread_id = thread
        self.topic = topic  # None: every topic a wildcard matches
        self._config = config
        self._source = source
        self._consumer_id = consumer_id
        self._lock = _allocate_lock()
        # Written by the hub thread under _lock: partition → its registry entry, while this stream owns it.
        self._view: dict[TopicPartition, Owned] = {}
        self._shut = False
        # The chunk being handed out (read by this stream's iterating thread only).
        self._chunk: list[Record] = []
        self._chunk_index = 0
        self._chunk_partition: TopicPartition | None = None
        self._chunk_owner: Owned | None = None
        self._expected = -1  # the position handing out the next chunk record requires
        self._cursor = 0
        # Partitions the source did not know, and when to ask it again (0.8.2's leader finder keeps retrying).
        self._unknown_until: dict[TopicPartition, float] = {}
        # Records and key+value bytes handed out, per topic: [records, bytes] lists only the iterating thread
        # changes; metrics read them from any thread.
        self.consumed: dict[str, list[int]] = {}
        self._chunk_consumed = [0, 0]

    def __repr__(self) -> str:
        return f"KafkaStream({self.thread_id!r}, topic={self.topic!r})"

    def __iter__(self) -> "KafkaStream":
        return self

    def __next__(self) -> Record:
        if not self._shut:
            record = self._take()  # the common case: the next record of the chunk in hand
            if record is not None:
                return record
        return self._wait_for_record()

    def _wait_for_record(self) -> Record:
        timeout_ms = self._config.consumer_timeout_ms
        deadline = None if timeout_ms < 0 else time.monotonic() + timeout_ms / 1000.0
        while not self._shut:
            record = self._take()
            if record is not None:
                return record
            if self._refill():
                continue
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ConsumerTimeoutError(
                        f"no record on stream {self.thread_id} within consumer.timeout.ms={timeout_ms}"
                    )
                time.sleep(min(STREAM_IDLE_CHECK_S, left))
            else:
                time.sleep(STREAM_IDLE_CHECK_S)
        raise StopIteration

    def partitions(self) -> list[TopicPartition]:
        """The partitions this stream yields from now."""
        with self._lock:
            return sorted(self._view)

    # ---- hub thread ----------------------------------------------------------------------------------

    def _set_view(self, view: dict[TopicPartition, Owned]) -> None:
        with self._lock:
            if not self._shut:  # a closing member may still publish; a shut stream stays empty
                self._view = view

    def _shutdown(self) -> None:
        with self._lock:
            self._view = {}
            self._shut = True

    def _move(self, owned: Owned, position: int) -> None:
        """Under the lock, so a record being handed out cannot overwrite the new position."""
        with self._lock:
            owned.position = position

    # ---- the iterating thread ------------------------------------------------------------------------

    def _take(self) -> Record | None:
        """The next chunk record, if its partition is still ours and nobody moved its position."""
        if self._chunk_index < len(self._chunk):
            record = self._chunk[self._chunk_index]
            self._chunk_index += 1
            with self._lock:
                owned = self._chunk_owner
                if self._view.get(self._chunk_partition) is owned and owned.position == self._expected:
                    owned.position = self._expected = record.offset + 1
                    consumed = self._chunk_consumed
                    consumed[0] += 1
                    consumed[1] += len(record.value) + (0 if record.key is None else len(record.key))
                    return record
            self._chunk = []  # released, seeked or reset meanwhile: drop the rest, as 0.8.2 clears the queue
        return None

    def _refill(self) -> bool:
        """Fetch the next chunk, trying each owned partition once starting after the last one served."""
        with self._lock:
            view = sorted(self._view.items())
        batch = self._config.fetch_message_max_records
        for step in range(len(view)):
            index = (self._cursor + step) % len(view)
            partition, owned = view[index]
            if self._unknown_until.get(partition, 0.0) > time.monotonic():
                continue
            position = owned.position
            try:
                if position < 0:
                    position = self._reset(partition, owned, position)
                    if position < 0:
                        continue
                records = self._source.fetch(partition, position, batch)
            except UnknownPartitionError as error:
                if partition not in self._unknown_until:
                    log.warning(
                        "the source does not know partition=%s member=%s error=%s; asking again every %d ms",
                        partition,
                        self._consumer_id,
                        error,
                        self._config.refresh_leader_backoff_ms,
                    )
                self._unknown_until[partition] = time.monotonic() + self._config.refresh_leader_backoff_ms / 1000.0
                continue
            except OffsetOutOfRangeError as error:
                log.warning(
                    "offset out of range member=%s partition=%s offset=%d error=%s; applying auto.offset.reset=%s",
                    self._consumer_id,
                    partition,
                    position,
                    error,
                    self._config.auto_offset_reset,
                )
                self._reset(partition, owned, position)
                continue
            self._unknown_until.pop(partition, None)
            if records:
                self._chunk, self._chunk_index = records, 0
                self._chunk_partition, self._chunk_owner, self._expected = partition, owned, position
                self._chunk_consumed = self.consumed.setdefault(partition.topic, [0, 0])
                self._cursor = index + 1
                return True
        return False

    def _reset(self, partition: TopicPartition, owned: Owned, stale: int) -> int:
        """Apply ``auto.offset.reset`` if ``owned`` is still ours at ``stale``; the position after.

        The reset position is the source's beginning (``smallest``) or its log end (``largest``).
        """
        if self._config.auto_offset_reset == AUTO_OFFSET_RESET_SMALLEST:
            offset = self._source.beginning_offsets([partition])[partition]
        else:
            offset = self._source.end_offsets([partition])[partition]
        with self._lock:
            if self._view.get(partition) is owned and owned.position == stale:
                owned.position = offset
            return owned.position


class Streams:
    """The member's KafkaStreams by subscription key, and the views of ownership the hub thread gives them.

    createMessageStreams: a stream per (topic, thread); createMessageStreamsByFilter: a stream per thread,
    shared by every matched topic under :data:`WILDCARD_STREAMS` (§2.2, §2.4). Thread ids are the registered ones.
    """

    def __init__(
        self, registration: ConsumerRegistration, config: LegacyConsumerConfig, source: RecordSource, consumer_id: str
    ):
        self._wildcard = registration.is_wildcard

        def make(count: int, topic: str | None) -> list[KafkaStream]:
            return [
                KafkaStream(thread_id(consumer_id, n), topic, config=config, source=source, consumer_id=consumer_id)
                for n in range(count)
            ]

        subscription = registration.subscription
        if self._wildcard:
            self._by_key = {WILDCARD_STREAMS: make(next(iter(subscription.values())), None)}
        else:
            self._by_key = {topic: make(count, topic) for topic, count in subscription.items()}

    def by_key(self) -> dict[str, list[KafkaStream]]:
        return {key: list(streams) for key, streams in self._by_key.items()}

    def consumed(self) -> dict[str, tuple[int, int]]:
        """``{topic: (records, key+value bytes)}`` every stream handed out so far (any thread)."""
        totals: dict[str, tuple[int, int]] = {}
        for streams in self._by_key.values():
            for stream in streams:
                for topic, (records, size) in list(stream.consumed.items()):
                    before = totals.get(topic, (0, 0))
                    totals[topic] = (before[0] + records, before[1] + size)
        return totals

    def shut_down(self) -> None:
        """0.8.2's shutdown command: the streams stop for good, and nothing is handed out after (any thread)."""
        for streams in self._by_key.values():
            for stream in streams:
                stream._shutdown()

    # ---- hub thread ----------------------------------------------------------------------------------

    def show(self, registry: Mapping[TopicPartition, Owned]) -> None:
        """Give each stream the registry entries of its thread (and topic)."""
        views: dict[tuple[str, str], dict[TopicPartition, Owned]] = {}
        for tp, owned in sorted(registry.items()):
            views.setdefault((owned.thread_id, WILDCARD_STREAMS if self._wildcard else tp.topic), {})[tp] = owned
        for key, streams in self._by_key.items():
            for stream in streams:
                stream._set_view(views.get((stream.thread_id, key), {}))

    def set_position(self, partition: TopicPartition, owned: Owned, offset: int) -> None:
        """Move an owned partition's position under its stream's lock: its stream reads on from there."""
        for stream in self._by_key.get(WILDCARD_STREAMS if self._wildcard else partition.topic, ()):
            if stream.thread_id == owned.thread_id:
                stream._move(owned, offset)
                return
        owned.position = offset
