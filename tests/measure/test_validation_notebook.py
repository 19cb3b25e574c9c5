"""notebooks/validation.ipynb: committed stripped, executed by papermill on a given report (exact
figures) and on tiny real runs (docs/validation.md); its results JSON is checked."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest
from notebook_checks import execute_with_results, stripped_typed_parameters

import dnnbench

REPO = Path(dnnbench.__file__).resolve().parents[1]
NOTEBOOK = REPO / "notebooks" / "validation.ipynb"


def _execute(out: Path, parameters: dict) -> tuple[dict, nbformat.NotebookNode]:
    return execute_with_results(NOTEBOOK, out, parameters)


def _row(label: str, predicted: float, measured: float, in_sample: bool = False) -> dict:
    return {"label": label, "kind": "dp", "mode": "sync", "ranks": 1, "link_bits_per_s": 1e9, "in_sample": in_sample,
            "predicted_samples_per_s": predicted, "measured_samples_per_s": measured,
            "error": predicted / measured - 1.0, "cpu_view_error": None, "bottleneck": "worker compute"}


def test_committed_notebook_is_stripped_and_has_typed_parameters() -> None:
    assert stripped_typed_parameters(NOTEBOOK) >= {"report_path", "network", "iterations", "results_path"}


def test_notebook_summarises_a_given_report(tmp_path: Path) -> None:
    rows = [_row("single", 100.0, 100.0, in_sample=True), _row("a", 110.0, 100.0), _row("b", 180.0, 200.0),
            _row("c", 330.0, 300.0)]
    rows[2]["launches_samples_per_s"] = [150.0, 200.0, 260.0]  # each launch; the median launch is measured
    report = {"network": "lenet5", "batch_size": 8, "iterations": 5, "rows": rows, "summary": {}, "notes": []}
    (tmp_path / "report.json").write_text(json.dumps(report))
    res, nb = _execute(tmp_path, {"report_path": "report.json"})
    assert res["schema"] == "dnnbench.validation/1" and res["source"] == "report.json"
    s = res["summary"]
    assert s["configurations"] == 3 and s["ranking_preserved"] and s["kendall_tau"] == 1.0
    assert s["median_abs_error"] == pytest.approx(0.10) and s["max_abs_error"] == pytest.approx(0.10)
    assert [r["error"] for r in res["rows"]] == pytest.approx([0.0, 0.1, -0.1, 0.1])
    assert res["rows"][2]["launches_samples_per_s"] == [150.0, 200.0, 260.0]
    assert res["rows"][1]["launches_samples_per_s"] is None  # a hand-made row without them still plots
    assert not [o for c in nb.cells for o in c.get("outputs", []) if o.output_type == "error"]


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_notebook_runs_tiny_real_validation(tmp_path: Path) -> None:
    res, nb = _execute(tmp_path, {"network": "lenet5", "batch_size": 32, "iterations": 10, "smoke": True})
    assert res["network"] == "lenet5" and res["iterations"] == 10 and res["batch_size"] == 32
    assert [r["kind"] for r in res["rows"]] == ["single", "dp", "dp"]
    assert res["summary"]["configurations"] == 2
    assert res["layer_overhead_s"] > 0 and res["conditions"]["host_cores"] >= 1
    for r in res["rows"]:
        # Gross disagreement only (10 iterations of a tiny run on a shared machine are noisy).
        assert 1 / 3 < r["measured_samples_per_s"] / r["predicted_samples_per_s"] < 3, r
    assert not [o for c in nb.cells for o in c.get("outputs", []) if o.output_type == "error"]
