"""The network panel: a preset, a spec file, an ONNX file or a PyTorch module, and a table-like layer editor.

Each row is one layer: its kind, its parameters (built from the layer type's own fields, so a new
layer kind needs no widget code), and what the spec infers for it — output shape, weights and
forward MACs (docs/model.md §3). Rows can be added, removed and moved. Every edit rebuilds the
whole :class:`~dnnbench.specs.Network` with ``Network.build``; an invalid one shows its message
next to the field it names (``layers[3].kernel: ...``) and the last valid network stays in use.
Whole networks come from :mod:`.network_sources` (preset, JSON/YAML spec, ONNX, ``package.module:factory``,
upload); a source that fails shows its message under the source field (or the input-shape field).
"""

from __future__ import annotations

import re
import typing
from typing import Any

import ipywidgets as w

from dnnbench import fmt, presets
from dnnbench.errors import SpecError
from dnnbench.specs import LAYER_TYPES, Network

from .base import Emit, Field, Panel, error_html, format_value, parse_text
from .network_sources import SHAPE_FIELD, UPLOAD_ACCEPT, network_from_source, network_from_upload, parse_shape

#: Parameters a freshly added (or re-kinded) layer starts with; the user edits them.
NEW_LAYER: dict[str, dict[str, Any]] = {
    "conv2d": {"out_channels": 64, "kernel": 3, "padding": 1, "activation": "relu"},
    "pool": {"mode": "max", "window": 2},
    "fc": {"out_features": 1000, "activation": "relu"},
    "activation": {"function": "relu"},
    "dropout": {"p": 0.5},
    "lrn": {"size": 5},
    "batchnorm": {},
    "flatten": {},
    "softmax": {},
    "input": {"shape": [3, 224, 224]},
    "adaptive_pool": {"mode": "avg", "output_size": 1},
    "add": {},
    "concat": {},
    "layer_norm": {},
    "embedding": {"vocabulary": 30000, "dim": 512},
    "position_embedding": {"rows": 512},
    "class_token": {},
    "select_token": {},
    "attention": {"heads": 8},
}

_LAYER_FIELD = re.compile(r"^layers\[(\d+)\](?:\.(\w+))?")


def _param_fields(kind: str) -> dict[str, Any]:
    """The editable fields of a layer kind (all but ``kind``, ``name`` and ``inputs``, which have their
    own column) with their annotations."""
    cls = LAYER_TYPES[kind]
    return {k: f for k, f in cls.model_fields.items() if k not in ("kind", "name", "inputs")}


def parse_inputs(text: str) -> list[str] | None:
    """The inputs column: layer names separated by commas; empty: the layer before (None)."""
    names = [part.strip() for part in text.split(",")]
    return [n for n in names if n] or None


def _literal_options(annotation: Any) -> tuple[Any, ...] | None:
    if typing.get_origin(annotation) is typing.Literal:
        return typing.get_args(annotation)
    return None


