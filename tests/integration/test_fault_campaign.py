"""A sample of the fault campaign (``make soak`` runs 200): real nodes, members, ZooKeeper and a nemesis, each run
proven safe by the history checker from its traces alone."""

from zkcoord.compare.history import HistoryReport
from zkcoord.faults.campaign import RESULTS, CampaignOptions, describe, failed, run_campaign

SAMPLE_SEEDS = 5
WINDOW_S = 10.0


def test_a_sample_of_seeded_fault_runs_breaks_no_rule_and_the_campaign_resumes(tmp_path):
    said: list[str] = []
    first = run_campaign(CampaignOptions(out=tmp_path, runs=2, window_s=WINDOW_S), said.append)
    records = run_campaign(CampaignOptions(out=tmp_path, runs=SAMPLE_SEEDS, window_s=WINDOW_S), said.append)

    assert "resuming: 2 of 5 runs already in" in "\n".join(said)
    assert [r["seed"] for r in records] == [1, 2, 3, 4, 5]
    assert records[:2] == first
    assert len((tmp_path / RESULTS).read_text().splitlines()) == SAMPLE_SEEDS, "a resumed seed was run again"
    for record in records:
        assert not failed(record), describe(record)
        assert not record["problems"], describe(record)
        report = HistoryReport.from_json(record["report"])
        assert sum(report.faults_injected.values()) >= 1
        assert report.acknowledged_commits > 0
        assert all(ms is not None for ms in report.recovery_ms.values()), describe(record)
