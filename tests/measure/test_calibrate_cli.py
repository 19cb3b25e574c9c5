"""``dnnbench calibrate --quick`` end to end: real micro-benchmarks, a valid cluster spec written,
the fit's residuals and the measured host constants printed (docs/validation.md §Calibration)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dnnbench.cli import main
from dnnbench.measure import calibrate as calibration
from dnnbench.measure.hostload import host_cores
from dnnbench.specs import Cluster


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_quick_calibration_writes_a_spec_and_reports_residuals(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    spec, raw = tmp_path / "cluster.json", tmp_path / "raw.json"
    assert main(["calibrate", "--quick", "--shared-host", "-o", str(spec), "--report", str(raw)]) == 0
    out = capsys.readouterr().out
    cluster = Cluster.build(json.loads(spec.read_text()))
    worker = cluster.worker
    assert worker.mac_time_s is not None and worker.mac_time_s.conv > 0 and worker.elem_time_s > 0
    assert worker.copy_time_s_per_byte > 0 and cluster.worker_nic.latency_s > 0
    report = json.loads(raw.read_text())
    # The jitter a synchronous round waits for, measured on LeNet-5's steps alone (docs/model.md §6).
    assert worker.step_time_cv == pytest.approx(min(10.0, report["corun"]["alone_step_cv"]))
    host = cluster.shared_host
    assert host is not None and host.cores == host_cores()
    assert host.corun_slowdown == pytest.approx(report["corun"]["host_corun_slowdown"])
    assert f"step-time jitter (CV) {worker.step_time_cv:.3f}" in out
    # The wake-up delay d, measured by the ping-pong alone and beside busy threads (docs/model.md §4).
    wake = report["wakeup"]
    assert host.wakeup_delay_s == pytest.approx(wake["host_wakeup_delay_s"])
    assert host.wakeup_delay_s >= 0.0
    assert len(wake["alone_s"]) == len(wake["beside_s"]) == (1 if wake["busy_threads"] else 0)
    assert f"wake-up delay {1e3 * host.wakeup_delay_s:.2f} ms" in out and "(in shared_host)" in out
    assert "fit residuals" in out
    residuals = report["compute"]["residuals"]
    assert residuals and all(f"{name:<22}" in out for name in residuals)
    # Compute from the layers' shapes (docs/model.md §12): fitted, its residuals printed, its band kept.
    shapes = report["shapes"]
    assert worker.shape_rate is not None and worker.compute_error is not None
    assert worker.compute_error.p10 <= 0.0 <= worker.compute_error.p90
    # The interval is the whole steps' band (chains held out of the step fit); the layers' is reported.
    assert worker.compute_error.model_dump() == shapes["step_band"] and shapes["step_band"]["cases"] >= 6
    assert shapes["band"]["p10"] <= 0.0 <= shapes["band"]["p90"] and shapes["band"]["cases"] > 0
    assert f"prediction interval p10 {100 * worker.compute_error.p10:+.0f}%" in out
    assert f"fit residuals median {100 * shapes['median_abs_residual']:.0f}%" in out
    assert len(shapes["timings"]) == shapes["cases"] and shapes["steps"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cluster.json", "raw.json"]  # no temporary file left


def test_without_shared_host_the_cluster_is_separate_machines(monkeypatch: pytest.MonkeyPatch) -> None:
    """σ_h stays in the report unless the cluster is this host's processes (--shared-host); d is only
    measured for a shared host (a cluster of separate machines has no use for it)."""
    from dnnbench.measure import fit

    compute = fit.ComputeFit(1e-9, 1e-9, 1e-9, 1.0, {}, 0.0)
    monkeypatch.setattr("dnnbench.measure.microbench.cases", lambda quick: [])
    monkeypatch.setattr("dnnbench.measure.microbench.run_cases", lambda *a, **k: [])
    monkeypatch.setattr(calibration, "fit_compute", lambda rows, llc: compute)
    monkeypatch.setattr(calibration, "measure_transfer", lambda *a, **k: fit.TransferFit(1e-5, 1e9, {}, 1e-10))
    monkeypatch.setattr("dnnbench.measure.corun.corun_slowdown",
                        lambda *a, **k: {"host_corun_slowdown": 0.25, "alone_step_cv": 0.1})
    launched: list[dict[str, int]] = []
    monkeypatch.setattr("dnnbench.measure.wakeup.measure_wakeup_delay",
                        lambda **k: launched.append(k) or {"host_wakeup_delay_s": 3e-4})
    monkeypatch.setattr(calibration, "calibrate_shapes", lambda quick, progress=None: (None, None, {}))
    separate, report = calibration.calibrate(quick=True)
    assert separate.shared_host is None
    assert report["corun"]["host_corun_slowdown"] == 0.25 and "not_measured" in report["wakeup"] and not launched
    assert report["elapsed_s"] >= 0.0
    shared, report = calibration.calibrate(quick=True, shared_host=True)
    assert report["wakeup"]["host_wakeup_delay_s"] == 3e-4 and launched == [{"launches": 1}]
    assert shared.shared_host == calibration.SharedHost(cores=host_cores(), corun_slowdown=0.25, wakeup_delay_s=3e-4)
