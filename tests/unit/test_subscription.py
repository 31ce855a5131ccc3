"""Static and wildcard subscriptions of a 0.8.2 member (legacy-zk-protocol.md §2.3, §2.4). Pure."""

import pytest

from zkcoord.errors import ConfigError
from zkcoord.legacy.subscription import registration_for
from zkcoord.zk.layout import PATTERN_BLACKLIST, PATTERN_STATIC, PATTERN_WHITELIST, ConsumerRegistration
from zkcoord.zk.topic_filter import TopicFilter, UnsupportedFilterError, expand, normalise_filter

OFFSETS_TOPIC = "__consumer_offsets"

# ---- normalise_filter (§2.4, TF) -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "regex"),
    [
        ("orders.*", "orders.*"),
        ("  orders.*\t\n", "orders.*"),
        ("\x00\x1forders\x20", "orders"),  # Java trim: every char <= U+0020
        ("a,b,c", "a|b|c"),
        ("a, b , c", "a|b|c"),
        ("a b", "ab"),
        ("t{1,3}", "t{1|3}"),  # every comma, even inside a quantifier, as TF does
        ('"orders.*"', "orders.*"),
        ("'orders.*'", "orders.*"),
        ("\"'orders'\"", "orders"),  # whole runs of mixed quotes
        ('  " a , b "  ', "a|b"),  # trim, then ',', spaces, then quotes
        ("a'b\"c", "a'b\"c"),  # inner quotes stay
        ("'a\tb'", "a\tb"),  # only spaces are removed inside, not tabs
        ("\u00a0a", "\u00a0a"),  # NBSP is above U+0020: Java trim keeps it
    ],
)
def test_normalise_filter_spec_2_4(raw, regex):
    assert normalise_filter(raw) == regex


# ---- TopicFilter ---------------------------------------------------------------------------------


def test_create_normalises():
    assert TopicFilter.create(" 'a, b' ").regex == "a|b"


@pytest.mark.parametrize("raw", ["a[", "(unclosed", "*", "+a", "a)"])
def test_create_rejects_invalid_regex(raw):
    with pytest.raises(ConfigError, match="invalid regex"):
        TopicFilter.create(raw)


def test_whitelist_is_a_full_match_not_a_search_spec_2_4():
    topic_filter = TopicFilter.create("orders")
    assert topic_filter.allows("orders")
    assert not topic_filter.allows("orders-eu")
    assert not topic_filter.allows("old-orders")
    assert TopicFilter.create("orders.*").allows("orders-eu")


def test_whitelist_alternatives_are_each_full_matches():
    topic_filter = TopicFilter.create("a,b.*")
    assert [t for t in ["a", "ab", "b", "bx", "xa", "c"] if topic_filter.allows(t)] == ["a", "b", "bx"]


def test_blacklist_is_the_negation_spec_2_4():
    topic_filter = TopicFilter.create("orders.*", whitelist=False)
    assert not topic_filter.allows("orders")
    assert not topic_filter.allows("orders-eu")
    assert topic_filter.allows("payments")
    assert topic_filter.allows("old-orders")  # the blacklist regex is a full match too


@pytest.mark.parametrize("whitelist", [True, False], ids=["whitelist", "blacklist"])
def test_internal_topic_excluded_by_default_spec_2_4(whitelist):
    topic_filter = TopicFilter.create(".*" if whitelist else "nothing", whitelist=whitelist)
    assert not topic_filter.allows(OFFSETS_TOPIC)
    assert not topic_filter.allows(OFFSETS_TOPIC, exclude_internal_topics=True)
    assert topic_filter.allows(OFFSETS_TOPIC, exclude_internal_topics=False)


def test_internal_topic_still_subject_to_the_regex_when_not_excluded():
    assert not TopicFilter.create("orders.*").allows(OFFSETS_TOPIC, exclude_internal_topics=False)
    assert not TopicFilter.create("__.*", whitelist=False).allows(OFFSETS_TOPIC, exclude_internal_topics=False)


# ---- expand (§2.4, TC WildcardTopicCount) --------------------------------------------------------

BROKER_TOPICS = ["t3", "x", OFFSETS_TOPIC, "t1", "t20", "y"]


def test_expand_whitelist_keeps_the_order_of_the_topic_list():
    registration = ConsumerRegistration({"t.*": 2}, PATTERN_WHITELIST)
    expanded = expand(registration, BROKER_TOPICS, exclude_internal_topics=True)
    assert list(expanded.items()) == [("t3", 2), ("t1", 2), ("t20", 2)]


def test_expand_blacklist():
    registration = ConsumerRegistration({"t.*": 1}, PATTERN_BLACKLIST)
    assert list(expand(registration, BROKER_TOPICS, exclude_internal_topics=True)) == ["x", "y"]
    assert list(expand(registration, BROKER_TOPICS, exclude_internal_topics=False)) == ["x", OFFSETS_TOPIC, "y"]


def test_expand_uses_the_callers_exclude_internal_topics_spec_2_4():
    # Every member expands every wildcard registration with its *own* setting.
    registration = ConsumerRegistration({".*": 1}, PATTERN_WHITELIST)
    assert OFFSETS_TOPIC not in expand(registration, BROKER_TOPICS, exclude_internal_topics=True)
    assert OFFSETS_TOPIC in expand(registration, BROKER_TOPICS, exclude_internal_topics=False)


def test_expand_wildcard_with_no_matching_topic_is_empty():
    registration = ConsumerRegistration({"nomatch": 3}, PATTERN_WHITELIST)
    assert expand(registration, BROKER_TOPICS, exclude_internal_topics=True) == {}
    assert expand(registration, [], exclude_internal_topics=True) == {}


