"""The ``zkcoord`` command: output, exit codes (0 ok, 1 problem found, 2 usage/connection)."""

import json
import os
import re
import signal
import subprocess
import sys
import time

import pyarrow.parquet as pq
import pytest
from legacy_support import member, prepare_cluster
from spark_support import SUBMIT_ARGS

from zkcoord import cli
from zkcoord.cli import common
from zkcoord.testing.legacy import converged
from zkcoord.testing.zookeeper import wait_until
from zkcoord.zk import admin, layout


def run(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_topics_create_list_alter(capsys, zk, zk_connect):
    assert run(capsys, "topics", "create", "orders", "--partitions", "3", "--zookeeper", zk_connect)[0] == 0
    assert zk.get(layout.topic_path("orders"))[0] == b'{"version":1,"partitions":{"0":[0],"1":[0],"2":[0]}}'
    assert zk.exists(layout.partition_state_path("orders", 2))
    code, out, _ = run(capsys, "topics", "list", "--zookeeper", zk_connect)
    assert code == 0 and out.split() == ["TOPIC", "PARTITIONS", "orders", "3"]
    assert run(capsys, "topics", "alter", "--topic", "orders", "--partitions", "5", "--zookeeper", zk_connect)[0] == 0
    assert zk.exists(layout.partition_state_path("orders", 4))
    code, out, _ = run(capsys, "topics", "list", "--json", "--zookeeper", zk_connect)
    assert json.loads(out) == {"orders": {"partitions": 5}}


def test_topic_errors_exit_2_and_change_nothing(capsys, zk, zk_connect):
    run(capsys, "topics", "create", "t", "--partitions", "2", "--zookeeper", zk_connect)
    code, _, err = run(capsys, "topics", "create", "t", "--partitions", "9", "--zookeeper", zk_connect)
    assert code == 2 and "already exists" in err
    code, _, err = run(capsys, "topics", "alter", "--topic", "t", "--partitions", "1", "--zookeeper", zk_connect)
    assert code == 2 and "can only grow" in err
    code, _, err = run(capsys, "topics", "create", "bad name", "--partitions", "1", "--zookeeper", zk_connect)
    assert code == 2 and "illegal" in err
    assert layout.decode_topic_partitions("t", zk.get(layout.topic_path("t"))[0]) == [0, 1]


def test_garbage_topic_is_listed_as_unreadable(capsys, zk, zk_connect):
    zk.create(layout.topic_path("junk"), b"{not json", makepath=True)
    code, out, _ = run(capsys, "topics", "list", "--zookeeper", zk_connect)
    assert code == 0 and "junk" in out and "unreadable" in out


def test_missing_or_unreachable_zookeeper_exits_2(capsys, monkeypatch):
    monkeypatch.delenv("ZKCOORD_ZK_CONNECT", raising=False)
    code, _, err = run(capsys, "topics", "list")
    assert code == 2 and "ZKCOORD_ZK_CONNECT" in err
    monkeypatch.setattr(common, "CONNECT_TIMEOUT_S", 0.5)
    code, _, err = run(capsys, "topics", "list", "--zookeeper", "127.0.0.1:1")
    assert code == 2 and "cannot connect" in err
    with pytest.raises(SystemExit) as usage:
        cli.main(["topics", "create", "t"])
    assert usage.value.code == 2


def test_brokers_register_persistent(capsys, zk, zk_connect):
    code, out, _ = run(
        capsys,
        "brokers",
        "register",
        "--id",
        "3",
        "--host",
        "h",
        "--port",
        "9092",
        "--persistent",
        "--zookeeper",
        zk_connect,
    )
    assert code == 0 and "broker 3" in out
    registration = layout.decode_broker_registration(3, zk.get(layout.broker_path(3))[0])
    assert (registration.host, registration.port, registration.version) == ("h", 9092, 1)
    assert zk.get(layout.broker_path(3))[1].ephemeralOwner == 0
    assert (
        run(capsys, "brokers", "register", "--id", "3", "--host", "h", "--port", "1", "--zookeeper", zk_connect)[0] == 2
    )


def test_legacy_verify_ok_then_problem(capsys, zk, zk_connect):
    prepare_cluster(zk, {"t": 3})
    with member(zk_connect, "m0") as consumer:
        wait_until(lambda: converged(zk, "g", members=[consumer.consumer_id]), what="convergence")
        code, out, _ = run(capsys, "legacy", "verify", "--group", "g", "--zookeeper", zk_connect)
        assert code == 0 and "Rebalance verified" in out and "g_m0-0" in out
    zk.create(
        layout.consumer_path("g", "g_ghost"), b'{"version":1,"subscription":{"t":1},"pattern":"static","timestamp":"1"}'
    )
    zk.create(layout.owner_path("g", "t", 0), b"g_gone-0", makepath=True)
    code, out, _ = run(capsys, "legacy", "verify", "--group", "g", "--json", "--zookeeper", zk_connect)
    report = json.loads(out)
    assert code == 1 and not report["ok"]
    assert "owner g_gone-0 of [t,0] is not a live thread of group g" in report["problems"]
    assert "no owner for partition [t,1]" in report["problems"]


def test_offsets_export_import_round_trip(capsys, zk, zk_connect, tmp_path):
    zk.create(layout.offset_path("g1", "t", 0), b"42", makepath=True)
    zk.create(layout.offset_path("g1", "t", 10), b"7", makepath=True)
    zk.create(layout.offset_path("g2", "u", 1), b"5", makepath=True)
    exported = tmp_path / "offsets.txt"
    assert run(capsys, "legacy", "offsets", "export", "--output", str(exported), "--zookeeper", zk_connect)[0] == 0
    assert exported.read_text().splitlines() == [
        "/consumers/g1/offsets/t/0:42",
        "/consumers/g1/offsets/t/10:7",
        "/consumers/g2/offsets/u/1:5",
    ]
    code, out, _ = run(capsys, "legacy", "offsets", "export", "--group", "g2", "--zookeeper", zk_connect)
    assert out == "/consumers/g2/offsets/u/1:5\n"
    zk.delete("/consumers", recursive=True)
    assert run(capsys, "legacy", "offsets", "import", "--input", str(exported), "--zookeeper", zk_connect)[0] == 0
    assert zk.get(layout.offset_path("g1", "t", 10))[0] == b"7"


def test_offsets_import_rejects_a_bad_file_before_writing(capsys, zk, zk_connect, tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("/consumers/g/offsets/t/0:1\n/consumers/g/offsets/t/1:abc\n")
    code, _, err = run(capsys, "legacy", "offsets", "import", "--input", str(bad), "--zookeeper", zk_connect)
    assert code == 2 and "line 2" in err
    assert not zk.exists(layout.offset_path("g", "t", 0))


def test_read_properties_accepts_java_separators(tmp_path):
    path = tmp_path / "consumer.properties"
    path.write_text("# comment\ngroup.id=a\nrebalance.backoff.ms: 100\nauto.commit.enable false\n! other\n")
    assert common.read_properties(str(path)) == {
        "group.id": "a",
        "rebalance.backoff.ms": "100",
        "auto.commit.enable": "false",
    }


def test_read_properties_joins_lines_ending_in_a_backslash_as_java_does(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text('sasl.jaas.config=PlainLoginModule required \\\n    user_admin="a\\\\";\nkept=one \\\\\nnext=two\n')
    assert common.read_properties(str(path)) == {
        "sasl.jaas.config": 'PlainLoginModule required user_admin="a\\\\";',
        "kept": "one \\\\",
        "next": "two",
    }


def _spawn(*argv):
    return subprocess.Popen(
        [sys.executable, "-m", "zkcoord.cli", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def _spawn_member(zk_connect, consumer_id, topics, *extra):
    """``zkcoord legacy run`` for member ``g_<consumer_id>`` of group ``g``, reading synthetic records (the broker
    that prepare_cluster registers does not run)."""
    return _spawn(
        "legacy",
        "run",
        "--source",
        "synthetic",
        "--zookeeper",
        zk_connect,
        "--group",
        "g",
        "--topics",
        topics,
        "--consumer-id",
        consumer_id,
        *extra,
    )


def _read_until(process, needle, limit=200):
    lines = []
    for _ in range(limit):
        line = process.stdout.readline()
        lines.append(line)
        if needle in line or not line:
            break
    return "".join(lines)


def test_legacy_run_prints_assignment_and_leaves_on_interrupt(zk, zk_connect, tmp_path):
    prepare_cluster(zk, {"t": 2})
    trace = tmp_path / "trace.jsonl"
    process = _spawn_member(
        zk_connect, "cli", "t:2", "--trace", str(trace), "--consumer-property", "rebalance.backoff.ms=100"
    )
    try:
        output = _read_until(process, "rebalance attempt")
        assert "rebalance attempt 1 (startup): success" in output and "g_cli-0: t-0" in output
        process.send_signal(signal.SIGINT)
        assert process.wait(30) == 130  # interrupted, after the member left cleanly
    finally:
        process.kill()
    assert not zk.exists(layout.consumer_path("g", "g_cli"))
    assert any(json.loads(line)["type"] == "legacy.closed" for line in trace.read_text().splitlines())


def test_zk_start_serves_until_interrupted(tmp_path):
    from zkcoord.zk.server import four_letter_word, free_port

    port = free_port("127.0.0.1")
    process = _spawn("zk", "start", "--port", str(port), "--data-dir", str(tmp_path / "zk"), "--tick-time", "100")
    try:
        assert f"serving on 127.0.0.1:{port}" in _read_until(process, "serving")
        assert "Mode: standalone" in four_letter_word("127.0.0.1", port, "srvr")
        process.send_signal(signal.SIGINT)
        assert process.wait(30) == 130
    finally:
        process.kill()
    assert (tmp_path / "zk" / "zoo.cfg").exists()  # a data dir the user gave is kept


@pytest.mark.timeout(900)
def test_demo_compares_migrates_and_reports(capsys, tmp_path, monkeypatch):
    # One variant (the comparison of several is test_compare_run's), and the report's Spark in small-jobs mode: the
    # demo is the suite's longest test.
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", SUBMIT_ARGS)
    out = tmp_path / "demo"
    demo = ("demo", "--members", "2", "--partitions", "4", "--variants", "static", "--out", str(out))
    code, printed, _ = run(capsys, *demo)
    assert code == 0, printed
    assert (out / "report" / "report.html").exists() and (out / "report" / "summary.parquet").exists()
    assert "follows LOG_ONLY" in printed and "follows ZK_ONLY" in printed  # the members followed the phases
    assert f"Report: {(out / 'report' / 'report.html').resolve()}" in printed
    # The real peers: Kafka's broker fed and served the comparison, Kafka's 0.8.2 consumer was in the group.
    assert "Kafka 3.9.2 broker (org.apache.kafka:kafka_2.13:3.9.2)" in printed
    assert re.search(r"Kafka 0\.8\.2\.2 ConsoleConsumer \(JVM\) +owns \[\d", printed), printed
    consumed = re.search(r"ConsoleConsumer consumed (\d+) records of the broker", printed)
    assert consumed and int(consumed[1]) > 0, printed
    runs = [
        json.loads(line)
        for path in (out / "compare" / "traces").rglob("runner.jsonl")
        for line in path.read_text().splitlines()
        if '"compare.run"' in line
    ]
    assert len(runs) == 2 and all(run["source"].startswith("kafka:bootstrap=127.0.0.1:") for run in runs)
    summary = pq.read_table(out / "report" / "summary.parquet").to_pylist()
    assert len(summary) == 2 and all(row["records_processed"] > 0 and row["records_missed"] == 0 for row in summary)
    # The member-by-member migration had the JVM member and librdkafka members in one group, none owning twice.
    assert re.search(r"m02 joined: m00 \(jvm\) [1-9]\d*, m01 \(legacy\) \d+, m02 \(rdkafka\) [1-9]", printed), printed
    assert "member by member: partitions owned twice 0," in printed
    manifest = json.loads((out / "member-migration" / "compare.json").read_text())
    assert {(run["variant"], run["status"], run["figures"]["owned_twice"]) for run in manifest["runs"]} == {
        ("rdkafka-whole-group", "ok", 0),
        ("rdkafka-member-by-member", "ok", 0),
    }


def test_zookeeper_errors_exit_2_without_a_traceback(capsys, zk, zk_connect, tmp_path):
    zk.create("/consumers/g", ephemeral=True, makepath=True)  # foreign data: no children allowed below it
    lines = tmp_path / "offsets.txt"
    lines.write_text("/consumers/g/offsets/t/0:1\n")
    code, _, err = run(capsys, "legacy", "offsets", "import", "--input", str(lines), "--zookeeper", zk_connect)
    assert code == 2 and "NoChildrenForEphemeralsError" in err and "Traceback" not in err


def test_verify_reports_missing_groups_and_foreign_owner_nodes(capsys, zk, zk_connect):
    code, out, _ = run(capsys, "legacy", "verify", "--group", "nope", "--zookeeper", zk_connect)
    assert code == 1 and "consumer group nope does not exist" in out
    prepare_cluster(zk, {"t": 1})
    with member(zk_connect, "m0"):
        zk.create(layout.owners_path("g", "t") + "/0-0", b"pykafka-host:uuid")  # pykafka's <leader>-<partition>
        code, out, _ = run(capsys, "legacy", "verify", "--group", "g", "--zookeeper", zk_connect)
    assert code == 1 and "owner node /consumers/g/owners/t/0-0 is not in the 0.8.2 layout" in out


def test_verify_fails_on_an_unreadable_topic_and_escapes_foreign_owner_bytes(capsys, zk, zk_connect):
    """Foreign data in ZooKeeper: a topic znode 0.8.2 cannot read is a problem, not an empty topic, and an owner's
    control bytes reach the terminal escaped."""
    zk.create(
        layout.consumer_path("g", "g_m"),
        b'{"version":1,"subscription":{"t":1,"u":1},"pattern":"static","timestamp":"1"}',
        makepath=True,
    )
    zk.create(layout.topic_path("t"), b"\x00garbage", makepath=True)
    admin.create_topic(zk, "u", 1)
    zk.create(layout.owner_path("g", "u", 0), b"g_gone-0\x1b[2J", makepath=True)
    code, out, _ = run(capsys, "legacy", "verify", "--group", "g", "--zookeeper", zk_connect)
    assert code == 1 and "Rebalance NOT verified" in out
    assert "ERROR: topic t has an unreadable znode" in out
    assert "\x1b" not in out and "owner g_gone-0\\x1b[2J of [u,0] is not a live thread" in out


def test_topics_alter_keeps_fields_of_later_versions(capsys, zk, zk_connect):
    zk.create(
        layout.topic_path("v3"),
        b'{"version":3,"topic_id":"x7","partitions":{"0":[1,2]},"adding_replicas":{},"removing_replicas":{}}',
        makepath=True,
    )
    assert run(capsys, "topics", "alter", "--topic", "v3", "--partitions", "2", "--zookeeper", zk_connect)[0] == 0
    node = json.loads(zk.get(layout.topic_path("v3"))[0])
    assert node["topic_id"] == "x7" and node["version"] == 3 and node["adding_replicas"] == {}
    assert node["partitions"] == {"0": [1, 2], "1": [0]}  # no broker registered: replicas fall back to 0


def test_legacy_run_can_be_interrupted_while_joining(zk, zk_connect):
    """Registration may wait a session timeout per try (an old session's node); Ctrl-C must still work."""
    prepare_cluster(zk, {"t": 1})
    zk.create(
        layout.consumer_path("g", "g_stuck"),
        b'{"version":1,"subscription":{"t":1},"pattern":"static","timestamp":"1"}',
        ephemeral=True,
        makepath=True,
    )
    process = _spawn_member(zk_connect, "stuck", "t", "--consumer-property", "zookeeper.session.timeout.ms=20000")
    try:
        assert "joining group g" in _read_until(process, "joining")
        time.sleep(1.0)  # well inside the 20 s back-off
        process.send_signal(signal.SIGINT)
        assert process.wait(15) == 130
    finally:
        process.kill()
