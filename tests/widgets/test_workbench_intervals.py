"""Prediction intervals in the workbench (docs/model.md §12): a calibrated machine's compute error
band is drawn as bands on the speed-up curves and as a whisker on the breakdown; without a band the
bands have no width."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from dnnbench import presets
from dnnbench.model import predict
from tests.model.test_model_shape import machine, rate


def test_bands_follow_the_compute_error_band() -> None:
    from dnnbench.widgets import Workbench

    m = machine(rate(conv_forward={"mac_time_s": 2e-11}, conv_input_grad={"mac_time_s": 2e-11},
                     conv_weight_grad={"mac_time_s": 2e-11}, fc_forward={"mac_time_s": 1e-11},
                     fc_input_grad={"mac_time_s": 1e-11}, fc_weight_grad={"mac_time_s": 1e-11},
                     activation={"op_time_s": 1e-10}, pool={"op_time_s": 1e-10}),
                compute_error={"p10": -0.25, "p90": 0.5})
    cluster = presets.cluster("adam-2014").evolve(worker=m, ps=m, machines=16)
    wb = Workbench(network="lenet5", cluster=cluster)
    try:
        src = wb.views.speedup.sources
        mp = src["speedup_model_parallel"].data
        assert np.all(np.asarray(mp["speedup_low"]) <= np.asarray(mp["speedup"]) * (1 + 1e-12))
        assert np.all(np.asarray(mp["speedup_high"]) >= np.asarray(mp["speedup"]) * (1 - 1e-12))
        # One machine is all compute: its speed-up band is the ratio of the band's ends around 1.
        one = int(np.argmin(np.asarray(mp["machines"])))
        assert mp["speedup_low"][one] == pytest.approx(1.0) and mp["speedup_high"][one] == pytest.approx(1.0)
        assert np.any(np.asarray(mp["speedup_high"]) > np.asarray(mp["speedup_low"]) * 1.001)
        bars = wb.views.breakdown.sources["breakdown_parts"].data
        s = wb.state
        item = predict(s.network, s.cluster, s.dataset, s.configuration).item()
        lo, hi = item["interval_p10_p90"]["time_per_sample_s"]
        x = 1.0 / item["samples_per_s"]
        assert bars["total_low_s"][0] == pytest.approx(bars["total_s"][0] * lo / x, rel=1e-9)
        assert bars["total_high_s"][0] == pytest.approx(bars["total_s"][0] * hi / x, rel=1e-9)
        assert any(getattr(r, "name", "") == "speedup_model_parallel_band" for r in wb.views.speedup.figure.renderers)
    finally:
        wb.close()


def test_without_a_band_the_bands_have_no_width(workbench: Any) -> None:
    mp = workbench.views.speedup.sources["speedup_model_parallel"].data
    assert list(mp["speedup_low"]) == list(mp["speedup"]) == list(mp["speedup_high"])
    bars = workbench.views.breakdown.sources["breakdown_parts"].data
    assert list(bars["total_low_s"]) == list(bars["total_s"]) == list(bars["total_high_s"])
