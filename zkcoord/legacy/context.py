"""What the hub-side parts of one legacy member share (:class:`MemberContext`), and how they report (:class:`Tracer`).

The parts are the offset commits, the rebalancer and the membership (each a :class:`MemberPart`); the consumer
builds one context on its hub thread at start and hands it to each. Imports no part: they import this.
"""

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import gevent.event
from kazoo.client import KazooClient

from zkcoord.legacy.config import LegacyConsumerConfig
from zkcoord.legacy.ownership import Ownership
from zkcoord.legacy.states import Lifecycle
from zkcoord.trace import TraceSink, make_event
from zkcoord.zk.layout import ConsumerRegistration

log = logging.getLogger(__name__)


class Clock(Protocol):
    """Wall-clock milliseconds (:class:`~zkcoord.clock.SystemClock`, or a test's manual clock)."""

    def now_ms(self) -> int: ...


class Tracer:
    """Hands a member's trace events, stamped with its clock, group and id, to each sink; a failing sink is logged."""

    def __init__(self, clock: Clock, group: str, member: str, sinks: Sequence[TraceSink]):
        self.sinks = tuple(sinks)
        self._clock = clock
        self._group = group
        self._member = member

    def emit(self, event_type: str, **fields: Any) -> None:
        event = make_event(event_type, self._clock.now_ms(), self._group, self._member, **fields)
        for sink in self.sinks:
            try:
                sink(event)
            except Exception:
                log.exception("trace sink failed")


@dataclass(frozen=True)
class MemberContext:
    """One member's identity, config and subscription, its ZooKeeper client, lifecycle and ownership, the event
    set when it closes (so waits end at once), and its tracer."""

    config: LegacyConsumerConfig
    consumer_id: str
    registration: ConsumerRegistration
    clock: Clock
    zk: KazooClient
    lifecycle: Lifecycle
    ownership: Ownership
    stopping: gevent.event.Event
    trace: Tracer

    @property
    def group(self) -> str:
        return self.config.group_id


class MemberPart:
    """Base of a member's hub-side parts: what every part uses of the context, as its own attributes."""

    def __init__(self, context: MemberContext):
        self._config = context.config
        self._consumer_id = context.consumer_id
        self._group = context.group
        self._zk = context.zk
        self._lifecycle = context.lifecycle
        self._ownership = context.ownership
        self._stopping = context.stopping
        self._trace = context.trace
