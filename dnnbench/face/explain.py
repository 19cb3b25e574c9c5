"""Why, in words: what a reader would otherwise suspect is a bug, explained by the term that causes it.

:func:`why` looks at one workbench landscape (:class:`dnnbench.face.landscape.Results`) and returns
sentences for the workbench's summary and the study reports:

- a speed-up above linear (more than the machines used): the PS computes the FC layers' weight
  gradients (Adam's scheme, docs/model.md §6), work the lone baseline machine does itself; and/or
  each machine's slice of the weights fits its cache (the cache speed-up c, §4);
- an optimum that leaves machines idle: no split that uses them is faster;
- a bottleneck that moves as the budget grows, read off the optimal curve.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import fmt
from .landscape import Results


def above_linear(item: dict[str, Any], results: Results) -> str | None:
    """Why ``item``'s speed-up exceeds its machine count, or None when it does not."""
    machines = item["machines"]
    if item["speedup"] <= machines * (1.0 + 1e-9):
        return None
    cfg, cluster = results.state.configuration, results.state.cluster
    reasons = []
    has_fc = any(layer.kind == "fc" for layer in results.state.network.layers)
    if item["ps_machines"] > 0 and has_fc and cfg.fc_update != "deltas":
        reasons.append("the PS machines compute the fully connected layers' weight gradients from the pushed "
                       "activations and errors (Adam's scheme), work the lone machine does itself")
    if item["workers_per_replica"] > 1 and cluster.worker.cache_speedup > 1.0:
        reasons.append(f"each machine's slice of the weights is small enough for its cache, where multiply-adds "
                       f"run up to {cluster.worker.cache_speedup:g}x faster")
    because = "; and ".join(reasons) if reasons else "the model's per-machine costs shrink faster than 1/machines"
    return (f"The speed-up of {item['speedup']:.1f}x on {machines} machines is above linear because "
            f"{because}.")


def idle(item: dict[str, Any], budget: int) -> str | None:
    """Why the optimum uses fewer machines than the budget, or None."""
    left = budget - int(item["machines"])
    if left <= 0:
        return None
    return (f"{left} of the {budget} machines stay idle: no split that uses them is faster than this one, "
            f"whose bottleneck is {item['bottleneck']}.")


def moving_bottleneck(results: Results) -> str | None:
    """How the optimum's binding bound changes along the budgets of the optimal curve, or None."""
    machines = np.asarray(results.optimal.machines, dtype=float)
    runs: list[tuple[str, float, float]] = []  # (bottleneck, first budget, last budget)
    for b, m in zip(results.optimal_bottlenecks, machines, strict=True):
        if not b or not np.isfinite(m):
            continue
        if runs and runs[-1][0] == b:
            runs[-1] = (b, runs[-1][1], m)
        else:
            runs.append((b, m, m))
    if len(runs) < 2:
        return None
    steps = [f"{b} ({int(lo)}–{int(hi)} machines)" if lo != hi else f"{b} ({int(lo)} machines)"
             for b, lo, hi in runs]
    return "As the budget grows the bottleneck moves: " + ", then ".join(steps) + "."


def hidden_curves(results: Results) -> str | None:
    """A sentence when the data-parallel curve lies on the optimal one (it is drawn beneath it), or None."""
    dp, opt = results.data_parallel, results.optimal
    m_dp, m_opt = np.asarray(dp.machines, float), np.asarray(opt.machines, float)
    if m_dp.size == 0:
        return None
    shared = np.isin(m_dp, m_opt)
    if not shared.any():
        return None
    s_opt = {m: s for m, s in zip(m_opt, np.asarray(opt.speedup, float), strict=True)}
    same = all(np.isclose(s, s_opt[m], rtol=1e-9) for m, s in zip(m_dp[shared], np.asarray(dp.speedup, float)[shared],
                                                                   strict=True))
    if not same:
        return None
    w = results.state.configuration.workers_per_replica
    return (f"The data-parallel curve (W = {w}) is the optimal one at every budget drawn: it is the wide light "
            f"line beneath it.")


def placement(results: Results) -> str | None:
    """On a heterogeneous cluster (machine classes): where the current configuration's replicas and PS
    machines go and what it costs against the uniform cluster (:func:`dnnbench.optimizer.place`)."""
    from ..errors import SpecError
    from ..optimizer import place

    s = results.state
    if not s.cluster.classes:
        return None
    try:
        pl = place(s.network, s.cluster, s.dataset, s.configuration)
    except SpecError as err:
        return f"Placement on the machine classes: {err}."
    replicas = "; ".join(", ".join(g) for g in pl.replica_classes)
    ps = ", ".join(pl.ps_classes) or "none"
    cost = pl.heterogeneity_cost
    than = f"{100 * abs(cost):.1f} % {'slower' if cost > 0 else 'faster'} than" if abs(cost) > 1e-9 else "as fast as"
    return (f"Placement on the machine classes: replicas on [{replicas}], PS on [{ps}]; epoch "
            f"{fmt.seconds(pl.epoch_time_s)}, {than} the uniform cluster of the worker and PS types.")


def why(results: Results) -> list[str]:
    """The sentences that apply to ``results`` (current configuration, optimum, optimal curve)."""
    out = []
    for item in (results.current, results.optimum):
        if item is not None:
            text = above_linear(item, results)
            if text and text not in out:
                out.append(text)
    if results.optimum is not None:
        text = idle(results.optimum, int(results.state.budget_machines))
        if text:
            out.append(text)
    for text in (moving_bottleneck(results), hidden_curves(results), placement(results)):
        if text:
            out.append(text)
    return out


__all__ = ["above_linear", "hidden_curves", "idle", "moving_bottleneck", "placement", "why"]
