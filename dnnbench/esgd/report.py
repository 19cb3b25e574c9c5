"""Formatting for humans, in one place: percentages, bytes (by 1024), seconds, Markdown tables."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from dnnbench.units import KIB, MIB


def percent(fraction: float | None, digits: int = 1) -> str:
    return "–" if fraction is None else f"{100 * fraction:.{digits}f} %"


def size_bytes(n_bytes: float | None) -> str:
    """Bytes with binary prefixes (KiB, MiB)."""
    if n_bytes is None:
        return "–"
    if n_bytes >= MIB:
        return f"{n_bytes / MIB:.2f} MiB"
    if n_bytes >= KIB:
        return f"{n_bytes / KIB:.1f} KiB"
    return f"{n_bytes:.0f} B"


def seconds(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "not reached"
    return f"{value:.1f} s" if value >= 1 else f"{1e3 * value:.0f} ms"


def drop(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:g} %"


def markdown_table(rows: Sequence[dict[str, Any]], columns: Sequence[tuple[str, str, Callable[[Any], str]]]) -> str:
    """A Markdown table: ``columns`` are (header, key, formatter); a key may be dotted ("esgd.accuracy")."""
    def get(row: dict[str, Any], key: str) -> Any:
        value: Any = row
        for part in key.split("."):
            value = None if value is None else value.get(part)
        return value

    lines = ["| " + " | ".join(h for h, _, _ in columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        lines.append("| " + " | ".join(fmt(get(row, key)).replace("|", "\\|") for _, key, fmt in columns) + " |")
    return "\n".join(lines)


__all__ = ["drop", "markdown_table", "percent", "seconds", "size_bytes"]
