"""A woken worker waiting for a CPU of an oversubscribed shared host (``SharedHost.wakeup_delay_s``,
docs/model.md §9): where the model charges it, exactly how much, and where it must not."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import preset_clusters, preset_networks, spec_floats

from dnnbench import presets
from dnnbench.errors import SpecError
from dnnbench.model import predict
from dnnbench.model.knobs import Knobs
from dnnbench.model.shared_host import wakeup_s
from dnnbench.specs import Cluster, Configuration


def _shared(cluster: Cluster, cores: int | None, d: float, bg: float = 0.0) -> Cluster:
    """Every machine a one-core process on one host of ``cores`` cores, woken ranks waiting ``d``."""
    host = None if cores is None else {"cores": cores, "wakeup_delay_s": d, "background_threads": bg}
    return cluster.evolve(worker=cluster.worker.evolve(cores=1), ps=cluster.ps.evolve(cores=1), shared_host=host)


def _host(cluster: Cluster, **changes: float) -> Cluster:
    """``cluster`` with parts of its shared host changed."""
    assert cluster.shared_host is not None
    return cluster.evolve(shared_host=cluster.shared_host.evolve(**changes))


def _host_wakeup_s(cluster: Cluster, w: float, r: float, p: float, t: int) -> float:
    a = np.asarray
    return float(wakeup_s(cluster, Knobs(w=a(w), r=a(r), p=a(p), k_push=a(1.0), k_pull=a(1.0), threads=t,
                                         in_flight=a(float(t)), overlap=a(0.0))))


def _sync(r: int, p: int = 1, w: int = 1, k: int = 32) -> Configuration:
    return Configuration(workers_per_replica=w, replicas=r, ps_machines=p, push_interval_samples=k,
                         pull_interval_samples=k, local_batch_samples=32, mode="sync", threads=1)


def test_oversubscription_share() -> None:
    cl = _shared(presets.cluster("modern-2025"), 2, 2e-3)
    # Ranks W·R + P against 2 cores: no wait while they fit, the whole d from one rank too many.
    assert _host_wakeup_s(cl, 1.0, 1.0, 1.0, 1) == 0.0
    assert _host_wakeup_s(cl, 1.0, 2.0, 1.0, 1) == pytest.approx(2e-3)
    assert _host_wakeup_s(cl, 1.0, 8.0, 4.0, 1) == pytest.approx(2e-3)
    # Other programs' runnable threads count in proportion (a quarter of a thread: a quarter of d).
    assert _host_wakeup_s(_host(cl, background_threads=0.25), 1.0, 1.0, 1.0, 1) == pytest.approx(0.5e-3)
    # Separate machines, or d = 0: nothing.
    assert _host_wakeup_s(cl.evolve(shared_host=None), 1.0, 8.0, 1.0, 1) == 0.0
    assert _host_wakeup_s(_host(cl, wakeup_delay_s=0.0), 1.0, 8.0, 1.0, 1) == 0.0


@given(preset_networks, preset_clusters, st.integers(2, 16), st.sampled_from([1, 8, 64]), st.floats(1e-5, 1e-2))
def test_a_round_with_a_rank_too_many_waits_exactly_d(net: str, cl: str, r: int, k: int, d: float) -> None:
    n = presets.network(net)
    ds = presets.default_dataset_for(n)
    cfg = _sync(r, k=k)
    host = r  # R workers + 1 PS on R cores: one rank too many
    base = predict(n, _shared(presets.cluster(cl), host, 0.0), ds, cfg)
    wait = predict(n, _shared(presets.cluster(cl), host, d), ds, cfg)
    # R/X = t_round / k: the round grows by d, once per round, and the breakdown shows d per k samples.
    assert r / float(wait.samples_per_s) - r / float(base.samples_per_s) == pytest.approx(d / k, rel=1e-9)
    assert float(wait.breakdown.host_wakeup_s) == pytest.approx(d / k, rel=1e-12)
    assert float(base.breakdown.host_wakeup_s) == 0.0


@given(preset_networks, preset_clusters, st.integers(1, 16), st.floats(1e-5, 1e-2),
       st.sampled_from(["sync", "async_overlapped", "async_request_reply"]))
def test_no_wait_when_the_ranks_fit_or_machines_are_separate(net: str, cl: str, r: int, d: float,
                                                             mode: str) -> None:
    n = presets.network(net)
    ds = presets.default_dataset_for(n)
    cfg = _sync(r) if mode == "sync" else Configuration(
        replicas=r, ps_machines=1, mode="async", threads=1,
        ps_exchange="request_reply" if mode.endswith("request_reply") else "overlapped")
    for cluster in (_shared(presets.cluster(cl), r + 1, d), _shared(presets.cluster(cl), None, d)):
        got = predict(n, cluster, ds, cfg)
        ref = predict(n, cluster if cluster.shared_host is None else _host(cluster, wakeup_delay_s=0.0), ds, cfg)
        assert float(got.samples_per_s) == float(ref.samples_per_s)
        assert float(got.breakdown.host_wakeup_s) == 0.0


@given(preset_networks, preset_clusters, st.integers(2, 16), spec_floats(0.0, 1e-2), spec_floats(0.0, 1e-2),
       st.sampled_from(["sync", "overlapped", "request_reply"]))
def test_a_longer_wait_is_never_faster(net: str, cl: str, r: int, a: float, b: float, mode: str) -> None:
    n = presets.network(net)
    ds = presets.default_dataset_for(n)
    cfg = _sync(r) if mode == "sync" else Configuration(replicas=r, ps_machines=1, mode="async", threads=1,
                                                        ps_exchange=mode)
    lo, hi = sorted((a, b))
    x_lo = float(predict(n, _shared(presets.cluster(cl), 2, lo), ds, cfg).samples_per_s)
    x_hi = float(predict(n, _shared(presets.cluster(cl), 2, hi), ds, cfg).samples_per_s)
    assert x_hi <= x_lo * (1 + 1e-12)


def test_asynchronous_request_reply_worker_waits_d_per_exchange() -> None:
    """One asynchronous request–reply worker is the serial cycle: its cycle grows by d per push."""
    n = presets.network("lenet5")
    ds = presets.default_dataset_for(n)
    cfg = Configuration(replicas=1, ps_machines=1, mode="async", ps_exchange="request_reply", threads=1,
                        push_interval_samples=32, pull_interval_samples=32)
    cl = _shared(presets.cluster("modern-2025"), 1, 0.0)  # 2 ranks on 1 core: one too many
    base = predict(n, cl, ds, cfg)
    wait = predict(n, _host(cl, wakeup_delay_s=1e-3), ds, cfg)
    assert 1 / float(wait.samples_per_s) - 1 / float(base.samples_per_s) == pytest.approx(1e-3 / 32, rel=1e-9)


def test_model_parallelism_alone_has_no_ps_exchange_to_wait_for() -> None:
    n = presets.network("lenet5")
    ds = presets.default_dataset_for(n)
    cfg = Configuration(workers_per_replica=4, replicas=1, ps_machines=0, mode="sync", threads=1)
    cl = _shared(presets.cluster("modern-2025"), 2, 5e-3)
    assert float(predict(n, cl, ds, cfg).samples_per_s) == float(
        predict(n, _host(cl, wakeup_delay_s=0.0), ds, cfg).samples_per_s)


@pytest.mark.parametrize("value", [-1e-3, 2.0, float("nan")])
def test_a_bad_delay_names_the_field(value: float) -> None:
    data = presets.cluster("modern-2025").to_dict()
    data["shared_host"] = {"cores": 2, "wakeup_delay_s": value}
    with pytest.raises(SpecError, match="shared_host.wakeup_delay_s"):
        Cluster.build(data)


@pytest.mark.parametrize(("algorithm", "ranks", "bucket"), [("ring", 3, 2**14), ("ring", 4, 2**25),
                                                             ("tree", 4, 2**14), ("hierarchical", 3, 2**20)])
def test_an_all_reduce_step_waits_once_for_a_cpu(algorithm: str, ranks: int, bucket: int) -> None:
    net = presets.network("lenet5")
    d = 2e-3
    cfg = Configuration(data_parallel="allreduce", replicas=ranks, threads=1, local_batch_samples=32,
                        push_interval_samples=32, allreduce={"algorithm": algorithm, "bucket_bytes": bucket})
    cl = _shared(presets.cluster("modern-2025"), 2, d)
    with_d = predict(net, cl, None, cfg)
    without = predict(net, _host(cl, wakeup_delay_s=0.0), None, cfg)
    # The ranks (3 or 4) outnumber the 2 cores: the whole d, once per step of 32 samples, whatever the
    # buckets and the algorithm.
    assert float(with_d.breakdown.host_wakeup_s) == pytest.approx(d / 32, rel=1e-12)
    assert 1.0 / float(with_d.samples_per_s) == pytest.approx(1.0 / float(without.samples_per_s) + d / 32 / ranks,
                                                              rel=1e-9)
    # Ranks one per core, or no shared host at all: no wait.
    assert float(predict(net, _shared(presets.cluster("modern-2025"), ranks, d), None, cfg)
                 .breakdown.host_wakeup_s) == 0.0
    assert float(predict(net, presets.cluster("modern-2025"), None, cfg).breakdown.host_wakeup_s) == 0.0
