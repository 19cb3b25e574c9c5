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

from .base import Emit, ErrorLine, Field, Panel, control, error_html, format_value, layout, parse_text
from .network_sources import (
    BATCH_AXIS_FIELD,
    LABELS_FIELD,
    SHAPE_FIELD,
    UPLOAD_ACCEPT,
    network_from_source,
    network_from_upload,
    parse_shape,
)

#: Parameters a freshly added (or re-kinded) layer starts with; the user edits them.
NEW_LAYER: dict[str, dict[str, Any]] = {
    "conv2d": {"out_channels": 64, "kernel": 3, "padding": 1, "activation": "relu"},
    "conv_transpose2d": {"out_channels": 64, "kernel": 2, "stride": 2},
    "conv3d": {"out_channels": 64, "kernel": 3, "padding": 1, "activation": "relu"},
    "pool3d": {"mode": "max", "window": 2},
    "pool": {"mode": "max", "window": 2},
    "fc": {"out_features": 1000, "activation": "relu"},
    "activation": {"function": "relu"},
    "dropout": {"p": 0.5},
    "lrn": {"size": 5},
    "batchnorm": {},
    "group_norm": {"groups": 1},
    "flatten": {},
    "softmax": {},
    "input": {"shape": [3, 224, 224]},
    "adaptive_pool": {"mode": "avg", "output_size": 1},
    "upsample": {"size": 2},
    "pad": {"padding": [1, 1, 1, 1]},
    "add": {},
    "mul": {},
    "scale": {},
    "slice": {"start": 0, "stop": 1},
    "sdpa": {},
    "matmul": {},
    "concat": {},
    "layer_norm": {},
    "embedding": {"vocabulary": 30000, "dim": 512},
    "position_embedding": {"rows": 512},
    "class_token": {},
    "select_token": {},
    "attention": {"heads": 8},
    "recurrent": {"mode": "lstm", "hidden": 256},
    "gather": {"axis": 0, "index": [0]},
    "scatter_add": {"axis": 0, "index": [0]},
}

_LAYER_FIELD = re.compile(r"^layers\[(\d+)\](?:\.(\w+))?")


def _param_fields(kind: str) -> dict[str, Any]:
    """The editable fields of a layer kind (all but ``kind``, ``name`` and ``inputs``, which have their
    own column, and ``shares`` where the kind holds no parameters) with their annotations."""
    cls = LAYER_TYPES[kind]
    fields = {k: f for k, f in cls.model_fields.items() if k not in ("kind", "name", "inputs", "shares")}
    return {**fields, "shares": cls.model_fields["shares"]} if cls.may_hold_parameters else fields


def parse_inputs(text: str) -> list[str] | None:
    """The inputs column: layer names separated by commas; empty: the layer before (None)."""
    names = [part.strip() for part in text.split(",")]
    return [n for n in names if n] or None


def _literal_options(annotation: Any) -> tuple[Any, ...] | None:
    if typing.get_origin(annotation) is typing.Literal:
        return typing.get_args(annotation)
    return None


#: Layers the editor shows at a time: a deep network is edited a page at a time, so that showing it sends
#: a bounded number of widget models to the browser (docs/workbench.md, "The network panel").
PAGE_LAYERS = 16


