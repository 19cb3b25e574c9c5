"""Heterogeneous placement with an assignment solver, and sweeps locally and on Dask distributed."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from dnnbench import presets
from dnnbench.errors import SpecError
from dnnbench.optimizer import optimize, optimize_heterogeneous, place, sweep
from dnnbench.specs import Cluster, Configuration


def mixed(old: int, new: int) -> Cluster:
    base, mod = presets.cluster("adam-2014"), presets.cluster("modern-2025")
    return base.evolve(machines=old + new, classes=[
        {"name": "old", "count": old, "machine": base.worker.to_dict(), "nic": base.worker_nic.to_dict()},
        {"name": "new", "count": new, "machine": mod.worker.to_dict(), "nic": mod.worker_nic.to_dict()},
    ])


def test_uniform_classes_cost_nothing() -> None:
    base = presets.cluster("adam-2014")
    same = base.evolve(machines=10, classes=[
        {"name": "a", "count": 6, "machine": base.worker.to_dict(), "nic": base.worker_nic.to_dict()},
        {"name": "b", "count": 4, "machine": base.worker.to_dict(), "nic": base.worker_nic.to_dict()}])
    net, ds = presets.network("mnist-adam"), presets.dataset("mnist")
    pl = place(net, same, ds, Configuration(workers_per_replica=2, replicas=3, ps_machines=4))
    assert pl.heterogeneity_cost == pytest.approx(0.0, abs=1e-9)


def test_placement_beats_every_other_assignment() -> None:
    # Exhaustive check on a small case: every choice of PS machines and every split of the 15 shards
    # of mnist-adam (15.4 MB of weights in 1 MiB shards) over them.
    from dnnbench.model import evaluate
    from dnnbench.optimizer.hetero import place_shards

    net, ds = presets.network("mnist-adam"), presets.dataset("mnist")
    cl = mixed(5, 2)
    cfg = Configuration(workers_per_replica=1, replicas=5, ps_machines=2)
    pl = place(net, cl, ds, cfg)
    rates = {}
    for c in cl.classes:
        one = cl.evolve(worker=c.machine, worker_nic=c.nic, ps=c.machine, ps_nic=c.nic, classes=())
        b = evaluate(net, one, ds, cfg).bounds_samples_per_s
        rates[c.name] = (5 / float(b["replicas"]),
                         min(float(b["ps_network_in"]), float(b["ps_network_out"]), float(b["ps_compute"])) / 2)
    machines = ["old"] * 5 + ["new"] * 2
    best = 0.0
    for ps in set(itertools.combinations(machines, 2)):
        rest = list(machines)
        for m in ps:
            rest.remove(m)
        x_rep = sum(1 / rates[m][0] for m in rest)
        for n0 in range(16):
            loads = [(n0, rates[ps[0]][1]), (15 - n0, rates[ps[1]][1])]
            x_ps = min(c * 15 / n for n, c in loads if n)
            best = max(best, min(x_rep, x_ps))
    assert pl.samples_per_s == pytest.approx(best, rel=1e-9)
    assert list(place_shards(__import__("numpy").array([1.0, 3.0]), 8)) == [2, 6]


def test_optimize_heterogeneous_and_errors() -> None:
    net, ds = presets.network("mnist-adam"), presets.dataset("mnist")
    best = optimize_heterogeneous(net, mixed(6, 2), ds)
    assert best.workers_per_replica * best.replicas + best.ps_machines == 8
    with pytest.raises(SpecError, match="heterogeneous"):
        place(net, presets.cluster("adam-2014"), ds, Configuration())
    with pytest.raises(SpecError, match="machines"):
        mixed(2, 2).evolve(machines=5)


def test_sweep_local_and_on_dask() -> None:
    from distributed import Client, LocalCluster

    nets, clusters, budgets = ["lenet5", "mnist-adam"], ["adam-2014", "edge-wifi"], [4, 16]
    local = sweep(nets, clusters, budgets, progress=False)
    assert len(local) == 8
    direct = optimize(presets.network("mnist-adam"), presets.cluster("edge-wifi"), presets.dataset("mnist"), 16)
    key = ("mnist-adam", "edge-wifi", 16)
    row = next(r for r in local if (r["network"], r["cluster"], r["budget_machines"]) == key)
    assert row["epoch_time_s"] == pytest.approx(direct.best.epoch_time_s, rel=1e-12)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as lc, \
            Client(lc) as client:
        remote = sweep(nets, clusters, budgets, scheduler=client, chunk_size=3, progress=False)
    assert [r["epoch_time_s"] for r in remote] == pytest.approx([r["epoch_time_s"] for r in local], rel=1e-12)


@st.composite
def class_problems(draw: Any) -> tuple[Any, Cluster, Configuration]:
    """2-3 machine classes of drawn machines and NICs (every optional part, tests/strategies.py), at
    most 6 machines, and an asynchronous (W, R, P ≤ 3) that fits."""
    from strategies import machine_changes, nic_changes

    # Classes of CPU machines: every machine may serve as a PS (a machine that computes on an
    # accelerator alone has no CPU rate, so placement never makes it one).
    base = presets.cluster(draw(st.sampled_from([c for c in presets.names("clusters")
                                                 if presets.cluster(c).worker.has_cpu_rate])))
    classes = []
    for i in range(draw(st.integers(2, 3))):
        classes.append({"name": f"c{i}", "count": draw(st.integers(1, 3)),
                        "machine": draw(machine_changes(base.worker)).to_dict(),
                        "nic": draw(nic_changes(base.worker_nic)).to_dict()})
    n = sum(c["count"] for c in classes)
    assume(n <= 6)  # the brute force below tries every arrangement: 6! at most
    cluster = base.evolve(machines=n, classes=classes)
    w = draw(st.integers(1, 2))
    r = draw(st.integers(1, max(1, (n - 1) // w)))
    p = draw(st.integers(1, min(3, n - w * r))) if n - w * r >= 1 else 0  # shard splits: C(S + 2, 2) at most
    assume(w * r + p <= n and (p >= 1 or r == 1))
    exchange = draw(st.sampled_from(["overlapped", "request_reply"]))
    cfg = Configuration(workers_per_replica=w, replicas=r, ps_machines=p, ps_exchange=exchange,
                        push_interval_samples=draw(st.sampled_from([1, 32])))
    return presets.network(draw(st.sampled_from(["lenet5", "mnist-adam"]))), cluster, cfg


def _brute_placement(net: Any, cl: Cluster, cfg: Configuration) -> float:
    """The best samples/s over every assignment of machines to roles, every grouping of the workers
    into replicas and every split of the PS shards over the PS machines."""
    from dnnbench.optimizer.hetero import SHARD_BYTES, _rates

    ds = presets.default_dataset_for(net)
    w, r, p = cfg.workers_per_replica, cfg.replicas, cfg.ps_machines
    t_rep, cap = _rates(net, cl, ds, cfg, w, r, p)
    machines = [i for i, c in enumerate(cl.classes) for _ in range(c.count)]
    shards = max(1, int(np.ceil(sum(c.weights for c in net.layer_counts) * 4 / SHARD_BYTES)))
    best = 0.0
    for roles in set(itertools.permutations(machines)):
        ps, workers = roles[:p], roles[p:p + w * r]
        x_rep = sum(1.0 / max(t_rep[m] for m in workers[j * w:(j + 1) * w]) for j in range(r))
        x_ps = np.inf
        if p:
            x_ps = 0.0
            for cut in itertools.combinations(range(shards + p - 1), p - 1):  # compositions of the shards
                edges = (-1, *cut, shards + p - 1)
                loads = [edges[i + 1] - edges[i] - 1 for i in range(p)]
                x_ps = max(x_ps, min(cap[m] * shards / n_i for m, n_i in zip(ps, loads, strict=True) if n_i))
        best = max(best, min(x_rep, x_ps))
    return best


@settings(max_examples=40, deadline=None)
@given(class_problems())
def test_placement_is_the_best_of_every_assignment_for_drawn_classes(problem: tuple[Any, Cluster, Configuration]
                                                                       ) -> None:
    net, cl, cfg = problem
    pl = place(net, cl, presets.default_dataset_for(net), cfg)
    assert pl.samples_per_s == pytest.approx(_brute_placement(net, cl, cfg), rel=1e-9)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0.01, 100.0), min_size=1, max_size=6), st.integers(1, 40))
def test_shard_placement_equals_the_assignment_solver(capacity: list[float], shards: int) -> None:
    """The cheapest-slots placement is the assignment problem's optimum (S shards, slot j of machine i
    costing (j + 1)/c_i), solved here by scipy's linear_sum_assignment."""
    from scipy.optimize import linear_sum_assignment

    from dnnbench.optimizer.hetero import place_shards

    c = np.asarray(capacity)
    n = place_shards(c, shards)
    assert n.sum() == shards and np.all(n >= 0)
    slots = np.arange(1, shards + 1, dtype=float)
    cost = (slots[None, :] / c[:, None]).reshape(-1)
    _, cols = linear_sum_assignment(np.broadcast_to(cost, (shards, c.size * shards)))
    solved = np.bincount(cols // shards, minlength=c.size)
    used = n > 0
    assert np.max(n[used] / c[used]) == pytest.approx(np.max(solved[solved > 0] / c[solved > 0]), rel=1e-12)
