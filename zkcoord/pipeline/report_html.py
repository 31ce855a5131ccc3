"""The rebalance report as one self-contained HTML page 1,400 px wide: what old and new mean, tables with human
headers and the variants in migration-path order, the old ÷ new ratios with their direction, what each step of the
path changed, and per scenario its steps and plots (embedded PNG), each section saying how to read it. Runs that
did not finish are flagged in a banner and left out of the ratios and the path's steps.

Takes the small tables the Spark job collected (lists of dicts). Must not import pyspark, gevent, kazoo, the
runtime or the server.
"""

from html import escape

from zkcoord.pipeline.report_path import path_paragraphs
from zkcoord.pipeline.report_plots import pause_figure, png_base64, timeline_figure
from zkcoord.pipeline.report_summary import along_path, ratio_rows, sort_rows, with_rates
from zkcoord.pipeline.report_text import (
    HEADERS,
    LOAD_COLUMNS,
    OLD_AND_NEW,
    RATIO_COLUMNS,
    RATIO_DIRECTION,
    REBALANCE_COLUMNS,
    SECTIONS,
    describe_variant,
    format_number,
    role,
)

INTERRUPTED = "INTERRUPTED — incomplete"

STYLE = """
body { font-family: sans-serif; margin: 2em; color: #222; max-width: 1336px; }
p.explain, p.path { max-width: 70em; line-height: 1.4; }
.table-box { max-width: 100%; overflow-x: auto; }
table { border-collapse: collapse; margin: 0.5em 0 1em; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.5em; }
th { background: #f0f0f0; text-align: left; vertical-align: bottom; max-width: 8.5em; white-space: normal; }
th.number { text-align: right; }
td { white-space: nowrap; }
td.number { text-align: right; font-variant-numeric: tabular-nums; }
th .direction { display: block; font-weight: normal; font-size: 0.85em; color: #555; }
tr.interrupted td { background: #fff0f0; }
.banner { border: 3px solid #b00; background: #fee; color: #800; padding: 0.6em 1em; margin: 1em 0; }
.banner strong { font-size: 1.3em; }
img { max-width: 100%; }
"""


def render_report(
    summary: list[dict],
    members: list[dict],
    steps: list[dict],
    ownership: list[dict],
    kills: list[dict] = (),
    incomplete: dict[tuple[str, str], str] | None = None,
) -> str:
    """The page. ``kills``: the ``killed`` member events (scenario, variant, instance, time_ms); ``incomplete``:
    why each run that did not finish stopped, by (scenario, variant)."""
    incomplete = incomplete or {}
    rows = [with_rates(row) for row in sort_rows(summary)]
    complete = [row for row in rows if (row["scenario"], row["variant"]) not in incomplete]
    ratios = ratio_rows(complete, RATIO_COLUMNS)
    sections = [
        _banner(incomplete),
        _section("Old and new", "runs", _variants_table(rows), intro=OLD_AND_NEW),
        _section("Rebalances and pauses", "rebalancing", _run_table(rows, REBALANCE_COLUMNS, incomplete)),
        _section("Records and load", "load", _run_table(rows, LOAD_COLUMNS, incomplete)),
        _section("Old ÷ new", "ratios", _ratio_table(ratios)),
        _section("Step by step along the migration path", "path", _path_paragraphs(rows, incomplete)),
    ]
    for scenario in dict.fromkeys(row["scenario"] for row in rows):
        runs = [row for row in rows if row["scenario"] == scenario]
        stopped = [run["variant"] for run in runs if (scenario, run["variant"]) in incomplete]
        flag = f' <span class="flag">({INTERRUPTED}: {escape(", ".join(stopped))})</span>' if stopped else ""
        sections.append(f"<h2>{escape(scenario)}{flag}</h2>")
        sections.append(_section("Steps", "steps", _steps_table(runs, steps), level=3))
        timelines = _image(timeline_figure(runs, ownership, steps, kills), f"ownership timelines of {scenario}")
        sections.append(_section("Ownership per partition", "ownership", timelines, level=3))
        pauses = {
            run["variant"]: [
                row["longest_pause_ms"]
                for row in members
                if (row["scenario"], row["variant"]) == (scenario, run["variant"])
                and row["longest_pause_ms"] is not None
            ]
            for run in runs
        }
        plot = (
            _image(pause_figure(pauses), f"longest pauses per member in {scenario}")
            if any(pauses.values())
            else "<p>No member processed twice in the window.</p>"
        )
        sections.append(_section("Members' longest pauses", "pauses", plot, level=3))
    body = "\n".join(section for section in sections if section)
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>zkcoord rebalance report</title>\n<style>{STYLE}</style>\n</head>\n<body>\n"
        "<h1>zkcoord rebalance report: the old and the new rebalance</h1>\n"
        f"{body}\n</body>\n</html>\n"
    )


