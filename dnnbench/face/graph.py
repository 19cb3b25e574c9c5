"""The network as a compact block diagram: one node per layer along the x axis in spec order, branches
in lanes below the main path, and every input drawn as an edge (a skip connection as an arc), so residual
and branching structure is visible at a glance. Shared by the workbench and the reports.

:func:`graph_data` is pure (no bokeh); :func:`graph_figure` builds the Bokeh figure with the sources
``graph_nodes`` and ``graph_edges``.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from .. import fmt

if TYPE_CHECKING:  # pragma: no cover - typing only
    from ..specs import Network
    from .plots import Plot

#: Node colours by layer kind (weight layers dark, joins red, element-wise light).
KIND_COLORS: dict[str, str] = {
    "input": "#111111", "conv2d": "#1f77b4", "conv_transpose2d": "#1f77b4", "conv3d": "#1f77b4",
    "fc": "#2ca02c", "attention": "#9467bd",
    "sdpa": "#9467bd", "matmul": "#9467bd", "recurrent": "#9467bd",
    "embedding": "#8c564b", "add": "#d62728", "bias": "#d62728", "mul": "#e377c2", "scale": "#e377c2",
    "concat": "#ff7f0e",
    "pool": "#17becf", "pool3d": "#17becf", "adaptive_pool": "#17becf", "upsample": "#17becf",
    "affine_grid": "#17becf", "grid_sample": "#17becf",
}
_OTHER = "#9e9e9e"


def lanes(network: Network) -> list[int]:
    """The lane of every layer: a layer that takes the layer right before it joins the lowest lane
    among its inputs (a join returns to the main path); one that starts from an earlier layer opens the
    lane below the layer before it (a branch)."""
    out: list[int] = []
    for i, ids in enumerate(network.input_indices):
        if i == 0:
            out.append(0)
        elif i - 1 in ids:
            out.append(min(out[k] for k in ids))
        else:
            out.append(out[i - 1] + 1)
    return out


def graph_data(network: Network) -> dict[str, dict[str, Any]]:
    """Node and edge columns of the diagram of ``network``, keyed by source name."""
    lane = lanes(network)
    names = network.layer_names
    nodes: dict[str, list[Any]] = {"x": [], "y": [], "name": [], "kind": [], "shape": [], "inputs": [],
                                   "weights": [], "macs": [], "color": []}
    for i, (layer, c, ids) in enumerate(zip(network.layers, network.layer_counts, network.input_indices,
                                            strict=True)):
        nodes["x"].append(float(i))
        nodes["y"].append(-float(lane[i]))
        nodes["name"].append(names[i])
        nodes["kind"].append(layer.kind)
        nodes["shape"].append("×".join(str(d) for d in c.output_shape))
        nodes["inputs"].append(", ".join(names[k] for k in ids) or "—")
        held = layer.shares or getattr(layer, "tied_to", "")
        nodes["weights"].append(fmt.count(c.weights) + (f" ({'shares' if layer.shares else 'tied to'} {held}'s)"
                                                         if held else ""))
        nodes["macs"].append(fmt.count(c.macs_forward))
        nodes["color"].append(KIND_COLORS.get(layer.kind, _OTHER))
    edges: dict[str, list[float]] = {k: [] for k in ("x0", "y0", "x1", "y1", "cx0", "cy0", "cx1", "cy1")}
    for j, ids in enumerate(network.input_indices):
        for k in ids:
            x0, y0, x1, y1 = float(k), -float(lane[k]), float(j), -float(lane[j])
            span = j - k
            # Adjacent on one lane: a straight segment; a skip on one lane: an arc above, higher the
            # longer it reaches; between lanes: an S-curve.
            lift = 0.0 if span == 1 or y0 != y1 else 0.25 + 0.12 * math.log2(span)
            edges["x0"].append(x0)
            edges["y0"].append(y0)
            edges["x1"].append(x1)
            edges["y1"].append(y1)
            edges["cx0"].append(x0 + span / 3)
            edges["cy0"].append(y0 + lift if lift else y0)
            edges["cx1"].append(x1 - span / 3)
            edges["cy1"].append(y1 + lift if lift else y1)
    return {"graph_nodes": nodes, "graph_edges": edges}


def graph_figure(network: Network, *, title: str = "Network graph", width: int = 540, height: int = 170) -> Plot:
    """The block diagram of :func:`graph_data`; hover a node for its name, kind, output shape and inputs."""
    from bokeh.models import ColumnDataSource, HoverTool, Range1d
    from bokeh.plotting import figure

    from .plots import Plot

    data = graph_data(network)
    nodes = ColumnDataSource(data["graph_nodes"], name="graph_nodes")
    edges = ColumnDataSource(data["graph_edges"], name="graph_edges")
    depth = max(1.0, -min(data["graph_nodes"]["y"], default=0.0))
    fig = figure(name="graph", title=title, width=width, height=height, tools="xpan,xwheel_zoom,reset,save",
                 toolbar_location="right", x_range=Range1d(-1, max(len(network.layers), 2)),
                 y_range=Range1d(-depth - 0.6, 1.4))
    fig.bezier(x0="x0", y0="y0", x1="x1", y1="y1", cx0="cx0", cy0="cy0", cx1="cx1", cy1="cy1", source=edges,
               line_color="#888888", line_width=1, name="graph_edge_lines")
    dots = fig.scatter(x="x", y="y", size=8, color="color", line_color="white", source=nodes, name="graph_dots")
    fig.add_tools(HoverTool(renderers=[dots], tooltips=[("layer", "@name (@kind)"), ("output", "@shape"),
                                                        ("inputs", "@inputs"), ("weights", "@weights"),
                                                        ("MACs forward", "@macs")]))
    fig.xaxis.axis_label = "layer (spec order)"
    fig.yaxis.visible = False
    fig.ygrid.grid_line_color = None
    return Plot(fig, {"graph_nodes": nodes, "graph_edges": edges})
