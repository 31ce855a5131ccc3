"""The rebalance report: per scenario and variant, the metrics of docs/compare.md from ``compare.*`` trace events.

Owns the schema the report reads (``EVENT_SCHEMA``), the metric definitions as DataFrame transformations
(``compute``), the old / new ratios and the job that writes the parquet tables, the HTML report and the terminal
table (``run``). Every metric is a sweep or a window over the events, never one row per offset or per millisecond,
so it scales with the number of events only. Must not import gevent, kazoo, the runtime or the server.
"""

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import reduce

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from zkcoord.compare.scenarios import LEGACY, SCENARIOS, VARIANTS
from zkcoord.pipeline.report_html import format_ratio, render_report
from zkcoord.pipeline.spark import DEFAULT_MASTER, spark_session
from zkcoord.tables import format_table

TRACE_SCHEMA = "zkcoord.trace/1"
METRICS = (
    "rebalances",
    "time_to_stable_ms",
    "partitions_moved",
    "unowned_partition_s",
    "pause_max_ms",
    "pause_p50_ms",
    "records_processed",
    "records_duplicated",
    "records_missed",
    "zk_reads",
    "zk_writes",
    "coordinator_requests",
)
HEADLINE_METRICS = ("rebalances", "pause_max_ms", "partitions_moved", "records_duplicated", "zk_writes")
TIMELINE_PARTITIONS = 64
TIMELINE_INTERVALS = 20_000

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
    ]
)

KEY = ["scenario", "variant"]
PARTITION_KEY = [*KEY, "topic", "partition"]
MEMBER_TYPES = ("compare.assignment", "compare.rebalance", "compare.processed", "compare.committed")


class ReportInputError(ValueError):
    """The input cannot make a report: no such directory, no ``compare.*`` events, or events of several runs."""


@dataclass
class ReportTables:
    """The report's tables; ``ownership`` has one row per ownership interval (for the timeline plots)."""

    summary: DataFrame
    members: DataFrame
    steps: DataFrame
    ownership: DataFrame


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


def compute(events: DataFrame) -> ReportTables:
    """The report's tables from ``read_events``' events (transformations only; nothing runs until an action).

    Runs without a ``measure`` phase have no window and are left out. Events of one instance with the same
    ``time_ms`` are ordered as read. The summary is one aggregation over the rows each metric contributes, so the
    whole report costs a handful of shuffles.
    """
    # W comes from the events before ``seq`` is added: a deterministic plan that every branch can share.
    windows = F.broadcast(_windows(events))
    windowed = events.withColumn("seq", F.monotonically_increasing_id()).join(windows, KEY)
    members = _members(windowed)
    steps = _steps(windowed)
    held = _held_partitions(windowed)
    contributions = [
        _event_contributions(windowed),
        members.select(*KEY, F.col("rebalances").alias("member_rebalances"), "longest_pause_ms"),
        steps.select(*KEY, "time_to_stable_ms"),
        _ownership_sweep(windowed, held),
        _record_sweep(windowed),
    ]
    combined = reduce(lambda left, right: left.unionByName(right, allowMissingColumns=True), contributions)
    longest_pause = F.col("longest_pause_ms")
    totals = combined.groupBy(KEY).agg(
        F.max("window_start_ms").alias("window_start_ms"),
        F.max("window_end_ms").alias("window_end_ms"),
        F.collect_set("generation_in_window").alias("generations_in_window"),
        F.max("generation_before_window").alias("highest_generation_before_window"),
        F.max("member_rebalances").alias("most_rebalances_of_one_member"),
        F.max("time_to_stable_ms").alias("time_to_stable_ms"),
        F.sum("moved").alias("partitions_moved"),
        F.sum("unowned_ms").alias("unowned_ms"),
        F.max(longest_pause).alias("pause_max_ms"),
        F.median(longest_pause).alias("pause_p50_ms"),
        F.sum("records").alias("records_processed"),
        F.sum("duplicated").alias("records_duplicated"),
        F.sum("missed").alias("records_missed"),
        F.max("counters").alias("counters"),
    )
    highest_before = F.coalesce("highest_generation_before_window", F.lit(0))
    new_generations = F.size(F.filter("generations_in_window", lambda generation: generation > highest_before))
    summary = totals.select(
        *KEY,
        F.when(F.col("variant") == LEGACY, F.coalesce("most_rebalances_of_one_member", F.lit(0)))
        .otherwise(new_generations)
        .cast("long")
        .alias("rebalances"),
        *(
            F.coalesce(column, F.lit(0)).cast("long").alias(column)
            for column in ("time_to_stable_ms", "partitions_moved")
        ),
        (F.coalesce("unowned_ms", F.lit(0)) / 1000.0).alias("unowned_partition_s"),
        F.col("pause_max_ms").cast("long").alias("pause_max_ms"),
        F.col("pause_p50_ms").cast("double").alias("pause_p50_ms"),
        *(
            F.coalesce(column, F.lit(0)).cast("long").alias(column)
            for column in ("records_processed", "records_duplicated", "records_missed")
        ),
        *(
            F.col(f"counters.{column}").cast("long").alias(column)
            for column in ("zk_reads", "zk_writes", "coordinator_requests")
        ),
        (F.col("window_end_ms") - F.col("window_start_ms")).alias("window_ms"),
        "window_start_ms",
    )
    return ReportTables(summary=summary, members=members, steps=steps, ownership=_ownership(held))


