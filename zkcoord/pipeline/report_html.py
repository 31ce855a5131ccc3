"""The rebalance report as one self-contained HTML page: tables, and plots embedded as base64 PNG.

Takes the small tables the Spark job collected (lists of dicts) and draws with matplotlib's Agg canvas, without
pyplot's global state. Must not import pyspark, gevent, kazoo, the runtime or the server.
"""

import base64
import io
from collections import defaultdict
from html import escape

from matplotlib import colormaps
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from zkcoord.pipeline.report_summary import format_ratio

STYLE = """
body { font-family: sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; }
th { background: #f0f0f0; }
td.number { text-align: right; font-variant-numeric: tabular-nums; }
img { max-width: 100%; }
"""


def render_report(
    summary: list[dict],
    ratios: list[dict],
    members: list[dict],
    steps: list[dict],
    ownership: list[dict],
    metrics: tuple[str, ...],
) -> str:
    """The page: the summary, the old / new ratios, and per scenario its steps, ownership timelines and pauses."""
    summary_columns = ["scenario", "variant", *metrics, "window_ms"]
    sections = [
        "<h2>Summary</h2>",
        _table(summary_columns, [[row[column] for column in summary_columns] for row in summary]),
        "<h2>Old / new</h2>",
        "<p>The <code>legacy</code> value divided by the coordinator variant's value of the same scenario (for "
        "<code>member-migration</code>: the whole-group stop's divided by the member-by-member migration's): "
        "<code>inf</code> when only the new one is 0, blank when both are.</p>",
        _table(
            ["scenario", "old / new", *metrics],
            [
                [
                    row["scenario"],
                    f"{row['baseline']} / {row['variant']}",
                    *(format_ratio(row[metric]) for metric in metrics),
                ]
                for row in ratios
            ],
        )
        if ratios
        else "<p>No scenario has a baseline run and a run to compare with it.</p>",
    ]
    for scenario in dict.fromkeys(row["scenario"] for row in summary):
        runs = [row for row in summary if row["scenario"] == scenario]
        sections.append(f"<h2>{escape(scenario)}</h2>")
        sections.append(_steps_table(runs, [row for row in steps if row["scenario"] == scenario]))
        sections.append("<h3>Ownership per partition</h3>")
        sections.append(_image(_timeline_figure(runs, ownership, steps), f"ownership timelines of {scenario}"))
        pauses = {
            run["variant"]: [
                row["longest_pause_ms"]
                for row in members
                if (row["scenario"], row["variant"]) == (scenario, run["variant"])
                and row["longest_pause_ms"] is not None
            ]
            for run in runs
        }
        sections.append("<h3>Members' longest pauses</h3>")
        if any(pauses.values()):
            sections.append(_image(_pause_figure(pauses), f"longest pauses per member in {scenario}"))
        else:
            sections.append("<p>No member processed twice in the window.</p>")
    body = "\n".join(sections)
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>zkcoord rebalance report</title>\n<style>{STYLE}</style>\n</head>\n<body>\n"
        "<h1>zkcoord rebalance report</h1>\n"
        "<p>Metrics over each run's window W (<code>measure</code> to <code>end</code>), as docs/compare.md "
        "defines them.</p>\n"
        f"{body}\n</body>\n</html>\n"
    )


def _cell(value) -> str:
    if value is None:
        return "<td></td>"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"<td>{escape(str(value))}</td>"
    text = f"{value:.2f}" if isinstance(value, float) else str(value)
    return f'<td class="number">{text}</td>'


def _table(header: list[str], rows: list[list]) -> str:
    head = "".join(f"<th>{escape(column)}</th>" for column in header)
    body = "\n".join("<tr>" + "".join(_cell(value) for value in row) + "</tr>" for row in rows)
    return f"<table>\n<tr>{head}</tr>\n{body}\n</table>"


def _steps_table(runs: list[dict], steps: list[dict]) -> str:
    if not steps:
        return "<p>No steps.</p>"
    window_start = {run["variant"]: run["window_start_ms"] for run in runs}
    variants = [run["variant"] for run in runs]
    ordered = sorted(steps, key=lambda step: (variants.index(step["variant"]), step["start_ms"]))
    header = ["variant", "step", "name", "start (s in W)", "length (s)", "assignments", "time_to_stable_ms"]
    rows = [
        [
            step["variant"],
            step["step"],
            step["name"],
            (step["start_ms"] - window_start[step["variant"]]) / 1000.0,
            (step["end_ms"] - step["start_ms"]) / 1000.0,
            step["assignments"],
            step["time_to_stable_ms"],
        ]
        for step in ordered
    ]
    return _table(header, rows)


