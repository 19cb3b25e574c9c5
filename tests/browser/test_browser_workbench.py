"""Real browser: the workbench notebook in JupyterLab and under Voila, checked through BokehJS."""

from __future__ import annotations

from typing import Any

import pytest
import workbench_page as wp

from dnnbench import presets
from dnnbench.model import predict
from dnnbench.specs import Configuration
from dnnbench.state import WorkbenchState

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _predicted(state: WorkbenchState) -> dict[str, Any]:
    return predict(state.network, state.cluster, state.dataset, state.configuration).item()


def _check(data: dict[str, Any], state: WorkbenchState) -> None:
    expected = _predicted(state)
    assert data["workers_per_replica"] == [float(expected["workers_per_replica"])]
    assert data["epoch_time_s"][0] == pytest.approx(expected["epoch_time_s"], rel=1e-9)
    assert data["speedup"][0] == pytest.approx(expected["speedup"], rel=1e-9)


def test_workbench_in_jupyterlab(lab_server: Any, page: Any) -> None:
    wp.open_in_lab(page, lab_server.url)
    state = WorkbenchState.from_presets("imagenet22k-adam", "adam-2014")
    before = wp.source(page, "speedup_current")
    assert before is not None
    _check(before, state)

    # Configuration: W = 4 machines per replica.
    wp.set_text(page, ".dnnbench-workers-per-replica", "4")
    data = wp.wait_for_change(page, "speedup_current", "workers_per_replica", before["workers_per_replica"])
    state = state.evolve(configuration=state.configuration.evolve(workers_per_replica=4))
    _check(data, state)

    # Cluster: 8 cores per worker machine.
    wp.open_tab(page, "Cluster")
    wp.set_text(page, ".dnnbench-worker-cores", "8")
    data = wp.wait_for_change(page, "speedup_current", "epoch_time_s", data["epoch_time_s"])
    state = state.evolve(cluster=state.cluster.evolve(worker=state.cluster.worker.evolve(cores=8)))
    _check(data, state)

    # Network: the first convolution gets 96 output maps.
    wp.open_tab(page, "Network")
    wp.set_text(page, ".dnnbench-param-out_channels", "96")
    data = wp.wait_for_change(page, "speedup_current", "epoch_time_s", data["epoch_time_s"])
    layers = [layer.to_dict() for layer in state.network.layers]
    layers[1]["out_channels"] = 96
    state = state.evolve(network=state.network.evolve(layers=layers))
    _check(data, state)
    # The heatmap's optimum and the breakdown bars followed too.
    bars = wp.source(page, "breakdown_parts")
    expected = _predicted(state)
    assert bars["compute_forward"][0] == pytest.approx(1e3 * expected["breakdown_s_per_sample"]["compute_forward"])

    # An invalid edit shows its message and leaves the plots as they were.
    wp.set_text(page, ".dnnbench-param-out_channels", "-3")
    page.get_by_text("layers[1].out_channels").first.wait_for(timeout=30_000)
    assert wp.source(page, "speedup_current")["epoch_time_s"] == data["epoch_time_s"]
    assert not [e for e in page.errors if "Bokeh" in e or "view for model" in e]


def test_workbench_under_voila(voila_server: Any, page: Any) -> None:
    wp.open_in_voila(page, voila_server.url)
    state = WorkbenchState.from_presets("imagenet22k-adam", "adam-2014")
    before = wp.source(page, "speedup_current")
    _check(before, state)
    wp.set_text(page, ".dnnbench-workers-per-replica", "2")
    data = wp.wait_for_change(page, "speedup_current", "workers_per_replica", before["workers_per_replica"])
    _check(data, state.evolve(configuration=Configuration(workers_per_replica=2)))
    page.locator(".dnnbench-optimize").first.click()
    best = wp.wait_for_change(page, "speedup_current", "workers_per_replica", data["workers_per_replica"])
    assert best["epoch_time_s"] == wp.source(page, "heatmap_optimum")["epoch_time_s"]
    assert presets.cluster("adam-2014").machines == 120
