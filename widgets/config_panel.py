"""The configuration panel: machines per replica, replicas, PS machines, update batch, sync or async,
overlap, partitioning, and gradient compression (methods from :mod:`dnnbench.esgd` when present).

Every edit rebuilds the whole :class:`~dnnbench.specs.Configuration` from the fields; an invalid one
is shown next to its field and the last valid configuration stays in use.
"""

from __future__ import annotations

from typing import Any

import ipywidgets as w

from dnnbench.errors import SpecError
from dnnbench.specs import PRECISIONS, AllReduce, Compression, Configuration

from .base import Emit, Field, Panel, error_html, format_value, parse_text


def compression_choices() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(methods, encodings) the model can cost: "none" plus whatever dnnbench.compression.wire exposes now."""
    try:
        from dnnbench.esgd import wire
    except Exception:  # the ESGD part is optional: without it only "none" is offered
        return ("none",), ("pairs32",)
    methods = tuple(m for m in getattr(wire, "METHODS", ()) if m != "none")
    encodings = tuple(getattr(wire, "ENCODINGS", ("pairs32",)))
    return ("none", *methods), encodings


class ConfigPanel(Panel):
    """Emits ``configuration=`` with a new valid :class:`Configuration` on every valid edit."""

    def __init__(self, configuration: Configuration, emit: Emit | None = None) -> None:
        super().__init__(emit)
        self.configuration = configuration  # the last valid configuration
        small = w.Layout(width="100px")
        self.fields: dict[str, Field] = {
            "data_parallel": Field("replicas share by",
                                   w.ToggleButtons(options=[("PS", "ps"), ("all-reduce", "allreduce")],
                                                   style={"button_width": "85px"}),
                                   css="dnnbench-data-parallel"),
            "workers_per_replica": Field("machines per replica W", w.IntText(layout=small), "machines",
                                         css="dnnbench-workers-per-replica"),
            "replicas": Field("replicas R", w.IntText(layout=small), "", css="dnnbench-replicas"),
            "ps_machines": Field("PS machines P", w.IntText(layout=small), "machines", css="dnnbench-ps-machines"),
            "push_interval_samples": Field("update batch k", w.IntText(layout=small), "samples per push",
                                           css="dnnbench-update-batch"),
            "pull_interval_samples": Field("pull interval", w.IntText(layout=small), "samples per fetch",
                                           css="dnnbench-pull-interval"),
            "threads": Field("threads", w.Text(placeholder="one per core", continuous_update=False, layout=small),
                             "per machine", css="dnnbench-threads"),
            "mode": Field("PS updates", w.ToggleButtons(options=["async", "sync"], style={"button_width": "70px"}),
                          css="dnnbench-mode"),
            "ps_exchange": Field("PS exchange", w.Dropdown(options=["overlapped", "request_reply"],
                                                           layout=w.Layout(width="130px")),
                                 "async", css="dnnbench-ps-exchange"),
            "overlap": Field("overlap", w.FloatSlider(min=0.0, max=1.0, step=0.05, readout_format=".2f",
                                                      continuous_update=False, layout=w.Layout(width="220px")),
                             "", css="dnnbench-overlap"),
            "partitioning": Field("partitioning", w.Dropdown(options=["feature-map", "spatial", "auto"],
                                                            layout=w.Layout(width="130px")),
                                  css="dnnbench-partitioning"),
            "fc_update": Field("FC updates send", w.Dropdown(options=["auto", "activations", "deltas"],
                                                             layout=w.Layout(width="130px")),
                               css="dnnbench-fc-update"),
            "local_batch_samples": Field("mini-batch b", w.IntText(layout=small), "samples per machine (device)",
                                         css="dnnbench-local-batch"),
            "precision": Field("precision", w.Dropdown(options=list(PRECISIONS), layout=w.Layout(width="100px")),
                               "fp16/bf16: mixed", css="dnnbench-precision"),
            "optimizer": Field("optimizer", w.Dropdown(options=["sgd", "momentum", "adam"],
                                                       layout=w.Layout(width="100px")), "its state counts in memory",
                               css="dnnbench-optimizer"),
            "zero_stage": Field("ZeRO stage", w.Dropdown(options=[0, 1, 2, 3], layout=w.Layout(width="100px")),
                                "all-reduce only", css="dnnbench-zero-stage"),
        }
        self.allreduce: dict[str, Field] = {
            "algorithm": Field("all-reduce", w.Dropdown(options=["ring", "tree", "hierarchical"],
                                                        layout=w.Layout(width="110px")),
                               css="dnnbench-allreduce-algorithm"),
            "bucket_bytes": Field("bucket", w.IntText(layout=w.Layout(width="120px")), "bytes",
                                  css="dnnbench-allreduce-bucket"),
            "overlap_backward": Field("overlap backward", w.Checkbox(indent=False), css="dnnbench-allreduce-overlap"),
        }
        methods, encodings = compression_choices()
        self.compression: dict[str, Field] = {
            "method": Field("compression", w.Dropdown(options=list(methods), layout=w.Layout(width="160px")),
                            css="dnnbench-compression-method"),
            "density": Field("density", w.FloatText(layout=small), "fraction sent",
                             css="dnnbench-compression-density"),
            "encoding": Field("encoding", w.Dropdown(options=list(encodings), layout=w.Layout(width="130px")),
                              css="dnnbench-compression-encoding"),
            "compress_pull": Field("compress pulls", w.Checkbox(indent=False), css="dnnbench-compress-pull"),
        }
        for key, f in self.fields.items():  # the spec's own description of each field, as the tooltip
            f.widget.tooltip = Configuration.field_description(key)
        for key, f in self.compression.items():
            f.widget.tooltip = Compression.field_description(key)
        for key, f in self.allreduce.items():
            f.widget.tooltip = AllReduce.field_description(key)
        for f in (*self.fields.values(), *self.compression.values(), *self.allreduce.values()):
            f.box.children[0].children[0].layout.width = "165px"
            self.observe_widget(f.widget, lambda _: self.edited())
        self.observe_widget(self.fields["data_parallel"].widget, self._scheme_changed)
        self.children = (
            self.error,
            *(f.box for f in self.fields.values()),
            w.HTML("<b>All-reduce</b> <span style='font-size:12px;color:#555'>(when replicas share by all-reduce; "
                   "docs/model.md §10)</span>"),
            *(f.box for f in self.allreduce.values()),
            w.HTML("<b>Gradient compression</b> <span style='font-size:12px;color:#555'>(PS pushes; "
                   "see docs/esgd.md)</span>"),
            *(f.box for f in self.compression.values()),
        )
        self.set_configuration(configuration)

    def set_configuration(self, configuration: Configuration) -> None:
        """Show ``configuration`` (quietly) and make it the last valid one."""
        self.configuration = configuration
        data = configuration.to_dict()
        with self.quiet():
            for key, f in self.fields.items():
                f.widget.value = format_value(data[key]) if isinstance(f.widget, w.Text) else data[key]
                f.show(None)
            for key, f in self.allreduce.items():
                f.widget.value = data["allreduce"][key]
                f.show(None)
            comp = data["compression"]
            for key, f in self.compression.items():
                if key in ("method", "encoding") and comp[key] not in f.widget.options:
                    f.widget.options = (*f.widget.options, comp[key])
                f.widget.value = comp[key]
                f.show(None)
            self._compression_enabled()
        self.error.value = ""

    def _scheme_changed(self, change: dict[str, Any]) -> None:
        """All-reduce has no PS machines; back to the PS, replicas need one: P follows the switch."""
        p = self.fields["ps_machines"].widget
        with self.quiet():
            if change["new"] == "ps":
                self.fields["zero_stage"].widget.value = 0  # ZeRO shards over an all-reduce group only
            if change["new"] == "allreduce":
                p.value = 0
            elif p.value == 0 and int(self.fields["replicas"].widget.value or 1) > 1:
                p.value = 1
        self.edited()

    def _compression_enabled(self) -> None:
        off = self.compression["method"].widget.value == "none"
        for key in ("density", "encoding", "compress_pull"):
            self.compression[key].widget.disabled = off
        ps = self.fields["data_parallel"].widget.value == "ps"
        for f in (*self.allreduce.values(), self.fields["zero_stage"]):
            f.widget.disabled = ps
        for key in ("ps_machines", "mode", "ps_exchange", "pull_interval_samples", "fc_update"):
            self.fields[key].widget.disabled = not ps

    def data(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, f in self.fields.items():
            out[key] = parse_text(f.widget.value) if isinstance(f.widget, w.Text) else f.widget.value
        out["compression"] = {key: f.widget.value for key, f in self.compression.items()}
        out["allreduce"] = {key: f.widget.value for key, f in self.allreduce.items()}
        keep = self.configuration.to_dict()
        return {**keep, **out}

    def edited(self) -> None:
        self._compression_enabled()
        for f in (*self.fields.values(), *self.compression.values(), *self.allreduce.values()):
            f.show(None)
        try:
            config = Configuration.build(self.data())
        except SpecError as err:
            self._show(err)
            return
        self.configuration = config
        self.error.value = ""
        self.emit(configuration=config)

    def _show(self, err: SpecError) -> None:
        message = f"{err} — the last valid configuration stays in use."
        head, _, rest = err.field.partition(".")
        if head == "compression" and rest in self.compression:
            self.compression[rest].show(message)
        elif head == "allreduce" and rest in self.allreduce:
            self.allreduce[rest].show(message)
        elif head in self.fields:
            self.fields[head].show(message)
        else:
            self.error.value = error_html(message)
