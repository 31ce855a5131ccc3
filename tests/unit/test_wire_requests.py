"""Request checks of the wire protocol (wire-protocol.md §2, §3): 35 for what is not served, 42 naming the field."""

import copy
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from wire_examples import VALID

from zkcoord.wire.framing import FrameDecoder, encode_frame
from zkcoord.wire.requests import SUPPORTED_APIS, check_request, supported_api_versions

ABSENT = object()


# Written from wire-protocol.md §3 and Kafka's schemas, not read off the implementation.
REQUIRED = {
    "Metadata": {"topics[1]": "str"},
    "FindCoordinator": {"key": "str", "key_type": "int8"},
    "JoinGroup": {
        "session_timeout_ms": "int32",
        "rebalance_timeout_ms": "int32",
        "member_id": "str",
        "protocol_type": "str",
        "protocols": "array",
        "protocols[1]": "map",
        "protocols[1].name": "str",
        "protocols[1].metadata": "bin",
    },
    "SyncGroup": {
        "generation_id": "int32",
        "member_id": "str",
        "assignments[1]": "map",
        "assignments[1].member_id": "str",
        "assignments[1].assignment": "bin",
    },
    "Heartbeat": {"generation_id": "int32", "member_id": "str"},
    "LeaveGroup": {"members": "array", "members[1]": "map", "members[1].member_id": "str"},
    "OffsetCommit": {
        "generation_id": "int32",
        "member_id": "str",
        "topics": "array",
        "topics[0]": "map",
        "topics[0].name": "str",
        "topics[0].partitions": "array",
        "topics[0].partitions[1]": "map",
        "topics[0].partitions[1].partition_index": "int32",
        "topics[0].partitions[1].committed_offset": "int64",
    },
    "OffsetFetch": {
        "topics[0]": "map",
        "topics[0].name": "str",
        "topics[0].partition_indexes": "array",
        "topics[0].partition_indexes[1]": "int32",
    },
    "DescribeGroups": {"groups": "array", "groups[1]": "str"},
    "ListGroups": {"states_filter[0]": "str"},
    "DeleteGroups": {"groups_names": "array"},
    # Kafka's OffsetDeleteRequest v0 (KIP-496), an addition to §3 (docs/protocol.md).
    "OffsetDelete": {
        "topics": "array",
        "topics[0]": "map",
        "topics[0].name": "str",
        "topics[0].partitions": "array",
        "topics[0].partitions[1]": "map",
        "topics[0].partitions[1].partition_index": "int32",
    },
    "SaslHandshake": {"mechanism": "str"},
    "SaslAuthenticate": {"auth_bytes": "bin"},
}

NULLABLE = {
    "Metadata": {"topics": "array"},
    "JoinGroup": {"group_id": "str", "group_instance_id": "str"},
    "SyncGroup": {
        "group_id": "str",
        "group_instance_id": "str",
        "protocol_type": "str",
        "protocol_name": "str",
        "assignments": "array",
    },
    "Heartbeat": {"group_id": "str", "group_instance_id": "str"},
    "LeaveGroup": {"group_id": "str", "members[1].group_instance_id": "str"},
    "OffsetCommit": {
        "group_id": "str",
        "group_instance_id": "str",
        "topics[0].partitions[1].committed_metadata": "str",
        "retention_time_ms": "int64",
        "if_greater": "bool",  # an addition for backfills (docs/protocol.md)
    },
    "OffsetFetch": {"group_id": "str", "topics": "array", "log_only": "bool"},  # log_only: for migration tools
    "DeleteGroups": {"groups_names[1]": "str"},
    "ListGroups": {"states_filter": "array"},
    "OffsetDelete": {"group_id": "str"},
}

WRONG_VALUES = {
    "str": [5, b"g", ["g"], True],
    "bin": ["text", 5, [1]],
    "int8": [128, -129, "0", 0.0, True],
    "int32": [2**31, -(2**31) - 1, "1", 1.0, True, [1]],
    "int64": [2**63, -(2**63) - 1, "1", 1.5, False],
    "bool": [0, 1, "true", b"\x01", [True]],
    "array": ["x", {"a": 1}, 5, b"x"],
    "map": [5, "x", ["a"]],
}