class LayerRow:
    """The widgets of one layer; ``data()`` is the layer's spec data as the user has typed it."""

    def __init__(self, panel: NetworkPanel, layer: dict[str, Any]) -> None:
        self.panel = panel
        first = layer.get("kind") == "input"
        kinds = ["input"] if first else [k for k in LAYER_TYPES if k != "input"]
        self.index = w.Label("", layout=w.Layout(width="28px"))
        self.kind = w.Dropdown(options=kinds, value=layer["kind"], layout=w.Layout(width="105px"),
                               disabled=first)
        self.kind.add_class("dnnbench-layer-kind")
        self.name = w.Text(value=layer.get("name", ""), placeholder="name", continuous_update=False,
                           layout=w.Layout(width="95px"))
        self.inputs = w.Text(value=", ".join(layer.get("inputs") or ()), placeholder="inputs: the layer before",
                             continuous_update=False, disabled=first, layout=w.Layout(width="170px"),
                             tooltip="names of the layers this one takes, separated by commas")
        self.inputs.add_class("dnnbench-layer-inputs")
        self.up = w.Button(icon="arrow-up", tooltip="move up", layout=w.Layout(width="30px"), disabled=first)
        self.down = w.Button(icon="arrow-down", tooltip="move down", layout=w.Layout(width="30px"), disabled=first)
        self.remove = w.Button(icon="trash", tooltip="remove this layer", layout=w.Layout(width="30px"),
                               disabled=first)
        self.remove.add_class("dnnbench-layer-remove")
        self.info = w.HTML("", layout=w.Layout(margin="0 0 0 32px"))
        self.info.add_class("dnnbench-layer-info")
        self.error = w.HTML("")
        self.params: dict[str, w.Widget] = {}
        self.param_box = w.HBox(layout=w.Layout(flex_flow="row wrap", margin="0 0 0 32px"))
        self.box = w.VBox([w.HBox([self.index, self.kind, self.name, self.inputs, self.up, self.down, self.remove]),
                           self.param_box, self.info, self.error],
                          layout=w.Layout(border_bottom="1px solid #e0e0e0", padding="2px 0"))
        self._build_params(layer)
        panel.observe_widget(self.kind, self._kind_changed)
        panel.observe_widget(self.name, lambda _: panel.edited())
        panel.observe_widget(self.inputs, lambda _: panel.edited())
        panel.on_click(self.up, lambda: panel.move(self, -1))
        panel.on_click(self.down, lambda: panel.move(self, +1))
        panel.on_click(self.remove, lambda: panel.delete(self))

    def _build_params(self, layer: dict[str, Any]) -> None:
        self.panel.forget(list(self.params.values()))
        self.params = {}
        for key, info in _param_fields(layer["kind"]).items():
            value = layer.get(key, None if info.is_required() else info.default)
            options = _literal_options(info.annotation)
            if info.annotation is bool:
                widget: w.Widget = w.Checkbox(value=bool(value), description=key, indent=False,
                                              layout=w.Layout(width="70px"))
            elif options is not None:
                widget = w.Dropdown(options=list(options), value=value, description=key,
                                    style={"description_width": "initial"}, layout=w.Layout(width="150px"))
            else:
                widget = w.Text(value=format_value(value), description=key, continuous_update=False,
                                style={"description_width": "initial"}, layout=w.Layout(width="150px"))
            widget.add_class(f"dnnbench-param-{key}")
            self.panel.observe_widget(widget, lambda _: self.panel.edited())
            self.params[key] = widget
        self.param_box.children = tuple(self.params.values())

    def _kind_changed(self, change: dict[str, Any]) -> None:
        kind = change["new"]
        with self.panel.quiet():
            self._build_params({"kind": kind, **NEW_LAYER.get(kind, {})})
        self.panel.edited()

    def data(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind.value}
        if self.name.value.strip():
            out["name"] = self.name.value.strip()
        inputs = parse_inputs(self.inputs.value)
        if inputs is not None:
            out["inputs"] = inputs
        for key, widget in self.params.items():
            value = widget.value if not isinstance(widget, w.Text) else parse_text(widget.value)
            if value is not None:
                out[key] = value
        return out

    def show_error(self, field: str | None, message: str | None) -> None:
        self.error.value = error_html(message)
        for key, widget in (*self.params.items(), ("inputs", self.inputs), ("name", self.name)):
            if key == field:
                widget.add_class("dnnbench-invalid")
            else:
                widget.remove_class("dnnbench-invalid")


