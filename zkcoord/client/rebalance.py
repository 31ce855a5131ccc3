"""The rebalance listener and how the poll side runs it: each :class:`~zkcoord.membership.Reconcile` the member
hands over becomes lost, revoked and assigned partitions and the listener's callbacks, in that order, and only
then the acknowledgement the member waits for. Ownership is exclusive because of that wait: an eager member
joins again, and a cooperative one lets its partitions go to others, only after the revocation ran here.

Runs on the poll side's thread. Imports zkcoord.client.subscription, zkcoord.client.tracing, zkcoord.membership's
events and zkcoord.model; must not import the worker or anything that does IO (it calls back into the consumer).
"""

import time
from collections.abc import Callable
from typing import Any, Protocol

from zkcoord.client.subscription import SubscriptionState
from zkcoord.client.tracing import ConsumerTrace
from zkcoord.membership import Reconcile
from zkcoord.model import TopicPartition


class ConsumerRebalanceListener(Protocol):
    """kafka-python's listener; every method is optional. ``on_partitions_lost`` defaults to ``..._revoked``."""

    def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None: ...

    def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None: ...

    def on_partitions_lost(self, lost: list[TopicPartition]) -> None: ...


class RebalanceCallbacks:
    """Applies rebalances to ``state`` and runs ``listener`` for them.

    ``commit`` is the commit before a revocation (it decides itself whether auto-commit wants one); ``ack`` tells
    the member that the :class:`Reconcile` with this event id is done.
    """

    def __init__(
        self,
        state: SubscriptionState,
        trace: ConsumerTrace,
        commit: Callable[[], None],
        ack: Callable[[int], None],
    ):
        self._state = state
        self._trace = trace
        self._commit = commit
        self._ack = ack
        self.listener: Any = None

    def reconcile(self, event: Reconcile) -> None:
        """Run the callbacks of one rebalance step, then let the member go on (exclusive ownership hinges on it)."""
        if not self._state.in_group:
            self._ack(event.event_id)
            return
        if event.lost:
            self._state.remove(event.lost)
            self._run_listener("on_partitions_lost", list(event.lost))
            self._trace.assignment(self._state.assigned, time.monotonic(), event)
        if event.revoked or event.run_revoked:
            self.revoke(list(event.revoked), event=event)
        if event.run_assigned:
            before = time.monotonic()
            self._state.add(event.assigned)
            self._trace.assignment(self._state.assigned, before, event)
            self._run_listener("on_partitions_assigned", list(event.assigned))
        self._ack(event.event_id)

    def revoke(self, partitions: list[TopicPartition], event: Reconcile | None = None, commit: bool = True) -> None:
        """Commit (with auto-commit on), run on_partitions_revoked, then stop owning ``partitions``."""
        if commit:
            self._commit()
        self._run_listener("on_partitions_revoked", partitions)
        self._state.remove(partitions)
        self._trace.assignment(self._state.assigned, time.monotonic(), event)

    def _run_listener(self, method: str, partitions: list[TopicPartition]) -> None:
        self._trace.listener(method, partitions)
        listener = self.listener
        if listener is None:
            return
        callback = getattr(listener, method, None)
        if callback is None and method == "on_partitions_lost":
            callback = getattr(listener, "on_partitions_revoked", None)  # Kafka's default onPartitionsLost
        if callback is not None:
            callback(partitions)
