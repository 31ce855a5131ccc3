"""Clocks: the only module that reads the time. Pure cores take ``now_ms`` instead."""

import time


class SystemClock:
    """Wall-clock milliseconds, as Java's ``System.currentTimeMillis``."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic_ms(self) -> float:
        return time.monotonic() * 1000.0


class ManualClock:
    """A clock that moves only when told to; for tests of pure and IO code alike."""

    def __init__(self, now_ms: int = 0):
        self._now_ms = now_ms

    def now_ms(self) -> int:
        return self._now_ms

    def monotonic_ms(self) -> float:
        return float(self._now_ms)

    def advance(self, ms: int) -> None:
        self._now_ms += ms