def _banner(incomplete: dict[tuple[str, str], str]) -> str:
    if not incomplete:
        return ""
    items = "".join(
        f"<li>{escape(scenario)} / {escape(variant)}: {escape(reason)}</li>"
        for (scenario, variant), reason in sorted(incomplete.items())
    )
    return (
        f'<div class="banner" role="alert"><strong>{INTERRUPTED}</strong>'
        f"<p>{len(incomplete)} run(s) stopped before they finished. Their numbers cover only what happened until "
        "then, they are marked in every table and left out of the ratios; run <code>zkcoord compare run</code> "
        f"again for them.</p><ul>{items}</ul></div>"
    )


def _section(title: str, kind: str, content: str, intro: str = "", level: int = 2) -> str:
    """A titled section: what it shows and how to read it, then ``content``."""
    return (
        f'<section class="{kind}">\n<h{level}>{escape(title)}</h{level}>\n{intro}'
        f'<p class="explain">{SECTIONS[kind]}</p>\n{content}\n</section>'
    )


def _is_number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _cell(value) -> str:
    if value is None:
        return "<td></td>"
    if not _is_number(value):
        return f"<td>{escape(str(value))}</td>"
    return f'<td class="number">{format_number(value)}</td>'


def _table(columns: list[str], rows: list[list], row_classes: list[str] | None = None, directions: bool = False) -> str:
    """A table in a box that scrolls sideways rather than overflow the page; numeric columns right-aligned."""
    numeric = [any(_is_number(row[index]) for row in rows) for index in range(len(columns))]
    head = "".join(
        _attributed("th", "number" if numeric[index] else "")
        + escape(HEADERS[column])
        + (f'<span class="direction">{RATIO_DIRECTION}</span>' if directions and column in RATIO_COLUMNS else "")
        + "</th>"
        for index, column in enumerate(columns)
    )
    classes = row_classes or [""] * len(rows)
    body = "\n".join(
        _attributed("tr", kind) + "".join(_cell(value) for value in row) + "</tr>"
        for row, kind in zip(rows, classes, strict=True)
    )
    return f'<div class="table-box">\n<table>\n<tr>{head}</tr>\n{body}\n</table>\n</div>'


def _attributed(tag: str, kind: str) -> str:
    return f'<{tag} class="{kind}">' if kind else f"<{tag}>"


def _variants_table(rows: list[dict]) -> str:
    variants = along_path(row["variant"] for row in rows)  # a variant of a later scenario only takes its place too
    return (
        '<div class="table-box">\n<table>\n<tr><th>Variant</th><th>Old or new</th><th>What it runs</th></tr>\n'
        + "\n".join(
            f"<tr><td>{escape(variant)}</td><td>{role(variant)}</td><td>{escape(describe_variant(variant))}</td></tr>"
            for variant in variants
        )
        + "\n</table>\n</div>"
    )


def _variant_cell(row: dict, incomplete: dict) -> str:
    interrupted = (row["scenario"], row["variant"]) in incomplete
    return f"{row['variant']} ({role(row['variant'])}){' — ' + INTERRUPTED if interrupted else ''}"


def _run_table(rows: list[dict], columns: tuple[str, ...], incomplete: dict) -> str:
    return _table(
        ["scenario", "variant", *columns],
        [[row["scenario"], _variant_cell(row, incomplete), *(row[column] for column in columns)] for row in rows],
        ["interrupted" if (row["scenario"], row["variant"]) in incomplete else "" for row in rows],
    )


def _ratio_table(ratios: list[dict]) -> str:
    if not ratios:
        return "<p>No scenario has a finished old run and a finished new run to compare.</p>"
    return _table(
        ["scenario", "compared", *RATIO_COLUMNS],
        [
            [row["scenario"], f"{row['baseline']} ÷ {row['variant']}", *(row[column] for column in RATIO_COLUMNS)]
            for row in ratios
        ],
        directions=True,
    )


def _path_paragraphs(rows: list[dict], incomplete: dict) -> str:
    """A paragraph per scenario, a line per step: a long path stays scannable."""
    line_break = "<br>\n"
    return "\n".join(
        f'<p class="path"><strong>{escape(scenario)}</strong>: {line_break.join(map(escape, sentences))}</p>'
        for scenario, sentences in path_paragraphs(rows, incomplete).items()
    )


def _steps_table(runs: list[dict], steps: list[dict]) -> str:
    window_start = {run["variant"]: run["window_start_ms"] for run in runs}
    variants = [run["variant"] for run in runs]
    ordered = sorted(
        (step for step in steps if step["scenario"] == runs[0]["scenario"] and step["variant"] in window_start),
        key=lambda step: (variants.index(step["variant"]), step["start_ms"]),
    )
    if not ordered:
        return "<p>No steps.</p>"
    columns = ["variant", "step", "name", "start_s", "length_s", "assignments", "step_time_to_stable_ms"]
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
    return _table(columns, rows)


def _image(figure, description: str) -> str:
    return f'<img alt="{escape(description)}" src="data:image/png;base64,{png_base64(figure)}">'