def _is(event_type: str) -> Column:
    return F.col("type") == f"compare.{event_type}"


def _in_window(time: Column | None = None) -> Column:
    time = F.col("time_ms") if time is None else time
    return time.between(F.col("window_start_ms"), F.col("window_end_ms"))


def _windows(events: DataFrame) -> DataFrame:
    """W per run: ``measure`` until ``end`` (the last event when a run stopped before ``end``)."""
    phase = F.when(_is("phase"), F.col("phase"))
    time = F.col("time_ms")
    return (
        events.groupBy(KEY)
        .agg(
            F.min(F.when(phase == "measure", time)).alias("window_start_ms"),
            F.coalesce(F.min(F.when(phase == "end", time)), F.max(time)).alias("window_end_ms"),
        )
        .where(F.col("window_start_ms").isNotNull())
    )


def _event_contributions(windowed: DataFrame) -> DataFrame:
    """What single events add to the summary: W, records, generations before and in W, counters."""
    rebalance = _is("rebalance")
    generation = F.col("generation")
    return windowed.select(
        *KEY,
        "window_start_ms",
        "window_end_ms",
        F.when(_is("processed"), F.col("last_offset") - F.col("first_offset") + 1).alias("records"),
        F.when(rebalance & _in_window(), generation).alias("generation_in_window"),
        F.when(rebalance & (F.col("time_ms") < F.col("window_start_ms")), generation).alias("generation_before_window"),
        F.when(_is("counters"), F.struct("time_ms", "seq", "zk_reads", "zk_writes", "coordinator_requests")).alias(
            "counters"
        ),
    )


def _members(windowed: DataFrame) -> DataFrame:
    """One row per member: its instances, rebalances and processed events in W, records, longest pause in W."""
    processed = _is("processed")
    member_events = (
        windowed.where(F.col("type").isin(*MEMBER_TYPES) & F.col("member").isNotNull())
        .withColumn("processed_in_window", processed & _in_window())
        .repartition(*KEY, "member")  # serves both the window and the aggregation: one shuffle
    )
    # Partitioned by the flag too, so that lag() sees only the instance's processed events in W.
    by_instance = Window.partitionBy(*KEY, "member", "instance", "processed_in_window").orderBy("time_ms", "seq")
    pause = F.when(F.col("processed_in_window"), F.col("time_ms") - F.lag("time_ms").over(by_instance))
    return (
        member_events.withColumn("pause_ms", pause)
        .groupBy(*KEY, "member")
        .agg(
            F.size(F.collect_set("instance")).alias("instances"),
            F.count(F.when(_is("rebalance") & _in_window(), 1)).alias("rebalances"),
            F.count(F.when(F.col("processed_in_window"), 1)).alias("processed_in_window"),
            F.coalesce(F.sum(F.when(processed, F.col("last_offset") - F.col("first_offset") + 1)), F.lit(0)).alias(
                "records_processed"
            ),
            F.max("pause_ms").alias("longest_pause_ms"),
        )
    )


