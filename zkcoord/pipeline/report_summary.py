"""The rebalance report's summary rows once collected (lists of dicts): the metric names, the old / new ratios,
their order (docs/compare.md's scenarios, the variants along the migration path), and the terminal table.

Pure: no IO; must not import pyspark, matplotlib, gevent, kazoo, the runtime or the server.
"""

import math
from collections.abc import Collection, Iterable, Sequence

from zkcoord.compare.scenarios import MIGRATION_PATH, SCENARIOS, baseline
from zkcoord.tables import format_table

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
# Counted within the window only: a rate divides by the window's length (records_processed includes the warm-up).
PER_SECOND = ("records_processed_in_window", "zk_reads", "zk_writes", "coordinator_requests")


def with_rates(row: dict) -> dict:
    """``row`` with its window in seconds and ``<count>_per_s`` for the counts of the window that grow with it
    (``PER_SECOND``): windows differ in length, so only these rates compare across runs."""
    window_s = row["window_ms"] / 1000.0 if row["window_ms"] else None

    def per_second(value) -> float | None:
        return None if value is None or not window_s else value / window_s

    rates = {f"{count}_per_s": per_second(row[count]) for count in PER_SECOND}
    return {**row, "window_s": window_s, **rates}


def old_new_ratio(old, new) -> float | None:
    """``old / new``: ``inf`` when only ``new`` is 0, None (blank) when both are 0 or either is unknown."""
    if old is None or new is None or (old == 0 and new == 0):
        return None
    if new == 0:
        return math.inf
    return old / new


def ratio_rows(summary: list[dict], metrics: tuple[str, ...] = METRICS) -> list[dict]:
    """Per scenario and variant with a baseline run (``legacy``, or a member-by-member migration's whole-group
    stop): each metric's baseline value divided by the variant's."""
    runs = {(row["scenario"], row["variant"]): row for row in summary}
    ratios = []
    for row in summary:
        old = runs.get((row["scenario"], baseline(row["variant"])))
        if old is not None:
            ratio = {metric: old_new_ratio(old[metric], row[metric]) for metric in metrics}
            ratios.append({"scenario": row["scenario"], "baseline": old["variant"], "variant": row["variant"], **ratio})
    return ratios


def format_ratio(ratio: float | None, blank: str = "") -> str:
    """A ratio with two decimals, ``inf``, or ``blank`` when there is none."""
    if ratio is None:
        return blank
    return "inf" if math.isinf(ratio) else f"{ratio:.2f}"


def terminal_table(summary: list[dict], incomplete: Collection[tuple[str, str]] = ()) -> str:
    """The headline values of every run, then their old / new ratios per scenario and coordinator variant, both in
    :func:`sort_rows`' order; runs in ``incomplete`` (scenario, variant) are marked and have no ratio."""
    columns = [*HEADLINE_METRICS, "records_missed"]
    summary = sort_rows(summary)

    def variant(row: dict) -> str:
        return f"{row['variant']} (INCOMPLETE)" if (row["scenario"], row["variant"]) in incomplete else row["variant"]

    values = format_table(
        ["SCENARIO", "VARIANT", *(column.upper() for column in columns)],
        [[row["scenario"], variant(row), *(_format_value(row[column]) for column in columns)] for row in summary],
    )
    finished = [row for row in summary if (row["scenario"], row["variant"]) not in incomplete]
    ratios = ratio_rows(finished, HEADLINE_METRICS)
    if not ratios:
        return f"{values}\n\nno scenario has a finished baseline run and a finished run to compare with it"
    ratio_table = format_table(
        ["SCENARIO", "OLD / NEW", *(metric.upper() for metric in HEADLINE_METRICS)],
        [
            [
                row["scenario"],
                f"{row['baseline']} / {row['variant']}",
                *(format_ratio(row[metric], "-") for metric in HEADLINE_METRICS),
            ]
            for row in ratios
        ],
    )
    return (
        f"{values}\n\n{ratio_table}\n(old / new: above 1 the new rebalance did better; inf: only the new value is 0; "
        "-: both are 0 or unknown)"
    )


def _format_value(value) -> str:
    if value is None:
        return "-"
    return f"{value:.1f}" if isinstance(value, float) else str(value)


def sort_rows(rows: list[dict]) -> list[dict]:
    """Rows in the order of docs/compare.md's scenarios, and within a scenario in the order a team moves through
    the variants (``MIGRATION_PATH``); unknown scenarios and variants after the known ones, by name."""
    return sorted(rows, key=lambda row: (_rank(SCENARIOS, row["scenario"]), _rank(MIGRATION_PATH, row["variant"])))


def along_path(variants: Iterable[str]) -> list[str]:
    """Each of ``variants`` once, in :func:`sort_rows`' order."""
    return sorted(set(variants), key=lambda variant: _rank(MIGRATION_PATH, variant))


def _rank(order: Sequence[str], name: str) -> tuple[int, str]:
    return (order.index(name), "") if name in order else (len(order), name)
