"""The cluster panel's advanced fields (docs/model.md §4): per-layer overhead, message copy time,
shared-host cores; the breakdown plot shows the message-copy part."""

from __future__ import annotations

from typing import Any

import pytest
from dnnbench.widgets import cluster_panel
from dnnbench.widgets.cluster_panel import ADVANCED_TITLE

from dnnbench import presets
from dnnbench.face import plots
from dnnbench.model import predict
from dnnbench.specs import Configuration


def _expected(wb: Any) -> dict[str, Any]:
    s = wb.state
    return predict(s.network, s.cluster, s.dataset, s.configuration).item()


def test_machine_advanced_fields_reach_the_model_and_the_breakdown(workbench: Any) -> None:
    cp = workbench.cluster_panel
    assert cp.worker.advanced is not None and cp.worker.advanced.titles == (ADVANCED_TITLE,)
    assert cp.worker.advanced.selected_index is None  # collapsed until needed
    cfg = workbench.config_panel.fields
    cfg["ps_machines"].widget.value = 10
    cfg["replicas"].widget.value = 8
    bars = workbench.views.breakdown.sources["breakdown_parts"].data
    assert bars["compute_messages"][0] == 0.0  # zero in the presets
    cp.worker.fields["copy_time_s_per_byte"].widget.value = 0.5  # ns per byte
    assert workbench.state.cluster.worker.copy_time_s_per_byte == pytest.approx(5e-10, rel=1e-12)
    expected = _expected(workbench)
    messages = expected["breakdown_s_per_sample"]["compute_messages"]
    assert messages > 0
    bars = workbench.views.breakdown.sources["breakdown_parts"].data
    assert bars["compute_messages"][0] == pytest.approx(messages, rel=1e-12)
    assert bars["total_s"][0] == pytest.approx(sum(expected["breakdown_s_per_sample"].values()), rel=1e-12)
    cp.worker.fields["layer_overhead_s"].widget.value = 20.0  # µs per layer pass
    assert workbench.state.cluster.worker.layer_overhead_s == pytest.approx(2e-5, rel=1e-12)
    # The PS has its own (hidden while "PS machines are the worker type" is ticked: it follows the worker).
    assert workbench.state.cluster.ps.layer_overhead_s == workbench.state.cluster.worker.layer_overhead_s
    cp.ps_same.value = False
    cp.ps.fields["copy_time_s_per_byte"].widget.value = 2.0
    assert workbench.state.cluster.ps.copy_time_s_per_byte == pytest.approx(2e-9, rel=1e-12)
    assert workbench.state.cluster.worker.copy_time_s_per_byte == pytest.approx(5e-10, rel=1e-12)
    assert _expected(workbench)["epoch_time_s"] == pytest.approx(
        workbench.views.speedup.sources["speedup_current"].data["epoch_time_s"][0], rel=1e-12)


def test_invalid_advanced_value_opens_its_part_and_keeps_the_cluster(workbench: Any) -> None:
    cp = workbench.cluster_panel
    kept = workbench.state.cluster
    cp.worker.fields["layer_overhead_s"].widget.value = -5.0
    error = cp.worker.fields["layer_overhead_s"].error.value
    assert "worker.layer_overhead_s" in error and "last valid cluster" in error
    assert cp.worker.advanced.selected_index == 0  # the message is visible
    assert workbench.state.cluster is kept
    cp.worker.fields["layer_overhead_s"].widget.value = 0.0
    assert cp.worker.fields["layer_overhead_s"].error.value == ""


def _host_cores(workbench: Any) -> int | None:
    host = workbench.state.cluster.shared_host
    return None if host is None else host.cores


