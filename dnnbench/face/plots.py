"""Bokeh plot builders shared by the workbench, the study notebooks and the HTML reports.

Builders are functions from model results to Bokeh figures (docs/workbench.md, architecture.md
"plots"): :func:`speedup_figure` (speed-up against machines), :func:`breakdown_figure` (the per-sample
time breakdown as stacked bars), :func:`heatmap_figure` (epoch time over machines per replica x
replicas at a machine budget) and :func:`summary_div` (the bottleneck and the epoch time in words).
Each returns a :class:`Plot`: the figure and its named ColumnDataSources. The matching ``*_data``
functions are pure (numpy only, no bokeh) and return the new ``data`` dicts, keyed by source name, so
a live view replaces its data without rebuilding the figure::

    plot = speedup_figure(mp_curve, dp_curve, optimal_curve, current=prediction.item())
    ...
    plot.update(speedup_data(new_mp, new_dp, new_optimal, current=new_prediction.item()))

Every model gets a ``name=`` so tests can find it in BokehJS:
``Bokeh.documents[i].get_model_by_name('speedup_current').data``. Figures: ``speedup``, ``breakdown``,
``heatmap``; sources: ``speedup_model_parallel``, ``speedup_data_parallel``, ``speedup_optimal``,
``speedup_linear``, ``speedup_current``, ``breakdown_parts``, ``heatmap_grid``, ``heatmap_optimum``,
``heatmap_current`` (names are unique in a document: BokehJS's ``get_model_by_name`` needs that);
the summary ``Div``: ``summary``.

Static output (:func:`standalone_html`, :func:`save_html`) embeds BokehJS inline: nothing loads from a
CDN, so a report opens offline. This module imports bokeh inside its functions only where it can;
``import dnnbench`` never imports it.
"""

from __future__ import annotations

import html
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import fmt
from ..model.memory import MEMORY_LABELS, MEMORY_PARTS
from ..model.prediction import PART_LABELS

if TYPE_CHECKING:  # pragma: no cover - typing only
    from ..model import Prediction
    from ..optimizer.curves import Curve

#: Names of the additive per-sample parts, in stacking order, with their legend labels.
BREAKDOWN_PARTS: dict[str, str] = PART_LABELS

#: Speed-up series, their source names and legend labels.
SPEEDUP_SERIES: dict[str, str] = {
    "speedup_model_parallel": "model-parallel (1 replica, W machines)",
    "speedup_data_parallel": "data-parallel (configured W, best R and P)",
    "speedup_optimal": "optimal (optimizer's best)",
}

_CURRENT_COLOR = "#d62728"
_OPTIMUM_COLOR = "#111111"
_SERIES_COLORS = ("#1f77b4", "#2ca02c", "#ff7f0e")
_PART_COLORS = ("#1f77b4", "#aec7e8", "#17becf", "#9edae5", "#7f7f7f", "#c7c7c7",
                "#ff7f0e", "#2ca02c", "#98df8a", "#d62728", "#9467bd", "#8c564b", "#e377c2")
_NAN_GREY = "#d9d9d9"

Data = dict[str, Any]


@dataclass
class Plot:
    """A Bokeh figure (or layout) and the ColumnDataSources it draws, by source name."""

    figure: Any
    sources: dict[str, Any] = field(default_factory=dict)
    #: Legend items by the column they stand for: an item shows only while its column has a nonzero
    #: value (a breakdown part this configuration does not have is not in the legend).
    legend_items: dict[str, Any] = field(default_factory=dict)

    def update(self, data: Mapping[str, Data]) -> None:
        """Replace the data of the named sources: one ``source.data = {...}`` per source.

        Names not in :attr:`sources` are ignored, so one dict from several ``*_data`` calls can be
        passed to every plot.
        """
        for name, columns in data.items():
            source = self.sources.get(name)
            if source is not None:
                source.data = dict(columns)
                self._show_legend(columns)

    def _show_legend(self, columns: Data) -> None:
        for column, item in self.legend_items.items():
            if column in columns:
                item.visible = bool(np.any(np.asarray(columns[column], dtype=float) != 0.0))


