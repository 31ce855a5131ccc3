"""Records from a real Kafka cluster through kafka-python (an optional extra: ``pip install zkcoord[kafka]``).

One ``KafkaConsumer`` with no group (``group_id=None``, no auto-commit) that has the partition being
read ``assign``-ed; it is ``seek``-ed only when a fetch does not continue where the last one stopped,
so sequential reads of one partition keep kafka-python's prefetched data. kafka-python's consumer is not
thread-safe: one lock serializes every call. Imports kafka-python lazily; must not import consumers,
gevent or kazoo.
"""

import logging
import threading
import time
from collections.abc import Iterable
from typing import Any

from zkcoord.errors import OffsetOutOfRangeError, SourceError, UnknownPartitionError
from zkcoord.model import TopicPartition
from zkcoord.sources.base import Record, as_partition, build_records, parse_spec

log = logging.getLogger(__name__)

SPEC_KIND = "kafka"
# When a fetch starts at the log end it waits this long for records to arrive (a short long-poll,
# so an idle stream does not hold the lock that other streams' fetches need).
IDLE_POLL_MS = 10
# How long the broker holds a fetch that finds nothing new (kafka-python's default is 500 ms). While it holds one,
# kafka-python sends no other fetch to that broker, so a fetch of the next partition, which may have records,
# would find none for that long.
DEFAULT_FETCH_MAX_WAIT_MS = 10
_FIXED_CONFIG = frozenset({"group_id", "enable_auto_commit", "auto_offset_reset", "bootstrap_servers"})


def _kafka():
    try:
        import kafka
        import kafka.errors
    except ImportError:
        raise SourceError(
            "the kafka source needs kafka-python: pip install 'zkcoord[kafka]' (or kafka-python>=2.0)"
        ) from None
    return kafka


def _spec_value(value: str) -> Any:
    """Spec values are text; kafka-python wants ints and bools for its numeric and flag settings."""
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    try:
        return int(value)
    except ValueError:
        return value