def _steps(windowed: DataFrame) -> DataFrame:
    """One row per step: its span (until the next step or ``drain``) and its last ``compare.assignment``."""
    is_step = _is("step")
    timeline = windowed.where(is_step | _is("assignment") | (_is("phase") & F.col("phase").isin("drain", "end")))
    timeline = timeline.select(
        *KEY,
        "time_ms",
        "seq",
        "window_end_ms",
        (~_is("assignment")).alias("is_boundary"),
        F.when(is_step, F.col("step")).alias("step"),
        F.when(is_step, F.col("name")).alias("name"),
    )
    # A step starting at t owns the assignments at t; a step or drain starting at t ends the previous one.
    in_order = Window.partitionBy(*KEY).orderBy("time_ms", F.when(F.col("is_boundary"), 0).otherwise(1), "seq")
    boundaries_in_order = Window.partitionBy(*KEY, "is_boundary").orderBy("time_ms", "seq")
    is_boundary, is_assignment, time = F.col("is_boundary"), ~F.col("is_boundary"), F.col("time_ms")
    return (
        timeline.withColumn(
            "span", F.sum(is_boundary.cast("int")).over(in_order.rowsBetween(Window.unboundedPreceding, 0))
        )
        .withColumn("next_boundary_ms", F.lead("time_ms").over(boundaries_in_order))
        .groupBy(*KEY, "span")
        .agg(
            F.max("step").alias("step"),
            F.max("name").alias("name"),
            F.min(F.when(is_boundary, time)).alias("start_ms"),
            F.coalesce(F.max(F.when(is_boundary, F.col("next_boundary_ms"))), F.max("window_end_ms")).alias("end_ms"),
            F.count(F.when(is_assignment, 1)).alias("assignments"),
            F.max(F.when(is_assignment, time)).alias("last_assignment_ms"),
        )
        .where(F.col("step").isNotNull())
        .select(
            *KEY,
            "step",
            "name",
            "start_ms",
            "end_ms",
            "assignments",
            "last_assignment_ms",
            F.coalesce(F.col("last_assignment_ms") - F.col("start_ms"), F.lit(0)).alias("time_to_stable_ms"),
        )
    )


def _held_partitions(windowed: DataFrame) -> DataFrame:
    """One row per partition of each ``compare.assignment``: ``acquired`` when the instance's previous assignment did
    not hold it, ``released`` when its next one does not, then at ``end_ms`` (the next assignment, the instance's kill
    or the end of W, whichever is first)."""
    is_assignment = _is("assignment")
    timeline = windowed.where(is_assignment | (_is("member") & (F.col("event") == "killed"))).select(
        *KEY,
        "member",
        "instance",
        "time_ms",
        "seq",
        "window_start_ms",
        "window_end_ms",
        is_assignment.alias("is_assignment"),
        F.when(is_assignment, F.from_json("partitions", "array<array<string>>")).alias("pairs"),
    )
    killed = F.min(F.when(~F.col("is_assignment"), F.col("time_ms"))).over(Window.partitionBy(*KEY, "instance"))
    in_order = Window.partitionBy(*KEY, "instance").orderBy("time_ms", "seq")
    nothing = F.array().cast("array<array<string>>")
    assignments = (
        timeline.withColumn("killed_ms", killed)
        .where("is_assignment")
        .select(
            "*",
            F.row_number().over(in_order).alias("index"),
            F.coalesce(F.lag("pairs").over(in_order), nothing).alias("previous_pairs"),
            F.coalesce(F.lead("pairs").over(in_order), nothing).alias("next_pairs"),
            F.lead("time_ms").over(in_order).alias("next_assignment_ms"),
        )
    )
    return assignments.select("*", F.explode("pairs").alias("pair")).select(
        *KEY,
        F.col("pair")[0].alias("topic"),
        F.col("pair")[1].cast("int").alias("partition"),
        "member",
        "instance",
        "index",
        "time_ms",
        "seq",
        "window_start_ms",
        "window_end_ms",
        (~F.array_contains("previous_pairs", F.col("pair"))).alias("acquired"),
        (~F.array_contains("next_pairs", F.col("pair"))).alias("released"),
        F.least("next_assignment_ms", "killed_ms", "window_end_ms").alias("end_ms"),
    )


def _ownership(held: DataFrame) -> DataFrame:
    """One row per ownership interval: from an acquisition to the release that follows it (empty ones left out)."""
    by_held_partition = Window.partitionBy(*KEY, "instance", "topic", "partition").orderBy("index")
    acquisitions_so_far = F.sum(F.col("acquired").cast("int")).over(
        by_held_partition.rowsBetween(Window.unboundedPreceding, 0)
    )
    return (
        held.withColumn("interval", acquisitions_so_far)
        .groupBy(*KEY, "instance", "topic", "partition", "interval", "member")
        .agg(
            F.min(F.when(F.col("acquired"), F.col("time_ms"))).alias("start_ms"),
            F.max(F.when(F.col("released"), F.col("end_ms"))).alias("end_ms"),
        )
        .where(F.col("end_ms") > F.col("start_ms"))
        .select(*PARTITION_KEY, "member", "instance", "start_ms", "end_ms")
    )


