"""Headless workbench: set controls, assert the data sources and the browser messages follow the model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dnnbench import presets
from dnnbench.face.state import WorkbenchState
from dnnbench.model import predict
from dnnbench.optimizer import model_parallel_curve, optimize
from dnnbench.specs import Configuration


def _source(wb: Any, name: str) -> dict[str, Any]:
    for plot in wb.views.plots:
        if name in plot.sources:
            return plot.sources[name].data
    raise KeyError(name)


def _expected(wb: Any) -> dict[str, Any]:
    s = wb.state
    return predict(s.network, s.cluster, s.dataset, s.configuration).item()


def _patch_contents(sent: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for m in sent:
        payload = m["content"].get("payload")
        if isinstance(payload, str) and payload.startswith("{") and '"events"' in payload:
            out.append(json.loads(payload))
    return out


def _headers(sent: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for m in sent:
        payload = m["content"].get("payload")
        if isinstance(payload, str) and '"msgtype"' in payload:
            out.append(json.loads(payload))
    return out


def test_configuration_change_updates_sources_in_one_patch(workbench: Any, sent: list[dict[str, Any]]) -> None:
    fields = workbench.config_panel.fields
    before = workbench.updates
    fields["workers_per_replica"].widget.value = 4
    assert workbench.updates == before + 1  # the observer fired once
    assert workbench.state.configuration.workers_per_replica == 4
    cur = _source(workbench, "speedup_current")
    expected = _expected(workbench)
    assert cur["workers_per_replica"] == [4.0]
    assert cur["speedup"][0] == pytest.approx(expected["speedup"], rel=1e-12)
    bars = _source(workbench, "breakdown_parts")
    assert bars["label"][0] == "current"
    assert bars["compute_forward"][0] == pytest.approx(expected["breakdown_s_per_sample"]["compute_forward"])
    # The data-parallel curve now uses W = 4.
    assert set(np.asarray(_source(workbench, "speedup_data_parallel")["workers_per_replica"])) == {4.0}
    # One PATCH-DOC message carried every source change.
    headers = _headers(sent)
    assert [h["msgtype"] for h in headers] == ["PATCH-DOC"]
    events = _patch_contents(sent)[0]["events"]
    changed = {e["model"]["id"] for e in events}
    ids = {s.id for p in workbench.views.plots for s in p.sources.values()}
    assert ids & changed  # sources were in the patch
    assert workbench.views.widget.patch_messages_sent == 1


def test_replicas_and_ps_change_the_marker_as_the_model_says(workbench: Any) -> None:
    f = workbench.config_panel.fields
    f["ps_machines"].widget.value = 10
    f["replicas"].widget.value = 8
    s = workbench.state.configuration
    assert (s.replicas, s.ps_machines) == (8, 10)
    cur = _source(workbench, "heatmap_current")
    exp = _expected(workbench)
    assert cur["machines"] == [float(exp["machines"])]
    assert cur["epoch_time_s"][0] == pytest.approx(exp["epoch_time_s"], rel=1e-12)
    f["mode"].widget.value = "sync"
    assert workbench.state.configuration.mode == "sync"
    assert _source(workbench, "speedup_current")["epoch_time_s"][0] == pytest.approx(
        _expected(workbench)["epoch_time_s"], rel=1e-12)


def test_invalid_configuration_shows_error_and_keeps_last_prediction(workbench: Any, sent: list[Any]) -> None:
    f = workbench.config_panel.fields
    f["workers_per_replica"].widget.value = 2
    good = dict(_source(workbench, "speedup_current"))
    state = workbench.state
    f["replicas"].widget.value = 4  # replicas > 1 with P = 0: invalid
    assert "ps_machines" in f["ps_machines"].error.value
    assert "last valid" in f["ps_machines"].error.value
    assert workbench.state is state
    assert _source(workbench, "speedup_current") == good
    f["workers_per_replica"].widget.value = 0
    assert "workers_per_replica" in f["workers_per_replica"].error.value
    f["ps_machines"].widget.value = 3
    # still invalid (W = 0): nothing changes, the message stays next to W
    assert workbench.state is state
    assert "workers_per_replica" in f["workers_per_replica"].error.value
    f["workers_per_replica"].widget.value = 1
    assert f["workers_per_replica"].error.value == ""
    assert workbench.state.configuration.replicas == 4
    assert _source(workbench, "speedup_current")["replicas"] == [4.0]


def test_network_field_edit_and_invalid_layer(workbench: Any) -> None:
    panel = workbench.network_panel
    conv1 = panel.rows[1]
    conv1.params["out_channels"].value = "96"
    net = workbench.state.network
    assert net.layers[1].out_channels == 96
    assert "96×55×55" in conv1.info.value
    exp = _expected(workbench)
    assert _source(workbench, "speedup_current")["epoch_time_s"][0] == pytest.approx(exp["epoch_time_s"], rel=1e-12)
    mp = model_parallel_curve(net, workbench.state.cluster, workbench.state.dataset, 120, workbench.state.configuration)
    np.testing.assert_allclose(_source(workbench, "speedup_model_parallel")["speedup"], mp.speedup, rtol=1e-12)
    before = dict(_source(workbench, "speedup_current"))
    conv1.params["kernel"].value = "300"
    assert "layers[1].kernel" in conv1.error.value and "larger than the input" in conv1.error.value
    assert workbench.state.network is net  # the last valid network stays in use
    assert _source(workbench, "speedup_current") == before
    assert "layers[1].kernel" in workbench.views.summary.text or "last valid" in conv1.error.value
    conv1.params["kernel"].value = "11"
    assert conv1.error.value == ""
    assert workbench.state.network.layers[1].kernel == 11


def test_a_layer_shares_only_parameters_of_its_sizes(workbench: Any) -> None:
    panel = workbench.network_panel
    layers = workbench.state.network.layers
    convs = [i for i, layer in enumerate(layers) if layer.kind == "conv2d"]
    pools = [i for i, layer in enumerate(layers) if layer.kind == "pool"]
    assert "shares" not in panel.rows[pools[0]].params  # a kind without parameters does not offer it
    assert list(panel.rows[convs[1]].params)[-1] == "shares"
    kept = workbench.state.network
    first = workbench.state.network.layer_names[convs[0]]
    panel.rows[convs[1]].params["shares"].value = first
    row = panel.rows[convs[1]]
    assert f"layers[{convs[1]}].shares: &#x27;{first}&#x27; holds parameter tensors of" in row.error.value
    assert "dnnbench-invalid" in row.params["shares"]._dom_classes
    assert workbench.state.network is kept
    row.params["shares"].value = ""
    assert row.error.value == "" and workbench.state.network == kept


def test_layer_editor_offers_the_new_kinds_with_their_fields(workbench: Any) -> None:
    """A row turned into a running sum offers its axis and whether it multiplies; an axis the maps do not
    have names the field on the row and leaves the network as it was; a top k's k likewise; copies take
    their count."""
    panel = workbench.network_panel
    j = next(i for i, layer in enumerate(workbench.state.network.layers) if layer.kind == "pool")
    row = panel.rows[j]
    row.kind.value = "cumsum"
    assert set(row.params) == {"axis", "product"} and workbench.state.network.layers[j].kind == "cumsum"
    kept = workbench.state.network
    row.params["axis"].value = "7"
    assert "axis" in row.error.value and "dnnbench-invalid" in row.params["axis"]._dom_classes
    assert workbench.state.network is kept
    row.params["axis"].value = "0"
    assert row.error.value == "" and workbench.state.network.layers[j].axis == 0
    row.params["product"].value = True
    assert row.error.value == "" and workbench.state.network.layers[j].product
    row.kind.value = "topk"
    assert set(row.params) == {"k", "axis", "largest"}
    row.params["k"].value = "100000"
    assert "k" in row.error.value and workbench.state.network.layers[j].kind == "cumsum"
    row.kind.value = "repeat"
    assert set(row.params) == {"axis", "times", "interleave"}
    row.params["times"].value = "3"
    assert row.error.value == "" and workbench.state.network.layers[j].kind == "repeat"
    assert workbench.state.network.shapes[j][0] == 3 * workbench.state.network.shapes[j - 1][0]


def test_layer_editor_add_remove_reorder_and_kind(workbench: Any) -> None:
    panel = workbench.network_panel
    n = len(panel.rows)
    panel.add_kind.value = "dropout"
    panel.add_button.click()
    assert len(workbench.state.network.layers) == n + 1
    assert workbench.state.network.layers[-1].kind == "dropout"
    panel.rows[-1].up.click()
    assert workbench.state.network.layers[-2].kind == "dropout"
    panel.rows[-2].remove.click()
    assert len(workbench.state.network.layers) == n
    # Changing a row's kind gives it that kind's parameters.
    panel.rows[2].kind.value = "activation"
    assert workbench.state.network.layers[2].kind == "activation"
    assert set(panel.rows[2].params) == {"function", "exponent"}
    # pow needs its exponent: without one the row names the field and the network stays; with one it lands
    row, kept = panel.rows[2], workbench.state.network
    row.params["function"].value = "pow"
    assert "exponent" in row.error.value and "dnnbench-invalid" in row.params["exponent"]._dom_classes
    assert workbench.state.network is kept
    row.params["exponent"].value = "3"
    assert row.error.value == "" and workbench.state.network.layers[2].exponent == 3.0
    row.params["exponent"].value = ""
    row.params["function"].value = "relu"
    assert workbench.state.network.layers[2].function == "relu"
    # A bad reorder (the layer after the last pooling layer, a flatten, moved above it) is reported
    # on the row the spec names; the network stays.
    layers = workbench.state.network.layers
    j = max(i for i, layer in enumerate(layers) if layer.kind == "pool")
    assert layers[j + 1].kind in ("flatten", "fc")
    kept = workbench.state.network
    panel.move(panel.rows[j + 1], -1)
    assert workbench.state.network is kept
    assert f"layers[{j + 1}].kind" in panel.error.value and "last valid" in panel.error.value
    assert f"layers[{j + 1}]" in panel.rows[j + 1].error.value
    panel.move(panel.rows[j], +1)  # and back: valid again
    assert workbench.state.network == kept
    assert panel.error.value == ""


def test_cluster_field_and_budget(workbench: Any) -> None:
    cp = workbench.cluster_panel
    cp.worker_nic.fields["upload_bits_per_s"].widget.value = 1.0  # Gbit/s
    assert workbench.state.cluster.worker_nic.upload_bits_per_s == 1e9
    assert _source(workbench, "speedup_current")["epoch_time_s"][0] == pytest.approx(
        _expected(workbench)["epoch_time_s"], rel=1e-12)
    cp.worker.fields["peak.efficiency_conv"].widget.value = 1.5
    assert "efficiency_conv" in cp.worker.fields["peak.efficiency_conv"].error.value
    assert workbench.state.cluster.worker.peak.efficiency_conv == 0.35
    cp.worker.fields["peak.efficiency_conv"].widget.value = 0.5
    assert workbench.state.cluster.worker.peak.efficiency_conv == 0.5
    cp.budget.value = 40
    assert workbench.state.budget_machines == 40
    heat = _source(workbench, "heatmap_grid")
    assert np.max(heat["machines"]) <= 40
    best = optimize(workbench.state.network, workbench.state.cluster, workbench.state.dataset, 40,
                    workbench.state.configuration, top_k=1).best
    assert _source(workbench, "heatmap_optimum")["epoch_time_s"][0] == pytest.approx(best.epoch_time_s, rel=1e-12)
    cp.budget.value = 0
    assert "machine budget" in cp.budget_field.error.value
    assert workbench.state.budget_machines == 40


def test_cluster_rate_mode_switch_keeps_prediction(workbench: Any) -> None:
    cp = workbench.cluster_panel
    before = _expected(workbench)["epoch_time_s"]
    cp.worker.rate.value = "MAC times"
    assert workbench.state.cluster.worker.mac_time_s is not None
    assert _expected(workbench)["epoch_time_s"] == pytest.approx(before, rel=1e-9)


def test_presets_switch(workbench: Any) -> None:
    workbench.network_panel.preset.value = "mnist-adam"
    assert workbench.state.network.name == "mnist-adam"
    assert workbench.state.dataset.name == "mnist"
    workbench.cluster_panel.preset.value = "edge-wifi"
    assert workbench.state.cluster.name == "edge-wifi"
    assert workbench.state.budget_machines == presets.cluster("edge-wifi").machines


def test_optimize_button_sets_the_optimum(workbench: Any) -> None:
    workbench.optimize_button.click()
    s = workbench.state
    best = optimize(s.network, s.cluster, s.dataset, s.budget_machines, s.configuration, top_k=1).best
    assert (s.configuration.workers_per_replica, s.configuration.replicas, s.configuration.ps_machines) == (
        best.workers_per_replica, best.replicas, best.ps_machines)
    f = workbench.config_panel.fields
    assert f["replicas"].widget.value == best.replicas
    optimum = _source(workbench, "heatmap_optimum")["epoch_time_s"]
    assert _source(workbench, "speedup_current")["epoch_time_s"] == optimum


def test_compression_control_offers_esgd_methods(workbench: Any) -> None:
    from dnnbench.widgets.config_panel import compression_choices

    methods, _ = compression_choices()
    dropdown = workbench.config_panel.compression["method"].widget
    assert dropdown.options[0] == "none"
    assert tuple(dropdown.options) == methods
    if len(methods) > 1:
        workbench.config_panel.fields["ps_machines"].widget.value = 4
        workbench.config_panel.fields["replicas"].widget.value = 4
        dense = _expected(workbench)
        workbench.config_panel.compression["density"].widget.value = 0.01
        dropdown.value = "topk_ef" if "topk_ef" in methods else methods[1]
        assert workbench.state.configuration.compression.method == dropdown.value
        assert _expected(workbench)["breakdown_s_per_sample"]["ps_push"] < dense["breakdown_s_per_sample"]["ps_push"]


def test_save_load_and_export(workbench: Any, tmp_path: Path) -> None:
    workbench.config_panel.fields["workers_per_replica"].widget.value = 3
    path = workbench.save(tmp_path / "bench.json")
    saved = WorkbenchState.load(path)
    assert saved == workbench.state
    workbench.config_panel.fields["workers_per_replica"].widget.value = 5
    workbench.load(path)
    assert workbench.state.configuration.workers_per_replica == 3
    assert workbench.config_panel.fields["workers_per_replica"].widget.value == 3
    html_path = workbench.export_html(tmp_path / "plots.html")
    text = html_path.read_text(encoding="utf-8")
    assert "cdn.bokeh.org" not in text and "https://" not in text.split("<body>")[0].split("Bokeh")[0]
    assert '"speedup"' in text and '"heatmap"' in text
    # A bad file is one message, not a crash.
    bad = tmp_path / "bad.json"
    bad.write_text('{"network": 3}', encoding="utf-8")
    workbench.state_path.value = str(bad)
    workbench.load_button.click()
    assert "bad.json" in workbench.error.value
    assert workbench.state.configuration.workers_per_replica == 3


def test_unexpected_errors_are_shown_not_raised(workbench: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import dnnbench.widgets.workbench as mod

    def boom(state: Any) -> Any:
        raise RuntimeError("model exploded")

    monkeypatch.setattr(mod, "compute", boom)
    state = workbench.state
    workbench.config_panel.fields["workers_per_replica"].widget.value = 7
    assert "model exploded" in workbench.error.value
    assert workbench.state is state
    assert "model exploded" in workbench.views.summary.text


def test_reentrant_changes_are_applied_after_the_current_one(workbench: Any) -> None:
    calls: list[int] = []
    original = workbench._apply

    def apply(changes: dict[str, Any]) -> None:
        calls.append(changes["configuration"].workers_per_replica if "configuration" in changes else -1)
        if len(calls) == 1:  # a change arriving while the first is applied
            workbench.change(configuration=Configuration(workers_per_replica=6))
            assert len(calls) == 1  # not applied re-entrantly
        original(changes)

    workbench._apply = apply
    workbench.change(configuration=Configuration(workers_per_replica=2))
    assert calls == [2, 6]
    assert workbench.state.configuration.workers_per_replica == 6


def test_close_unobserves_everything(workbench: Any) -> None:
    panel = workbench.config_panel
    widget = panel.fields["workers_per_replica"].widget
    workbench.close()
    assert panel._observers == []
    updates = workbench.updates
    widget.value = 9
    assert workbench.updates == updates


def test_model_names_are_unique_in_the_document(workbench: Any) -> None:
    # BokehJS's get_model_by_name raises when two models share a name (the browser tests rely on it).
    names = [m.name for m in workbench.views.layout.document.models if m.name]
    assert len(names) == len(set(names))
    for name in ("speedup", "breakdown", "heatmap", "summary", "speedup_current", "breakdown_parts", "heatmap_grid"):
        assert name in names
