"""The rebalance report's plots: per-partition ownership timelines and the members' longest pauses, drawn with
matplotlib's Agg canvas without pyplot's global state, sized for a page 1,400 px wide.

Must not import pyspark, gevent, kazoo, the runtime or the server.
"""

import base64
import io
import math
from collections import defaultdict
from dataclasses import dataclass

from matplotlib import colormaps
from matplotlib.figure import Figure
from matplotlib.patches import Patch

DPI = 100
WIDTH_IN = 13.0  # 1,300 px: the page's width less its margins
ROW_IN = 0.13  # one partition's row
MAX_LABELS = 16  # partition labels per panel at most: more are unreadable
KILLED = "#d62728"


@dataclass(frozen=True)
class Bar:
    """One ownership interval as drawn: ``row`` of the panel, seconds from the window's start."""

    row: int
    left_s: float
    width_s: float
    member: str
    instance: str


def lead_s(window_ms: int) -> float:
    """How much of the warm-up a timeline shows before the window: enough to see who owned what when it opened
    (a member killed just after it opened is then more than a sliver)."""
    return max(1.0, window_ms / 10_000)


def timeline_bars(run: dict, intervals: list[dict], rows: dict[tuple[str, int], int]) -> list[Bar]:
    """The bars of one run's panel: each interval from the shown part of the warm-up until it ended (a drop, a
    kill or the end of the window)."""
    start = run["window_start_ms"]
    shown_from = start - lead_s(run["window_ms"]) * 1000
    bars = []
    for interval in intervals:
        if interval["end_ms"] <= shown_from:
            continue
        left = max(interval["start_ms"], shown_from)
        bars.append(
            Bar(
                rows[(interval["topic"], interval["partition"])],
                (left - start) / 1000.0,
                (interval["end_ms"] - left) / 1000.0,
                interval["member"],
                interval["instance"],
            )
        )
    return bars


def partition_labels(partitions: list[tuple[str, int]]) -> tuple[list[int], list[str], str]:
    """Which rows get a label, the labels, and the axis title: partition numbers (``topic index-partition`` with
    several topics), at most ``MAX_LABELS`` of them at a round stride."""
    topics = sorted({topic for topic, _ in partitions})
    stride = next(step for step in (1, 2, 4, 5, 8, 10, 16, 20, 25, 50, 100) if len(partitions) / step <= MAX_LABELS)
    if len(partitions) > 100 * MAX_LABELS:
        stride = math.ceil(len(partitions) / MAX_LABELS)
    rows = list(range(0, len(partitions), stride))
    if len(topics) == 1:
        return rows, [str(partitions[row][1]) for row in rows], f"partition of {topics[0]}"
    return (
        rows,
        [f"{topics.index(partitions[row][0])}-{partitions[row][1]}" for row in rows],
        "topic (0 = " + topics[0] + ")-partition",
    )


