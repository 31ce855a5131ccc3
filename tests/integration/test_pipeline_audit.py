"""``zkcoord pipeline offsets-audit``: a ZooKeeper offsets export against the offsets log, decoded in Spark.

The logs are written through PartitionLog and the exports with the znode paths of ``zkcoord legacy offsets
export``; the reference is ``zkcoord log load`` joined with the export by :func:`phases.compare`. The session's Spark
(conftest) serves the module.
"""

import json
import random
import subprocess
import sys

import msgpack
import pytest
from spark_support import small_jobs_env

from zkcoord import cli
from zkcoord.log import LogConfig, PartitionLog
from zkcoord.log.format import HEADER_SIZE, decode_entry, encode_records
from zkcoord.migration.phases import compare
from zkcoord.offsets.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    encode_record,
    encode_value,
)
from zkcoord.pipeline import offsets_audit
from zkcoord.zk.layout import offset_path

SMALL_SEGMENTS = LogConfig(flush_policy="never", segment_bytes=1024, max_message_bytes=1024)
PIPELINE_FORBIDDEN = ("gevent", "kazoo", "zkcoord.server", "zkcoord.runtime")


def command(*argv):
    return [sys.executable, "-m", "zkcoord.pipeline.offsets_audit", *map(str, argv)]


def commit(group, topic, partition, offset, timestamp=1_000):
    """An offset commit record; ``offset`` None makes a tombstone."""
    value = None if offset is None else OffsetCommitValue(offset, "", timestamp)
    return encode_record(OffsetCommitKey(group, topic, partition), value)


def write_log(directory, batches, config=SMALL_SEGMENTS):
    """Append each list of records as one batch; returns the segment files."""
    with PartitionLog.open(directory, config) as partition:
        for records in batches:
            partition.append(records)
        return [segment.path for segment in partition.segments]


def export_text(offsets, extra_lines=()):
    """ExportZkOffsets lines for ``{(group, topic, partition): offset}``, then ``extra_lines``."""
    lines = [f"{offset_path(*key)}:{offset}" for key, offset in offsets.items()]
    return "\n".join([*lines, *extra_lines]) + "\n"


def audited(rows):
    return {(r.group, r.topic, r.partition): (r.zk_offset, r.log_offset, r.status) for r in rows.collect()}


def replayed(capsys, log_dir):
    """``zkcoord log load --skip-corrupt --json``: committed offsets, as the coordinator's OffsetFetch reports them."""
    capsys.readouterr()
    assert cli.main(["log", "load", str(log_dir), "--json", "--skip-corrupt"]) == 0
    loaded = json.loads(capsys.readouterr().out)
    return {(r["group"], r["topic"], r["partition"]): r["offset"] for r in loaded if r["offset"] >= 0}


def expected(zk, log):
    return {
        key: (zk.get(key), log.get(key), compare(zk.get(key), log.get(key)).value) for key in zk.keys() | log.keys()
    }


# ---- one log and export with every status ----------------------------------------------------------------------