class NetworkPanel(Panel):
    """Preset, spec file and layer editor for the network; emits ``network=`` and ``dataset=``."""

    def __init__(self, network: Network, dataset_name: str, emit: Emit | None = None) -> None:
        super().__init__(emit)
        self.network = network  # the last valid network
        names = list(presets.names("networks"))
        self.preset = w.Dropdown(options=names + ["(edited)"],
                                 value=network.name if network.name in names else "(edited)",
                                 layout=w.Layout(width="200px"))
        self.preset.add_class("dnnbench-network-preset")
        self.dataset = w.Dropdown(options=list(presets.names("datasets")), value=dataset_name,
                                  layout=w.Layout(width="200px"))
        self.dataset.add_class("dnnbench-dataset")
        self.path = w.Text(placeholder="net.json, .yaml, .onnx or pkg.module:factory", continuous_update=False,
                           layout=w.Layout(width="230px"))
        self.path.add_class("dnnbench-network-source")
        self.load_button = w.Button(description="Load", tooltip="load the spec file, ONNX file or PyTorch module",
                                    layout=w.Layout(width="90px"))
        self.load_button.add_class("dnnbench-network-load")
        self.upload = w.FileUpload(accept=UPLOAD_ACCEPT, multiple=False, description="Upload",
                                   layout=w.Layout(width="90px"))
        self.upload.add_class("dnnbench-network-upload")
        self.source_error = w.HTML("")
        self.source_error.add_class("dnnbench-network-source-error")
        self.input_shape = w.Text(placeholder="C,H,W", continuous_update=False, layout=w.Layout(width="120px"))
        self.shape_field = Field("input shape", self.input_shape, "PyTorch (ONNX: optional)",
                                 css="dnnbench-input-shape", label_width="90px")
        self.net_name = w.Text(value=network.name, continuous_update=False, layout=w.Layout(width="200px"))
        self.net_name.add_class("dnnbench-network-name")
        self.totals = w.HTML("")
        self.totals.add_class("dnnbench-network-totals")
        self.add_kind = w.Dropdown(options=[k for k in LAYER_TYPES if k != "input"], value="fc",
                                   layout=w.Layout(width="110px"))
        self.add_kind.add_class("dnnbench-add-kind")
        self.add_button = w.Button(description="Add layer", icon="plus", layout=w.Layout(width="110px"))
        self.add_button.add_class("dnnbench-add-layer")
        self.rows: list[LayerRow] = []
        self.rows_box = w.VBox()
        self.name_field = Field("name", self.net_name, label_width="90px")
        self.children = (
            Field("preset", self.preset, label_width="90px").box,
            w.VBox([w.HBox([self.path, self.load_button, self.upload]), self.source_error]),
            self.shape_field.box,
            self.name_field.box,
            Field("data set", self.dataset, label_width="90px").box,
            self.error,
            self.totals,
            self.rows_box,
            w.HBox([self.add_kind, self.add_button]),
        )
        self.observe_widget(self.preset, self._preset_changed)
        self.observe_widget(self.dataset, self._dataset_changed)
        self.observe_widget(self.net_name, lambda _: self.edited())
        self.observe_widget(self.upload, self._uploaded)
        self.on_click(self.load_button, self._load_file)
        self.on_click(self.add_button, self._add)
        self.set_network(network)

    # -- programmatic ------------------------------------------------------------------------------
    def set_network(self, network: Network, dataset_name: str | None = None) -> None:
        """Show ``network`` (quietly: no emit) and make it the last valid one."""
        for row in self.rows:
            self._forget(row)
        with self.quiet():
            self.rows = [LayerRow(self, layer.model_dump(mode="json", exclude_defaults=False))
                         for layer in network.layers]
            self.net_name.value = network.name
            self.preset.value = network.name if network.name in self.preset.options else "(edited)"
            if dataset_name is not None:
                self.dataset.value = dataset_name
        self._relayout()
        self._accepted(network)

    def _forget(self, row: LayerRow) -> None:
        self.forget([row.kind, row.name, row.inputs, row.up, row.down, row.remove, *row.params.values()])

    def _relayout(self) -> None:
        for i, row in enumerate(self.rows):
            row.index.value = str(i)
            last = i == len(self.rows) - 1
            if i > 0:
                row.up.disabled = i == 1
                row.down.disabled = last
        self.rows_box.children = tuple(r.box for r in self.rows)

    def _accepted(self, network: Network) -> None:
        self.network = network
        for row, counts in zip(self.rows, network.layer_counts, strict=True):
            shape = "×".join(str(s) for s in counts.output_shape)
            info = (f"<span style='color:#555;font-size:12px'>out {shape} · {fmt.count(counts.weights)} "
                    f"weights · {fmt.count(counts.macs_forward)} MACs fwd</span>")
            if row.info.value != info:  # a deep network: send only the rows that changed
                row.info.value = info
            if row.error.value:
                row.show_error(None, None)
        t = sum(c.weights for c in network.layer_counts)
        macs = sum(c.macs_forward + c.macs_backprop + c.macs_weight_grad for c in network.layer_counts)
        self.totals.value = (f"<b>{len(network.layers)} layers · {fmt.count(t)} weights · {fmt.count(macs)} MACs "
                             f"per training sample</b> (FLOPs = 2 × MACs)")
        self.error.value = ""
        self.name_field.show(None)

    # -- events -----------------------------------------------------------------------------------
    def data(self) -> dict[str, Any]:
        base = self.network.to_dict()
        base["name"] = self.net_name.value.strip()
        base["layers"] = [row.data() for row in self.rows]
        return base

    def edited(self) -> None:
        """Rebuild the network from every row; show an error where it points, or emit the new one."""
        try:
            network = Network.build(self.data())
        except SpecError as err:
            self._show(err)
            return
        self._accepted(network)
        with self.quiet():
            self.preset.value = "(edited)" if network != self._preset_or_none(network.name) else network.name
        self.emit(network=network)

    @staticmethod
    def _preset_or_none(name: str) -> Network | None:
        return presets.network(name) if name in presets.names("networks") else None

    def _show(self, err: SpecError) -> None:
        for row in self.rows:
            row.show_error(None, None)
            row.info.value = "<span style='color:#999;font-size:12px'>(last valid network in use)</span>"
        m = _LAYER_FIELD.match(err.field)
        message = f"{err} — the last valid network stays in use."
        if m and int(m.group(1)) < len(self.rows):
            self.rows[int(m.group(1))].show_error(m.group(2), message)
            self.error.value = error_html(message)
        elif err.field == "name":
            self.name_field.show(message)
        else:
            self.error.value = error_html(message)

    def _preset_changed(self, change: dict[str, Any]) -> None:
        if change["new"] == "(edited)":
            return
        net = presets.network(change["new"])
        ds = presets.default_dataset_for(net)
        self.set_network(net, ds.name if ds.name in self.dataset.options else None)
        self.emit(network=net, dataset=presets.dataset(self.dataset.value))

    def _dataset_changed(self, change: dict[str, Any]) -> None:
        self.emit(dataset=presets.dataset(change["new"]))

    def load_source(self, source: str, input_shape: str | None = None) -> bool:
        """Load a preset, spec file, ONNX file or ``package.module:factory`` (the Load button).

        ``input_shape`` (text, e.g. ``3,224,224``) replaces the input-shape field when given. On failure
        the message goes under the source (or input-shape) field, the last valid network stays in use
        and False is returned.
        """
        if input_shape is not None:
            with self.quiet():
                self.input_shape.value = input_shape
        self.path.value = source
        self._clear_source_errors()
        try:
            net = network_from_source(source, parse_shape(self.input_shape.value))
        except SpecError as err:
            self._source_failed(err)
            return False
        self._loaded(net)
        return True

    def load_upload(self, name: str, content: bytes) -> bool:
        """Load an uploaded spec (JSON/YAML) or ONNX file; like :meth:`load_source` otherwise."""
        self._clear_source_errors()
        try:
            net = network_from_upload(name, content, parse_shape(self.input_shape.value))
        except SpecError as err:
            self._source_failed(err, f"{name}: ")
            return False
        self._loaded(net)
        return True

    def _clear_source_errors(self) -> None:
        self.source_error.value = ""
        self.shape_field.show(None)

    def _source_failed(self, err: SpecError, prefix: str = "") -> None:
        message = f"{prefix}{err} — the last valid network stays in use."
        if err.field == SHAPE_FIELD:
            self.shape_field.show(message)
        else:
            self.source_error.value = error_html(message)

    def _loaded(self, net: Network) -> None:
        self.set_network(net)
        self.emit(network=net)

    def _load_file(self) -> None:
        self.load_source(self.path.value)

    def _uploaded(self, change: dict[str, Any]) -> None:
        files = change["new"]
        if not files:
            return
        item = files[0]
        self.load_upload(str(item.get("name", "upload")), bytes(item["content"]))
        with self.quiet():
            self.upload.value = ()  # the same file uploaded again is a new change

    def _add(self) -> None:
        kind = self.add_kind.value
        self.rows.append(LayerRow(self, {"kind": kind, **NEW_LAYER.get(kind, {})}))
        self._relayout()
        self.edited()

    def move(self, row: LayerRow, step: int) -> None:
        i = self.rows.index(row)
        j = i + step
        if j < 1 or j >= len(self.rows):
            return
        self.rows[i], self.rows[j] = self.rows[j], self.rows[i]
        self._relayout()
        self.edited()

    def delete(self, row: LayerRow) -> None:
        i = self.rows.index(row)
        if i == 0:
            return
        self._forget(row)
        del self.rows[i]
        row.box.close()
        self._relayout()
        self.edited()
