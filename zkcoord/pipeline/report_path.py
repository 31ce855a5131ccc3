"""What each step of the migration path changed, in words: one paragraph per scenario, made from its summary rows.
The variants that ran and finished are taken in ``MIGRATION_PATH`` order, and each step from one to the next gives
its figures before and after, written as the report's tables write them.

Pure: no IO; must not import pyspark, matplotlib, gevent, kazoo, the runtime or the server.
"""

from collections.abc import Collection
from itertools import pairwise

from zkcoord.pipeline.report_summary import sort_rows
from zkcoord.pipeline.report_text import format_number

# The figures that tell a step, in the words of the paragraph and with their unit: what a team feels of a rebalance
# (ZooKeeper's load is left to the ratios: it changes once, at the first step, and says nothing about the later ones).
STEP_FIGURES = {
    "rebalances": ("rebalances", ""),
    "pause_max_ms": ("the longest member pause", "\u00a0ms"),  # no line break between a number and its unit
    "partitions_moved": ("partitions moved", ""),
    "unowned_partition_s": ("unowned partition-seconds", ""),
    "records_duplicated": ("records processed twice", ""),
}


def path_paragraphs(summary: list[dict], incomplete: Collection[tuple[str, str]] = ()) -> dict[str, list[str]]:
    """Per scenario, in :func:`sort_rows`' order, the sentences of its paragraph: one per step between the variants
    whose run finished, then one naming the runs in ``incomplete``, if any."""
    rows = sort_rows(summary)
    paragraphs = {}
    for scenario in dict.fromkeys(row["scenario"] for row in rows):
        runs = [row for row in rows if row["scenario"] == scenario]
        finished = [row for row in runs if (scenario, row["variant"]) not in incomplete]
        left_out = [row["variant"] for row in runs if (scenario, row["variant"]) in incomplete]
        paragraphs[scenario] = _paragraph(finished, left_out)
    return paragraphs


def _paragraph(finished: list[dict], left_out: list[str]) -> list[str]:
    """``Moving from A to B cut ….``, ``From B to C ….``, …."""
    if len(finished) < 2:
        only = f"Only {finished[0]['variant']} finished" if finished else "No run finished"
        sentences = [f"{only}, so there is no step to describe."]
    else:
        steps = [_step(before, after) for before, after in pairwise(finished)]
        sentences = [f"{'Moving from' if index == 0 else 'From'} {step}." for index, step in enumerate(steps)]
    if left_out:
        sentences.append(f"Left out: {_listed(left_out)}, which did not finish.")
    return sentences


def _step(before: dict, after: dict) -> str:
    """``A to B cut …, raised …, and left …`` for the figures both runs have."""
    changes: dict[str, list[str]] = {"cut": [], "raised": [], "left": []}
    for metric, (name, unit) in STEP_FIGURES.items():
        old, new = before[metric], after[metric]
        if old is None or new is None:
            continue
        written = f"{format_number(old)}{unit}", f"{format_number(new)}{unit}"
        if written[0] == written[1]:  # equal as the tables show them
            changes["left"].append(f"{name} at {written[0]}")
        else:
            changes["cut" if new < old else "raised"].append(f"{name} from {written[0]} to {written[1]}")
    told = [f"{verb} {_listed(items)}" for verb, items in changes.items() if items]
    # Each verb's figures are joined by "and" already: a comma before the verbs' own "and" keeps them apart.
    verbs = f"{', '.join(told[:-1])}, and {told[-1]}" if len(told) > 1 else "".join(told)
    return f"{before['variant']} to {after['variant']} " + (verbs or "has no figure to compare")


def _listed(items: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"
