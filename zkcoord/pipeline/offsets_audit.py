"""``zkcoord pipeline offsets-audit``: a ZooKeeper offsets export against the offsets log, per group and partition.

The export is what ``zkcoord legacy offsets export`` (Kafka's ExportZkOffsets) writes: one
``/consumers/<group>/offsets/<topic>/<partition>:<offset>`` line per offset. The log directory holds one
directory per offsets-log partition. Spark distributes the segment files; each task decodes its segments
with the log's own reader (``zkcoord.log.segment``) and record codec (``zkcoord.offsets.records``), in
:mod:`zkcoord.pipeline.audit_inputs`. This module owns the Spark plan that joins the two and the command.

The log side is what ``zkcoord log load --skip-corrupt`` replays, as the coordinator's OffsetFetch reports it:

* per offsets-log partition, the record read last (segments by base offset, records in file order) wins for
  its (group, topic, partition); a tombstone deletes, and so does a negative offset (OffsetFetch's "no
  offset", which ``migrate verify`` leaves out too);
* the newest segment ends at its first torn or corrupt entry (opening the log cuts it there: reported, not a
  failure); a bad entry in an older segment makes the rest of that segment unreadable (reported, a failure);
* a record that does not decode is reported and left out; group metadata records are not looked at.

A key live in several offsets-log partitions (the coordinator reads only one) is reported, and its newest
commit by timestamp is compared. In the export, the last line of a key counts, as ImportZkOffsets would
write them in order. Each (group, topic, partition) in either store gets the status
:func:`zkcoord.migration.phases.compare` gives: match, zk_ahead, log_ahead, or missing (in one store only;
a key in neither store is no row).
"""

import argparse
import json
import os
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from zkcoord.migration.phases import Comparison
from zkcoord.pipeline.audit_inputs import (
    CUT_ON_OPEN,
    SEVERAL_LOG_PARTITIONS,
    AuditInputError,
    LogProblem,
    MalformedLine,
    check_inputs,
    decode_segments,
    parse_export_lines,
    schemas,
    segment_tasks,
)
from zkcoord.pipeline.spark import DRIVER_MEMORY_HELP, SparkUnavailableError, spark_session
from zkcoord.tables import format_table

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

EXIT_OK, EXIT_DIFFERENT, EXIT_USAGE = 0, 1, 2
KEY = ["group", "topic", "partition"]
STATUSES = [comparison.value for comparison in Comparison]
EXAMPLES = 5


@dataclass(frozen=True)
class AuditResult:
    """The compared rows and what was counted and found on the way; :meth:`unpersist` when done with ``rows``."""

    rows: "DataFrame"
    status_counts: dict[str, int]  # every status, 0 included
    groups: int
    log_partitions: int
    segments: int
    records: int
    log_problem_counts: dict[str, int]
    log_problems: tuple[LogProblem, ...]  # the first few of each kind
    export_offsets: int
    repeated_export_lines: int
    malformed_lines: int
    malformed_examples: tuple[MalformedLine, ...]
    cached: "DataFrame" = field(repr=False)  # what ``rows`` reads from

    @property
    def partitions(self) -> int:
        return sum(self.status_counts.values())

    @property
    def inputs_clean(self) -> bool:
        """Both inputs read whole: no malformed line, and no log problem but a tail that opening cuts."""
        return not self.malformed_lines and all(kind in CUT_ON_OPEN for kind in self.log_problem_counts)

    def unpersist(self) -> None:
        self.cached.unpersist()


# ---- the Spark plan (driver) -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _DecodedLog:
    table: "DataFrame"  # cached: records and problems
    segments: int
    records: int
    problem_counts: dict[str, int]
    problems: list[LogProblem]


def _decode_log(spark: "SparkSession", partitions: list[Path], progress: Callable[[str], None]) -> _DecodedLog:
    from pyspark.sql import functions as F

    started = time.perf_counter()
    tasks, problems = segment_tasks(partitions)
    progress(f"log: {len(partitions)} partition(s), {len(tasks)} segment(s)")
    segments = spark.sparkContext.parallelize(tasks, max(1, len(tasks)))
    table = spark.createDataFrame(segments.mapPartitions(decode_segments), schemas()[0], verifySchema=False)
    table.persist()
    counts = Counter(problem.kind for problem in problems)
    counts.update({row.problem_kind: row["count"] for row in table.groupBy("problem_kind").count().collect()})
    records = counts.pop(None, 0)
    if len(problems) < counts.total():
        found = table.where(F.col("problem_kind").isNotNull())
        problems += [
            LogProblem(row.problem_kind, row.log_partition, row.problem)
            for row in _first_of_each(found, "problem_kind", ["log_partition", "segment_base", "record_index"])
        ]
    progress(f"log: decoded {records} offset commit record(s) in {_seconds(started)}; {_problem_text(counts)}")
    return _DecodedLog(table, len(tasks), records, dict(counts), problems)