# The units a person reads (dnnbench.fmt): one table for text, ticks and hovers.
unit_steps, duration_ticks, count_ticks, duration_hover = (fmt.unit_steps, fmt.duration_ticks, fmt.count_ticks,
                                                           fmt.duration_hover)


# ---- pure data functions (numpy only) ------------------------------------------------------------

def _f(a: Any) -> np.ndarray:
    return np.asarray(a, dtype=float).ravel()


def _curve_columns(curve: Curve | None) -> Data:
    if curve is None:
        empty = np.zeros(0)
        return {"machines": empty, "speedup": empty, "epoch_time_s": empty, "epoch_text": [],
                "workers_per_replica": empty, "replicas": empty, "ps_machines": empty,
                "speedup_low": empty, "speedup_high": empty}
    t = _f(curve.epoch_time_s)
    x = _f(curve.speedup)
    # The p10–p90 band (docs/model.md §12); without a compute error band it is the curve itself.
    low = x if curve.speedup_low is None else _f(curve.speedup_low)
    high = x if curve.speedup_high is None else _f(curve.speedup_high)
    return {
        "machines": _f(curve.machines), "speedup": x, "epoch_time_s": t,
        "epoch_text": [fmt.seconds(float(v)) for v in t],
        "workers_per_replica": _f(curve.workers_per_replica), "replicas": _f(curve.replicas),
        "ps_machines": _f(curve.ps_machines), "speedup_low": low, "speedup_high": high,
    }


def _point_columns(item: Mapping[str, Any] | None, label: str) -> Data:
    if item is None:
        return _curve_columns(None) | {"label": [], "bottleneck": []}
    band = (item.get("interval_p10_p90") or {}).get("speedup") or [item["speedup"], item["speedup"]]
    return {
        "machines": [float(item["machines"])], "speedup": [float(item["speedup"])],
        "speedup_low": [float(band[0])], "speedup_high": [float(band[1])],
        "epoch_time_s": [float(item["epoch_time_s"])], "epoch_text": [fmt.seconds(float(item["epoch_time_s"]))],
        "workers_per_replica": [float(item["workers_per_replica"])], "replicas": [float(item["replicas"])],
        "ps_machines": [float(item["ps_machines"])], "label": [label], "bottleneck": [str(item["bottleneck"])],
    }


#: The data-parallel curve of the scheme not configured (the PS against an all-reduce).
ALTERNATIVE_SERIES = ("speedup_data_parallel_alt", "data-parallel, the other scheme (PS / all-reduce)")


def speedup_data(model_parallel: Curve | None, data_parallel: Curve | None = None, optimal: Curve | None = None,
                 current: Mapping[str, Any] | None = None, max_machines: float | None = None,
                 alternative: Curve | None = None) -> dict[str, Data]:
    """The speed-up figure's data: three curves, the linear reference and the current configuration,
    and ``alternative`` (the data-parallel curve of the other scheme) when given.

    ``current`` is a :meth:`Prediction.item` dict (or None). ``max_machines`` sets the end of the
    linear reference (default: the largest machine count on any curve).
    """
    out = {
        "speedup_model_parallel": _curve_columns(model_parallel),
        "speedup_data_parallel": _curve_columns(data_parallel),
        "speedup_optimal": _curve_columns(optimal),
        "speedup_current": _point_columns(current, "current configuration"),
    }
    if alternative is not None:
        out[ALTERNATIVE_SERIES[0]] = _curve_columns(alternative)
    if max_machines is None:
        ends = [float(np.max(c["machines"])) for c in out.values() if len(c["machines"])]
        max_machines = max(ends) if ends else 1.0
    out["speedup_linear"] = {"machines": np.array([1.0, float(max_machines)]),
                             "speedup": np.array([1.0, float(max_machines)])}
    return out


