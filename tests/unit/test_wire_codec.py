"""The msgpack codec onto typed messages (zkcoord.wire.codec): checked request maps in, wire response maps out.

Expected values are written out from wire-protocol.md §3, never read back from the module under test.
"""

import msgpack
import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from wire_examples import VALID, request

from zkcoord.wire import messages as m
from zkcoord.wire.codec import API_NAMES, REQUEST_TYPES, encode_response, read_request, read_response
from zkcoord.wire.framing import FrameDecoder, encode_frame
from zkcoord.wire.requests import REQUEST_SCHEMAS, check_request


def test_every_served_api_has_a_typed_request():
    assert set(REQUEST_TYPES) == set(REQUEST_SCHEMAS)
    assert {API_NAMES[cls] for cls in REQUEST_TYPES.values()} == set(REQUEST_SCHEMAS)


def test_absent_fields_are_none_or_their_nil_default_nested_too():
    message = request(
        "OffsetCommit",
        group_id="g",
        generation_id=-1,
        member_id="",
        retention_time_ms=-1,
        topics=({"name": "t", "partitions": ({"partition_index": 0, "committed_offset": 3},)},),
    )
    assert check_request(message) is None
    assert read_request(message) == m.OffsetCommitRequest(
        group_id="g",
        generation_id=-1,
        member_id="",
        group_instance_id=None,
        retention_time_ms=-1,
        if_greater=False,
        topics=(
            m.OffsetCommitRequestTopic(
                name="t",
                partitions=(
                    m.OffsetCommitRequestPartition(partition_index=0, committed_offset=3, committed_metadata=None),
                ),
            ),
        ),
    )


def test_nil_means_the_default_where_the_spec_says_so():
    sync = request("SyncGroup", group_id="g", generation_id=1, member_id="m", assignments=None)
    fetch = request("OffsetFetch", group_id="g", topics=None, log_only=None)
    assert check_request(sync) is None and check_request(fetch) is None
    assert read_request(sync).assignments == ()
    assert read_request(fetch) == m.OffsetFetchRequest(group_id="g", topics=None, log_only=False)


def test_unknown_keys_are_dropped_and_arrays_are_tuples():
    message = {**VALID["OffsetFetch"], "extra": 1, 5: "x"}
    message["topics"] = [{"name": "t", "partition_indexes": [0, 1], "weight": 2}]
    assert check_request(message) is None
    decoded = read_request(message)
    assert decoded.topics == (m.OffsetFetchRequestTopic(name="t", partition_indexes=(0, 1)),)


def test_keys_that_are_no_strings_are_ignored_at_any_depth():
    join = {**VALID["JoinGroup"], (1, 2): "x"}
    join["protocols"] = [{"name": "range", "metadata": b"", 7: [1]}]
    assert check_request(join) is None
    assert read_request(join).protocols == (m.JoinGroupRequestProtocol(name="range", metadata=b""),)


def test_a_join_takes_the_header_client_id_and_the_peer():
    join = read_request(VALID["JoinGroup"], "/10.0.0.7")
    assert (join.client_id, join.client_host) == ("c", "/10.0.0.7")
    assert read_request({**VALID["JoinGroup"], "client_id": None}).client_id == ""


@pytest.mark.parametrize("api", sorted(VALID))
def test_every_valid_example_decodes_with_its_values(api):
    decoder = FrameDecoder()
    decoder.feed(encode_frame(VALID[api]))
    decoded = read_request(decoder.next_message())
    assert type(decoded) is REQUEST_TYPES[api]
    as_map = msgspec.to_builtins(decoded, builtin_types=(bytes,))
    for field, value in VALID[api].items():
        if field in as_map and field != "client_id":
            decoded_value = msgpack.unpackb(msgpack.packb(as_map[field]), raw=False)
            assert _fields_of(value, decoded_value) == value, field


def _fields_of(example, decoded):
    """``decoded`` with only the keys ``example`` has: the typed classes also carry fields of Kafka's newer
    versions (``reason`` ...) that the msgpack examples leave out."""
    if isinstance(example, dict) and isinstance(decoded, dict):
        return {key: _fields_of(example[key], decoded[key]) for key in example if key in decoded}
    if isinstance(example, list) and isinstance(decoded, list) and len(example) == len(decoded):
        return [_fields_of(item, got) for item, got in zip(example, decoded, strict=True)]
    return decoded


def test_responses_are_written_in_field_order_without_an_unset_error_message():
    join = m.JoinGroupResponse(error_code=79, member_id="c-1")
    assert list(encode_response(join).items()) == [
        ("error_code", 79),
        ("generation_id", -1),
        ("protocol_type", None),
        ("protocol_name", None),
        ("leader", ""),
        ("member_id", "c-1"),
        ("members", ()),
    ]
    refused = m.OffsetFetchResponse(error_code=15, error_message="ZooKeeper is away")
    assert list(encode_response(refused)) == ["error_code", "error_message", "topics"]
    assert list(encode_response(m.OffsetFetchResponse(error_code=0))) == ["error_code", "topics"]


