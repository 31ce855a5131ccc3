"""The rebalance report's page (zkcoord.pipeline.report_html) read as a reader would, without a browser: every
section says how to read it, ratios say which way is better, headers are words, load is per second, tables scroll
inside their box with numbers to the right, runs that did not finish are flagged, killed members are drawn until
their kill, every table lists the variants along the migration path (the terminal table too) and a paragraph per
scenario tells each step of it with the tables' figures."""

import re
from dataclasses import dataclass, field
from html.parser import HTMLParser
from itertools import pairwise

import pytest

from zkcoord.compare.scenarios import MIGRATION_PATH, VARIANTS
from zkcoord.pipeline.report_html import INTERRUPTED, render_report
from zkcoord.pipeline.report_path import STEP_FIGURES
from zkcoord.pipeline.report_plots import partition_labels, timeline_bars
from zkcoord.pipeline.report_summary import METRICS, terminal_table
from zkcoord.pipeline.report_text import HEADERS, RATIO_DIRECTION, SECTIONS

VOID = {"img", "meta", "br", "hr", "link", "input"}
WINDOW_START = 10_000


@dataclass
class Element:
    tag: str
    attrs: dict
    children: list = field(default_factory=list)
    text: str = ""

    def all(self, tag: str, kind: str | None = None) -> list["Element"]:
        """Every descendant ``tag`` (with ``kind`` among its classes)."""
        found = []
        for child in self.children:
            if child.tag == tag and (kind is None or kind in child.attrs.get("class", "").split()):
                found.append(child)
            found += child.all(tag, kind)
        return found

    def content(self) -> str:
        return self.text + "".join(child.content() for child in self.children)


class TreeBuilder(HTMLParser):
    def __init__(self):
        super().__init__()
        self.root = Element("document", {})
        self.open = [self.root]

    def handle_starttag(self, tag, attrs):
        element = Element(tag, dict(attrs))
        self.open[-1].children.append(element)
        if tag not in VOID:
            self.open.append(element)

    def handle_endtag(self, tag):
        assert self.open[-1].tag == tag, f"</{tag}> closes <{self.open[-1].tag}>"
        self.open.pop()

    def handle_data(self, data):
        self.open[-1].children.append(Element("#text", {}, text=data))


def parse(page: str) -> Element:
    builder = TreeBuilder()
    builder.feed(page)
    builder.close()
    assert [element.tag for element in builder.open] == ["document"], "unclosed elements"
    return builder.root


def run_row(scenario: str, variant: str, window_ms: int = 10_000, **values) -> dict:
    row = {"scenario": scenario, "variant": variant, **dict.fromkeys(METRICS, 2), "window_ms": window_ms}
    row["records_processed_in_window"] = 2
    return {**row, "window_start_ms": WINDOW_START, **values}


def interval(scenario, variant, partition, instance, start_ms, end_ms) -> dict:
    member = instance.split("#")[0]
    return {"scenario": scenario, "variant": variant, "topic": "t", "partition": partition, "member": member} | {
        "instance": instance,
        "start_ms": start_ms,
        "end_ms": end_ms,
    }


