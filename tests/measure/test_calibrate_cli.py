"""``dnnbench calibrate --quick`` end to end: real micro-benchmarks, a valid cluster spec written,
the fit's residuals and the measured host constants printed (docs/validation.md §Calibration)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dnnbench.cli import main
from dnnbench.specs import Cluster


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_quick_calibration_writes_a_spec_and_reports_residuals(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    spec, raw = tmp_path / "cluster.json", tmp_path / "raw.json"
    assert main(["calibrate", "--quick", "-o", str(spec), "--report", str(raw)]) == 0
    out = capsys.readouterr().out
    cluster = Cluster.build(json.loads(spec.read_text()))
    worker = cluster.worker
    assert worker.mac_time_s is not None and worker.mac_time_s.conv > 0 and worker.elem_time_s > 0
    assert worker.copy_time_s_per_byte > 0 and cluster.worker_nic.latency_s > 0
    report = json.loads(raw.read_text())
    # The jitter a synchronous round waits for, measured on LeNet-5's steps alone (docs/model.md §6).
    assert worker.step_time_cv == pytest.approx(min(10.0, report["corun"]["alone_step_cv"]))
    assert cluster.host_corun_slowdown == pytest.approx(report["corun"]["host_corun_slowdown"])
    assert f"step-time jitter (CV) {worker.step_time_cv:.3f}" in out
    # The wake-up delay d, measured by the ping-pong alone and beside busy threads (docs/model.md §4).
    wake = report["wakeup"]
    assert cluster.host_wakeup_delay_s == pytest.approx(wake["host_wakeup_delay_s"])
    assert cluster.host_wakeup_delay_s >= 0.0
    assert len(wake["alone_s"]) == len(wake["beside_s"]) == (1 if wake["busy_threads"] else 0)
    assert f"wake-up delay {1e3 * cluster.host_wakeup_delay_s:.2f} ms" in out
    assert "fit residuals" in out
    residuals = report["compute"]["residuals"]
    assert residuals and all(f"{name:<22}" in out for name in residuals)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cluster.json", "raw.json"]  # no temporary file left
