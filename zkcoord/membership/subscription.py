"""What the member subscribes to and what it knows of those topics: the explicit topics or a pattern's matches,
their partition counts, and the Metadata refresh every metadata.max.age.ms that keeps both current.

The refresh runs for a pattern (which topics match now) and for the leader (did a topic's partition count change
since it assigned: then the group must rebalance, as Kafka's leader does). :class:`TopicSubscription` reports
what changed; whether that means a rebalance is the member's decision.

Pure: no IO. Imports only zkcoord.membership.effects and zkcoord.membership.requests; must not import
zkcoord.membership.member (it imports this module).
"""

import re
from collections.abc import Callable, Collection
from dataclasses import dataclass

from zkcoord.membership.effects import ANY_NODE, MembershipConfig, Outbox, Send
from zkcoord.membership.requests import topic_partition_counts
from zkcoord.wire.messages import MetadataResponse, Response


@dataclass(frozen=True)
class MetadataChange:
    """What a refresh found: the topics a pattern matches now (None without a pattern), and the assigned
    topics whose partition count changed since the leader assigned them."""

    matching: frozenset[str] | None
    resized: tuple[str, ...]


class TopicSubscription:
    """The member's topics and their partition counts; see the module docstring.

    ``tag`` makes the tag of each Metadata request (the member's, so that tags carry its generation).
    """

    def __init__(self, config: MembershipConfig, outbox: Outbox, tag: Callable[[str], tuple]):
        self._config = config
        self._outbox = outbox
        self._tag = tag
        self.topics: frozenset[str] = frozenset()  # explicit subscription, or the pattern's matches
        self.pattern: re.Pattern | None = None
        self.partition_counts: dict[str, int] = {}
        self.assigned_counts: dict[str, int] = {}  # the partition counts the leader last assigned
        self._refresh_ms: int | None = None
        self._refresh_tag: tuple | None = None

    @property
    def subscribed(self) -> bool:
        return bool(self.topics) or self.pattern is not None

    def subscribe(self, topics: Collection[str], pattern: str | None, now_ms: int) -> frozenset[str]:
        """Take a new subscription; the topics it names now (a pattern's: what the last refresh matched)."""
        self.pattern = re.compile(pattern) if pattern is not None else None
        if pattern is None:
            return frozenset(topics)
        self._refresh_ms = now_ms
        return self.topics

    def clear(self) -> None:
        self.pattern = None
        self._refresh_ms = None
        self.topics = frozenset()

    def deadlines(self) -> list[int]:
        return [] if self._refresh_ms is None else [self._refresh_ms]

    def refresh(self, now_ms: int) -> None:
        """Ask any node for every topic's metadata when a refresh is due and none is under way."""
        if self._refresh_ms is None or now_ms < self._refresh_ms or self._refresh_tag is not None:
            return
        self._refresh_tag = self._tag("metadata")
        timeout = self._config.request_timeout_ms
        self._outbox.send(Send(ANY_NODE, "Metadata", {"topics": None}, self._refresh_tag, timeout))

    def assigned(self, counts: dict[str, int], now_ms: int) -> None:
        """The leader assigns with these partition counts; refreshing them from now on notices a change."""
        self.assigned_counts = counts
        self.partition_counts.update(counts)
        if self._refresh_ms is None:
            self._refresh_ms = now_ms + self._config.metadata_max_age_ms

    def on_refresh(self, tag: tuple, response: Response | None, now_ms: int, leader: bool) -> MetadataChange | None:
        """Take a refresh's answer (``leader``: the member leads its generation); None when nothing is to check."""
        if tag != self._refresh_tag:
            return None
        self._refresh_tag = None
        leads = leader and bool(self.assigned_counts)
        if self.pattern is None and not leads:
            self._refresh_ms = None
            return None
        if type(response) is not MetadataResponse:
            self._refresh_ms = now_ms + self._config.retry_backoff_ms
            return None
        self._refresh_ms = now_ms + self._config.metadata_max_age_ms
        counts = topic_partition_counts(response)
        self.partition_counts.update(counts)
        matching = None if self.pattern is None else frozenset(t for t in counts if self.pattern.fullmatch(t))
        resized = sorted(t for t, count in self.assigned_counts.items() if counts.get(t, count) != count)
        return MetadataChange(matching, tuple(resized) if leads else ())
