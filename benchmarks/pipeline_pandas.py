"""The rebalance report's summary in one process with pandas: the baseline of benchmarks/pipeline.py.

A second implementation of the summary of ``zkcoord pipeline rebalance-report`` (docs/compare.md, "The report's
metrics"), written from the docs and independent of zkcoord.pipeline (it imports nothing of zkcoord). It reads
``DIR/traces/**/*.jsonl`` one file at a time:

* every line's scalar fields with pyarrow's JSON reader (``pyarrow.json.read_json``, C++ and its own thread pool,
  an explicit schema, unknown fields ignored; a file it cannot parse is read line by line with ``json.loads``,
  skipping bad lines);
* the lines with nested fields the metrics need (``compare.assignment``'s partitions; ``compare.topic``, whose
  ``partitions`` is a number where ``compare.run``'s is a map) found by a byte search and read with ``json.loads``.

Only lines of schema ``zkcoord.trace/1`` and type ``compare.*`` count. Then vectorized pandas/numpy: a sweep over
the sorted starts and ends of the processed ranges of each partition for duplicated and missed records, sorts and
shifts for pauses, acquisitions, moves and ownership, ``merge_asof`` for the steps. Prints its stage times and
writes the summary rows as JSON.

    python benchmarks/pipeline_pandas.py --in DIR --out SUMMARY.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

SCHEMA = "zkcoord.trace/1"
STRING_FIELDS = ("schema", "type", "scenario", "variant", "instance", "member", "topic", "phase", "event", "name")
INT_FIELDS = (
    "time_ms",
    "partition",
    "first_offset",
    "last_offset",
    "end_offset",
    "step",
    "generation",
    "zk_reads",
    "zk_writes",
    "coordinator_requests",
)
SCALARS = pa.schema([(name, pa.string()) for name in STRING_FIELDS] + [(name, pa.int64()) for name in INT_FIELDS])
PROCESSED_COLUMNS = ("scenario", "variant", "instance", "member", "topic", "partition", "first_offset", "last_offset")
NESTED_TYPES = (b"compare.assignment", b"compare.topic")
POSITION_BITS = 40  # a sweep key is (partition key << 40) | offset


def nested_lines(data: bytes, needle: bytes) -> list[bytes]:
    """The lines of ``data`` that contain ``needle``."""
    lines, at = [], data.find(needle)
    while at >= 0:
        start = data.rfind(b"\n", 0, at) + 1
        end = data.find(b"\n", at)
        end = len(data) if end < 0 else end
        lines.append(data[start:end])
        at = data.find(needle, end)
    return lines


def loads_lines(lines: list[bytes]) -> list[dict]:
    events = []
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and event.get("schema") == SCHEMA:
            events.append(event)
    return events


def read_file(path: Path) -> tuple[pa.Table, list[dict]]:
    """(scalar fields of the compare.* lines, the nested-field events) of one JSON-lines file."""
    data = path.read_bytes()
    try:
        table = pj.read_json(
            pa.BufferReader(data),
            parse_options=pj.ParseOptions(explicit_schema=SCALARS, unexpected_field_behavior="ignore"),
        )
    except (pa.ArrowInvalid, pa.ArrowTypeError):  # a bad line: read this file line by line
        events = [e for e in loads_lines(data.splitlines()) if str(e.get("type", "")).startswith("compare.")]
        rows = {}
        for name, kind in zip(SCALARS.names, SCALARS.types, strict=True):
            wanted = str if kind == pa.string() else int
            rows[name] = [e.get(name) if isinstance(e.get(name), wanted) else None for e in events]
        table = pa.table(rows, schema=SCALARS)
    keep = pc.and_(pc.equal(table["schema"], SCHEMA), pc.starts_with(table["type"], "compare."))
    table = table.filter(pc.fill_null(keep, False))
    nested = []
    for needle in NESTED_TYPES:
        if needle in data:
            kind = needle.decode()
            nested.extend(e for e in loads_lines(nested_lines(data, needle)) if e.get("type") == kind)
    return table, nested


def encode(table: pa.Table) -> pa.Table:
    """Strings as dictionaries: 10M rows of a few distinct names."""
    columns = zip(table.column_names, table.columns, strict=True)
    return pa.table({name: pc.dictionary_encode(c) if c.type == pa.string() else c for name, c in columns})


def read_traces(root: Path) -> tuple[pd.DataFrame, pd.DataFrame, list[dict], int]:
    """(processed ranges, other compare.* events, nested events, files read)."""
    processed, others, nested = [], [], []
    files = sorted(p for p in (root / "traces").rglob("*.jsonl") if p.is_file())
    for path in files:
        table, file_nested = read_file(path)
        is_processed = pc.equal(table["type"], "compare.processed")
        processed.append(encode(table.filter(is_processed).select([*PROCESSED_COLUMNS, "time_ms"])))
        others.append(table.filter(pc.invert(is_processed)))
        nested.extend(file_nested)
    if not files:
        raise SystemExit(f"no JSON-lines files under {root / 'traces'}")
    processed_frame = pa.concat_tables(processed).unify_dictionaries().to_pandas()
    others_frame = pa.concat_tables(others).to_pandas()
    return processed_frame, others_frame, nested, len(files)


# ---- the metrics --------------------------------------------------------------------------------------------


class Runs:
    """The measured scenario runs: those with a ``measure`` phase; W = [measure, end] (or the last event)."""

    def __init__(self, others: pd.DataFrame):
        phases = others[others["type"] == "compare.phase"]
        measure = phases[phases["phase"] == "measure"].groupby(["scenario", "variant"])["time_ms"].min()
        end = phases[phases["phase"] == "end"].groupby(["scenario", "variant"])["time_ms"].max()
        last = others.groupby(["scenario", "variant"])["time_ms"].max()
        drain = phases[phases["phase"] == "drain"].groupby(["scenario", "variant"])["time_ms"].min()
        self.keys = list(measure.index)
        self.index = {key: number for number, key in enumerate(self.keys)}
        self.w0 = measure.to_numpy(np.int64)
        self.w1 = np.array([end.get(k, last.get(k)) for k in self.keys], dtype=np.int64)
        self.drain = np.array([drain.get(k, self.w1[i]) for i, k in enumerate(self.keys)], dtype=np.int64)

    def of(self, scenario: pd.Series, variant: pd.Series) -> np.ndarray:
        """Each row's run number, -1 for rows of unmeasured runs."""
        if isinstance(scenario.dtype, pd.CategoricalDtype):
            s_cats, v_cats = scenario.cat.categories, variant.cat.categories
            table = np.full((len(s_cats) + 1, len(v_cats) + 1), -1, dtype=np.int64)
            for i, s in enumerate(s_cats):
                for j, v in enumerate(v_cats):
                    table[i, j] = self.index.get((s, v), -1)
            return table[scenario.cat.codes.to_numpy(), variant.cat.codes.to_numpy()]
        return np.array([self.index.get(k, -1) for k in zip(scenario, variant, strict=True)], dtype=np.int64)

    def in_window(self, run: np.ndarray, time_ms: np.ndarray) -> np.ndarray:
        return (time_ms >= self.w0[run]) & (time_ms <= self.w1[run])


