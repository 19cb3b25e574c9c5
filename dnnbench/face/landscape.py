"""The landscape of one workbench state, from one vectorised call of the model (the workbench view model),
and one more for the other data-parallel scheme's curve.

Core code: no widget or bokeh import; the workbench, notebooks and reports share it. :func:`compute` builds the
configurations every view needs — the current one, the model-parallel curve, the data-parallel
curve, the optimal curve and the heatmap cells — concatenates them into flat W, R, P arrays,
calls :func:`dnnbench.model.evaluate` once, and slices the answer back into views. The data-parallel
curve of the scheme not configured (an all-reduce beside the PS, or the PS beside an all-reduce) takes
a second call, since the scheme is a categorical choice of the configuration.

Candidates follow the optimizer's search space (model.md §7): at a budget of m machines a (W, R)
pair gets the rest of the budget as PS machines, P = m - W·R (more PS machines never slow the
asynchronous bounds down, and the optimizer uses the whole budget too), and a single replica may
also train alone with P = 0; under an all-reduce there are no PS machines (every W·R <= m). The best
per budget is the feasible candidate with the smallest epoch
time (ties: fewer machines), as in :func:`dnnbench.optimizer.optimize`; the tests check the two agree.

Axes with more than :data:`AXIS_CAP` values are sampled geometrically (``Results.sampled``), so
very large budgets stay interactive; the "optimize" button always runs the exact optimizer.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, is_dataclass, replace
from typing import Any

import numpy as np

from dnnbench.face.state import WorkbenchState
from dnnbench.model import Prediction, evaluate
from dnnbench.optimizer.curves import Curve, best_per_group, budget_candidates

#: Axes (W, R, budgets) with more values than this are sampled geometrically.
AXIS_CAP = 128
#: Machine counts at which the optimal and data-parallel curves are evaluated (at most).
CURVE_POINTS = 16


def axis(n: int, cap: int = AXIS_CAP) -> np.ndarray:
    """1..n as floats, or ``cap`` geometrically spaced whole numbers from 1 to n (both ends kept)."""
    if n <= cap:
        return np.arange(1, n + 1, dtype=float)
    return np.unique(np.round(np.geomspace(1.0, float(n), cap)))


@dataclass(frozen=True)
class Results:
    """The views of one state. ``current`` and ``optimum`` are :meth:`Prediction.item` dicts."""

    state: WorkbenchState
    current: dict[str, Any]
    optimum: dict[str, Any] | None
    model_parallel: Curve
    data_parallel: Curve
    optimal: Curve
    optimal_bottlenecks: tuple[str, ...]  # the binding bound of each budget's best (optimal curve's points)
    grid: Prediction  # heatmap cells at the budget: the best P for every (W, R)
    sampled: bool
    evaluated: int  # configurations evaluated by the single model call
    #: The data-parallel curve of the scheme not configured (an all-reduce beside the PS, or the PS).
    data_parallel_alternative: Curve | None = None


class _Batch:
    """Collects candidate (W, R, P) triples under named blocks, for one call of the model."""

    def __init__(self) -> None:
        self.w: list[np.ndarray] = []
        self.r: list[np.ndarray] = []
        self.p: list[np.ndarray] = []
        self.group: list[np.ndarray] = []
        self.blocks: dict[str, slice] = {}
        self.size = 0

    def add(self, name: str, w: np.ndarray, r: np.ndarray, p: np.ndarray, group: np.ndarray) -> None:
        w, r, p, group = np.broadcast_arrays(*(np.asarray(a, dtype=float) for a in (w, r, p, group)))
        self.w.append(w.ravel())
        self.r.append(r.ravel())
        self.p.append(p.ravel())
        self.group.append(group.ravel())
        self.blocks[name] = slice(self.size, self.size + w.size)
        self.size += w.size


def take(pred: Any, index: Any) -> Any:
    """The sub-prediction at ``index`` (every array field of a Prediction/Breakdown indexed alike)."""
    changes: dict[str, Any] = {}
    for f in fields(pred):
        v = getattr(pred, f.name)
        if isinstance(v, np.ndarray):
            changes[f.name] = v[index]
        elif isinstance(v, dict):
            changes[f.name] = {k: (tuple(np.asarray(x)[index] for x in a) if isinstance(a, tuple)
                                   else np.asarray(a)[index]) for k, a in v.items()}
        elif is_dataclass(v):
            changes[f.name] = take(v, index)
        else:
            changes[f.name] = v
    return type(pred)(**changes)


def _curve(pred: Prediction) -> Curve:
    return Curve(pred.machines, np.where(pred.feasible, pred.speedup, np.nan),
                 np.where(pred.feasible, pred.epoch_time_s, np.nan),
                 pred.workers_per_replica, pred.replicas, pred.ps_machines)


def _banded(state: WorkbenchState, cfg: Any, curve: Curve) -> Curve:
    """``curve`` with its p10–p90 speed-up band (docs/model.md §12), evaluated again at its points only;
    unchanged when the worker has no compute error band."""
    if state.cluster.worker.compute_error is None or curve.machines.size == 0:
        return curve
    pred = evaluate(state.network, state.cluster, state.dataset, cfg, workers_per_replica=curve.workers_per_replica,
                    replicas=curve.replicas, ps_machines=curve.ps_machines, interval=True)
    lo, hi = pred.interval["speedup"]
    ok = np.isfinite(curve.speedup)
    return replace(curve, speedup_low=np.where(ok, lo, np.nan), speedup_high=np.where(ok, hi, np.nan))


def compute(state: WorkbenchState) -> Results:
    """Evaluate every view of ``state`` with one vectorised call of the model (see the module doc)."""
    cfg = state.configuration
    n = int(state.budget_machines)
    w_axis = axis(n)
    budgets = axis(n, CURVE_POINTS)
    sampled = n > AXIS_CAP
    batch = _Batch()
    batch.add("current", cfg.workers_per_replica, cfg.replicas, cfg.ps_machines, 0)
    batch.add("model_parallel", w_axis, 1, 0, np.arange(w_axis.size))
    # The heatmap is the budget-n block of the optimal sweep; smaller budgets give the optimal curve.
    for gi, m in enumerate(budgets):
        w, r, p, cell = budget_candidates(m, w_axis, w_axis, cfg.data_parallel == "allreduce")
        batch.add(f"budget{gi}", w, r, p, cell)
    r_axis = axis(max(1, n // cfg.workers_per_replica))
    dp = _data_parallel_candidates(cfg.workers_per_replica, budgets, r_axis, cfg.data_parallel == "allreduce")
    if dp is not None:
        batch.add("data_parallel", *dp)

    w_all, r_all, p_all = (np.concatenate(a) for a in (batch.w, batch.r, batch.p))
    group_all = np.concatenate(batch.group)
    pred = evaluate(state.network, state.cluster, state.dataset, cfg,
                    workers_per_replica=w_all, replicas=r_all, ps_machines=p_all)
    machines, epoch, feasible = pred.machines, pred.epoch_time_s, pred.feasible

    def best(name: str) -> np.ndarray:
        s = batch.blocks[name]
        return s.start + best_per_group(group_all[s], epoch[s], machines[s], feasible[s])

    current = take(pred, 0).item()
    if state.cluster.worker.compute_error is not None:
        current = evaluate(state.network, state.cluster, state.dataset, cfg, interval=True).item()
    mp = _curve(take(pred, np.arange(batch.blocks["model_parallel"].start, batch.blocks["model_parallel"].stop)))
    cells = best(f"budget{len(budgets) - 1}")
    grid = take(pred, cells)
    per_budget = []
    for gi in range(len(budgets)):
        idx = best(f"budget{gi}")
        ok = feasible[idx] & np.isfinite(epoch[idx])
        per_budget.append(idx[np.argmin(np.where(ok, epoch[idx], np.inf))] if idx.size else -1)
    optimal = _curve(take(pred, np.asarray(per_budget, dtype=int)))
    bottlenecks = tuple(str(pred.bottleneck[i]) if i >= 0 else "" for i in per_budget)
    top = per_budget[-1]
    optimum = pred.item(top) if top >= 0 and bool(feasible[top]) else None
    if "data_parallel" in batch.blocks:
        dp = _curve(take(pred, best("data_parallel")))
    else:
        dp = _curve(take(pred, np.zeros(0, dtype=int)))
    alt = _alternative_curve(state, budgets, r_axis)
    mp, dp, optimal = (_banded(state, cfg, c) for c in (mp, dp, optimal))
    return Results(state=state, current=current, optimum=optimum, model_parallel=mp, data_parallel=dp,
                   optimal=optimal, optimal_bottlenecks=bottlenecks, grid=grid, sampled=sampled,
                   evaluated=int(w_all.size), data_parallel_alternative=alt)


def _data_parallel_candidates(workers: int, budgets: np.ndarray, r_axis: np.ndarray,
                              allreduce: bool) -> tuple[np.ndarray, ...] | None:
    """(W, R, P, budget group) of the data-parallel curve at W = ``workers`` over ``budgets``."""
    w0 = float(workers)
    parts = [budget_candidates(m, np.array([w0]), r_axis, allreduce) for m in budgets[budgets >= w0]]
    if not parts:
        return None
    groups = [np.full(q[0].size, gi, dtype=float) for gi, q in enumerate(parts)]
    return (*(np.concatenate([q[i] for q in parts]) for i in range(3)), np.concatenate(groups))


def _alternative_curve(state: WorkbenchState, budgets: np.ndarray, r_axis: np.ndarray) -> Curve:
    """The configured W's data-parallel curve under the other scheme: an all-reduce when the PS is
    configured, the PS when an all-reduce is (one more model call)."""
    cfg = state.configuration
    other = "ps" if cfg.data_parallel == "allreduce" else "allreduce"
    alt_cfg = cfg.evolve(data_parallel=other, replicas=1, ps_machines=0, zero_stage=0)
    dp = _data_parallel_candidates(cfg.workers_per_replica, budgets, r_axis, other == "allreduce")
    if dp is None:
        return Curve(*(np.zeros(0) for _ in range(6)))
    w, r, p, g = dp
    pred = evaluate(state.network, state.cluster, state.dataset, alt_cfg, workers_per_replica=w, replicas=r,
                    ps_machines=p)
    return _curve(take(pred, best_per_group(g, pred.epoch_time_s, pred.machines, pred.feasible)))


__all__ = ["AXIS_CAP", "CURVE_POINTS", "Results", "axis", "compute", "take"]
