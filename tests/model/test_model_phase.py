"""The phase range of request–reply replicas (docs/model.md §6): replicas that meet at the PS's
stations in lock step, or never, bound the closed network's throughput from below and above."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, example, given
from hypothesis import strategies as st
from strategies import preset_clusters, preset_networks

from dnnbench import presets
from dnnbench.model import evaluate, predict
from dnnbench.model.evaluate import closed_network_throughput, phase_range
from dnnbench.specs import Configuration


def test_asymptotic_bounds_golden() -> None:
    """Asymptotic bounds of a closed network (Lazowska, Zahorjan, Graham and Sevcik, Quantitative
    System Performance, 1984, §5.2): N/(N·D + Z) <= X(N) <= min(N/(D + Z), 1/D_max). Two replicas
    that compute 32 ms and push and pull 128 ms each through one PS port (mnist-adam over 1 Gbit/s):
    2/0.544 s = 3.676 cycles/s in lock step, 2/0.288 s = 6.944 staggered."""
    lo, hi = phase_range(2.0, 0.032, (0.128, 0.128))
    assert float(lo) == pytest.approx(2 / 0.544, rel=1e-12)
    assert float(hi) == pytest.approx(2 / 0.288, rel=1e-12)
    x = float(closed_network_throughput(2.0, 0.032, (0.128, 0.128)))
    assert lo < x < hi
    # Exact MVA for two customers: X(2) = 2/(Z + Σ D_k (1 + D_k X(1))), X(1) = 1/(Z + Σ D) — Schweitzer's
    # approximation is near it.
    x1 = 1 / (0.032 + 0.256)
    assert x == pytest.approx(2 / (0.032 + 2 * 0.128 * (1 + 0.128 * x1)), rel=0.03)
    # One station saturated: the upper bound is its capacity.
    lo, hi = phase_range(8.0, 0.0, (0.5, 0.1))
    assert float(hi) == pytest.approx(2.0) and float(lo) == pytest.approx(8 / 4.8)


@given(st.integers(1, 64), st.floats(0.0, 1.0), st.lists(st.floats(0.0, 1.0), min_size=1, max_size=4))
@example(1, 0.0, [2.225073858507203e-309]).via("a subnormal demand once overflowed 1/D")
@example(2, 2.2e-313, [0.0]).via("a subnormal think time once overflowed")
def test_schweitzer_solution_lies_in_the_range(n: int, z: float, d: list[float]) -> None:
    assume(z + sum(d) > 0)  # (subnormal demands included: X is then unbounded, inf)
    x = float(closed_network_throughput(float(n), z, tuple(d)))
    lo, hi = (float(v) for v in phase_range(float(n), z, tuple(d)))
    assert lo * (1 - 1e-9) <= x <= hi * (1 + 1e-9)
    if n == 1:  # one replica has no phase
        assert lo == pytest.approx(hi, rel=1e-12) and x == pytest.approx(lo, rel=1e-9)


def _async_rr(r: int, p: int = 1, w: int = 1, k: int = 32) -> Configuration:
    return Configuration(workers_per_replica=w, replicas=r, ps_machines=p, push_interval_samples=k,
                         pull_interval_samples=k, local_batch_samples=32, mode="async", threads=1,
                         ps_exchange="request_reply")


@given(preset_networks, preset_clusters, st.integers(1, 32), st.integers(1, 4), st.sampled_from([1, 8, 64]))
def test_prediction_lies_in_its_phase_range(net: str, cl: str, r: int, p: int, k: int) -> None:
    n = presets.network(net)
    pred = predict(n, presets.cluster(cl), presets.default_dataset_for(n), _async_rr(r, p, k=k))
    x, lo, hi = (float(v) for v in (pred.samples_per_s, pred.phase_low_samples_per_s, pred.phase_high_samples_per_s))
    assert lo * (1 - 1e-9) <= x <= hi * (1 + 1e-9)
    if r == 1:
        assert lo == pytest.approx(x, rel=1e-9) and hi == pytest.approx(x, rel=1e-9)
    item = pred.item()
    assert item["phase_range_samples_per_s"] == pytest.approx([lo, hi])


@given(preset_networks, preset_clusters, st.integers(1, 32), st.sampled_from(["sync", "async"]))
def test_no_range_where_no_phase_enters(net: str, cl: str, r: int, mode: str) -> None:
    """Synchronous rounds move in lock step by construction, and the overlapped (streaming) exchange
    is not a closed network of request–reply cycles: their range is the prediction itself."""
    n = presets.network(net)
    exchange = "request_reply" if mode == "sync" else "overlapped"
    cfg = Configuration(workers_per_replica=1, replicas=r, ps_machines=1, push_interval_samples=8,
                        pull_interval_samples=8, mode=mode, ps_exchange=exchange)
    pred = predict(n, presets.cluster(cl), presets.default_dataset_for(n), cfg)
    assert np.array_equal(pred.phase_low_samples_per_s, pred.samples_per_s)
    assert np.array_equal(pred.phase_high_samples_per_s, pred.samples_per_s)


def test_range_is_vectorised_over_replicas() -> None:
    n = presets.network("mnist-adam")
    pred = evaluate(n, presets.cluster("adam-2014"), presets.default_dataset_for(n), _async_rr(1),
                    replicas=np.arange(1, 9), ps_machines=np.array([[1], [2]]))
    assert pred.phase_low_samples_per_s.shape == (2, 8)
    assert np.all(pred.phase_low_samples_per_s <= pred.samples_per_s * (1 + 1e-9))
    assert np.all(pred.samples_per_s <= pred.phase_high_samples_per_s * (1 + 1e-9))
