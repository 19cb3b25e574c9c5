"""dnnbench.face.plots: pure data functions, named Bokeh models, standalone HTML without a CDN."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from dnnbench import presets
from dnnbench.face import plots
from dnnbench.model import evaluate, predict
from dnnbench.optimizer import data_parallel_curve, model_parallel_curve
from dnnbench.specs import Configuration


@pytest.fixture(scope="module")
def problem() -> tuple:
    net = presets.network("mnist-adam")
    return net, presets.cluster("adam-2014"), presets.default_dataset_for(net)


def test_import_dnnbench_does_not_import_bokeh() -> None:
    code = "import dnnbench, dnnbench.face.state, dnnbench.face.launch, dnnbench.cli, sys; " \
           "dnnbench.cli.build_parser(); print([m for m in sys.modules if m.split('.')[0] in ('bokeh', 'ipywidgets')])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_speedup_figure_and_data(problem: tuple) -> None:
    net, cl, ds = problem
    cfg = Configuration(workers_per_replica=2, replicas=3, ps_machines=2)
    mp = model_parallel_curve(net, cl, ds, 12, cfg)
    dp = data_parallel_curve(net, cl, ds, 12, cfg)
    item = predict(net, cl, ds, cfg).item()
    plot = plots.speedup_figure(mp, dp, None, item)
    assert plot.figure.name == "speedup"
    assert set(plot.sources) == {"speedup_model_parallel", "speedup_data_parallel", "speedup_optimal",
                                 "speedup_linear", "speedup_current"}
    assert all(s.name == k for k, s in plot.sources.items())
    np.testing.assert_allclose(plot.sources["speedup_model_parallel"].data["speedup"], mp.speedup)
    assert plot.sources["speedup_current"].data["speedup"] == [item["speedup"]]
    assert list(plot.sources["speedup_linear"].data["machines"]) == [1.0, 12.0]
    new = plots.speedup_data(mp, dp, None, predict(net, cl, ds, cfg.evolve(replicas=4)).item())
    plot.update(new)
    assert plot.sources["speedup_current"].data["replicas"] == [4.0]


def test_breakdown_parts_in_ms(problem: tuple) -> None:
    net, cl, ds = problem
    item = predict(net, cl, ds, Configuration(workers_per_replica=2, replicas=2, ps_machines=1)).item()
    data = plots.breakdown_data({"current": item})["breakdown_parts"]
    for part, seconds in item["breakdown_s_per_sample"].items():
        assert data[part][0] == pytest.approx(seconds * 1e3)
    assert data["total_ms"][0] == pytest.approx(1e3 * sum(item["breakdown_s_per_sample"].values()))
    plot = plots.breakdown_figure({"current": item, "optimum": item})
    assert plot.figure.name == "breakdown"


def test_heatmap_data_masks_infeasible_and_has_log_edges(problem: tuple) -> None:
    net, cl, ds = problem
    w = np.array([1.0, 2.0, 4.0, 1.0])
    r = np.array([1.0, 1.0, 2.0, 8.0])
    p = np.array([9.0, 8.0, 2.0, 2.0])
    grid = evaluate(net, cl, ds, Configuration(), workers_per_replica=w, replicas=r, ps_machines=p)
    cells = plots.heatmap_data(grid)["heatmap_grid"]
    assert np.all(cells["left"] < cells["workers_per_replica"])
    assert np.all(cells["right"] > cells["workers_per_replica"])
    assert np.all(cells["bottom"] < cells["replicas"])
    np.testing.assert_allclose(cells["epoch_time_s"], grid.epoch_time_s)
    tiny = cl.evolve(worker=cl.worker.evolve(memory_bytes=1))
    bad = evaluate(net, tiny, ds, Configuration(), workers_per_replica=w, replicas=r, ps_machines=p)
    cells = plots.heatmap_data(bad)["heatmap_grid"]
    assert np.all(np.isnan(cells["epoch_time_s"]))
    assert all("does not fit" in t for t in cells["epoch_text"])
    plot = plots.heatmap_figure(grid, budget_machines=10)
    assert plot.figure.name == "heatmap"


def test_standalone_html_is_inline(problem: tuple, tmp_path) -> None:  # type: ignore[no-untyped-def]
    net, cl, ds = problem
    mp = model_parallel_curve(net, cl, ds, 8)
    item = predict(net, cl, ds, Configuration()).item()
    figures = [plots.summary_div(item), plots.speedup_figure(mp, current=item)]
    text = plots.standalone_html(figures, title="t")
    assert "cdn.bokeh.org" not in text
    assert "<script type=\"text/javascript\" src=" not in text
    assert "Bokeh" in text and "speedup" in text
    p = plots.save_html(figures, tmp_path / "out" / "plots.html")
    assert p.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert plots.summary_html(item).count("Bottleneck") == 1
