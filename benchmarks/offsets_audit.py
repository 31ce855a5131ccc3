"""The offsets audit as the keys grow: ``zkcoord pipeline offsets-audit`` (PySpark) against one Python process.

For each size in turn (default 100k, 1M, 2M and 5M keys; nothing is reused from one size to the next):

1. generates (fixed seed) a ZooKeeper export and an offsets-log directory of 8 offsets-log partitions,
   ``DIR/log/__consumer_offsets-<p>``, each group in the partition ``partition_for`` gives it (as the
   coordinator places it). The log is written through ``PartitionLog`` (log.flush.policy=never, the default
   100 MiB segments: one segment per partition up to 5M keys, 75 MB each) with ``encode_record``: the bytes the
   coordinator appends. Each group (1 to 3 topics of 1 to 48 partitions) first gets its group metadata record,
   then its commits, one batch per OffsetCommit request (at most 32 partitions), version-3 values without
   expiry; requests come in rounds, shuffled within a round: the first commit of every key, then the second
   ones, ... (60% of the keys in the log are committed once, 25% twice, 15% 3 to 5 times: the last one
   counts), then tombstones (as offset expiry appends them), then a few new commits after a tombstone. The export
   is one ``/consumers/<group>/offsets/<topic>/<partition>:<offset>`` line per ZooKeeper key, the format of
   ``zkcoord legacy offsets export``. The planted mix, per key: 80% match, 5% zk_ahead, 5% log_ahead, 3.5% only
   in ZooKeeper, 3.5% only in the log, 1.5% committed then tombstoned in the log but still in ZooKeeper (the
   last three: missing), 1% tombstoned then committed again (match), and 0.5% more tombstoned and not in
   ZooKeeper (in neither store: no row, not counted in the keys). "Keys" is the number of rows the audit
   must report; the generator keeps its own count per status;
2. times the baseline in a process of its own: this file's ``baseline`` command reads the export line by line
   (``parse_offset_path``/``decode_offset``, the last line of a key counts), replays each log partition as
   ``zkcoord log load --skip-corrupt`` does (``PartitionLog.open`` and ``zkcoord.log.loader.load_partition``),
   drops offsets below 0 as OffsetFetch does, and counts ``zkcoord.migration.phases.compare`` of every key in
   either store;
3. times ``python -m zkcoord.pipeline offsets-audit --zk-snapshot F --log-dir D --master local[2] --json`` as
   users run it (a subprocess: the JVM's start, decoding, the comparison, the report with its group summary).
   Its exit status is 1 here, as it must be when partitions differ (0: all match, 2: usage error);
4. peak memory of each: the RSS of its whole process tree (for Spark the driver, the JVM and the Python
   workers), /proc/<pid>/status VmRSS of every descendant summed every 100 ms, the largest sum kept;
5. per size, the table (wall seconds, peak RSS, keys/s), the ratios Spark / baseline, Spark's stages (from
   the stamps of its progress lines) and the check: the counts per status of Spark, of the baseline and of the
   generator must be equal (and Spark's partitions, groups, records and export lines must be the generator's,
   with no log problem and no malformed line). Any difference prints MISMATCH and makes the exit status 1, as
   does a contender that fails. At the end, one line per size.

Generation (one process) runs at about 75k keys/s here: 5M keys take about 70 s to write. The whole default run
takes about 7 minutes on 2 cores, where Spark's fixed cost (the JVM, the Python workers, the first jobs: 15 to
20 s) kept it behind the baseline up to about 5M keys, where both took about 80 s. Other sessions' processes
skew the figures: the machine line shows the load average. The data lives under the repository's var/ (not
tmpfs) and is removed after each size.

    python benchmarks/offsets_audit.py [--quick] [--keys N[,N...]]
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import itertools
import json
import random
import re
import shutil
import signal
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from contenders import Outcome, machine, mib, run_contender
from coordinator import bench_directory

from zkcoord.migration.phases import Comparison, compare
from zkcoord.offsets.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    encode_record,
)
from zkcoord.zk.layout import ZnodeDecodeError, decode_offset, offset_path, parse_offset_path

SPARK_MASTER = "local[2]"
DEFAULT_KEYS = (100_000, 1_000_000, 2_000_000, 5_000_000)
QUICK_KEYS = (20_000,)
SEED = 20250717
STATUSES = [comparison.value for comparison in Comparison]

LOG_PARTITIONS = 8  # offsets.topic.num.partitions of the generated log
TOPICS = 400
PARTITION_CHOICES = (1, 3, 4, 6, 8, 12, 16, 24, 32, 48)
TOPICS_PER_GROUP = (1, 1, 1, 2, 2, 3)
COMMITS = (1,) * 12 + (2,) * 5 + (3, 4, 5)  # commits of a key in the log: 60% once, 25% twice, 15% 3 to 5 times
PER_REQUEST = 32  # partitions per OffsetCommit request
TOMBSTONE_ROUND = max(COMMITS)
RECOMMIT_ROUND = TOMBSTONE_ROUND + 1
ROUND_MS = 3_600_000
T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z

KINDS = (  # (kind of key, share, the status the audit must give it; None: in neither store, no row)
    ("match", 0.80, "match"),
    ("zk_ahead", 0.05, "zk_ahead"),
    ("log_ahead", 0.05, "log_ahead"),
    ("zk_only", 0.035, "missing"),
    ("log_only", 0.035, "missing"),
    ("tombstoned", 0.015, "missing"),  # committed, then tombstoned in the log; still in ZooKeeper
    ("recommitted", 0.01, "match"),  # committed, tombstoned, committed again: the last commit counts
    ("gone", 0.005, None),  # committed, then tombstoned in the log; not in ZooKeeper
)
_CUMULATIVE = list(itertools.accumulate(share for _, share, _ in KINDS))


# ---- the generator ------------------------------------------------------------------------------------------


@dataclass
class Planted:
    """What the generator wrote and the answer it expects."""

    keys: int  # rows the audit must report
    groups: int  # groups with at least one row
    status_counts: dict[str, int]
    kinds: dict[str, int]
    records: int  # offset commit records in the log, tombstones included
    tombstones: int
    repeated: int  # keys committed more than once in the log
    group_records: int
    export_lines: int
    export_bytes: int
    log_bytes: int
    segments: int
    seconds: float


def _kind(rng) -> tuple[str, str | None]:
    kind, _, status = KINDS[min(bisect.bisect(_CUMULATIVE, rng.random()), len(KINDS) - 1)]
    return kind, status


def generate(root: Path, keys: int, seed: int) -> Planted:
    """Write ``root/zk-offsets.txt`` and ``root/log``; returns what was planted."""
    from zkcoord.group.coordinator import partition_for
    from zkcoord.log import LogConfig, PartitionLog

    started = time.monotonic()
    rng = random.Random(f"{seed}/{keys}")
    topic_partitions = [rng.choice(PARTITION_CHOICES) for _ in range(TOPICS)]
    rounds: list[list[tuple[int, list]]] = [[] for _ in range(RECOMMIT_ROUND + 1)]  # requests: (log partition, records)
    statuses, kinds = Counter(), Counter()
    rows = groups = records = tombstones = repeated = 0
    export_lines = 0
    with open(root / "zk-offsets.txt", "w") as export:
        for group_number in itertools.count():
            if rows == keys:
                break
            group = f"consumer-group-{group_number:07d}"
            log_partition = partition_for(group, LOG_PARTITIONS)
            member = MemberMetadata(f"{group}-member-1", None, "consumer", "/10.0.0.1", 300_000, 10_000, b"", b"")
            metadata = GroupMetadataValue("consumer", 1, "range", member.member_id, T0, (member,))
            rounds[0].append((log_partition, [(GroupMetadataKey(group), metadata)]))  # SyncGroup's, before commits
            by_round: list[list] = [[] for _ in rounds]
            lines = []
            group_rows = 0
            for topic_number in rng.sample(range(TOPICS), rng.choice(TOPICS_PER_GROUP)):
                topic = f"topic-{topic_number:04d}"
                for partition in range(topic_partitions[topic_number]):
                    if rows == keys:
                        break
                    kind, status = _kind(rng)
                    kinds[kind] += 1
                    key = OffsetCommitKey(group, topic, partition)
                    offset = rng.randrange(1_000, 10_000_000)
                    if kind != "zk_only":
                        count = rng.choice(COMMITS)
                        for number in range(count):
                            if number:
                                offset += rng.randrange(1, 5_000)
                            by_round[number].append((key, offset))
                        records += count
                        repeated += count > 1
                    if kind in ("tombstoned", "recommitted", "gone"):
                        by_round[TOMBSTONE_ROUND].append((key, None))
                        records += 1
                        tombstones += 1
                    if kind == "recommitted":
                        offset += rng.randrange(1, 5_000)
                        by_round[RECOMMIT_ROUND].append((key, offset))
                        records += 1
                    zk: int | None = offset
                    if kind == "zk_ahead":
                        zk = offset + rng.randrange(1, 5_000)
                    elif kind == "log_ahead":
                        zk = offset - rng.randrange(1, 1_000)
                    elif kind in ("log_only", "gone"):
                        zk = None
                    if zk is not None:
                        lines.append(f"{offset_path(group, topic, partition)}:{zk}\n")
                    if status is not None:
                        rows += 1
                        group_rows += 1
                        statuses[status] += 1
            groups += group_rows > 0
            export.writelines(lines)
            export_lines += len(lines)
            for number, commits in enumerate(by_round):
                for start in range(0, len(commits), PER_REQUEST):
                    rounds[number].append((log_partition, commits[start : start + PER_REQUEST]))

    config = LogConfig(flush_policy="never")  # fsynced once, when closed
    log_dir = root / "log"
    logs = [PartitionLog.open(log_dir / f"__consumer_offsets-{number}", config) for number in range(LOG_PARTITIONS)]
    try:
        for number, requests in enumerate(rounds):
            rng.shuffle(requests)
            for index, (log_partition, pairs) in enumerate(requests):
                now_ms = T0 + number * ROUND_MS + index
                encoded = [
                    encode_record(key, value if type(key) is GroupMetadataKey else _commit(value, now_ms))
                    for key, value in pairs
                ]
                logs[log_partition].append(encoded, now_ms)
    finally:
        for partition_log in logs:
            partition_log.close()
    segments = sorted(log_dir.glob("*/*.log"))
    return Planted(
        keys=rows,
        groups=groups,
        status_counts={status: statuses[status] for status in STATUSES},
        kinds=dict(kinds),
        records=records,
        tombstones=tombstones,
        repeated=repeated,
        group_records=group_number,
        export_lines=export_lines,
        export_bytes=(root / "zk-offsets.txt").stat().st_size,
        log_bytes=sum(path.stat().st_size for path in segments),
        segments=len(segments),
        seconds=time.monotonic() - started,
    )


def _commit(offset: int | None, now_ms: int) -> OffsetCommitValue | None:
    """What the coordinator writes for a commit without retention: the offset, no metadata, its clock."""
    return None if offset is None else OffsetCommitValue(offset, "", now_ms)


# ---- the baseline (run as `offsets_audit.py baseline`, in a process of its own) -----------------------------


def baseline(argv: list[str]) -> int:
    """Export and log replay joined in one process; prints the counts as JSON, its stages to stderr."""
    parser = argparse.ArgumentParser(prog="offsets_audit.py baseline")
    parser.add_argument("--zk-snapshot", required=True)
    parser.add_argument("--log-dir", required=True)
    args = parser.parse_args(argv)
    from zkcoord.log import LogConfig, PartitionLog
    from zkcoord.log.loader import load_partition
    from zkcoord.log.segment import partition_directories

    def progress(message: str) -> None:
        print(f"baseline: {message}", file=sys.stderr, flush=True)

    started = time.perf_counter()
    zk: dict[tuple[str, str, int], int] = {}
    lines = malformed = 0
    with open(args.zk_snapshot) as export:
        for text in export:
            line = text.strip()
            if not line:
                continue
            lines += 1
            path, separator, offset_text = line.rpartition(":")
            location = parse_offset_path(path) if separator else None
            if location is None:
                malformed += 1
                continue
            try:
                zk[location] = decode_offset(path, offset_text.encode())  # the last line of a key counts
            except ZnodeDecodeError:
                malformed += 1
    progress(f"zookeeper export: {lines - malformed} offset line(s), {len(zk)} key(s) in {_since(started)}")

    stage = time.perf_counter()
    log: dict[tuple[str, str, int], int] = {}
    newest: dict[tuple[str, str, int], tuple[int, str]] = {}  # (commit timestamp, log partition) of what log holds
    records = 0
    config = LogConfig(skip_corrupt_segments=True)  # `zkcoord log load --skip-corrupt`
    for directory in partition_directories(args.log_dir):
        with PartitionLog.open(directory, config) as partition:
            result = load_partition(partition)
        records += result.records
        for problem in result.skipped:
            progress(f"skipped corrupt data: {problem}")
        for group, offsets in result.store.offsets.items():
            for topic_partition, committed in offsets.items():
                if committed.offset < 0:  # OffsetFetch's "no offset"
                    continue
                key = (group, topic_partition.topic, topic_partition.partition)
                order = (committed.commit_timestamp, directory.name)
                if key not in newest or newest[key] < order:  # live in several log partitions: the newest
                    newest[key] = order
                    log[key] = committed.offset
    progress(f"log: {records} record(s) replayed, {len(log)} live key(s) in {_since(stage)}")

    stage = time.perf_counter()
    keys = zk.keys() | log.keys()
    counts = Counter(compare(zk.get(key), log.get(key)).value for key in keys)
    groups = len({key[0] for key in keys})
    progress(f"compared {len(keys)} partition(s) in {_since(stage)}")
    report = {
        "partitions": len(keys),
        "groups": groups,
        "status_counts": {status: counts[status] for status in STATUSES},
        "records": records,
        "export_offsets": lines - malformed,
        "malformed_lines": malformed,
    }
    print(json.dumps(report, sort_keys=True))
    return 0


def _since(started: float) -> str:
    return f"{time.perf_counter() - started:.1f}s"


# ---- the contenders -----------------------------------------------------------------------------------------


def parse_report(outcome: Outcome) -> dict | None:
    """The JSON a contender printed on its standard output, or None."""
    with contextlib.suppress(ValueError):
        return json.loads(outcome.stdout)
    return None


SPARK_STAGES = (  # the command's progress lines (zkcoord.pipeline.offsets_audit), in order
    (r"offsets-audit: log: \d+ partition", "Python, JVM start, SparkSession"),
    (r"offsets-audit: log: decoded", "decode the log (cached)"),
    (r"offsets-audit: zookeeper export:", "read the export (cached)"),
    (r"offsets-audit: compared", "join, compare, count"),
)
LAST_STAGE = "report (rows, group summary), JSON, exit"


def stage_times(outcome: Outcome) -> list[tuple[str, float]]:
    """Seconds up to each progress line of the command from the one before (and after the last, to the exit)."""
    stages, previous = [], 0.0
    for pattern, label in SPARK_STAGES:
        at = next((t for t, line in outcome.lines if re.match(pattern, line)), None)
        if at is None:
            break
        stages.append((label, at - previous))
        previous = at
    stages.append((LAST_STAGE if len(stages) == len(SPARK_STAGES) else "(failed here)", outcome.seconds - previous))
    return stages


# ---- the check ----------------------------------------------------------------------------------------------


def check(planted: Planted, outcomes: dict[str, Outcome]) -> list[str]:
    """Every difference between the contenders' reports and the generator's book."""
    problems = []
    spark, base = parse_report(outcomes["spark"]), parse_report(outcomes["baseline"])
    expected_exit = 0 if planted.status_counts["match"] == planted.keys else 1
    if outcomes["spark"].returncode != expected_exit:
        problems.append(f"spark exited with status {outcomes['spark'].returncode}, not {expected_exit}")
    if outcomes["baseline"].returncode != 0:
        problems.append(f"baseline exited with status {outcomes['baseline'].returncode}")
    for name, report in (("spark", spark), ("baseline", base)):
        if report is None:
            problems.append(f"{name} printed no JSON report")
        elif report["status_counts"] != planted.status_counts:
            problems.append(f"{name} {report['status_counts']} != generator {planted.status_counts}")
    if spark is not None and base is not None and spark["status_counts"] != base["status_counts"]:
        problems.append(f"spark {spark['status_counts']} != baseline {base['status_counts']}")
    if spark is not None:
        found = {
            "partitions": spark["partitions"],
            "groups": spark["groups"],
            "log records": spark["log"]["records"],
            "log problems": spark["log"]["problem_counts"],
            "export offsets": spark["zookeeper_export"]["offsets"],
            "malformed lines": spark["zookeeper_export"]["malformed_lines"],
            "ok": spark["ok"],
        }
        wanted = {
            "partitions": planted.keys,
            "groups": planted.groups,
            "log records": planted.records,
            "log problems": {},
            "export offsets": planted.export_lines,
            "malformed lines": 0,
            "ok": expected_exit == 0,
        }
        problems += [
            f"spark {what} {found[what]!r} != {wanted[what]!r}" for what in wanted if found[what] != wanted[what]
        ]
    if base is not None:
        for what, wanted in (("partitions", planted.keys), ("groups", planted.groups)):
            if base[what] != wanted:
                problems.append(f"baseline {what} {base[what]!r} != {wanted!r}")
    return problems


# ---- printing -----------------------------------------------------------------------------------------------


def msgpack_build() -> str:
    import msgpack

    return "C extension" if msgpack.Packer.__module__.endswith("_cmsgpack") else "pure Python"


def print_planted(planted: Planted) -> None:
    kinds = planted.kinds
    print(
        f"Data: {planted.keys:,} keys in {planted.groups:,} groups; export {planted.export_bytes / 1e6:.1f} MB "
        f"({planted.export_lines:,} lines), log {planted.log_bytes / 1e6:.1f} MB ({planted.records:,} offset "
        f"commit records, {planted.tombstones:,} of them tombstones, and {planted.group_records:,} group records, "
        f"in {LOG_PARTITIONS} log partitions, {planted.segments} segments); generated in {planted.seconds:.1f} s"
    )
    counts = ", ".join(f"{planted.status_counts[status]:,} {status}" for status in STATUSES)
    print(
        f"Planted: {counts} (missing: {kinds.get('zk_only', 0):,} only in ZooKeeper, {kinds.get('log_only', 0):,} "
        f"only in the log, {kinds.get('tombstoned', 0):,} tombstoned in the log); {planted.repeated:,} keys "
        f"committed 2 to 5 times, {kinds.get('recommitted', 0):,} committed again after a tombstone, "
        f"{kinds.get('gone', 0):,} tombstoned and in neither store (no row)",
        flush=True,
    )


LABELS = {
    "spark": f"spark (zkcoord pipeline, {SPARK_MASTER}, CLI)",
    "baseline": "baseline (one process, loader + compare)",
}


def report(keys: int, outcomes: dict[str, Outcome]) -> None:
    print("\nResults\n")
    print(f"   {'contender':<44} {'wall s':>9} {'peak RSS MiB':>13} {'keys/s':>11}  exit  peak RSS by process")
    for name, outcome in outcomes.items():
        parts = ", ".join(f"{n} {mib(v)}" for n, v in sorted(outcome.peak_by_name.items(), key=lambda item: -item[1]))
        print(
            f"   {LABELS[name]:<44} {outcome.seconds:>9.1f} {mib(outcome.peak_rss):>13} "
            f"{keys / outcome.seconds:>11,.0f}  {outcome.returncode:>4}  {parts}"
        )
    spark, base = outcomes["spark"], outcomes["baseline"]
    print(
        f"   {'spark / baseline':<44} {spark.seconds / base.seconds:>8.2f}x "
        f"{spark.peak_rss / max(base.peak_rss, 1):>12.2f}x {base.seconds / spark.seconds:>10.2f}x"
    )
    print(f"   (memory sampled every 100 ms: {', '.join(f'{o.name} {o.samples}' for o in outcomes.values())} samples)")
    print("\nSpark stages (seconds from one progress line of the command to the next)\n")
    for label, took in stage_times(spark):
        print(f"   {label:<44} {took:>8.1f}")


@dataclass
class SizeResult:
    keys: int
    generation_s: float
    spark: Outcome
    baseline: Outcome
    ok: bool


def print_scaling(results: list[SizeResult]) -> None:
    print("\nScaling (each size generated and run on its own)\n")
    print(
        f"   {'keys':>10} {'gen s':>7} {'spark s':>9} {'baseline s':>11} {'spark/base':>11} {'spark MiB':>10} "
        f"{'base MiB':>9} {'spark keys/s':>13} {'base keys/s':>12}  check"
    )
    for r in results:
        print(
            f"   {r.keys:>10,} {r.generation_s:>7.1f} {r.spark.seconds:>9.1f} {r.baseline.seconds:>11.1f} "
            f"{r.spark.seconds / r.baseline.seconds:>10.2f}x {mib(r.spark.peak_rss):>10} {mib(r.baseline.peak_rss):>9} "
            f"{r.keys / r.spark.seconds:>13,.0f} {r.keys / r.baseline.seconds:>12,.0f}  "
            f"{'equal' if r.ok else 'MISMATCH'}"
        )


# ---- main ---------------------------------------------------------------------------------------------------


def parse_keys(text: str) -> list[int]:
    """``100k,1M,2_000_000`` as numbers."""
    sizes = []
    for part in text.split(","):
        match = re.fullmatch(r"\s*([\d_]+(?:\.\d+)?)\s*([kKmM]?)\s*", part)
        if not match:
            raise argparse.ArgumentTypeError(f"{part!r} is not a number of keys (e.g. 100k, 1M, 2000000)")
        number = float(match[1].replace("_", "")) * {"": 1, "k": 1e3, "m": 1e6}[match[2].lower()]
        if number < 1:
            raise argparse.ArgumentTypeError(f"{part!r}: at least one key")
        sizes.append(int(number))
    return sizes


def run_size(root: Path, keys: int, seed: int) -> SizeResult:
    directory = root / f"keys-{keys}"
    directory.mkdir()
    try:
        print(f"\n==== {keys:,} keys " + "=" * 80, flush=True)
        planted = generate(directory, keys, seed)
        print_planted(planted)
        snapshot, log_dir = directory / "zk-offsets.txt", directory / "log"
        outcomes = {
            "baseline": run_contender(
                "baseline",
                [
                    sys.executable,
                    str(Path(__file__).resolve()),
                    "baseline",
                    "--zk-snapshot",
                    str(snapshot),
                    "--log-dir",
                    str(log_dir),
                ],
                directory / "baseline.json",
            ),
            "spark": run_contender(
                "spark",
                [
                    sys.executable,
                    "-m",
                    "zkcoord.pipeline",
                    "offsets-audit",
                    "--zk-snapshot",
                    str(snapshot),
                    "--log-dir",
                    str(log_dir),
                    "--master",
                    SPARK_MASTER,
                    "--json",
                ],
                directory / "spark.json",
            ),
        }
        report(keys, outcomes)
        problems = check(planted, outcomes)
        print("\nCheck (counts per status: spark, baseline, generator; spark's totals against the generator)\n")
        if problems:
            for problem in problems:
                print(f"   MISMATCH {problem}")
            for name, outcome in outcomes.items():
                if parse_report(outcome) is None:
                    print(f"   {name} stdout: {outcome.stdout[-2000:]!r}")
        else:
            counts = ", ".join(f"{planted.status_counts[status]:,} {status}" for status in STATUSES)
            print(f"   spark = baseline = generator: {counts}")
            print(
                f"   spark: {planted.keys:,} partitions, {planted.groups:,} groups, {planted.records:,} log records, "
                f"{planted.export_lines:,} export lines, no log problem, no malformed line, exit status "
                f"{outcomes['spark'].returncode} (partitions differ)"
            )
        return SizeResult(keys, planted.seconds, outcomes["spark"], outcomes["baseline"], not problems)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["baseline"]:
        return baseline(argv[1:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_KEYS[0]:,} keys only (a smoke test)")
    parser.add_argument(
        "--keys",
        type=parse_keys,
        metavar="N[,N...]",
        help=f"sizes to run, in turn (default {','.join(f'{k:,}' for k in DEFAULT_KEYS)}); 100k and 1M work",
    )
    parser.add_argument("--seed", type=int, default=SEED, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    sizes = args.keys or (QUICK_KEYS if args.quick else DEFAULT_KEYS)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so that the cleanup below runs
    results = []
    with bench_directory("offsets-audit-bench-") as root:
        print(f"Machine: {machine(('pyspark', 'msgpack'))}; msgpack {msgpack_build()}")
        print(f"Directory: {root}", flush=True)
        for keys in sizes:
            results.append(run_size(root, keys, args.seed))
        print_scaling(results)
    return 0 if all(result.ok for result in results) else 1


if __name__ == "__main__":
    sys.exit(main())
