"""Trace events of every kind of member (the schema is documented in docs/traces.md): the package's floor.

Events are plain dicts so that any sink (a list, a JSON-lines file, the comparison pipeline) can keep
them. Later issues add event types under the same ``schema``; readers ignore fields they do not know.
"""

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

TRACE_SCHEMA = "zkcoord.trace/1"

Event = dict[str, Any]
TraceSink = Callable[[Event], None]


def make_event(event_type: str, time_ms: int, group: str, member: str, **fields: Any) -> Event:
    return {
        "schema": TRACE_SCHEMA,
        "type": event_type,
        "time_ms": time_ms,
        "group": group,
        "member": member,
        **fields,
    }


class JsonLinesTraceWriter:
    """A sink that appends each event as one JSON line; safe to share between members."""

    def __init__(self, path: str | Path):
        self._file = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed by close()
        self._lock = threading.Lock()

    def __call__(self, event: Event) -> None:
        line = json.dumps(event, separators=(",", ":"), sort_keys=True)
        with self._lock:
            self._file.write(line + "\n")
            self._file.flush()

    def close(self) -> None:
        self._file.close()


def read_trace(path: str | Path) -> list[Event]:
    """Events of a JSON-lines trace, skipping lines of a schema this version does not know."""
    events = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if line.strip():
            event = json.loads(line)
            if event.get("schema") == TRACE_SCHEMA:
                events.append(event)
    return events