class LayerRow(ErrorLine):
    """The widgets of one layer (layer ``position`` of the network); ``data()`` is the layer's spec data
    as the user has typed it."""

    def __init__(self, panel: NetworkPanel, layer: dict[str, Any], position: int) -> None:
        self.panel = panel
        self.position = position
        first = layer.get("kind") == "input"
        kinds = ["input"] if first else [k for k in LAYER_TYPES if k != "input"]
        self.index = control(w.Label, value=str(position), width="28px")
        self.kind = control(w.Dropdown, options=kinds, value=layer["kind"], width="105px", disabled=first,
                            css="dnnbench-layer-kind")
        self.name = control(w.Text, value=layer.get("name", ""), placeholder="name", continuous_update=False,
                            width="95px", css="dnnbench-layer-name")
        self.inputs = control(w.Text, value=", ".join(layer.get("inputs") or ()),
                              placeholder="inputs: the layer before", continuous_update=False, disabled=first,
                              width="170px",
                              tooltip="names of the layers this one takes, separated by commas",
                              css="dnnbench-layer-inputs")
        self.up = control(w.Button, icon="arrow-up", tooltip="move up", width="30px", disabled=first or position == 1)
        self.down = control(w.Button, icon="arrow-down", tooltip="move down", width="30px",
                            disabled=first or position == len(panel.layers) - 1)
        self.remove = control(w.Button, icon="trash", tooltip="remove this layer", width="30px", disabled=first,
                              css="dnnbench-layer-remove")
        self.info = control(w.HTML, value="", layout=layout(margin="0 0 0 32px"), css="dnnbench-layer-info")
        self._error: w.HTML | None = None
        self.params: dict[str, w.Widget] = {}
        self.param_box = w.HBox(layout=layout(flex_flow="row wrap", margin="0 0 0 32px"))
        self.head = w.HBox([self.index, self.kind, self.name, self.inputs, self.up, self.down, self.remove],
                           layout=layout())
        self.box = w.VBox([self.head, self.param_box, self.info],
                          layout=layout(border_bottom="1px solid #e0e0e0", padding="2px 0"))
        self._build_params(layer)
        panel.observe_widget(self.kind, self._kind_changed)
        panel.observe_widget(self.name, lambda _: panel.edited())
        panel.observe_widget(self.inputs, lambda _: panel.edited())
        panel.on_click(self.up, lambda: panel.move(self, -1))
        panel.on_click(self.down, lambda: panel.move(self, +1))
        panel.on_click(self.remove, lambda: panel.delete(self))

    def widgets(self) -> list[w.Widget]:
        """Every widget the row made (not the shared layouts and styles)."""
        made = [self.index, self.kind, self.name, self.inputs, self.up, self.down, self.remove, self.info,
                self.param_box, self.head, self.box, *self.params.values()]
        return made + ([self._error] if self._error is not None else [])

    def close(self) -> None:
        """Stop observing the row's widgets and close them (the browser drops their models)."""
        self.panel.forget(self.widgets())
        for widget in self.widgets():
            widget.close()

    def _build_params(self, layer: dict[str, Any]) -> None:
        old = list(self.params.values())
        self.panel.forget(old)
        self.params = {}
        for key, info in _param_fields(layer["kind"]).items():
            value = layer.get(key, None if info.is_required() else info.default)
            options = _literal_options(info.annotation)
            css = f"dnnbench-param-{key}"
            if info.annotation is bool:
                widget: w.Widget = control(w.Checkbox, value=bool(value), description=key, indent=False,
                                           width="70px", css=css)
            elif options is not None:
                widget = control(w.Dropdown, options=list(options), value=value, description=key,
                                 style={"description_width": "initial"}, width="150px", css=css)
            else:
                widget = control(w.Text, value=format_value(value), description=key, continuous_update=False,
                                 style={"description_width": "initial"}, width="150px", css=css)
            self.panel.observe_widget(widget, lambda _: self.panel.edited())
            self.params[key] = widget
        self.param_box.children = tuple(self.params.values())
        for widget in old:
            widget.close()

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
        self.show(message)
        for key, widget in (*self.params.items(), ("inputs", self.inputs), ("name", self.name)):
            if key == field:
                widget.add_class("dnnbench-invalid")
            elif "dnnbench-invalid" in widget._dom_classes:
                widget.remove_class("dnnbench-invalid")


