"""The wake-up delay d (docs/validation.md §"Shared host"): measured by a real ping-pong beside busy
threads, once per path and message, and carried into the prediction of the run and its replay."""

from __future__ import annotations

import os
from typing import Any

import pytest

from dnnbench import presets
from dnnbench.measure import report as reports
from dnnbench.measure import runs, wakeup
from dnnbench.measure.calibrate import machine_from_fit, nic_from_fit
from dnnbench.measure.fit import ComputeFit, TransferFit
from dnnbench.measure.mapping import predict_run
from dnnbench.measure.plan import Run


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_measurement_compares_alone_and_beside_and_stops_its_busy_threads(monkeypatch) -> None:
    started: list[Any] = []
    real = wakeup._busy

    def busy(n: int) -> list[Any]:
        procs = real(n)
        started.extend(procs)
        return procs

    monkeypatch.setattr(wakeup, "_busy", busy)
    out = wakeup.measure_wakeup_delay(launches=2, repeats=30)
    cores = len(os.sched_getaffinity(0))
    if cores < 2:
        assert out["host_wakeup_delay_s"] == 0.0 and out["alone_s"] == []
        return
    assert len(out["alone_s"]) == len(out["beside_s"]) == 2
    assert all(0 < t < 0.1 for t in out["alone_s"] + out["beside_s"])  # one way, 4 kB, seconds
    assert out["busy_threads"] == cores - 1 and len(started) == 2 * (cores - 1)
    mean = sum(out["beside_s"]) / 2 - sum(out["alone_s"]) / 2  # the launches' mean: the expected wait
    assert out["host_wakeup_delay_s"] == pytest.approx(max(0.0, mean))
    assert all(p.poll() is not None for p in started), "every busy thread is gone"


def test_measured_once_per_path_and_message_and_not_beside_pollers(monkeypatch) -> None:
    calls: list[dict[str, Any]] = []

    def fake(**kw: Any) -> dict[str, Any]:
        calls.append(kw)
        return {"host_wakeup_delay_s": 1.5e-3, "size_bytes": kw["size_bytes"]}

    monkeypatch.setattr(wakeup, "measure_wakeup_delay", fake)
    cache: dict = {}
    sync2, async2 = Run("dp", "sync", 2, None), Run("dp", "async", 2, None)
    assert runs.wakeup_delay(sync2, 247_000, cache, False, False)["host_wakeup_delay_s"] == 1.5e-3
    assert runs.wakeup_delay(async2, 247_000, cache, False, False)["host_wakeup_delay_s"] == 1.5e-3
    assert len(calls) == 1 and calls[0]["size_bytes"] == 247_000 and calls[0]["launches"] == 3
    assert cache[(None, 247_000)]["link_bits_per_s"] is None
    beside = runs.wakeup_delay(sync2, 1_000, {}, True, False)
    assert beside["host_wakeup_delay_s"] == 0.0 and "not_measured" in beside and len(calls) == 1


def test_the_run_is_predicted_with_its_d_and_replay_keeps_it() -> None:
    """PS sync R=2 on 2 cores (3 ranks): the round grows by exactly d; the row's d reaches the replay."""
    net = presets.network("lenet5")
    fit = ComputeFit(3e-11, 4e-11, 1e-9, 1.0, {}, 4e-5)
    tfit = TransferFit(6e-5, 1e12, {}, 2e-10)
    machine = machine_from_fit(fit, copy_time_s_per_byte=tfit.copy_time_s_per_byte)
    run = Run("dp", "sync", 2, None)
    args = (net, run, 32, machine, machine, nic_from_fit(tfit), 2, 0.0, 0.0, None)
    x0, _, free0 = predict_run(*args)
    x1, item, free1 = predict_run(*args, 2e-3)
    assert 64 / x1 - 64 / x0 == pytest.approx(2e-3, rel=1e-9)
    assert item["breakdown_s_per_sample"]["host_wakeup"] == pytest.approx(2e-3 / 32, rel=1e-12)
    assert free1 == free0  # the CPU view has no shared host
    row = {"label": run.label, "kind": "dp", "mode": "sync", "ranks": 2, "link_bits_per_s": None,
           "in_sample": False, "predicted_samples_per_s": x1, "measured_samples_per_s": x1,
           "background_threads": 0.0, "wakeup_delay_s": 2e-3, "cpu_view_samples_per_s": None}
    single = {**row, "label": "1 process", "kind": "single", "ranks": 1, "in_sample": True, "wakeup_delay_s": 0.0}
    report = {"network": "lenet5", "network_spec": net.to_dict(), "batch_size": 32, "iterations": 20,
              "calibration": {"compute": fit.to_dict(), "transfer": tfit.to_dict()},
              "conditions": {"host_cores": 2, "host_corun_slowdown": 0.0}, "rows": [single, row]}
    again = reports.replay(report)
    assert again.rows[1]["predicted_samples_per_s"] == pytest.approx(x1, rel=1e-12)
    old = {**report, "rows": [single, {k: v for k, v in row.items() if k != "wakeup_delay_s"}]}
    assert reports.replay(old).rows[1]["predicted_samples_per_s"] == pytest.approx(x0, rel=1e-12)
