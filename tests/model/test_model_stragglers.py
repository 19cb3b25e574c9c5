"""Stragglers in synchronous rounds (docs/model.md §6): the expected slowest replica, and its place
in the model (Hypothesis invariants, a hand-computed value)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import integrate, stats
from strategies import preset_clusters, preset_networks, spec_floats

from dnnbench import presets
from dnnbench.model import predict
from dnnbench.model.stragglers import expected_max_standard_normal, straggler_factor
from dnnbench.specs import Cluster, Configuration


def _exact_expected_max(n: int) -> float:
    """E[max of n standard normals] = ∫ x · n φ(x) Φ(x)^(n-1) dx, by adaptive quadrature."""
    peak = float(np.sqrt(2.0 * np.log(n)))
    value, _ = integrate.quad(lambda x: x * n * stats.norm.pdf(x) * stats.norm.cdf(x) ** (n - 1), -12.0, 12.0,
                              points=[0.0, peak], limit=500)
    return value


@pytest.mark.parametrize("n", [2, 3, 4, 7, 10, 50, 333, 5000, 10**6])
def test_expected_max_matches_quadrature(n: int) -> None:
    assert float(expected_max_standard_normal(n)) == pytest.approx(_exact_expected_max(n), abs=1e-4)


def test_expected_max_known_values_and_shape() -> None:
    assert float(expected_max_standard_normal(1)) == 0.0
    assert float(expected_max_standard_normal(0.5)) == 0.0  # fewer than one replica counts as one
    assert float(expected_max_standard_normal(2)) == pytest.approx(1.0 / np.sqrt(np.pi), abs=1e-5)  # exact
    n = np.arange(1, 2000, dtype=float)
    e = expected_max_standard_normal(n)
    assert e.shape == n.shape and np.all(np.diff(e) > 0)  # strictly increasing
    # Beyond the table it keeps growing like sqrt(2 ln n).
    big = expected_max_standard_normal(np.array([1e8, 1e10, 1e12]))
    assert np.all(np.diff(big) > 0) and big[-1] < np.sqrt(2.0 * np.log(1e12))


def test_straggler_factor_averages_jitter_over_the_push_interval() -> None:
    assert float(straggler_factor(2, 0.1, 32, 32)) == pytest.approx(1.0 + 0.1 / np.sqrt(np.pi), rel=1e-5)
    # Four independent mini-batches per push: the jitter halves.
    assert float(straggler_factor(2, 0.1, 128, 32)) == pytest.approx(1.0 + 0.05 / np.sqrt(np.pi), rel=1e-5)
    assert float(straggler_factor(1, 0.5, 32, 32)) == 1.0
    assert float(straggler_factor(64, 0.0, 32, 32)) == 1.0


def _jittery(cluster: Cluster, cv: float) -> Cluster:
    return cluster.evolve(worker=cluster.worker.evolve(step_time_cv=cv))


sync_configs = st.builds(
    lambda w, r, p, k: Configuration(workers_per_replica=w, replicas=r, ps_machines=p, push_interval_samples=k,
                                     pull_interval_samples=k, mode="sync"),
    st.integers(1, 8), st.integers(1, 64), st.integers(1, 8), st.sampled_from([1, 8, 64]))


@given(preset_networks, preset_clusters, sync_configs, st.floats(0.01, 2.0))
def test_a_synchronous_round_waits_exactly_the_straggler_part(net: str, cl: str, cfg: Configuration,
                                                              cv: float) -> None:
    n = presets.network(net)
    ds = presets.default_dataset_for(n)
    base = predict(n, presets.cluster(cl), ds, cfg)
    jit = predict(n, _jittery(presets.cluster(cl), cv), ds, cfg)
    wait = float(jit.breakdown.sync_straggler_s)
    assert float(base.breakdown.sync_straggler_s) == 0.0  # the presets are deterministic
    # Per sample of one replica, the round grows by the straggler part and nothing else: R/X = t_round / k.
    assert cfg.replicas / float(jit.samples_per_s) - cfg.replicas / float(base.samples_per_s) == pytest.approx(
        wait, rel=1e-9, abs=1e-15)
    if cfg.replicas == 1:
        assert wait == 0.0 and float(jit.samples_per_s) == float(base.samples_per_s)
    else:
        assert wait > 0.0 and float(jit.samples_per_s) < float(base.samples_per_s)


@given(preset_networks, preset_clusters, sync_configs, spec_floats(0.0, 1.0), spec_floats(0.0, 1.0))
def test_more_jitter_never_faster(net: str, cl: str, cfg: Configuration, a: float, b: float) -> None:
    n = presets.network(net)
    ds = presets.default_dataset_for(n)
    lo, hi = sorted((a, b))
    x_lo = float(predict(n, _jittery(presets.cluster(cl), lo), ds, cfg).samples_per_s)
    x_hi = float(predict(n, _jittery(presets.cluster(cl), hi), ds, cfg).samples_per_s)
    assert x_hi <= x_lo * (1 + 1e-12)


@given(preset_networks, preset_clusters, st.integers(1, 64), st.sampled_from(["overlapped", "request_reply"]),
       st.floats(0.01, 2.0))
def test_asynchronous_replicas_wait_for_no_straggler(net: str, cl: str, r: int, exchange: str, cv: float) -> None:
    n = presets.network(net)
    ds = presets.default_dataset_for(n)
    cfg = Configuration(replicas=r, ps_machines=2, mode="async", ps_exchange=exchange)
    base = predict(n, presets.cluster(cl), ds, cfg)
    jit = predict(n, _jittery(presets.cluster(cl), cv), ds, cfg)
    assert float(jit.samples_per_s) == float(base.samples_per_s)
    assert float(jit.breakdown.sync_straggler_s) == 0.0


def test_hand_computed_round() -> None:
    """Two replicas, one push per mini-batch, CV 0.1: the round's compute is 1 + 0.1/√π = 1.0564 times
    its mean, with the PS's share of the round unchanged."""
    n = presets.network("lenet5")
    cl = presets.cluster("modern-2025")
    ds = presets.default_dataset_for(n)
    cfg = Configuration(replicas=2, ps_machines=1, mode="sync", push_interval_samples=32, pull_interval_samples=32,
                        local_batch_samples=32)
    base = predict(n, cl, ds, cfg)
    jit = predict(n, _jittery(cl, 0.1), ds, cfg)
    b = base.breakdown
    # The round's mean compute per sample (no model-parallel traffic at W = 1, no copies in the presets).
    assert float(b.model_parallel_network_s) == 0.0 and float(b.compute_messages_s) == 0.0
    mean_compute = float(b.compute_s)
    assert float(jit.breakdown.sync_straggler_s) == pytest.approx(mean_compute * 0.1 / np.sqrt(np.pi), rel=1e-5)
