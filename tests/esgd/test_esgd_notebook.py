"""notebooks/esgd_study.ipynb: committed stripped, executed by papermill with small parameters, its
results JSON checked against numbers computed by hand."""

from __future__ import annotations

import math
from pathlib import Path

import nbformat
import pytest
from notebook_checks import execute_with_results, stripped_typed_parameters

import dnnbench

REPO = Path(dnnbench.__file__).resolve().parents[1]
NOTEBOOK = REPO / "notebooks" / "esgd_study.ipynb"

SMALL = {"dataset": "digits", "rounds": 60, "drop_ratios": [0.0, 0.5, 0.875], "threshold_taus": [0.02],
         "randk_drop_ratios": [0.875], "dgc_drop_ratios": [0.875], "ablation_drop_ratios": [0.875],
         "n_jobs": 1, "target_accuracy": 0.8, "budget_fractions": [0.05, 0.25]}

# The digits MLP 64-128-10: tensors of 8192, 128, 1280 and 10 elements (d = 9610).
SIZES = (64 * 128, 128, 128 * 10, 10)


def test_committed_notebook_is_stripped_and_has_typed_parameters() -> None:
    names = stripped_typed_parameters(NOTEBOOK)
    assert {"dataset", "rounds", "workers", "drop_ratios", "seed", "results_path"} <= names
    nb = nbformat.read(NOTEBOOK, as_version=4)
    assert 'results_path: str = "esgd_results.json"' in "".join(c.source for c in nb.cells)
    assert "import torch" not in "".join(c.source for c in nb.cells if c.cell_type == "code")


@pytest.fixture(scope="module")
def executed(tmp_path_factory: pytest.TempPathFactory) -> dict:
    results, notebook = execute_with_results(NOTEBOOK, tmp_path_factory.mktemp("esgd_study"), SMALL)
    return {"results": results, "notebook": notebook}


def test_the_notebook_ran_with_the_parameters(executed) -> None:
    res = executed["results"]
    assert res["schema"] == "dnnbench.esgd.study/1"
    assert res["study"]["dataset"] == "digits" and res["study"]["rounds"] == 60 and res["study"]["workers"] == 4
    # 1 dense + 2 ESGD + 2 top-k + 1 threshold + 1 random-k + 1 DGC + 6 ablations
    assert len(res["runs"]) == 14
    errors = [o for c in executed["notebook"].cells for o in c.get("outputs", []) if o.output_type == "error"]
    assert errors == []


def test_the_paper_numbers_are_the_abstract_and_the_comparison_is_computed(executed) -> None:
    res = executed["results"]
    assert res["paper"]["mnist_accuracy_by_drop_ratio"] == {"0.5": 0.912, "0.75": 0.867, "0.875": 0.815}
    comparison = {c["drop_ratio"]: c for c in res["paper_comparison"]}
    assert set(comparison) == {0.5, 0.875}  # 0.75 was not run
    ours = {r["drop_ratio"]: r["esgd_accuracy"] for r in res["accuracy_vs_drop"]}
    for drop, c in comparison.items():
        assert c["our_accuracy"] == ours[drop]
        assert c["difference_points"] == pytest.approx(100 * (ours[drop] - c["paper_accuracy"]))
        verdict = "about equal" if abs(c["difference_points"]) <= 0.5 else (
            "higher" if c["difference_points"] > 0 else "lower")
        assert c["verdict"] == verdict
        words = {"higher": "better than", "lower": "worse than", "about equal": "about equal to"}[verdict]
        assert words in c["sentence"]


def test_accuracies_of_the_small_run(executed) -> None:
    rows = {r["drop_ratio"]: r for r in executed["results"]["accuracy_vs_drop"]}
    assert rows[0.0]["esgd_accuracy"] == rows[0.0]["topk_ef_accuracy"]  # drop 0 is the dense run
    assert rows[0.0]["esgd_accuracy"] >= 0.88  # measured 92.5 % (seed 0, 60 rounds)
    assert rows[0.5]["esgd_accuracy"] >= 0.88  # measured 92.5 %
    assert rows[0.875]["esgd_accuracy"] >= 0.83  # measured 89.4 %
    assert rows[0.5]["density_up"] == pytest.approx(sum(math.ceil(0.5 * d) for d in SIZES) / sum(SIZES))


def test_wire_bits_of_the_esgd_runs_match_hand_computed_counts(executed) -> None:
    wire = {r["label"]: r for r in executed["results"]["wire"]}
    d = sum(SIZES)
    k = sum(math.ceil(0.5 * s) for s in SIZES)  # 4096 + 64 + 640 + 5 = 4805
    assert k == 4805
    row = wire["ESGD 50 %"]
    assert row["up_bits_per_round"]["pairs32"] == 64 * k
    assert row["up_bits_per_round"]["bitmap"] == d + 32 * k
    assert row["up_bits_per_round"]["dense"] == 32 * d
    assert "values_only" not in row["up_bits_per_round"]
    assert wire["random-k 87.5 %"]["up_bits_per_round"]["values_only"] == 32 * sum(math.ceil(0.125 * s) for s in SIZES)
    assert wire["random-k 87.5 %"]["density_down"] == wire["random-k 87.5 %"]["density_up"]
    assert wire["dense SGD"]["up_bits_per_round"]["dense"] == 32 * d


def test_budget_time_and_ablation_tables(executed) -> None:
    res = executed["results"]
    assert [r["budget_fraction"] for r in res["equal_budget"]] == [0.05, 0.25]
    dense_bytes = 60 * 32 * sum(SIZES) / 8
    assert res["equal_budget"][1]["budget_bytes"] == pytest.approx(0.25 * dense_bytes)
    ttt = {r["label"]: r for r in res["time_to_target"]}
    assert ttt["dense SGD"]["speedup_vs_dense"] == 1.0 and ttt["dense SGD"]["seconds"] > 0
    abl = res["ablations"]
    assert len(abl) == 6 and {r["drop_ratio"] for r in abl} == {0.875}
    for r in abl:
        assert r["difference_points"] == pytest.approx(100 * (r["accuracy"] - r["esgd_accuracy"]))
