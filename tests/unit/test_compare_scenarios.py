"""The comparison's plans, its settled-group rule and the member's trace translation (pure, no processes)."""

from dataclasses import replace

import pytest

from zkcoord.compare.kafka4 import broker_properties
from zkcoord.compare.member_trace import CompareTrace
from zkcoord.compare.rdkafka_member import generation_of, rdkafka_member_config
from zkcoord.compare.scenarios import (
    CONSUMER_PROTOCOL,
    SCENARIOS,
    VARIANTS,
    ZKCOORD,
    GroupView,
    NotApplicable,
    Workload,
    baseline,
    plan,
)

WORKLOAD = Workload(members=4, partitions=8, k=2, downtime_ms=700, session_timeout_ms=4000)
TOPICS = ["t"]


def actions(scenario, variant="eager"):
    found = plan(scenario, VARIANTS[variant], WORKLOAD, TOPICS)
    return found, [(a.kind, a.target, a.hold_ms, a.count) for step in found.steps for a in step.actions]


def test_every_scenario_has_a_plan_for_every_variant_but_a_coordinator_failover_without_zkcoord_nodes():
    for scenario in SCENARIOS:
        for variant in VARIANTS.values():
            if (scenario == "coordinator-failover" and variant.coordinator != ZKCOORD) or (
                (scenario == "member-migration") != variant.migrates
            ):
                with pytest.raises(NotApplicable):
                    plan(scenario, variant, WORKLOAD, TOPICS)
            else:
                assert plan(scenario, variant, WORKLOAD, TOPICS).steps


def test_steps_of_each_scenario():
    cold, cold_actions = actions("cold-start")
    assert cold.initial_members == () and cold_actions == [("start", f"m0{i}", 0, 0) for i in range(4)]
    up, up_actions = actions("scale-up")
    assert up.initial_members == ("m00", "m01", "m02", "m03")
    assert up_actions == [("start", "m04", 0, 0), ("start", "m05", 0, 0)]
    assert actions("scale-down")[1] == [("close", "m02", 0, 0), ("close", "m03", 0, 0)]
    bounce, bounce_actions = actions("rolling-bounce", "static")
    assert len(bounce.steps) == 4 and bounce_actions[1] == ("restart", "m01", 700, 0)
    sampled = plan("rolling-bounce", VARIANTS["static"], replace(WORKLOAD, bounces=2), TOPICS)
    assert sampled.initial_members == bounce.initial_members and sampled.steps == bounce.steps[:2]
    assert plan("rolling-bounce", VARIANTS["static"], replace(WORKLOAD, bounces=9), TOPICS).steps == bounce.steps
    assert actions("kill")[1] == [("kill", "m00", 0, 0)]
    assert actions("session-expiry")[1] == [("pause", "m00", 6000, 0)]  # 1.5 sessions: surely expired
    failover, failover_actions = actions("coordinator-failover")
    assert failover.coordinator_nodes == 2 and failover_actions == [("kill-coordinator", None, 0, 0)]
    assert actions("partition-change")[1] == [("add-partitions", "t", 0, 2)]


def test_a_member_migration_replaces_each_legacy_member_after_its_successor_owns_partitions():
    found = plan("member-migration", VARIANTS["member-by-member"], WORKLOAD, TOPICS)
    assert found.initial_members == ("m00", "m01", "m02", "m03")
    migrate, *replacements = found.steps
    assert [(a.kind, a.target) for a in migrate.actions] == [("migrate", "0001_dual_commit")]
    assert [[(a.kind, a.target, a.consumer) for a in step.actions] for step in replacements] == [
        [("start", new, "client"), ("await-partitions", new, None), ("close", old, None)]
        for old, new in (("m00", "m04"), ("m01", "m05"), ("m02", "m06"), ("m03", "m07"))
    ]
    (whole,) = plan("member-migration", VARIANTS["rdkafka-whole-group"], WORKLOAD, TOPICS).steps
    assert [(a.kind, a.target, a.members, a.consumer) for a in whole.actions] == [
        ("close-together", None, ("m00", "m01", "m02", "m03"), None),
        ("migrate", "0001_dual_commit", (), None),
        ("start-together", None, ("m04", "m05", "m06", "m07"), "rdkafka"),
    ]
    assert baseline("rdkafka-member-by-member") == "rdkafka-whole-group" and baseline("static") == "legacy"
    assert baseline("whole-group") is None and baseline("legacy") is None


def test_plans_refuse_what_cannot_run():
    with pytest.raises(ValueError, match="unknown scenario"):
        plan("bounce", VARIANTS["eager"], WORKLOAD, TOPICS)
    with pytest.raises(ValueError, match="0 < k < members"):
        plan("scale-down", VARIANTS["eager"], Workload(members=2, k=2), TOPICS)
    with pytest.raises(ValueError, match="bounces -1: a count of members"):
        plan("kill", VARIANTS["eager"], replace(WORKLOAD, bounces=-1), TOPICS)


def event(kind, time_ms, instance=None, **fields):
    return {"type": kind, "time_ms": time_ms, "instance": instance, **fields}


