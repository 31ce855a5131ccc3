"""The consumer's offsets in its group: commits (waiting or not), auto-commit, the commit before a revocation, and
the committed offsets a position starts from.

Requests travel through the worker (``request`` / ``call``, the consumer's); an asynchronous commit's answer comes
back to the poll side as a :class:`CommitDone` event, so that its callback runs in a later poll(), as
kafka-python's does.

Runs on the poll side's thread, except where a docstring says otherwise. Imports zkcoord.client's config,
subscription and tracing, zkcoord.errors, zkcoord.membership and zkcoord.model; must not import the worker or
anything that does IO (requests go through the callables it is given).
"""

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from zkcoord.client.config import ConsumerConfig
from zkcoord.client.subscription import SubscriptionState
from zkcoord.client.tracing import ConsumerTrace
from zkcoord.errors import ConfigError, ZkcoordError
from zkcoord.membership import Completed
from zkcoord.membership.requests import commit_topics, partitions_by_topic
from zkcoord.model import TopicPartition

log = logging.getLogger(__name__)


class OffsetAndMetadata(NamedTuple):
    offset: int
    metadata: str | None = None


Offsets = Mapping[TopicPartition, int | OffsetAndMetadata]
CommitCallback = Callable[[dict, Exception | None], None]


class CommitDone(NamedTuple):
    """An asynchronous commit was answered: the worker hands this to the poll side."""

    offsets: dict[TopicPartition, tuple[int, str | None]]
    error: ZkcoordError | None
    callback: CommitCallback | None
    latency_ms: float


class Commits:
    """One consumer's commits; see the module docstring.

    ``request(api, fields, on_done)`` queues a request in the worker, ``call(api, fields)`` waits for its answer,
    ``report`` hands an event to the poll side (from the worker thread), ``ensure_open`` raises when the consumer
    is closed or failed.
    """

    def __init__(
        self,
        config: ConsumerConfig,
        state: SubscriptionState,
        trace: ConsumerTrace,
        *,
        request: Callable[[str, dict, Callable[[Completed], None]], None],
        call: Callable[[str, dict], Any],
        report: Callable[[Any], None],
        ensure_open: Callable[[], None],
    ):
        self._config = config
        self._state = state
        self._trace = trace
        self._request = request
        self._call = call
        self._report = report
        self._ensure_open = ensure_open
        self._next_auto_commit = time.monotonic() + config.auto_commit_interval_ms / 1000

    def commit(self, offsets: Offsets | None = None) -> None:
        """Commit ``offsets`` (default: the positions of every assigned partition) and wait for the answer."""
        self._ensure_open()
        chosen = self._chosen(offsets)
        if chosen:
            started = time.monotonic()
            try:
                self._call("OffsetCommit", {"topics": commit_topics(chosen)})
            except ZkcoordError as error:
                self._trace.committed(chosen, error)
                raise
            self._trace.committed(chosen, None, (time.monotonic() - started) * 1000)

    def commit_async(self, offsets: Offsets | None = None, callback: CommitCallback | None = None) -> None:
        """Commit without waiting; ``callback(offsets, error_or_None)`` runs in a later poll()."""
        self._ensure_open()
        chosen = self._chosen(offsets)
        if not chosen:
            return
        started = time.monotonic()

        def completed(event: Completed) -> None:  # worker thread: hand the result to the poll side
            self._report(CommitDone(chosen, event.error, callback, (time.monotonic() - started) * 1000))

        self._request("OffsetCommit", {"topics": commit_topics(chosen)}, completed)

    def done(self, event: CommitDone) -> None:
        """An asynchronous commit's answer reached poll(): trace it and run its callback."""
        self._trace.committed(event.offsets, event.error, event.latency_ms)
        if event.callback is not None:
            event.callback({tp: OffsetAndMetadata(*value) for tp, value in event.offsets.items()}, event.error)

    def committed(self, partitions: list[TopicPartition]) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offset of each partition (None where there is none); nothing without a group."""
        if not self._config.group_id:
            return {}
        topics = [{"name": t, "partition_indexes": ps} for t, ps in partitions_by_topic(partitions).items()]
        found = self._call("OffsetFetch", {"group_id": self._config.group_id, "topics": topics})
        return {tp: (OffsetAndMetadata(*found[tp]) if found.get(tp) else None) for tp in partitions}

    def maybe_auto_commit(self) -> None:
        """Commit the positions without waiting when auto.commit.interval.ms has passed since the last time."""
        if not self._config.enable_auto_commit or not self._config.group_id or not self._state.assigned:
            return
        if time.monotonic() < self._next_auto_commit:
            return
        self._next_auto_commit = time.monotonic() + self._config.auto_commit_interval_ms / 1000

        def done(offsets, error):
            if error is not None:
                log.warning("auto-commit of %d offsets failed: %s", len(offsets), error)

        self.commit_async(callback=done)

    def commit_quietly(self) -> None:
        """The commit before a revocation or close, with auto-commit on; a failure is logged, not raised."""
        if self._config.enable_auto_commit and self._config.group_id and self._state.assigned:
            try:
                self.commit()
            except ZkcoordError as error:
                log.warning("commit before revocation failed: %s", error)

    def _chosen(self, offsets: Offsets | None) -> dict[TopicPartition, tuple[int, str | None]]:
        if not self._config.group_id:
            raise ConfigError("commits need group.id")
        if offsets is None:
            positions = self._state.positions
            return {tp: (positions[tp], None) for tp in sorted(self._state.assigned) if tp in positions}
        chosen = {}
        for partition, value in offsets.items():
            offset, metadata = (value, None) if isinstance(value, int) else (value[0], value[1])
            chosen[TopicPartition(*partition)] = (int(offset), metadata)
        return chosen