SCENARIO_ZK = {
    ("orders", "orders", 0): 10,
    ("orders", "orders", 1): 9,
    ("orders", "orders", 2): 15,
    ("orders", "orders", 3): 3,
    ("orders", "orders", 6): 12,
    ("billing", "b", 0): 4,  # repeated below with 5: the last line counts
    ("billing", "b", 1): 6,
    ("billing", "b", 2): 9,
    **{("orders", "filler", number % 3): number for number in range(27, 30)},
}
SCENARIO_EXTRA_LINES = [
    "",
    "garbage",
    "   ",
    "/consumers/orders/offsets/orders/x:5",
    f"{offset_path('billing', 'b', 0)}:5",
    f"{offset_path('billing', 'b', 1)}:abc",
]
SCENARIO_ROWS = {
    ("orders", "orders", 0): (10, 10, "match"),
    ("orders", "orders", 1): (9, 7, "zk_ahead"),
    ("orders", "orders", 2): (15, 20, "log_ahead"),
    ("orders", "orders", 3): (3, None, "missing"),  # tombstoned in the log
    ("orders", "orders", 4): (None, 8, "missing"),  # never in ZooKeeper
    ("orders", "orders", 6): (12, None, "missing"),  # last committed -1: OffsetFetch's "no offset"
    ("billing", "b", 0): (5, 5, "match"),
    ("billing", "b", 1): (6, 6, "match"),
    ("billing", "b", 2): (9, 9, "match"),  # live in both log partitions: the newer commit counts
    **{("orders", "filler", number % 3): (number, number, "match") for number in range(27, 30)},
}


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    """A log dir of two partitions (several segments in the first) and its export; returns both paths."""
    root = tmp_path_factory.mktemp("scenario")
    log_dir = root / "log"
    first = [
        [commit("orders", "orders", 0, 5), commit("orders", "orders", 5, 1)],
        *([commit("orders", "filler", number % 3, number)] for number in range(15)),
        [commit("orders", "orders", 1, 7), commit("orders", "orders", 2, 20), commit("orders", "orders", 3, 3)],
        [commit("orders", "orders", 6, 12), commit("billing", "b", 2, 4, timestamp=500)],
        *([commit("orders", "filler", number % 3, number)] for number in range(15, 30)),
        [commit("orders", "orders", 3, None), commit("orders", "orders", 5, None), commit("orders", "orders", 6, -1)],
        [encode_record(GroupMetadataKey("orders"), GroupMetadataValue("consumer", 1, "range", "m", 5))],
        [commit("orders", "orders", 0, 10), commit("orders", "orders", 4, 8)],
    ]
    segments = write_log(log_dir / "__consumer_offsets-0", first)
    assert len(segments) >= 3
    write_log(log_dir / "__consumer_offsets-1", [[commit("billing", "b", 0, 5), commit("billing", "b", 1, 6)]])
    write_log(log_dir / "__consumer_offsets-1", [[commit("billing", "b", 2, 9, timestamp=2_000)]])
    snapshot = root / "zk-offsets.txt"
    snapshot.write_text(export_text(SCENARIO_ZK, SCENARIO_EXTRA_LINES))
    return snapshot, log_dir


@pytest.fixture(scope="module")
def command_on_scenario(scenario, tmp_path_factory):
    """The command with ``--json --out`` on the scenario, started at once so that its Spark start-up overlaps
    the other tests'; yields a function that waits for it: ``(exit status, stdout, stderr, out dir)``."""
    root = tmp_path_factory.mktemp("command")
    out, stdout, stderr = root / "out", root / "stdout", root / "stderr"
    snapshot, log_dir = scenario
    argv = ["--zk-snapshot", snapshot, "--log-dir", log_dir, "--json", "--out", out]
    with open(stdout, "w") as stdout_file, open(stderr, "w") as stderr_file:
        process = subprocess.Popen(command(*argv), stdout=stdout_file, stderr=stderr_file, env=small_jobs_env())

    def finished():
        process.wait(timeout=180)
        return process.returncode, stdout.read_text(), stderr.read_text(), out

    yield finished
    if process.poll() is None:
        process.kill()
        process.wait()


@pytest.fixture(scope="module")
def scenario_result(command_on_scenario, spark, scenario):  # the command first: it runs in the background
    return offsets_audit.run_audit(spark, *scenario, progress=lambda message: None)


def test_every_key_of_either_store_gets_the_status_migrate_verify_would_give(scenario_result):
    assert scenario_result.rows.columns == ["group", "topic", "partition", "zk_offset", "log_offset", "status"]
    assert audited(scenario_result.rows) == SCENARIO_ROWS
    assert (scenario_result.log_partitions, scenario_result.records) == (2, 45)
    assert scenario_result.segments >= 4