def test_shared_host_cores(workbench: Any) -> None:
    cp = workbench.cluster_panel
    assert cp.host_cores.value == 0 and workbench.state.cluster.shared_host is None
    assert all(f.box.layout.display == "none" for f in cp.host_parts.values())  # nothing to set without a host
    cfg = workbench.config_panel.fields
    cfg["ps_machines"].widget.value = 10
    cfg["replicas"].widget.value = 8
    separate = _expected(workbench)["epoch_time_s"]
    cp.host_cores.value = 4
    assert _host_cores(workbench) == 4
    assert all(f.box.layout.display is None for f in cp.host_parts.values())
    contended = _expected(workbench)["epoch_time_s"]
    assert contended > separate  # 8 replicas of busy workers share 4 cores
    cp.host_parts["corun_slowdown"].widget.value = 0.2
    assert workbench.state.cluster.shared_host.corun_slowdown == 0.2
    assert _expected(workbench)["epoch_time_s"] > contended
    cp.host_parts["wakeup_delay_s"].widget.value = 2.0  # ms
    assert workbench.state.cluster.shared_host.wakeup_delay_s == pytest.approx(2e-3)
    cp.host_parts["wakeup_delay_s"].widget.value = 5000.0  # 5 s: past the spec's limit
    assert "shared_host.wakeup_delay_s" in cp.host_parts["wakeup_delay_s"].error.value
    assert workbench.state.cluster.shared_host.wakeup_delay_s == pytest.approx(2e-3)
    cp.host_parts["wakeup_delay_s"].widget.value = 0.0
    cp.host_cores.value = -1
    assert "shared_host.cores" in cp.host_cores_field.error.value
    assert _host_cores(workbench) == 4
    cp.host_cores.value = 0
    assert workbench.state.cluster.shared_host is None
    assert cp.host_cores_field.error.value == ""
    # A loaded state shows its values.
    state = workbench.state
    cluster = state.cluster.evolve(shared_host={"cores": 12, "background_threads": 1.5},
                                   worker=state.cluster.worker.evolve(copy_time_s_per_byte=3e-9))
    workbench.set_state(state.evolve(cluster=cluster))
    assert cp.host_cores.value == 12 and cp.host_parts["background_threads"].widget.value == 1.5
    assert cp.worker.fields["copy_time_s_per_byte"].widget.value == pytest.approx(3.0)
    assert workbench.state.cluster == cluster


def test_the_ps_editor_shows_only_what_the_ps_reads(workbench: Any) -> None:
    cp = workbench.cluster_panel
    assert "cache_speedup" in cp.worker.fields and "cache_speedup" not in cp.ps.fields
    assert set(cp.ps.fields) == {q.path for q in cluster_panel.MACHINE_FIELDS} - cluster_panel.WORKER_ONLY
    cp.ps_same.value = False
    cp.ps.fields["cores"].widget.value = 3
    assert workbench.state.cluster.ps.cores == 3
    # Switching the PS's rate between peak and MAC times keeps a valid machine without the FC fields.
    cp.ps.rate.value = "MAC times"
    assert workbench.state.cluster.ps.mac_time_s is not None and cp.ps.fields["cores"].error.value == ""
    cp.ps.rate.value = "peak rate"
    assert workbench.state.cluster.ps.peak is not None


def _legend(plot: plots.Plot) -> list[str]:
    return [it.label["value"] for it in plot.figure.legend[0].items if it.visible]


def test_the_breakdown_legend_lists_the_parts_that_are_there() -> None:
    net = presets.network("mnist-adam")
    ds = presets.default_dataset_for(net)
    item = predict(net, presets.cluster("adam-2014"), ds, Configuration()).item()
    assert set(item["breakdown_s_per_sample"]) == set(plots.BREAKDOWN_PARTS)  # JSON keeps every part
    plot = plots.breakdown_figure({"current": item, "optimum": item})
    there = [plots.BREAKDOWN_PARTS[k] for k, v in item["breakdown_s_per_sample"].items() if v != 0.0]
    assert _legend(plot) == there and "compute: forward" in there
    assert "PS push" not in there and "shared host: waiting for a CPU after a message" not in there
    # A configuration with a PS and a shared host brings their parts into the same figure's legend.
    host = presets.cluster("adam-2014").evolve(shared_host={"cores": 2, "wakeup_delay_s": 1e-3})
    busy = predict(net, host, ds, Configuration(replicas=4, ps_machines=1, mode="sync")).item()
    plot.update(plots.breakdown_data({"current": busy, "optimum": item}))
    assert {"PS push", "PS pull", "shared host: waiting for a CPU after a message"} <= set(_legend(plot))
    plot.update(plots.breakdown_data({"current": item, "optimum": item}))
    assert _legend(plot) == there


