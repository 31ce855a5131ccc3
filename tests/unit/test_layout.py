"""Znode paths and value codecs of the 0.8.2 ZooKeeper layout (legacy-zk-protocol.md §1, §2.4). Pure."""

import json

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from zkcoord.assign.java import immutable_map_order
from zkcoord.zk.layout import (
    PATTERN_BLACKLIST,
    PATTERN_STATIC,
    PATTERN_WHITELIST,
    BrokerRegistration,
    ConsumerRegistration,
    ZnodeDecodeError,
    broker_path,
    consumer_path,
    decode_broker_registration,
    decode_consumer_registration,
    decode_offset,
    decode_topic_partitions,
    desanitize_entity_name,
    encode_broker_registration,
    encode_consumer_registration,
    encode_offset,
    encode_partition_state,
    encode_topic_registration,
    ids_path,
    is_legal_name,
    json_escape_string,
    offset_path,
    offsets_path,
    owner_path,
    owners_path,
    parse_offset_path,
    partition_state_path,
    sanitize_entity_name,
    topic_path,
)

REGISTRATION_PATH = "/consumers/g/ids/c"

# ---- paths --------------------------------------------------------------------------------------


def test_broker_and_topic_paths():
    assert broker_path(3) == "/brokers/ids/3"
    assert topic_path("orders") == "/brokers/topics/orders"
    assert partition_state_path("orders", 7) == "/brokers/topics/orders/partitions/7/state"


def test_consumer_group_paths():
    assert ids_path("g") == "/consumers/g/ids"
    assert consumer_path("g", "g_host-1-abc") == "/consumers/g/ids/g_host-1-abc"
    assert owners_path("g") == "/consumers/g/owners"
    assert owners_path("g", "t") == "/consumers/g/owners/t"
    assert offsets_path("g") == "/consumers/g/offsets"
    assert offsets_path("g", "t") == "/consumers/g/offsets/t"


def test_owner_and_offset_paths_use_bare_partition_number_spec_1():
    # Not the stale 0.7-era "[broker_id-partition_id]" form of the docs.
    assert owner_path("g", "t", 7) == "/consumers/g/owners/t/7"
    assert offset_path("g", "t", 12) == "/consumers/g/offsets/t/12"


def test_parse_offset_path_inverts_offset_path():
    assert parse_offset_path(offset_path("my.group", "orders-1", 42)) == ("my.group", "orders-1", 42)


@pytest.mark.parametrize(
    "path",
    [
        "/consumers/g/owners/t/1",
        "/consumers/g/offsets/t",
        "/consumers/g/offsets/t/x",
        "/consumers/g/offsets/t/1/extra",
        "/consumers/g/offsets/t/-1",
        "/chroot/consumers/g/offsets/t/1",
    ],
)
def test_parse_offset_path_rejects_other_paths(path):
    assert parse_offset_path(path) is None


@pytest.mark.parametrize("name", ["t", "my-group", "a.b_c-D9", "x" * 255])
def test_legal_names(name):
    assert is_legal_name(name)


@pytest.mark.parametrize("name", ["", ".", "..", "a b", "a/b", "ä", "x" * 256])
def test_illegal_names(name):
    assert not is_legal_name(name)


# ---- json_escape_string (§2.4) ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "escaped"),
    [
        ("a.*", "a.*"),
        ('"', '\\"'),
        ("\\d+", "\\\\d+"),
        ("a/b", "a\\/b"),
        ("\b\f\n\r\t", "\\b\\f\\n\\r\\t"),
        ("\x00\x01\x1f", "\\u0000\\u0001\\u001f"),
        ("\x7f\x80\x9f", "\\u007f\\u0080\\u009f"),
        ("\x1b", "\\u001b"),  # lower-case hex
        ("\xa0é\u20ac\U0001f600", "\xa0é\u20ac\U0001f600"),  # outside the escaped ranges: as is
        (" ", " "),
    ],
)
def test_json_escape_string_spec_2_4(raw, escaped):
    assert json_escape_string(raw) == escaped


# ---- writers: exact bytes -----------------------------------------------------------------------


def test_static_registration_exact_bytes_spec_1_4():
    registration = ConsumerRegistration({"b": 2, "a": 1}, PATTERN_STATIC, timestamp_ms=1437492049839)
    assert encode_consumer_registration(registration) == (
        b'{"version":1,"subscription":{"b":2,"a":1},"pattern":"static","timestamp":"1437492049839"}'
    )


