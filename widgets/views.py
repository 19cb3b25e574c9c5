"""The workbench's Bokeh views, built once from :mod:`dnnbench.face.plots` and updated in place.

All figures live in one Bokeh document wrapped in one :class:`BatchedBokehModel`. An update replaces
each kept ColumnDataSource's ``data`` (one assignment per source) inside :meth:`BatchedBokehModel.batch`,
which sends the whole change to the browser as ONE ``PATCH-DOC`` message. No figure is rebuilt.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from bokeh.layouts import column
from bokeh.protocol import Protocol
from jupyter_bokeh.widgets import BokehModel

from dnnbench.face import explain, graph, plots
from dnnbench.face.landscape import Results


class BatchedBokehModel(BokehModel):
    """A ``BokehModel`` that can gather the document changes of a block into one PATCH-DOC message."""

    def __init__(self, model: Any, **kwargs: Any) -> None:
        self._held: list[Any] | None = None
        self.patch_messages_sent = 0  # PATCH-DOC messages sent to the browser (for tests and benchmarks)
        super().__init__(model, **kwargs)

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Hold document changes made inside the block and send them as one message at its end."""
        if self._held is not None:  # nested: the outer block sends
            yield
            return
        self._held = []
        try:
            yield
        finally:
            events, self._held = self._held, None
            if events:
                self._send_patch(events)

    def close(self) -> None:
        # BokehModel.close detaches from the document and fails with KeyError when called again
        # (ipywidgets calls close once more when the widget is garbage-collected).
        try:
            super().close()
        except KeyError:
            pass

    def _document_patched(self, event: Any) -> None:
        if event.setter is self:
            return
        if self._held is not None:
            self._held.append(event)
            return
        self._send_patch([event])

    def _send_patch(self, events: list[Any]) -> None:
        # The same wire format as BokehModel._document_patched, with several events in one message.
        msg = Protocol().create("PATCH-DOC", events)
        self.send({"msg": "patch", "payload": msg.header_json})
        self.send({"msg": "patch", "payload": msg.metadata_json})
        self.send({"msg": "patch", "payload": msg.content_json})
        for buffer in msg.buffers:
            self.send({"msg": "patch", "payload": json.dumps(buffer.ref)})
            self.send({"msg": "patch"}, [buffer.to_bytes()])
        self.patch_messages_sent += 1


def view_data(results: Results) -> dict[str, dict[str, Any]]:
    """Every source's new data for ``results``, keyed by source name (pure: no bokeh objects)."""
    data: dict[str, dict[str, Any]] = {}
    data.update(plots.speedup_data(results.model_parallel, results.data_parallel, results.optimal,
                                   results.current, max_machines=results.state.budget_machines,
                                   alternative=results.data_parallel_alternative))
    data.update(plots.breakdown_data(_bars(results)))
    data.update(plots.memory_data(_bars(results)))
    data.update(plots.heatmap_data(results.grid, results.optimum, results.current))
    data.update(plots.timeline_data(results.current, results.state.configuration.push_interval_samples))
    return data


def _bars(results: Results) -> dict[str, dict[str, Any]]:
    return {"current": results.current, "optimum": results.optimum or results.current}


def summary(results: Results, error: str | None = None) -> str:
    """The words under the plots: bottleneck, epoch time, and how the optimum compares."""
    text = plots.summary_html(results.current, error)
    opt = results.optimum
    if opt is not None:
        extra = (f"<br>Optimum at the budget of {results.state.budget_machines} machines: "
                 f"W={opt['workers_per_replica']}, R={opt['replicas']}, P={opt['ps_machines']}, "
                 f"speed-up {opt['speedup']:.2f}x, bottleneck {opt['bottleneck']}.")
        if results.sampled:
            extra += " (Heatmap and curves sample W and R geometrically at this budget; Optimize is exact.)"
        text = text.replace("</p>", extra + "</p>", 1)
    else:
        text = text.replace("</p>", f"<br>No configuration fits in memory at the budget of "
                                    f"{results.state.budget_machines} machines.</p>", 1)
    reasons = explain.why(results)
    if reasons:
        text += "<ul class='dnnbench-why'>" + "".join(f"<li>{html.escape(r)}</li>" for r in reasons) + "</ul>"
    return text


class Views:
    """The speed-up, breakdown and heatmap figures and the summary, in one Bokeh document."""

    def __init__(self, results: Results, *, width: int = 540) -> None:
        self.speedup = plots.speedup_figure(results.model_parallel, results.data_parallel, results.optimal,
                                            results.current, max_machines=results.state.budget_machines,
                                            width=width, alternative=results.data_parallel_alternative)
        self.breakdown = plots.breakdown_figure(_bars(results), width=width)
        self.memory = plots.memory_figure(_bars(results), width=width)
        self.heatmap = plots.heatmap_figure(results.grid, results.optimum, results.current,
                                            budget_machines=results.state.budget_machines, width=width)
        self.timeline = plots.timeline_figure(results.current, results.state.configuration.push_interval_samples,
                                              width=width)
        self.summary = plots.summary_div(results.current, width=width)
        self.summary.text = summary(results)
        self.graph = graph.graph_figure(results.state.network, width=width)
        self._network = results.state.network
        self.plots = (self.speedup, self.breakdown, self.memory, self.timeline, self.heatmap)
        self.layout = column(self.summary, self.speedup.figure, self.breakdown.figure, self.memory.figure,
                             self.timeline.figure, self.heatmap.figure, self.graph.figure, name="workbench_plots")
        self.widget = BatchedBokehModel(self.layout)
        self.widget.add_class("dnnbench-plots")

    def update(self, results: Results, error: str | None = None) -> None:
        """Replace every source's data and the summary: one PATCH-DOC message to the browser."""
        data = view_data(results)
        with self.widget.batch():
            for plot in self.plots:
                plot.update(data)
            if results.state.network is not self._network:  # the diagram changes with the network only
                self._network = results.state.network
                self.graph.update(graph.graph_data(self._network))
                self.graph.figure.x_range.end = max(len(self._network.layers), 2)
                depth = max(1.0, max(graph.lanes(self._network)))
                self.graph.figure.y_range.start = -depth - 0.6
            self.heatmap.figure.title.text = f"Epoch time at the budget of {results.state.budget_machines} machines"
            self.summary.text = summary(results, error)

    def show_error(self, results: Results, error: str) -> None:
        """Keep the last valid prediction on screen, with the error in the summary."""
        with self.widget.batch():
            self.summary.text = summary(results, error)

    def figures(self) -> list[Any]:
        return [self.summary, self.speedup.figure, self.breakdown.figure, self.memory.figure, self.timeline.figure,
                self.heatmap.figure, self.graph.figure]

    def close(self) -> None:
        self.widget.close()
