"""CI smoke validation: real runs (1 process, PS sync with 1 and 2 workers, LeNet-5, 30 iterations)
against the model calibrated on the single-process run (docs/validation.md §CI).

The PS runs use an emulated 1 Gbit/s tbf link when root (loopback otherwise) and are predicted on
that link, every process a one-core machine on this host (``Cluster.shared_host``). A factor of 2.5
either way absorbs what a shared 2-core machine does to one launch (launch-to-launch spread up to
±50 % measured under a load average of 7) but fails on gross disagreement: a model without the
per-layer overhead, the host contention or the link would miss by more.
"""

import importlib.util
import time
from pathlib import Path
from types import ModuleType

import pytest

from dnnbench import presets
from dnnbench.measure import netns
from dnnbench.measure.plan import SMOKE_BOUND, SMOKE_LINK_BITS_PER_S
from dnnbench.measure.validate import validate


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_smoke_validation_within_bounds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    t0 = time.monotonic()
    report = validate(presets.network("lenet5"), smoke=True, batch_size=64, iterations=30)
    if report.calibration["compute"]["layer_overhead_s"] == 0:
        # The per-pass overhead is fitted from one launch's steps at two batch sizes; on a busy 2-core host
        # their difference can drown in the launch's noise (the fit then gives 0). One more launch of the
        # whole validation, as a measurement would, rather than a looser check.
        report = validate(presets.network("lenet5"), smoke=True, batch_size=64, iterations=30)
    elapsed = time.monotonic() - t0
    rows = report.rows
    assert [r["kind"] for r in rows] == ["single", "dp", "dp"]
    link = SMOKE_LINK_BITS_PER_S if netns.available() is None else None
    assert [r["link_bits_per_s"] for r in rows[1:]] == [link, link]
    for r in rows:
        ratio = r["measured_samples_per_s"] / r["predicted_samples_per_s"]
        assert 1 / SMOKE_BOUND < ratio < SMOKE_BOUND, (r["label"], ratio)
        # The CPU view (compute at its CPU time, no contention) against the uncontended prediction.
        cpu_ratio = r["cpu_view_samples_per_s"] / r["predicted_uncontended_samples_per_s"]
        assert 1 / SMOKE_BOUND < cpu_ratio < SMOKE_BOUND, (r["label"], cpu_ratio)
    for r in rows[1:]:  # every worker step's push + pull is kept: the mean (the throughput's statistic)
        assert r["communication_mean_wall_s_per_step"] > 0, r["label"]
    # Calibrated on the step it is predicting (both batch sizes' steps weigh 10x): in-sample is close.
    assert abs(rows[0]["cpu_view_error"]) < 0.1
    assert report.calibration["compute"]["layer_overhead_s"] > 0
    assert report.calibration["cluster"]["shared_host"]["cores"] == report.conditions["host_cores"]
    assert report.summary["configurations"] == 2
    # Without idle pollers (the default) the co-run slowdown is measured (docs/validation.md §"Shared host").
    assert report.conditions["idle_pollers"] is False
    assert "ratios" in report.calibration["corun"]
    print(f"smoke validation took {elapsed:.1f} s")  # a figure to read, not a unit-test assertion
    # Replaying the saved report (JSON round trip) with the same model reproduces every prediction.
    import json

    from dnnbench.measure.report import replay

    again = replay(json.loads(json.dumps(report.to_dict(), default=float)))
    for before, after in zip(rows, again.rows, strict=True):
        assert after["predicted_samples_per_s"] == pytest.approx(before["predicted_samples_per_s"], rel=1e-9)
        assert after["measured_samples_per_s"] == before["measured_samples_per_s"]
    assert again.summary == pytest.approx(report.summary)
    for r in again.rows:  # one launch each: inside its range where the range is the prediction itself
        lo, hi = r["predicted_phase_range_samples_per_s"]
        assert lo <= r["predicted_samples_per_s"] * (1 + 1e-9) and r["predicted_samples_per_s"] <= hi * (1 + 1e-9)
    # The benchmark's --aggregate replays saved sweeps and prints the per-configuration medians.
    saved = tmp_path / "validation-lenet5.json"
    report.save(saved)
    bench = _load_benchmark("bench_validation")
    capsys.readouterr()
    assert bench.main(["--aggregate", str(saved)]) == 0
    out = capsys.readouterr().out
    assert "per-configuration median error over 1 sweeps" in out
    assert out.count("lenet5      PS sync") == 2 and "max " in out


def _load_benchmark(name: str) -> ModuleType:
    import dnnbench

    path = Path(dnnbench.__file__).resolve().parents[1] / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
