"""Wall and CPU time of a block, and robust summaries (docs/validation.md §"Noise").

Every measurement records ``time.perf_counter()`` (wall) and ``time.thread_time()`` (CPU of this
thread): on a shared machine the wall time grows with other processes' load while the CPU time does
not, so calibration fits CPU time and validation compares wall time, and both are reported.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field


@dataclass
class Samples:
    """Wall and CPU seconds of repeated runs of one thing."""

    wall_s: list[float] = field(default_factory=list)
    cpu_s: list[float] = field(default_factory=list)

    def add(self, wall_s: float, cpu_s: float) -> None:
        self.wall_s.append(wall_s)
        self.cpu_s.append(cpu_s)

    def median(self) -> dict[str, float]:
        return {"wall_s": median(self.wall_s), "cpu_s": median(self.cpu_s)}

    def mean(self) -> dict[str, float]:
        return {"wall_s": mean(self.wall_s), "cpu_s": mean(self.cpu_s)}


class Stopwatch:
    """``with Stopwatch() as sw: ...`` then ``sw.wall_s`` and ``sw.cpu_s``."""

    wall_s = 0.0
    cpu_s = 0.0

    def __enter__(self) -> Stopwatch:
        self._w = time.perf_counter()
        self._c = time.thread_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall_s = time.perf_counter() - self._w
        self.cpu_s = time.thread_time() - self._c


def mean(values: list[float]) -> float:
    """The mean, or NaN for no values."""
    return float(statistics.fmean(values)) if values else float("nan")


def coefficient_of_variation(values: list[float]) -> float:
    """Sample standard deviation over mean (``Machine.step_time_cv``); 0 for fewer than 2 values."""
    return float(statistics.stdev(values) / statistics.fmean(values)) if len(values) > 1 else 0.0


def median(values: list[float]) -> float:
    """The median, or NaN for no values."""
    return float(statistics.median(values)) if values else float("nan")