def test_group_states_and_error_codes_are_written_as_kafkas_names_and_numbers():
    from zkcoord.errors import ErrorCode
    from zkcoord.model import GroupState

    listed = m.ListGroupsResponse(
        error_code=ErrorCode.NONE,
        groups=(m.ListedGroup(group_id="g", protocol_type="consumer", group_state=GroupState.STABLE),),
    )
    wire = msgpack.packb(encode_response(listed), use_bin_type=True)
    assert msgpack.unpackb(wire, raw=False) == {
        "error_code": 0,
        "groups": [{"group_id": "g", "protocol_type": "consumer", "group_state": "Stable"}],
    }


TEXT = st.text(max_size=8)
INT32 = st.integers(-(2**31), 2**31 - 1)
FETCHED = st.builds(
    m.OffsetFetchResponsePartition,
    partition_index=INT32,
    committed_offset=st.integers(-1, 2**63 - 1),
    metadata=TEXT,
    error_code=st.sampled_from([0, 3, 15]),
)
RESPONSES = st.one_of(
    st.builds(
        m.JoinGroupResponse,
        error_code=st.sampled_from([0, 25, 79]),
        generation_id=INT32,
        protocol_type=st.none() | TEXT,
        protocol_name=st.none() | TEXT,
        leader=TEXT,
        member_id=TEXT,
        members=st.lists(
            st.builds(
                m.JoinGroupResponseMember, member_id=TEXT, group_instance_id=st.none() | TEXT, metadata=st.binary()
            ),
            max_size=3,
        ).map(tuple),
    ),
    st.builds(
        m.OffsetFetchResponse,
        error_code=st.sampled_from([0, 15]),
        error_message=st.none() | TEXT,
        topics=st.lists(
            st.builds(m.OffsetFetchResponseTopic, name=TEXT, partitions=st.lists(FETCHED, max_size=3).map(tuple)),
            max_size=3,
        ).map(tuple),
    ),
    st.builds(m.SyncGroupResponse, error_code=st.sampled_from([0, 27]), assignment=st.binary()),
    st.builds(m.HeartbeatResponse, error_code=st.sampled_from([0, 22, 27])),
)


# ---- one pass: read_request refuses exactly what check_request refuses -----------------------------------------


def paths(value, prefix=()):
    """Every place in a request map: keys of maps and indexes of arrays, nested ones too."""
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += paths(item, (*prefix, key))
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            found += paths(item, (*prefix, index))
    return found


def mutated(message, path, action, value):
    """A deep copy of ``message`` with the item at ``path`` dropped, replaced by ``value``, or given a new key."""
    copy = msgpack.unpackb(msgpack.packb(message, use_bin_type=True), raw=False, strict_map_key=False)
    if not path:
        return copy
    parent = copy
    for step in path[:-1]:
        parent = parent[step]
    last = path[-1]
    if action == "drop" and isinstance(parent, dict):
        del parent[last]
    elif action == "extra" and isinstance(parent[last], dict):
        parent[last][value if isinstance(value, (str, int)) else "extra"] = value
    else:
        parent[last] = value
    return copy


ODD_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**64), 2**64),
    st.sampled_from([-(2**7) - 1, 2**7, -(2**31) - 1, 2**31, 2**63, -(2**63) - 1]),
    st.floats(allow_nan=False),
    st.text(max_size=4),
    st.binary(max_size=4),
    st.lists(st.integers(0, 3) | st.text(max_size=2), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


@settings(max_examples=2000, deadline=None)
@given(st.sampled_from(sorted(VALID)), st.data())
def test_read_request_refuses_exactly_what_check_request_refuses(api, data):
    message = VALID[api]
    path = data.draw(st.sampled_from(paths(message)[1:] or [()]))
    if path and path[0] in ("api", "api_version", "correlation_id"):
        path = ()  # the header was checked by the frame decoder already
    action = data.draw(st.sampled_from(["drop", "replace", "extra"]))
    candidate = mutated(message, path, action, data.draw(ODD_VALUES))
    read = read_request(candidate, "/127.0.0.1")
    refusal = check_request(candidate)
    if refusal is not None:
        assert read == refusal
    else:
        assert type(read) is REQUEST_TYPES[api]


# ---- the client's side: response maps read as typed responses --------------------------------------------------


def test_a_client_reads_a_response_map_as_its_typed_response():
    fields = {"correlation_id": 3, "error_code": 0, "node_id": 2, "host": "h", "port": 9092}
    assert read_response("FindCoordinator", fields) == m.FindCoordinatorResponse(
        error_code=0, node_id=2, host="h", port=9092
    )


def test_a_refusal_without_the_apis_fields_is_an_error_response_and_junk_is_nothing():
    assert read_response("FindCoordinator", {"error_code": 42, "error_message": "bad"}) == m.ErrorResponse(
        error_code=42, error_message="bad"
    )
    assert read_response("Metadata", {"error_code": 0}) is None  # no topics and no error: not an answer
    assert read_response("Heartbeat", {"error_code": "0"}) is None


@given(RESPONSES)
def test_what_a_node_writes_a_client_reads_back_unchanged(response):
    api = {
        m.JoinGroupResponse: "JoinGroup",
        m.OffsetFetchResponse: "OffsetFetch",
        m.SyncGroupResponse: "SyncGroup",
        m.HeartbeatResponse: "Heartbeat",
    }[type(response)]
    wire = msgpack.unpackb(msgpack.packb(encode_response(response), use_bin_type=True), raw=False)
    assert read_response(api, wire) == response
    assert ("error_message" in wire) == (getattr(response, "error_message", None) is not None)
