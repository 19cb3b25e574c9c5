"""The workbench: network, cluster and configuration panels driving live Bokeh plots (GitHub issue 5).

    from dnnbench.widgets import Workbench
    Workbench(network="imagenet22k-adam", cluster="adam-2014")

A panel edit builds a new spec (the panel keeps the last valid one and shows errors next to the
field), the workbench builds a new :class:`~dnnbench.face.state.WorkbenchState`, :func:`dnnbench.face.landscape.compute`
calls the model once (vectorised) and :class:`views.Views` replaces the sources' data in one batched
update. Updates are guarded against re-entrance: a change that arrives while one is being applied is
applied right after it (only the newest). The workbench never raises into the front end: a
SpecError is shown where it belongs, anything else is logged and shown in the status line.
"""

from __future__ import annotations

import html
import logging
import os
import time
from pathlib import Path
from typing import Any

import ipywidgets as w

from dnnbench.errors import SpecError
from dnnbench.face import plots
from dnnbench.face.landscape import Results, compute
from dnnbench.face.state import WorkbenchState
from dnnbench.optimizer import optimize, optimize_heterogeneous
from dnnbench.specs import Cluster, Configuration, Dataset, Network

from .base import Panel, control, error_html, layout
from .cluster_panel import ClusterPanel
from .config_panel import ConfigPanel
from .confine import confine
from .network_panel import NetworkPanel
from .views import Views

log = logging.getLogger("dnnbench.widgets")

_STATE_FIELDS = ("network", "cluster", "dataset", "configuration", "budget_machines")


