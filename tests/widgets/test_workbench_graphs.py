"""Graph networks in the workbench: the inputs column, the graph view, and invalid graph edits."""

from __future__ import annotations

from typing import Any

from dnnbench.widgets.network_panel import PAGE_LAYERS

from dnnbench import presets
from dnnbench.face.graph import graph_data, lanes
from dnnbench.model import predict
from dnnbench.specs import Network


def _graph(wb: Any) -> dict[str, Any]:
    return wb.views.graph.sources["graph_nodes"].data


def _edges(wb: Any) -> dict[str, Any]:
    return wb.views.graph.sources["graph_edges"].data


def test_a_graph_preset_shows_its_inputs_and_branches(workbench: Any) -> None:
    panel = workbench.network_panel
    panel.preset.value = "resnet50"
    net = workbench.state.network
    assert net == presets.network("resnet50")
    assert workbench.state.dataset.name == "imagenet1k"
    # The inputs column shows every named input; chain rows leave it empty (the layer before).
    # The editor shows a page of layers at a time; panel.row(i) turns to layer i's page.
    assert len(panel.rows) == PAGE_LAYERS and panel.pages == -(-len(net.layers) // PAGE_LAYERS)
    adds = [i for i in range(len(net.layers)) if panel.row(i).kind.value == "add"]
    assert len(adds) == 16 and all("," in panel.row(i).inputs.value for i in adds)
    assert panel.row(1).inputs.value == ""
    # The graph view draws one node per layer and one edge per input; downsample branches leave lane 0.
    nodes = _graph(workbench)
    assert nodes["name"] == list(net.layer_names)
    assert len(_edges(workbench)["x0"]) == sum(len(ids) for ids in net.input_indices)
    assert min(nodes["y"]) == -1.0 and max(lanes(net)) == 1
    cur = workbench.views.speedup.sources["speedup_current"].data
    assert cur["speedup"][0] == predict(net, workbench.state.cluster, workbench.state.dataset,
                                        workbench.state.configuration).item()["speedup"]


def test_editing_inputs_rewires_the_graph_and_a_bad_edit_keeps_the_last_valid_one(workbench: Any) -> None:
    panel = workbench.network_panel
    panel.preset.value = "resnet50"
    good = workbench.state.network
    add = next(i for i, layer in enumerate(good.layers) if layer.kind == "add")
    row = panel.row(add)
    first, second = (name.strip() for name in row.inputs.value.split(","))
    # An add of two inputs of different shapes: one line naming the field, the last valid graph stays.
    row.inputs.value = f"{first}, {second}, input"
    assert workbench.state.network is good
    assert f"layers[{add}].inputs[2]: &#x27;input&#x27; has shape [3, 224, 224]; add needs" in row.error.value
    assert "dnnbench-invalid" in row.inputs._dom_classes
    assert _graph(workbench)["name"] == list(good.layer_names)
    # A name that is no layer, and a later layer (a cycle), are one-line errors too.
    row.inputs.value = f"{first}, {second}, nowhere"
    assert "names no layer" in row.error.value and workbench.state.network is good
    # Leaving a branch unused names the layer whose output is left over.
    row.inputs.value = f"{first}, input"
    assert "is never used" in panel.row(add - 1).error.value and workbench.state.network is good
    row = panel.row(add)
    row.inputs.value = first
    assert "add takes at least 2" in row.error.value and workbench.state.network is good
    later = panel.row(add + 1).name.value
    row = panel.row(add)
    row.inputs.value = f"{first}, {later}"
    assert "not an earlier layer" in row.error.value and workbench.state.network is good
    # Back to a valid graph: the error clears and the model follows.
    row.inputs.value = f"{first}, {second}"
    assert row.error.value == "" and "dnnbench-invalid" not in row.inputs._dom_classes
    assert workbench.state.network == good


def test_graph_data_is_one_node_per_layer_for_every_preset() -> None:
    for name in presets.names("networks"):
        net = presets.network(name)
        data = graph_data(net)
        assert len(data["graph_nodes"]["x"]) == len(net.layers)
        assert len(data["graph_edges"]["x0"]) == sum(len(ids) for ids in net.input_indices)
        if net.is_chain:
            assert max(lanes(net)) == 0 and all(y == 0 for y in data["graph_edges"]["cy0"])
        else:  # every skip connection is drawn as an arc (a lifted control point) or across lanes
            skips = [j - k for j, ids in enumerate(net.input_indices) for k in ids if j - k > 1]
            arcs = [i for i, (y0, cy0, y1) in enumerate(zip(data["graph_edges"]["y0"], data["graph_edges"]["cy0"],
                                                             data["graph_edges"]["y1"], strict=True))
                    if cy0 != y0 or y0 != y1]
            assert skips and len(arcs) >= len(skips)


def test_graph_nodes_say_whose_parameters_a_layer_uses() -> None:
    net = Network.build({"name": "shared", "layers": [
        {"kind": "input", "shape": [8]}, {"kind": "fc", "name": "a", "out_features": 8},
        {"kind": "fc", "name": "b", "out_features": 8, "shares": "a"}]})
    assert graph_data(net)["graph_nodes"]["weights"] == ["0", "72", "0 (shares a's)"]


def test_the_all_reduce_switch_sets_p_to_zero_and_draws_both_schemes(workbench: Any) -> None:
    panel = workbench.config_panel
    fields = panel.fields
    fields["replicas"].widget.value = 8
    fields["ps_machines"].widget.value = 2
    alt = workbench.views.speedup.sources["speedup_data_parallel_alt"].data
    assert len(alt["ps_machines"]) and all(p == 0 for p in alt["ps_machines"])  # the all-reduce curve beside the PS
    fields["data_parallel"].widget.value = "allreduce"
    cfg = workbench.state.configuration
    assert (cfg.data_parallel, cfg.ps_machines, cfg.replicas) == ("allreduce", 0, 8)
    assert fields["ps_machines"].widget.disabled and not panel.allreduce["algorithm"].widget.disabled
    cur = workbench.views.speedup.sources["speedup_current"].data
    expected = predict(workbench.state.network, workbench.state.cluster, workbench.state.dataset, cfg).item()
    assert cur["speedup"][0] == expected["speedup"]
    assert any(p > 0 for p in workbench.views.speedup.sources["speedup_data_parallel_alt"].data["ps_machines"])
    # An invalid bucket keeps the last valid configuration, with the message at the field.
    panel.allreduce["bucket_bytes"].widget.value = 0
    assert "allreduce.bucket_bytes" in panel.allreduce["bucket_bytes"].error.value
    assert workbench.state.configuration == cfg
    panel.allreduce["bucket_bytes"].widget.value = 2**20
    panel.allreduce["algorithm"].widget.value = "tree"
    assert workbench.state.configuration.allreduce.algorithm == "tree"
    fields["data_parallel"].widget.value = "ps"
    assert workbench.state.configuration.ps_machines == 1  # replicas share through a PS again


def test_graphs_from_pytorch_and_onnx_show_in_the_graph_view(workbench: Any, tmp_path: Any) -> None:
    """A branching module by its module path and by an ONNX file: the same graph in the view."""
    import torch
    from onnx_export import export
    from test_import_torch import Inception

    panel = workbench.network_panel
    assert panel.load_source("test_import_torch:Inception", "3,12,12")  # 12 -> 3: even pooling, as ONNX needs
    from_torch = workbench.state.network
    assert not from_torch.is_chain and _graph(workbench)["name"] == list(from_torch.layer_names)
    path = export(Inception(), (3, 12, 12), tmp_path / "inception.onnx")
    assert panel.load_source(str(path), "")
    from_onnx = workbench.state.network
    assert from_onnx.layer_counts == from_torch.layer_counts and from_onnx.input_indices == from_torch.input_indices
    assert len(_edges(workbench)["x0"]) == sum(len(ids) for ids in from_onnx.input_indices)
    assert torch.__version__  # torch is what both imports use