def timeline_figure(runs: list[dict], ownership: list[dict], steps: list[dict], kills: list[dict]) -> Figure:
    """One panel per variant: a row per partition, a bar per ownership interval coloured by member, the steps as
    dashed lines, kills as red lines; the members' legend beside the panels."""
    scenario = runs[0]["scenario"]
    intervals_by_variant = defaultdict(list)
    for interval in ownership:
        if interval["scenario"] == scenario:
            intervals_by_variant[interval["variant"]].append(interval)
    member_names = sorted({interval["member"] for rows in intervals_by_variant.values() for interval in rows})
    color_of = dict(zip(member_names, _palette(len(member_names)), strict=True))
    partitions_per_variant = [
        sorted({(interval["topic"], interval["partition"]) for interval in intervals_by_variant[run["variant"]]})
        for run in runs
    ]
    heights = [0.9 + ROW_IN * max(len(partitions), 4) for partitions in partitions_per_variant]
    figure = Figure(figsize=(WIDTH_IN, sum(heights) + 0.4 * len(runs)), dpi=DPI)
    axes = figure.subplots(len(runs), 1, squeeze=False, gridspec_kw={"height_ratios": heights})[:, 0]
    shown_from = -max(lead_s(run["window_ms"]) for run in runs)
    shown_to = max(max(run["window_ms"], 1) for run in runs) / 1000.0
    for axis, run, partitions in zip(axes, runs, partitions_per_variant, strict=True):
        key = (scenario, run["variant"])
        rows = {partition: index for index, partition in enumerate(partitions)}
        bars = timeline_bars(run, intervals_by_variant[run["variant"]], rows)
        if bars:
            axis.barh(
                [bar.row for bar in bars],
                [bar.width_s for bar in bars],
                left=[bar.left_s for bar in bars],
                height=0.8,
                color=[color_of[bar.member] for bar in bars],
                linewidth=0,
            )
        window_s = run["window_ms"] / 1000.0
        axis.axvspan(shown_from, 0, color="#000", alpha=0.06, linewidth=0)
        if window_s < shown_to:
            axis.axvspan(window_s, shown_to, color="#000", alpha=0.06, linewidth=0, hatch="//")
        for step in steps:
            if (step["scenario"], step["variant"]) == key:
                axis.axvline((step["start_ms"] - run["window_start_ms"]) / 1000.0, color="#555", linestyle="--")
        for kill in kills:
            if (kill["scenario"], kill["variant"]) == key:
                at = (kill["time_ms"] - run["window_start_ms"]) / 1000.0
                axis.axvline(at, color=KILLED, linewidth=1.5)
                axis.text(
                    at,
                    1.0,
                    f" {kill['instance']} killed",
                    color=KILLED,
                    fontsize=10,
                    va="bottom",
                    transform=axis.get_xaxis_transform(),
                )
                killed_rows = [bar.row for bar in bars if bar.instance == kill["instance"]]
                axis.plot([at] * len(killed_rows), killed_rows, "x", color=KILLED, markersize=6)
        axis.set_xlim(shown_from, shown_to)
        axis.set_ylim(len(partitions) - 0.5, -0.5)
        labelled, labels, title = partition_labels(partitions)
        axis.set_yticks(labelled, labels=labels, fontsize=10)
        axis.set_yticks(range(len(partitions)), minor=True)
        axis.set_ylabel(title, fontsize=10)
        axis.tick_params(axis="x", labelsize=10)
        axis.set_title(f"{run['variant']}: {len(partitions)} partitions", fontsize=12, loc="left", pad=16)
    axes[-1].set_xlabel(
        "seconds since the window opened (grey: before and after the window; dashed: steps; red: a member killed)",
        fontsize=10,
    )
    if member_names:
        axes[0].legend(
            handles=[Patch(color=color_of[member], label=member) for member in member_names],
            title="member",
            loc="upper left",
            bbox_to_anchor=(1.01, 1.0),
            fontsize=10,
            ncol=1 if len(member_names) <= 24 else 2,
        )
    total_in = figure.get_figheight()
    figure.subplots_adjust(  # margins in inches, whatever the figure's height
        left=0.07, right=0.9, top=1 - 0.5 / total_in, bottom=0.7 / total_in, hspace=1.0 / (total_in / len(runs))
    )
    return figure


def _palette(count: int) -> list:
    colormap = colormaps["tab20"]
    return [colormap(index % colormap.N) for index in range(count)]


def pause_figure(pauses: dict[str, list[float]]) -> Figure:
    """A box per variant of its members' longest pauses, the members as points over it."""
    variants = [variant for variant, values in pauses.items() if values]
    figure = Figure(figsize=(min(WIDTH_IN, max(6.0, 1.9 * len(variants) + 2)), 4.0), dpi=DPI)
    axis = figure.subplots()
    axis.boxplot([pauses[variant] for variant in variants], showfliers=False)
    axis.set_xticks(range(1, len(variants) + 1), labels=variants, fontsize=10, rotation=20 if len(variants) > 5 else 0)
    for position, variant in enumerate(variants, start=1):
        values = pauses[variant]
        spread = [position + 0.25 * (index / max(len(values) - 1, 1) - 0.5) for index in range(len(values))]
        axis.scatter(spread, values, s=16, color="#1f77b4", alpha=0.7, zorder=3)
    axis.set_ylabel("longest pause of a member (ms)", fontsize=10)
    axis.tick_params(axis="y", labelsize=10)
    axis.set_ylim(bottom=0)
    return figure


def png_base64(figure: Figure) -> str:
    """The figure as a base64 PNG, cropped to what it draws."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI, bbox_inches="tight")
    return base64.b64encode(buffer.getvalue()).decode("ascii")
