"""Arguments of the public Python API, checked once at the boundary: a bad one is a one-line
:class:`~dnnbench.errors.SpecError` naming the argument, never an ``IndexError`` or a NaN later.

``dnnbench.predict``, ``evaluate``, ``optimize`` and the curves accept a spec, a preset name, a spec
file path or a mapping wherever a network, cluster, data set or configuration goes
(:func:`dnnbench.presets.problem`); counts and budgets are whole numbers within stated limits (:func:`whole_number`);
the array arguments of ``evaluate`` are finite and in range (:func:`configuration_arrays`).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable
from typing import Any

import numpy as np

from .errors import SpecError

#: The largest machine budget the optimizer searches (0.2 s and about 130 MB at this size).
MAX_BUDGET_MACHINES = 1_000_000
#: The largest budget of a speed-up curve: the data-parallel curve and the best-per-budget curve cost
#: O(N^2) (about 0.5 s and 400 MB at this size).
MAX_CURVE_MACHINES = 1024


def whole_number(value: Any, field: str, low: int, high: int | None = None) -> int:
    """``value`` as an int if it is a whole number in [low, high] (a bool is not a number)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        if isinstance(value, numbers.Real) and not isinstance(value, bool) and float(value).is_integer():
            value = int(value)
        else:
            raise SpecError(field, value, f"is not valid: expected a whole number >= {low}")
    v = int(value)
    if v < low:
        raise SpecError(field, v, f"is not valid: expected a whole number >= {low}")
    if high is not None and v > high:
        raise SpecError(field, v, f"is more than the limit of {high:,}")
    return v


#: The largest count evaluate() takes for machines, replicas, samples per update or threads.
MAX_COUNT = 10**9
#: evaluate()'s array arguments: (lowest value, whether it must be whole).
_ARRAYS = {"workers_per_replica": (1.0, True), "replicas": (1.0, True), "ps_machines": (0.0, True),
           "push_interval_samples": (1.0, True), "pull_interval_samples": (1.0, True), "threads": (1.0, True)}


def configuration_arrays(**arrays: Any) -> None:
    """Each given array (None: taken from the configuration) is numeric, finite, at least its lowest
    value and whole where it counts something; ``overlap`` lies in [0, 1]."""
    for name, value in arrays.items():
        if value is None:
            continue
        try:
            a = np.asarray(value, dtype=float)
        except (TypeError, ValueError):
            raise SpecError(name, value, "is not valid: expected numbers") from None
        if a.size == 0:
            continue
        if not np.all(np.isfinite(a)):
            raise SpecError(name, value, "is not valid: expected finite numbers")
        if name == "overlap":
            if np.any((a < 0.0) | (a > 1.0)):
                raise SpecError(name, value, "is not valid: expected numbers from 0 to 1")
            continue
        low, whole = _ARRAYS[name]
        if np.any(a < low) or (whole and np.any(a != np.round(a))):
            raise SpecError(name, value, f"is not valid: expected whole numbers >= {low:g}")
        if np.any(a > MAX_COUNT):
            raise SpecError(name, value, f"is more than the limit of {MAX_COUNT:,}")




# ---- plain arguments of library functions (compressors, the edge simulator, the study) -----------
# One-line messages naming the argument, the value and what was expected (``drop_ratio: 1.5 is not
# in [0, 1)``); specs validate their fields with pydantic, everything else comes through here.

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


__all__ = ["MAX_BUDGET_MACHINES", "MAX_COUNT", "MAX_CURVE_MACHINES", "choice", "configuration_arrays", "fail",
           "integer", "number", "whole_number"]
