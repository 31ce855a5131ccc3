"""Plain text tables as Kafka's command-line tools print them: left-aligned columns two spaces apart."""

from collections.abc import Sequence


def format_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """``header`` and ``rows`` as lines of left-aligned columns, each as wide as its widest value."""
    widths = [max(len(str(value)) for value in column) for column in zip(header, *rows, strict=False)]
    return "\n".join(
        "  ".join(str(value).ljust(width) for value, width in zip(row, widths, strict=True)).rstrip()
        for row in [header, *rows]
    )