def breakdown_data(items: Mapping[str, Mapping[str, Any]]) -> dict[str, Data]:
    """Stacked per-sample time (seconds) of each labelled configuration.

    ``items`` maps a bar label ("current", "optimum") to a :meth:`Prediction.item` dict; its
    ``breakdown_s_per_sample`` gives the parts (seconds per sample of one replica, model.md §5-6).
    """
    labels = list(items)
    cols: Data = {"label": labels}
    total = np.zeros(len(labels))
    for part in BREAKDOWN_PARTS:
        s = np.array([float(items[k]["breakdown_s_per_sample"].get(part, 0.0)) for k in labels])
        cols[part] = s
        total += s
    cols["total_s"] = total
    # The p10-p90 of the replica's time per sample, the interval's ratio to the point prediction
    # (docs/model.md §12); the total itself without a band.
    ratios = []
    for k in labels:
        iv = (items[k].get("interval_p10_p90") or {}).get("time_per_sample_s")
        x = 1.0 / float(items[k]["samples_per_s"]) if float(items[k]["samples_per_s"]) > 0 else 0.0
        ratios.append((iv[0] / x, iv[1] / x) if iv is not None and x > 0 else (1.0, 1.0))
    cols["total_low_s"] = total * np.array([r[0] for r in ratios])
    cols["total_high_s"] = total * np.array([r[1] for r in ratios])
    cols["bottleneck"] = [str(items[k]["bottleneck"]) for k in labels]
    cols["epoch_text"] = [fmt.seconds(float(items[k]["epoch_time_s"])) for k in labels]
    return {"breakdown_parts": cols}


#: The memory bars' parts: a worker's (a device's) memory, then what is left of its capacity.
MEMORY_BAR_PARTS: dict[str, str] = {**{f"mem_{p}": MEMORY_LABELS[p] for p in MEMORY_PARTS},
                                    "mem_free": "free (up to the capacity)"}
_MEMORY_COLORS = ("#1f77b4", "#ff7f0e", "#9467bd", "#2ca02c", "#7f7f7f", "#eeeeee")


def memory_data(items: Mapping[str, Mapping[str, Any]]) -> dict[str, Data]:
    """Memory of one worker (a device on an accelerator cluster) by part, in GiB, against its capacity,
    for each labelled :meth:`Prediction.item` (docs/model.md §11)."""
    from ..units import GIB

    labels = list(items)
    cols: Data = {"label": labels}
    used = np.zeros(len(labels))
    for part in MEMORY_PARTS:
        v = np.array([float(items[k].get("memory_bytes_per_worker_parts", {}).get(part, 0.0)) for k in labels]) / GIB
        cols[f"mem_{part}"] = v
        used += v
    cap = np.array([float(items[k].get("memory_capacity_bytes_per_worker", np.inf)) for k in labels]) / GIB
    finite_cap = np.where(np.isfinite(cap), cap, used)
    cols["mem_free"] = np.maximum(finite_cap - used, 0.0)
    cols["used_gib"] = used
    cols["capacity_gib"] = finite_cap
    cols["fits"] = ["yes" if items[k].get("feasible", True) else str(items[k].get("infeasible_detail") or "no")
                    for k in labels]
    return {"memory_parts": cols}


