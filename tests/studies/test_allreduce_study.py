"""notebooks/allreduce_study.ipynb: committed stripped and as generated, executed by papermill with small
parameters; its results agree with the optimizer and the model."""

from __future__ import annotations

import json
from typing import Any

import pytest

from dnnbench import presets
from dnnbench.model import predict
from dnnbench.optimizer import optimize
from dnnbench.studies import allreduce_notebook, registry

SMALL: dict[str, Any] = {"machines": 16, "networks": ["lenet5", "resnet50"], "nic_factors": [0.01, 1.0],
                         "ps_options": [1, 4, 16], "replicas": 8, "gpu_batches": [8, 64]}


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from dnnbench import studies

    return studies.run("allreduce", SMALL, tmp_path_factory.mktemp("allreduce"))


def test_committed_notebook_is_stripped_and_up_to_date() -> None:
    path = registry.available()["allreduce"]
    nb = json.loads(path.read_text())
    assert all(c["outputs"] == [] for c in nb["cells"] if c["cell_type"] == "code")
    assert path.read_text() == allreduce_notebook.text(), "run: python -m dnnbench.studies.allreduce_notebook"
    md = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    for heading in ("## 1. The two schemes", "## 2. Network size", "## 3. NIC bandwidth",
                    "## 4. How many PS machines", "## 5. GPU nodes: memory decides", "## 6. Limitations"):
        assert heading in md
    assert "reconstructed" in md and md.count("$$") >= 4


def test_winners_are_the_optimizers(run: Any) -> None:
    cl = presets.cluster("modern-2025")
    for row in run.results["by_network"]:
        net = presets.network(row["network"])
        both = optimize(net, cl, None, 16, data_parallels=["ps", "allreduce"], top_k=1).best
        assert both.data_parallel == row["winner"], row["network"]
        assert row[row["winner"]]["epoch_time_s"] == pytest.approx(both.epoch_time_s, rel=1e-12)
    slow, fast = run.results["by_bandwidth"]
    assert slow["factor"] == 0.01 and fast["factor"] == 1.0
    assert slow["ps"]["epoch_time_s"] >= fast["ps"]["epoch_time_s"]  # a slower NIC is never faster


def test_ps_machines_section_is_the_model(run: Any) -> None:
    m = run.results["ps_machines_to_match"]
    net, cl = presets.network("resnet50"), presets.cluster("modern-2025")
    from dnnbench.specs import Configuration

    ar = predict(net, cl, None, Configuration(data_parallel="allreduce", replicas=8)).item()
    assert m["allreduce_samples_per_s"] == pytest.approx(ar["samples_per_s"], rel=1e-12)
    rates = [r["samples_per_s"] for r in m["ps"]]
    assert rates == sorted(rates)  # more PS machines never slow synchronous rounds down
    need = m["ps_machines_to_match"]
    assert need is None or rates[[r["ps_machines"] for r in m["ps"]].index(need)] >= m["allreduce_samples_per_s"]


def test_the_report_is_written_and_the_notebook_ran_clean(run: Any) -> None:
    html = run.html_path.read_text()
    assert "allreduce_bandwidth" in html and "allreduce_ps_machines" in html
    nb = json.loads(run.notebook_path.read_text())
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            assert out.get("output_type") != "error"


def test_the_gpu_section_is_the_model_and_zero_lets_more_fit(run: Any) -> None:
    from dnnbench.specs import Configuration
    from dnnbench.studies.allreduce import largest_batch

    rows = run.results["memory_on_devices"]
    assert [(r["zero_stage"], r["batch"]) for r in rows] == [(z, b) for z in range(4) for b in (8, 64)]
    for r in rows:
        cfg = Configuration(data_parallel="allreduce", replicas=32, precision="bf16", optimizer="adam",
                            zero_stage=r["zero_stage"], local_batch_samples=r["batch"],
                            push_interval_samples=r["batch"])
        item = predict("gpt2-small", "dgx-a100", None, cfg).item()
        assert r["memory_bytes"] == pytest.approx(item["memory_bytes_per_worker"], rel=1e-12)
        assert r["feasible"] == item["feasible"]
    sizes = {z: [r["memory_bytes"] for r in rows if r["zero_stage"] == z] for z in range(4)}
    assert all(a > b for z in range(3) for a, b in zip(sizes[z], sizes[z + 1], strict=True))
    assert (largest_batch(rows, 3) or 0) >= (largest_batch(rows, 0) or 0)