def _first_of_each(frame: "DataFrame", kind: str, order: list[str]) -> list:
    """The first :data:`EXAMPLES` rows of each ``kind`` by ``order``, in that order."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    rank = F.row_number().over(Window.partitionBy(kind).orderBy(*order))
    return frame.withColumn("rank", rank).where(F.col("rank") <= EXAMPLES).orderBy(kind, *order).collect()


def _offset_records(decoded: "DataFrame") -> "DataFrame":
    return decoded.where(decoded.problem_kind.isNull())


def _read_export(spark: "SparkSession", zk_snapshot: str | os.PathLike, progress: Callable[[str], None]):
    """The export as rows (cached), its offset lines' count, its malformed lines' count and first examples."""
    from pyspark.sql import functions as F

    started = time.perf_counter()
    # One split unless the file spans several blocks: then zipWithIndex needs no job of its own.
    lines = spark.sparkContext.textFile(Path(zk_snapshot).resolve().as_uri(), minPartitions=1).zipWithIndex()
    table = spark.createDataFrame(lines.mapPartitions(parse_export_lines), schemas()[1], verifySchema=False)
    table.persist()
    parsed, malformed = table.agg(F.count("*"), F.count("malformed")).first()
    examples = []
    if malformed:
        examples = table.where(F.col("malformed").isNotNull()).orderBy("line").limit(EXAMPLES).collect()
    progress(f"zookeeper export: {parsed - malformed} offset line(s) in {_seconds(started)}; {malformed} malformed")
    return (
        table,
        parsed - malformed,
        malformed,
        tuple(MalformedLine(row.line, row.malformed, row.text) for row in examples),
    )


def _log_side(records: "DataFrame") -> "DataFrame":
    """Per key: ``log_offset`` and the offsets-log partitions it is live in, ``log_partitions`` (sorted)."""
    from pyspark.sql import functions as F

    latest = records.groupBy(*KEY, "log_partition").agg(
        F.max_by(F.struct("offset", "commit_timestamp"), F.struct("segment_base", "record_index")).alias("latest")
    )
    # OffsetFetch answers a negative committed offset as no offset, and migrate verify leaves it out.
    live = latest.where(F.col("latest.offset") >= 0)
    return live.groupBy(*KEY).agg(
        F.max_by("latest.offset", F.struct("latest.commit_timestamp", "log_partition")).alias("log_offset"),
        F.array_sort(F.collect_list("log_partition")).alias("log_partitions"),
    )


def _status(zk_offset: "Column", log_offset: "Column") -> "Column":
    """:func:`zkcoord.migration.phases.compare` as a Spark expression, so that no row goes through Python.

    The tests hold the two equal.
    """
    from pyspark.sql import functions as F

    return (
        F.when(zk_offset.isNull() | log_offset.isNull(), Comparison.MISSING.value)
        .when(zk_offset == log_offset, Comparison.MATCH.value)
        .when(zk_offset > log_offset, Comparison.ZK_AHEAD.value)
        .otherwise(Comparison.LOG_AHEAD.value)
    )


def _zk_side(export: "DataFrame") -> "DataFrame":
    """Per key: ``zk_offset``, from its last line."""
    from pyspark.sql import functions as F

    offsets = export.where(F.col("malformed").isNull())
    return offsets.groupBy(*KEY).agg(F.max_by("offset", "line").alias("zk_offset"))


def _to_stderr(message: str) -> None:
    print(f"offsets-audit: {message}", file=sys.stderr)


def run_audit(
    spark: "SparkSession",
    zk_snapshot: str | os.PathLike,
    log_dir: str | os.PathLike,
    progress: Callable[[str], None] = _to_stderr,
) -> AuditResult:
    """Compare the export ``zk_snapshot`` with the offsets log in ``log_dir``, telling ``progress`` each stage.

    The driver and every executor must see both paths at the same place. AuditInputError for missing input.
    """
    from pyspark.sql import functions as F

    partitions = check_inputs(zk_snapshot, log_dir)
    log = _decode_log(spark, partitions, progress)
    export, export_offsets, malformed, malformed_examples = _read_export(spark, zk_snapshot, progress)

    started = time.perf_counter()
    compared = (
        _zk_side(export)
        .join(_log_side(_offset_records(log.table)), KEY, "full")
        .withColumn("status", _status(F.col("zk_offset"), F.col("log_offset")))
        .persist()
    )
    totals = compared.agg(
        F.countDistinct("group").alias("groups"),
        F.count("zk_offset").alias("zk_keys"),
        F.count(F.when(F.size("log_partitions") > 1, True)).alias("ambiguous"),
        *(F.count(F.when(F.col("status") == status, True)).alias(status) for status in STATUSES),
    ).first()
    problem_counts = dict(log.problem_counts)
    problems = list(log.problems)
    if totals.ambiguous:
        problem_counts[SEVERAL_LOG_PARTITIONS] = totals.ambiguous
        problems += [
            LogProblem(
                SEVERAL_LOG_PARTITIONS,
                ", ".join(row.log_partitions),
                f"group {row.group} topic {row.topic} partition {row.partition} is live in "
                f"{', '.join(row.log_partitions)}; the newest commit (offset {row.log_offset}) is compared",
            )
            for row in compared.where(F.size("log_partitions") > 1).orderBy(*KEY).limit(EXAMPLES).collect()
        ]
    log.table.unpersist()
    export.unpersist()
    status_counts = {status: totals[status] for status in STATUSES}
    progress(f"compared {sum(status_counts.values())} partition(s) in {_seconds(started)}")
    return AuditResult(
        rows=compared.select(*KEY, "zk_offset", "log_offset", "status"),
        status_counts=status_counts,
        groups=totals.groups,
        log_partitions=len(partitions),
        segments=log.segments,
        records=log.records,
        log_problem_counts=problem_counts,
        log_problems=tuple(problems),
        export_offsets=export_offsets,
        repeated_export_lines=export_offsets - totals.zk_keys,
        malformed_lines=malformed,
        malformed_examples=malformed_examples,
        cached=compared,
    )


def audit(spark: "SparkSession", zk_snapshot: str | os.PathLike, log_dir: str | os.PathLike) -> "DataFrame":
    """Rows ``group, topic, partition, zk_offset, log_offset, status``, one per key in either store (cached)."""
    return run_audit(spark, zk_snapshot, log_dir).rows


def group_summary(rows: "DataFrame") -> "DataFrame":
    """Per group: its ``partitions`` and how many have each status (``match``, ``zk_ahead``, ...)."""
    from pyspark.sql import functions as F

    counted = rows.groupBy("group").pivot("status", STATUSES).count().na.fill(0, STATUSES)
    return counted.select("group", sum(F.col(status) for status in STATUSES).alias("partitions"), *STATUSES)


def _seconds(started: float) -> str:
    return f"{time.perf_counter() - started:.1f}s"


def _problem_text(counts: dict[str, int]) -> str:
    return ", ".join(f"{count} {kind}" for kind, count in sorted(counts.items())) or "no problem"


# ---- the command -----------------------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="zkcoord pipeline offsets-audit",
        description="Compare a ZooKeeper offsets export with the offsets log, per group and partition. "
        "Exit 0: every partition matches; 1: a difference, or input that did not read cleanly; 2: usage error.",
    )
    parser.add_argument(
        "--zk-snapshot", required=True, metavar="FILE", help="output of `zkcoord legacy offsets export`"
    )
    parser.add_argument("--log-dir", required=True, metavar="DIR", help="offsets log directory (or one partition)")
    parser.add_argument("--master", metavar="URL", help="Spark master (default: local[*])")
    parser.add_argument("--driver-memory", metavar="SIZE", help=DRIVER_MEMORY_HELP)
    parser.add_argument("--out", metavar="DIR", help="write audit.parquet (every partition) and summary.parquet")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--limit", type=int, default=100, metavar="N", help="non-matching partitions and groups to print (default 100)"
    )
    return parser


def main(argv: list[str]) -> int:
    """``zkcoord pipeline offsets-audit ARGS``; returns the exit status."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # argparse has printed the usage or the help
        return int(exit_.code or 0)
    try:
        if args.limit < 0:
            raise AuditInputError(f"--limit {args.limit}: must be 0 or more")
        if args.out and Path(args.out).exists() and not Path(args.out).is_dir():
            raise AuditInputError(f"--out {args.out}: not a directory")
        check_inputs(args.zk_snapshot, args.log_dir)  # before Spark's start-up, which takes seconds
        result = run_audit(
            spark_session("zkcoord offsets-audit", args.master, driver_memory=args.driver_memory),
            args.zk_snapshot,
            args.log_dir,
        )
    except (AuditInputError, SparkUnavailableError) as error:
        print(f"{parser.prog}: {error}", file=sys.stderr)
        return EXIT_USAGE
    report = _report(result, args.limit)
    if args.out:
        _write(result.rows, args.out)
    result.unpersist()
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=True))
    else:
        _print_report(report)
    return EXIT_OK if report["ok"] else EXIT_DIFFERENT