def test_registration_keeps_the_given_subscription_order_up_to_four_topics_spec_1_4():
    topics = ["e", "d", "c", "b"]
    encoded = encode_consumer_registration(ConsumerRegistration(dict.fromkeys(topics, 1), timestamp_ms=1))
    assert b'"subscription":{"e":1,"d":1,"c":1,"b":1},' in encoded


def test_registration_of_more_topics_follows_scala_s_hash_trie_map_as_0_8_2_writes_it():
    # What the real 0.8.2.2 connector wrote for a LinkedHashMap ta, tb, tc, td, te: its Java API copies the
    # map into a Scala immutable Map, which past four keys iterates in hash-trie order.
    subscription = {"ta": 1, "tb": 2, "tc": 1, "td": 1, "te": 1}
    encoded = encode_consumer_registration(ConsumerRegistration(subscription, timestamp_ms=1))
    assert b'"subscription":{"ta":1,"td":1,"tc":1,"te":1,"tb":2},' in encoded


@pytest.mark.parametrize("pattern", [PATTERN_WHITELIST, PATTERN_BLACKLIST])
def test_wildcard_registration_escapes_the_regex_spec_2_4(pattern):
    registration = ConsumerRegistration({'a/b\\d"x\t': 3}, pattern, timestamp_ms=5)
    expected = (
        b'{"version":1,"subscription":{"a\\/b\\\\d\\"x\\t":3},"pattern":"' + pattern.encode() + b'","timestamp":"5"}'
    )
    assert encode_consumer_registration(registration) == expected


def test_registration_is_utf8():
    encoded = encode_consumer_registration(ConsumerRegistration({"é.*": 1}, PATTERN_WHITELIST, timestamp_ms=0))
    assert '"é.*":1'.encode() in encoded


@pytest.mark.parametrize("streams", [0, -1, "1", 1.0, True])
def test_registration_refuses_stream_counts_other_than_positive_ints_spec_2_2(streams):
    # `true` would be written as JSON `true`, which no 0.8.2 member can read as a stream count.
    with pytest.raises(ValueError):
        encode_consumer_registration(ConsumerRegistration({"t": streams}))


def test_broker_registration_matches_spec_example_spec_1_1():
    broker = BrokerRegistration(broker_id=1, host="b1", port=9092, timestamp_ms=1437492049839)
    assert encode_broker_registration(broker) == (
        b'{"jmx_port":-1,"timestamp":"1437492049839","host":"b1","version":1,"port":9092}'
    )


def test_broker_registration_writes_jmx_port():
    broker = BrokerRegistration(broker_id=2, host="h", port=1, jmx_port=9999, timestamp_ms=0)
    assert b'"jmx_port":9999' in encode_broker_registration(broker)


def test_partition_state_key_order_spec_1_3():
    assert encode_partition_state(leader=2, isr=[2, 1], leader_epoch=5, controller_epoch=3) == (
        b'{"controller_epoch":3,"leader":2,"version":1,"leader_epoch":5,"isr":[2,1]}'
    )


def test_partition_state_defaults():
    assert encode_partition_state(leader=1, isr=[1]) == (
        b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1]}'
    )


def test_topic_registration_spec_1_2():
    assert encode_topic_registration({1: [2, 3], 0: [1, 2]}) == b'{"version":1,"partitions":{"0":[1,2],"1":[2,3]}}'
    assert encode_topic_registration({}) == b'{"version":1,"partitions":{}}'


def test_topic_registration_round_trip():
    replicas = {p: [p % 3, (p + 1) % 3] for p in range(12)}
    assert decode_topic_partitions("t", encode_topic_registration(replicas)) == list(range(12))


# ---- tolerant readers ---------------------------------------------------------------------------

BROKER_VERSIONS = {
    "v1": b'{"jmx_port":-1,"timestamp":"1437492049839","host":"b1","version":1,"port":9092}',
    "v2": b'{"jmx_port":-1,"timestamp":"1437492049839","endpoints":["PLAINTEXT://b1:9092"],'
    b'"host":"b1","version":2,"port":9092}',
    "v3": b'{"jmx_port":-1,"timestamp":"1437492049839","endpoints":["PLAINTEXT://b1:9092","SSL://b1:9093"],'
    b'"rack":"r1","host":"b1","version":3,"port":9092}',
    "v4": b'{"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT","SSL":"SSL"},'
    b'"endpoints":["PLAINTEXT://b1:9092","SSL://b1:9093"],"rack":null,"jmx_port":9999,'
    b'"host":"b1","timestamp":"1437492049839","port":9092,"version":4}',
    "v5": b'{"features":{"metadata.version":{"min_version":1,"max_version":7}},'
    b'"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"endpoints":["PLAINTEXT://b1:9092"],'
    b'"jmx_port":-1,"host":"b1","timestamp":"1437492049839","port":9092,"version":5}',
}


