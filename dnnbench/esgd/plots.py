"""Bokeh figures of the study's tables (imported only by the notebook; bokeh is optional).

Each function takes rows from :mod:`dnnbench.esgd.analysis` and returns a figure; nothing here
computes a result. Show them with ``bokeh.io.show`` after
``output_notebook(resources=INLINE, hide_banner=True)`` (inline resources: no CDN offline).
"""

from __future__ import annotations

from typing import Any

from bokeh.models import ColumnDataSource
from bokeh.palettes import Category10_10
from bokeh.plotting import figure

from dnnbench import fmt
from dnnbench.units import BITS_PER_BYTE

from ..compression.wire import ENCODINGS

_SIZE = {"width": 640, "height": 340}


def accuracy_vs_drop(rows: list[dict[str, Any]]) -> Any:
    """ESGD (reconstructed) and top-k EF final accuracy by drop ratio, with the paper's three points."""
    fig = figure(title="test accuracy vs drop ratio", x_axis_label="drop ratio (%)",
                 y_axis_label="test accuracy (%)", name="accuracy_vs_drop", **_SIZE)
    x = [100 * r["drop_ratio"] for r in rows]
    for key, label, color in (("esgd_accuracy", "ESGD (ours, reconstructed)", Category10_10[0]),
                              ("topk_ef_accuracy", "top-k EF (ours)", Category10_10[1])):
        y = [100 * r[key] for r in rows]
        fig.line(x, y, legend_label=label, color=color, line_width=2)
        fig.scatter(x, y, legend_label=label, color=color, size=7)
    paper = [(100 * r["drop_ratio"], 100 * r["paper_accuracy"]) for r in rows if r["paper_accuracy"] is not None]
    if paper:
        fig.scatter([p[0] for p in paper], [p[1] for p in paper], marker="diamond", size=14,
                    color=Category10_10[3], legend_label="paper's abstract (Tao & Li 2018)")
    fig.legend.location = "bottom_left"
    return fig


def wire_bits(rows: list[dict[str, Any]]) -> Any:
    """Upload bytes per worker per round, by encoding, for the ESGD runs (log scale)."""
    fig = figure(title="bytes per worker per round, by encoding", x_axis_label="drop ratio (%)",
                 y_axis_label="bytes per round", y_axis_type="log", name="wire_bits", **_SIZE)
    esgd = [r for r in rows if r["method"] in ("esgd", "dense")]
    for i, enc in enumerate(e for e in ENCODINGS if e != "values_only"):
        x = [100 * (r["drop_ratio"] or 0.0) for r in esgd]
        y = [r["up_bits_per_round"][enc] / BITS_PER_BYTE for r in esgd]
        fig.line(x, y, legend_label=enc, color=Category10_10[i], line_width=2)
        fig.scatter(x, y, legend_label=enc, color=Category10_10[i], size=6)
    fig.legend.location = "bottom_left"
    return fig


def accuracy_vs_bytes(curves: list[dict[str, Any]], groups: tuple[str, ...] = ("esgd", "topk_ef", "threshold")) -> Any:
    """Test accuracy against bytes uploaded per worker, one line per run of ``groups``."""
    fig = figure(title="accuracy vs bytes uploaded per worker", x_axis_label="bytes uploaded (log)",
                 y_axis_label="test accuracy (%)", x_axis_type="log", name="accuracy_vs_bytes", **_SIZE)
    for i, c in enumerate(c for c in curves if c["group"] in groups):
        pts = [(b, 100 * a) for b, a in zip(c["bytes_up"], c["accuracy"], strict=True) if b > 0]
        source = ColumnDataSource({"x": [p[0] for p in pts], "y": [p[1] for p in pts]})
        fig.line("x", "y", source=source, legend_label=c["label"], color=Category10_10[i % 10],
                 line_dash="solid" if c["group"] == "esgd" else "dashed", line_width=2)
    fig.legend.location = "bottom_right"
    fig.legend.label_text_font_size = "8pt"
    return fig


def time_to_target(rows: list[dict[str, Any]]) -> Any:
    """Seconds to the target accuracy over the edge link, per run that reached it."""
    reached = sorted((r for r in rows if r["seconds"] is not None), key=lambda r: r["seconds"])
    labels = [r["label"] for r in reached]
    fig = figure(title="time to target accuracy over the edge link", y_range=labels[::-1] or ["none"],
                 x_axis_label="time to target", name="time_to_target", width=640, height=max(200, 22 * len(labels)))
    fig.hbar(y=labels, right=[r["seconds"] for r in reached], height=0.7, color=Category10_10[0])
    fig.xaxis.formatter = fmt.duration_ticks()
    return fig


__all__ = ["accuracy_vs_bytes", "accuracy_vs_drop", "time_to_target", "wire_bits"]