SUMMARY = [
    # The warm-up's records (legacy 4 000, eager 1 000) count in the totals, not in the window.
    run_row(
        "kill",
        "legacy",
        20_000,
        zk_writes=400,
        coordinator_requests=0,
        records_processed=12_000,
        records_processed_in_window=8_000,
    ),
    run_row(
        "kill",
        "eager",
        10_000,
        zk_writes=0,
        coordinator_requests=50,
        records_processed=5_000,
        records_processed_in_window=4_000,
    ),
    run_row("rolling-bounce", "legacy"),
    run_row("rolling-bounce", "static", rebalances=0),
]
OWNERSHIP = [
    interval("kill", "legacy", 0, "m00#1", 1_000, 10_017),  # killed 17 ms into the window
    interval("kill", "legacy", 0, "m01#1", 14_000, 30_000),
    interval("kill", "eager", 0, "m00#1", 1_000, 10_500),
    interval("kill", "eager", 0, "m01#1", 13_000, 20_000),
    interval("rolling-bounce", "legacy", 0, "m00#1", 1_000, 20_000),
    interval("rolling-bounce", "static", 0, "m00#1", 1_000, 20_000),
]
KILLS = [
    {"scenario": "kill", "variant": "legacy", "member": "m00", "instance": "m00#1", "time_ms": 10_017},
    {"scenario": "kill", "variant": "eager", "member": "m00", "instance": "m00#1", "time_ms": 10_500},
]
STEPS = [
    {"scenario": "kill", "variant": variant, "step": 1, "name": "SIGKILL m00", "start_ms": 10_000}
    | {"end_ms": 15_000, "assignments": 2, "time_to_stable_ms": 4_000}
    for variant in ("legacy", "eager")
]
MEMBERS = [{"scenario": "kill", "variant": "legacy", "member": "m01", "longest_pause_ms": 300}]


def page(incomplete: dict | None = None) -> Element:
    return parse(render_report(SUMMARY, MEMBERS, STEPS, OWNERSHIP, KILLS, incomplete))


@pytest.fixture(scope="module")
def complete_page() -> Element:
    return page()


def test_the_page_says_what_old_and_new_are_and_every_section_how_to_read_it(complete_page):
    intro = complete_page.all("section", "runs")[0].content()
    assert "Old is Kafka 0.8.2's rebalance through ZooKeeper" in intro and "New is the group coordinator" in intro
    sections = complete_page.all("section")
    kinds = [section.attrs["class"] for section in sections]
    assert kinds[:5] == ["runs", "rebalancing", "load", "ratios", "path"]
    assert kinds[5:] == ["steps", "ownership", "pauses"] * 2  # per scenario
    for section in sections:
        explanations = section.all("p", "explain")
        assert len(explanations) == 1 and explanations[0].content().strip(), section.attrs["class"]
    assert set(SECTIONS) == set(kinds)
    # Every count of the tables but records never processed is taken within the window; none over the whole run.
    assert not any("whole run" in text for text in SECTIONS.values())
    assert "within the window" in SECTIONS["rebalancing"] and "except <em>records never processed" in SECTIONS["runs"]


def test_every_ratio_says_which_way_is_better_and_the_roles_are_named(complete_page):
    ratios = complete_page.all("section", "ratios")[0]
    header = ratios.all("tr")[0].all("th")
    assert [th.all("span", "direction")[0].content() for th in header[2:]] == [RATIO_DIRECTION] * (len(header) - 2)
    assert RATIO_DIRECTION == "old ÷ new, higher is better for new"
    rows = [[td.content() for td in tr.all("td")] for tr in ratios.all("tr")[1:]]
    # Scenarios in docs/compare.md's order, whatever the order of the rows given.
    assert [row[:2] for row in rows] == [["rolling-bounce", "legacy ÷ static"], ["kill", "legacy ÷ eager"]]
    variants = [tr.all("td")[1].content() for tr in complete_page.all("section", "rebalancing")[0].all("tr")[1:]]
    assert variants == ["legacy (old)", "static (new)", "legacy (old)", "eager (new)"]


def test_headers_are_words_not_column_names(complete_page):
    headers = [th.all("#text")[0].text for th in complete_page.all("th")]
    assert headers and all("_" not in text for text in headers)
    assert set(headers) <= set(HEADERS.values()) | {"Variant", "Old or new", "What it runs"}


