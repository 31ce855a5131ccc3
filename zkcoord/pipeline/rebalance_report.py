"""The rebalance report job: reads a comparison's ``compare.*`` trace events (``EVENT_SCHEMA``), computes the
metrics (:mod:`zkcoord.pipeline.report_metrics`), and writes the parquet tables, the HTML report and the terminal
table (``run``); runs that did not finish (an ``interrupted`` phase, or no ``end``) are flagged. Must not import
gevent, kazoo, the runtime or the server.
"""

import os
from collections.abc import Callable
from functools import reduce

from pyspark import StorageLevel
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from zkcoord.pipeline.report_html import render_report
from zkcoord.pipeline.report_metrics import KEY, compute, is_type
from zkcoord.pipeline.report_summary import sort_rows, terminal_table
from zkcoord.pipeline.spark import DEFAULT_MASTER, spark_session
from zkcoord.trace import TRACE_SCHEMA

TIMELINE_PARTITIONS = 64
TIMELINE_INTERVALS = 20_000
UNFINISHED = "no end phase: the run stopped without saying why (its runner was killed?)"

EVENT_SCHEMA = StructType(
    [
        StructField("schema", StringType()),
        StructField("type", StringType()),
        StructField("time_ms", LongType()),
        StructField("run", StringType()),
        StructField("scenario", StringType()),
        StructField("variant", StringType()),
        StructField("member", StringType()),
        StructField("instance", StringType()),
        StructField("phase", StringType()),
        StructField("step", IntegerType()),
        StructField("name", StringType()),
        StructField("event", StringType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        # Raw JSON text: a count in compare.topic, [[topic, partition], ...] in compare.assignment (a map in
        # compare.run), so that one column holds all shapes.
        StructField("partitions", StringType()),
        StructField("generation", LongType()),
        StructField("first_offset", LongType()),
        StructField("last_offset", LongType()),
        StructField("end_offset", LongType()),
        StructField("zk_reads", LongType()),
        StructField("zk_writes", LongType()),
        StructField("coordinator_requests", LongType()),
        StructField("reason", StringType()),  # why a run stopped before its end (``interrupted`` phase)
    ]
)


class ReportInputError(ValueError):
    """The input cannot make a report: no such directory, no ``compare.*`` events, or a scenario and variant with
    events of several runs."""


def read_events(spark, paths: list[str]) -> DataFrame:
    """The ``compare.*`` events of schema ``zkcoord.trace/1`` in JSON-lines ``paths``; directories are read
    recursively (``*.jsonl``). Lines that are not JSON, of another schema or of other types are left out."""
    files = [path for path in paths if os.path.isfile(path)]
    directories = [path for path in paths if path not in files]
    frames = []
    if files:
        frames.append(spark.read.schema(EVENT_SCHEMA).json(files))
    if directories:
        reader = spark.read.schema(EVENT_SCHEMA).option("recursiveFileLookup", "true")
        frames.append(reader.option("pathGlobFilter", "*.jsonl").json(directories))
    if not frames:
        raise ReportInputError("no paths to read")
    events = reduce(DataFrame.unionByName, frames)
    return events.where(
        (F.col("schema") == TRACE_SCHEMA)
        & F.col("type").startswith("compare.")
        & F.col("scenario").isNotNull()
        & F.col("variant").isNotNull()
        & F.col("time_ms").isNotNull()
    )


def run(
    in_dir: str,
    out_dir: str,
    master: str | None = None,
    console: Callable[[str], object] = print,
    driver_memory: str | None = None,
) -> list[dict]:
    """Read ``in_dir/traces/**/*.jsonl`` (or ``in_dir`` itself without a ``traces`` directory), write
    ``summary.parquet``, ``members.parquet``, ``steps.parquet`` and ``report.html`` to ``out_dir``, print the terminal
    table and return the summary rows. Raises ReportInputError when the input cannot make a report."""
    if not os.path.isdir(in_dir):
        raise ReportInputError(f"no such directory: {in_dir}")
    traces = os.path.join(in_dir, "traces")
    source = traces if os.path.isdir(traces) else in_dir
    console(f"starting Spark on {master or DEFAULT_MASTER}")
    spark = spark_session("zkcoord rebalance-report", master, driver_memory=driver_memory)
    console(f"reading compare.* events under {source}")
    events = read_events(spark, [source]).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        incomplete = _check_runs(events, source, console)
        console("computing the metrics")
        tables = compute(events)
        tables.members.persist(StorageLevel.MEMORY_AND_DISK)
        tables.steps.persist(StorageLevel.MEMORY_AND_DISK)
        os.makedirs(out_dir, exist_ok=True)
        collected = {}
        for name, table in (("members", tables.members), ("steps", tables.steps), ("summary", tables.summary)):
            path = os.path.join(out_dir, f"{name}.parquet")
            console(f"writing {path}")
            table.coalesce(1).write.mode("overwrite").parquet(path)
            collected[name] = sort_rows([row.asDict() for row in spark.read.parquet(path).collect()])
        console(f"collecting ownership intervals of up to {TIMELINE_PARTITIONS} partitions per run")
        ownership = [row.asDict() for row in _timeline_sample(tables.ownership).collect()]
        killed = events.where(is_type("member") & (F.col("event") == "killed"))
        kills = [row.asDict() for row in killed.select(*KEY, "member", "instance", "time_ms").collect()]
        console("plotting")
        report_path = os.path.join(out_dir, "report.html")
        html = render_report(
            summary=collected["summary"],
            members=collected["members"],
            steps=collected["steps"],
            ownership=ownership,
            kills=kills,
            incomplete=incomplete,
        )
        with open(report_path, "w", encoding="utf-8") as report:
            report.write(html)
        console(terminal_table(collected["summary"], incomplete))
        console(f"report: {report_path}")
        return [
            {**row, "incomplete": incomplete.get((row["scenario"], row["variant"]))} for row in collected["summary"]
        ]
    finally:
        events.unpersist()


def _check_runs(events: DataFrame, source: str, console: Callable[[str], object]) -> dict[tuple[str, str], str]:
    """Refuse input that cannot make a report; the measured runs that did not finish, with why they stopped.

    Several ``compare run`` commands may fill one directory (a resumed or a widened comparison: each replaces the
    runs it makes), but one scenario and variant with events of two of them is two comparisons mixed up."""
    phase = F.when(is_type("phase"), F.col("phase"))
    runs = (
        events.groupBy(KEY)
        .agg(
            F.collect_set("run").alias("runs"),
            F.max(phase == "measure").alias("measured"),
            F.max(phase == "end").alias("ended"),
            F.max(F.when(phase == "interrupted", F.coalesce("reason", F.lit("interrupted")))).alias("interrupted"),
        )
        .collect()
    )
    if not runs:
        raise ReportInputError(f"no compare.* events of schema {TRACE_SCHEMA} under {source}")
    mixed = sorted(f"{row['scenario']}/{row['variant']}" for row in runs if len(row["runs"]) > 1)
    if mixed:
        run_ids = sorted({run_id for row in runs for run_id in row["runs"]})
        raise ReportInputError(
            f"events of several runs of {', '.join(mixed)} under {source} ({', '.join(run_ids)}): "
            "pass one comparison's directory"
        )
    unmeasured = sorted(f"{row['scenario']}/{row['variant']}" for row in runs if not row["measured"])
    if len(unmeasured) == len(runs):
        raise ReportInputError(f"no run under {source} reached its measure phase")
    if unmeasured:
        console(f"left out (no measure phase): {', '.join(unmeasured)}")
    return {
        (row["scenario"], row["variant"]): row["interrupted"] or UNFINISHED
        for row in runs
        if row["measured"] and (row["interrupted"] or not row["ended"])
    }


def _timeline_sample(ownership: DataFrame) -> DataFrame:
    """The intervals of the first partitions of each run, at most ``TIMELINE_INTERVALS`` per run."""
    partition_rank = F.dense_rank().over(Window.partitionBy(*KEY).orderBy("topic", "partition"))
    interval_rank = F.row_number().over(Window.partitionBy(*KEY).orderBy("start_ms", "topic", "partition", "instance"))
    return (
        ownership.withColumn("partition_rank", partition_rank)
        .where(F.col("partition_rank") <= TIMELINE_PARTITIONS)
        .withColumn("interval_rank", interval_rank)
        .where(F.col("interval_rank") <= TIMELINE_INTERVALS)
        .drop("partition_rank", "interval_rank")
    )