@pytest.mark.parametrize("version", sorted(BROKER_VERSIONS))
def test_broker_registration_of_every_version_spec_1_1(version):
    broker = decode_broker_registration(1, BROKER_VERSIONS[version])
    assert (broker.broker_id, broker.host, broker.port) == (1, "b1", 9092)
    assert broker.version == int(version[1:])
    assert broker.timestamp_ms == 1437492049839


def test_broker_registration_keeps_endpoints():
    broker = decode_broker_registration(1, BROKER_VERSIONS["v3"])
    assert broker.endpoints == ("PLAINTEXT://b1:9092", "SSL://b1:9093")


def test_broker_registration_round_trip():
    broker = BrokerRegistration(broker_id=4, host="kafka-4.example", port=9092, jmx_port=7071, timestamp_ms=123)
    assert decode_broker_registration(4, encode_broker_registration(broker)) == broker


def test_broker_with_null_host_falls_back_to_plaintext_endpoint_spec_1_1():
    data = b'{"endpoints":["SSL://s:9093","PLAINTEXT://p.example:9092"],"host":null,"port":-1,"version":2}'
    broker = decode_broker_registration(5, data)
    assert (broker.host, broker.port) == ("p.example", 9092)


def test_broker_with_null_host_and_ipv6_plaintext_endpoint():
    broker = decode_broker_registration(5, b'{"endpoints":["PLAINTEXT://[::1]:9092"],"host":null,"port":-1}')
    assert (broker.host, broker.port) == ("::1", 9092)


def test_broker_without_plaintext_listener_has_no_host_spec_1_1():
    broker = decode_broker_registration(5, b'{"endpoints":["SSL://s:9093"],"host":null,"port":-1,"version":4}')
    assert (broker.host, broker.port) == (None, -1)


@pytest.mark.parametrize(
    "data",
    [
        b'{"version":1,"partitions":{"10":[1],"2":[1],"0":[2]}}',
        b'{"version":2,"partitions":{"10":[1],"2":[1],"0":[2]},"adding_replicas":{"2":[3]},"removing_replicas":{}}',
        b'{"version":3,"topic_id":"Fk3Qb0YTRBOk2U4MKbm0Cw","partitions":{"10":[1],"2":[1],"0":[2]},'
        b'"adding_replicas":{},"removing_replicas":{}}',
        b'{ "partitions" : { "0" : [ 2 ] , "2" : [ ] , "10" : [ 1 ] } , "version" : 1 }',
    ],
    ids=["v1", "v2", "v3", "whitespace"],
)
def test_topic_partitions_are_keys_sorted_as_ints_spec_1_2(data):
    assert decode_topic_partitions("t", data) == [0, 2, 10]


@pytest.mark.parametrize("data", [None, b'{"version":1}', b'{"version":1,"partitions":null}'])
def test_topic_without_partitions_has_none_spec_1_2(data):
    assert decode_topic_partitions("t", data) == []


def test_static_registration_round_trip():
    registration = ConsumerRegistration({"t": 2, "u": 1}, PATTERN_STATIC, timestamp_ms=77)
    decoded = decode_consumer_registration("g", "c", encode_consumer_registration(registration))
    assert decoded == registration
    assert not decoded.is_wildcard


def test_registration_with_extra_fields_and_unknown_version_spec_1_4():
    data = b'{"version":7,"subscription":{"t":2},"pattern":"static","timestamp":"9","owner":"x","tags":[1,2]}'
    decoded = decode_consumer_registration("g", "c", data)
    assert decoded.subscription == {"t": 2}
    assert decoded.pattern == PATTERN_STATIC
    assert decoded.version == 7
    assert decoded.timestamp_ms == 9
    assert decoded.extra == {"owner": "x", "tags": [1, 2]}


def test_registration_with_only_pattern_and_subscription_spec_1_4():
    decoded = decode_consumer_registration("g", "c", b'{"subscription":{"t":1},"pattern":"static"}')
    assert decoded.subscription == {"t": 1}