def test_load_is_compared_per_second_of_window_where_windows_differ(complete_page):
    load = complete_page.all("section", "load")[0]
    columns = [th.all("#text")[0].text for th in load.all("th")]
    kill_legacy, kill_eager = (row for row in cells(load) if row[0] == "kill")
    at = columns.index
    assert (kill_legacy[at("Window (s)")], kill_eager[at("Window (s)")]) == ("20.00", "10.00")
    assert kill_legacy[at("ZooKeeper writes per s")] == "20.00"
    # Twice the records in twice the window: the same rate, which the totals would hide; the warm-up's are not in it.
    assert (kill_legacy[at("Records processed")], kill_eager[at("Records processed")]) == ("8,000", "4,000")
    assert kill_legacy[at("Records processed per s")] == kill_eager[at("Records processed per s")] == "400.00"
    ratios = complete_page.all("section", "ratios")[0]
    ratio_columns = [th.all("#text")[0].text for th in ratios.all("th")]
    assert "ZooKeeper writes per s" in ratio_columns and "ZooKeeper writes" not in ratio_columns
    assert "Coordinator requests per s" not in ratio_columns  # the old rebalance has no coordinator


def test_tables_scroll_inside_their_box_and_numbers_are_right_aligned(complete_page):
    tables = complete_page.all("table")
    boxes = complete_page.all("div", "table-box")
    assert len(tables) == len(boxes) == sum(len(box.all("table")) for box in boxes)
    cells = [td for table in tables for td in table.all("td")]

    def is_number(text: str) -> bool:
        return text == "inf" or text.replace(",", "").replace(".", "").isdigit()

    assert any(is_number(td.content()) for td in cells)
    for td in cells:
        assert (td.attrs.get("class") == "number") == is_number(td.content()) or not td.content(), td


def test_a_complete_report_has_no_banner(complete_page):
    assert complete_page.all("div", "banner") == []
    assert INTERRUPTED not in complete_page.content()


def test_runs_that_did_not_finish_are_flagged_everywhere_and_left_out_of_the_ratios():
    flagged = page({("kill", "eager"): "interrupted (SIGINT)"})
    banner = flagged.all("div", "banner")
    assert len(banner) == 1 and banner[0].attrs["role"] == "alert"
    assert banner[0].all("strong")[0].content() == "INTERRUPTED — incomplete"
    assert "kill / eager: interrupted (SIGINT)" in banner[0].content()
    for kind in ("rebalancing", "load"):
        rows = flagged.all("section", kind)[0].all("tr", "interrupted")
        assert [tr.all("td")[1].content() for tr in rows] == ["eager (new) — INTERRUPTED — incomplete"]
    assert "(INTERRUPTED — incomplete: eager)" in flagged.all("h2")[-1].content()  # the kill scenario's heading
    ratios = [tr.all("td")[1].content() for tr in flagged.all("section", "ratios")[0].all("tr")[1:]]
    assert ratios == ["legacy ÷ static"]


def test_a_member_killed_just_after_the_window_opened_is_drawn_until_its_kill():
    run = SUMMARY[0]
    bars = timeline_bars(run, [OWNERSHIP[0], OWNERSHIP[1]], {("t", 0): 0})
    killed = next(bar for bar in bars if bar.instance == "m00#1")
    # From the shown end of the warm-up (1 s before the window, more than the 17 ms it owned in it) to the kill.
    assert (killed.left_s, round(killed.left_s + killed.width_s, 3)) == (-2.0, 0.017)
    successor = next(bar for bar in bars if bar.instance == "m01#1")
    assert (successor.left_s, successor.width_s) == (4.0, 16.0)
    assert "m00#1" in {bar.instance for bar in bars}


def test_partition_labels_are_thinned_to_stay_readable():
    rows, labels, title = partition_labels([("kill.legacy.0", p) for p in range(64)])
    assert (rows[:3], labels[:3], len(labels), title) == ([0, 4, 8], ["0", "4", "8"], 16, "partition of kill.legacy.0")
    rows, labels, _ = partition_labels([("a", 0), ("a", 1), ("b", 0)])
    assert (rows, labels) == ([0, 1, 2], ["0-0", "0-1", "1-0"])