def test_malformed_export_lines_are_counted_and_named_by_line_number(scenario_result):
    first_extra = len(SCENARIO_ZK) + 1
    assert scenario_result.malformed_lines == 3
    assert [(line.line, line.reason) for line in scenario_result.malformed_examples] == [
        (first_extra + 1, "expected /consumers/<group>/offsets/<topic>/<partition>:<offset>"),
        (first_extra + 3, "expected /consumers/<group>/offsets/<topic>/<partition>:<offset>"),
        (first_extra + 5, "offset 'abc' is not a 64-bit integer"),
    ]
    assert scenario_result.malformed_examples[0].text == "garbage"
    assert (scenario_result.export_offsets, scenario_result.repeated_export_lines) == (len(SCENARIO_ZK) + 1, 1)


def test_a_key_live_in_two_log_partitions_is_reported(scenario_result):
    assert scenario_result.log_problem_counts == {"several log partitions": 1}
    (problem,) = scenario_result.log_problems
    assert problem.log_partition == "__consumer_offsets-0, __consumer_offsets-1"
    assert "group billing topic b partition 2" in problem.detail and "offset 9" in problem.detail
    assert not scenario_result.inputs_clean


def test_the_status_expression_is_phases_compare(spark):
    cases = [(None, None), (None, 3), (3, None), (3, 3), (4, 3), (3, 4), (-1, None), (0, 0), (-5, 2)]
    frame = spark.createDataFrame(cases, "zk long, log long")
    statuses = frame.select(offsets_audit._status(frame.zk, frame.log).alias("status")).collect()
    assert [row.status for row in statuses] == [compare(zk, log).value for zk, log in cases]


# ---- damaged logs -----------------------------------------------------------------------------------------------


def test_a_corrupt_older_segment_and_a_torn_tail_are_reported_and_the_rest_is_audited(spark, tmp_path, capsys):
    log_dir = tmp_path / "log"
    batches = [[commit("g", "t", number % 5, number)] for number in range(60)]
    segments = write_log(log_dir / "__consumer_offsets-0", batches)
    assert len(segments) >= 4
    older = segments[1]
    data = bytearray(older.read_bytes())
    second_entry = decode_entry(bytes(data), 0, 1024).size
    data[second_entry + HEADER_SIZE + 2] ^= 0xFF  # inside the records: the checksum no longer matches
    older.write_bytes(bytes(data))
    with open(segments[-1], "ab") as newest:
        newest.write(encode_records(60, 0, [(b"half", b"written")])[:20])
    zk = {("g", "t", partition): 55 + partition for partition in range(5)}
    snapshot = tmp_path / "zk.txt"
    snapshot.write_text(export_text(zk))

    result = offsets_audit.run_audit(spark, snapshot, log_dir, progress=lambda message: None)

    kinds = {problem.kind: problem for problem in result.log_problems}
    assert result.log_problem_counts == {"corrupt segment": 1, "torn tail": 1}
    assert f"{older}: corrupt entry at byte {second_entry} " in kinds["corrupt segment"].detail
    assert "checksum mismatch" in kinds["corrupt segment"].detail
    assert str(segments[-1]) in kinds["torn tail"].detail
    assert not result.inputs_clean
    # `log load --skip-corrupt` skips the same records and cuts the same tail.
    assert audited(result.rows) == expected(zk, replayed(capsys, log_dir))


def test_a_record_that_does_not_decode_is_reported_and_left_out(spark, tmp_path):
    log_dir = tmp_path / "log"
    bad_value = (commit("g", "t", 0, 1)[0], msgpack.packb([9, "not", "a", "commit"]))
    write_log(log_dir, [[commit("g", "t", 0, 4)], [commit("g", "t", 1, 2)], [bad_value]])
    snapshot = tmp_path / "zk.txt"
    snapshot.write_text(export_text({("g", "t", 0): 4, ("g", "t", 1): 2}))

    result = offsets_audit.run_audit(spark, snapshot, log_dir, progress=lambda message: None)

    assert audited(result.rows) == {("g", "t", 0): (4, 4, "match"), ("g", "t", 1): (2, 2, "match")}
    (problem,) = result.log_problems
    assert problem.kind == "undecodable record" and problem.log_partition == "log"
    assert "record at offset 2: unknown offset commit value version 9" in problem.detail
    assert not result.inputs_clean


