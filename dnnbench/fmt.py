"""Formatting for humans, in one place: bytes by 1024 (KiB, MiB), counts and rates by 1000 (M, G),
durations, percentages and Markdown tables (the CLI, the workbench, the studies and the ESGD study).

Tests assert on numbers, never on these strings.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any


def count(n: float) -> str:
    """1234567 -> '1.23 M' (decimal prefixes: counts of weights, MACs, samples)."""
    if not math.isfinite(n):
        return str(n)
    for start, div, suffix in COUNT_UNITS:
        if abs(n) >= start:
            return f"{n / div:.3g}{suffix}"
    return f"{n:.3g}" if not float(n).is_integer() else f"{int(n)}"


def nbytes(n: float) -> str:
    """Bytes with binary prefixes: 1536 -> '1.5 KiB'."""
    if not math.isfinite(n):
        return f"{n} B"
    for power, suffix in ((40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")):
        if abs(n) >= 2**power:
            return f"{n / 2**power:.3g} {suffix}"
    return f"{int(n)} B"


#: Units of a duration a person reads: (shown below this many seconds, seconds per unit, unit). The
#: text formatter (:func:`seconds`) and the plots' tick formatter (dnnbench.face.plots) share it.
DURATION_UNITS: tuple[tuple[float, float, str], ...] = (
    (1e-3, 1e-6, "µs"), (1.0, 1e-3, "ms"), (120.0, 1.0, "s"), (7200.0, 60.0, "min"), (172800.0, 3600.0, "h"),
    (math.inf, 86400.0, "days"),
)
#: Decimal prefixes of counts (machines, samples, MACs): (from this value on, divisor, suffix).
COUNT_UNITS: tuple[tuple[float, float, str], ...] = ((1e12, 1e12, " T"), (1e9, 1e9, " G"), (1e6, 1e6, " M"),
                                                     (1e3, 1e3, " k"))


def duration_unit(s: float) -> tuple[float, str]:
    """(seconds per unit, unit) that a duration of ``s`` seconds reads best in (:data:`DURATION_UNITS`)."""
    a = abs(s)
    for below, per, unit in DURATION_UNITS:
        if a < below:
            return per, unit
    return DURATION_UNITS[-1][1], DURATION_UNITS[-1][2]


def seconds(s: float) -> str:
    """A duration in the unit that reads best: '12.3 ms', '4.5 s', '2.1 h', '3.2 days'."""
    if not math.isfinite(s):
        return "inf"
    per, unit = duration_unit(s)
    return f"{s / per:.3g} {unit}"


def rate_bits(bps: float) -> str:
    for div, suffix in ((1e9, "Gbit/s"), (1e6, "Mbit/s"), (1e3, "kbit/s")):
        if bps >= div:
            return f"{bps / div:.3g} {suffix}"
    return f"{bps:.3g} bit/s"


def percent(fraction: float | None, digits: int = 1) -> str:
    """0.123 -> '12.3 %'; None -> '–'."""
    return "–" if fraction is None else f"{100 * fraction:.{digits}f} %"


def percent_short(fraction: float | None) -> str:
    """A fraction as a short percentage: 0.9 -> '90 %', 0.999 -> '99.9 %'; None -> '–'."""
    return "–" if fraction is None else f"{100 * fraction:g} %"


def nbytes_or_dash(n: float | None) -> str:
    """:func:`nbytes`, or '–' for None."""
    return "–" if n is None else nbytes(n)


def time_to(value: float | None) -> str:
    """A time to reach a target (:func:`seconds`), or 'not reached' for None and infinity."""
    return "not reached" if value is None or not math.isfinite(value) else seconds(value)


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


# ---- the same units in Bokeh: tick labels of axes and colour bars, hover fields (bokeh on use) -----

def unit_steps(units: Sequence[tuple[float, float, str]]) -> list[list[Any]]:
    """``units`` (:data:`DURATION_UNITS` or :data:`COUNT_UNITS`) as JSON numbers for BokehJS."""
    return [[b if math.isfinite(b) else 1e308, per, unit] for b, per, unit in units]


# One unit for the whole axis, the one its largest tick reads best in (as fmt.duration_unit does).
_DURATION_JS = """
const top = Math.max(...ticks.map(Math.abs));
let per = steps[steps.length - 1][1], unit = steps[steps.length - 1][2];
for (const [below, p, u] of steps) { if (top < below) { per = p; unit = u; break; } }
return Number((tick / per).toPrecision(3)).toString() + " " + unit;
"""
_COUNT_JS = """
const a = Math.abs(tick);
for (const [start, div, suffix] of steps) { if (a >= start) { return Number((tick / div).toPrecision(3)) + suffix; } }
return Number(tick.toPrecision(3)).toString();
"""
_DURATION_HOVER_JS = """
const a = Math.abs(value);
for (const [below, per, unit] of steps) { if (a < below) { return Number((value / per).toPrecision(3)) + " " + unit; } }
return value + " s";
"""


def duration_ticks() -> Any:
    """Tick labels for an axis (or colour bar) in seconds: µs, ms, s, min, h or days, the unit
    :func:`duration_unit` picks for the largest tick."""
    from bokeh.models import CustomJSTickFormatter

    return CustomJSTickFormatter(args={"steps": unit_steps(DURATION_UNITS)}, code=_DURATION_JS)


def count_ticks() -> Any:
    """Tick labels for counts with decimal prefixes (k, M, G, T; :data:`COUNT_UNITS`)."""
    from bokeh.models import CustomJSTickFormatter

    return CustomJSTickFormatter(args={"steps": unit_steps(COUNT_UNITS)}, code=_COUNT_JS)


def duration_hover() -> Any:
    """A hover-field formatter for seconds, as :func:`seconds` writes them."""
    from bokeh.models import CustomJSHover

    return CustomJSHover(args={"steps": unit_steps(DURATION_UNITS)}, code=_DURATION_HOVER_JS)
