"""The workbench's single model call gives what the model and the optimizer give on their own."""

from __future__ import annotations

import numpy as np
import pytest

from dnnbench.face.landscape import AXIS_CAP, axis, compute
from dnnbench.face.state import WorkbenchState
from dnnbench.model import predict
from dnnbench.optimizer import best_by_budget, model_parallel_curve, optimize
from dnnbench.specs import Configuration


def _state(net: str, cluster: str, budget: int, **config: object) -> WorkbenchState:
    return WorkbenchState.from_presets(net, cluster, configuration=Configuration.build(dict(config)),
                                       budget_machines=budget)


CASES = [
    ("imagenet22k-adam", "adam-2014", 120, {"workers_per_replica": 4, "replicas": 10, "ps_machines": 20}),
    ("imagenet22k-adam", "adam-2014", 120, {"mode": "sync", "push_interval_samples": 64}),
    ("mnist-adam", "adam-2014", 37, {"workers_per_replica": 2, "replicas": 3, "ps_machines": 2, "overlap": 0.5}),
    ("lenet5", "edge-wifi", 17, {"workers_per_replica": 1, "replicas": 4, "ps_machines": 1}),
    ("alexnet", "modern-2025", 64, {"partitioning": "spatial", "workers_per_replica": 2}),
]


@pytest.mark.parametrize("net,cluster,budget,config", CASES)
def test_optimum_and_current_match_the_model_and_the_optimizer(net: str, cluster: str, budget: int,
                                                              config: dict[str, object]) -> None:
    state = _state(net, cluster, budget, **config)
    res = compute(state)
    # The current configuration is predict() of it.
    expected = predict(state.network, state.cluster, state.dataset, state.configuration).item()
    assert res.current["epoch_time_s"] == pytest.approx(expected["epoch_time_s"], rel=1e-12)
    assert res.current["bottleneck"] == expected["bottleneck"]
    # The heatmap's best cell is the optimizer's best (model.md §7: exact, proved against brute force).
    best = optimize(state.network, state.cluster, state.dataset, budget, state.configuration, top_k=1).best
    assert res.optimum is not None
    assert res.optimum["epoch_time_s"] == pytest.approx(best.epoch_time_s, rel=1e-12)
    assert np.nanmin(res.grid.epoch_time_s[res.grid.feasible]) == pytest.approx(best.epoch_time_s, rel=1e-12)


@pytest.mark.parametrize("net,cluster,budget,config", CASES[:3])
def test_curves_match_the_optimizer_curves(net: str, cluster: str, budget: int, config: dict[str, object]) -> None:
    state = _state(net, cluster, budget, **config)
    res = compute(state)
    mp = model_parallel_curve(state.network, state.cluster, state.dataset, budget, state.configuration)
    np.testing.assert_allclose(res.model_parallel.speedup, mp.speedup, rtol=1e-12)
    # The optimal curve at its budgets is best_by_budget at those budgets.
    full = best_by_budget(state.network, state.cluster, state.dataset, budget, state.configuration)
    budgets = axis(budget, 16).astype(int)
    np.testing.assert_allclose(res.optimal.epoch_time_s, full.epoch_time_s[budgets - 1], rtol=1e-12)
    # The data-parallel curve never beats the optimum and uses the configured W.
    assert np.all(res.data_parallel.workers_per_replica == state.configuration.workers_per_replica)
    assert res.data_parallel.machines.max() <= budget


def test_large_budgets_are_sampled_and_stay_small() -> None:
    state = _state("mnist-adam", "adam-2014", 5000)
    res = compute(state)
    assert res.sampled
    assert res.evaluated < 60_000
    assert axis(5000).size <= AXIS_CAP
    assert axis(5000)[0] == 1 and axis(5000)[-1] == 5000