def test_step_jitter_makes_synchronous_rounds_wait_in_the_breakdown(workbench: Any) -> None:
    cp = workbench.cluster_panel
    cfg = workbench.config_panel.fields
    cfg["ps_machines"].widget.value = 4
    cfg["replicas"].widget.value = 8
    cfg["mode"].widget.value = "sync"
    bars = workbench.views.breakdown.sources["breakdown_parts"].data
    assert bars["sync_straggler"][0] == 0.0  # zero jitter in the presets
    cp.worker.fields["step_time_cv"].widget.value = 0.2
    assert workbench.state.cluster.worker.step_time_cv == 0.2
    expected = _expected(workbench)
    wait = expected["breakdown_s_per_sample"]["sync_straggler"]
    assert wait > 0
    bars = workbench.views.breakdown.sources["breakdown_parts"].data
    assert bars["sync_straggler"][0] == pytest.approx(wait, rel=1e-12)
    cp.worker.fields["step_time_cv"].widget.value = -0.1  # invalid: shown, the last valid cluster kept
    assert "worker.step_time_cv" in cp.worker.fields["step_time_cv"].error.value
    assert workbench.state.cluster.worker.step_time_cv == 0.2


def test_machine_classes_are_edited_in_the_panel(workbench: Any) -> None:
    cp = workbench.cluster_panel
    assert cp.classes.rows == [] and workbench.state.cluster.classes == ()
    # Two classes: 6 of the cluster's own worker type and 2 of a modern server with its NIC.
    cp.classes.add()
    row = cp.classes.rows[0]
    row["count"].value = 6
    cp.classes.add()
    new = cp.classes.rows[1]
    new["machine"].value = "modern-2025 worker"
    new["nic"].value = "modern-2025 worker NIC"
    new["count"].value = 2
    cluster = workbench.state.cluster
    assert [(c.name, c.count) for c in cluster.classes] == [("class 1", 6), ("class 2", 2)]
    assert cluster.classes[1].machine == presets.cluster("modern-2025").worker
    assert workbench.state.budget_machines == cluster.machines == 8  # the classes set the budget
    assert workbench.results.optimal.machines.max() == 8  # the plotted curves follow the budget
    # The configuration's placement and its cost against the uniform cluster, in the summary.
    cfg = workbench.config_panel.fields
    cfg["ps_machines"].widget.value = 2
    cfg["replicas"].widget.value = 3
    text = workbench.views.summary.text
    assert "Placement on the machine classes" in text and "uniform cluster" in text
    # Optimize searches the placements.
    from dnnbench.optimizer import optimize_heterogeneous

    s = workbench.state
    best = optimize_heterogeneous(s.network, s.cluster, s.dataset, s.configuration)
    workbench.optimize()
    c = workbench.state.configuration
    assert (c.workers_per_replica, c.replicas, c.ps_machines) == (best.workers_per_replica, best.replicas,
                                                                  best.ps_machines)
    # A bad count is shown on its row; the last valid cluster stays.
    kept = workbench.state.cluster
    row["count"].value = 0
    assert "classes[0].count" in row["error"].value and workbench.state.cluster == kept
    row["count"].value = 6
    assert row["error"].value == ""
    # Removing both rows: a uniform cluster again.
    cp.classes.remove(cp.classes.rows[1])
    cp.classes.remove(cp.classes.rows[0])
    assert workbench.state.cluster.classes == ()
    # A loaded cluster with classes shows them, its machine types among the choices.
    workbench.set_state(s.evolve(cluster=kept))
    assert [r["count"].value for r in cp.classes.rows] == [6, 2]
    assert workbench.state.cluster == kept
