"""Which topics a 0.8.2 consumer registration covers: wildcard filters and their expansion
(legacy-zk-protocol.md §2.3–2.4).

Shared by the legacy member and by the ZooKeeper admin tools, which must read a group as its JVM members do.
Pure: expanding a wildcard takes the list of topics as an argument; must not import kazoo, gevent or
``zkcoord.legacy``.
"""

import re
from collections.abc import Sequence
from dataclasses import dataclass

from zkcoord.errors import ConfigError, ZkcoordError
from zkcoord.zk.layout import INTERNAL_TOPICS, PATTERN_WHITELIST, ConsumerRegistration

_JAVA_TRIM = "".join(chr(c) for c in range(0x21))


class UnsupportedFilterError(ZkcoordError):
    """A member's wildcard uses java.util.regex syntax that Python's ``re`` cannot evaluate."""


def normalise_filter(raw: str) -> str:
    """TF: Java ``trim``, ``,`` → ``|``, no spaces, no leading or trailing quote runs (§2.4)."""
    regex = raw.strip(_JAVA_TRIM).replace(",", "|").replace(" ", "")
    regex = re.sub(r"""^["']+""", "", regex)
    return re.sub(r"""["']+$""", "", regex)


@dataclass(frozen=True)
class TopicFilter:
    """A whitelist or blacklist over topic names (full match, as ``String.matches``)."""

    regex: str
    whitelist: bool = True

    @classmethod
    def create(cls, raw: str, whitelist: bool = True) -> "TopicFilter":
        regex = normalise_filter(raw)
        try:
            re.compile(regex)
        except re.error as error:
            raise ConfigError(f"{regex} is an invalid regex ({error})") from None
        return cls(regex, whitelist)

    @classmethod
    def of(cls, registration: ConsumerRegistration) -> "TopicFilter":
        """The filter of a wildcard registration: its first subscription key is the regex (TC)."""
        return cls(next(iter(registration.subscription)), registration.pattern == PATTERN_WHITELIST)

    @property
    def watches_topic_list(self) -> bool:
        """TF ``requiresTopicEventWatcher``: a trivial whitelist (``[\\p{Alnum}-|]+``) does not watch
        ``/brokers/topics``, so it notices new topics only on other triggers (§3.1 step 3)."""
        return not self.whitelist or not re.fullmatch(r"[A-Za-z0-9\-|]+", self.regex)

    def allows(self, topic: str, exclude_internal_topics: bool = True) -> bool:
        if exclude_internal_topics and topic in INTERNAL_TOPICS:
            return False
        return bool(re.fullmatch(self.regex, topic)) == self.whitelist


def expand(registration: ConsumerRegistration, topics: Sequence[str], exclude_internal_topics: bool) -> dict[str, int]:
    """A registration as ``{topic: streams}``: wildcards matched against ``topics`` in their order (TC)."""
    if not registration.is_wildcard:
        return dict(registration.subscription)
    topic_filter = TopicFilter.of(registration)
    streams = registration.subscription[topic_filter.regex]
    try:
        return {t: streams for t in topics if topic_filter.allows(t, exclude_internal_topics)}
    except re.error as error:
        # A java.util.regex construct Python lacks: guessing would make this member's view of the group
        # differ from the JVM members', so fail the attempt instead (and claim nothing).
        raise UnsupportedFilterError(f"wildcard {topic_filter.regex!r} is not a Python regex ({error})") from None
