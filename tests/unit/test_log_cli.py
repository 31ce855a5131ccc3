"""``zkcoord log verify|dump|compact|load``: output and exit codes (0 ok, 1 problem found, 2 usage)."""

import json

import pytest

from zkcoord import cli
from zkcoord.log import LogConfig, PartitionLog
from zkcoord.log.format import HEADER_SIZE
from zkcoord.offsets.records import GroupMetadataKey, GroupMetadataValue, OffsetCommitKey, OffsetCommitValue
from zkcoord.offsets.records import encode_record as record

CONFIG = LogConfig(segment_bytes=1024, max_message_bytes=1024)


def run(capsys, *argv):
    code = cli.main([str(arg) for arg in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def log_dir(tmp_path):
    """Two partitions; partition 0 has several segments with superseded offsets and a group record."""
    with PartitionLog.open(tmp_path / "__consumer_offsets-0", CONFIG) as partition:
        for number in range(40):
            partition.append([record(OffsetCommitKey("g", "t", number % 4), OffsetCommitValue(number, "m", 1000))])
        partition.append([record(GroupMetadataKey("g"), GroupMetadataValue("consumer", 3, "range", "m-1", 5, ()))])
    with PartitionLog.open(tmp_path / "__consumer_offsets-1", CONFIG) as partition:
        partition.append([record(OffsetCommitKey("h", "u", 0), OffsetCommitValue(7, "", 1000))])
    return tmp_path


def test_verify_a_healthy_log_dir(capsys, log_dir):
    code, out, _ = run(capsys, "log", "verify", log_dir)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["PARTITION", "SEGMENTS", "BATCHES", "RECORDS", "BYTES", "STATUS"]
    assert lines[1].split()[0::3] == ["__consumer_offsets-0", "41"] and lines[1].endswith("ok")
    assert lines[2].split()[:4] == ["__consumer_offsets-1", "1", "1", "1"]


def test_verify_reports_a_torn_tail_with_file_and_byte_and_exits_1(capsys, log_dir):
    active = sorted((log_dir / "__consumer_offsets-1").glob("*.log"))[-1]
    size = active.stat().st_size
    with open(active, "ab") as file:
        file.write(b"\x00\x00\x01")
    code, out, _ = run(capsys, "log", "verify", log_dir / "__consumer_offsets-1")
    assert code == 1
    assert f"torn tail: {active} at byte {size} (offset 1): 3 bytes where a 4-byte length was expected" in out


def test_verify_reports_corruption_in_an_older_segment(capsys, log_dir):
    older = sorted((log_dir / "__consumer_offsets-0").glob("*.log"))[0]
    data = bytearray(older.read_bytes())
    data[HEADER_SIZE + 1] ^= 0x55
    older.write_bytes(bytes(data))
    code, out, _ = run(capsys, "log", "verify", "--json", log_dir)
    assert code == 1
    (problem,) = json.loads(out)["partitions"][0]["problems"]
    assert problem == {
        "kind": "corrupt segment",
        "file": str(older),
        "position": 0,
        "offset": 0,
        "reason": "checksum mismatch",
    }


def test_verify_reports_damage_before_valid_entries_in_the_active_segment(capsys, tmp_path):
    directory = tmp_path / "__consumer_offsets-0"
    with PartitionLog.open(directory, CONFIG) as partition:
        for number in range(3):
            partition.append([record(OffsetCommitKey("g", "t", 0), OffsetCommitValue(number, "", 1000))])
    active = directory / f"{0:020d}.log"
    data = bytearray(active.read_bytes())
    second = len(data) // 3
    data[second + HEADER_SIZE + 2] ^= 0x10
    active.write_bytes(bytes(data))
    code, out, _ = run(capsys, "log", "verify", directory)
    assert code == 1
    assert (
        f"corrupt active segment: {active} at byte {second} (offset 1): checksum mismatch; "
        f"a valid entry follows at byte {2 * second} (offset 2)"
    ) in out


def test_verify_reports_a_record_whose_key_does_not_decode_under_a_valid_checksum(capsys, tmp_path):
    directory = tmp_path / "__consumer_offsets-0"
    with PartitionLog.open(directory, CONFIG) as partition:
        partition.append([record(OffsetCommitKey("g", "t", 0), OffsetCommitValue(1, "", 1000))])
        partition.append([(b"\x93\x01\xc4\x01\xff", b"\x01")])  # [1, bin, ...]: not a key of the schema
    code, out, _ = run(capsys, "log", "verify", "--json", directory)
    assert code == 1
    (problem,) = json.loads(out)["partitions"][0]["problems"]
    assert (problem["kind"], problem["offset"], problem["file"]) == ("bad record", 1, str(directory / f"{0:020d}.log"))


@pytest.mark.parametrize(
    ("name", "content", "kind"),
    [
        ("swap.json", b"\xff\xfe{not json", "bad swap plan"),
        ("swap.json", b'{"replaces": "x"}', "bad swap plan"),
        ("leader-epoch", b"\xffseven\n", "bad leader epoch"),
        ("leader-epoch", b"-3\n", "bad leader epoch"),
    ],
)
def test_verify_reports_unreadable_state_files_instead_of_failing(capsys, log_dir, name, content, kind):
    (log_dir / "__consumer_offsets-1" / name).write_bytes(content)
    code, out, _ = run(capsys, "log", "verify", log_dir)
    assert code == 1
    assert f"{kind}: {log_dir / '__consumer_offsets-1' / name}: " in out
    assert out.splitlines()[2].endswith(kind)  # the partition's records were still checked
    assert out.splitlines()[1].endswith("ok")


def test_dump_prints_batches_and_decoded_records(capsys, log_dir):
    code, out, _ = run(capsys, "log", "dump", log_dir / "__consumer_offsets-1")
    assert code == 0
    assert "baseOffset: 0 lastOffset: 0 count: 1" in out
    assert "| offset: 0 OffsetCommitKey key: {'group': 'h', 'topic': 'u', 'partition': 0}" in out
    code, out, _ = run(capsys, "log", "dump", "--json", log_dir)
    rows = [json.loads(line) for line in out.splitlines()]
    assert len(rows) == 42
    assert rows[40]["type"] == "GroupMetadataKey" and rows[40]["value"]["leader"] == "m-1"


def test_dump_shows_foreign_records_instead_of_failing(capsys, tmp_path):
    with PartitionLog.open(tmp_path, CONFIG) as partition:
        partition.append([(b"\x93\x07\x01\x02", b"?")])
    code, out, _ = run(capsys, "log", "dump", "--json", tmp_path)
    assert code == 0
    (row,) = [json.loads(line) for line in out.splitlines()]
    assert "record at offset 0" in row["error"] and row["key_hex"] == "93070102"


def test_compact_then_load_lists_the_latest_offsets(capsys, log_dir):
    partition_dir = log_dir / "__consumer_offsets-0"
    before = sum(path.stat().st_size for path in partition_dir.glob("*.log"))
    code, out, _ = run(capsys, "log", "compact", log_dir)
    assert code == 0 and "kept" in out
    assert sum(path.stat().st_size for path in partition_dir.glob("*.log")) < before
    code, out, _ = run(capsys, "log", "load", log_dir)
    assert code == 0
    assert "records/s" in out
    table = [line.split() for line in out.splitlines() if line.startswith(("g ", "h "))]
    assert table == [
        ["g", "t", "0", "36", "m"],
        ["g", "t", "1", "37", "m"],
        ["g", "t", "2", "38", "m"],
        ["g", "t", "3", "39", "m"],
        ["h", "u", "0", "7"],
    ]


def test_compact_refuses_a_partition_another_process_holds(capsys, log_dir):
    with PartitionLog.open(log_dir / "__consumer_offsets-1", CONFIG):
        code, _, err = run(capsys, "log", "compact", log_dir / "__consumer_offsets-1")
    assert code == 2 and "is in use by process" in err


def test_a_path_without_partitions_is_a_usage_error(capsys, tmp_path):
    code, _, err = run(capsys, "log", "verify", tmp_path)
    assert code == 2 and "no partition directory" in err
    code, _, err = run(capsys, "log", "dump", tmp_path / "missing")
    assert code == 2 and "is not a directory" in err
