"""Real browser: the workbench notebook in JupyterLab and under Voila, checked through BokehJS."""

from __future__ import annotations

import json
from typing import Any

import pytest
import servers
import workbench_page as wp
from dnnbench.widgets.cluster_panel import ADVANCED_TITLE
from dnnbench.widgets.network_panel import PAGE_LAYERS
from servers import SOURCE_DATA_JS

from dnnbench import presets
from dnnbench.face.state import WorkbenchState
from dnnbench.model import predict
from dnnbench.specs import Configuration

pytestmark = [pytest.mark.browser, pytest.mark.slow]

#: What the layer editor's "Add layer" appends for kind fc (dnnbench.widgets.network_panel.NEW_LAYER).
NEW_LAYER_FC = {"kind": "fc", "out_features": 1000, "activation": "relu"}


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
    assert bars["compute_forward"][0] == pytest.approx(expected["breakdown_s_per_sample"]["compute_forward"])
    # The step timeline in the browser is the model's breakdown laid end to end (no arithmetic of its own).
    segments = wp.source(page, "timeline_segments")
    k = state.configuration.push_interval_samples
    there = {p: v * k for p, v in expected["breakdown_s_per_sample"].items() if v > 0}
    assert dict(zip(segments["part"], segments["duration_s"], strict=True)) == pytest.approx(there, rel=1e-9)
    assert page.locator(".dnnbench-why li").count() >= 1  # why the speed-up is above linear, in words

    # An invalid edit shows its message and leaves the plots as they were.
    wp.set_text(page, ".dnnbench-param-out_channels", "-3")
    page.get_by_text("layers[1].out_channels").first.wait_for(timeout=30_000)
    assert wp.source(page, "speedup_current")["epoch_time_s"] == data["epoch_time_s"]
    wp.set_text(page, ".dnnbench-param-out_channels", "96")  # valid again
    page.get_by_text("layers[1].out_channels").first.wait_for(state="detached", timeout=30_000)

    # The layer editor: add an FC layer at the end, then remove it with its trash button.
    page.locator(".dnnbench-add-kind select").first.select_option("fc")
    page.locator(".dnnbench-add-layer").first.click()
    added = wp.wait_for_change(page, "speedup_current", "epoch_time_s", data["epoch_time_s"])
    grown = state.evolve(network=state.network.evolve(layers=[*layers, NEW_LAYER_FC]))
    _check(added, grown)
    assert page.locator(".dnnbench-layer-remove").count() == len(grown.network.layers)
    page.locator(".dnnbench-layer-remove").last.click()
    data = wp.wait_for_change(page, "speedup_current", "epoch_time_s", added["epoch_time_s"])
    _check(data, state)
    assert page.locator(".dnnbench-layer-remove").count() == len(state.network.layers)

    # A graph network: resnet50's 160 layers, their inputs and the graph view in BokehJS.
    resnet = presets.network("resnet50")
    page.locator(".dnnbench-network-preset select").first.select_option("resnet50")
    page.wait_for_function("(n) => Bokeh.documents.some(d => { const m = d.get_model_by_name('graph_nodes'); "
                           "return m && m.data.name.length === n; })", arg=len(resnet.layers), timeout=120_000)
    nodes = wp.source(page, "graph_nodes")
    assert nodes["name"] == list(resnet.layer_names) and min(nodes["y"]) == -1.0  # downsample branches
    edges = wp.source(page, "graph_edges")
    assert len(edges["x0"]) == sum(len(ids) for ids in resnet.input_indices)
    resnet_state = state.evolve(network=resnet, dataset=presets.dataset("imagenet1k"))
    _check(wp.source(page, "speedup_current"), resnet_state)
    add = next(i for i, layer in enumerate(resnet.layers) if layer.kind == "add")
    # The layer editor's 160 rows of widgets reach the browser after the plots, in order: wait for the
    # rows up to the first add (scrolled to as they come: JupyterLab may defer rendering the rows far
    # below the viewport).
    wp.wait_for_more(page, ".dnnbench-layer-inputs input", add)
    box = page.locator(".dnnbench-layer-inputs input").nth(add)
    assert box.input_value() == ", ".join(resnet.layers[add].inputs)
    before = wp.source(page, "speedup_current")
    box.fill(f"{box.input_value()}, input")  # an add of a [3, 224, 224] input: a one-line error, graph kept
    box.press("Enter")
    page.get_by_text(f"layers[{add}].inputs[2]: 'input' has shape [3, 224, 224]").first.wait_for(timeout=30_000)
    assert wp.source(page, "graph_nodes")["name"] == nodes["name"]
    assert wp.source(page, "speedup_current")["epoch_time_s"] == before["epoch_time_s"]
    box.fill(", ".join(resnet.layers[add].inputs))  # valid again
    box.press("Enter")
    page.get_by_text(f"layers[{add}].inputs[2]").first.wait_for(state="detached", timeout=30_000)
    # A deep network is edited a page of layers at a time: the next page's rows replace this page's, and
    # turning a page is no edit (the plots stay).
    n = len(resnet.layers)
    page.get_by_text(f"layers 0–{PAGE_LAYERS - 1} of {n}").first.wait_for(timeout=30_000)
    kept = wp.source(page, "speedup_current")
    page.locator("button.dnnbench-layers-next").first.click()
    page.get_by_text(f"layers {PAGE_LAYERS}–{2 * PAGE_LAYERS - 1} of {n}").first.wait_for(timeout=30_000)
    page.wait_for_function("(v) => { const e = document.querySelector('.dnnbench-layer-name input'); "
                           "return e && e.value === v; }", arg=resnet.layers[PAGE_LAYERS].name, timeout=30_000)
    assert page.locator(".dnnbench-layer-remove").count() == PAGE_LAYERS
    assert wp.source(page, "speedup_current") == kept

    # A GPU cluster: the device's memory as a stacked bar, precision as a configuration choice.
    wp.open_tab(page, "Cluster")
    before = wp.source(page, "speedup_current")
    page.locator(".dnnbench-cluster-preset select").first.select_option("dgx-a100")
    data = wp.wait_for_change(page, "speedup_current", "epoch_time_s", before["epoch_time_s"])
    gpu = resnet_state.evolve(cluster=presets.cluster("dgx-a100"), budget_machines=32)
    _check(data, gpu)
    memory = wp.source(page, "memory_parts")
    parts = _predicted(gpu)["memory_bytes_per_worker_parts"]
    assert memory["capacity_gib"][0] == pytest.approx(80e9 / 2**30, rel=1e-9)
    assert memory["mem_activations"][0] == pytest.approx(parts["activations"] / 2**30, rel=1e-9)
    wp.open_tab(page, "Configuration")
    page.locator(".dnnbench-precision select").first.select_option("fp16")
    data = wp.wait_for_change(page, "speedup_current", "epoch_time_s", data["epoch_time_s"])
    gpu = gpu.evolve(configuration=gpu.configuration.evolve(precision="fp16"))
    _check(data, gpu)
    halved = wp.source(page, "memory_parts")["mem_activations"][0]
    assert halved == pytest.approx(memory["mem_activations"][0] / 2, rel=1e-9)  # 16-bit activations

    # The device's and the node's fields, typed in the browser, reach the model.
    wp.open_tab(page, "Cluster")
    wp.set_text(page, ".dnnbench-worker-accelerator-memory_bytes", "40")  # GB
    page.wait_for_function(f"() => ({SOURCE_DATA_JS})('memory_parts').capacity_gib[0] < 40",
                           timeout=60_000)
    gpu = _edit_worker(gpu, memory_bytes=40 * 10**9)
    assert wp.source(page, "memory_parts")["capacity_gib"][0] == pytest.approx(40e9 / 2**30, rel=1e-9)
    before = wp.source(page, "speedup_current")
    wp.set_text(page, ".dnnbench-worker-accelerator-peak_flops_per_s-fp16", "100")  # TFLOP/s
    data = wp.wait_for_change(page, "speedup_current", "epoch_time_s", before["epoch_time_s"])
    gpu = _edit_worker(gpu, peak_flops_per_s={**gpu.cluster.worker.accelerator.peak_flops_per_s.to_dict(),
                                              "fp16": 100e12})
    _check(data, gpu)
    # fp16's own efficiency curve, in the worker's "Advanced" part.
    page.locator(".dnnbench-worker-advanced").get_by_text(ADVANCED_TITLE).first.click()
    wp.set_text(page, ".dnnbench-worker-accelerator-efficiency_by_precision-fp16-conv", "0.3")
    data = wp.wait_for_change(page, "speedup_current", "epoch_time_s", data["epoch_time_s"])
    gpu = _edit_worker(gpu, efficiency_by_precision={"fp16": {"conv": 0.3, "fc": 0.7,
                                                              "half_efficiency_macs": 2e8}})
    _check(data, gpu)
    # Nodes: four devices per node instead of eight.
    page.locator(".dnnbench-cluster-sections").get_by_text("Nodes and devices").first.click()
    wp.set_text(page, ".dnnbench-node-devices", "4")
    node = gpu.cluster.node
    assert node is not None
    gpu = gpu.evolve(cluster=gpu.cluster.evolve(node=node.evolve(devices=4)))
    page.wait_for_function("() => document.querySelector('.dnnbench-node-devices input').value === '4'")
    _wait_for_prediction(page, gpu)

    # A calibrated machine's p10-p90 band, loaded from a file: bands under the speed-up curves and a
    # whisker on the breakdown, in BokehJS.
    banded = presets.cluster("adam-2014")
    worker = banded.worker.evolve(compute_error={"p10": -0.2, "p90": 0.3, "cases": 100})
    (lab_server.root / "banded.json").write_text(json.dumps(banded.evolve(worker=worker).to_dict()))
    wp.open_tab(page, "Configuration")  # a CPU cluster computes in fp32
    page.locator(".dnnbench-precision select").first.select_option("fp32")
    wp.wait_for_change(page, "speedup_current", "epoch_time_s", data["epoch_time_s"])
    wp.open_tab(page, "Cluster")
    wp.visible_input(page, ".dnnbench-cluster-path").fill("banded.json")
    page.locator(".dnnbench-cluster-load").first.click()
    page.wait_for_function(f"() => {{ const d = ({SOURCE_DATA_JS})('speedup_model_parallel'); "
                           "return d && d.speedup_high.some((h, i) => h > d.speedup_low[i] * 1.001); }",
                           timeout=60_000)
    mp = wp.source(page, "speedup_model_parallel")
    assert all(lo <= v * (1 + 1e-12) and hi >= v * (1 - 1e-12)
               for lo, v, hi in zip(mp["speedup_low"], mp["speedup"], mp["speedup_high"], strict=True))
    bars = wp.source(page, "breakdown_parts")
    assert bars["total_low_s"][0] < bars["total_s"][0] < bars["total_high_s"][0]
    loaded = gpu.evolve(cluster=banded.evolve(worker=worker), budget_machines=banded.machines,
                        configuration=gpu.configuration.evolve(precision="fp32"))
    lo, hi = _predicted(loaded)["interval_p10_p90"]["time_per_sample_s"]
    x = 1.0 / _predicted(loaded)["samples_per_s"]
    assert bars["total_low_s"][0] == pytest.approx(bars["total_s"][0] * lo / x, rel=1e-9)
    assert bars["total_high_s"][0] == pytest.approx(bars["total_s"][0] * hi / x, rel=1e-9)
    assert page.evaluate("() => Bokeh.documents.some(d => d.get_model_by_name('speedup_model_parallel_band'))")

    assert not [e for e in page.errors if "Bokeh" in e or "view for model" in e]
    wp.assert_offline(page)


