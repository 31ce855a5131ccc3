"""The mixed-group bridge's pure core: ids, registrations, who may join, the 0.8.2 assignment and the plans' order."""

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zkcoord.assign.legacy import consumer_of_thread, group_assignment
from zkcoord.bridge import core
from zkcoord.model import TopicPartition
from zkcoord.wire.consumer_protocol import Assignment, Subscription, decode_assignment, encode_subscription
from zkcoord.wire.kafka.consumer_protocol import encode_assignment_like, read_subscription
from zkcoord.zk import layout

TP = TopicPartition


def test_a_static_member_keeps_its_consumer_id_and_a_dynamic_one_gets_a_digest():
    static = core.consumer_id_for("g", "m-1", "pod-0")
    assert static == core.consumer_id_for("g", "m-2", "pod-0") == "g_zkcoord-static-pod-0"
    dynamic = core.consumer_id_for("g", "m-1", None)
    assert dynamic.startswith("g_zkcoord-") and dynamic != core.consumer_id_for("g", "m-2", None)
    odd = core.consumer_id_for("g", "m", "a/b c")
    assert layout.is_legal_name(odd) and odd != core.consumer_id_for("g", "m", "a_b_c")
    assert consumer_of_thread(core.thread_of(odd)) == odd


def test_the_registration_is_the_one_0_8_2_writes_with_one_stream_per_topic():
    data = core.registration_for(["b", "a"], 1700000000000)
    assert data == b'{"version":1,"subscription":{"b":1,"a":1},"pattern":"static","timestamp":"1700000000000"}'


def test_cooperative_assignors_are_dropped_and_a_member_offering_only_them_is_refused():
    assert core.eager_protocols(["cooperative-sticky", "range"]) == (["range"], None)
    eager, refusal = core.eager_protocols(["cooperative-sticky"])
    assert eager == [] and "range or roundrobin" in refusal


def test_roundrobin_refuses_a_member_whose_topics_differ_and_range_takes_any():
    others = {"g_a": {"t": 2, "u": 2}}
    assert core.subscription_refusal("range", "me", ["t"], others) is None
    assert "same topics" in core.subscription_refusal("roundrobin", "me", ["t"], others)
    assert core.subscription_refusal("roundrobin", "me", ["u", "t"], others) is None
    assert "at least one topic" in core.subscription_refusal("range", "me", [], others)
    re_trigger = {**others, "g_zkcoord-rebalance": {}}  # no topics, so no threads in 0.8.2's assignment
    assert core.subscription_refusal("roundrobin", "me", ["t", "u"], re_trigger) is None


@given(
    legacy=st.dictionaries(st.sampled_from(["g_a", "g_b", "g_c"]), st.integers(1, 3), min_size=0, max_size=3),
    bridged=st.sets(st.sampled_from(["g_zkcoord-1", "g_zkcoord-2"]), min_size=1),
    partitions=st.integers(1, 12),
    strategy=st.sampled_from(core.STRATEGIES),
)
def test_coordinator_members_get_what_0_8_2_gives_their_thread(legacy, bridged, partitions, strategy):
    subscriptions = {cid: {"t": streams} for cid, streams in legacy.items()}
    subscriptions.update({cid: {"t": 1} for cid in bridged})
    given_ = core.assignments(strategy, subscriptions, {"t": partitions}, bridged)
    decided = group_assignment(strategy, subscriptions, {"t": partitions})
    for cid in bridged:
        assert given_[cid] == tuple(TP(t, p) for t, p in decided[core.thread_of(cid)])


def test_release_flushes_before_it_deletes_an_owner_znode():
    owned = {TP("t", 1): "x-0", TP("t", 0): "x-0"}
    plan = core.release_plan(owned)
    assert plan[0] == core.Flush((TP("t", 0), TP("t", 1)))
    assert plan[1:] == [core.Release(TP("t", 0), "x-0"), core.Release(TP("t", 1), "x-0")]
    assert core.release_plan({}) == []


def test_handover_claims_every_partition_before_handing_over_and_releases_what_moved_first():
    owned = {TP("t", 0): "a-0", TP("t", 1): "b-0"}
    plan = core.handover_plan({"a": (TP("t", 0), TP("t", 1)), "b": ()}, {"a": "ma", "b": "mb"}, owned)
    assert plan == [
        core.Flush((TP("t", 1),)),
        core.Release(TP("t", 1), "b-0"),
        core.Claim(TP("t", 1), "a-0"),
        core.Handover({"ma": (TP("t", 0), TP("t", 1)), "mb": ()}),
    ]


def test_a_leaving_member_releases_its_partitions_before_its_registration():
    plan = core.leave_plan("a", {TP("t", 0): "a-0"})
    assert [type(step) for step in plan] == [core.Flush, core.Release, core.Unregister]
    assert core.owned_by({TP("t", 0): "a-0", TP("t", 1): "legacy-0"}, ["a"]) == {TP("t", 0): "a-0"}


def test_liveness_warns_with_numbers_only_when_a_member_may_revoke_after_the_legacy_window():
    assert core.liveness_warning(8_000, 8_000) is None
    warning = core.liveness_warning(300_000, 8_000)
    assert "300000 ms" in warning and "8000 ms" in warning


def test_a_subscription_is_read_in_either_encoding_and_the_assignment_answers_in_the_same():
    msgpack_subscription = encode_subscription(Subscription(("t",)))
    kafka_subscription = b"\x00\x01" + struct.pack(">i", 1) + struct.pack(">h", 1) + b"t" + struct.pack(">i", -1)
    kafka_subscription += struct.pack(">i", 0)  # v1: no owned partitions
    assert read_subscription(msgpack_subscription).topics == read_subscription(kafka_subscription).topics == ("t",)
    assignment = Assignment((TP("t", 2), TP("t", 0)))
    assert set(decode_assignment(encode_assignment_like(msgpack_subscription, assignment)).assigned_partitions) == {
        TP("t", 0),
        TP("t", 2),
    }
    kafka = encode_assignment_like(kafka_subscription, assignment)
    expected = b"\x00\x00" + struct.pack(">i", 1) + struct.pack(">h", 1) + b"t" + struct.pack(">iii", 2, 0, 2)
    assert kafka == expected + struct.pack(">i", -1)


@pytest.mark.parametrize("data", [b"\x00", b"\x00\x00\x00\x00\x00\x05ab", b"\x00\xff"])
def test_a_malformed_kafka_subscription_is_a_clear_error(data):
    from zkcoord.wire.consumer_protocol import ConsumerProtocolError

    with pytest.raises(ConsumerProtocolError, match="subscription"):
        read_subscription(data)


def test_the_bridge_state_round_trips_and_foreign_data_is_refused():
    state = layout.BridgeState("roundrobin", 3, (layout.BridgeMember("g_zkcoord-x", "m", "i", ("t",)),))
    assert layout.decode_bridge_state("/p", layout.encode_bridge_state(state)) == state
    with pytest.raises(layout.ZnodeDecodeError):
        layout.decode_bridge_state("/p", b'{"version":1,"strategy":"range","epoch":0,"members":[{"member_id":1}]}')


def test_a_stable_group_is_out_of_date_when_its_owner_znodes_differ_from_what_0_8_2_gives_now():
    owners = {TP("t", 0): "a-0", TP("t", 1): "legacy-0"}
    assert not core.out_of_date({"a": (TP("t", 0),)}, owners)
    assert core.out_of_date({"a": (TP("t", 0), TP("t", 2))}, owners)  # a departed member's share is now a's
    assert core.out_of_date({"a": ()}, owners)  # a legacy member joined and takes t-0
    assert not core.out_of_date({}, owners)
