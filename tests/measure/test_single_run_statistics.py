"""The single-process run reports the mean step (what a run's throughput measures) and the steps'
jitter (``Machine.step_time_cv``), and the validation calibrates on the mean (docs/validation.md)."""

from __future__ import annotations

import statistics

import pytest

from dnnbench import presets
from dnnbench.measure.runs import calibration_rows
from dnnbench.measure.single import run_single
from dnnbench.measure.timing import coefficient_of_variation


def test_coefficient_of_variation() -> None:
    assert coefficient_of_variation([2.0, 2.0, 2.0]) == 0.0
    assert coefficient_of_variation([1.0]) == 0.0
    assert coefficient_of_variation([1.0, 3.0]) == pytest.approx(statistics.stdev([1.0, 3.0]) / 2.0)


def test_single_run_reports_mean_step_and_jitter() -> None:
    out = run_single(presets.network("lenet5"), batch_size=8, iterations=6, warmup=1, layer_repeats=1)
    walls = out["step_wall_s_all"]
    assert len(walls) == 6
    assert out["step_mean"]["wall_s"] == pytest.approx(statistics.fmean(walls))
    assert out["step_cv"] == pytest.approx(statistics.stdev(walls) / statistics.fmean(walls))
    assert out["step_mean"]["cpu_s"] > 0.0
    # The calibration's whole-step row is the mean step's CPU time.
    step = [r for r in calibration_rows(presets.network("lenet5"), out, 8) if r["group"] == "step"]
    assert step and step[0]["cpu_s"] == out["step_mean"]["cpu_s"]
