"""The fits recover known constants from synthetic measurements (docs/validation.md §Calibration)."""

import numpy as np
import pytest

from dnnbench.measure.fit import LOOPBACK_CAP_BITS_PER_S, fit_compute, fit_copy_time, fit_transfer, predict_rows
from dnnbench.measure.microbench import cases

LLC = 32 * 2**20


def _rows(t_conv: float, t_fc: float, t_elem: float, c: float) -> list[dict]:
    rows = []
    for case in cases():
        k = case.counts()
        rows.append({"name": case.name, "group": case.group, "batch_size": 32,
                     "macs": k.macs_forward + k.macs_backprop + k.macs_weight_grad,
                     "elem_ops": k.elem_ops_forward + k.elem_ops_backprop, "weights": k.weights})
    per_sample = predict_rows(rows, LLC, t_conv, t_fc, t_elem, c)
    for r, t in zip(rows, per_sample, strict=False):
        r["cpu_s"] = t * 32
    return rows


@pytest.mark.parametrize("c", [1.0, 2.0])
def test_compute_fit_recovers_constants(c: float) -> None:
    fit = fit_compute(_rows(2e-11, 3e-11, 1e-9, c), LLC)
    assert fit.mac_time_conv_s == pytest.approx(2e-11, rel=1e-6)
    assert fit.mac_time_fc_s == pytest.approx(3e-11, rel=1e-6)
    assert fit.elem_time_s == pytest.approx(1e-9, rel=1e-6)
    assert fit.cache_speedup == c
    assert max(abs(v) for v in fit.residuals.values()) < 1e-6


def test_compute_fit_reports_residuals_of_noisy_data() -> None:
    rows = _rows(2e-11, 3e-11, 1e-9, 1.0)
    rng = np.random.default_rng(0)
    for r in rows:
        r["cpu_s"] *= 1 + 0.05 * rng.standard_normal()
    fit = fit_compute(rows, LLC)
    assert fit.mac_time_fc_s == pytest.approx(3e-11, rel=0.1)
    assert 0 < fit.to_dict()["median_abs_residual"] < 0.2


def test_step_row_sums_its_parts() -> None:
    rows = _rows(2e-11, 3e-11, 1e-9, 1.0)[:3]
    step = {"name": "step", "batch_size": 32, "parts": rows}
    whole = predict_rows([step], LLC, 2e-11, 3e-11, 1e-9, 1.0)[0]
    assert whole == pytest.approx(predict_rows(rows, LLC, 2e-11, 3e-11, 1e-9, 1.0).sum())


def test_transfer_fit() -> None:
    sizes = [4096, 65536, 1 << 20, 1 << 24]
    times = [50e-6 + 8 * s / 1e9 for s in sizes]
    fit = fit_transfer(sizes, times)
    assert fit.latency_s == pytest.approx(50e-6, rel=1e-6)
    assert fit.bits_per_s == pytest.approx(1e9, rel=1e-6)


def test_layer_overhead_is_recovered_from_two_batch_sizes() -> None:
    rows = []
    for b in (32, 4):
        for r in _rows(2e-11, 3e-11, 1e-9, 1.0):
            rows.append({**r, "name": f"{r['name']}@{b}", "batch_size": b})
    per_sample = predict_rows(rows, LLC, 2e-11, 3e-11, 1e-9, 1.0, 5e-5)
    for r, t in zip(rows, per_sample, strict=False):
        r["cpu_s"] = t * r["batch_size"]
    fit = fit_compute(rows, LLC)
    assert fit.layer_overhead_s == pytest.approx(5e-5, rel=1e-6)
    assert fit.mac_time_conv_s == pytest.approx(2e-11, rel=1e-6)
    assert fit.to_dict()["layer_overhead_s"] == fit.layer_overhead_s
    # Two passes (forward and backward) per layer and mini-batch: 2·o/b per sample.
    one = [{**rows[0], "macs": 0.0, "elem_ops": 0.0, "weights": 0.0, "batch_size": 8}]
    assert predict_rows(one, LLC, 1e-11, 1e-11, 1e-9, 1.0, 1e-4)[0] == pytest.approx(2 * 1e-4 / 8)
    assert fit_compute(rows, LLC, overhead=False).layer_overhead_s == 0.0


def test_a_zeroed_kind_is_tied_so_fitted_rows_keep_their_prediction() -> None:
    # FC rows whose time is all overhead: NNLS would zero t_mac(fc); the fit then shares one MAC time,
    # and the residuals are those of the constants returned.
    rows = _rows(2e-11, 3e-11, 1e-9, 1.0)
    for r in rows:
        if r["group"] == "fc":
            r["cpu_s"] *= 0.05
    fit = fit_compute(rows, LLC)
    assert fit.mac_time_fc_s > 0 and fit.mac_time_conv_s > 0
    pred = predict_rows(rows, LLC, fit.mac_time_conv_s, fit.mac_time_fc_s, fit.elem_time_s, fit.cache_speedup,
                        fit.layer_overhead_s)
    for r, p in zip(rows, pred, strict=False):
        assert fit.residuals[r["name"]] == pytest.approx(p * r["batch_size"] / r["cpu_s"] - 1, rel=1e-9, abs=1e-12)


def test_copy_time_is_the_cpu_slope_of_a_message_end() -> None:
    # Each rank sends and receives S bytes per round trip: CPU = a + 2·c·S.
    sizes = [4096, 65536, 1 << 20, 1 << 24]
    cpu = [30e-6 + 2 * 2e-10 * s for s in sizes]
    assert fit_copy_time(sizes, cpu) == pytest.approx(2e-10, rel=1e-6)


def test_transfer_fit_leaves_the_link_what_the_copies_do_not_explain() -> None:
    sizes = [4096, 65536, 1 << 20, 1 << 24]
    c = 1e-10
    times = [50e-6 + 8 * s / 1e9 + 2 * c * s for s in sizes]
    fit = fit_transfer(sizes, times, copy_time_s_per_byte=c)
    assert fit.bits_per_s == pytest.approx(1e9, rel=1e-6)
    assert fit.copy_time_s_per_byte == c and max(abs(v) for v in fit.residuals.values()) < 1e-6
    # Loopback: the copies alone explain the time; the link term is then (almost) free.
    only_copies = fit_transfer(sizes, [50e-6 + 2 * c * s for s in sizes], copy_time_s_per_byte=c)
    assert only_copies.bits_per_s == LOOPBACK_CAP_BITS_PER_S
    assert only_copies.to_dict()["copy_time_s_per_byte"] == c
