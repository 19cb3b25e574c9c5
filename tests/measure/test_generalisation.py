"""The generalisation check, small (benchmarks/bench_generalisation.py is the full one): a quick shape
calibration on this machine, then chains the calibration never saw, trained by a plain PyTorch loop
and predicted. Bounds are loose: a CI machine's timings drift by tens of per cent between runs."""

from __future__ import annotations

import numpy as np
import pytest

from dnnbench.measure.calibrate import build_cluster, cache_levels, llc_bytes, memory_bytes
from dnnbench.measure.generalisation import Point, measure, predict, summary
from dnnbench.measure.hostload import host_cores
from dnnbench.measure.shapes import calibrate_shapes
from dnnbench.specs import Machine, Nic


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_unseen_chains_are_predicted_within_loose_bounds() -> None:
    rate, band, report = calibrate_shapes(host_cores(), cache_levels(), quick=True)
    assert report["cases"] == 64 and np.isfinite(report["median_abs_residual"])
    m = Machine(name="this machine", cores=host_cores(), elem_time_s=1e-9, llc_bytes=llc_bytes(),
                memory_bytes=memory_bytes(), mac_time_s={"conv": 1e-10, "fc": 1e-10}, shape_rate=rate,
                compute_error=band)
    nic = Nic(upload_bits_per_s=1e10, download_bits_per_s=1e10, latency_s=1e-5)
    cluster = build_cluster(m, nic)
    points = [Point(seed, 16, 1) for seed in (101, 102, 103, 104)]
    measured = measure(points, launches=2, steps=4)
    predicted = predict(points, cluster)
    s = summary(measured, predicted)
    for q in predicted:
        assert q["p10_s"] <= q["time_per_sample_s"] <= q["p90_s"]
    assert s["median_abs_error"] <= 0.6, s
    assert s["max_abs_error"] <= 2.0, s
