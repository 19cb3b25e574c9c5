"""Batch reports: one study over a grid, locally and on Dask distributed, into one folder with an index."""

from __future__ import annotations

import json

import pytest

from dnnbench.errors import SpecError
from dnnbench.studies.batch import BatchResult, batch, grid_points, slug, write_index

TINY = {"budgets": [8], "max_workers": 4, "max_replicas": 8, "ps_options": [1, 2], "nic_factors": [1.0, 2.0],
        "mac_factors": [1.0, 2.0], "update_batches": [8, 64]}


def test_grid_points_and_slugs():
    pts = grid_points({"cluster": ["adam-2014", "modern-2025"], "budgets": [[8, 16], [32]]})
    assert len(pts) == 4 and pts[0] == {"cluster": "adam-2014", "budgets": [8, 16]}
    assert slug(pts[0]) == "cluster-adam-2014__budgets-8-16"
    assert slug({"cluster": {"name": "mine", "machines": 3}}) == "cluster-mine"
    assert slug({"cluster": "/some/dir/my.yaml"}) == "cluster-my"
    with pytest.raises(SpecError, match="non-empty list"):
        grid_points({"cluster": []})


def test_bad_grid_point_fails_before_any_kernel(tmp_path):  # type: ignore[no-untyped-def]
    with pytest.raises(SpecError, match="parameter cluster: 'nope' is neither a preset"):
        batch("mnist", {"cluster": ["adam-2014", "nope"]}, tmp_path)
    assert not list(tmp_path.iterdir())


def test_index_lists_failures(tmp_path):  # type: ignore[no-untyped-def]
    res = BatchResult(study="mnist", out_dir=tmp_path, index_path=tmp_path / "index.html", points=[
        {"stem": "a", "status": "ok", "error": None, "elapsed_s": 1.0, "report": "a.html", "results": "a.json",
         "notebook": "a.ipynb", "headline": {"best_speedup": 3.5}, "point": {"cluster": "adam-2014"}},
        {"stem": "b", "status": "failed", "error": "study mnist failed in cell 4: ValueError: x", "elapsed_s": 2.0,
         "point": {"cluster": "edge-wifi"}}])
    html = write_index(res, ["cluster"], {"budgets": [8]}).read_text()
    assert 'href="a.html"' in html and "failed: study mnist failed in cell 4" in html and "3.5" in html
    assert json.loads((tmp_path / "index.json").read_text())["points"][1]["status"] == "failed"


@pytest.mark.slow
def test_local_batch_over_clusters(tmp_path):  # type: ignore[no-untyped-def]
    res = batch("mnist", {"cluster": ["adam-2014", "modern-2025"]}, tmp_path, parameters=TINY)
    assert not res.failed and len(res.points) == 2
    for p in res.points:
        r = json.loads((tmp_path / p["results"]).read_text())
        assert r["cluster"] == p["point"]["cluster"] and (tmp_path / p["report"]).is_file()
        assert p["headline"]["best_budget"] == 8
    index = (tmp_path / "index.html").read_text()
    assert index.count('">report</a>') == 2 and "modern-2025" in index
    # Different clusters give different answers (the grid really reached the notebook).
    speedups = {p["point"]["cluster"]: p["headline"]["single_machine_epoch_time_s"] for p in res.points}
    assert speedups["adam-2014"] != speedups["modern-2025"]


@pytest.mark.slow
def test_dask_batch_on_a_local_cluster(tmp_path):  # type: ignore[no-untyped-def]
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                      local_directory=str(tmp_path / "dask")) as cluster, Client(cluster) as client:
        res = batch("mnist", {"max_workers": [3, 5]}, tmp_path / "out", scheduler=client, parameters=TINY)
    assert not res.failed
    peaks = sorted(len(json.loads((tmp_path / "out" / p["results"]).read_text())["model_parallel"]["speedup"])
                   for p in res.points)
    assert peaks == [3, 5]
    assert (tmp_path / "out" / "index.html").is_file()