def test_registration_json_duplicate_keys_keep_the_last_spec_1():
    data = b'{"pattern":"static","subscription":{"t":1},"subscription":{"u":3}}'
    assert decode_consumer_registration("g", "c", data).subscription == {"u": 3}


def test_registration_0_8_0_spacing_is_read_spec_1_4():
    data = b'{ "pattern":"static", "subscription":{ "t": 2 }, "timestamp":"5", "version":1 }'
    assert decode_consumer_registration("g", "c", data).subscription == {"t": 2}


@pytest.mark.parametrize(
    ("data", "wildcard"),
    [
        (b'{"version":1,"subscription":{"a.*":2},"pattern":"white_list","timestamp":"1"}', True),
        (b'{"version":1,"subscription":{"a.*":2},"pattern":"black_list","timestamp":"1"}', True),
        (b'{"version":1,"subscription":{},"pattern":"white_list","timestamp":"1"}', False),
        (b'{"version":1,"subscription":{"a.*":2},"pattern":"regex","timestamp":"1"}', False),
        (b'{"version":1,"subscription":{"t":2},"pattern":"static","timestamp":"1"}', False),
    ],
)
def test_registration_is_wildcard_only_with_wildcard_pattern_and_entries_spec_1_4(data, wildcard):
    assert decode_consumer_registration("g", "c", data).is_wildcard is wildcard


def test_wildcard_registration_reads_back_the_unescaped_regex_spec_2_4():
    registration = ConsumerRegistration({'a/b\\d"x\t\x01\x7f': 3}, PATTERN_WHITELIST, timestamp_ms=5)
    decoded = decode_consumer_registration("g", "c", encode_consumer_registration(registration))
    assert decoded.subscription == {'a/b\\d"x\t\x01\x7f': 3}


@pytest.mark.parametrize("offset", [0, 1, 12345, -1, 2**63 - 1, -(2**63)])
def test_offset_codec_spec_1_6(offset):
    assert encode_offset(offset) == str(offset).encode()
    assert decode_offset("/p", encode_offset(offset)) == offset


def test_offset_leading_zeros_and_plus_sign_parse_like_to_long():
    assert decode_offset("/p", b"007") == 7
    assert decode_offset("/p", b"+5") == 5


# ---- garbage ------------------------------------------------------------------------------------

GARBAGE_REGISTRATIONS = {
    "not-json": b"orders",
    "truncated": b'{"version":1,"subscription":{"t":1}',
    "float-1.0": b'{"pattern":"static","subscription":{"t":1.0}}',
    "float-1e3": b'{"pattern":"static","subscription":{"t":1e3}}',
    "int-2**31": b'{"pattern":"static","subscription":{"t":2147483648}}',
    "int-below-int32": b'{"pattern":"static","subscription":{"t":-2147483649}}',
    "float-in-ignored-field": b'{"pattern":"static","subscription":{"t":1},"version":1.0}',
    "nan": b'{"pattern":"static","subscription":{"t":NaN}}',
    "missing-pattern": b'{"version":1,"subscription":{"t":1},"timestamp":"1"}',
    "missing-subscription": b'{"version":1,"pattern":"static","timestamp":"1"}',
    "pattern-not-string": b'{"pattern":1,"subscription":{"t":1}}',
    "subscription-not-object": b'{"pattern":"static","subscription":["t"]}',
    "streams-string": b'{"pattern":"static","subscription":{"t":"1"}}',
    "streams-bool": b'{"pattern":"static","subscription":{"t":true}}',
    "streams-null": b'{"pattern":"static","subscription":{"t":null}}',
    "streams-list": b'{"pattern":"static","subscription":{"t":[1]}}',
    "top-level-array": b'[{"pattern":"static","subscription":{"t":1}}]',
    "empty": b"",
    "no-data": None,
    "pykafka-raw-topic": b"mytopic",  # §8: pykafka writes the bare topic name
}


@pytest.mark.parametrize("data", GARBAGE_REGISTRATIONS.values(), ids=GARBAGE_REGISTRATIONS.keys())
def test_garbage_registration_raises_decode_error_naming_the_path_spec_1_4(data):
    with pytest.raises(ZnodeDecodeError) as raised:
        decode_consumer_registration("g", "c", data)
    assert raised.value.path == REGISTRATION_PATH
    assert REGISTRATION_PATH in str(raised.value)


