"""Argument checks shared by the ESGD modules: one-line ``ValueError`` messages.

Every message names the argument, the value and what was expected (``drop_ratio: 1.5 is not in
[0, 1)``). The error type is the project's :class:`dnnbench.errors.SpecError`, a ``ValueError``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from dnnbench.errors import SpecError


def fail(name: str, value: Any, expected: str) -> SpecError:
    """The error to raise for argument ``name`` holding ``value``; ``expected`` completes the sentence."""
    return SpecError(name, value, expected)


def choice(name: str, value: Any, allowed: Iterable[str]) -> str:
    allowed = tuple(allowed)
    if not isinstance(value, str) or value not in allowed:
        raise fail(name, value, f"is not one of {allowed}")
    return value


def number(name: str, value: Any, *, low: float | None = None, high: float | None = None,
           low_open: bool = False, high_open: bool = False) -> float:
    """A finite real number in the interval given (closed unless ``*_open``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise fail(name, value, "is not a finite number")
    left = "(" if low_open else "["
    right = ")" if high_open else "]"
    interval = f"{left}{'-inf' if low is None else low}, {'inf' if high is None else high}{right}"
    if low is not None and (value < low or (low_open and value == low)):
        raise fail(name, value, f"is not in {interval}")
    if high is not None and (value > high or (high_open and value == high)):
        raise fail(name, value, f"is not in {interval}")
    return float(value)


def integer(name: str, value: Any, *, low: int | None = None, high: int | None = None) -> int:
    """An ``int`` (numpy integers accepted, bools not) in ``[low, high]``."""
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise fail(name, value, "is not an integer")
    value = int(value)
    if (low is not None and value < low) or (high is not None and value > high):
        raise fail(name, value, f"is not in [{'-inf' if low is None else low}, {'inf' if high is None else high}]")
    return value


def drop_ratio(value: Any, name: str = "drop_ratio") -> float:
    """A drop ratio: the fraction of coordinates *not* sent, in [0, 1)."""
    return number(name, value, low=0.0, high=1.0, high_open=True)


def kept_count(drop: float, size: int) -> int:
    """k = ceil((1 - drop) * d), at least 1 and at most d (esgd.md §2).

    The product is rounded to 9 decimal places before the ceiling so that float noise
    ((1 - 0.7) * 10 = 3.0000000000000004) does not add a coordinate.
    """
    raw = (1.0 - drop) * size
    return max(1, min(size, math.ceil(round(raw, 9))))