def started(view, instance, time_ms=0):
    view.apply(event("compare.member", time_ms, instance, member=instance.split("#")[0], event="started"))


def owns(view, instance, time_ms, *partitions, generation=1):
    view.apply(event("compare.assignment", time_ms, instance, partitions=[["t", p] for p in partitions]))
    view.apply(event("compare.rebalance", time_ms, instance, generation=generation))


def test_a_group_is_settled_when_live_members_cover_every_partition_once_in_one_generation_and_it_is_quiet():
    view = GroupView({"t": 4}, legacy=False, quiet_ms=1000)
    started(view, "a#1")
    started(view, "b#1")
    owns(view, "a#1", 100, 0, 1)
    assert any("unowned" in p for p in view.problems(5000))
    owns(view, "b#1", 200, 1, 2, 3)
    assert any("owned twice" in p for p in view.problems(5000))
    owns(view, "b#1", 300, 2, 3, generation=2)
    assert view.problems(5000) == ["members in generations [1, 2]"]
    owns(view, "a#1", 400, 0, 1, generation=2)
    assert view.problems(1300) == ["changed 900 ms ago"]
    assert view.problems(1400) == []
    view.apply(event("compare.member", 2000, "b#1", member="b", event="killed"))  # its partitions are nobody's
    assert any("2 partitions unowned" in p for p in view.problems(9000))
    view.apply(event("compare.topic", 2100, topic="t", partitions=6))
    owns(view, "a#1", 2200, *range(6), generation=3)
    assert view.problems(9000) == []


def test_legacy_members_have_no_generations_to_agree_on():
    view = GroupView({"t": 2}, legacy=True, quiet_ms=0)
    started(view, "a#1")
    started(view, "b#1")
    owns(view, "a#1", 1, 0, generation=None)
    owns(view, "b#1", 2, 1, generation=None)
    assert view.problems(10) == []


def test_a_mixed_group_s_coordinator_members_agree_on_a_generation_beside_legacy_members():
    view = GroupView({"t": 3}, legacy=False, quiet_ms=0)
    for instance in ("a#1", "b#1", "c#1"):
        started(view, instance)
    owns(view, "a#1", 1, 0, generation=None)
    owns(view, "b#1", 2, 1, generation=4)
    owns(view, "c#1", 3, 2, generation=5)
    assert view.problems(10) == ["members in generations [-1, 4, 5]"]
    owns(view, "b#1", 4, 1, generation=5)
    assert view.problems(10) == []


def test_behind_counts_what_is_left_below_each_end_offset():
    view = GroupView({"t": 2}, legacy=True)
    for first, last in ((0, 9), (10, 19), (5, 12)):
        view.apply(event("compare.processed", 1, "a#1", topic="t", partition=0, first_offset=first, last_offset=last))
    assert view.behind({("t", 0): 20, ("t", 1): 3}) == {("t", 1): 3}
    assert view.behind({("t", 0): 25}) == {("t", 0): 5}


SPEC = {"run": "r", "scenario": "kill", "variant": "eager", "instance": "m00#1", "group": "g", "member": "m00"}


def test_the_member_trace_adds_compare_events_and_tags_every_line():
    lines = []
    trace = CompareTrace(lines.append, SPEC)
    assignment = {"m00": [["t", 1], ["t", 0]]}
    trace({"type": "client.assignment", "time_ms": 5, "member": "m00-x", "assignment": assignment})
    trace({"type": "client.assignment", "time_ms": 6, "member": "m00-x", "assignment": assignment})  # no change
    trace({"type": "client.state", "time_ms": 7, "state": "STABLE", "generation": 3})
    trace({"type": "client.state", "time_ms": 8, "state": "PREPARE_REVOCATION", "generation": 3})
    trace({"type": "client.state", "time_ms": 9, "state": "STABLE", "generation": 3})  # the same generation again
    trace({"type": "client.consumed", "time_ms": 10, "topic": "t", "partition": 0})
    trace({"type": "client.committed", "time_ms": 11, "offsets": [["t", 0, 5]], "error": None})
    trace.processed("t", 0, 0, 4, 12)
    derived = [e["type"] for e in lines if e["type"].startswith("compare.")]
    assert derived == ["compare.assignment", "compare.rebalance", "compare.committed", "compare.processed"]
    assert not any(e["type"] == "client.consumed" for e in lines)
    assert all(
        {e[k] for k in ("run", "scenario", "variant", "instance")} == {"r", "kill", "eager", "m00#1"} for e in lines
    )
    assert all(e["member"] == "m00" for e in lines)
    by_type = {e["type"]: e for e in lines}
    assert by_type["compare.assignment"]["partitions"] == [["t", 0], ["t", 1]]
    assert by_type["compare.rebalance"]["generation"] == 3
    processed = by_type["compare.processed"]
    assert (processed["topic"], processed["partition"], processed["first_offset"], processed["last_offset"]) == (
        "t",
        0,
        0,
        4,
    )
    assert processed["time_ms"] == 12


