"""Brute-force enumeration of every (W, R, P) with W·R + P <= N: the reference the optimizer is tested
against, and the baseline of its benchmark. O(N^2 log N) configurations."""

from __future__ import annotations

import numpy as np

from ..model import evaluate
from ..specs import Cluster, Configuration, Dataset, Network


def all_configurations(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every (W, R, P) with W·R + P <= n, R >= 1, and P >= 1 unless R = 1."""
    ws, rs, ps = [], [], []
    for w in range(1, n + 1):
        for r in range(1, n // w + 1):
            p_lo = 0 if r == 1 else 1
            p = np.arange(p_lo, n - w * r + 1)
            ws.append(np.full(p.size, w))
            rs.append(np.full(p.size, r))
            ps.append(p)
    return np.concatenate(ws).astype(float), np.concatenate(rs).astype(float), np.concatenate(ps).astype(float)


def brute_force(network: Network, cluster: Cluster, dataset: Dataset, budget_machines: int,
                config: Configuration | None = None) -> tuple[float, tuple[int, int, int]]:
    """(best epoch time, (W, R, P)) over every feasible configuration of the budget."""
    w, r, p = all_configurations(budget_machines)
    pred = evaluate(network, cluster, dataset, config or Configuration(), workers_per_replica=w, replicas=r,
                    ps_machines=p)
    t = np.where(pred.infeasible_code == 0, pred.epoch_time_s, np.inf)
    i = int(np.argmin(t))
    return float(t[i]), (int(w[i]), int(r[i]), int(p[i]))
