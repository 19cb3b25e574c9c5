"""Formatting for humans, in one place: bytes by 1024 (KiB, MiB), counts and rates by 1000 (M, G).

Tests assert on numbers, never on these strings.
"""

from __future__ import annotations

import math


def count(n: float) -> str:
    """1234567 -> '1.23 M' (decimal prefixes: counts of weights, MACs, samples)."""
    if not math.isfinite(n):
        return str(n)
    for div, suffix in ((1e12, " T"), (1e9, " G"), (1e6, " M"), (1e3, " k")):
        if abs(n) >= div:
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


def seconds(s: float) -> str:
    """A duration in the unit that reads best: '12.3 ms', '4.5 s', '2.1 h', '3.2 days'."""
    if not math.isfinite(s):
        return "inf"
    if s < 1e-3:
        return f"{s * 1e6:.3g} µs"
    if s < 1:
        return f"{s * 1e3:.3g} ms"
    if s < 120:
        return f"{s:.3g} s"
    if s < 7200:
        return f"{s / 60:.3g} min"
    if s < 172800:
        return f"{s / 3600:.3g} h"
    return f"{s / 86400:.3g} days"


def rate_bits(bps: float) -> str:
    for div, suffix in ((1e9, "Gbit/s"), (1e6, "Mbit/s"), (1e3, "kbit/s")):
        if bps >= div:
            return f"{bps / div:.3g} {suffix}"
    return f"{bps:.3g} bit/s"