# ---- the same answer as the loader ------------------------------------------------------------------------------


def write_random_logs(log_dir, rng):
    """Three partitions of random commits, tombstones, -1 offsets, version-0 keys and group records; the keys."""
    groups = [f"group-{number}" for number in range(6)]
    keys = [(group, topic, partition) for group in groups for topic in ("a", "b") for partition in range(4)]
    batches = {number: [] for number in range(3)}
    for _ in range(300):
        group, topic, partition = rng.choice(keys)
        roll = rng.random()
        if roll < 0.15:
            record = commit(group, topic, partition, None)
        elif roll < 0.25:  # a version-0 key: the same key to the loader
            value = OffsetCommitValue(rng.randrange(50), "", rng.randrange(10**6))
            record = (msgpack.packb([0, group, topic, partition]), encode_value(value))
        elif roll < 0.28:
            record = encode_record(GroupMetadataKey(group), GroupMetadataValue("consumer", 1, "range", "m", 5))
        else:
            record = commit(group, topic, partition, rng.choice([-1, *range(50)]), rng.randrange(10**6))
        log_partition = batches[groups.index(group) % 3]
        if log_partition and rng.random() < 0.4:
            log_partition[-1].append(record)
        else:
            log_partition.append([record])
    for number, partition_batches in batches.items():
        write_log(log_dir / f"__consumer_offsets-{number}", partition_batches)
    return keys


def test_the_audit_gives_what_the_loader_replays_joined_with_the_export(spark, tmp_path, capsys):
    log_dir = tmp_path / "log"
    rng = random.Random(20)
    keys = write_random_logs(log_dir, rng)
    log = replayed(capsys, log_dir)
    zk = {}
    for key in [*keys, *(("zk-only", "a", partition) for partition in range(3))]:
        roll = rng.random()
        if roll < 0.5 and key in log:
            zk[key] = log[key]
        elif roll < 0.85:
            zk[key] = rng.randrange(-1, 50)
    snapshot = tmp_path / "zk.txt"
    snapshot.write_text(export_text(zk))

    rows = offsets_audit.audit(spark, snapshot, log_dir)

    assert audited(rows) == expected(zk, log)
    assert {status for _, _, status in expected(zk, log).values()} == {"match", "zk_ahead", "log_ahead", "missing"}


# ---- the command -----------------------------------------------------------------------------------------------


def test_the_command_reports_differences_as_json_writes_parquet_and_exits_1(spark, command_on_scenario):
    returncode, stdout, stderr, out = command_on_scenario()

    assert returncode == 1, stderr
    report = json.loads(stdout)
    assert report["ok"] is False
    assert report["status_counts"] == {"match": 7, "zk_ahead": 1, "log_ahead": 1, "missing": 3}
    assert [(r["topic"], r["partition"], r["status"]) for r in report["rows"]] == [
        ("orders", 1, "zk_ahead"),
        ("orders", 2, "log_ahead"),
        ("orders", 3, "missing"),
        ("orders", 4, "missing"),
        ("orders", 6, "missing"),
    ]
    assert report["differing_groups"] == [
        {"group": "orders", "partitions": 9, "match": 4, "zk_ahead": 1, "log_ahead": 1, "missing": 3}
    ]
    assert report["zookeeper_export"]["malformed_lines"] == 3
    assert [problem["kind"] for problem in report["log"]["problems"]] == ["several log partitions"]
    for stage in ("log: decoded 45 offset commit record(s)", "zookeeper export: 12 offset line(s)", "compared 12"):
        assert stage in stderr
    assert audited(spark.read.parquet(str(out / "audit.parquet"))) == SCENARIO_ROWS
    summary = {row.group: row.asDict() for row in spark.read.parquet(str(out / "summary.parquet")).collect()}
    assert summary["billing"] == {
        "group": "billing",
        "partitions": 3,
        "match": 3,
        "zk_ahead": 0,
        "log_ahead": 0,
        "missing": 0,
    }