def memory_figure(items: Mapping[str, Mapping[str, Any]], *, title: str = "Memory of one worker (device)",
                  width: int = 540, height: int = 210) -> Plot:
    """Stacked bars of a worker's memory by part against its capacity (the red tick; a bar past it
    does not fit)."""
    from bokeh.models import ColumnDataSource, HoverTool, Legend, LegendItem
    from bokeh.plotting import figure

    data = memory_data(items)
    source = ColumnDataSource(data["memory_parts"], name="memory_parts")
    labels = list(items)
    fig = figure(name="memory", title=title, y_range=list(reversed(labels)), width=width, height=height,
                 x_axis_label="GiB", tools="xpan,xwheel_zoom,reset,save", toolbar_location="right")
    parts = list(MEMORY_BAR_PARTS)
    renderers = fig.hbar_stack(parts, y="label", height=0.6, source=source, color=list(_MEMORY_COLORS),
                               line_color="white", name=parts)
    for r in renderers:
        r.name = f"memory_{r.name}"
    cap = fig.scatter(x="capacity_gib", y="label", source=source, marker="dash", angle=math.pi / 2, size=34,
                      line_width=3, color=_CURRENT_COLOR, name="memory_capacity")
    items_by_part = {p: LegendItem(label=MEMORY_BAR_PARTS[p], renderers=[r])
                     for p, r in zip(parts, renderers, strict=True)}
    legend = Legend(items=[*items_by_part.values(), LegendItem(label="capacity", renderers=[cap])], ncols=3,
                    label_text_font_size="7.5pt", glyph_width=12, glyph_height=10, spacing=2, padding=4,
                    location="center")
    fig.add_layout(legend, "below")
    fig.add_tools(HoverTool(renderers=renderers, tooltips=[
        ("configuration", "@label"), ("part", "$name"), ("GiB", "@$name{0,0.00}"), ("in all", "@used_gib{0,0.00} GiB"),
        ("capacity", "@capacity_gib{0,0.00} GiB"), ("fits", "@fits")]))
    fig.x_range.start = 0
    fig.ygrid.grid_line_color = None
    plot = Plot(fig, {"memory_parts": source}, legend_items=items_by_part)
    plot._show_legend(data["memory_parts"])
    return plot


#: The timeline's lanes: one machine of a replica, and a PS machine.
TIMELINE_LANES = ("worker (one machine of a replica)", "PS machine")
#: Worker parts in the order one step runs them; the PS computes the update once the push is in.
_WORKER_ORDER = ("compute_forward", "compute_backprop", "compute_weight_grad", "compute_update",
                 "compute_compression", "compute_messages", "model_parallel_network", "ps_push", "sync_straggler",
                 "allreduce", "host_wakeup", "ps_pull")


def timeline_data(item: Mapping[str, Any] | None, samples_per_step: float = 1.0) -> dict[str, Data]:
    """One training step per machine role as Gantt segments (:data:`TIMELINE_LANES`), from the model's
    breakdown: every part of ``item["breakdown_s_per_sample"]`` that the configuration has, times the
    samples of one step (``push_interval_samples``: the samples between two PS exchanges), laid end to
    end on the worker's lane in the order a step runs them; the PS's compute on its own lane, from the
    end of the push. The parts are the serial sum: overlap and the cluster-wide bounds are not drawn."""
    cols: Data = {"lane": [], "part": [], "label": [], "start_s": [], "end_s": [], "duration_s": [],
                  "duration_text": [], "color": []}
    if item is None:
        return {"timeline_segments": cols}
    parts = item["breakdown_s_per_sample"]
    colors = dict(zip(BREAKDOWN_PARTS, _PART_COLORS, strict=True))
    t, push_end = 0.0, 0.0

    def add(lane: str, part: str, start: float, seconds: float) -> None:
        cols["lane"].append(lane)
        cols["part"].append(part)
        cols["label"].append(BREAKDOWN_PARTS[part])
        cols["start_s"].append(start)
        cols["end_s"].append(start + seconds)
        cols["duration_s"].append(seconds)
        cols["duration_text"].append(fmt.seconds(seconds))
        cols["color"].append(colors[part])

    for part in _WORKER_ORDER:
        seconds = float(parts.get(part, 0.0)) * samples_per_step
        if seconds > 0.0:
            add(TIMELINE_LANES[0], part, t, seconds)
            t += seconds
        if part == "ps_push":
            push_end = t
    ps = float(parts.get("ps_compute", 0.0)) * samples_per_step
    if ps > 0.0:
        add(TIMELINE_LANES[1], "ps_compute", push_end, ps)
    return {"timeline_segments": cols}


