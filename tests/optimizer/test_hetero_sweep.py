"""Heterogeneous placement with an assignment solver, and sweeps locally and on Dask distributed."""

from __future__ import annotations

import itertools

import pytest

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
