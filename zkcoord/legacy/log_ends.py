"""The log ends a member's lag metric reads, asked of its record source in a native thread of their own.

A scrape must not wait on the source: a :class:`~zkcoord.sources.KafkaSource` asks the cluster behind the lock its
streams' fetches hold, for up to its request timeout, and the scrape's thread also answers ``/healthz`` and
``/readyz``. So each read answers what the source said last and, unless a question is still pending, asks again.
"""

import logging
from collections.abc import Iterable

from gevent import monkey

from zkcoord.errors import ZkcoordError
from zkcoord.model import TopicPartition
from zkcoord.sources import RecordSource

log = logging.getLogger(__name__)

# Native even when the application monkey-patched: the question must not run on a gevent hub it would block.
_start_new_thread = monkey.get_original("_thread", "start_new_thread")
_allocate_lock = monkey.get_original("_thread", "allocate_lock")


class LogEnds:
    """Log-end offsets of a record source, refreshed in the background at each read; safe from any thread."""

    def __init__(self, source: RecordSource, owner: str):
        self._source = source
        self._owner = owner
        self._known: dict[TopicPartition, int] = {}  # replaced whole by the asking thread
        self._asking = _allocate_lock()  # held while a question is pending

    def read(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The ends of ``partitions`` the source gave at its last answer (none it has not given); never waits."""
        partitions = list(partitions)
        if partitions and self._asking.acquire(blocking=False):
            _start_new_thread(self._ask, (partitions,))
        known = self._known
        return {tp: known[tp] for tp in partitions if tp in known}

    def _ask(self, partitions: list[TopicPartition]) -> None:
        try:
            self._known = self._source.end_offsets(partitions)
        except ZkcoordError as error:  # stale ends would report a wrong lag: report none
            self._known = {}
            log.debug("no log-end offsets for the lag metric member=%s error=%s", self._owner, error)
        finally:
            self._asking.release()