def heatmap_data(grid: Prediction, optimum: Mapping[str, Any] | None = None,
                 current: Mapping[str, Any] | None = None) -> dict[str, Data]:
    """Cells of epoch time over machines per replica (x) and replicas (y).

    ``grid`` is a :class:`Prediction` over any shape of (W, R) cells (each with its own P, usually
    the rest of the budget); it is flattened. Cells that do not fit in memory get a NaN epoch time
    (drawn grey) and their reason. ``optimum`` and ``current`` are item dicts marked on the map.
    Cell edges are geometric midpoints between neighbouring W (and R) values, for log axes.
    """
    w, r = _f(grid.workers_per_replica), _f(grid.replicas)
    t = _f(grid.epoch_time_s)
    feasible = np.asarray(grid.feasible).ravel()
    reason = np.asarray(grid.infeasible_reason, dtype=object).ravel()
    shown = np.where(feasible & np.isfinite(t), t, np.nan)
    wl, wr = _edges(w)
    rb, rt = _edges(r)
    bottleneck = np.asarray(grid.bottleneck, dtype=object).ravel()
    cells = {
        "workers_per_replica": w, "replicas": r, "ps_machines": _f(grid.ps_machines),
        "machines": _f(grid.machines), "left": wl, "right": wr, "bottom": rb, "top": rt,
        "epoch_time_s": shown, "speedup": np.where(feasible, _f(grid.speedup), np.nan),
        "epoch_text": [fmt.seconds(float(v)) if ok else f"does not fit ({why})"
                       for v, ok, why in zip(t, feasible, reason, strict=True)],
        "bottleneck": [str(b) if ok else "-" for b, ok in zip(bottleneck, feasible, strict=True)],
    }
    return {"heatmap_grid": cells, "heatmap_optimum": _point_columns(optimum, "optimum"),
            "heatmap_current": _point_columns(current, "current configuration")}


