"""The rebalance report's words: human column headers, what each section shows and how to read it, and which way
each old ÷ new ratio is better.

Pure: no IO; must not import pyspark, matplotlib, gevent, kazoo, the runtime or the server.
"""

from zkcoord.compare.scenarios import VARIANTS, baseline

# Every column a table of the report shows, by its name in the parquet tables (docs/compare.md).
HEADERS = {
    "scenario": "Scenario",
    "variant": "Variant",
    "compared": "Compared (old ÷ new)",
    "rebalances": "Rebalances",
    "time_to_stable_ms": "Slowest step to stable (ms)",
    "partitions_moved": "Partitions moved",
    "unowned_partition_s": "Unowned partition-seconds",
    "pause_max_ms": "Longest member pause (ms)",
    "pause_p50_ms": "Median of members' longest pauses (ms)",
    "records_processed_in_window": "Records processed",
    "records_duplicated": "Records processed twice",
    "records_missed": "Records never processed",
    "zk_reads": "ZooKeeper reads",
    "zk_writes": "ZooKeeper writes",
    "coordinator_requests": "Coordinator requests",
    "window_s": "Window (s)",
    "records_processed_in_window_per_s": "Records processed per s",
    "zk_reads_per_s": "ZooKeeper reads per s",
    "zk_writes_per_s": "ZooKeeper writes per s",
    "coordinator_requests_per_s": "Coordinator requests per s",
    "step": "Step",
    "name": "What the step did",
    "start_s": "Began (s in the window)",
    "length_s": "Lasted (s)",
    "assignments": "Assignment changes",
    "step_time_to_stable_ms": "Time to stable (ms)",
}

REBALANCE_COLUMNS = (
    "rebalances",
    "time_to_stable_ms",
    "partitions_moved",
    "unowned_partition_s",
    "pause_max_ms",
    "pause_p50_ms",
)
LOAD_COLUMNS = (
    "window_s",
    "records_processed_in_window",
    "records_processed_in_window_per_s",
    "records_duplicated",
    "records_missed",
    "zk_reads",
    "zk_reads_per_s",
    "zk_writes",
    "zk_writes_per_s",
    "coordinator_requests",
    "coordinator_requests_per_s",
)
# The ratios the page shows: a scenario's actions are the same under every variant, so what they cause is
# compared per run; ZooKeeper's load per second, since the windows differ in length.
RATIO_COLUMNS = (
    *REBALANCE_COLUMNS,
    "records_duplicated",
    "zk_reads_per_s",
    "zk_writes_per_s",
)
RATIO_DIRECTION = "old ÷ new, higher is better for new"

OLD_AND_NEW = (
    "<p><strong>Old</strong> is Kafka 0.8.2's rebalance through ZooKeeper: every member of the group watches "
    "ZooKeeper and reassigns all partitions itself whenever a member or a partition comes or goes (variant "
    "<code>legacy</code>). <strong>New</strong> is the group coordinator: one broker-side coordinator assigns "
    "the partitions and the members heartbeat to it (every other variant; in <code>member-migration</code>, the "
    "old is the whole group stopped and moved at once, the new the members moved one at a time). Every metric "
    "but <em>records processed</em> counts something that hurts: lower values are better. Each ratio is "
    f"<strong>{RATIO_DIRECTION}</strong>: 2.00 means the new rebalance had half as much of it, "
    "<code>inf</code> that only the new one had none, a blank that neither had any.</p>"
)

SECTIONS = {
    "runs": (
        "Which rebalance each variant runs, in the order a team would move through them: the legacy ZooKeeper "
        "group, zkcoord's coordinator (eager, cooperative, static; its own client, then librdkafka), the mixed "
        "group of a member-by-member migration, Kafka's classic protocol, KIP-848's consumer protocol. Every "
        "table and plot below lists them in this order. A run's window opens when its group has settled after the "
        "warm-up and closes when every record has been processed. Every metric below is counted within the window, "
        "except <em>records never processed</em>, which checks every record the run produced."
    ),
    "rebalancing": (
        "What the scenario's steps cost each variant, counted within the window (every step falls in it): the same "
        "steps ran under every variant, so these compare directly. Lower is better in every column. Read down a "
        "scenario's rows, one step of the migration path after another: the old rebalance is the first row."
    ),
    "load": (
        "Work done and the load put on ZooKeeper and the coordinator. These counts grow with the window, and the "
        "windows differ in length, so compare the per-second columns, not the totals. <em>Records never "
        "processed</em> must be 0."
    ),
    "ratios": (
        "The old run's value divided by the new run's, per scenario: "
        f"<strong>{RATIO_DIRECTION}</strong> (above 1.00 the new rebalance did better, below it worse). "
        "ZooKeeper load is compared per second of window. Coordinator requests have no ratio: the old rebalance "
        "has no coordinator (the new one does that work instead of ZooKeeper; see <em>Records and load</em>)."
    ),
    "path": (
        "What changed at each step from one variant to the next, in the order above, per scenario, for the "
        "variants that ran and finished: each figure before and after the step, as the tables give it. The ratios "
        "above stay old ÷ new: a ratio of one step to the next would change its meaning with the variants a run "
        "includes (the step into kip848 comes from classic-kafka4 in one run, from cooperative in another), where "
        "the two values say what the step changed either way."
    ),
    "steps": (
        "Each step of the scenario under each variant: when it began, how long it lasted (until the next step or "
        "the drain), how many assignment changes the members reported, and the time from its start to the last "
        "of them. Shorter is better."
    ),
    "ownership": (
        "One row per partition, one colour per member; time runs left to right in seconds from when the window "
        "opened (the grey band before 0 is the end of the warm-up, the hatched band comes after a shorter run's "
        "window closed). A white gap is a partition that nobody owned: "
        "its records waited. Dashed lines are the steps; a red line and a cross mark a member killed with "
        "SIGKILL, whose partitions are drawn until the kill. Fewer and shorter gaps, and fewer colour changes, are "
        "better."
    ),
    "pauses": (
        "Each member's longest gap between two batches it processed within the window, one point per member, "
        "with the box from the first to the third quartile. Lower is better; a high box means every member "
        "stopped, a single high point that one member did."
    ),
}


def format_number(value: int | float) -> str:
    """A number as the page writes it: thousands separated, a float with two decimals (``inf`` stays ``inf``)."""
    return f"{value:,.2f}" if isinstance(value, float) else f"{value:,}"


def role(variant: str) -> str:
    """``old`` for a baseline (the legacy group, the whole-group migration), else ``new``."""
    return "old" if baseline(variant) is None else "new"


def describe_variant(variant: str) -> str:
    """What ``variant`` runs, from its definition (``variant`` itself when unknown)."""
    known = VARIANTS.get(variant)
    return known.label if known else variant
