"""Study figures that ``dnnbench.face.plots`` does not build: several labelled curves on one axis, and
per-layer bars. The speed-up, breakdown and heatmap figures come from ``dnnbench.face.plots``.

Like the shared builders, each function returns a :class:`dnnbench.face.plots.Plot` whose figure and
sources carry ``name=`` so tests can find them in BokehJS. Bokeh is imported inside the functions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .. import fmt
from ..face.plots import Plot

#: Colours of up to ten series (Tableau 10), then repeated.
COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
          "#bcbd22", "#17becf")


def lines_figure(name: str, x: Sequence[float], series: Mapping[str, Sequence[float | None]], *, title: str,
                 x_label: str, y_label: str, log_x: bool = False, log_y: bool = False,
                 reference: tuple[str, Sequence[float], Sequence[float]] | None = None,
                 hover: Mapping[str, Sequence[str]] | None = None, width: int = 640, height: int = 360,
                 y_seconds: bool = False) -> Plot:
    """Labelled curves ``y = series[label]`` over a shared ``x``, optionally with a dashed reference
    (``(label, xs, ys)``, e.g. linear speed-up). ``None`` values are gaps. ``hover`` adds per-point
    text columns shown in the tooltip (e.g. the binding bottleneck of each point). ``y_seconds``: y is a
    duration, labelled in the unit a person reads (:func:`dnnbench.fmt.duration_ticks`).

    Sources are named ``{name}_{i}`` in series order; the figure is named ``name``.
    """
    from bokeh.models import ColumnDataSource, HoverTool
    from bokeh.plotting import figure

    fig = figure(name=name, title=title, width=width, height=height, x_axis_label=x_label, y_axis_label=y_label,
                 x_axis_type="log" if log_x else "linear", y_axis_type="log" if log_y else "linear",
                 tools="pan,wheel_zoom,box_zoom,reset,save", toolbar_location="right")
    sources: dict[str, Any] = {}
    xs = np.asarray(x, dtype=float)
    if reference is not None:
        label, rx, ry = reference
        src = ColumnDataSource({"x": np.asarray(rx, float), "y": np.asarray(ry, float)}, name=f"{name}_reference")
        fig.line("x", "y", source=src, color="#999999", line_dash="dashed", legend_label=label)
        sources[f"{name}_reference"] = src
    renderers = []
    for i, (label, ys) in enumerate(series.items()):
        y = np.array([np.nan if v is None else float(v) for v in ys], dtype=float)
        cols: dict[str, Any] = {"x": xs, "y": y, "series": [label] * len(xs)}
        for key, texts in (hover or {}).items():
            cols[key] = list(texts[i]) if isinstance(texts[0], (list, tuple)) else list(texts)
        src = ColumnDataSource(cols, name=f"{name}_{i}")
        color = COLORS[i % len(COLORS)]
        fig.line("x", "y", source=src, color=color, line_width=2, legend_label=label)
        renderers.append(fig.scatter("x", "y", source=src, color=color, size=5, legend_label=label))
        sources[f"{name}_{i}"] = src
    tips = [("series", "@series"), (x_label, "@x{0,0.[00]}"), (y_label, "@y{custom}" if y_seconds else "@y{0,0.000}")]
    tips += [(k.replace("_", " "), f"@{k}") for k in (hover or {})]
    fig.add_tools(HoverTool(renderers=renderers, tooltips=tips,
                            formatters={"@y": fmt.duration_hover()} if y_seconds else {}))
    if y_seconds:
        fig.yaxis.formatter = fmt.duration_ticks()
    fig.legend.location = "top_left"
    fig.legend.click_policy = "hide"
    fig.legend.label_text_font_size = "8pt"
    fig.legend.background_fill_alpha = 0.7
    return Plot(fig, sources)


def layer_bars(table: Mapping[str, Any], *, width: int = 640, height: int = 330) -> Plot:
    """Per-layer training MACs and weights of a network (log scale), from ``analysis.layer_table``.

    Layers without MACs or weights (activations, dropout) are left out; hover gives exact counts.
    """
    from bokeh.models import ColumnDataSource, HoverTool
    from bokeh.plotting import figure
    from bokeh.transform import dodge

    rows = [r for r in table["layers"] if r["macs_training"] > 0 or r["weights"] > 0]
    names = [r["name"] for r in rows]
    macs = np.array([max(r["macs_training"], 1) for r in rows], float)
    weights = np.array([max(r["weights"], 1) for r in rows], float)
    src = ColumnDataSource({
        "layer": names, "kind": [r["kind"] for r in rows], "macs": macs, "weights": weights,
        "share": [100.0 * r["macs_share"] for r in rows],
        "shape": ["x".join(str(s) for s in r["output_shape"]) for r in rows],
    }, name="layers")
    fig = figure(name="layers", title=f"Per-layer counts of {table['network']} (per sample)", x_range=names,
                 y_axis_type="log", width=width, height=height, y_axis_label="count (log scale)",
                 tools="pan,wheel_zoom,reset,save", toolbar_location="right")
    fig.y_range.start = 1
    b1 = fig.vbar(x=dodge("layer", -0.18, range=fig.x_range), top="macs", bottom=1, width=0.34, source=src,
                  color=COLORS[0], legend_label="training MACs (fwd + back-prop + weight grad)")
    b2 = fig.vbar(x=dodge("layer", 0.18, range=fig.x_range), top="weights", bottom=1, width=0.34, source=src,
                  color=COLORS[1], legend_label="weights")
    fig.add_tools(HoverTool(renderers=[b1, b2], tooltips=[
        ("layer", "@layer (@kind), output @shape"), ("training MACs", "@macs{0,0}"),
        ("share of MACs", "@share{0.0} %"), ("weights", "@weights{0,0}")]))
    fig.xaxis.major_label_orientation = 0.8
    fig.legend.location = "top_right"
    fig.legend.label_text_font_size = "8pt"
    fig.legend.background_fill_alpha = 0.7
    return Plot(fig, {"layers": src})