def sweep(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Ranges [start, end) as sweep keys -> (from, to, coverage) of the segments between consecutive breakpoints.
    Each partition's coverage is back to 0 after its last breakpoint, so no segment spans two partitions."""
    keys = np.concatenate([starts, ends])
    deltas = np.concatenate([np.ones(len(starts), np.int32), np.full(len(ends), -1, np.int32)])
    order = np.argsort(keys, kind="stable")
    keys = keys[order]
    coverage = np.cumsum(deltas[order])
    return keys[:-1], keys[1:], coverage[:-1]


def record_coverage(first, last, before_w, pkey: np.ndarray, produced: pd.DataFrame, n_keys: int):
    """Per partition key: (offsets covered at least twice minus those covered twice by ranges processed before W,
    offsets below the produced end_offset that no range covers)."""
    base = pkey.astype(np.int64) << POSITION_BITS
    starts, ends = base + first, base + last + 1
    mask = (1 << POSITION_BITS) - 1

    def covered_twice(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        start, stop, cover = sweep(starts, ends)
        hit = cover >= 2
        owner = start[hit] >> POSITION_BITS
        return np.bincount(owner, weights=(stop[hit] - start[hit]).astype(np.float64), minlength=n_keys)

    duplicated = covered_twice(starts, ends) - covered_twice(starts[before_w], ends[before_w])
    start, stop, cover = sweep(starts, ends)
    hit = cover >= 1
    owner = start[hit] >> POSITION_BITS
    end_offsets = np.zeros(n_keys, np.int64)
    end_offsets[produced["pkey"].to_numpy()] = produced["end_offset"].to_numpy(np.int64)
    low, high = start[hit] & mask, np.minimum(stop[hit] & mask, end_offsets[owner])
    covered = np.bincount(owner, weights=np.maximum(0, high - low).astype(np.float64), minlength=n_keys)
    missed = np.zeros(n_keys, np.int64)
    keys = produced["pkey"].to_numpy()
    missed[keys] = end_offsets[keys] - np.rint(covered[keys]).astype(np.int64)
    return np.rint(duplicated).astype(np.int64), missed


def records(runs: Runs, processed: pd.DataFrame, run: np.ndarray, others: pd.DataFrame):
    """(records_processed, records_duplicated, records_missed) per run."""
    n_runs = len(runs.keys)
    first = processed["first_offset"].to_numpy(np.int64)
    last = processed["last_offset"].to_numpy(np.int64)
    processed_records = np.bincount(run, weights=last - first + 1, minlength=n_runs).astype(np.int64)
    # one sweep key per (run, topic, partition), shared by compare.processed and compare.produced
    produced = others[others["type"] == "compare.produced"]
    topic_names = list(processed["topic"].cat.categories)
    topic_names += sorted(set(produced["topic"].dropna()) - set(topic_names))
    topic_code = {name: code for code, name in enumerate(topic_names)}
    span = int(max(processed["partition"].max(), produced["partition"].max(), 0)) + 1
    n_topics = len(topic_names)
    processed_topic = processed["topic"].cat.codes.to_numpy().astype(np.int64)
    processed_key = (run * n_topics + processed_topic) * span + processed["partition"].to_numpy(np.int64)
    produced_topic = produced["topic"].map(topic_code).to_numpy(np.int64)
    produced_key = (produced["run"].to_numpy() * n_topics + produced_topic) * span + produced["partition"].to_numpy(
        np.int64
    )
    pkey, uniques = pd.factorize(np.concatenate([processed_key, produced_key]))
    produced = pd.DataFrame({"pkey": pkey[len(run) :], "end_offset": produced["end_offset"].to_numpy(np.int64)})
    produced = produced.groupby("pkey", as_index=False)["end_offset"].max()
    before_w = processed["time_ms"].to_numpy(np.int64) < runs.w0[run]
    duplicated, missed = record_coverage(first, last, before_w, pkey[: len(run)], produced, len(uniques))
    key_run = uniques // span // n_topics
    per_run = [np.bincount(key_run, weights=v, minlength=n_runs).astype(np.int64) for v in (duplicated, missed)]
    return processed_records, *per_run


def pauses(runs: Runs, processed: pd.DataFrame, run: np.ndarray) -> tuple[pd.Series, pd.Series]:
    """(pause_max_ms, pause_p50_ms) per run: each member's longest gap between consecutive processed events of
    one of its instances, both in W; the largest and the median over members."""
    time_ms = processed["time_ms"].to_numpy(np.int64)
    in_w = runs.in_window(run, time_ms)
    instance = processed["instance"].cat.codes.to_numpy()[in_w].astype(np.int64)
    member = processed["member"].cat.codes.to_numpy()[in_w].astype(np.int64)
    w_run, w_time = run[in_w], time_ms[in_w]
    order = np.lexsort((w_time, instance, w_run))
    w_run, instance, member, w_time = w_run[order], instance[order], member[order], w_time[order]
    same = (w_run[1:] == w_run[:-1]) & (instance[1:] == instance[:-1])
    gaps = pd.DataFrame({"run": w_run[1:][same], "member": member[1:][same], "gap": np.diff(w_time)[same]})
    longest = gaps.groupby(["run", "member"])["gap"].max()
    return longest.groupby(level=0).max(), longest.groupby(level=0).median()


def nested_frame(nested: list[dict], event_type: str, fields: dict) -> pd.DataFrame:
    rows = [
        {"scenario": e.get("scenario"), "variant": e.get("variant"), "time_ms": e.get("time_ms"), "order": number}
        | {column: read(e) for column, read in fields.items()}
        for number, e in enumerate(nested)
        if e.get("type") == event_type
    ]
    return pd.DataFrame(rows, columns=["scenario", "variant", "time_ms", "order", *fields])


def ownership(runs: Runs, others: pd.DataFrame, nested: list[dict]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(acquisitions, ownership intervals). An acquisition is a partition in an instance's compare.assignment
    that its previous one did not hold; the interval lasts until the assignment that drops it, the instance's
    kill or the end of W."""
    fields = {
        "instance": lambda e: e.get("instance"),
        "member": lambda e: e.get("member"),
        "partitions": lambda e: [(topic, int(p)) for topic, p in e.get("partitions") or []],
    }
    assignments = nested_frame(nested, "compare.assignment", fields)
    assignments["run"] = runs.of(assignments["scenario"], assignments["variant"])
    assignments = assignments[assignments["run"] >= 0].sort_values(["run", "instance", "time_ms", "order"])
    assignments["k"] = assignments.groupby(["run", "instance"]).cumcount()  # the instance's k-th assignment
    held = assignments.explode("partitions").dropna(subset=["partitions"]).rename(columns={"partitions": "tp"})
    held = held[["run", "instance", "member", "k", "time_ms", "tp"]]
    key = ["run", "instance", "k", "tp"]

    def absent_from(shift: int) -> pd.DataFrame:
        """Rows of assignment k whose partition is not in assignment k + shift of the same instance."""
        other = held.assign(k=held["k"] - shift)[key]
        marked = held.merge(other, on=key, how="left", indicator=True)
        return marked[marked["_merge"] == "left_only"].drop(columns="_merge")

    acquired = absent_from(-1)
    next_times = assignments[["run", "instance", "k", "time_ms"]].rename(columns={"time_ms": "dropped_ms"})
    dropped = absent_from(1)
    dropped = dropped.assign(k=dropped["k"] + 1).merge(next_times, on=["run", "instance", "k"])
    columns = ["run", "instance", "member", "tp", "time_ms", "kind"]
    changes = pd.concat(
        [acquired.assign(kind=1)[columns], dropped.assign(kind=-1, time_ms=dropped["dropped_ms"])[columns]],
        ignore_index=True,
    ).sort_values(["run", "instance", "tp", "time_ms", "kind"])
    follows = changes.groupby(["run", "instance", "tp"])["time_ms"].shift(-1)  # an acquisition's drop
    intervals = changes[changes["kind"] == 1].assign(end_ms=follows[changes["kind"] == 1])
    kills = others[(others["type"] == "compare.member") & (others["event"] == "killed")]
    killed = kills.groupby(["run", "instance"])["time_ms"].min().rename("killed_ms").reset_index()
    intervals = intervals.merge(killed, on=["run", "instance"], how="left")
    end_ms = np.fmin(intervals["end_ms"].to_numpy(np.float64), intervals["killed_ms"].to_numpy(np.float64))
    intervals = intervals.assign(end_ms=np.fmin(end_ms, runs.w1[intervals["run"].to_numpy()]))
    return acquired, intervals[intervals["end_ms"] > intervals["time_ms"]]


def unowned(runs: Runs, intervals: pd.DataFrame, nested: list[dict]) -> pd.Series:
    """Seconds of W, from each partition's compare.topic event (or the start of W), that no instance owns it,
    summed over partitions."""
    fields = {"topic": lambda e: e.get("topic"), "count": lambda e: e.get("partitions")}
    topics = nested_frame(nested, "compare.topic", fields)
    topics = topics[topics["count"].map(lambda count: isinstance(count, int))]
    topics = topics.assign(run=runs.of(topics["scenario"], topics["variant"]))
    topics = topics[topics["run"] >= 0]
    exist = topics.assign(partition=topics["count"].map(range)).explode("partition").dropna(subset=["partition"])
    exist = exist.assign(tp=list(zip(exist["topic"], exist["partition"].astype(int), strict=True)))
    exist = exist.groupby(["run", "tp"], as_index=False)["time_ms"].min()
    exist["lo"] = np.maximum(exist["time_ms"].to_numpy(), runs.w0[exist["run"].to_numpy()])
    exist["hi"] = runs.w1[exist["run"].to_numpy()]
    exist = exist[exist["hi"] > exist["lo"]]
    spans = intervals.merge(exist[["run", "tp", "lo", "hi"]], on=["run", "tp"])
    spans = spans.assign(a=np.maximum(spans["time_ms"], spans["lo"]), b=np.minimum(spans["end_ms"], spans["hi"]))
    spans = spans[spans["b"] > spans["a"]].sort_values(["run", "tp", "a"])
    # the union of a partition's intervals: each adds what reaches beyond the earlier ones
    reach = spans.groupby(["run", "tp"])["b"].cummax().groupby([spans["run"], spans["tp"]]).shift(1)
    spans["adds"] = (spans["b"] - np.maximum(spans["a"], reach.fillna(-np.inf))).clip(lower=0)
    exist = exist.set_index(["run", "tp"])
    exist["covered"] = spans.groupby(["run", "tp"])["adds"].sum().reindex(exist.index, fill_value=0)
    unowned_ms = (exist["hi"] - exist["lo"] - exist["covered"]).groupby(level=0).sum()
    return (unowned_ms / 1000).reindex(range(len(runs.keys)), fill_value=0.0)


def moves(runs: Runs, acquired: pd.DataFrame) -> pd.Series:
    """Acquisitions in W by a member other than the one of the partition's previous acquisition."""
    acquired = acquired.sort_values(["run", "tp", "time_ms"], kind="stable")
    previous = acquired.groupby(["run", "tp"])["member"].shift(1)
    in_w = runs.in_window(acquired["run"].to_numpy(), acquired["time_ms"].to_numpy())
    moved = in_w & previous.notna().to_numpy() & (acquired["member"] != previous).to_numpy()
    return pd.Series(moved).groupby(acquired["run"].to_numpy()).sum().reindex(range(len(runs.keys)), fill_value=0)


def rebalances(runs: Runs, others: pd.DataFrame) -> np.ndarray:
    """Coordinator variants: distinct generations in W above the highest before W; legacy: the most
    compare.rebalance events in W of one member."""
    counts = np.zeros(len(runs.keys), dtype=np.int64)
    events = others[others["type"] == "compare.rebalance"]
    in_w = runs.in_window(events["run"].to_numpy(), events["time_ms"].to_numpy())
    legacy = events["variant"].to_numpy() == "legacy"
    per_member = events[in_w & legacy].groupby(["run", "member"]).size().groupby(level=0).max()
    counts[per_member.index.to_numpy()] = per_member.to_numpy()
    coordinated = events[~legacy]
    run = coordinated["run"].to_numpy()
    before_w = coordinated["time_ms"].to_numpy() < runs.w0[run]
    highest = coordinated[before_w].groupby("run")["generation"].max().reindex(range(len(runs.keys))).fillna(0)
    new = in_w[~legacy] & (coordinated["generation"].to_numpy(np.float64) > highest.to_numpy()[run])
    generations = coordinated[new].groupby("run")["generation"].nunique()
    counts[generations.index.to_numpy()] = generations.to_numpy()
    return counts


def settling(runs: Runs, others: pd.DataFrame, nested: list[dict]) -> pd.Series:
    """time_to_stable_ms per run: per step (until the next step or drain), its last compare.assignment minus its
    start (0 without one); the largest over the steps."""
    steps = others[others["type"] == "compare.step"][["run", "time_ms"]].sort_values(["run", "time_ms"])
    next_start = steps.groupby("run")["time_ms"].shift(-1)
    drain = pd.Series(runs.drain[steps["run"].to_numpy()], index=steps.index)
    steps = steps.assign(end_ms=next_start.fillna(drain)).rename(columns={"time_ms": "start_ms"})
    stamps = nested_frame(nested, "compare.assignment", {})
    stamps = stamps.assign(run=runs.of(stamps["scenario"], stamps["variant"]))[["run", "time_ms"]]
    located = pd.merge_asof(
        stamps[stamps["run"] >= 0].sort_values("time_ms"),
        steps.sort_values("start_ms"),
        left_on="time_ms",
        right_on="start_ms",
        by="run",
        direction="backward",
    )
    located = located[located["time_ms"] < located["end_ms"]]
    per_step = located.groupby(["run", "start_ms"])["time_ms"].max().reset_index(level=1)
    settle = (per_step["time_ms"] - per_step["start_ms"]).groupby(level=0).max()
    return settle.reindex(range(len(runs.keys)), fill_value=0)


def summarize(processed: pd.DataFrame, others: pd.DataFrame, nested: list[dict]) -> list[dict]:
    runs = Runs(others)
    others = others.assign(run=runs.of(others["scenario"], others["variant"]))
    others = others[others["run"] >= 0]
    run = runs.of(processed["scenario"], processed["variant"])
    if not (run >= 0).all():
        processed, run = processed[run >= 0], run[run >= 0]
    processed_records, duplicated, missed = records(runs, processed, run, others)
    pause_max, pause_p50 = pauses(runs, processed, run)
    acquired, intervals = ownership(runs, others, nested)
    unowned_s = unowned(runs, intervals, nested)
    moved = moves(runs, acquired)
    rebalance_counts = rebalances(runs, others)
    time_to_stable = settling(runs, others, nested)
    counters = others[others["type"] == "compare.counters"].sort_values("time_ms", kind="stable")
    counters = counters.drop_duplicates("run", keep="last").set_index("run")

    def counter(number: int, name: str) -> int | None:
        value = counters[name].get(number) if number in counters.index else None
        return None if value is None or pd.isna(value) else int(value)

    rows = []
    for number, (scenario, variant) in enumerate(runs.keys):
        rows.append(
            {
                "scenario": scenario,
                "variant": variant,
                "rebalances": int(rebalance_counts[number]),
                "time_to_stable_ms": int(time_to_stable[number]),
                "partitions_moved": int(moved[number]),
                "unowned_partition_s": float(unowned_s[number]),
                "pause_max_ms": int(pause_max[number]) if number in pause_max.index else None,
                "pause_p50_ms": float(pause_p50[number]) if number in pause_p50.index else None,
                "records_processed": int(processed_records[number]),
                "records_duplicated": int(duplicated[number]),
                "records_missed": int(missed[number]),
                "zk_reads": counter(number, "zk_reads"),
                "zk_writes": counter(number, "zk_writes"),
                "coordinator_requests": counter(number, "coordinator_requests"),
                "window_ms": int(runs.w1[number] - runs.w0[number]),
                "window_start_ms": int(runs.w0[number]),
            }
        )
    return sorted(rows, key=lambda row: (row["scenario"], row["variant"]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--in", dest="in_dir", required=True, help="the run directory (holds traces/)")
    parser.add_argument("--out", required=True, help="where to write the summary rows (JSON)")
    args = parser.parse_args()
    started = time.monotonic()
    processed, others, nested, files = read_traces(Path(args.in_dir))
    read_at = time.monotonic()
    events = len(processed) + len(others)
    print(
        f"read {events:,} compare.* events ({len(processed):,} processed) of {files} files in "
        f"{read_at - started:.1f} s",
        flush=True,
    )
    rows = summarize(processed, others, nested)
    done = time.monotonic()
    print(f"metrics of {len(rows)} runs in {done - read_at:.1f} s; total {done - started:.1f} s", flush=True)
    Path(args.out).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
