"""Speed-up curves as data: model-parallel, data-parallel and best-per-budget, and the Pareto front."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import checks, presets
from ..model import Prediction, evaluate
from ..specs import Cluster, Configuration, Dataset, Network


@dataclass(frozen=True)
class Curve:
    machines: np.ndarray
    speedup: np.ndarray
    epoch_time_s: np.ndarray
    workers_per_replica: np.ndarray
    replicas: np.ndarray
    ps_machines: np.ndarray
    #: p10–p90 of the speed-up (docs/model.md §12) when the worker machine has a compute error band.
    speedup_low: np.ndarray | None = None
    speedup_high: np.ndarray | None = None

    def to_dict(self) -> dict[str, list[float]]:
        return {k: np.asarray(v).tolist() for k, v in self.__dict__.items() if v is not None}


def _curve(pred: Prediction, machines: np.ndarray) -> Curve:
    band = pred.interval.get("speedup")
    return Curve(np.asarray(machines, float), pred.speedup, pred.epoch_time_s, pred.workers_per_replica,
                 pred.replicas, pred.ps_machines, *(band if band is not None else (None, None)))


def model_parallel_curve(network: Network, cluster: Cluster, dataset: Dataset, max_workers: int,
                         config: Configuration | None = None) -> Curve:
    """One replica, no PS, W = 1..max_workers machines."""
    network, cluster, dataset, config = presets.problem(network, cluster, dataset, config)
    max_workers = checks.whole_number(max_workers, "max_workers", 1, checks.MAX_BUDGET_MACHINES)
    w = np.arange(1, max_workers + 1, dtype=float)
    pred = evaluate(network, cluster, dataset, config or Configuration(), workers_per_replica=w, replicas=1.0,
                    ps_machines=0.0, interval=True)
    return _curve(pred, w)


def budget_candidates(m: float, w_axis: np.ndarray, r_axis: np.ndarray,
                      allreduce: bool = False) -> tuple[np.ndarray, ...]:
    """(W, R, P, cell) of every candidate at a budget of m machines (P = m - W·R; R = 1 also P = 0).
    With ``allreduce`` there are no PS machines: every W·R <= m with P = 0."""
    ww, rr = np.meshgrid(w_axis[w_axis <= m], r_axis[r_axis <= m], indexing="ij")
    ww, rr = ww.ravel(), rr.ravel()
    if allreduce:
        fits = ww * rr <= m
        ww, rr = ww[fits], rr[fits]
        return ww, rr, np.zeros(ww.size), np.arange(ww.size, dtype=float)
    fits = np.where(rr == 1, ww * rr <= m, ww * rr <= m - 1)  # replicas > 1 need a PS machine
    ww, rr = ww[fits], rr[fits]
    cell = np.arange(ww.size, dtype=float)
    alone = rr == 1
    w = np.concatenate([ww, ww[alone]])
    r = np.concatenate([rr, rr[alone]])
    p = np.concatenate([m - ww * rr, np.zeros(int(alone.sum()))])
    return w, r, p, np.concatenate([cell, cell[alone]])


def best_per_group(group: np.ndarray, epoch: np.ndarray, machines: np.ndarray, feasible: np.ndarray) -> np.ndarray:
    """Index of the best candidate of each group (smallest epoch time, then fewest machines);
    infeasible candidates only win groups with nothing feasible."""
    t = np.where(feasible & np.isfinite(epoch), epoch, np.inf)
    order = np.lexsort((machines, t, group))
    first = np.ones(order.size, dtype=bool)
    first[1:] = group[order][1:] != group[order][:-1]
    return order[first]


def data_parallel_curve(network: Network, cluster: Cluster, dataset: Dataset, max_machines: int,
                        config: Configuration | None = None) -> Curve:
    """Data parallelism at the configured W: for every budget m = W..max_machines the best R with the
    rest of the budget as PS machines, P = m − W·R (a lone replica with P = 0 too; with an all-reduce
    every W·R <= m and no PS), the best being the
    smallest epoch time, then the fewest machines; budgets where nothing fits have no point. The
    workbench's curve of the same name is this one at its sampled budgets (:mod:`dnnbench.face.landscape`)."""
    network, cluster, dataset, cfg = presets.problem(network, cluster, dataset, config)
    max_machines = checks.whole_number(max_machines, "max_machines", 1, checks.MAX_CURVE_MACHINES)
    w0 = np.array([float(cfg.workers_per_replica)])
    allreduce = cfg.data_parallel == "allreduce"
    parts = [budget_candidates(float(m), w0, np.arange(1, m // int(w0[0]) + 1, dtype=float), allreduce)
             for m in range(int(w0[0]), max_machines + 1)]
    if not parts:  # the configured W alone is more than the budget
        return Curve(*(np.zeros(0) for _ in range(6)))
    w = np.concatenate([q[0] for q in parts])
    r = np.concatenate([q[1] for q in parts])
    p = np.concatenate([q[2] for q in parts])
    group = np.concatenate([np.full(q[0].size, i, dtype=float) for i, q in enumerate(parts)])
    pred = evaluate(network, cluster, dataset, cfg, workers_per_replica=w, replicas=r, ps_machines=p)
    idx = best_per_group(group, pred.epoch_time_s, pred.machines, pred.feasible)
    idx = idx[pred.feasible[idx]]  # budgets where nothing fits in memory have no point
    best = evaluate(network, cluster, dataset, cfg, workers_per_replica=w[idx], replicas=r[idx], ps_machines=p[idx],
                    interval=True)
    return _curve(best, w[idx] * r[idx] + p[idx])


def best_by_budget(network: Network, cluster: Cluster, dataset: Dataset, max_machines: int,
                   config: Configuration | None = None) -> Curve:
    """The optimizer's best configuration for every budget 1..max_machines."""
    from .exact import optimize

    network, cluster, dataset, config = presets.problem(network, cluster, dataset, config)
    max_machines = checks.whole_number(max_machines, "max_machines", 1, checks.MAX_CURVE_MACHINES)
    rows = [optimize(network, cluster, dataset, n, config, top_k=1).best for n in range(1, max_machines + 1)]
    machines = np.arange(1, max_machines + 1, dtype=float)
    return Curve(machines, np.array([c.speedup for c in rows]), np.array([c.epoch_time_s for c in rows]),
                 np.array([c.workers_per_replica for c in rows], float), np.array([c.replicas for c in rows], float),
                 np.array([c.ps_machines for c in rows], float))


def pareto_front(curve: Curve, price_per_machine_hour: float = 0.0) -> dict[str, list[float]]:
    """Budgets on the front of epoch time against machines (or cost when a price is given)."""
    cost = curve.machines * price_per_machine_hour * curve.epoch_time_s / 3600.0
    key = cost if price_per_machine_hour > 0 else curve.machines
    order = np.argsort(key, kind="stable")
    front, best = [], np.inf
    for i in order:
        if curve.epoch_time_s[i] < best:
            best = curve.epoch_time_s[i]
            front.append(int(i))
    return {"machines": curve.machines[front].tolist(), "epoch_time_s": curve.epoch_time_s[front].tolist(),
            "cost": cost[front].tolist()}
