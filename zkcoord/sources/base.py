"""The record-source interface: what a consumer reads records from for the partitions it owns.

Owns ``Record``, the ``RecordSource`` protocol and ``build_records`` (the fast way to make many
records). Must not import gevent, kazoo, kafka-python or any consumer: sources are used by every
consumer flavour and by benchmarks.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from zkcoord.errors import SourceError
from zkcoord.model import TopicPartition


@dataclass(frozen=True, slots=True)
class Record:
    """One record of one partition, as a consumer hands it out."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes


@runtime_checkable
class RecordSource(Protocol):
    """Where records come from. Offsets follow Kafka: the log-end offset is the next one to be written.

    ``fetch`` returns records with offsets ``offset, offset+1, ...`` (at most ``max_records``; a Kafka
    topic may skip offsets of compacted records and transaction markers), ``[]`` when ``offset`` is the
    log end, and raises :class:`~zkcoord.errors.OffsetOutOfRangeError` when ``offset`` is below the
    beginning or past the end. Any other failure is a :class:`~zkcoord.errors.SourceError`.
    Every method may be called from several threads at once.
    """

    spec: str  # open_source(spec) builds an equivalent source, also in another process

    def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]: ...

    def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]: ...

    def fetch(self, partition: TopicPartition, offset: int, max_records: int) -> list[Record]: ...

    def close(self) -> None: ...


# Slot descriptors set fields without the frozen dataclass's __init__ (six object.__setattr__ calls):
# building records this way is about twice as fast, and the objects are identical.
_new = object.__new__
_set_topic, _set_partition, _set_offset, _set_timestamp, _set_key, _set_value = (
    Record.__dict__[name].__set__ for name in ("topic", "partition", "offset", "timestamp_ms", "key", "value")
)


def build_records(
    topic: str,
    partition: int,
    offsets: Iterable[int],
    timestamps: Iterable[int],
    keys: Iterable[bytes | None],
    values: Iterable[bytes],
) -> list[Record]:
    """Records of one partition from parallel iterables; equal to calling ``Record(...)`` for each."""
    records = []
    append = records.append
    # strict=False: ``keys`` is often an endless ``repeat``; ``offsets`` bounds the batch
    for offset, timestamp, key, value in zip(offsets, timestamps, keys, values, strict=False):
        record = _new(Record)
        _set_topic(record, topic)
        _set_partition(record, partition)
        _set_offset(record, offset)
        _set_timestamp(record, timestamp)
        _set_key(record, key)
        _set_value(record, value)
        append(record)
    return records


def as_partition(partition: Iterable) -> TopicPartition:
    """A ``TopicPartition`` from any ``(topic, partition)`` pair (kafka-python's, a plain tuple)."""
    topic, number = partition
    return TopicPartition(topic, number)


def parse_spec(spec: str) -> tuple[str, dict[str, str]]:
    """``kind[:key=value,...]`` → ``(kind, {key: value})``.

    A comma-separated piece without ``=`` continues the previous value, so host lists need no
    quoting: ``kafka:bootstrap=a:9092,b:9092`` gives ``{"bootstrap": "a:9092,b:9092"}``.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise SourceError(f"empty source spec {spec!r}; use 'synthetic[:key=value,...]' or 'kafka:bootstrap=host:port'")
    kind, _, rest = spec.strip().partition(":")
    options: dict[str, str] = {}
    last = None
    for piece in rest.split(",") if rest else []:
        key, sep, value = piece.partition("=")
        if sep:
            key = key.strip()
            if not key:
                raise SourceError(f"source spec {spec!r}: '{piece}' has no key before '='")
            if key in options:
                raise SourceError(f"source spec {spec!r}: {key} given twice")
            options[key], last = value.strip(), key
        elif last is not None:
            options[last] += "," + piece.strip()
        else:
            raise SourceError(f"source spec {spec!r}: expected key=value, got {piece!r}")
    return kind.strip().lower(), options


def spec_int(spec: str, key: str, value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise SourceError(f"source spec {spec!r}: {key}={value!r} is not an integer") from None


def spec_float(spec: str, key: str, value: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise SourceError(f"source spec {spec!r}: {key}={value!r} is not a number") from None
