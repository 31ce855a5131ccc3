"""What a 0.8.2 member subscribes to: the registration it writes for a static topic map or one wildcard
filter (legacy-zk-protocol.md §2.3–2.4). Pure.

The filters and their expansion against the topic list live in :mod:`zkcoord.zk.topic_filter`, which the
ZooKeeper tools share.
"""

from collections.abc import Mapping

from zkcoord.errors import ConfigError
from zkcoord.zk.layout import PATTERN_BLACKLIST, PATTERN_STATIC, PATTERN_WHITELIST, ConsumerRegistration, is_legal_name
from zkcoord.zk.topic_filter import TopicFilter


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
