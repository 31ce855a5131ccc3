"""Ctrl-C and SIGTERM during a command that starts processes (a fault campaign, a comparison): they stop the run
under way, never in the middle of its cleanup.

Signals run in the main thread; the command holds them around every cleanup, so one that comes meanwhile takes
effect after it and no process is left running.
"""

import contextlib
import signal
from collections.abc import Iterator

from zkcoord.errors import StopRequested


class _Interrupts:
    """Whether cleanup is under way, and whether a signal came meanwhile (signals run in the main thread)."""

    holding = 0
    pending: type[BaseException] | None = None


def stop_on_interrupt() -> None:
    """Make Ctrl-C (KeyboardInterrupt, exit 130) and SIGTERM (StopRequested, exit 0: a requested stop) stop the run
    under way, never in the middle of a cleanup :func:`signals_held` marks; later signals are ignored, so the
    cleanup they started finishes."""

    def interrupt(signum, frame) -> None:
        for each in (signal.SIGINT, signal.SIGTERM):
            signal.signal(each, signal.SIG_IGN)
        stop = KeyboardInterrupt if signum == signal.SIGINT else StopRequested
        if _Interrupts.holding:
            _Interrupts.pending = stop
        else:
            raise stop

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, interrupt)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """A signal that comes during the block takes effect after it: cleanup cut short leaves processes running."""
    _Interrupts.holding += 1
    try:
        yield
    finally:
        _Interrupts.holding -= 1
        if not _Interrupts.holding and _Interrupts.pending is not None:
            stop, _Interrupts.pending = _Interrupts.pending, None
            raise stop