# Every stage of the migration path in one scenario, its rows given out of order, and two variants the path does not
# know (they come last, by name). Figures: rebalances, longest pause, partitions moved, unowned partition-s, twice.
PATH_FIGURES = {
    "kip848": (1, 40, 4, 0.5, 0),
    "zz-next": (2, None, 4, 0.5, 0),  # no member paused twice: no pause to compare
    "static": (0, 64, 0, 0.0, 0),
    "legacy": (8, 1_282, 40, 12.25, 30),
    "kafka-cooperative": (5, 130, 10, 1.5, 4),
    "eager": (4, 640, 30, 3.0, 10),
    "aa-next": (1, 40, 4, 0.5, 0),  # kip848's figures: every one left as it was
    "classic-kafka4": (5, 130, 12, 1.25, 4),
    "cooperative": (6, 120, 10, 1.5, 10),
}
ROLLING_PATH = [
    "legacy",
    "eager",
    "cooperative",
    "static",
    "kafka-cooperative",
    "classic-kafka4",
    "kip848",
    "aa-next",
    "zz-next",
]
PATH_SUMMARY = [
    run_row("rolling-bounce", variant, **dict(zip(STEP_FIGURES, figures, strict=True)))
    for variant, figures in PATH_FIGURES.items()
] + [
    # A later scenario's variants take their place on the path in the table of variants too.
    run_row("member-migration", "member-by-member", rebalances=20),
    run_row("member-migration", "whole-group", rebalances=1),
    run_row("kill", "cooperative", rebalances=1),
    run_row("kill", "eager", rebalances=3),  # did not finish
    run_row("kill", "legacy", rebalances=5),
    run_row("coordinator-failover", "eager"),
]
PATH_STEPS = [
    {"scenario": "rolling-bounce", "variant": variant, "step": step, "name": f"bounce m0{step}"}
    | {"start_ms": 10_000 * step, "end_ms": 10_000 * step + 5_000, "assignments": 2, "time_to_stable_ms": 100}
    for variant in PATH_FIGURES
    for step in (2, 1)
]
PATH_INCOMPLETE = {("kill", "eager"): "interrupted (SIGINT)"}
PATH_SCENARIOS = ["rolling-bounce", "kill", "coordinator-failover", "member-migration"]  # docs/compare.md's order


@pytest.fixture(scope="module")
def path_page() -> Element:
    ownership = [interval(row["scenario"], row["variant"], 0, "m00#1", 1_000, 20_000) for row in PATH_SUMMARY]
    return parse(render_report(PATH_SUMMARY, [], PATH_STEPS, ownership, [], PATH_INCOMPLETE))


def cells(section: Element) -> list[list[str]]:
    return [[td.content() for td in tr.all("td")] for tr in section.all("tr")[1:]]


def test_the_path_runs_from_legacy_through_every_variant_to_kip848():
    assert MIGRATION_PATH[0] == "legacy" and MIGRATION_PATH[-3:] == ("classic-kafka4", "kip848", "kip848-static")
    assert len(set(MIGRATION_PATH)) == len(MIGRATION_PATH)
    assert set(VARIANTS) <= set(MIGRATION_PATH), "a variant without its place on the path would come last"


def test_every_table_lists_the_variants_along_the_migration_path(path_page):
    variants = [row[0] for row in cells(path_page.all("section", "runs")[0])]
    assert variants == ROLLING_PATH[:4] + ["whole-group", "member-by-member", *ROLLING_PATH[4:]]
    for kind in ("rebalancing", "load"):
        rows = [row[:2] for row in cells(path_page.all("section", kind)[0])]
        assert [variant.split(" (")[0] for scenario, variant in rows if scenario == "rolling-bounce"] == ROLLING_PATH
        assert list(dict.fromkeys(scenario for scenario, _ in rows)) == PATH_SCENARIOS
    ratios = [row[:2] for row in cells(path_page.all("section", "ratios")[0])]
    assert [compared for scenario, compared in ratios if scenario == "rolling-bounce"] == [
        f"legacy ÷ {variant}" for variant in ROLLING_PATH[1:]
    ]
    steps = [(row[0], row[1]) for row in cells(path_page.all("section", "steps")[0])]  # rolling-bounce's
    assert steps == [(variant, step) for variant in ROLLING_PATH for step in ("1", "2")]