def _image(figure: Figure, description: str) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=80, bbox_inches="tight")
    encoded = base64.b64encode(buffer.getvalue()).decode("ascii")
    return f'<img alt="{escape(description)}" src="data:image/png;base64,{encoded}">'


def _timeline_figure(runs: list[dict], ownership: list[dict], steps: list[dict]) -> Figure:
    """One panel per variant: a row per partition, a bar per ownership interval colored by member."""
    scenario = runs[0]["scenario"]
    intervals_by_variant = defaultdict(list)
    for interval in ownership:
        if interval["scenario"] == scenario:
            intervals_by_variant[interval["variant"]].append(interval)
    member_names = sorted({interval["member"] for rows in intervals_by_variant.values() for interval in rows})
    colors = _palette(len(member_names))
    color_of = dict(zip(member_names, colors, strict=True))
    rows_per_variant = [
        sorted({(interval["topic"], interval["partition"]) for interval in intervals_by_variant[run["variant"]]})
        for run in runs
    ]
    heights = [max(1.2, 0.14 * len(rows) + 0.6) for rows in rows_per_variant]
    figure = Figure(figsize=(12, sum(heights) + 0.8))
    axes = figure.subplots(len(runs), 1, sharex=True, squeeze=False, gridspec_kw={"height_ratios": heights})[:, 0]
    for axis, run, partitions in zip(axes, runs, rows_per_variant, strict=True):
        start, length = run["window_start_ms"], run["window_ms"]
        row_of = {partition: index for index, partition in enumerate(partitions)}
        bars = [
            (
                row_of[(interval["topic"], interval["partition"])],
                (max(interval["start_ms"], start) - start) / 1000.0,
                (interval["end_ms"] - max(interval["start_ms"], start)) / 1000.0,
                color_of[interval["member"]],
            )
            for interval in intervals_by_variant[run["variant"]]
            if interval["end_ms"] > start
        ]
        if bars:
            rows, lefts, widths, bar_colors = zip(*bars, strict=True)
            axis.barh(rows, widths, left=lefts, height=0.8, color=bar_colors, linewidth=0)
        for step in steps:
            if (step["scenario"], step["variant"]) == (scenario, run["variant"]):
                axis.axvline((step["start_ms"] - start) / 1000.0, color="#555", linestyle="--", linewidth=0.8)
        axis.set_xlim(0, max(length, 1) / 1000.0)
        axis.set_ylim(len(partitions) - 0.5, -0.5)
        axis.set_yticks(range(len(partitions)))
        axis.set_yticklabels([f"{topic}-{partition}" for topic, partition in partitions], fontsize=6)
        axis.set_title(f"{run['variant']} (dashed: steps)", fontsize=9, loc="left")
    axes[-1].set_xlabel("seconds since the window opened")
    if member_names:
        figure.legend(
            handles=[Patch(color=color_of[member], label=member) for member in member_names],
            loc="upper right",
            fontsize=7,
            ncol=min(len(member_names), 10),
        )
    return figure


def _palette(count: int) -> list:
    colormap = colormaps["tab20"]
    return [colormap(index % colormap.N) for index in range(count)]


def _pause_figure(pauses: dict[str, list[float]]) -> Figure:
    """A box per variant of its members' longest pauses, the members as points over it."""
    variants = [variant for variant, values in pauses.items() if values]
    figure = Figure(figsize=(max(4, 1.6 * len(variants) + 1), 3.2))
    axis = figure.subplots()
    axis.boxplot([pauses[variant] for variant in variants], showfliers=False)
    axis.set_xticks(range(1, len(variants) + 1), labels=variants)
    for position, variant in enumerate(variants, start=1):
        values = pauses[variant]
        spread = [position + 0.25 * (index / max(len(values) - 1, 1) - 0.5) for index in range(len(values))]
        axis.scatter(spread, values, s=10, color="#1f77b4", alpha=0.7, zorder=3)
    axis.set_ylabel("longest pause per member (ms)")
    axis.set_ylim(bottom=0)
    return figure