class NetworkPanel(Panel):
    """Preset, spec file and layer editor for the network; emits ``network=`` and ``dataset=``."""

    def __init__(self, network: Network, dataset_name: str, emit: Emit | None = None) -> None:
        super().__init__(emit)
        self.network = network  # the last valid network
        self._valid = True  # the layers as typed are the last valid network's
        names = list(presets.names("networks"))
        self.preset = control(w.Dropdown, options=names + ["(edited)"],
                              value=network.name if network.name in names else "(edited)", width="200px",
                              css="dnnbench-network-preset")
        self.dataset = control(w.Dropdown, options=list(presets.names("datasets")), value=dataset_name,
                               width="200px", css="dnnbench-dataset")
        self.path = control(w.Text, placeholder="net.json, .yaml, .onnx or pkg.module:factory",
                            continuous_update=False, width="230px", css="dnnbench-network-source")
        self.load_button = control(w.Button, description="Load",
                                   tooltip="load the spec file, ONNX file or PyTorch module", width="90px",
                                   css="dnnbench-network-load")
        self.upload = control(w.FileUpload, accept=UPLOAD_ACCEPT, multiple=False, description="Upload",
                              width="90px", css="dnnbench-network-upload")
        self.source_error = control(w.HTML, value="", css="dnnbench-network-source-error")
        self.input_shape = control(w.Text, placeholder="C,H,W", continuous_update=False, width="120px",
                                   css="dnnbench-input-shape")
        self.shape_field = Field("input shape", self.input_shape, "PyTorch (ONNX: optional)", label_width="90px")
        self.labels = control(w.Text, placeholder="targets", continuous_update=False, width="120px",
                              css="dnnbench-labels")
        self.labels_field = Field("labels", self.labels, "PyTorch: the forward's labels parameter (optional)",
                                  label_width="90px")
        self.batch_axis = control(w.Dropdown, options=[("0: (N, …)", 0), ("1: (S, N, …)", 1)], value=0,
                                  width="120px", css="dnnbench-batch-axis")
        self.batch_axis_field = Field("batch axis", self.batch_axis, "PyTorch: the inputs' axis that holds the batch "
                                      "(1: a forward that takes sequences first)", label_width="90px")
        self.net_name = control(w.Text, value=network.name, continuous_update=False, width="200px",
                                css="dnnbench-network-name")
        self.totals = control(w.HTML, value="", css="dnnbench-network-totals")
        self.add_kind = control(w.Dropdown, options=[k for k in LAYER_TYPES if k != "input"], value="fc",
                                width="110px", css="dnnbench-add-kind")
        self.add_button = control(w.Button, description="Add layer", icon="plus", width="110px",
                                  css="dnnbench-add-layer")
        self.layers: list[dict[str, Any]] = []  # every layer's data as typed (the rows of the page shown win)
        self.rows: list[LayerRow] = []  # the rows of the page shown
        self.page = 0
        self.rows_box = w.VBox(layout=layout())
        self.previous_page = control(w.Button, icon="chevron-left", tooltip="the layers before", width="36px",
                                     css="dnnbench-layers-previous")
        self.next_page = control(w.Button, icon="chevron-right", tooltip="the layers after", width="36px",
                                 css="dnnbench-layers-next")
        self.page_label = control(w.HTML, value="", css="dnnbench-layers-page")
        self.pager = w.HBox([self.previous_page, self.page_label, self.next_page],
                            layout=w.Layout(align_items="center"))  # its own: hidden for one page
        self.name_field = Field("name", self.net_name, label_width="90px")
        self.children = (
            Field("preset", self.preset, label_width="90px").box,
            w.VBox([w.HBox([self.path, self.load_button, self.upload], layout=layout()), self.source_error],
                   layout=layout()),
            self.shape_field.box,
            self.labels_field.box,
            self.batch_axis_field.box,
            self.name_field.box,
            Field("data set", self.dataset, label_width="90px").box,
            self.error,
            self.totals,
            self.pager,
            self.rows_box,
            w.HBox([self.add_kind, self.add_button], layout=layout()),
        )
        self.observe_widget(self.preset, self._preset_changed)
        self.observe_widget(self.dataset, self._dataset_changed)
        self.observe_widget(self.net_name, lambda _: self.edited())
        self.observe_widget(self.upload, self._uploaded)
        self.on_click(self.load_button, self._load_file)
        self.on_click(self.add_button, self._add)
        self.on_click(self.previous_page, lambda: self.show_page(self.page - 1))
        self.on_click(self.next_page, lambda: self.show_page(self.page + 1))
        self.set_network(network)

    # -- programmatic ------------------------------------------------------------------------------
    def set_network(self, network: Network, dataset_name: str | None = None) -> None:
        """Show ``network`` (quietly: no emit) from its first page and make it the last valid one."""
        with self.quiet():
            self.layers = [layer.model_dump(mode="json", exclude_defaults=False) for layer in network.layers]
            self._build_page(0)
            self.net_name.value = network.name
            self.preset.value = network.name if network.name in self.preset.options else "(edited)"
            if dataset_name is not None:
                self.dataset.value = dataset_name
        self._accepted(network)

    # -- pages ------------------------------------------------------------------------------------
    @property
    def pages(self) -> int:
        return max(1, -(-len(self.layers) // PAGE_LAYERS))

    def show_page(self, page: int) -> None:
        """Show the layers of page ``page`` (clamped), keeping what the rows on screen hold."""
        page = min(max(page, 0), self.pages - 1)
        if page == self.page and self.rows:
            return
        self._sync()
        with self.quiet():
            self._build_page(page)
        self._annotate(self.network)

    def row(self, position: int) -> LayerRow:
        """The row of layer ``position``, turning to its page."""
        self.show_page(position // PAGE_LAYERS)
        return self.rows[position - self.page * PAGE_LAYERS]

    def _sync(self) -> None:
        for row in self.rows:
            self.layers[row.position] = row.data()

    def _build_page(self, page: int) -> None:
        old = self.rows
        self.page = min(max(page, 0), self.pages - 1)
        first = self.page * PAGE_LAYERS
        last = min(first + PAGE_LAYERS, len(self.layers))
        self.rows = [LayerRow(self, self.layers[i], i) for i in range(first, last)]
        self._relayout()
        for row in old:
            row.close()

    def _relayout(self) -> None:
        for row in self.rows:
            i = row.position
            row.index.value = str(i)
            if i > 0:
                row.up.disabled = i == 1
                row.down.disabled = i == len(self.layers) - 1
        self.rows_box.children = tuple(r.box for r in self.rows)
        first = self.page * PAGE_LAYERS
        self.page_label.value = (f"<span style='font-size:12px;color:#555'>layers {first}–"
                                 f"{first + len(self.rows) - 1} of {len(self.layers)}</span>")
        self.previous_page.disabled = self.page == 0
        self.next_page.disabled = self.page >= self.pages - 1
        self.pager.layout.display = None if self.pages > 1 else "none"

    def _annotate(self, network: Network) -> None:
        """Each row on the page: what the spec infers for its layer (the rows match ``network``), or that the
        last valid network is in use."""
        matches = self._valid and len(network.layers) == len(self.layers)
        for row in self.rows:
            if not matches:
                row.info.value = "<span style='color:#999;font-size:12px'>(last valid network in use)</span>"
                continue
            counts = network.layer_counts[row.position]
            shape = "×".join(str(s) for s in counts.output_shape)
            info = (f"<span style='color:#555;font-size:12px'>out {shape} · {fmt.count(counts.weights)} "
                    f"weights · {fmt.count(counts.macs_forward)} MACs fwd</span>")
            if row.info.value != info:  # send only the rows that changed
                row.info.value = info
            row.show_error(None, None)

    def _accepted(self, network: Network) -> None:
        self.network = network
        self._valid = True
        self._annotate(network)
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
        self._sync()
        base["layers"] = list(self.layers)
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
        self._valid = False
        m = _LAYER_FIELD.match(err.field)
        message = f"{err} — the last valid network stays in use."
        if m and int(m.group(1)) < len(self.layers):
            row = self.row(int(m.group(1)))  # the page that holds the layer the message names
            self._annotate(self.network)
            row.show_error(m.group(2), message)
            self.error.value = error_html(message)
            return
        self._annotate(self.network)
        if err.field == "name":
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

    def load_source(self, source: str, input_shape: str | None = None, labels: str | None = None,
                    batch_axis: int | None = None) -> bool:
        """Load a preset, spec file, ONNX file or ``package.module:factory`` (the Load button).

        ``input_shape`` (text, e.g. ``3,224,224``), ``labels`` (a PyTorch forward's labels parameter,
        e.g. ``targets``) and ``batch_axis`` (0, or 1 for a forward that takes sequences first) replace
        their fields when given. On failure the message goes under the source (or input-shape, labels or
        batch-axis) field, the last valid network stays in use and False is returned.
        """
        with self.quiet():
            if input_shape is not None:
                self.input_shape.value = input_shape
            if labels is not None:
                self.labels.value = labels
            if batch_axis is not None:
                self.batch_axis.value = batch_axis
        self.path.value = source
        self._clear_source_errors()
        try:
            net = network_from_source(source, parse_shape(self.input_shape.value), self.labels.value,
                                      self.batch_axis.value)
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
        self.labels_field.show(None)
        self.batch_axis_field.show(None)

    def _source_failed(self, err: SpecError, prefix: str = "") -> None:
        message = f"{prefix}{err} — the last valid network stays in use."
        if err.field == SHAPE_FIELD:
            self.shape_field.show(message)
        elif err.field == LABELS_FIELD:
            self.labels_field.show(message)
        elif err.field == BATCH_AXIS_FIELD:
            self.batch_axis_field.show(message)
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
        """Append a layer of the kind chosen and show the last page, where it is."""
        kind = self.add_kind.value
        self._sync()
        self.layers.append({"kind": kind, **NEW_LAYER.get(kind, {})})
        with self.quiet():
            self._build_page(self.pages - 1)
        self.edited()

    def move(self, row: LayerRow, step: int) -> None:
        """Swap the row's layer with the one ``step`` (±1) away; the input layer stays first."""
        i = row.position
        j = i + step
        if i < 1 or j < 1 or j >= len(self.layers):
            return
        self._sync()
        self.layers[i], self.layers[j] = self.layers[j], self.layers[i]
        if j // PAGE_LAYERS == self.page:  # on this page: swap the rows themselves
            a, b = i - self.page * PAGE_LAYERS, j - self.page * PAGE_LAYERS
            self.rows[a], self.rows[b] = self.rows[b], self.rows[a]
            self.rows[a].position, self.rows[b].position = i, j
            self._relayout()
        else:  # across pages: the page of the moved layer
            with self.quiet():
                self._build_page(j // PAGE_LAYERS)
        self.edited()

    def delete(self, row: LayerRow) -> None:
        """Remove the row's layer (never the input layer)."""
        if row.position == 0:
            return
        self._sync()
        del self.layers[row.position]
        with self.quiet():
            self._build_page(self.page)
        self.edited()