def test_a_legacy_member_rebalance_is_a_successful_attempt():
    lines = []
    trace = CompareTrace(lines.append, {**SPEC, "variant": "legacy"})
    for outcome in ("conflict", "success"):
        trace({"type": "legacy.rebalance_attempt", "time_ms": 1, "outcome": outcome})
    trace({"type": "legacy.committed", "time_ms": 2, "store": "zookeeper", "offsets": [["t", 0, 3]]})
    rebalances = [e for e in lines if e["type"] == "compare.rebalance"]
    assert [e["generation"] for e in rebalances] == [None]
    (committed,) = [e for e in lines if e["type"] == "compare.committed"]
    assert committed["offsets"] == [["t", 0, 3]] and committed["error"] is None


def test_the_generation_is_read_from_librdkafka_s_serialised_group_metadata():
    # As confluent-kafka 2.16's consumer_group_metadata() returned it inside on_assign, in generation 3.
    metadata = b"CGMDv2:\x03\x00\x00\x00g-probe\x00b-28ffc1e1-2a21-4aba-aeba-648d1d4a7340\x00\x01"
    assert generation_of(metadata) == 3
    with pytest.raises(ValueError, match="not librdkafka's consumer group metadata"):
        generation_of(b"CGMDv9:\x03\x00\x00\x00")


def test_a_librdkafka_member_differs_between_targets_only_in_its_bootstrap():
    def config(bootstrap, static=False):
        return rdkafka_member_config("g", bootstrap, "m01", "range", static, 6000, 1000, 500)

    broker, node = config([("127.0.0.1", 9092)]), config([("127.0.0.1", 9093), ("127.0.0.1", 9094)])
    assert {key for key in broker if broker[key] != node[key]} == {"bootstrap.servers"}
    assert node["bootstrap.servers"] == "127.0.0.1:9093,127.0.0.1:9094"
    assert broker["enable.auto.offset.store"] is False  # stored after processing: commits cover processed records
    assert "group.instance.id" not in broker and config([("h", 1)], static=True)["group.instance.id"] == "m01"


def test_librdkafka_variants_are_refused_on_the_synthetic_source(tmp_path):
    from zkcoord.compare.runner import CompareOptions, compare_run

    options = CompareOptions(out=tmp_path / "out", scenarios=["kill"], variants=["legacy", "rdkafka-static"])
    with pytest.raises(ValueError, match="'rdkafka-static' runs librdkafka consumers, which need --source kafka"):
        compare_run(options, say=lambda line: None)
    assert not (tmp_path / "out").exists()


def test_jvm_members_are_refused_on_the_synthetic_source(tmp_path):
    from zkcoord.compare.runner import CompareOptions, compare_run

    options = CompareOptions(out=tmp_path / "out", scenarios=["member-migration"], jvm_members=1)
    with pytest.raises(ValueError, match="JVM members read a Kafka broker"):
        compare_run(options, say=lambda line: None)
    assert not (tmp_path / "out").exists()


def test_a_kip848_member_leaves_the_assignor_and_the_timings_to_the_broker():
    def config(strategy, **protocol):
        return rdkafka_member_config("g", [("127.0.0.1", 9092)], "m01", strategy, False, 6000, 1000, 500, **protocol)

    classic, kip848 = config("range"), config("uniform", group_protocol=CONSUMER_PROTOCOL)
    assert classic["group.protocol"] == "classic" and kip848["group.protocol"] == "consumer"
    # librdkafka refuses these under the consumer protocol; no group.remote.assignor: the broker's default.
    refused = {"partition.assignment.strategy", "session.timeout.ms", "heartbeat.interval.ms"}
    assert set(classic) - set(kip848) == refused
    assert set(kip848) - set(classic) == set()
    assert VARIANTS["kip848"].group_protocol == CONSUMER_PROTOCOL
    assert VARIANTS["classic-kafka4"].group_protocol == "classic" and VARIANTS["classic-kafka4"].strategy == "range"


def test_the_kafka4_variants_bring_their_broker_so_any_source_runs_them():
    assert not VARIANTS["kip848"].reads_kafka and not VARIANTS["classic-kafka4"].reads_kafka
    assert VARIANTS["kip848-static"].static and VARIANTS["kip848-static"].group_protocol == CONSUMER_PROTOCOL
    assert VARIANTS["kip848"].on_kafka4 and not VARIANTS["kafka-eager"].on_kafka4
    assert VARIANTS["kafka-eager"].reads_kafka and VARIANTS["rdkafka-static"].reads_kafka


def test_the_kafka4_broker_times_consumer_groups_as_the_run_times_its_members():
    settings = {key: int(value) for key, value in broker_properties(6000, 1000).items()}
    assert settings["group.consumer.session.timeout.ms"] == 6000
    assert settings["group.consumer.heartbeat.interval.ms"] == 1000
    for kind in ("session.timeout", "heartbeat.interval"):  # Kafka refuses a value outside its own bounds
        low, value, high = (settings[f"group.consumer.{bound}{kind}.ms"] for bound in ("min.", "", "max."))
        assert low <= value <= high
    assert settings["group.min.session.timeout.ms"] <= 6000  # the classic members ask for the run's timeout
    assert int(broker_properties(90_000, 20_000)["group.consumer.max.session.timeout.ms"]) == 90_000