def step_figures(clauses: str) -> dict[str, tuple[str, ...]]:
    """``cut A from x to y and B from …, raised …, and left C at z`` → {name: (verb, x, y) or ("left", z)}."""
    number = r"([\d,]*\d(?:\.\d+)?)(?:\s?ms)?"
    verbs = [(match.start(), match.group(1)) for match in re.finditer(r"\b(cut|raised|left)\b", clauses)]
    found = {}
    for name, _ in STEP_FIGURES.values():
        matches = list(re.finditer(rf"{re.escape(name)} (?:from {number} to {number}|at {number})", clauses))
        assert len(matches) <= 1, name
        if matches:
            verb = [verb for start, verb in verbs if start < matches[0].start()][-1]
            values = matches[0].groups()
            found[name] = ("left", values[2]) if verb == "left" else (verb, values[0], values[1])
    return found


def test_a_paragraph_per_scenario_tells_each_step_with_the_figures_of_the_tables(path_page):
    paragraphs = path_page.all("section", "path")[0].all("p", "path")
    scenarios = [paragraph.all("strong")[0].content() for paragraph in paragraphs]
    assert scenarios == PATH_SCENARIOS
    rolling = paragraphs[0].content().removeprefix("rolling-bounce: ")
    sentences = rolling.split("\n")  # a line per step
    table = {}  # variant: {header: cell} of rolling-bounce in both run tables
    for kind in ("rebalancing", "load"):
        section = path_page.all("section", kind)[0]
        headers = [th.all("#text")[0].text for th in section.all("th")]
        for row in cells(section):
            if row[0] == "rolling-bounce":
                table.setdefault(row[1].split(" (")[0], {}).update(zip(headers, row, strict=True))
    steps = []
    for index, sentence in enumerate(sentences):
        start = "Moving from" if index == 0 else "From"
        before, after, clauses = re.fullmatch(rf"{start} (\S+) to (\S+) (.*)\.", sentence).groups()
        steps.append((before, after))
        told = step_figures(clauses)
        for metric, (name, _) in STEP_FIGURES.items():
            written = [table[variant][HEADERS[metric]] for variant in (before, after)]
            if "" in written:  # a figure one of them lacks is not told
                assert name not in told, (before, after, name)
                continue
            old, new = (PATH_FIGURES[variant][list(STEP_FIGURES).index(metric)] for variant in (before, after))
            expected = ("left", written[0]) if old == new else ("cut" if new < old else "raised", *written)
            assert told[name] == expected, (before, after, name)
    assert steps == list(pairwise(ROLLING_PATH))
    assert "rebalances from 8 to 4" in sentences[0]
    assert "the longest member pause from 1,282\u00a0ms to 640\u00a0ms" in sentences[0]  # no break before a unit
    kill, failover, migration = (paragraph.content() for paragraph in paragraphs[1:])
    assert kill.startswith("kill: Moving from legacy to cooperative cut rebalances from 5 to 1")
    assert kill.endswith("\nLeft out: eager, which did not finish.")
    assert failover == "coordinator-failover: Only eager finished, so there is no step to describe."
    assert migration.startswith("member-migration: Moving from whole-group to member-by-member raised rebalances")


def test_the_terminal_lists_the_runs_and_ratios_along_the_path_too():
    summary = [row for row in PATH_SUMMARY if row["scenario"] == "rolling-bounce"]
    lines = terminal_table(summary).splitlines()
    runs = [line.split()[1] for line in lines[1 : 1 + len(summary)]]
    assert runs == ROLLING_PATH
    ratios = [line.split()[3] for line in lines if line.startswith("rolling-bounce") and " / " in line]
    assert ratios == ROLLING_PATH[1:]
