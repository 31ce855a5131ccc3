"""Rebalance trace events and their JSON-lines sink. Pure (files only in tmp_path)."""

import json

from zkcoord.trace import TRACE_SCHEMA, JsonLinesTraceWriter, make_event, read_trace


def test_make_event_fields():
    event = make_event("rebalance_done", 1234, "g", "g_c1", attempt=2, owned=[["t", 0]])
    assert event == {
        "schema": TRACE_SCHEMA,
        "type": "rebalance_done",
        "time_ms": 1234,
        "group": "g",
        "member": "g_c1",
        "attempt": 2,
        "owned": [["t", 0]],
    }


def test_schema_name():
    assert TRACE_SCHEMA == "zkcoord.trace/1"
    assert make_event("x", 0, "g", "m")["schema"] == "zkcoord.trace/1"


def test_events_are_independent_dicts():
    first = make_event("x", 0, "g", "m")
    first["extra"] = 1
    assert "extra" not in make_event("x", 0, "g", "m")


def test_writer_and_reader_round_trip(tmp_path):
    path = tmp_path / "trace.jsonl"
    events = [
        make_event("rebalance_start", 1, "g", "g_a", trigger="ids"),
        make_event("claim", 2, "g", "g_a", topic="t", partition=0, thread="g_a-0"),
        make_event("claim", 3, "g", "g_ä", topic="tö", partition=1, thread=None, conflict=True),
    ]
    writer = JsonLinesTraceWriter(path)
    for event in events:
        writer(event)
    writer.close()
    assert read_trace(path) == events
    assert len(path.read_text(encoding="utf-8").splitlines()) == 3


def test_each_event_is_one_compact_line(tmp_path):
    path = tmp_path / "trace.jsonl"
    writer = JsonLinesTraceWriter(path)
    writer(make_event("note", 5, "g", "m", text="two\nlines"))
    writer.close()
    (line,) = path.read_text(encoding="utf-8").splitlines()
    assert json.loads(line)["text"] == "two\nlines"
    assert ", " not in line and '": ' not in line


def test_writer_appends_to_an_existing_trace(tmp_path):
    path = tmp_path / "trace.jsonl"
    for member in ("g_a", "g_b"):
        writer = JsonLinesTraceWriter(str(path))
        writer(make_event("joined", 0, "g", member))
        writer.close()
    assert [event["member"] for event in read_trace(path)] == ["g_a", "g_b"]


def test_writer_flushes_each_event(tmp_path):
    path = tmp_path / "trace.jsonl"
    writer = JsonLinesTraceWriter(path)
    writer(make_event("joined", 0, "g", "m"))
    try:
        assert [event["type"] for event in read_trace(path)] == ["joined"]
    finally:
        writer.close()


def test_reader_skips_other_schemas_and_blank_lines(tmp_path):
    path = tmp_path / "trace.jsonl"
    kept = make_event("claim", 1, "g", "m", partition=3)
    path.write_text(
        "\n".join(
            [
                json.dumps({"schema": "zkcoord.trace/2", "type": "future"}),
                json.dumps(kept),
                "",
                "   ",
                json.dumps({"type": "no-schema"}),
                json.dumps({**kept, "time_ms": 2}),
            ]
        )
        + "\n",
        encoding="utf-8",
    )
    assert read_trace(path) == [kept, {**kept, "time_ms": 2}]


def test_reader_of_an_empty_file(tmp_path):
    path = tmp_path / "trace.jsonl"
    path.write_text("", encoding="utf-8")
    assert read_trace(path) == []
