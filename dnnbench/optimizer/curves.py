"""Speed-up curves as data: model-parallel, data-parallel and best-per-budget, and the Pareto front."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import checks
from ..model import evaluate
from ..specs import Cluster, Configuration, Dataset, Network


@dataclass(frozen=True)
class Curve:
    machines: np.ndarray
    speedup: np.ndarray
    epoch_time_s: np.ndarray
    workers_per_replica: np.ndarray
    replicas: np.ndarray
    ps_machines: np.ndarray

    def to_dict(self) -> dict[str, list[float]]:
        return {k: np.asarray(v).tolist() for k, v in self.__dict__.items()}


def _curve(pred, machines) -> Curve:  # type: ignore[no-untyped-def]
    return Curve(np.asarray(machines, float), pred.speedup, pred.epoch_time_s, pred.workers_per_replica,
                 pred.replicas, pred.ps_machines)


def model_parallel_curve(network: Network, cluster: Cluster, dataset: Dataset, max_workers: int,
                         config: Configuration | None = None) -> Curve:
    """One replica, no PS, W = 1..max_workers machines."""
    network, cluster, dataset, config = checks.problem(network, cluster, dataset, config)
    max_workers = checks.whole_number(max_workers, "max_workers", 1, checks.MAX_BUDGET_MACHINES)
    w = np.arange(1, max_workers + 1, dtype=float)
    pred = evaluate(network, cluster, dataset, config or Configuration(), workers_per_replica=w, replicas=1.0,
                    ps_machines=0.0)
    return _curve(pred, w)


def data_parallel_curve(network: Network, cluster: Cluster, dataset: Dataset, max_machines: int,
                        config: Configuration | None = None) -> Curve:
    """W fixed (from ``config``); for each replica count R the fewest PS machines that keep the PS from
    binding (PS provisioning), plotted against W·R + P. The curve ends where the budget can no longer
    provision the PS for one more replica."""
    network, cluster, dataset, cfg = checks.problem(network, cluster, dataset, config)
    max_machines = checks.whole_number(max_machines, "max_machines", 1, checks.MAX_CURVE_MACHINES)
    w = cfg.workers_per_replica
    r = np.arange(1, max(1, (max_machines - 1) // w) + 1, dtype=float)
    p = np.arange(1, max_machines + 1, dtype=float)
    rr, pp = np.meshgrid(r, p, indexing="ij")
    pred = evaluate(network, cluster, dataset, cfg, workers_per_replica=float(w), replicas=rr, ps_machines=pp)
    ok = (w * rr + pp <= max_machines) & (pred.infeasible_code == 0)
    x = np.where(ok, pred.samples_per_s, 0.0)
    best_x = x.max(axis=1)
    # Asynchronous bounds are linear in P, so throughput saturates exactly once the PS stops binding;
    # synchronous rounds keep gaining a little from every PS machine: there, within 1 % of the best.
    tol = 1e-12 if cfg.mode == "async" else 1e-2
    enough = ok & (x >= best_x[:, None] * (1.0 - tol))
    best_p = p[np.argmax(enough, axis=1)]
    # Keep R while more replicas still pay within the budget (past that the PS cannot be provisioned).
    keep = (best_x > 0) & (best_x >= np.maximum.accumulate(best_x))
    r, best_p = r[keep], best_p[keep]
    best = evaluate(network, cluster, dataset, cfg, workers_per_replica=float(w), replicas=r, ps_machines=best_p)
    return _curve(best, w * r + best_p)


def best_by_budget(network: Network, cluster: Cluster, dataset: Dataset, max_machines: int,
                   config: Configuration | None = None) -> Curve:
    """The optimizer's best configuration for every budget 1..max_machines."""
    from .exact import optimize

    network, cluster, dataset, config = checks.problem(network, cluster, dataset, config)
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
