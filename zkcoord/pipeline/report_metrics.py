"""The rebalance report's metrics (docs/compare.md) as DataFrame transformations of the ``compare.*`` trace
events: :func:`compute` gives the summary, member, step and ownership tables.

Every metric is a sweep or a window over the events, never one row per offset or per millisecond, so it scales
with the number of events only. Transformations only: nothing runs until the caller's action. Must not import
gevent, kazoo, the runtime or the server.
"""

from dataclasses import dataclass
from functools import reduce

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from zkcoord.compare.scenarios import LEGACY

KEY = ["scenario", "variant"]
PARTITION_KEY = [*KEY, "topic", "partition"]
MEMBER_TYPES = ("compare.assignment", "compare.rebalance", "compare.processed", "compare.committed")


@dataclass
class ReportTables:
    """The report's tables; ``ownership`` has one row per ownership interval (for the timeline plots)."""

    summary: DataFrame
    members: DataFrame
    steps: DataFrame
    ownership: DataFrame


def compute(events: DataFrame) -> ReportTables:
    """The report's tables from ``rebalance_report.read_events``' events (transformations only; nothing runs until an
    action).

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
        F.sum("records_in_window").alias("records_processed_in_window"),
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
            for column in ("records_processed", "records_processed_in_window", "records_duplicated", "records_missed")
        ),
        *(
            F.col(f"counters.{column}").cast("long").alias(column)
            for column in ("zk_reads", "zk_writes", "coordinator_requests")
        ),
        (F.col("window_end_ms") - F.col("window_start_ms")).alias("window_ms"),
        "window_start_ms",
    )
    return ReportTables(summary=summary, members=members, steps=steps, ownership=_ownership(held))


def is_type(event_type: str) -> Column:
    """True for the events of type ``compare.<event_type>``."""
    return F.col("type") == f"compare.{event_type}"


def _in_window(time: Column | None = None) -> Column:
    time = F.col("time_ms") if time is None else time
    return time.between(F.col("window_start_ms"), F.col("window_end_ms"))


def _windows(events: DataFrame) -> DataFrame:
    """W per run: ``measure`` until ``end`` (the last event when a run stopped before ``end``)."""
    phase = F.when(is_type("phase"), F.col("phase"))
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
    """What single events add to the summary: W, records (in W too), generations before and in W, counters."""
    rebalance = is_type("rebalance")
    generation = F.col("generation")
    records = F.when(is_type("processed"), F.col("last_offset") - F.col("first_offset") + 1)
    return windowed.select(
        *KEY,
        "window_start_ms",
        "window_end_ms",
        records.alias("records"),
        F.when(_in_window(), records).alias("records_in_window"),
        F.when(rebalance & _in_window(), generation).alias("generation_in_window"),
        F.when(rebalance & (F.col("time_ms") < F.col("window_start_ms")), generation).alias("generation_before_window"),
        F.when(is_type("counters"), F.struct("time_ms", "seq", "zk_reads", "zk_writes", "coordinator_requests")).alias(
            "counters"
        ),
    )


def _members(windowed: DataFrame) -> DataFrame:
    """One row per member: its instances, rebalances and processed events in W, records, longest pause in W."""
    processed = is_type("processed")
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
            F.count(F.when(is_type("rebalance") & _in_window(), 1)).alias("rebalances"),
            F.count(F.when(F.col("processed_in_window"), 1)).alias("processed_in_window"),
            F.coalesce(F.sum(F.when(processed, F.col("last_offset") - F.col("first_offset") + 1)), F.lit(0)).alias(
                "records_processed"
            ),
            F.max("pause_ms").alias("longest_pause_ms"),
        )
    )


def _steps(windowed: DataFrame) -> DataFrame:
    """One row per step: its span (until the next step or ``drain``) and its last ``compare.assignment``."""
    is_step = is_type("step")
    timeline = windowed.where(
        is_step | is_type("assignment") | (is_type("phase") & F.col("phase").isin("drain", "end"))
    )
    timeline = timeline.select(
        *KEY,
        "time_ms",
        "seq",
        "window_end_ms",
        (~is_type("assignment")).alias("is_boundary"),
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
    is_assignment = is_type("assignment")
    timeline = windowed.where(is_assignment | (is_type("member") & (F.col("event") == "killed"))).select(
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
        windowed.where(is_type("topic") & (partition_count > 0))
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
    range_boundaries = windowed.where(is_type("processed")).select(
        *PARTITION_KEY,
        _changes(
            (F.col("first_offset"), {"ranges": 1, "ranges_before": before_window}),
            (F.col("last_offset") + 1, {"ranges": -1, "ranges_before": -before_window}),
        ),
    )
    nothing = {"ranges": 0, "ranges_before": 0}
    produced = windowed.where(is_type("produced")).select(
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
