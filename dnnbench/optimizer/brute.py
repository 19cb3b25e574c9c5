"""Brute-force enumeration of every (W, R, P) with W·R + P <= N: the reference the optimizer is tested
against, and the baseline of its benchmark. O(N^2 log N) configurations."""

from __future__ import annotations

import numpy as np

from ..model import evaluate
from ..specs import Cluster, Configuration, Dataset, Network


def all_configurations(n: int, allreduce: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every (W, R, P) with W·R + P <= n, R >= 1, and P >= 1 unless R = 1; with ``allreduce``, every
    (W, R, 0) with W·R <= n (the replicas reduce among themselves)."""
    if allreduce:
        w_pairs, r_pairs = allreduce_pairs(n)
        return w_pairs, r_pairs, np.zeros_like(w_pairs)
    ws, rs, ps = [], [], []
    for w in range(1, n + 1):
        for r in range(1, n // w + 1):
            p_lo = 0 if r == 1 else 1
            p = np.arange(p_lo, n - w * r + 1)
            ws.append(np.full(p.size, w))
            rs.append(np.full(p.size, r))
            ps.append(p)
    return np.concatenate(ws).astype(float), np.concatenate(rs).astype(float), np.concatenate(ps).astype(float)


def allreduce_pairs(n: int, w_lo: int = 1, w_hi: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Every (W, R) with W·R <= n and ``w_lo`` <= W <= ``w_hi``: about n·ln(n) pairs."""
    w_hi = n if w_hi is None else min(n, w_hi)
    ws = np.arange(w_lo, w_hi + 1)
    counts = n // ws
    w = np.repeat(ws, counts).astype(float)
    starts = np.cumsum(counts) - counts
    r = (np.arange(int(counts.sum())) - np.repeat(starts, counts) + 1).astype(float)
    return w, r


def brute_force(network: Network, cluster: Cluster, dataset: Dataset, budget_machines: int,
                config: Configuration | None = None) -> tuple[float, tuple[int, int, int]]:
    """(best epoch time, (W, R, P)) over every feasible configuration of the budget."""
    config = config or Configuration()
    w, r, p = all_configurations(budget_machines, allreduce=config.data_parallel == "allreduce")
    pred = evaluate(network, cluster, dataset, config, workers_per_replica=w, replicas=r, ps_machines=p)
    t = np.where(pred.infeasible_code == 0, pred.epoch_time_s, np.inf)
    i = int(np.argmin(t))
    return float(t[i]), (int(w[i]), int(r[i]), int(p[i]))
