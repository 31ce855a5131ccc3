"""What a 0.8.2 member subscribes to: static topic maps and wildcard filters (legacy-zk-protocol.md §2.3–2.4).

Pure: expanding a wildcard takes the list of topics as an argument.
"""

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from zkcoord.errors import ConfigError, ZkcoordError
from zkcoord.zk.layout import (
    INTERNAL_TOPICS,
    PATTERN_BLACKLIST,
    PATTERN_STATIC,
    PATTERN_WHITELIST,
    ConsumerRegistration,
    is_legal_name,
)

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


def registration_for(
    topics: Mapping[str, int] | None,
    whitelist: str | None,
    blacklist: str | None,
    num_streams: int,
    timestamp_ms: int,
) -> ConsumerRegistration:
    """The registration a member writes for a static map or one wildcard filter."""
    if sum(x is not None for x in (topics, whitelist, blacklist)) != 1:
        raise ConfigError("subscribe with exactly one of topics=, whitelist= or blacklist=")
    if topics is not None:
        if not topics:
            raise ConfigError("topics= must name at least one topic")
        for topic, streams in topics.items():
            if not is_legal_name(topic):
                raise ConfigError(f"topic {topic!r} is illegal: use [a-zA-Z0-9._-], at most 255 characters")
            if not isinstance(streams, int) or isinstance(streams, bool) or streams < 1:
                raise ConfigError(f"topic {topic}: streams must be an int >= 1 (0.8.2 asserts it)")
        return ConsumerRegistration(dict(topics), PATTERN_STATIC, timestamp_ms)
    if num_streams < 1:
        raise ConfigError("num_streams must be >= 1")
    topic_filter = TopicFilter.create(whitelist if whitelist is not None else blacklist, whitelist is not None)
    pattern = PATTERN_WHITELIST if topic_filter.whitelist else PATTERN_BLACKLIST
    return ConsumerRegistration({topic_filter.regex: num_streams}, pattern, timestamp_ms)
