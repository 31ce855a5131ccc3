"""A deterministic, clock-driven record source for tests, demos and benchmarks.

Every partition of every topic is a log that starts at offset 0 with ``initial_records`` records and
then grows by ``rate_per_partition`` records a second from ``start_ms``, until ``stop_ms`` if set.
A record's bytes depend only on (topic, partition, offset), and its timestamp only on the spec, so
two processes built from the same ``spec`` see byte-identical records. Stateless apart from the
clock: safe to share between threads. Must not import consumers, gevent or kazoo.
"""

import math
from collections.abc import Iterable
from fractions import Fraction
from itertools import repeat

from zkcoord.clock import SystemClock
from zkcoord.errors import OffsetOutOfRangeError, SourceError
from zkcoord.model import TopicPartition
from zkcoord.sources.base import Record, as_partition, build_records, parse_spec, spec_float, spec_int

SPEC_KIND = "synthetic"
SPEC_KEYS = ("rate", "initial", "start_ms", "stop_ms")


def _format_rate(rate: float) -> str:
    return str(int(rate)) if rate.is_integer() else repr(rate)


class SyntheticSource:
    """Logs that grow at a fixed rate on a clock (``SystemClock`` or a test's ``ManualClock``).

    ``log-end = initial_records + floor(rate * (min(now, stop_ms) - start_ms) / 1000)``, never below
    ``initial_records``; the beginning is always 0. Record ``o`` has key ``b"<partition>"``, value
    ``b"<topic>:<partition>:<o>"`` and a timestamp of ``start_ms`` for the initial records, else the
    first millisecond at which the log end passed it. The rate is taken as the decimal it prints as
    (``0.1`` is exactly 1/10), so counts do not drift with binary rounding.
    """

    def __init__(
        self,
        rate_per_partition: float = 100.0,
        initial_records: int = 0,
        start_ms: int | None = None,
        stop_ms: int | None = None,
        clock=None,
    ):
        rate = float(rate_per_partition)
        if not math.isfinite(rate) or rate < 0:
            raise SourceError(f"synthetic source: rate {rate_per_partition!r} must be a finite number >= 0")
        if isinstance(initial_records, bool) or not isinstance(initial_records, int) or initial_records < 0:
            raise SourceError(f"synthetic source: initial records {initial_records!r} must be an int >= 0")
        self._clock = clock or SystemClock()
        self.rate_per_partition = rate
        self.initial_records = initial_records
        self.start_ms = self._clock.now_ms() if start_ms is None else int(start_ms)
        self.stop_ms = None if stop_ms is None else int(stop_ms)
        if self.stop_ms is not None and self.stop_ms < self.start_ms:
            raise SourceError(f"synthetic source: stop_ms {self.stop_ms} is before start_ms {self.start_ms}")
        fraction = Fraction(repr(rate))
        # records after dt ms = floor(p * dt / (1000 q)); record k (0-based) appears at ceil((k+1) 1000 q / p)
        self._rate_numerator = fraction.numerator
        self._ms_numerator = 1000 * fraction.denominator
        self.spec = f"{SPEC_KIND}:rate={_format_rate(rate)},initial={initial_records},start_ms={self.start_ms}" + (
            "" if self.stop_ms is None else f",stop_ms={self.stop_ms}"
        )

    @classmethod
    def from_spec(cls, spec: str, clock=None) -> "SyntheticSource":
        kind, options = parse_spec(spec)
        if kind != SPEC_KIND:
            raise SourceError(f"source spec {spec!r} is not a synthetic spec")
        unknown = sorted(set(options) - set(SPEC_KEYS))
        if unknown:
            raise SourceError(
                f"source spec {spec!r}: unknown key {', '.join(unknown)}; synthetic takes {', '.join(SPEC_KEYS)}"
            )
        return cls(
            rate_per_partition=spec_float(spec, "rate", options["rate"]) if "rate" in options else 100.0,
            initial_records=spec_int(spec, "initial", options["initial"]) if "initial" in options else 0,
            start_ms=spec_int(spec, "start_ms", options["start_ms"]) if "start_ms" in options else None,
            stop_ms=spec_int(spec, "stop_ms", options["stop_ms"]) if "stop_ms" in options else None,
            clock=clock,
        )

    def __repr__(self) -> str:
        return f"SyntheticSource({self.spec!r})"

    # ---- RecordSource ------------------------------------------------------------------------------

    def log_end(self) -> int:
        """The log-end offset every partition has now."""
        now = self._clock.now_ms()
        if self.stop_ms is not None and now > self.stop_ms:
            now = self.stop_ms
        elapsed = now - self.start_ms
        if elapsed <= 0 or not self._rate_numerator:
            return self.initial_records
        return self.initial_records + (self._rate_numerator * elapsed) // self._ms_numerator

    def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {as_partition(tp): 0 for tp in partitions}

    def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        end = self.log_end()
        return {as_partition(tp): end for tp in partitions}

    def fetch(self, partition: TopicPartition, offset: int, max_records: int) -> list[Record]:
        topic, number = partition
        end = self.log_end()
        if offset < 0 or offset > end:
            raise OffsetOutOfRangeError(f"offset {offset} of {topic}-{number} is outside [0, {end}]")
        stop = min(end, offset + max_records)
        if stop <= offset:
            return []
        offsets = range(offset, stop)
        prefix = f"{topic}:{number}:".encode()
        values = [b"%b%d" % (prefix, o) for o in offsets]
        key = repeat(str(number).encode())
        return build_records(topic, number, offsets, self._timestamps(offset, stop), key, values)

    def _timestamps(self, start: int, stop: int) -> list[int]:
        initial, base = self.initial_records, self.start_ms
        head = [base] * (min(stop, initial) - start) if start < initial else []
        first = max(start, initial)
        if first >= stop:
            return head
        numerator, scale = self._rate_numerator, self._ms_numerator
        ceiling = numerator - 1
        produced = range(first - initial + 1, stop - initial + 1)  # 1-based among records made after start
        return head + [base + ((k * scale + ceiling) // numerator) for k in produced]

    def close(self) -> None:
        """Nothing to release."""
