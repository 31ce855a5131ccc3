"""Kafka's group APIs through zkcoord's typed messages lose nothing: for every request version the Kafka
listener serves, kio's bytes → zkcoord's typed requests → kio's bytes again are the same bytes; every response
version carries the typed answer's values."""

import dataclasses
import datetime
import io
import types
import typing

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i8, i16, i32, i64

from zkcoord.wire import messages as m
from zkcoord.wire.kafka import groups, versions
from zkcoord.wire.kafka.entities import to_plain
from zkcoord.wire.kafka.frames import request_schema

_INTS = {i8: 7, i16: 15, i32: 31, i64: 63}
_NAMES = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
# A batch with no group or key would have nothing to carry its other fields: Kafka's clients never send one.
_NON_EMPTY = {"coordinator_keys", "groups"}


def _strategy(hint, name: str = ""):
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        (inner,) = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        return st.none() | _strategy(inner, name)
    if origin is tuple:
        return st.lists(_strategy(typing.get_args(hint)[0]), min_size=int(name in _NON_EMPTY), max_size=3).map(tuple)
    if dataclasses.is_dataclass(hint):
        return _entity(hint)
    if hint in _INTS:
        bits = _INTS[hint]
        return st.integers(-(2**bits), 2**bits - 1).map(hint)
    if isinstance(hint, type) and issubclass(hint, datetime.timedelta):
        return st.integers(-(2**31), 2**31 - 1).map(lambda ms: hint.parse(datetime.timedelta(milliseconds=ms)))
    if hint is bool:
        return st.booleans()
    if hint is bytes:
        return st.binary(max_size=16)
    if isinstance(hint, type) and issubclass(hint, str):
        return _NAMES.map(hint)
    raise AssertionError(f"no strategy for {hint!r}")


def _entity(cls):
    hints = typing.get_type_hints(cls)
    fields = {f.name: _strategy(hints[f.name], f.name) for f in dataclasses.fields(cls)}
    return st.builds(cls, **fields)


def _encoded(entity) -> bytes:
    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)
    return buffer.getvalue()


SERVED_REQUESTS = [
    (api_key, version)
    for api_key, (low, high) in versions.SERVED.items()
    if api_key != versions.API_VERSIONS
    for version in range(low, high + 1)
]


@pytest.mark.parametrize(("api_key", "version"), SERVED_REQUESTS)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_every_served_request_version_round_trips_through_the_typed_requests(api_key, version, data):
    request = data.draw(_entity(request_schema(api_key, version)))
    original = _encoded(request)
    decoded, _ = entity_reader(type(request))(original, 0)
    typed = groups.core_requests(api_key, version, decoded, "client", "/127.0.0.1")
    assert _encoded(groups.kafka_request(api_key, version, typed)) == original


_MEMBERS = st.lists(
    st.builds(m.JoinGroupResponseMember, member_id=_NAMES, group_instance_id=st.none() | _NAMES, metadata=st.binary()),
    max_size=3,
).map(tuple)


@pytest.mark.parametrize("version", range(0, 10))
@settings(max_examples=30, deadline=None)
@given(
    response=st.builds(
        m.JoinGroupResponse,
        error_code=st.sampled_from([0, 15, 16, 25, 27, 79, 82]),
        generation_id=st.integers(-1, 2**31 - 1),
        protocol_type=st.none() | _NAMES,
        protocol_name=st.none() | _NAMES,
        leader=_NAMES,
        member_id=_NAMES,
        members=_MEMBERS,
    )
)
def test_every_join_group_response_version_carries_the_answer(version, response):
    kio_response = groups.kafka_response(11, version, [None], [response])
    plain = to_plain(entity_reader(type(kio_response))(_encoded(kio_response), 0)[0])
    assert (plain["error_code"], plain["generation_id"], plain["leader"], plain["member_id"]) == (
        response.error_code,
        response.generation_id,
        response.leader,
        response.member_id,
    )
    nulled = "" if version < 7 else None  # null only where the version can carry it, else Kafka's ""
    assert plain["protocol_name"] == (nulled if response.protocol_name is None else response.protocol_name)
    assert [(each["member_id"], each["metadata"]) for each in plain["members"]] == [
        (each.member_id, each.metadata) for each in response.members
    ]
    if version >= 5:
        assert [each["group_instance_id"] for each in plain["members"]] == [
            each.group_instance_id for each in response.members
        ]


_FETCHED = st.lists(
    st.builds(
        m.OffsetFetchResponseTopic,
        name=_NAMES,
        partitions=st.lists(
            st.builds(
                m.OffsetFetchResponsePartition,
                partition_index=st.integers(0, 100),
                committed_offset=st.integers(-1, 2**62),
                metadata=_NAMES,
                error_code=st.sampled_from([0, 3]),
            ),
            max_size=3,
        ).map(tuple),
    ),
    max_size=3,
).map(tuple)


@pytest.mark.parametrize("version", range(1, 10))
@settings(max_examples=30, deadline=None)
@given(topics=_FETCHED, groups_count=st.integers(1, 3))
def test_every_offset_fetch_response_version_carries_the_offsets(version, topics, groups_count):
    count = groups_count if version >= 8 else 1
    requests = [m.OffsetFetchRequest(group_id=f"g{i}", topics=None) for i in range(count)]
    responses = [m.OffsetFetchResponse(error_code=0, topics=topics)] * count
    kio_response = groups.kafka_response(9, version, requests, responses)
    plain = to_plain(entity_reader(type(kio_response))(_encoded(kio_response), 0)[0])
    answered = [group["topics"] for group in plain["groups"]] if version >= 8 else [plain["topics"]]
    expected = [
        {"name": t.name, "offsets": [(p.partition_index, p.committed_offset, p.metadata) for p in t.partitions]}
        for t in topics
    ]
    for group_topics in answered:
        assert [
            {
                "name": t["name"],
                "offsets": [(p["partition_index"], p["committed_offset"], p["metadata"]) for p in t["partitions"]],
            }
            for t in group_topics
        ] == expected


@pytest.mark.parametrize(("api_key", "version"), SERVED_REQUESTS)
@settings(max_examples=5, deadline=None)
@given(data=st.data())
def test_every_served_version_can_refuse_a_request_whole(api_key, version, data):
    """The answer to a request the core refused whole (42 for an id too long, -1 for a server fault) has the
    request's shape at every version and carries the code, so no client is left without an answer."""
    request = data.draw(_entity(request_schema(api_key, version)))
    typed = groups.core_requests(api_key, version, request, "client", "/127.0.0.1")
    refusal = groups.refused_response(api_key, version, typed, 42)
    codes = _error_codes(to_plain(entity_reader(type(refusal))(_encoded(refusal), 0)[0]))
    assert set(codes) <= {42}  # every error place holds the code (an OffsetCommit of no topic has none)
    if "error_code" in {field.name for field in dataclasses.fields(refusal)}:
        assert codes  # the request-level code, at least


def _error_codes(plain: object) -> list[int]:
    if isinstance(plain, dict):
        own = [plain["error_code"]] if "error_code" in plain else []
        return own + [code for value in plain.values() for code in _error_codes(value)]
    if isinstance(plain, list):
        return [code for item in plain for code in _error_codes(item)]
    return []
