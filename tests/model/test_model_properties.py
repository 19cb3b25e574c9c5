"""Property-based invariants of the performance model (Hypothesis)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import preset_clusters, preset_networks, scaled_cluster

from dnnbench import presets
from dnnbench.model import evaluate, predict
from dnnbench.specs import Configuration

configs = st.builds(
    lambda w, r, p, k, mode, part, overlap, exchange: Configuration(
        workers_per_replica=w, replicas=r, ps_machines=max(p, 1 if r > 1 else 0), push_interval_samples=k,
        pull_interval_samples=k * 8, mode=mode, partitioning=part, overlap=overlap, ps_exchange=exchange),
    st.integers(1, 16), st.integers(1, 32), st.integers(0, 16), st.sampled_from([1, 8, 64]),
    st.sampled_from(["async", "sync"]), st.sampled_from(["feature-map", "spatial", "auto"]),
    st.sampled_from([0.0, 0.5, 1.0]), st.sampled_from(["overlapped", "request_reply"]),
)
factor = st.floats(1.0, 16.0)


def _flat(d: dict, prefix: str = "") -> dict:
    out: dict = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        elif isinstance(v, (list, tuple)):  # approx takes flat mappings of scalars only (pytest >= 9.2)
            out.update(_flat({f"{k}[{i}]": x for i, x in enumerate(v)}, prefix))
        else:
            out[prefix + k] = v
    return out


def _time(net: str, cluster, cfg: Configuration) -> float:  # type: ignore[no-untyped-def]
    n = presets.network(net)
    return float(predict(n, cluster, presets.default_dataset_for(n), cfg).epoch_time_s)


@given(preset_networks, preset_clusters, configs, factor)
def test_more_bandwidth_never_slower(net: str, cl: str, cfg: Configuration, f: float) -> None:
    base = presets.cluster(cl)
    assert _time(net, scaled_cluster(base, bandwidth=f), cfg) <= _time(net, base, cfg) * (1 + 1e-12)


@given(preset_networks, preset_clusters, configs, factor)
def test_faster_macs_never_slower(net: str, cl: str, cfg: Configuration, f: float) -> None:
    base = scaled_cluster(presets.cluster(cl))
    assert _time(net, scaled_cluster(base, mac=1 / f), cfg) <= _time(net, base, cfg) * (1 + 1e-12)


@given(preset_networks, preset_clusters, configs, st.integers(1, 8))
def test_more_ps_machines_never_slower(net: str, cl: str, cfg: Configuration, extra: int) -> None:
    cluster = presets.cluster(cl)
    if cfg.ps_machines == 0:
        cfg = cfg.evolve(ps_machines=1)
    more = cfg.evolve(ps_machines=cfg.ps_machines + extra)
    assert _time(net, cluster, more) <= _time(net, cluster, cfg) * (1 + 1e-12)


@given(preset_networks, preset_clusters, configs)
def test_doubling_every_time_constant_doubles_epoch_time(net: str, cl: str, cfg: Configuration) -> None:
    base = scaled_cluster(presets.cluster(cl))
    slow = scaled_cluster(base, bandwidth=0.5, mac=2.0, elem=2.0, latency=2.0)
    assert _time(net, slow, cfg) == pytest.approx(2.0 * _time(net, base, cfg), rel=1e-9)


@given(preset_networks, preset_clusters, st.integers(1, 8))
def test_unlimited_network_and_ps_make_data_parallelism_linear(net: str, cl: str, w: int) -> None:
    cluster = scaled_cluster(presets.cluster(cl), bandwidth=1e9, latency=0.0)
    # Without nodes: on nodes a device's share of the node's NICs changes with W·R (test_model_devices.py).
    cluster = cluster.evolve(ps=cluster.ps.evolve(cores=4096, thread_contention=0.0), node=None)
    n = presets.network(net)
    r = np.arange(1, 65, dtype=float)
    pred = evaluate(n, cluster, presets.default_dataset_for(n), Configuration(workers_per_replica=w),
                    replicas=r, ps_machines=r * 64)
    np.testing.assert_allclose(pred.speedup / pred.speedup[0], r, rtol=1e-9)


@given(preset_networks, preset_clusters)
def test_model_parallel_speedup_without_communication(net: str, cl: str) -> None:
    free = scaled_cluster(presets.cluster(cl), bandwidth=1e9, latency=0.0)
    no_cache = free.evolve(worker=free.worker.evolve(cache_speedup=1.0))
    n = presets.network(net)
    w = np.arange(1, 33, dtype=float)
    ds = presets.default_dataset_for(n)
    flat = evaluate(n, no_cache, ds, Configuration(), workers_per_replica=w, replicas=1.0, ps_machines=0.0)
    # Without the cache effect the speed-up is W at most (less where partitions are uneven)...
    assert np.all(flat.speedup <= w * (1 + 1e-9))
    assert flat.speedup[1] > 1.0


def test_cache_effect_gives_super_linear_model_parallel_speedup() -> None:
    # An MLP whose 4096x4096 layers (64 MiB each) fit adam-2014's 40 MiB of L3 once split over 2+
    # machines: Adam's super-linear scaling (OSDI'14 §4), here with free communication.
    from dnnbench.specs import Network

    free = scaled_cluster(presets.cluster("adam-2014"), bandwidth=1e9, latency=0.0)
    n = Network.build({"name": "mlp", "layers": [{"kind": "input", "shape": [4096]},
                                                 {"kind": "fc", "out_features": 4096, "activation": "relu"},
                                                 {"kind": "fc", "out_features": 4096, "activation": "relu"},
                                                 {"kind": "fc", "out_features": 10}]})
    w = np.arange(1, 17, dtype=float)
    cached = evaluate(n, free, presets.dataset("mnist"), Configuration(), workers_per_replica=w,
                      replicas=1.0, ps_machines=0.0)
    assert np.all(cached.speedup[1:] > w[1:] * 1.2)


@given(preset_networks, preset_clusters, st.lists(configs, min_size=1, max_size=6))
def test_vectorised_equals_single(net: str, cl: str, cfgs: list[Configuration]) -> None:
    n, cluster = presets.network(net), presets.cluster(cl)
    ds = presets.default_dataset_for(n)
    for mode, exchange in (("async", "overlapped"), ("async", "request_reply"), ("sync", "overlapped")):
        group = [c.evolve(mode=mode, partitioning="feature-map", overlap=0.0, push_interval_samples=8,
                          pull_interval_samples=64, ps_exchange=exchange) for c in cfgs]
        vec = evaluate(n, cluster, ds, group[0],
                       workers_per_replica=np.array([c.workers_per_replica for c in group]),
                       replicas=np.array([c.replicas for c in group]),
                       ps_machines=np.array([c.ps_machines for c in group]))
        for i, c in enumerate(group):
            one, many = _flat(predict(n, cluster, ds, c).item()), _flat(vec.item(i))
            numbers = {k for k, v in one.items() if isinstance(v, float | int) and not isinstance(v, bool)}
            assert {k: many[k] for k in numbers} == pytest.approx({k: one[k] for k in numbers}, rel=1e-12)
            assert {k: v for k, v in many.items() if k not in numbers} == {k: v for k, v in one.items()
                                                                          if k not in numbers}


def test_adam_studies_scale_as_the_modelled_system_did() -> None:
    """mnist-adam stops gaining from model parallelism after a few machines; imagenet22k-adam keeps going."""
    from dnnbench.optimizer import model_parallel_curve

    cl = presets.cluster("adam-2014")
    mnist = model_parallel_curve(presets.network("mnist-adam"), cl, presets.dataset("mnist"), 32)
    imnet = model_parallel_curve(presets.network("imagenet22k-adam"), cl, presets.dataset("imagenet22k"), 32)
    peak_w = int(np.argmax(mnist.speedup)) + 1
    assert 2 <= peak_w <= 8
    assert mnist.speedup.max() < 3.0
    assert mnist.speedup[-1] < mnist.speedup.max()
    assert np.all(np.diff(imnet.speedup[:16]) > 0)
    assert imnet.speedup[15] > 12.0