def _edit_worker(state: WorkbenchState, **accelerator: Any) -> WorkbenchState:
    worker = state.cluster.worker
    assert worker.accelerator is not None
    return state.evolve(cluster=state.cluster.evolve(worker=worker.evolve(
        accelerator=worker.accelerator.evolve(**accelerator))))


def _wait_for_prediction(page: Any, state: WorkbenchState, timeout_s: float = 60.0) -> None:
    """Poll until the browser's current point is the model's for ``state`` (an edit that may or may not
    move the epoch time)."""
    import time

    expected = _predicted(state)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        data = wp.source(page, "speedup_current")
        if data and data["epoch_time_s"][0] == pytest.approx(expected["epoch_time_s"], rel=1e-9):
            _check(data, state)
            return
        page.wait_for_timeout(20)
    raise AssertionError(f"the current point is not the model's for the edited state within {timeout_s} s")


def test_workbench_under_voila(voila_server: Any, page: Any) -> None:
    wp.open_in_voila(page, voila_server.page)
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
    # Machine classes in the cluster panel: a class of 1 machine, then 4, sets the budget the plots use.
    wp.open_tab(page, "Cluster")
    page.get_by_text("Machine classes").first.click()
    optimal = wp.source(page, "speedup_optimal")
    page.locator("button.dnnbench-class-add").first.click()
    one = wp.wait_for_change(page, "speedup_optimal", "machines", optimal["machines"])
    assert max(one["machines"]) == 1
    wp.set_text(page, ".dnnbench-class-count", "4")
    four = wp.wait_for_change(page, "speedup_optimal", "machines", one["machines"])
    assert max(four["machines"]) == 4
    page.get_by_text("Placement on the machine classes").first.wait_for(timeout=30_000)
    wp.wait_for_icons(page)  # the buttons' Font Awesome icons come from Voila's own bundle ...
    wp.assert_offline(page)  # ... and nothing at all from the internet (no CDN stylesheets)


