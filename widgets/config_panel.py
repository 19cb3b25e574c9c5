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

from .base import Emit, Field, Panel, control, error_html, format_value, parse_text


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
        small = {"width": "100px"}
        methods, encodings = compression_choices()
        # Per part of the configuration: key, label, the control and its arguments, unit, CSS class.
        table: dict[str, tuple[tuple[str, str, type[w.Widget], dict[str, Any], str, str], ...]] = {
            "fields": (
                ("data_parallel", "replicas share by", w.ToggleButtons,
                 {"options": [("PS", "ps"), ("all-reduce", "allreduce")], "style": {"button_width": "85px"}}, "",
                 "dnnbench-data-parallel"),
                ("workers_per_replica", "machines per replica W", w.IntText, small, "machines",
                 "dnnbench-workers-per-replica"),
                ("replicas", "replicas R", w.IntText, small, "", "dnnbench-replicas"),
                ("ps_machines", "PS machines P", w.IntText, small, "machines", "dnnbench-ps-machines"),
                ("push_interval_samples", "update batch k", w.IntText, small, "samples per push",
                 "dnnbench-update-batch"),
                ("pull_interval_samples", "pull interval", w.IntText, small, "samples per fetch",
                 "dnnbench-pull-interval"),
                ("threads", "threads", w.Text, {"placeholder": "one per core", "continuous_update": False, **small},
                 "per machine", "dnnbench-threads"),
                ("mode", "PS updates", w.ToggleButtons,
                 {"options": ["async", "sync"], "style": {"button_width": "70px"}}, "", "dnnbench-mode"),
                ("ps_exchange", "PS exchange", w.Dropdown,
                 {"options": ["overlapped", "request_reply"], "width": "130px"}, "async", "dnnbench-ps-exchange"),
                ("overlap", "overlap", w.FloatSlider, {"min": 0.0, "max": 1.0, "step": 0.05, "readout_format": ".2f",
                                                       "continuous_update": False, "width": "220px"},
                 "", "dnnbench-overlap"),
                ("partitioning", "partitioning", w.Dropdown,
                 {"options": ["feature-map", "spatial", "auto"], "width": "130px"}, "", "dnnbench-partitioning"),
                ("fc_update", "FC updates send", w.Dropdown,
                 {"options": ["auto", "activations", "deltas"], "width": "130px"}, "", "dnnbench-fc-update"),
                ("local_batch_samples", "mini-batch b", w.IntText, small, "samples per machine (device)",
                 "dnnbench-local-batch"),
                ("precision", "precision", w.Dropdown, {"options": list(PRECISIONS), **small}, "fp16/bf16: mixed",
                 "dnnbench-precision"),
                ("optimizer", "optimizer", w.Dropdown, {"options": ["sgd", "momentum", "adam"], **small},
                 "its state counts in memory", "dnnbench-optimizer"),
                ("zero_stage", "ZeRO stage", w.Dropdown, {"options": [0, 1, 2, 3], **small}, "all-reduce only",
                 "dnnbench-zero-stage"),
            ),
            "allreduce": (
                ("algorithm", "all-reduce", w.Dropdown, {"options": ["ring", "tree", "hierarchical"], "width": "110px"},
                 "", "dnnbench-allreduce-algorithm"),
                ("bucket_bytes", "bucket", w.IntText, {"width": "120px"}, "bytes", "dnnbench-allreduce-bucket"),
                ("overlap_backward", "overlap backward", w.Checkbox, {"indent": False}, "",
                 "dnnbench-allreduce-overlap"),
            ),
            "compression": (
                ("method", "compression", w.Dropdown, {"options": list(methods), "width": "160px"}, "",
                 "dnnbench-compression-method"),
                ("density", "density", w.FloatText, small, "fraction sent", "dnnbench-compression-density"),
                ("encoding", "encoding", w.Dropdown, {"options": list(encodings), "width": "130px"}, "",
                 "dnnbench-compression-encoding"),
                ("compress_pull", "compress pulls", w.Checkbox, {"indent": False}, "", "dnnbench-compress-pull"),
            ),
        }
        # The spec's own description of each field, as the tooltip.
        described = {"fields": Configuration, "allreduce": AllReduce, "compression": Compression}
        parts: dict[str, dict[str, Field]] = {}
        for part, rows in table.items():
            parts[part] = {}
            for key, label, kind, kwargs, unit, css in rows:
                widget = control(kind, tooltip=described[part].field_description(key), css=css, **kwargs)
                parts[part][key] = Field(label, widget, unit, label_width="165px")
                self.observe_widget(widget, lambda _: self.edited())
        self.fields, self.allreduce, self.compression = parts["fields"], parts["allreduce"], parts["compression"]
        self.observe_widget(self.fields["data_parallel"].widget, self._scheme_changed)
        self.children = (
            self.error,
            *(f.box for f in self.fields.values()),
            control(w.HTML, value="<b>All-reduce</b> <span style='font-size:12px;color:#555'>(when replicas share "
                    "by all-reduce; docs/model.md §10)</span>"),
            *(f.box for f in self.allreduce.values()),
            control(w.HTML, value="<b>Gradient compression</b> <span style='font-size:12px;color:#555'>(PS pushes; "
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
