"""Devices, nodes, precision and memory in the workbench (docs/model.md §11): the cluster panel's
accelerator and node fields, the configuration's precision, optimizer, mini-batch and ZeRO stage,
the memory bar, and edits that are valid alone but not together."""

from __future__ import annotations

from typing import Any

import pytest

from dnnbench import presets
from dnnbench.model import predict
from dnnbench.units import GIB


def _item(wb: Any) -> dict[str, Any]:
    s = wb.state
    return predict(s.network, s.cluster, s.dataset, s.configuration).item()


def test_a_gpu_cluster_shows_its_device_and_nodes_and_edits_reach_the_model(workbench: Any) -> None:
    cp = workbench.cluster_panel
    cp.preset.value = "dgx-a100"
    assert workbench.state.cluster == presets.cluster("dgx-a100")
    assert cp.worker.rate.value == "accelerator"
    assert cp.worker.fields["accelerator.peak_flops_per_s.tf32"].widget.value == pytest.approx(156.0)
    assert cp.worker.fields["accelerator.memory_bytes"].widget.value == pytest.approx(80.0)
    assert cp.node_parts["devices"].widget.value == 8 and cp.node_parts["link.kind"].widget.value == "nvswitch"
    cp.node_parts["nics"].widget.value = 2
    node = workbench.state.cluster.node
    assert node is not None and node.nics == 2
    cp.worker.fields["accelerator.peak_flops_per_s.bf16"].widget.value = 0  # 0: no such mode
    assert workbench.state.cluster.worker.accelerator.peak_flops_per_s.bf16 is None
    # An invalid value is shown at its field; the last valid cluster stays.
    cp.worker.fields["accelerator.memory_bytes_per_s"].widget.value = -1
    assert "memory_bytes_per_s" in cp.worker.fields["accelerator.memory_bytes_per_s"].error.value
    assert workbench.state.cluster.worker.accelerator.memory_bytes_per_s == 2039e9
    cp.worker.fields["accelerator.memory_bytes_per_s"].widget.value = 1000.0  # GB/s
    assert workbench.state.cluster.worker.accelerator.memory_bytes_per_s == 1e12
    cp.node_parts["devices"].widget.value = 0  # no nodes
    assert workbench.state.cluster.node is None


def test_precision_batch_and_zero_reach_the_model_and_the_memory_bar(workbench: Any) -> None:
    workbench.cluster_panel.preset.value = "dgx-a100"
    f = workbench.config_panel.fields
    f["data_parallel"].widget.value = "allreduce"
    f["replicas"].widget.value = 8
    f["precision"].widget.value = "bf16"
    f["optimizer"].widget.value = "adam"
    f["local_batch_samples"].widget.value = 64
    f["zero_stage"].widget.value = 3
    cfg = workbench.state.configuration
    assert (cfg.precision, cfg.optimizer, cfg.local_batch_samples, cfg.zero_stage) == ("bf16", "adam", 64, 3)
    item = _item(workbench)
    bars = workbench.views.memory.sources["memory_parts"].data
    assert bars["mem_optimizer_state"][0] == pytest.approx(item["memory_bytes_per_worker_parts"]["optimizer_state"]
                                                           / GIB, rel=1e-12)
    assert bars["capacity_gib"][0] == pytest.approx(80e9 / GIB, rel=1e-12)
    assert bars["used_gib"][0] + bars["mem_free"][0] == pytest.approx(bars["capacity_gib"][0], rel=1e-12)
    # Back to the PS: ZeRO returns to 0 with it.
    f["data_parallel"].widget.value = "ps"
    assert workbench.state.configuration.zero_stage == 0 and workbench.error.value == ""


def test_an_edit_valid_alone_but_not_with_the_cluster_waits_for_the_fix(workbench: Any) -> None:
    cp, f = workbench.cluster_panel, workbench.config_panel.fields
    cp.preset.value = "dgx-a100"
    f["precision"].widget.value = "fp16"
    cp.preset.value = "adam-2014"  # a CPU cluster: fp16 is not one of its modes
    assert "precision: 'fp16' is not a mode of the CPU machine" in workbench.error.value.replace("&#x27;", "'")
    assert workbench.state.cluster.name == "dgx-a100"  # the last valid state stays on screen
    f["precision"].widget.value = "fp32"
    assert workbench.state.cluster.name == "adam-2014" and workbench.error.value == ""


def test_switching_a_cpu_worker_to_an_accelerator_keeps_a_cpu_ps(workbench: Any) -> None:
    cp = workbench.cluster_panel
    cp.worker.rate.value = "accelerator"
    cl = workbench.state.cluster
    assert cl.worker.accelerator is not None and cl.ps.has_cpu_rate and not cp.ps_same.value
    item = _item(workbench)
    assert workbench.views.memory.sources["memory_parts"].data["mem_workspace"][0] == pytest.approx(
        item["memory_bytes_per_worker_parts"]["workspace"] / GIB)


def test_a_precisions_own_efficiency_is_edited_and_a_mode_the_next_device_lacks_is_shown_as_none(
        workbench: Any) -> None:
    cp = workbench.cluster_panel
    cp.preset.value = "dgx-a100"
    tf32 = "accelerator.efficiency_by_precision.tf32"
    assert cp.worker.fields[f"{tf32}.conv"].widget.value == 0.0  # 0: the accelerator's own
    cp.worker.fields[f"{tf32}.conv"].widget.value = 0.25
    acc = workbench.state.cluster.worker.accelerator
    # The other field of the curve and its call size come from the accelerator.
    assert acc.efficiency("tf32").to_dict() == {"conv": 0.25, "fc": 0.7, "half_efficiency_macs": 2e8,
                                                 "half_efficiency_channels": 64.0}
    assert acc.efficiency("fp16").conv == 0.6
    workbench.config_panel.fields["precision"].widget.value = "tf32"
    s = workbench.state
    without = s.cluster.evolve(worker=s.cluster.worker.evolve(accelerator=acc.evolve(efficiency_by_precision={})))
    # The curve reaches the model: conv layers run at 0.25 of the tf32 peak, not 0.6.
    assert _item(workbench)["samples_per_s"] < predict(s.network, without, s.dataset, s.configuration).samples_per_s
    cp.worker.fields[f"{tf32}.conv"].widget.value = 1.5
    assert "efficiency_by_precision.tf32.conv" in cp.worker.fields[f"{tf32}.conv"].error.value
    assert workbench.state.cluster.worker.accelerator.efficiency("tf32").conv == 0.25
    cp.worker.fields[f"{tf32}.conv"].widget.value = 0.0
    assert workbench.state.cluster.worker.accelerator.efficiency_by_precision.tf32 is None
    # A V100 has no tf32 or bf16: after it, those fields show 0 and an edit elsewhere keeps them absent.
    workbench.config_panel.fields["precision"].widget.value = "fp32"
    cp.preset.value = "dgx1-v100"
    assert cp.worker.fields["accelerator.peak_flops_per_s.tf32"].widget.value == 0.0
    cp.worker.fields["accelerator.memory_bytes_per_s"].widget.value = 800.0
    peaks = workbench.state.cluster.worker.accelerator.peak_flops_per_s
    assert peaks.tf32 is None and peaks.bf16 is None and peaks.fp16 == 125e12
