"""A sample of the fault campaign (``make soak`` runs 200): real nodes, members, ZooKeeper, a Kafka broker behind
the nodes' Kafka listeners, a mixed group the nodes bridge and a nemesis, each run proven safe by the history
checker from its traces alone."""

import json
from dataclasses import replace
from pathlib import Path

import pytest

from zkcoord.compare.history import HistoryReport
from zkcoord.faults import schedule
from zkcoord.faults.campaign import RESULTS, CampaignOptions, describe, failed, run_campaign
from zkcoord.faults.schedule import draw_schedule
from zkcoord.migration.runner import load_steps

# Two consecutive seeds whose schedules hit every fault kind between them, kill and pause a librdkafka member and
# expire the mixed group's legacy member's session: seeds 1-5 did as much in five runs, and no two consecutive seeds
# below 136717 do (the soak runs 200 seeds).
FIRST_SEED = 136717
SAMPLE_RUNS = 2
SAMPLE_SEEDS = range(FIRST_SEED, FIRST_SEED + SAMPLE_RUNS)
WINDOW_S = 10.0


def members_that_processed(out: Path, seed: int) -> set[str]:
    """The members whose traces in run ``seed`` report processed records."""
    return {
        path.name.split("#")[0]
        for path in (out / "runs" / f"seed-{seed}" / "traces").glob("*#*.jsonl")
        if any(json.loads(line)["type"] == "compare.processed" for line in path.read_text().splitlines() if line)
    }


def test_the_sample_hits_every_kind_kills_and_pauses_librdkafka_members_and_expires_a_mixed_legacy_session(tmp_path):
    shape = CampaignOptions(out=tmp_path, window_s=WINDOW_S).shape(len(load_steps()))
    hit = {(fault.kind, fault.target) for seed in SAMPLE_SEEDS for fault in draw_schedule(seed, shape).faults}
    assert {kind for kind, _ in hit} == set(schedule.FAULT_KINDS)
    assert {kind for kind, target in hit if target in shape.rdkafka_members} == schedule.MEMBER_KINDS
    assert {kind for kind, target in hit if target in shape.mixed_legacy_members} >= {schedule.SESSION_EXPIRY}


@pytest.mark.parametrize("option", ["rdkafka_members", "mixed_members"])
def test_a_negative_member_count_is_refused_before_anything_starts(tmp_path, option):
    flag = "--" + option.replace("_", "-")
    with pytest.raises(ValueError, match=f"{flag} -1: a count of members"):
        run_campaign(CampaignOptions(out=tmp_path / "out", **{option: -1}))
    assert not (tmp_path / "out").exists()


@pytest.mark.timeout(420)  # two runs of about 25 s and two campaigns' Kafka broker starts; every wait is bounded
def test_a_sample_of_seeded_fault_runs_breaks_no_rule_and_the_campaign_resumes(tmp_path):
    said: list[str] = []
    sample = CampaignOptions(out=tmp_path, first_seed=FIRST_SEED, window_s=WINDOW_S)
    first = run_campaign(replace(sample, runs=1), said.append)
    records = run_campaign(replace(sample, runs=SAMPLE_RUNS), said.append)

    assert "resuming: 1 of 2 runs already in" in "\n".join(said)
    assert [r["seed"] for r in records] == list(SAMPLE_SEEDS)
    assert records[:1] == first
    assert len((tmp_path / RESULTS).read_text().splitlines()) == SAMPLE_RUNS, "a resumed seed was run again"
    for record in records:
        assert not failed(record), describe(record)
        assert not record["problems"], describe(record)
        report = HistoryReport.from_json(record["report"])
        assert sum(report.faults_injected.values()) >= 1
        assert all(ms is not None for ms in report.recovery_ms.values()), describe(record)
        assert set(record["groups"]) == {"legacy", "client", "rdkafka", "mixed"}
        assert all(group["acknowledged_commits"] > 0 for group in record["groups"].values()), describe(record)
        # The mixed group really was mixed: both kinds were given partitions and read them.
        assert {"mixed-legacy-0", "mixed-client-0"} <= members_that_processed(tmp_path, record["seed"])