def _report(result: AuditResult, limit: int) -> dict:
    """Everything the command prints, as plain data: non-matching partitions and groups only, ``limit`` of each."""
    from pyspark.sql import functions as F

    match = Comparison.MATCH.value
    different = result.partitions - result.status_counts[match]
    rows, groups = [], []
    if different and limit:
        rows = result.rows.where(F.col("status") != match).orderBy(*KEY).limit(limit).collect()
        summary = group_summary(result.rows)
        groups = summary.where(F.col("partitions") != F.col(match)).orderBy("group").limit(limit).collect()
    return {
        "ok": not different and result.inputs_clean,
        "partitions": result.partitions,
        "groups": result.groups,
        "status_counts": result.status_counts,
        "rows": [row.asDict() for row in rows],
        "rows_not_shown": different - len(rows),
        "differing_groups": [row.asDict() for row in groups],
        "log": {
            "partitions": result.log_partitions,
            "segments": result.segments,
            "records": result.records,
            "problem_counts": result.log_problem_counts,
            "problems": [
                {
                    "kind": problem.kind,
                    "log_partition": problem.log_partition,
                    "detail": problem.detail,
                    "fails_audit": problem.kind not in CUT_ON_OPEN,
                }
                for problem in result.log_problems
            ],
        },
        "zookeeper_export": {
            "offsets": result.export_offsets,
            "repeated_lines": result.repeated_export_lines,
            "malformed_lines": result.malformed_lines,
            "malformed_examples": [
                {"line": line.line, "reason": line.reason, "text": line.text} for line in result.malformed_examples
            ],
        },
    }


