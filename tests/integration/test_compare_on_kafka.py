"""A comparison run whose records come from the session's real Kafka broker (``--source kafka:...``).

The runner creates the topics through the broker and produces into them; every member reads them back through
KafkaSource, and the legacy group lives in the broker's ZooKeeper chroot. The broker's end offsets and the
traces must agree record for record (the demo's test runs the report over such traces).
"""

import json
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from zkcoord.compare.runner import CompareOptions, compare_run
from zkcoord.compare.scenarios import Workload
from zkcoord.errors import SourceError
from zkcoord.zk import layout

VARIANTS = ("legacy", "static")
PARTITIONS = 4
pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def compared(tmp_path_factory, kafka):
    out = tmp_path_factory.mktemp("compare-kafka")
    options = CompareOptions(
        out=out,
        scenarios=["rolling-bounce"],
        variants=list(VARIANTS),
        workload=Workload(members=2, partitions=PARTITIONS, downtime_ms=500, session_timeout_ms=5000),
        rate=10.0,
        duration_s=1.0,
        zookeeper=kafka.zk_connect,
        source=f"kafka:bootstrap={kafka.bootstrap}",
        node_properties={"group.initial.rebalance.delay.ms": 0},
    )
    results = compare_run(options, say=lambda line: None)
    assert [(r["variant"], r["status"]) for r in results] == [(v, "ok") for v in VARIANTS], results
    return out


def events(out: Path, variant: str) -> list[dict]:
    found = []
    for path in sorted((out / "traces" / "rolling-bounce" / variant).glob("*.jsonl")):
        found += [json.loads(line) for line in path.read_text().splitlines()]
    return found


def of_type(found: list[dict], kind: str) -> list[dict]:
    return [e for e in found if e["type"] == kind]


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_broker_holds_the_records_every_member_processed_and_no_more(compared, kafka, variant):
    found = events(compared, variant)
    (run,) = of_type(found, "compare.run")
    assert run["source"] == f"kafka:bootstrap={kafka.bootstrap}"
    (topic,) = run["partitions"]
    produced = {e["partition"]: e["end_offset"] for e in of_type(found, "compare.produced") if e["topic"] == topic}
    assert produced == kafka.end_offsets(topic)  # the runner produced into the broker
    assert all(end > 0 for end in produced.values())
    processed: dict[int, set[int]] = {p: set() for p in produced}
    for e in of_type(found, "compare.processed"):
        processed[e["partition"]].update(range(e["first_offset"], e["last_offset"] + 1))
    # Every record, and nothing past the broker's end: the synthetic source's logs would have gone on growing.
    assert processed == {p: set(range(end)) for p, end in produced.items()}


def test_the_legacy_group_committed_in_the_broker_s_chroot(compared, kafka):
    found = events(compared, "legacy")
    group = of_type(found, "compare.run")[0]["group"]
    (topic,) = of_type(found, "compare.run")[0]["partitions"]
    ends = kafka.end_offsets(topic)
    client = KazooClient(hosts=kafka.zk_connect)
    client.start(timeout=15)
    try:
        paths = {p: layout.offset_path(group, topic, p) for p in ends}
        committed = {p: layout.decode_offset(path, client.get(path)[0]) for p, path in paths.items()}
    finally:
        client.stop()
        client.close()
    assert all(0 < committed[p] <= ends[p] for p in ends), (committed, ends)


def test_a_zookeeper_the_broker_is_not_registered_in_is_refused(kafka, zk_connect, tmp_path):
    options = CompareOptions(
        out=tmp_path, scenarios=["kill"], zookeeper=zk_connect, source=f"kafka:bootstrap={kafka.bootstrap}"
    )
    with pytest.raises(SourceError, match="not registered in ZooKeeper .*give --zookeeper the broker's"):
        compare_run(options, say=lambda line: None)
    assert not (tmp_path / "traces").exists()
