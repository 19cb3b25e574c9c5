"""The optimizer is exact: equal to brute-force enumeration on every preset for every budget <= 64."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dnnbench import presets
from dnnbench.errors import SpecError
from dnnbench.optimizer import best_by_budget, brute_force, optimize, pareto_front
from dnnbench.specs import Configuration

NETWORKS = presets.names("networks")
CLUSTERS = presets.names("clusters")


@pytest.mark.parametrize("mode", ["async", "sync", "sync_jitter", "request_reply", "shared_host"])
@pytest.mark.parametrize("cluster", CLUSTERS)
@pytest.mark.parametrize("network", NETWORKS)
def test_equals_brute_force(network: str, cluster: str, mode: str) -> None:
    net, cl = presets.network(network), presets.cluster(cluster)
    if mode == "sync_jitter":  # rounds that wait for their slowest replica (docs/model.md §6)
        cl = cl.evolve(worker=cl.worker.evolve(step_time_cv=0.3))
    if mode == "shared_host":  # processes on one 8-core host: contention and woken ranks waiting (§4)
        cl = cl.evolve(shared_host={"cores": 8, "wakeup_delay_s": 2e-3, "background_threads": 0.5})
    ds = presets.default_dataset_for(net)
    # request_reply: asynchronous replicas sharing the PS as a closed queueing network (no closed form).
    exchange = "request_reply" if mode == "request_reply" else "overlapped"
    cfg = Configuration(mode="async" if mode in ("async", "request_reply") else "sync", ps_exchange=exchange)
    budgets = range(1, 65) if mode == "async" else (1, 2, 3, 5, 8, 13, 21, 34, 55, 64)
    for n in budgets:
        t_brute, _ = brute_force(net, cl, ds, n, cfg)
        if not np.isfinite(t_brute):  # nothing fits in memory: the optimizer says so
            with pytest.raises(SpecError, match="no feasible configuration"):
                optimize(net, cl, ds, n, cfg)
            continue
        res = optimize(net, cl, ds, n, cfg, top_k=3)
        assert res.best.epoch_time_s == pytest.approx(t_brute, rel=1e-12), (network, cluster, mode, n)
        b = res.best
        assert b.workers_per_replica * b.replicas + b.ps_machines + b.machines_idle == n


def test_result_reports_top_counts_and_explanation() -> None:
    net, cl, ds = presets.network("imagenet22k-adam"), presets.cluster("adam-2014"), presets.dataset("imagenet22k")
    res = optimize(net, cl, ds, 120, top_k=4)
    times = [c.epoch_time_s for c in res.top]
    assert times == sorted(times) and len(times) == 4
    assert res.evaluated > 0
    assert "binding bound" in res.explanation and res.best.bottleneck in res.explanation
    data = res.to_dict()
    for key in ("workers_per_replica", "replicas", "ps_machines", "epoch_time_s", "speedup", "bottleneck"):
        assert key in data["best"]


def test_memory_limits_are_reasons() -> None:
    net, ds = presets.network("imagenet22k-adam"), presets.dataset("imagenet22k")
    edge = presets.cluster("edge-wifi")  # 4 GiB boards cannot hold 2.1 B weights unless split
    res = optimize(net, edge, ds, 17)
    assert res.infeasible.get("worker memory", 0) > 0
    # 2 x 8.5 GB of weights and deltas: at least 4 boards per replica.
    assert res.best.workers_per_replica >= 4


def test_searches_update_batch_and_partitioning_sets() -> None:
    net, cl, ds = presets.network("mnist-adam"), presets.cluster("adam-2014"), presets.dataset("mnist")
    res = optimize(net, cl, ds, 32, push_intervals=[1, 32, 256], partitionings=["feature-map", "spatial"])
    single = [optimize(net, cl, ds, 32, Configuration(push_interval_samples=k, partitioning=p)).best.epoch_time_s
              for k in (1, 32, 256) for p in ("feature-map", "spatial")]
    assert res.best.epoch_time_s == pytest.approx(min(single), rel=1e-12)


def test_bad_budget_is_a_spec_error() -> None:
    net, cl, ds = presets.network("lenet5"), presets.cluster("adam-2014"), presets.dataset("mnist")
    for bad in (0, -3, 2.5):
        with pytest.raises(SpecError, match="machines"):
            optimize(net, cl, ds, bad)  # type: ignore[arg-type]


def test_best_by_budget_and_pareto_front() -> None:
    net, cl, ds = presets.network("mnist-adam"), presets.cluster("modern-2025"), presets.dataset("mnist")
    curve = best_by_budget(net, cl, ds, 24)
    assert np.all(np.diff(curve.epoch_time_s) <= 1e-12)  # a bigger budget never hurts
    front = pareto_front(curve, price_per_machine_hour=3.0)
    assert len(front["machines"]) >= 1
    assert all(np.diff(front["epoch_time_s"]) < 0)


@pytest.mark.parametrize("mode", ["async", "sync"])
def test_the_data_parallel_curve_is_the_best_r_and_p_at_the_configured_w(mode: str) -> None:
    from dnnbench.model import evaluate
    from dnnbench.optimizer import data_parallel_curve
    from dnnbench.optimizer.brute import all_configurations

    net, cl, ds = presets.network("imagenet22k-adam"), presets.cluster("adam-2014"), presets.dataset("imagenet22k")
    cfg = Configuration(mode=mode, workers_per_replica=2)
    c = data_parallel_curve(net, cl, ds, 40, cfg)
    assert np.all(c.workers_per_replica == 2) and c.machines.max() <= 40
    for i, m in enumerate(c.machines):
        w, r, p = all_configurations(int(m))
        at_w = w == 2
        pred = evaluate(net, cl, ds, cfg, workers_per_replica=w[at_w], replicas=r[at_w], ps_machines=p[at_w])
        best = np.min(np.where(pred.feasible, pred.epoch_time_s, np.inf))
        assert c.epoch_time_s[i] == pytest.approx(best, rel=1e-12), m


def test_the_workbench_draws_the_same_data_parallel_curve() -> None:
    from dnnbench.face import landscape
    from dnnbench.face.state import WorkbenchState
    from dnnbench.optimizer import data_parallel_curve

    state = WorkbenchState.from_presets("mnist-adam", "adam-2014").evolve(budget_machines=48)
    state = state.evolve(configuration=state.configuration.evolve(workers_per_replica=2))
    views = landscape.compute(state).data_parallel
    core = data_parallel_curve(state.network, state.cluster, state.dataset, 48, state.configuration)
    assert np.isfinite(views.epoch_time_s).sum() >= 8
    for m, t in zip(views.machines, views.epoch_time_s, strict=True):
        if np.isfinite(t):
            assert t == pytest.approx(float(core.epoch_time_s[core.machines == m][0]), rel=1e-12)


@pytest.mark.parametrize("mode", ["async", "sync"])
def test_pruning_by_the_throughput_bound_stays_exact(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from dnnbench.optimizer import exact

    monkeypatch.setattr(exact, "HEAD_WORKERS", 2)  # prune from W = 3 on, so small budgets exercise it
    cfg = Configuration(mode=mode)
    pruned = 0
    for network in NETWORKS:
        for cluster in CLUSTERS:
            net, cl = presets.network(network), presets.cluster(cluster)
            ds = presets.default_dataset_for(net)
            for n in (3, 7, 16, 40, 64):
                t_brute, _ = brute_force(net, cl, ds, n, cfg)
                if not np.isfinite(t_brute):
                    continue
                res = optimize(net, cl, ds, n, cfg)
                pruned += res.pruned_workers_per_replica
                assert res.best.epoch_time_s == pytest.approx(t_brute, rel=1e-12), (network, cluster, n)
    assert pruned > 0


def test_throughput_bound_is_an_upper_bound() -> None:
    from dnnbench.model import evaluate
    from dnnbench.optimizer.brute import all_configurations
    from dnnbench.optimizer.exact import _throughput_upper_bound

    for network in NETWORKS:
        for cluster in CLUSTERS:
            net, cl = presets.network(network), presets.cluster(cluster)
            w, r, p = all_configurations(24)
            pred = evaluate(net, cl, presets.default_dataset_for(net), Configuration(), workers_per_replica=w,
                            replicas=r, ps_machines=p)
            ub = _throughput_upper_bound(net, cl, Configuration(), w, 24)
            assert np.all(pred.samples_per_s <= ub * (1 + 1e-12))


@st.composite
def shared_host_problems(draw: Any) -> tuple[Any, Any, Configuration, int]:
    """A preset network on a preset cluster whose machines share one host (every optional part of the
    shared-host layer drawn), in any mode; a budget up to 24 machines."""
    net = presets.network(draw(st.sampled_from(["lenet5", "mnist-adam", "alexnet"])))
    cl = presets.cluster(draw(st.sampled_from(CLUSTERS)))
    cores = draw(st.integers(1, 16))
    cl = cl.evolve(worker=cl.worker.evolve(cores=draw(st.integers(1, 4)),
                                           step_time_cv=draw(st.sampled_from([0.0, 0.2]))),
                   ps=cl.ps.evolve(cores=draw(st.integers(1, 4))), shared_host={
                       "cores": cores, "background_threads": draw(st.sampled_from([0.0, 0.5, 2.0])),
                       "corun_slowdown": draw(st.sampled_from([0.0, 0.1, 0.4])),
                       "wakeup_delay_s": draw(st.sampled_from([0.0, 1e-3, 4e-3]))})
    mode, exchange = draw(st.sampled_from([("async", "overlapped"), ("async", "request_reply"),
                                           ("sync", "overlapped")]))
    cfg = Configuration(mode=mode, ps_exchange=exchange, threads=draw(st.sampled_from([None, 1, 2])),
                        push_interval_samples=draw(st.sampled_from([1, 32])))
    return net, cl, cfg, draw(st.integers(1, 24))


@settings(max_examples=60, deadline=None)
@given(shared_host_problems())
def test_shared_host_optimum_equals_brute_force_in_every_mode(problem: tuple[Any, Any, Configuration, int]) -> None:
    """The closed form's premise fails on a shared host (a machine more can slow the others): the
    optimizer searches exhaustively there, and says so."""
    net, cl, cfg, n = problem
    ds = presets.default_dataset_for(net)
    t_brute, _ = brute_force(net, cl, ds, n, cfg)
    if not np.isfinite(t_brute):
        with pytest.raises(SpecError, match="no feasible configuration"):
            optimize(net, cl, ds, n, cfg)
    else:
        res = optimize(net, cl, ds, n, cfg, top_k=2)
        assert res.method == "exhaustive"
        assert res.best.epoch_time_s == pytest.approx(t_brute, rel=1e-12)
    assert optimize("lenet5", "adam-2014", None, 8).method == "closed form"


@st.composite
def problems_with_every_part(draw: Any) -> tuple[Any, Any, Any, Configuration, int]:
    """A preset or random network (a chain or a graph of every kind) on a cluster and a configuration
    with every optional part drawn (tests/strategies.py), and a budget up to 24 machines."""
    from strategies import clusters_with_every_part, configurations_with_every_part, graph_network_dicts, network_dicts

    from dnnbench.specs import Network

    source = draw(st.sampled_from(["preset", "chain", "graph"]))
    if source == "preset":
        net = presets.network(draw(st.sampled_from(["lenet5", "mnist-adam", "alexnet", "resnet50", "mobilenet-v2",
                                                    "gpt2-small:seq_len=64"])))
    else:
        net = Network.build(draw(network_dicts() if source == "chain" else graph_network_dicts()))
    dataset = presets.dataset("mnist") if net.name.startswith("random") else presets.default_dataset_for(net)
    cluster = draw(clusters_with_every_part())
    acc = cluster.worker.accelerator
    precisions = acc.peak_flops_per_s.supported if acc is not None else ("fp32",)
    return (net, cluster, dataset, draw(configurations_with_every_part(precisions)), draw(st.integers(1, 24)))


@settings(max_examples=150, deadline=None)
@given(problems_with_every_part())
def test_the_optimum_equals_brute_force_for_every_part_of_the_specs(problem: tuple[Any, ...]) -> None:
    net, cl, ds, cfg, n = problem
    t_brute, _ = brute_force(net, cl, ds, n, cfg)
    if not np.isfinite(t_brute):
        with pytest.raises(SpecError, match="no feasible configuration"):
            optimize(net, cl, ds, n, cfg)
        return
    res = optimize(net, cl, ds, n, cfg)
    assert res.best.epoch_time_s == pytest.approx(t_brute, rel=1e-12), (res.method, res.best)
    assert res.best.data_parallel == cfg.data_parallel
    expected = ("exhaustive" if cl.shared_host is not None else
                "closed form; all-reduce exhaustive" if cfg.data_parallel == "allreduce" else "closed form")
    assert res.method == expected


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(["dgx1-v100", "dgx-a100", "commodity-t4"]),
       st.sampled_from(["resnet50", "gpt2-small:seq_len=128", "lenet5"]), st.integers(1, 24),
       st.sampled_from(["sgd", "adam"]))
def test_precision_batch_bucket_and_zero_choices_equal_brute_force(cl: str, net: str, n: int, opt: str) -> None:
    """The best over precisions, per-device mini-batches, bucket sizes and ZeRO stages equals brute force
    over every combination (each searched over every W·R + P <= N), memory deciding what fits."""
    from dnnbench.specs import Configuration

    cluster = presets.cluster(cl)
    acc = cluster.worker.accelerator
    assert acc is not None
    precisions, batches, buckets, zeros = list(acc.peak_flops_per_s.supported), [16, 128], [2**20, 25 * 2**20], [0, 3]
    base = Configuration(optimizer=opt)
    best = np.inf
    for prec, b, bucket, zero in itertools.product(precisions, batches, buckets, zeros):
        for dp in ("ps", "allreduce"):
            if dp == "ps" and (zero or bucket != buckets[0]):
                continue
            cfg = base.evolve(precision=prec, local_batch_samples=b, data_parallel=dp, zero_stage=zero,
                              push_interval_samples=b if dp == "allreduce" else base.push_interval_samples,
                              allreduce={"bucket_bytes": bucket})
            best = min(best, brute_force(net, cluster, None, n, cfg)[0])
    if not np.isfinite(best):
        with pytest.raises(SpecError, match="no feasible configuration"):
            optimize(net, cluster, None, n, base, data_parallels=["ps", "allreduce"], allreduce_algorithms=["ring"],
                     precisions=precisions, local_batches=batches, bucket_sizes_bytes=buckets, zero_stages=zeros)
        return
    res = optimize(net, cluster, None, n, base, data_parallels=["ps", "allreduce"], allreduce_algorithms=["ring"],
                   precisions=precisions, local_batches=batches, bucket_sizes_bytes=buckets, zero_stages=zeros)
    assert res.best.epoch_time_s == pytest.approx(best, rel=1e-12)
    again = res.configuration(base)
    assert predict_epoch(net, cluster, again) == pytest.approx(best, rel=1e-12)


def predict_epoch(net: str, cluster: Any, cfg: Any) -> float:
    from dnnbench.model import predict

    return float(predict(net, cluster, None, cfg).epoch_time_s)
