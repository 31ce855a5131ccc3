"""Kafka 0.8.2's ConsoleConsumer loop over a started :class:`~zkcoord.legacy.consumer.LegacyConsumer`.

:class:`StreamReaders` reads every stream of the member in a thread of its own and hands each record to one
callback, counting records per partition, up to an optional maximum. A record a stream hands out moves the
member's consumed position, so whatever a commit covers, the callback got: above the maximum a record is given
back to its partition (``seek``) instead, and if that is no longer possible it is handed on after all.
:func:`format_record` and :func:`format_counts` are what ``zkcoord legacy run`` prints.
"""

import logging
import threading
from collections import Counter
from collections.abc import Callable, Mapping

from zkcoord.errors import ConsumerTimeoutError, ZkcoordError
from zkcoord.legacy.consumer import LegacyConsumer
from zkcoord.legacy.stream import KafkaStream
from zkcoord.model import TopicPartition
from zkcoord.sources import Record

log = logging.getLogger(__name__)

# How long close() waits for each reading thread after the member closed (its streams then end at once).
THREAD_JOIN_TIMEOUT_S = 10.0


def format_record(record: Record, *, value: bool = True, key: bool = False, offsets: bool = False) -> bytes:
    """One output line, without its line separator: the value as ConsoleConsumer's DefaultMessageFormatter writes
    it, after the key and a tab with ``key`` (a null key as ``null``), after ``topic partition offset`` and a tab
    with ``offsets``."""
    fields = []
    if offsets:
        fields.append(f"{record.topic} {record.partition} {record.offset}".encode())
    if key:
        fields.append(b"null" if record.key is None else record.key)
    if value:
        fields.append(record.value)
    return b"\t".join(fields)


def format_counts(counts: Mapping[TopicPartition, int], *, so_far: bool = False) -> str:
    """``Consumed 7 messages (t-0: 3, t-1: 4)``: 0.8.2's closing line, with the count of each partition;
    ``Consumed 7 messages so far (...)`` while reading."""
    detail = ", ".join(f"{tp.topic}-{tp.partition}: {count}" for tp, count in sorted(counts.items()))
    progress = " so far" if so_far else ""
    return f"Consumed {sum(counts.values())} messages{progress}" + (f" ({detail})" if detail else "")


class StreamReaders:
    """A thread per stream of ``consumer`` (already started), each handing its records to ``on_record``.

    ``stop`` is set once ``max_records`` records were handed on, once every stream has ended (each raised
    ``ConsumerTimeoutError`` after ``consumer.timeout.ms`` without a record, where ConsoleConsumer's one stream
    ends it), or once a stream or ``on_record`` failed (``failure``). Set it yourself to stop (Ctrl-C), then call
    :meth:`close`, which closes the member: its final commit covers exactly the records handed on.
    """

    def __init__(
        self,
        consumer: LegacyConsumer,
        on_record: Callable[[Record], None],
        *,
        max_records: int | None = None,
        stop: threading.Event | None = None,
    ):
        self._consumer = consumer
        self._on_record = on_record
        self._max_records = max_records
        self.stop = stop or threading.Event()
        self.failure: Exception | None = None
        self._lock = threading.Lock()  # the counts, the running threads and closing
        self._counts: Counter[TopicPartition] = Counter()
        self._handed_on = 0
        self._closing = False
        self._threads = [
            threading.Thread(target=self._read, args=(stream,), name=f"stream-{stream.thread_id}", daemon=True)
            for streams in consumer.streams().values()
            for stream in streams
        ]
        self._running = len(self._threads)

    def start(self) -> "StreamReaders":
        for thread in self._threads:
            thread.start()
        return self

    def counts(self) -> dict[TopicPartition, int]:
        """Records handed on so far, per partition."""
        with self._lock:
            return dict(self._counts)

    def close(self) -> None:
        """Close the member (its final commit, with auto-commit on), then wait for the threads, whose streams end."""
        with self._lock:  # from here on no record goes back: the member is closing
            self._closing = True
        self._consumer.close()
        for thread in self._threads:
            thread.join(THREAD_JOIN_TIMEOUT_S)
            if thread.is_alive():
                log.warning("thread %s still hands on a record after close", thread.name)

    def _read(self, stream: KafkaStream) -> None:
        try:
            for record in stream:  # ends (StopIteration) when the member closes
                if not self._admit(record):
                    return
                self._on_record(record)
                if self._limit_reached():
                    return
        except ConsumerTimeoutError:
            log.info("no record on stream %s within consumer.timeout.ms; it ends", stream.thread_id)
        except Exception as error:  # a SourceError, or on_record's (a closed standard output)
            with self._lock:
                self.failure = self.failure or error
            self.stop.set()
        finally:
            with self._lock:
                self._running -= 1
                if not self._running:
                    self.stop.set()

    def _admit(self, record: Record) -> bool:
        """Count ``record`` and say to hand it on; False when it was above the maximum and went back."""
        with self._lock:
            if self._limit_reached() and not self._closing and self._give_back(record):
                return False
            self._handed_on += 1
            self._counts[TopicPartition(record.topic, record.partition)] += 1
            if self._limit_reached():
                self.stop.set()
            return True

    def _limit_reached(self) -> bool:
        return self._max_records is not None and self._handed_on >= self._max_records

    def _give_back(self, record: Record) -> bool:
        """Move the partition's position back to ``record``, so no commit covers it; False if the member no longer
        owns the partition (a rebalance committed past it already) or stopped."""
        try:
            self._consumer.seek(TopicPartition(record.topic, record.partition), record.offset)
        except ZkcoordError as error:
            log.info("record %s-%d@%d stays consumed: %s", record.topic, record.partition, record.offset, error)
            return False
        return True