def test_expand_static_is_unchanged_and_ignores_the_topic_list():
    registration = ConsumerRegistration({"b": 2, "a": 1, "not-on-brokers": 4}, PATTERN_STATIC)
    expanded = expand(registration, BROKER_TOPICS, exclude_internal_topics=True)
    assert list(expanded.items()) == [("b", 2), ("a", 1), ("not-on-brokers", 4)]


def test_expand_static_may_name_the_internal_topic():
    registration = ConsumerRegistration({OFFSETS_TOPIC: 1}, PATTERN_STATIC)
    assert expand(registration, BROKER_TOPICS, exclude_internal_topics=True) == {OFFSETS_TOPIC: 1}


@pytest.mark.parametrize(
    "registration",
    [
        ConsumerRegistration({}, PATTERN_WHITELIST),
        ConsumerRegistration({"t.*": 1}, "regex"),
    ],
    ids=["wildcard-without-entries", "unknown-pattern"],
)
def test_expand_treats_non_wildcards_as_static_spec_1_4(registration):
    assert expand(registration, BROKER_TOPICS, exclude_internal_topics=True) == dict(registration.subscription)


def test_expand_returns_a_copy():
    subscription = {"t": 1}
    expanded = expand(ConsumerRegistration(subscription), BROKER_TOPICS, exclude_internal_topics=True)
    expanded["u"] = 2
    assert subscription == {"t": 1}


# ---- registration_for ----------------------------------------------------------------------------


def test_static_registration():
    registration = registration_for({"b": 2, "a": 1}, None, None, num_streams=1, timestamp_ms=42)
    assert registration.pattern == PATTERN_STATIC
    assert list(registration.subscription.items()) == [("b", 2), ("a", 1)]
    assert registration.timestamp_ms == 42
    assert not registration.is_wildcard


def test_whitelist_registration_holds_the_normalised_regex_spec_2_4():
    registration = registration_for(None, " 'a, b.*' ", None, num_streams=3, timestamp_ms=7)
    assert registration.pattern == PATTERN_WHITELIST
    assert registration.subscription == {"a|b.*": 3}
    assert registration.timestamp_ms == 7
    assert registration.is_wildcard


def test_blacklist_registration():
    registration = registration_for(None, None, "internal.*", num_streams=2, timestamp_ms=0)
    assert registration.pattern == PATTERN_BLACKLIST
    assert registration.subscription == {"internal.*": 2}


@pytest.mark.parametrize(
    ("topics", "whitelist", "blacklist"),
    [
        (None, None, None),
        ({"t": 1}, "a.*", None),
        ({"t": 1}, None, "a.*"),
        (None, "a.*", "b.*"),
        ({"t": 1}, "a.*", "b.*"),
    ],
)
def test_exactly_one_of_topics_whitelist_blacklist(topics, whitelist, blacklist):
    with pytest.raises(ConfigError, match="exactly one"):
        registration_for(topics, whitelist, blacklist, num_streams=1, timestamp_ms=0)


def test_empty_topic_map_is_refused():
    with pytest.raises(ConfigError):
        registration_for({}, None, None, num_streams=1, timestamp_ms=0)


@pytest.mark.parametrize("streams", [0, -1, 1.5, "2", None, True])
def test_static_streams_must_be_ints_of_at_least_one_spec_2_2(streams):
    # 0 or a negative count fails every member's rebalance (§2.2); a bool would be written as JSON `true`.
    with pytest.raises(ConfigError):
        registration_for({"ok": 1, "t": streams}, None, None, num_streams=1, timestamp_ms=0)


@pytest.mark.parametrize("num_streams", [0, -3])
def test_wildcard_streams_must_be_at_least_one_spec_2_2(num_streams):
    with pytest.raises(ConfigError):
        registration_for(None, "a.*", None, num_streams=num_streams, timestamp_ms=0)
    with pytest.raises(ConfigError):
        registration_for(None, None, "a.*", num_streams=num_streams, timestamp_ms=0)


def test_invalid_wildcard_regex_is_refused():
    with pytest.raises(ConfigError, match="invalid regex"):
        registration_for(None, "a[", None, num_streams=1, timestamp_ms=0)


@pytest.mark.parametrize(
    ("raw", "whitelist", "watches"),
    [("t1|t2", True, False), ("orders-v2", True, False), ("t.*", True, True), ("a,b", True, False), ("x", False, True)],
)
def test_only_non_trivial_filters_watch_the_topic_list_spec_3_1(raw, whitelist, watches):
    assert TopicFilter.create(raw, whitelist).watches_topic_list is watches


def test_filter_of_a_wildcard_registration():
    registration = ConsumerRegistration({"t.*": 3}, PATTERN_BLACKLIST)
    assert TopicFilter.of(registration) == TopicFilter("t.*", whitelist=False)


def test_java_only_regex_raises_instead_of_matching_nothing():
    registration = ConsumerRegistration({r"\p{Alnum}+": 1}, PATTERN_WHITELIST)
    with pytest.raises(UnsupportedFilterError, match="not a Python regex"):
        expand(registration, ["t"], exclude_internal_topics=True)


@pytest.mark.parametrize("topic", ['a"b', "a/b", "", "x" * 256, "é"])
def test_static_topics_must_have_kafka_legal_names(topic):
    with pytest.raises(ConfigError, match="illegal"):
        registration_for({topic: 1}, None, None, 1, 0)