def _changes(*changes: tuple[Column, dict[str, Column | int]]) -> Column:
    """The rows ``change`` of a sweep, exploded: one per (point, {delta name: delta})."""

    def as_int(delta: Column | int) -> Column:
        return (F.lit(delta) if isinstance(delta, int) else delta).cast("int")

    return F.explode(
        F.array(
            *(
                F.struct(
                    point.cast("long").alias("point"), *(as_int(delta).alias(name) for name, delta in deltas.items())
                )
                for point, deltas in changes
            )
        )
    ).alias("change")


def _coverage(delta: str) -> tuple[Column, Column]:
    """Over a partition's ``point``s: the running sum of ``delta`` up to and including the point, and the length to
    the next point (0 between rows of one point, which all see the same sum)."""
    by_point = Window.partitionBy(*PARTITION_KEY).orderBy("point")
    covered = F.sum(delta).over(by_point.rangeBetween(Window.unboundedPreceding, Window.currentRow))
    return covered, F.lead("point").over(by_point) - F.col("point")


def _ownership_sweep(windowed: DataFrame, held: DataFrame) -> DataFrame:
    """partitions_moved and unowned_partition_s, from one sweep per partition over acquisitions, releases and the
    partition's existence (its ``compare.topic``, from the start of W at the earliest, to the end of W)."""
    window_columns = ("window_start_ms", "window_end_ms")
    ownership_changes = held.select(
        *PARTITION_KEY,
        *window_columns,
        F.explode(
            F.array(
                F.when(
                    F.col("acquired"),
                    F.struct(
                        F.col("time_ms").alias("point"),
                        F.lit(1).alias("owners"),
                        F.col("member").alias("acquirer"),
                        "seq",
                    ),
                ),
                F.when(
                    F.col("released"),
                    F.struct(
                        F.col("end_ms").alias("point"),
                        F.lit(-1).alias("owners"),
                        F.lit(None).cast("string").alias("acquirer"),
                        F.lit(None).cast("long").alias("seq"),
                    ),
                ),
            )
        ).alias("change"),
    ).where(F.col("change").isNotNull())
    partition_count = F.col("partitions").cast("int")
    existence = (
        windowed.where(_is("topic") & (partition_count > 0))
        .withColumn("partition", F.explode(F.sequence(F.lit(0), partition_count - 1)))
        .select(
            *PARTITION_KEY,
            *window_columns,
            F.lit(True).alias("exists"),
            _changes(
                (F.greatest("time_ms", "window_start_ms"), {"owners": 0}), (F.col("window_end_ms"), {"owners": 0})
            ),
        )
    )
    points = (
        ownership_changes.select("*", "change.*")
        .drop("change")
        .unionByName(existence.select("*", "change.*").drop("change"), allowMissingColumns=True)
    )
    owners, length = _coverage("owners")
    exists_from = F.min(F.when(F.col("exists"), F.col("point"))).over(Window.partitionBy(*PARTITION_KEY))
    acquisitions_in_order = Window.partitionBy(*PARTITION_KEY).orderBy("point", "seq")
    previous_acquirer = F.last("acquirer", ignorenulls=True).over(
        acquisitions_in_order.rowsBetween(Window.unboundedPreceding, -1)
    )
    point = F.col("point")
    unowned = (owners == 0) & (point >= exists_from) & (point < F.col("window_end_ms"))
    moved = _in_window(point) & (previous_acquirer != F.col("acquirer"))
    return points.select(*KEY, F.when(moved, 1).alias("moved"), F.when(unowned, length).alias("unowned_ms"))


def _record_sweep(windowed: DataFrame) -> DataFrame:
    """records_duplicated and records_missed: one sweep per partition over the processed ranges' boundaries and the
    produced offsets ``0..end_offset-1``."""
    before_window = F.when(F.col("time_ms") < F.col("window_start_ms"), 1).otherwise(0)
    range_boundaries = windowed.where(_is("processed")).select(
        *PARTITION_KEY,
        _changes(
            (F.col("first_offset"), {"ranges": 1, "ranges_before": before_window}),
            (F.col("last_offset") + 1, {"ranges": -1, "ranges_before": -before_window}),
        ),
    )
    nothing = {"ranges": 0, "ranges_before": 0}
    produced = windowed.where(_is("produced")).select(
        *PARTITION_KEY, "end_offset", _changes((F.lit(0), nothing), (F.col("end_offset"), nothing))
    )
    points = range_boundaries.unionByName(produced, allowMissingColumns=True).select("*", "change.*").drop("change")
    ranges, length = _coverage("ranges")
    ranges_before, _ = _coverage("ranges_before")
    end_offset = F.max("end_offset").over(Window.partitionBy(*PARTITION_KEY))
    point = F.col("point")
    duplicated = (ranges >= 2) & (ranges_before < 2)
    missed = (ranges == 0) & (point >= 0) & (point < end_offset)
    return points.select(*KEY, F.when(duplicated, length).alias("duplicated"), F.when(missed, length).alias("missed"))


