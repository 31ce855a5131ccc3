"""Record sources: where a consumer reads the records of the partitions it owns (docs/sources.md).

``open_source(spec)`` turns a spec string back into a source, so another process can rebuild an
equivalent one: ``synthetic``, ``synthetic:rate=100,initial=0,start_ms=..,stop_ms=..`` or
``kafka:bootstrap=host:port[,host:port]``. Must not import consumers, gevent or kazoo.
"""

from zkcoord.errors import SourceError
from zkcoord.sources.base import Record, RecordSource, build_records, parse_spec
from zkcoord.sources.synthetic import SyntheticSource

SPEC_KINDS = ("synthetic", "kafka")


def open_source(spec: str) -> RecordSource:
    """The source a spec string describes; :class:`~zkcoord.errors.SourceError` names what is wrong."""
    kind, _ = parse_spec(spec)
    if kind == "synthetic":
        return SyntheticSource.from_spec(spec)
    if kind == "kafka":
        from zkcoord.sources.kafka import KafkaSource  # imports kafka-python only when asked for

        return KafkaSource.from_spec(spec)
    raise SourceError(f"unknown source kind {kind!r} in spec {spec!r}; use one of {', '.join(SPEC_KINDS)}")


def __getattr__(name: str):
    if name == "KafkaSource":
        from zkcoord.sources.kafka import KafkaSource

        return KafkaSource
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["KafkaSource", "Record", "RecordSource", "SyntheticSource", "build_records", "open_source"]