def test_registration_int32_bounds_are_readable_spec_1():
    data = b'{"pattern":"static","subscription":{"t":2147483647},"version":-2147483648}'
    assert decode_consumer_registration("g", "c", data).subscription == {"t": 2**31 - 1}


@pytest.mark.parametrize(
    "data",
    [
        b"\xff\xfe",
        b"[]",
        b'{"host":"b1","port":9092.0}',
        b'{"host":"b1","port":2147483648}',
        b'{"host":"b1","port":"9092"}',
        b'{"host":1,"port":9092}',
        b'{"host":"b1","port":9092,"timestamp":1437492049839}',  # a long number: toInt throws in 0.8.2 too
        None,
    ],
)
def test_garbage_broker_registration_spec_1_1(data):
    with pytest.raises(ZnodeDecodeError) as raised:
        decode_broker_registration(3, data)
    assert raised.value.path == "/brokers/ids/3"


@pytest.mark.parametrize(
    "data",
    [
        b"nope",
        b"\x80",
        b"[1]",
        b'{"partitions":[0,1]}',
        b'{"partitions":{"x":[1]}}',
        b'{"partitions":{"0.5":[1]}}',
        b'{"partitions":{"2147483648":[1]}}',
        b'{"partitions":{"0":[1.0]}}',
    ],
)
def test_garbage_topic_node_spec_1_2(data):
    with pytest.raises(ZnodeDecodeError) as raised:
        decode_topic_partitions("orders", data)
    assert raised.value.path == "/brokers/topics/orders"


@pytest.mark.parametrize(
    "data",
    [b"", None, b"abc", b"1.5", b"1e3", b" 12", b"12\n", b"0x10", b"12a", b"9223372036854775808", b"\xff"],
)
def test_non_numeric_offset_raises_decode_error_spec_1_6(data):
    with pytest.raises(ZnodeDecodeError) as raised:
        decode_offset("/consumers/g/offsets/t/0", data)
    assert raised.value.path == "/consumers/g/offsets/t/0"


def test_deeply_nested_json_is_a_decode_error():
    # Unbounded nesting is garbage too: it must not escape as RecursionError.
    with pytest.raises(ZnodeDecodeError):
        decode_topic_partitions("t", b"[" * 100_000)


# ---- fields 0.8.2 never reads must not break a reader (§1.1, §1.4) -------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**31), 2**31 - 1) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)


@given(extra=st.dictionaries(st.sampled_from(["version", "timestamp", "owner", "rack"]), json_values))
@example(extra={"timestamp": "\u00b2"})  # str.isdigit() is True, int() refuses it
@example(extra={"timestamp": "-"})
def test_registration_ignores_fields_other_than_pattern_and_subscription_spec_1_4(extra):
    data = json.dumps({"pattern": "static", "subscription": {"t": 2}, **extra}).encode()
    assert decode_consumer_registration("g", "c", data).subscription == {"t": 2}


@given(
    extra=st.dictionaries(
        st.sampled_from(["version", "timestamp", "jmx_port", "endpoints", "rack", "features"]), json_values
    )
)
@example(extra={"endpoints": 5})
@example(extra={"timestamp": "\u00b2"})
@example(extra={"timestamp": "--1"})
def test_broker_registration_reads_host_and_port_whatever_else_it_holds_spec_1_1(extra):
    data = json.dumps({"host": "b1", "port": 9092, **extra}).encode()
    broker = decode_broker_registration(1, data)
    assert (broker.host, broker.port) == ("b1", 9092)


# ---- properties ---------------------------------------------------------------------------------

topic_names = st.from_regex(r"[a-zA-Z0-9._\-]{1,40}", fullmatch=True).filter(lambda t: t not in (".", ".."))


@given(
    subscription=st.dictionaries(topic_names, st.integers(1, 100), min_size=1, max_size=12),
    timestamp=st.integers(min_value=0),
)
def test_static_registration_round_trip_keeps_the_scala_map_order(subscription, timestamp):
    registration = ConsumerRegistration(subscription, PATTERN_STATIC, timestamp_ms=timestamp)
    decoded = decode_consumer_registration("g", "c", encode_consumer_registration(registration))
    assert decoded.subscription == subscription
    assert list(decoded.subscription) == immutable_map_order(list(subscription))
    assert (decoded.pattern, decoded.timestamp_ms, decoded.version) == (PATTERN_STATIC, timestamp, 1)


