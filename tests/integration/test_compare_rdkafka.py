"""Comparison runs whose members are librdkafka consumers (confluent-kafka), reading the session's real broker.

A rolling bounce of two members under eager, cooperative-sticky and static membership, the group run by a zkcoord
node through its Kafka listener (``rdkafka-*``), and the eager one also by the broker's own coordinator
(``kafka-eager``): the same consumers, only their bootstrap differs (the broker's cooperative and static runs are
``zkcoord compare run``'s, left out here for the suite's time). The members' traces must pass the history checker
and cover every record the broker holds, and show each protocol's known shape: an eager bounce rebalances and
revokes everything, a cooperative one revokes only what moves, a static one does not rebalance at all.
"""

from pathlib import Path

import compare_support
import pytest
from compare_support import (
    checked_run,
    emptied_while_staying,
    not_back_on_their_partitions,
    of_type,
    rebalances_in_window,
)

from zkcoord.compare.runner import CompareOptions, compare_run
from zkcoord.compare.scenarios import Workload

SCENARIO = "rolling-bounce"
TARGETS = ("rdkafka",)  # zkcoord's coordinator; the broker's ("kafka") runs the eager variant only
VARIANTS = ("kafka-eager", *(f"{target}-{kind}" for target in TARGETS for kind in ("eager", "cooperative", "static")))
MEMBERS = 2
pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def compared(tmp_path_factory, kafka):
    out = tmp_path_factory.mktemp("compare-rdkafka")
    options = CompareOptions(
        out=out,
        scenarios=[SCENARIO],
        variants=list(VARIANTS),
        # The broker's group.min.session.timeout.ms is 6000 (Kafka's default).
        workload=Workload(members=MEMBERS, partitions=4, downtime_ms=500, session_timeout_ms=6000),
        rate=10.0,
        duration_s=1.0,
        zookeeper=kafka.zk_connect,
        source=f"kafka:bootstrap={kafka.bootstrap}",
        node_properties={"group.initial.rebalance.delay.ms": 0},  # as the test broker's
    )
    results = compare_run(options, say=lambda line: None)
    assert [(r["variant"], r["status"]) for r in results] == [(v, "ok") for v in VARIANTS], results
    return out


def events(out: Path, variant: str) -> list[dict]:
    return compare_support.events(out, SCENARIO, variant)


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_history_checker_passes_and_every_record_the_broker_holds_was_processed(compared, kafka, variant):
    found = events(compared, variant)
    produced = checked_run(found, kafka.end_offsets)
    processed = {p: set() for p in produced}
    for e in of_type(found, "compare.processed"):
        processed[e["partition"]].update(range(e["first_offset"], e["last_offset"] + 1))
    assert processed == {p: set(range(end)) for p, end in produced.items()}
    # Every instance's librdkafka callbacks became its ownership: it ends owning nothing, having closed.
    for instance in {e["instance"] for e in of_type(found, "rdkafka.rebalance")}:
        assert [e for e in of_type(found, "compare.assignment") if e["instance"] == instance][-1]["partitions"] == []


@pytest.mark.parametrize("target", TARGETS)
def test_static_members_come_back_to_their_partitions_without_a_rebalance(compared, target):
    found = events(compared, f"{target}-static")
    assert rebalances_in_window(found) == 0
    assert not_back_on_their_partitions(found, MEMBERS) == []


@pytest.mark.parametrize("target", TARGETS)
def test_an_eager_bounce_revokes_everything_a_cooperative_one_only_what_moves(compared, target):
    eager, cooperative = events(compared, f"{target}-eager"), events(compared, f"{target}-cooperative")
    assert rebalances_in_window(eager) >= MEMBERS  # at least one per bounce
    assert rebalances_in_window(cooperative) >= MEMBERS
    assert emptied_while_staying(eager) >= MEMBERS  # the member that stays gives everything up each time
    assert emptied_while_staying(cooperative) == 0
    revoked = [e for e in of_type(cooperative, "rdkafka.rebalance") if e["callback"] == "revoke"]
    assert any(e["partitions"] for e in revoked)  # the incremental revocations of partitions that moved


def test_the_rdkafka_groups_ran_on_zkcoord_s_nodes_and_the_kafka_groups_on_the_broker(compared):
    for variant in VARIANTS:
        (counters,) = of_type(events(compared, variant), "compare.counters")
        served = counters["coordinator_requests_by_api"].keys()
        if variant.startswith("rdkafka-"):
            assert {"JoinGroup", "SyncGroup", "Heartbeat", "OffsetCommit"} <= served
        else:
            assert counters["coordinator_requests"] == 0
