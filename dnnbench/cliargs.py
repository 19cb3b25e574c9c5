"""Argument types and JSON output shared by the ``dnnbench`` command and its sub-command modules."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any


def whole_number_at_least(low: int, high: int | None = None, what: str = "whole number") -> Callable[[str], int]:
    """An argparse type: a whole number >= ``low`` (and <= ``high``), with a one-line message
    otherwise naming the value and ``what`` was expected."""

    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a {what}") from None
        if v < low:
            raise argparse.ArgumentTypeError(f"{v} must be >= {low}")
        if high is not None and v > high:
            raise argparse.ArgumentTypeError(f"{v} must be <= {high}")
        return v

    return parse


positive_int = whole_number_at_least(1)
nonneg_int = whole_number_at_least(0)


def print_json(data: Any) -> None:
    """``data`` as indented standard JSON on stdout (numpy values as plain numbers)."""
    print(json.dumps(data, indent=2, default=_json_default, allow_nan=False))


def _json_default(o: Any) -> Any:
    import numpy as np

    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def finite(data: Any) -> Any:
    """Standard JSON values: infinities (unbounded resources) and NaN become None (one definition,
    :func:`dnnbench.fileio.json_ready`)."""
    from .fileio import json_ready

    return json_ready(data)