def test_the_table_lists_non_matching_partitions_and_exit_0_means_all_match(spark, scenario, tmp_path, capsys):
    snapshot, log_dir = scenario
    assert offsets_audit.main(["--zk-snapshot", str(snapshot), "--log-dir", str(log_dir), "--limit", "2"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[:4] == [
        "GROUP   TOPIC   PARTITION  ZK-OFFSET  LOG-OFFSET  STATUS",
        "orders  orders  1          9          7           zk_ahead",
        "orders  orders  2          15         20          log_ahead",
        "... and 3 more non-matching partition(s); --out writes every one",
    ]
    assert "2 group(s), 12 partition(s): 7 match, 1 zk_ahead, 1 log_ahead, 3 missing" in out
    assert "  line 13: expected /consumers/<group>/offsets/<topic>/<partition>:<offset>: 'garbage'" in out
    assert out[-1] == "Offsets NOT verified."

    log_dir = tmp_path / "log"
    write_log(log_dir / "__consumer_offsets-0", [[commit("g", "t", 0, 3)], [commit("g", "t", 1, 4)]])
    (tmp_path / "zk.txt").write_text(export_text({("g", "t", 0): 3, ("g", "t", 1): 4}))
    assert offsets_audit.main(["--zk-snapshot", str(tmp_path / "zk.txt"), "--log-dir", str(log_dir)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == ["1 group(s), 2 partition(s): 2 match, 0 zk_ahead, 0 log_ahead, 0 missing"] + [
        "Offsets verified: every partition matches."
    ]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--zk-snapshot", "{tmp}/nothing.txt", "--log-dir", "{tmp}"], "--zk-snapshot {tmp}/nothing.txt: no such file"),
        (["--zk-snapshot", "{tmp}/zk.txt", "--log-dir", "{tmp}/nowhere"], "--log-dir {tmp}/nowhere: no such directory"),
        (["--zk-snapshot", "{tmp}/zk.txt", "--log-dir", "{tmp}"], "holds no offsets-log partition"),
        (["--zk-snapshot", "{tmp}/zk.txt"], "the following arguments are required: --log-dir"),
    ],
)
def test_usage_errors_exit_2_with_a_message_and_no_traceback(tmp_path, argv, message):
    (tmp_path / "zk.txt").write_text("")

    finished = subprocess.run(command(*(arg.format(tmp=tmp_path) for arg in argv)), capture_output=True, text=True)

    assert finished.returncode == 2
    assert message.format(tmp=tmp_path) in finished.stderr
    assert "Traceback" not in finished.stderr and not finished.stdout


def test_neither_the_driver_nor_the_workers_import_gevent_or_kazoo(spark):
    probe = (
        "import sys; import zkcoord.pipeline.offsets_audit; "
        f"print(sorted(name for name in {PIPELINE_FORBIDDEN!r} if name in sys.modules)); "
        "from zkcoord.log import PartitionLog"  # the package still imports whole afterwards
    )
    finished = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert (finished.returncode, finished.stdout.strip()) == (0, "[]"), finished.stderr

    def loaded_in_worker(_):
        import importlib
        import sys

        importlib.import_module("zkcoord.pipeline.offsets_audit")
        yield sorted(name for name in PIPELINE_FORBIDDEN if name in sys.modules)

    assert spark.sparkContext.parallelize([0], 1).mapPartitions(loaded_in_worker).collect() == [[]]