class KafkaSource:
    """A :class:`~zkcoord.sources.RecordSource` over a Kafka cluster.

    ``kafka_python_config`` goes to ``KafkaConsumer`` as is (``client_id``, ``security_protocol``,
    ``request_timeout_ms`` ...); ``group_id``, ``enable_auto_commit`` and ``auto_offset_reset`` are
    fixed by this class, and ``fetch_max_wait_ms`` defaults to 10. A tombstone's ``None`` value is
    handed out as ``b""``.
    """

    def __init__(self, bootstrap_servers: str | list[str], **kafka_python_config: Any):
        kafka = _kafka()
        servers = bootstrap_servers if isinstance(bootstrap_servers, str) else ",".join(bootstrap_servers)
        if not servers.strip():
            raise SourceError("kafka source: bootstrap servers are required (host:port[,host:port])")
        fixed = sorted(_FIXED_CONFIG & set(kafka_python_config))
        if fixed:
            raise SourceError(f"kafka source: {', '.join(fixed)} cannot be configured (it reads without a group)")
        self.bootstrap_servers = servers
        self.spec = f"{SPEC_KIND}:bootstrap={servers}" + "".join(
            f",{key}={value}" for key, value in sorted(kafka_python_config.items())
        )
        self._errors = kafka.errors
        self._partition_type = kafka.TopicPartition
        self._request_timeout_ms = kafka_python_config.get("request_timeout_ms", 30_000)
        self._lock = threading.Lock()
        self._fetching = None  # the one partition assigned
        self._next: int | None = None  # the offset the consumer fetches next, when known
        self._ends: dict = {}  # partition → last log-end offset seen (only grows while records stay)
        self._beginnings: dict = {}
        self._partitions: dict[str, set[int]] = {}
        try:
            self._consumer = kafka.KafkaConsumer(
                bootstrap_servers=servers.split(","),
                group_id=None,
                enable_auto_commit=False,
                auto_offset_reset="none",  # an out-of-range fetch raises instead of jumping
                **{"fetch_max_wait_ms": DEFAULT_FETCH_MAX_WAIT_MS, **kafka_python_config},
            )
        except kafka.errors.KafkaError as error:
            raise SourceError(f"kafka source {servers}: {type(error).__name__}: {error}") from error
        self._closed = False

    @classmethod
    def from_spec(cls, spec: str) -> "KafkaSource":
        kind, options = parse_spec(spec)
        if kind != SPEC_KIND:
            raise SourceError(f"source spec {spec!r} is not a kafka spec")
        bootstrap = options.pop("bootstrap", "")
        if not bootstrap:
            raise SourceError(f"source spec {spec!r}: bootstrap=host:port[,host:port] is required")
        return cls(bootstrap, **{key: _spec_value(value) for key, value in options.items()})

    def __repr__(self) -> str:
        return f"KafkaSource({self.spec!r})"

    # ---- RecordSource ------------------------------------------------------------------------------

    def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        with self._lock:
            return self._list_offsets(partitions, earliest=True)

    def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        with self._lock:
            return self._list_offsets(partitions, earliest=False)

    def fetch(self, partition: TopicPartition, offset: int, max_records: int) -> list[Record]:
        if max_records < 1:
            return []
        tp = self._partition_type(*partition)
        with self._lock:
            self._check_open()
            end = self._ends.get(tp)
            if end is None or offset > end:
                end = self._list_offsets([tp], earliest=False)[as_partition(tp)]
            if offset > end:
                raise OffsetOutOfRangeError(f"offset {offset} of {partition[0]}-{partition[1]} is past the end {end}")
            beginning = self._beginnings.get(tp)
            if beginning is None or offset < beginning:
                beginning = self._list_offsets([tp], earliest=True)[as_partition(tp)]
            if offset < beginning:
                raise OffsetOutOfRangeError(
                    f"offset {offset} of {partition[0]}-{partition[1]} is below the beginning {beginning}"
                )
            return self._poll(tp, offset, max_records, wait_for_records=offset < end)

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._consumer.close(autocommit=False)

    # ---- internals (called with the lock held) -----------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise SourceError(f"kafka source {self.bootstrap_servers} is closed")

    def _list_offsets(self, partitions: Iterable[TopicPartition], earliest: bool) -> dict[TopicPartition, int]:
        self._check_open()
        wanted = [self._partition_type(*tp) for tp in partitions]
        for tp in wanted:
            self._check_exists(tp)
        if not wanted:
            return {}
        try:
            answer = self._consumer.beginning_offsets(wanted) if earliest else self._consumer.end_offsets(wanted)
        except self._errors.KafkaError as error:
            raise self._source_error(error, "listing offsets") from error
        (self._beginnings if earliest else self._ends).update(answer)
        return {as_partition(tp): offset for tp, offset in answer.items()}

    def _check_exists(self, tp) -> None:
        known = self._partitions.get(tp.topic)
        if known is None or tp.partition not in known:
            try:
                known = self._consumer.partitions_for_topic(tp.topic) or set()
                if tp.partition not in known:
                    # kafka-python answers from its metadata cache while it knows the topic, which misses
                    # partitions added since; a legacy member owns them as soon as ZooKeeper lists them.
                    self._consumer.topics()  # always reads the cluster's metadata
                    known = self._consumer.partitions_for_topic(tp.topic) or set()
            except self._errors.KafkaError as error:
                raise self._source_error(error, f"reading metadata of {tp.topic}") from error
            self._partitions[tp.topic] = known
        if tp.partition not in known:
            raise UnknownPartitionError(
                f"kafka source {self.bootstrap_servers}: no partition {tp.topic}-{tp.partition}"
            )

    def _poll(self, tp, offset: int, max_records: int, wait_for_records: bool) -> list[Record]:
        if self._fetching != tp:
            # One partition assigned at a time: kafka-python 3.0's pause/resume can strand parked
            # records of a resumed partition, and poll() must return only this partition anyway.
            self._consumer.assign([tp])
            self._fetching, self._next = tp, None
        if self._next != offset:
            self._consumer.seek(tp, offset)
            self._next = offset
        deadline = time.monotonic() + self._request_timeout_ms / 1000.0
        while True:
            try:
                batch = self._consumer.poll(
                    timeout_ms=100 if wait_for_records else IDLE_POLL_MS, max_records=max_records
                ).get(tp, [])
            except self._errors.OffsetOutOfRangeError as error:
                self._next = None
                self._beginnings.pop(tp, None)
                self._ends.pop(tp, None)
                raise OffsetOutOfRangeError(f"offset {offset} of {tp.topic}-{tp.partition} is out of range") from error
            except self._errors.KafkaError as error:
                self._next = None
                raise self._source_error(error, f"fetching {tp.topic}-{tp.partition}") from error
            if batch:
                last = batch[-1].offset + 1
                self._next = last
                if last > self._ends.get(tp, 0):
                    self._ends[tp] = last
                return build_records(
                    tp.topic,
                    tp.partition,
                    [r.offset for r in batch],
                    [r.timestamp for r in batch],
                    [r.key for r in batch],
                    [b"" if r.value is None else r.value for r in batch],
                )
            if not wait_for_records:
                return []
            if time.monotonic() > deadline:
                self._next = None
                raise SourceError(
                    f"kafka source {self.bootstrap_servers}: no records from {tp.topic}-{tp.partition} at offset "
                    f"{offset} within {self._request_timeout_ms} ms although the log end is {self._ends.get(tp)}"
                )

    def _source_error(self, error: Exception, doing: str) -> SourceError:
        return SourceError(f"kafka source {self.bootstrap_servers}: {doing}: {type(error).__name__}: {error}")
