"""The pure rule of step 0005 (copying a group's offsets between zkcoord's log and a Kafka cluster) and verify's
comparison of the two."""

from hypothesis import given
from hypothesis import strategies as st

from zkcoord.migration.kafka_copy import (
    KAFKA,
    ZKCOORD,
    Side,
    ahead_reasons,
    behind_on_kafka,
    busy_group_reasons,
    live_members_reasons,
    other_cluster_reasons,
    pair_offsets,
    plan_copy,
)
from zkcoord.migration.phases import GroupFacts, KafkaCopy, LegacyMember, MigrationState

partitions = st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 3))
stores = st.dictionaries(partitions, st.integers(0, 50), max_size=8)


def applied(destination: dict, writes: dict) -> dict:
    return {**destination, **writes}


@given(stores, stores)
def test_a_copy_never_lowers_an_offset_and_leaves_the_ahead_and_the_foreign_alone(source, destination):
    plan = plan_copy(source, destination)
    after = applied(destination, plan.writes)
    assert all(after[p] >= offset for p, offset in destination.items())  # never lowers
    for p, offset in source.items():
        assert after[p] == offset or p in plan.ahead
    assert set(plan.ahead) == {p for p, o in source.items() if destination.get(p, -1) > o}
    assert not set(plan.writes) - set(source) and plan.rewinds == ()


@given(stores, stores)
def test_a_rewind_makes_the_destination_hold_the_source_and_names_what_it_lowers(source, destination):
    plan = plan_copy(source, destination, rewind=True)
    after = applied(destination, plan.writes)
    assert {p: after[p] for p in source} == source
    assert set(plan.rewinds) == {p for p, o in source.items() if destination.get(p, -1) > o}
    assert plan.ahead == ()
    foreign = set(destination) - set(source)
    assert {p: after[p] for p in foreign} == {p: destination[p] for p in foreign}


@given(stores, stores, st.booleans())
def test_running_a_copy_again_writes_nothing(source, destination, rewind):
    """Idempotent reruns: a copy that completed leaves nothing to write."""
    after = applied(destination, plan_copy(source, destination, rewind).writes)
    assert plan_copy(source, after, rewind).writes == {}


def test_up_then_down_brings_back_what_was_committed_on_kafka():
    log = {("t", 0): 10, ("t", 1): 11}
    kafka = applied({}, plan_copy(log, {}).writes)
    kafka[("t", 0)] = 40  # the team's consumers on Kafka moved on
    back = plan_copy(kafka, log)
    assert back.writes == {("t", 0): 40} and back.ahead == ()
    assert applied(log, back.writes) == {("t", 0): 40, ("t", 1): 11}


def test_pairs_say_which_side_is_ahead():
    log = {("t", 0): 5, ("t", 1): 7, ("t", 2): 3, ("t", 3): 1}
    rows = pair_offsets(log, {("t", 0): 5, ("t", 1): 4, ("t", 2): 9, ("u", 0): 2})
    assert [(r.topic, r.partition, r.status) for r in rows] == [
        ("t", 0, Side.MATCH),
        ("t", 1, Side.ZKCOORD_AHEAD),
        ("t", 2, Side.KAFKA_AHEAD),
        ("t", 3, Side.ONLY_ZKCOORD),
        ("u", 0, Side.ONLY_KAFKA),
    ]
    assert [r.kafka_minus_zkcoord for r in rows] == [0, -3, 6, None, None]
    assert [(r.topic, r.partition) for r in behind_on_kafka(rows)] == [("t", 1), ("t", 3)]
    assert pair_offsets({}, {}) == []


def test_the_ahead_reason_names_partitions_both_offsets_and_what_to_do():
    source, destination = {("t", p): 1 for p in range(5)}, {("t", p): 9 for p in range(5)}
    [reason] = ahead_reasons(plan_copy(source, destination), source, destination, (ZKCOORD, KAFKA), "HINT")
    assert reason.startswith("5 partition(s) are ahead on Kafka: t-0 (Kafka 9, zkcoord 1), t-1")
    assert "and 2 more" in reason and reason.endswith("nothing was copied; HINT")
    assert ahead_reasons(plan_copy(destination, source), destination, source, (ZKCOORD, KAFKA), "HINT") == []


def test_only_an_inactive_kafka_group_takes_the_copy_as_kafka_consumer_groups_requires():
    assert busy_group_reasons("g", "k:9092", "Empty", ()) == []
    assert busy_group_reasons("g", "k:9092", "Dead", ()) == []  # never used on Kafka
    [reason] = busy_group_reasons("g", "k:9092", "Stable", ("consumer-1-abc",))
    assert reason.startswith("group g on the Kafka cluster at k:9092 is not inactive (state Stable, members consumer-1")


def test_live_zkcoord_members_of_either_protocol_are_named():
    facts = GroupFacts(MigrationState(), (LegacyMember("legacy-1"),), ("client-1",))
    [reason] = live_members_reasons(facts, "WHY")
    assert reason == "the group has live members on zkcoord (client-1, legacy-1); WHY"
    assert live_members_reasons(GroupFacts(MigrationState()), "WHY") == []


def test_only_the_cluster_the_offsets_were_copied_to_is_accepted_whichever_broker_answers():
    recorded = KafkaCopy("cluster-a", "a1:9092")
    assert other_cluster_reasons(None, KafkaCopy("cluster-b", "b1:9092")) == []
    assert other_cluster_reasons(recorded, KafkaCopy("cluster-a", "a2:9092")) == []
    [reason] = other_cluster_reasons(recorded, KafkaCopy("cluster-b", "b1:9092"))
    assert "copied to the Kafka cluster cluster-a (at a1:9092), not to cluster-b" in reason
    assert reason.endswith("pass --target-bootstrap-server a1:9092")
