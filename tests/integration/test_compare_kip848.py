"""KIP-848 in the comparison: librdkafka members under the consumer protocol on the session's Kafka 4 broker (KRaft).

A rolling bounce and a scale-up of three members over six partitions under ``kip848``, and the rolling bounce of
static members (``kip848-static``). Each run must pass the history checker and cover every record the broker holds,
record for record; the report's counts (docs/compare.md, "The report's metrics"), recomputed here from the traces
without Spark, must show the consumer protocol's shape: the broker rebalances incrementally (a member that stays
never gives up what it keeps), its uniform assignor moves to the new members no more partitions than they need,
and a static member comes back to its partitions without a rebalance.
"""

import dataclasses

import pytest
from compare_support import (
    checked_run,
    emptied_while_staying,
    events,
    not_back_on_their_partitions,
    of_type,
    partitions_moved,
    processed_offsets,
    rebalances_in_window,
)

from zkcoord.compare.runner import CompareOptions, compare_run
from zkcoord.compare.scenarios import Workload

SCENARIOS = ("rolling-bounce", "scale-up")
VARIANT = "kip848"
STATIC = "kip848-static"
RUNS = [(scenario, VARIANT) for scenario in SCENARIOS] + [("rolling-bounce", STATIC)]
MEMBERS, PARTITIONS, ADDED = 3, 6, 2
pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def compared(tmp_path_factory, zk_server, kafka4):
    out = tmp_path_factory.mktemp("compare-kip848")
    options = CompareOptions(
        out=out,
        scenarios=list(SCENARIOS),
        variants=[VARIANT],
        # The session timeout is the broker's (the kafka4 fixture's is the run's default).
        workload=Workload(members=MEMBERS, partitions=PARTITIONS, k=ADDED, downtime_ms=500),
        rate=10.0,
        duration_s=1.0,
        zookeeper=zk_server,
        kafka4=kafka4.bootstrap,
    )
    results = compare_run(options, say=lambda line: None)
    static = dataclasses.replace(options, scenarios=["rolling-bounce"], variants=[STATIC])
    results += compare_run(static, say=lambda line: None)
    assert [(r["scenario"], r["variant"], r["status"]) for r in results] == [(*run, "ok") for run in RUNS], results
    return out


@pytest.mark.parametrize(("scenario", "variant"), RUNS)
def test_every_run_is_safe_and_processed_every_record_the_broker_holds(compared, kafka4, scenario, variant):
    found = events(compared, scenario, variant)
    produced = checked_run(found, kafka4.end_offsets)
    assert len(produced) == PARTITIONS
    (topic,) = of_type(found, "compare.run")[0]["partitions"]
    assert processed_offsets(found) == {(topic, p): set(range(end)) for p, end in produced.items()}
    # Every instance's incremental callbacks became its ownership: it ends owning nothing, having closed.
    for instance in {e["instance"] for e in of_type(found, "rdkafka.rebalance")}:
        assert [e for e in of_type(found, "compare.assignment") if e["instance"] == instance][-1]["partitions"] == []


def test_a_rolling_bounce_rebalances_incrementally(compared):
    found = events(compared, "rolling-bounce", VARIANT)
    # At least the return of each member moves the group's epoch on (its leave too, unless the return comes before
    # any member's next heartbeat: then its old partitions, unowned, go to it again and nothing moves).
    assert rebalances_in_window(found) >= MEMBERS
    assert emptied_while_staying(found) == 0  # no member that stays gives up everything


def test_a_scale_up_moves_only_what_the_new_members_need(compared):
    found = events(compared, "scale-up", VARIANT)
    assert rebalances_in_window(found) >= 1
    assert emptied_while_staying(found) == 0
    # Six partitions over five members: each new member takes one; the uniform assignor is sticky.
    assert partitions_moved(found) == ADDED
    assert [e["name"] for e in of_type(found, "compare.step")] == [f"start {ADDED} more members"]


def test_static_members_come_back_to_their_partitions_without_a_rebalance(compared):
    found = events(compared, "rolling-bounce", STATIC)
    assert rebalances_in_window(found) == 0 and partitions_moved(found) == 0
    assert not_back_on_their_partitions(found, MEMBERS) == []


def test_the_groups_were_consumer_protocol_groups_on_the_broker(compared, kafka4):
    from confluent_kafka import ConsumerGroupType
    from confluent_kafka.admin import AdminClient

    groups = {of_type(events(compared, *run), "compare.run")[0]["group"] for run in RUNS}
    admin = AdminClient({"bootstrap.servers": kafka4.bootstrap})
    listed = admin.list_consumer_groups(types={ConsumerGroupType.CONSUMER}).result(timeout=30)
    assert groups <= {group.group_id for group in listed.valid}