def old_new_ratio(old, new) -> float | None:
    """``old / new``: ``inf`` when only ``new`` is 0, None (blank) when both are 0 or either is unknown."""
    if old is None or new is None or (old == 0 and new == 0):
        return None
    if new == 0:
        return math.inf
    return old / new


def ratio_rows(summary: list[dict], metrics: tuple[str, ...] = METRICS) -> list[dict]:
    """Per scenario and coordinator variant: each metric's ``legacy`` value divided by the variant's."""
    legacy = {row["scenario"]: row for row in summary if row["variant"] == LEGACY}
    return [
        {
            "scenario": row["scenario"],
            "variant": row["variant"],
            **{metric: old_new_ratio(legacy[row["scenario"]][metric], row[metric]) for metric in metrics},
        }
        for row in summary
        if row["variant"] != LEGACY and row["scenario"] in legacy
    ]


def terminal_table(summary: list[dict]) -> str:
    """The headline values of every run, then their old / new ratios per scenario and coordinator variant."""
    columns = [*HEADLINE_METRICS, "records_missed"]
    values = format_table(
        ["SCENARIO", "VARIANT", *(column.upper() for column in columns)],
        [[row["scenario"], row["variant"], *(_format_value(row[column]) for column in columns)] for row in summary],
    )
    ratios = ratio_rows(summary, HEADLINE_METRICS)
    if not ratios:
        return f"{values}\n\nno scenario has a {LEGACY} run and a coordinator run to compare"
    ratio_table = format_table(
        ["SCENARIO", "OLD / NEW", *(metric.upper() for metric in HEADLINE_METRICS)],
        [
            [
                row["scenario"],
                f"{LEGACY} / {row['variant']}",
                *(format_ratio(row[metric], "-") for metric in HEADLINE_METRICS),
            ]
            for row in ratios
        ],
    )
    return f"{values}\n\n{ratio_table}\n(inf: only the new value is 0; -: both are 0 or unknown)"


def _format_value(value) -> str:
    if value is None:
        return "-"
    return f"{value:.1f}" if isinstance(value, float) else str(value)


def sort_rows(rows: list[dict]) -> list[dict]:
    """Rows in the order of docs/compare.md's scenarios and variants, unknown ones after them by name."""

    variants = list(VARIANTS)

    def rank(order: Sequence[str], name: str) -> tuple[int, str]:
        return (order.index(name), "") if name in order else (len(order), name)

    return sorted(rows, key=lambda row: (rank(SCENARIOS, row["scenario"]), rank(variants, row["variant"])))


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
        _check_runs(events, source, console)
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
        console("plotting")
        report_path = os.path.join(out_dir, "report.html")
        html = render_report(
            summary=collected["summary"],
            ratios=ratio_rows(collected["summary"]),
            members=collected["members"],
            steps=collected["steps"],
            ownership=ownership,
            metrics=METRICS,
        )
        with open(report_path, "w", encoding="utf-8") as report:
            report.write(html)
        console(terminal_table(collected["summary"]))
        console(f"report: {report_path}")
        return collected["summary"]
    finally:
        events.unpersist()


def _check_runs(events: DataFrame, source: str, console: Callable[[str], object]) -> None:
    runs = (
        events.groupBy(KEY)
        .agg(F.collect_set("run").alias("runs"), F.max(_is("phase") & (F.col("phase") == "measure")).alias("measured"))
        .collect()
    )
    if not runs:
        raise ReportInputError(f"no compare.* events of schema {TRACE_SCHEMA} under {source}")
    run_ids = sorted({run_id for row in runs for run_id in row["runs"]})
    if len(run_ids) > 1:
        raise ReportInputError(
            f"events of several runs under {source} ({', '.join(run_ids)}): pass one run's directory"
        )
    unmeasured = sorted(f"{row['scenario']}/{row['variant']}" for row in runs if not row["measured"])
    if len(unmeasured) == len(runs):
        raise ReportInputError(f"no run under {source} reached its measure phase")
    if unmeasured:
        console(f"left out (no measure phase): {', '.join(unmeasured)}")


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