def cases(table: dict) -> list[tuple[str, str, str]]:
    return [(api, path, kind) for api, fields in table.items() for path, kind in fields.items()]


def with_value(message: dict, path: str, value: object) -> dict:
    """A deep copy of ``message`` with the field at ``path`` (``a[1].b``) set to ``value``, or removed if ABSENT."""
    changed = copy.deepcopy(message)
    steps = [int(step) if step.isdigit() else step for step in re.findall(r"[^.\[\]]+", path)]
    container = changed
    for step in steps[:-1]:
        container = container[step]
    if value is ABSENT:
        del container[steps[-1]]
    else:
        container[steps[-1]] = value
    return changed


def error_of(message: dict) -> tuple[int, str]:
    response = check_request(message)
    assert response is not None, "expected the request to be refused"
    assert response["correlation_id"] == message["correlation_id"]
    assert set(response) == {"correlation_id", "error_code", "error_message"} | (
        {"apis"} if message["api"] == "ApiVersions" and response["error_code"] == 35 else set()
    )
    return response["error_code"], response["error_message"]


# ---- what is served ----------------------------------------------------------------------------------------


def test_supported_apis_are_the_twelve_of_the_spec_and_offset_delete_and_sasl_at_version_0_spec_3():
    supported = SUPPORTED_APIS
    assert supported == dict.fromkeys(
        [
            "ApiVersions",
            "Metadata",
            "FindCoordinator",
            "JoinGroup",
            "SyncGroup",
            "Heartbeat",
            "LeaveGroup",
            "OffsetCommit",
            "OffsetFetch",
            "DescribeGroups",
            "ListGroups",
            "DeleteGroups",
            "OffsetDelete",  # KIP-496, an addition to the spec's twelve (docs/protocol.md)
            "SaslHandshake",  # Kafka's SASL pair, answered by the connection (docs/protocol.md)
            "SaslAuthenticate",
        ],
        (0, 0),
    )
    assert set(VALID) == set(SUPPORTED_APIS)
    assert {"api": "JoinGroup", "min_version": 0, "max_version": 0} in supported_api_versions()


@pytest.mark.parametrize("api", sorted(VALID))
def test_valid_example_is_accepted(api):
    assert check_request(VALID[api]) is None


@pytest.mark.parametrize("api", sorted(VALID))
def test_valid_example_is_accepted_as_decoded_from_a_frame(api):
    # Decoded arrays are tuples, not lists.
    decoder = FrameDecoder()
    decoder.feed(encode_frame(VALID[api]))
    assert check_request(decoder.next_message()) is None


@pytest.mark.parametrize("api", ["Produce", "Fetch", "joingroup", "", "SaslReauthenticate"])
def test_unknown_api_gets_35_spec_2(api):
    code, message = error_of({**VALID["Heartbeat"], "api": api})
    assert code == 35
    assert repr(api) in message


@pytest.mark.parametrize("api", sorted(VALID))
@pytest.mark.parametrize("version", [1, -1, 5, 2**40])
def test_unsupported_api_version_gets_35_spec_2(api, version):
    code, message = error_of({**VALID[api], "api_version": version})
    assert code == 35
    assert f"{api} api_version {version} is not supported" in message


def test_api_versions_of_an_unsupported_version_lists_the_supported_ones():
    response = check_request({**VALID["ApiVersions"], "api_version": 3})
    assert response["apis"] == supported_api_versions()


def test_version_check_comes_before_field_checks():
    assert error_of({**VALID["Heartbeat"], "api_version": 1, "generation_id": None})[0] == 35


# ---- fields ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("api", "path", "kind"), cases(REQUIRED))
def test_required_field_nil_gets_42_naming_it_spec_2(api, path, kind):
    assert error_of(with_value(VALID[api], path, None)) == (42, f"{api}.{path} must be {kind}, got nil")


@pytest.mark.parametrize(("api", "path", "kind"), [case for case in cases(REQUIRED) if not case[1].endswith("]")])
def test_required_field_absent_is_nil_spec_2(api, path, kind):
    assert error_of(with_value(VALID[api], path, ABSENT)) == (42, f"{api}.{path} must be {kind}, got nil")


