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


def test_breakdown_parts_in_seconds(problem: tuple) -> None:
    net, cl, ds = problem
    item = predict(net, cl, ds, Configuration(workers_per_replica=2, replicas=2, ps_machines=1)).item()
    data = plots.breakdown_data({"current": item})["breakdown_parts"]
    for part, seconds in item["breakdown_s_per_sample"].items():
        assert data[part][0] == seconds
    assert data["total_s"][0] == pytest.approx(sum(item["breakdown_s_per_sample"].values()), rel=1e-12)
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


def test_one_unit_table_for_text_ticks_and_hovers() -> None:
    from dnnbench import fmt

    # The text formatter picks the unit that keeps the number between 1 and 1000 (below a minute: s).
    for seconds, unit in ((3e-6, "µs"), (5e-4, "µs"), (0.3, "ms"), (45.0, "s"), (600.0, "min"), (9e3, "h"),
                          (2e5, "days")):
        per, got = fmt.duration_unit(seconds)
        assert got == unit and 1 <= seconds / per < 1000
    # The plots' tick and hover formatters carry the same table, as numbers.
    steps = plots.unit_steps(fmt.DURATION_UNITS)
    assert plots.duration_ticks().args["steps"] == steps
    assert [s[1] for s in steps] == [1e-6, 1e-3, 1.0, 60.0, 3600.0, 86400.0]
    assert plots.count_ticks().args["steps"] == plots.unit_steps(fmt.COUNT_UNITS)
    fig = plots.heatmap_figure(evaluate(presets.network("lenet5"), presets.cluster("adam-2014"), None,
                                        Configuration(), workers_per_replica=np.array([1.0, 2.0]), replicas=1.0,
                                        ps_machines=1.0)).figure
    bar = next(r for r in fig.right if r.name == "heatmap_colorbar")
    assert bar.formatter.args["steps"] == steps  # the epoch-time colour bar reads in minutes, hours, days


def test_the_timeline_is_the_breakdown_laid_end_to_end(problem: tuple) -> None:
    net, cl, ds = problem
    cfg = Configuration(workers_per_replica=2, replicas=2, ps_machines=1, push_interval_samples=8)
    item = predict(net, cl, ds, cfg).item()
    seg = plots.timeline_data(item, cfg.push_interval_samples)["timeline_segments"]
    parts = item["breakdown_s_per_sample"]
    assert dict(zip(seg["part"], seg["duration_s"], strict=True)) == {p: 8 * v for p, v in parts.items() if v > 0}
    worker = [i for i, lane in enumerate(seg["lane"]) if lane == plots.TIMELINE_LANES[0]]
    for a, b in zip(worker, worker[1:], strict=False):  # end to end, in the order a step runs them
        assert seg["start_s"][b] == seg["end_s"][a]
    ps = seg["lane"].index(plots.TIMELINE_LANES[1])
    assert seg["start_s"][ps] == seg["end_s"][seg["part"].index("ps_push")]  # the update after the push
    assert plots.timeline_data(None)["timeline_segments"]["part"] == []
    alone = predict(net, cl, ds, Configuration()).item()  # no PS: no PS lane, no push or pull
    assert set(plots.timeline_data(alone)["timeline_segments"]["lane"]) == {plots.TIMELINE_LANES[0]}


def test_why_in_words() -> None:
    from dnnbench.face import explain, landscape
    from dnnbench.face.state import WorkbenchState

    r = landscape.compute(WorkbenchState.from_presets("imagenet22k-adam", "adam-2014"))
    assert r.optimum is not None and r.optimum["speedup"] > r.optimum["machines"]
    text = explain.above_linear(r.optimum, r)
    assert text is not None and "weight gradients" in text
    assert explain.above_linear({**r.optimum, "speedup": 0.5 * r.optimum["machines"]}, r) is None
    assert explain.idle({**r.optimum, "machines": 100}, 120).startswith("20 of the 120 machines stay idle")
    assert explain.idle(r.optimum, 120) is None
    moving = explain.moving_bottleneck(r)
    assert moving is not None and "worker compute" in moving
    assert text in explain.why(r)