@given(
    regex=st.text(min_size=1, max_size=30),
    pattern=st.sampled_from([PATTERN_WHITELIST, PATTERN_BLACKLIST]),
    streams=st.integers(1, 100),
    timestamp=st.integers(min_value=0),
)
def test_wildcard_registration_round_trip(regex, pattern, streams, timestamp):
    registration = ConsumerRegistration({regex: streams}, pattern, timestamp_ms=timestamp)
    decoded = decode_consumer_registration("g", "c", encode_consumer_registration(registration))
    assert decoded == registration
    assert decoded.is_wildcard


@given(st.integers(-(2**63), 2**63 - 1))
def test_offset_round_trip_over_int64(offset):
    assert decode_offset("/p", encode_offset(offset)) == offset


garbage = st.one_of(
    st.binary(max_size=200),
    json_values.map(lambda value: json.dumps(value).encode()),
    st.dictionaries(
        st.sampled_from(["version", "pattern", "subscription", "timestamp", "host", "port", "partitions", "endpoints"]),
        json_values,
    ).map(lambda value: json.dumps(value).encode()),
)


def _decode_or_none(decode, data):
    """The decoded value, or None when the codec raised its own error; anything else propagates."""
    try:
        return decode(data)
    except ZnodeDecodeError:
        return None


@given(garbage)
def test_random_bytes_only_raise_decode_error_from_registration(data):
    decoded = _decode_or_none(lambda d: decode_consumer_registration("g", "c", d), data)
    assert decoded is None or all(type(n) is int for n in decoded.subscription.values())


@given(garbage)
def test_random_bytes_only_raise_decode_error_from_topic_partitions(data):
    decoded = _decode_or_none(lambda d: decode_topic_partitions("t", d), data)
    assert decoded is None or decoded == sorted(decoded)


@given(garbage)
def test_random_bytes_only_raise_decode_error_from_broker_registration(data):
    decoded = _decode_or_none(lambda d: decode_broker_registration(1, d), data)
    assert decoded is None or isinstance(decoded, BrokerRegistration)


@given(st.one_of(st.binary(max_size=30), st.text(alphabet="0123456789+- \n", max_size=25).map(str.encode)))
def test_random_bytes_only_raise_decode_error_from_offset(data):
    decoded = _decode_or_none(lambda d: decode_offset("/p", d), data)
    assert decoded is None or -(2**63) <= decoded < 2**63


@pytest.mark.parametrize("key", [" 1", "1_0", "١"])
def test_partition_keys_follow_java_to_int(key):
    data = json.dumps({"version": 1, "partitions": {key: [0]}}).encode()
    with pytest.raises(ZnodeDecodeError, match="partition key"):
        decode_topic_partitions("t", data)


def test_not_json_is_told_apart_from_json_of_the_wrong_shape():
    with pytest.raises(ZnodeDecodeError) as not_json:
        decode_topic_partitions("t", b"\xff{garbage")
    assert not_json.value.not_json
    with pytest.raises(ZnodeDecodeError) as wrong_shape:
        decode_topic_partitions("t", b'{"partitions":[0]}')
    assert not wrong_shape.value.not_json
    with pytest.raises(ZnodeDecodeError) as float_number:
        decode_topic_partitions("t", b'{"partitions":{"0":[1.5]}}')
    assert not float_number.value.not_json


def test_non_utf8_bytes_are_replaced_as_zkstringserializer_does():
    """``new String(bytes, "UTF-8")`` turns a bad byte into U+FFFD: 0.8.2 reads such a node fine."""
    registration = decode_consumer_registration("g", "c", b'{"pattern":"static","subscription":{"\xff":1}}')
    assert registration.subscription == {"\ufffd": 1}


@pytest.mark.parametrize(
    ("name", "sanitized"),
    [
        ("alice", "alice"),
        ("CN=alice,O=ex ample", "CN%3Dalice%2CO%3Dex%20ample"),
        ("a*b~c.d-e_f", "a%2Ab%7Ec.d-e_f"),
        ("üser/+", "%C3%BCser%2F%2B"),
    ],
)
def test_user_names_are_sanitized_as_kafkas_sanitizer_does(name, sanitized):
    assert sanitize_entity_name(name) == sanitized
    assert desanitize_entity_name(sanitized) == name


@given(st.text(max_size=30))
def test_every_user_name_sanitizes_to_a_znode_name_and_back(name):
    sanitized = sanitize_entity_name(name)
    assert "/" not in sanitized and desanitize_entity_name(sanitized) == name