def _write(rows: "DataFrame", out: str) -> None:
    started = time.perf_counter()
    directory = out.rstrip("/") if "://" in out else Path(out).resolve().as_uri()
    rows.write.mode("overwrite").parquet(f"{directory}/audit.parquet")
    group_summary(rows).write.mode("overwrite").parquet(f"{directory}/summary.parquet")
    _to_stderr(f"wrote audit.parquet and summary.parquet to {out} in {_seconds(started)}")


def _print_table(rows: list[tuple], header: tuple[str, ...]) -> None:
    print(format_table(header, rows))


def _print_report(report: dict) -> None:
    def shown(offset: int | None) -> object:
        return "-" if offset is None else offset

    if report["rows"]:
        _print_table(
            [
                (row["group"], row["topic"], row["partition"], shown(row["zk_offset"]), shown(row["log_offset"]))
                + (row["status"],)
                for row in report["rows"]
            ],
            ("GROUP", "TOPIC", "PARTITION", "ZK-OFFSET", "LOG-OFFSET", "STATUS"),
        )
        if report["rows_not_shown"]:
            print(f"... and {report['rows_not_shown']} more non-matching partition(s); --out writes every one")
        print()
    if report["differing_groups"]:
        _print_table(
            [
                tuple(group[column] for column in ("group", "partitions", *STATUSES))
                for group in report["differing_groups"]
            ],
            ("GROUP", "PARTITIONS", *(status.upper() for status in STATUSES)),
        )
        print()
    counts = ", ".join(f"{count} {status}" for status, count in report["status_counts"].items())
    print(f"{report['groups']} group(s), {report['partitions']} partition(s): {counts}")
    log = report["log"]
    for problem in log["problems"]:
        note = "" if problem["fails_audit"] else " (opening the log cuts it there; no reader sees past it)"
        print(f"log: {problem['kind']}: {problem['detail']}{note}")
    for kind, count in sorted(log["problem_counts"].items()):
        unlisted = count - sum(1 for problem in log["problems"] if problem["kind"] == kind)
        if unlisted > 0:
            print(f"log: {unlisted} more {kind}(s)")
    export = report["zookeeper_export"]
    if export["malformed_lines"]:
        print(f"zookeeper export: {export['malformed_lines']} malformed line(s) left out:")
        for line in export["malformed_examples"]:
            print(f"  line {line['line']}: {line['reason']}: {line['text']!r}")
    if export["repeated_lines"]:
        print(f"zookeeper export: {export['repeated_lines']} line(s) repeat a partition; the last one counts")
    print("Offsets verified: every partition matches." if report["ok"] else "Offsets NOT verified.")


if __name__ == "__main__":
    # Run the module under its own name: Spark pickles __main__'s functions by value, and the workers would
    # then import the modules they use the usual way, running zkcoord/log/__init__.py (and gevent).
    from zkcoord.pipeline.offsets_audit import main as _main

    sys.exit(_main(sys.argv[1:]))