class Workbench(Panel):
    """The whole workbench as one widget (a VBox): display it as the last expression of a cell.

    ``state`` (a :class:`WorkbenchState` or a path to a saved one) wins over the other arguments;
    otherwise ``network``, ``cluster``, ``dataset`` are preset names, spec files or specs.
    """

    def __init__(self, network: str | os.PathLike[str] | Network = "imagenet22k-adam",
                 cluster: str | os.PathLike[str] | Cluster = "adam-2014",
                 dataset: str | os.PathLike[str] | Dataset | None = None,
                 configuration: Configuration | dict[str, Any] | None = None,
                 budget_machines: int | None = None,
                 state: WorkbenchState | str | os.PathLike[str] | None = None,
                 plot_width: int = 540) -> None:
        super().__init__(None)
        if state is not None:
            self.state = state if isinstance(state, WorkbenchState) else WorkbenchState.load(state)
        else:
            if isinstance(configuration, dict):
                configuration = Configuration.build(configuration)
            self.state = WorkbenchState.from_presets(network, cluster, dataset, configuration, budget_machines)
        self.results: Results = compute(self.state)
        self.updates = 0  # applied updates (for tests and benchmarks)
        self._busy = False
        self._pending: dict[str, Any] | None = None
        self._unapplied: dict[str, Any] = {}  # panel edits the last update could not apply together

        self.network_panel = NetworkPanel(self.state.network, self.state.dataset.name, emit=self.change)
        self.cluster_panel = ClusterPanel(self.state.cluster, self.state.budget_machines, emit=self.change)
        self.config_panel = ConfigPanel(self.state.configuration, emit=self.change)
        self.views = Views(self.results, width=plot_width)

        self.optimize_button = control(w.Button, description="Optimize", icon="bolt", button_style="primary",
                                       tooltip="set the configuration to the fastest one at the budget",
                                       css="dnnbench-optimize")
        self.state_path = control(w.Text, value="dnnbench-workbench.json", width="220px", css="dnnbench-state-path")
        self.save_button = control(w.Button, description="Save state", icon="save", width="110px", css="dnnbench-save")
        self.load_button = control(w.Button, description="Load state", icon="folder-open", width="110px",
                                   css="dnnbench-load")
        self.html_path = control(w.Text, value="dnnbench-workbench.html", width="220px", css="dnnbench-html-path")
        self.export_button = control(w.Button, description="Export HTML", icon="download", width="110px",
                                     css="dnnbench-export")
        self.status = control(w.HTML, value="", css="dnnbench-status")
        for button, handler in ((self.optimize_button, self.optimize), (self.save_button, self._save),
                                (self.load_button, self._load), (self.export_button, self._export)):
            self.on_click(button, handler)

        tabs = control(w.Tab, children=[self.network_panel, self.cluster_panel, self.config_panel],
                       titles=("Network", "Cluster", "Configuration"), selected_index=2,
                       layout=layout(width="450px", min_width="450px"), css="dnnbench-tabs")
        files = w.HBox([self.state_path, self.save_button, self.load_button, self.html_path, self.export_button],
                       layout=layout(flex_flow="row wrap"))
        header = w.HBox([control(w.HTML, value="<b style='font-size:15px'>dnnbench workbench</b>",
                                 layout=layout(margin="4px 12px 0 0")), self.optimize_button, files],
                        layout=layout(flex_flow="row wrap", align_items="center"))
        self.children = (header, self.status, self.error,
                         w.HBox([tabs, self.views.widget], layout=layout(align_items="flex-start")))
        self.add_class("dnnbench-workbench")

    # -- the update path ---------------------------------------------------------------------------
    def change(self, **changes: Any) -> None:
        """Apply panel changes (``network=``, ``cluster=``, ``dataset=``, ``configuration=``,
        ``budget_machines=``): a new state, one model call, one batched plot update."""
        if self._busy:  # re-entrant: remember the newest request, apply it after the current one
            self._pending = {**(self._pending or {}), **changes}
            return
        self._busy = True
        try:
            while True:
                self._apply(changes)
                if not self._pending:
                    break
                changes, self._pending = self._pending, None
        finally:
            self._busy = False

    def _apply(self, changes: dict[str, Any]) -> None:
        t0 = time.perf_counter()
        data = {k: getattr(self.state, k) for k in _STATE_FIELDS}
        # Edits that were valid in their panel but not together with the rest (a precision the cluster's
        # device lacks) stay pending: the next edit is tried with them, so the state follows the panels.
        changes = {**self._unapplied, **changes}
        data.update(changes)
        try:
            state = WorkbenchState.build(data)
            results = compute(state)
        except SpecError as err:
            self._unapplied = changes
            self._fail(str(err))
            return
        except Exception as exc:  # never kill the widget: log, show, keep the last valid views
            log.exception("dnnbench workbench update failed")
            self._fail(f"{type(exc).__name__}: {exc}")
            return
        self._unapplied = {}
        self.state, self.results = state, results
        self.views.update(results)
        self.updates += 1
        self.status.value = (f"<span style='font-size:12px;color:#555'>updated: {results.evaluated:,} configurations "
                             f"evaluated in {1e3 * (time.perf_counter() - t0):.1f} ms</span>")
        self.error.value = ""

    def _fail(self, message: str) -> None:
        text = f"{message} — the last valid prediction stays on screen."
        self.error.value = error_html(text)
        self.views.show_error(self.results, text)

    # -- buttons ----------------------------------------------------------------------------------
    def optimize(self) -> None:
        """Set the configuration to the optimizer's best at the budget (exact, dnnbench.optimizer)."""
        s = self.state
        try:
            if s.cluster.classes:  # a heterogeneous cluster: the best placement over W, R and P
                best = optimize_heterogeneous(s.network, s.cluster, s.dataset, s.configuration)
                config = s.configuration.evolve(workers_per_replica=best.workers_per_replica,
                                                replicas=best.replicas, ps_machines=best.ps_machines)
                explanation = (f"heterogeneous placement: W={best.workers_per_replica}, R={best.replicas}, "
                               f"P={best.ps_machines}, PS on {', '.join(best.ps_classes) or 'none'}")
            else:
                # Both data-parallel schemes: the PS against an all-reduce (docs/model.md §10).
                res = optimize(s.network, s.cluster, s.dataset, s.budget_machines, s.configuration, top_k=1,
                               data_parallels=["ps", "allreduce"], allreduce_algorithms=["ring", "tree"])
                config, explanation = res.configuration(s.configuration), res.explanation
        except SpecError as err:
            self._fail(str(err))
            return
        self.config_panel.set_configuration(config)
        self.change(configuration=config)
        self.status.value = f"<span style='font-size:12px;color:#555'>{html.escape(explanation)}</span>"

    def set_state(self, state: WorkbenchState) -> None:
        """Show a whole state: every panel quietly, then one update."""
        self._unapplied = {}
        self.network_panel.set_network(state.network, state.dataset.name
                                       if state.dataset.name in self.network_panel.dataset.options else None)
        self.cluster_panel.set_cluster(state.cluster, state.budget_machines)
        self.config_panel.set_configuration(state.configuration)
        self.change(**{k: getattr(state, k) for k in _STATE_FIELDS})

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Save the whole state (network, cluster, data set, configuration, budget) as JSON."""
        return self.state.save(path)

    def load(self, path: str | os.PathLike[str]) -> None:
        self.set_state(WorkbenchState.load(path))

    def export_html(self, path: str | os.PathLike[str]) -> Path:
        """The current plots as a standalone HTML file (BokehJS inline: it opens offline)."""
        return plots.save_html(self.views.figures(), path, title=f"dnnbench: {self.state.network.name} on "
                                                                  f"{self.state.cluster.name}")

    # The buttons take their paths through confine(): under ``dnnbench app`` only the app's folder.
    def _file_button(self, action: Any, field: Any, what: str, verb: str) -> None:
        """Run ``action`` on the (confined) path in ``field``; a bad path or a failed write is the
        one-line message under the header, the last valid state stays on screen."""
        text = field.value.strip()
        try:
            done = action(confine(text, what))
        except SpecError as err:
            self.error.value = error_html(str(err))
            return
        shown = text if done is None else str(done)
        self.status.value = f"<span style='font-size:12px;color:#555'>{verb} {html.escape(shown)}</span>"

    def _save(self) -> None:
        self._file_button(self.save, self.state_path, "state file", "saved")

    def _load(self) -> None:
        self._file_button(self.load, self.state_path, "state file", "loaded")

    def _export(self) -> None:
        self._file_button(self.export_html, self.html_path, "HTML file", "wrote")

    def close(self) -> None:
        if getattr(self, "_closed", False):
            return
        self._closed = True
        for panel in (self.network_panel, self.cluster_panel, self.config_panel):
            panel.close()
        self.views.close()
        super().close()