def _edges(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Left and right cell edges of each value: geometric midpoints between the sorted unique values."""
    if values.size == 0:
        return values.copy(), values.copy()
    u = np.unique(values[values > 0])
    if u.size == 1:
        mids = np.array([u[0] / math.sqrt(2.0), u[0] * math.sqrt(2.0)])
    else:
        inner = np.sqrt(u[:-1] * u[1:])
        mids = np.concatenate([[u[0] ** 2 / inner[0]], inner, [u[-1] ** 2 / inner[-1]]])
    i = np.searchsorted(u, values)
    i = np.clip(i, 0, u.size - 1)
    return mids[i], mids[i + 1]


def summary_html(item: Mapping[str, Any] | None, error: str | None = None) -> str:
    """The bottleneck and the epoch time in words (HTML), from a :meth:`Prediction.item` dict."""
    if item is None:
        return f"<p class='dnnbench-summary'>{html.escape(error or 'no prediction yet')}</p>"
    t = float(item["epoch_time_s"])
    words = (
        f"<b>Bottleneck: {html.escape(str(item['bottleneck']))}.</b> "
        f"One epoch takes <b>{fmt.seconds(t)}</b> ({t:,.0f} s) at {float(item['samples_per_s']):,.1f} samples/s, "
        f"a speed-up of {float(item['speedup']):.2f}x over one machine, on {int(item['machines'])} machines "
        f"(W={int(item['workers_per_replica'])}, R={int(item['replicas'])}, P={int(item['ps_machines'])}); "
        f"PS utilisation {100.0 * float(item['ps_utilisation']):.0f} %."
    )
    if not item.get("feasible", True):
        words += f" <b>It does not fit: {html.escape(str(item.get('infeasible_reason')))}.</b>"
    if error:
        words += f"<br><span style='color:#b00020'>{html.escape(error)}</span>"
    return f"<p class='dnnbench-summary'>{words}</p>"


# ---- figure builders (bokeh imported inside) ----------------------------------------------------

_CONFIG_TOOLTIPS = (("machines", "@machines{0,0}"), ("speed-up", "@speedup{0.00}x"),
                    ("epoch time", "@epoch_text"), ("W (machines per replica)", "@workers_per_replica{0,0}"),
                    ("R (replicas)", "@replicas{0,0}"), ("P (PS machines)", "@ps_machines{0,0}"))


def speedup_figure(model_parallel: Curve | None, data_parallel: Curve | None = None, optimal: Curve | None = None,
                   current: Mapping[str, Any] | None = None, *, max_machines: float | None = None,
                   title: str = "Speed-up against machines", width: int = 540, height: int = 330,
                   log_axes: bool = False, alternative: Curve | None = None) -> Plot:
    """Speed-up against machines: model-parallel, data-parallel and optimal curves, a linear reference
    and the current configuration marked (model.md §6: speed-up = one machine's epoch time / this one's);
    with ``alternative``, the data-parallel curve of the other scheme (PS or all-reduce), dashed."""
    from bokeh.models import ColumnDataSource, HoverTool
    from bokeh.plotting import figure

    data = speedup_data(model_parallel, data_parallel, optimal, current, max_machines, alternative)
    axis = "log" if log_axes else "linear"
    fig = figure(name="speedup", title=title, width=width, height=height, x_axis_type=axis, y_axis_type=axis,
                 x_axis_label="machines (W·R + P)", y_axis_label="speed-up over one machine (x)",
                 tools="pan,wheel_zoom,box_zoom,reset,save", toolbar_location="right")
    sources = {name: ColumnDataSource(cols, name=name) for name, cols in data.items()}
    fig.line("machines", "speedup", source=sources["speedup_linear"], color="#999999", line_dash="dashed",
             legend_label="linear", name="speedup_linear_line")
    hover_renderers = []
    for (name, label), color in zip(SPEEDUP_SERIES.items(), _SERIES_COLORS, strict=True):
        # The p10-p90 band of the compute error (docs/model.md §12): zero width without a band.
        fig.varea("machines", "speedup_low", "speedup_high", source=sources[name], fill_color=color,
                  fill_alpha=0.15, name=f"{name}_band")
        # The data-parallel curve is often the optimal one: drawn wide and light beneath it, both show.
        wide = name == "speedup_data_parallel"
        fig.line("machines", "speedup", source=sources[name], color=color, line_width=6 if wide else 2,
                 line_alpha=0.45 if wide else 1.0, legend_label=label, name=f"{name}_line")
        hover_renderers.append(fig.scatter("machines", "speedup", source=sources[name], color=color, size=4,
                                           legend_label=label, name=f"{name}_points"))
    if ALTERNATIVE_SERIES[0] in sources:
        name, label = ALTERNATIVE_SERIES
        fig.line("machines", "speedup", source=sources[name], color="#9467bd", line_width=2, line_dash="dashed",
                 legend_label=label, name=f"{name}_line")
        hover_renderers.append(fig.scatter("machines", "speedup", source=sources[name], color="#9467bd", size=4,
                                           legend_label=label, name=f"{name}_points"))
    hover_renderers.append(fig.scatter("machines", "speedup", source=sources["speedup_current"], marker="circle",
                                       size=13, fill_color=_CURRENT_COLOR, line_color="white", line_width=2,
                                       legend_label="current configuration", name="speedup_current_marker"))
    fig.add_tools(HoverTool(renderers=hover_renderers, tooltips=list(_CONFIG_TOOLTIPS)))
    fig.xaxis.formatter = count_ticks()
    fig.legend.location = "top_left"
    fig.legend.click_policy = "hide"
    fig.legend.label_text_font_size = "8pt"
    fig.legend.background_fill_alpha = 0.7
    return Plot(fig, sources)


def breakdown_figure(items: Mapping[str, Mapping[str, Any]], *, title: str = "Per-sample time of one replica",
                     width: int = 540, height: int = 300) -> Plot:
    """The per-sample time breakdown as stacked horizontal bars, one bar per labelled configuration.

    Parts are those of :class:`dnnbench.model.Breakdown` (model.md §5-6), in seconds per sample of one
    replica, shown in the unit that reads best; the bar's labels stay fixed for the life of the figure
    (update with the same keys). Parts a configuration does not have are not in the legend.
    """
    from bokeh.models import ColumnDataSource, HoverTool, Legend, LegendItem, Whisker
    from bokeh.plotting import figure

    data = breakdown_data(items)
    source = ColumnDataSource(data["breakdown_parts"], name="breakdown_parts")
    labels = list(items)
    fig = figure(name="breakdown", title=title, y_range=list(reversed(labels)), width=width, height=height,
                 x_axis_label="time per sample (one replica)", tools="xpan,xwheel_zoom,reset,save",
                 toolbar_location="right")
    parts = list(BREAKDOWN_PARTS)
    renderers = fig.hbar_stack(parts, y="label", height=0.6, source=source, color=list(_PART_COLORS[: len(parts)]),
                               line_color="white", name=parts)
    for r in renderers:
        r.name = f"breakdown_{r.name}"
    fig.add_layout(Whisker(source=source, base="label", lower="total_low_s", upper="total_high_s", dimension="width",
                           line_color="#333333", name="breakdown_interval"))
    items_by_part = {p: LegendItem(label=BREAKDOWN_PARTS[p], renderers=[r])
                     for p, r in zip(parts, renderers, strict=True)}
    legend = Legend(items=list(items_by_part.values()), ncols=3,
                    label_text_font_size="7.5pt", glyph_width=12, glyph_height=10, spacing=2, padding=4,
                    location="center", click_policy="hide")
    fig.add_layout(legend, "below")
    fig.add_tools(HoverTool(renderers=renderers, tooltips=[
        ("configuration", "@label"), ("part", "$name"), ("time", "@$name{custom} per sample"),
        ("replica total", "@total_s{custom} per sample"), ("bottleneck", "@bottleneck"),
        ("epoch time", "@epoch_text")],
        # "@$name" is the hovered part's column: a formatter under every name it may be looked up by.
        formatters={f"@{key}": hover for key in ("$name", "total_s", *parts) for hover in [duration_hover()]}))
    fig.xaxis.formatter = duration_ticks()
    fig.x_range.start = 0
    fig.ygrid.grid_line_color = None
    plot = Plot(fig, {"breakdown_parts": source}, legend_items=items_by_part)
    plot._show_legend(data["breakdown_parts"])
    return plot


def timeline_figure(item: Mapping[str, Any] | None, samples_per_step: float = 1.0, *,
                    title: str = "One training step, by machine role", width: int = 540, height: int = 190) -> Plot:
    """The step timeline (Gantt) of :func:`timeline_data`: what a worker and a PS machine do in one
    step, part by part, in the colours of the breakdown."""
    from bokeh.models import ColumnDataSource, HoverTool
    from bokeh.plotting import figure

    data = timeline_data(item, samples_per_step)
    source = ColumnDataSource(data["timeline_segments"], name="timeline_segments")
    fig = figure(name="timeline", title=title, y_range=list(reversed(TIMELINE_LANES)), width=width, height=height,
                 x_axis_label="time in one step (serial sum of the parts)", tools="xpan,xwheel_zoom,reset,save",
                 toolbar_location="right")
    bars = fig.hbar(y="lane", left="start_s", right="end_s", height=0.55, color="color", line_color="white",
                    source=source, name="timeline_bars")
    fig.add_tools(HoverTool(renderers=[bars], tooltips=[("machine", "@lane"), ("part", "@label"),
                                                        ("time", "@duration_text")]))
    fig.xaxis.formatter = duration_ticks()
    fig.x_range.start = 0
    fig.ygrid.grid_line_color = None
    return Plot(fig, {"timeline_segments": source})


def heatmap_figure(grid: Prediction, optimum: Mapping[str, Any] | None = None,
                   current: Mapping[str, Any] | None = None, *, budget_machines: int | None = None,
                   title: str | None = None, width: int = 540, height: int = 380) -> Plot:
    """Epoch time over machines per replica x replicas (log axes), the optimum and the current
    configuration marked. Colour: log epoch time, bright = fast; grey = does not fit in memory."""
    from bokeh.models import ColorBar, ColumnDataSource, HoverTool, LogColorMapper
    from bokeh.palettes import Viridis256
    from bokeh.plotting import figure

    data = heatmap_data(grid, optimum, current)
    sources = {name: ColumnDataSource(cols, name=name) for name, cols in data.items()}
    if title is None:
        title = "Epoch time at the budget" + (f" of {budget_machines} machines" if budget_machines else "")
    fig = figure(name="heatmap", title=title, width=width, height=height, x_axis_type="log", y_axis_type="log",
                 x_axis_label="W: machines per replica", y_axis_label="R: replicas",
                 tools="pan,wheel_zoom,box_zoom,reset,save", toolbar_location="right")
    mapper = LogColorMapper(palette=tuple(reversed(Viridis256)), nan_color=_NAN_GREY, name="heatmap_colors")
    cells = fig.quad(left="left", right="right", bottom="bottom", top="top", source=sources["heatmap_grid"],
                     fill_color={"field": "epoch_time_s", "transform": mapper}, line_color=None,
                     name="heatmap_cells")
    opt = fig.scatter("workers_per_replica", "replicas", source=sources["heatmap_optimum"], marker="star",
                      size=18, fill_color="white", line_color=_OPTIMUM_COLOR, line_width=1.5,
                      legend_label="optimum", name="heatmap_optimum_marker")
    cur = fig.scatter("workers_per_replica", "replicas", source=sources["heatmap_current"], marker="circle",
                      size=12, fill_color=None, line_color=_CURRENT_COLOR, line_width=3,
                      legend_label="current", name="heatmap_current_marker")
    fig.add_tools(HoverTool(renderers=[cells, opt, cur], tooltips=[
        ("W × R", "@workers_per_replica{0,0} × @replicas{0,0}"), ("P (PS machines)", "@ps_machines{0,0}"),
        ("machines", "@machines{0,0}"), ("epoch time", "@epoch_text"), ("speed-up", "@speedup{0.00}x"),
        ("bottleneck", "@bottleneck")]))
    fig.add_layout(ColorBar(color_mapper=mapper, title="epoch time", width=10, label_standoff=6,
                            title_text_font_size="8pt", major_label_text_font_size="8pt",
                            formatter=duration_ticks(), name="heatmap_colorbar"), "right")
    fig.legend.location = "top_right"
    fig.legend.label_text_font_size = "8pt"
    fig.legend.background_fill_alpha = 0.7
    fig.grid.grid_line_color = None
    return Plot(fig, sources)


def summary_div(item: Mapping[str, Any] | None, *, width: int = 540) -> Any:
    """A Bokeh ``Div`` named ``summary`` holding :func:`summary_html` (the bottleneck and the epoch time)."""
    from bokeh.models import Div

    return Div(text=summary_html(item), name="summary", width=width)


# ---- static output ------------------------------------------------------------------------------

def _models(figures: Sequence[Any] | Any) -> list[Any]:
    items = figures if isinstance(figures, (list, tuple)) else [figures]
    return [f.figure if isinstance(f, Plot) else f for f in items]


def standalone_html(figures: Sequence[Any] | Any, title: str = "dnnbench") -> str:
    """A complete HTML page of the figures (Plots or Bokeh models) with BokehJS inline (no CDN).

    Figures that live in a document (a live workbench) are serialised through a temporary
    document by Bokeh, so the live document is left as it was.
    """
    from bokeh.embed import file_html
    from bokeh.resources import INLINE

    models = _models(figures)
    return file_html(models if len(models) > 1 else models[0], resources=INLINE, title=title)


def save_html(figures: Sequence[Any] | Any, path: str | os.PathLike[str], title: str = "dnnbench") -> Path:
    """Write :func:`standalone_html` to ``path`` atomically: the old file or the whole new one."""
    from ..fileio import atomic_write

    return atomic_write(path, standalone_html(figures, title))


__all__ = [
    "BREAKDOWN_PARTS", "SPEEDUP_SERIES", "Plot", "breakdown_data", "breakdown_figure", "heatmap_data",
    "heatmap_figure", "save_html", "speedup_data", "speedup_figure", "standalone_html", "summary_div",
    "summary_html", "TIMELINE_LANES", "timeline_data", "timeline_figure", "duration_ticks", "count_ticks",
]