def test_save_load_and_export_under_voila(voila_server: Any, page: Any, chromium: Any) -> None:
    wp.open_in_voila(page, voila_server.page)
    root = voila_server.root
    state = WorkbenchState.from_presets("imagenet22k-adam", "adam-2014")
    before = wp.source(page, "speedup_current")
    wp.set_text(page, ".dnnbench-workers-per-replica", "2")
    saved_data = wp.wait_for_change(page, "speedup_current", "workers_per_replica", before["workers_per_replica"])
    saved_state = state.evolve(configuration=Configuration(workers_per_replica=2))

    # Save state: the kernel (working folder: the notebook's) writes the whole state as JSON.
    wp.visible_input(page, ".dnnbench-state-path").fill("round-trip.dnn.json")
    page.locator(".dnnbench-save").first.click()
    wp.wait_for_file(root / "round-trip.dnn.json", page)
    assert WorkbenchState.load(root / "round-trip.dnn.json") == saved_state

    # Change the configuration, then Load state: the panels and the plots are the saved ones again.
    wp.set_text(page, ".dnnbench-workers-per-replica", "5")
    changed = wp.wait_for_change(page, "speedup_current", "workers_per_replica", saved_data["workers_per_replica"])
    _check(changed, state.evolve(configuration=Configuration(workers_per_replica=5)))
    page.locator(".dnnbench-load").first.click()
    loaded = wp.wait_for_change(page, "speedup_current", "workers_per_replica", changed["workers_per_replica"])
    _check(loaded, saved_state)
    assert wp.input_value(page, ".dnnbench-workers-per-replica") == "2"

    # Export HTML: one standalone file that opens offline with its plots and asks nothing of the network.
    wp.visible_input(page, ".dnnbench-html-path").fill("exported.html")
    page.locator(".dnnbench-export").first.click()
    exported = root / "exported.html"
    wp.wait_for_file(exported, page)
    wp.assert_offline(page)
    context = chromium.new_context(offline=True, viewport={"width": 1200, "height": 1600})
    try:
        external = servers.watch_external_requests(context)
        report = context.new_page()
        errors: list[str] = []
        report.on("pageerror", lambda exc: errors.append(str(exc)))
        report.goto(exported.as_uri())
        report.wait_for_function(f"() => ({servers.SOURCE_DATA_JS})('speedup_current') !== null", timeout=60_000)
        _check(wp.source(report, "speedup_current"), saved_state)
        assert wp.source(report, "breakdown_parts")["label"] == ["current", "optimum"]
        assert wp.source(report, "heatmap_grid") is not None
        report.locator("canvas").first.wait_for(timeout=30_000)  # BokehJS drew (canvases in shadow roots)
        assert report.locator("canvas").count() >= 3
        assert report.get_by_text("Bottleneck:").count() >= 1  # the summary Div
        assert not errors
        assert not external, f"the exported HTML requested {external}"
    finally:
        context.close()
