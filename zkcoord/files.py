"""Files replaced whole or not at all."""

from pathlib import Path


def replace_text(path: Path, text: str) -> None:
    """Write ``text`` beside ``path`` and rename it over: a write cut short (Ctrl-C, a crash) leaves the previous
    file whole, never a torn one. Not fsynced: for state a rerun can rebuild, not for commits."""
    partial = path.with_name(path.name + ".tmp")
    partial.write_text(text, encoding="utf-8")
    partial.replace(path)