@pytest.mark.parametrize(("api", "path", "kind"), cases(REQUIRED) + cases(NULLABLE))
def test_field_of_the_wrong_type_gets_42_naming_it_spec_2(api, path, kind):
    nullable = path in NULLABLE.get(api, {})
    for value in WRONG_VALUES[kind]:
        code, message = error_of(with_value(VALID[api], path, value))
        assert code == 42
        assert message.startswith(f"{api}.{path} must be {kind}{' or nil' if nullable else ''}, got "), message


@pytest.mark.parametrize(("api", "path", "kind"), cases(NULLABLE))
def test_nullable_field_accepts_nil_and_absence(api, path, kind):
    assert check_request(with_value(VALID[api], path, None)) is None
    if not path.endswith("]"):  # an array item cannot be absent
        assert check_request(with_value(VALID[api], path, ABSENT)) is None


def test_error_message_names_the_nested_field_and_both_types():
    message = with_value(VALID["JoinGroup"], "protocols[1].metadata", "text")
    assert error_of(message) == (42, "JoinGroup.protocols[1].metadata must be bin, got str")
    message = with_value(VALID["OffsetCommit"], "topics[0].partitions[0].committed_offset", 2**63)
    assert error_of(message) == (
        42,
        f"OffsetCommit.topics[0].partitions[0].committed_offset must be int64, got int {2**63}",
    )


@pytest.mark.parametrize(
    "api",
    [
        "JoinGroup",
        "SyncGroup",
        "Heartbeat",
        "LeaveGroup",
        "OffsetCommit",
        "OffsetFetch",
        "DeleteGroups",
        "OffsetDelete",
    ],
)
def test_nil_and_empty_group_ids_are_left_to_the_coordinator_spec_3(api):
    # The coordinator answers 24 INVALID_GROUP_ID (or accepts "") per group-coordinator.md §0.4.
    path = "groups_names[0]" if api == "DeleteGroups" else "group_id"
    for value in (None, ""):
        assert check_request(with_value(VALID[api], path, value)) is None


def test_int_bounds_are_kafkas():
    commit = "topics[0].partitions[0]"
    for offset in (-(2**63), 2**63 - 1):
        assert check_request(with_value(VALID["OffsetCommit"], f"{commit}.committed_offset", offset)) is None
    for generation in (-(2**31), 2**31 - 1):
        assert check_request(with_value(VALID["Heartbeat"], "generation_id", generation)) is None
    for key_type in (-128, 127):
        assert check_request(with_value(VALID["FindCoordinator"], "key_type", key_type)) is None


def test_empty_lists_are_valid():
    for api, path in [("JoinGroup", "protocols"), ("SyncGroup", "assignments"), ("ListGroups", "states_filter")]:
        assert check_request(with_value(VALID[api], path, [])) is None


def test_client_id_may_be_nil_or_absent_but_not_another_type_spec_2():
    assert check_request({**VALID["Heartbeat"], "client_id": None}) is None
    assert check_request(with_value(VALID["Heartbeat"], "client_id", ABSENT)) is None
    assert error_of({**VALID["Heartbeat"], "client_id": 5}) == (42, "client_id must be str or nil, got int 5")


@given(
    st.dictionaries(
        st.text(max_size=12).filter(lambda key: key not in VALID["OffsetCommit"]) | st.integers(),
        st.none() | st.integers() | st.text(max_size=5) | st.binary(max_size=5),
        max_size=5,
    )
)
def test_unknown_extra_keys_are_ignored_spec_1(extra):
    assert check_request({**VALID["OffsetCommit"], **extra}) is None


def test_extra_keys_in_nested_maps_are_ignored():
    message = with_value(VALID["JoinGroup"], "protocols[0].weight", 3)
    assert check_request(message) is None


def test_offset_delete_names_a_nested_partition_of_the_wrong_type():
    assert error_of(with_value(VALID["OffsetDelete"], "topics[0].partitions[0]", 3)) == (
        42,
        "OffsetDelete.topics[0].partitions[0] must be map, got int 3",
    )
