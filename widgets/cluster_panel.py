"""The cluster panel: worker and PS machine types, their NICs (upload and download), the machine budget.

Each machine type has an "Advanced" part for the model's framework and copy costs (docs/model.md §4:
``layer_overhead_s``, ``copy_time_s_per_byte``) and the steps' jitter a synchronous round waits for
(§6: ``step_time_cv``), zero in the presets, set by ``dnnbench calibrate``, and
the panel's "Shared host" section sets ``Cluster.shared_host`` (every machine a process on one computer;
emulation only). The PS editor shows only the parts of a machine the PS reads.

Fields are shown in datasheet units (GMAC/s, ns, Gbit/s, µs, MiB, GiB) and converted to the spec's SI
fields with :mod:`dnnbench.units` only. Every edit rebuilds the whole :class:`~dnnbench.specs.Cluster`
from the fields; an invalid value is shown next to its field and the last valid cluster stays in use.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import ipywidgets as w

from dnnbench import presets, units
from dnnbench.errors import SpecError
from dnnbench.specs import PRECISIONS, Cluster, Machine, Nic, Node, SharedHost

from .base import Emit, Field, Panel, control, error_html, layout
from .confine import confine


@dataclass(frozen=True)
class Quantity:
    """One spec field shown in a display unit: ``to_si(shown)`` and ``from_si(stored)``."""

    path: str  # dotted, relative to the machine or NIC
    label: str
    unit: str = ""
    to_si: Callable[[float], Any] = float
    from_si: Callable[[Any], float] = float
    integer: bool = False
    advanced: bool = False  # shown in the machine's collapsed "Advanced" part
    optional: bool = False  # None in the spec: shown as 0, and 0 means None


def _tidy(x: Any) -> Any:
    """Drop binary floating-point noise from a unit conversion (20 µs -> 2e-05 s, not 1.9999999999999998e-05)."""
    return float(f"{x:.12g}") if isinstance(x, float) else x


def _per_giga(x: float) -> float:
    return x / units.GIGA


def _giga(x: float) -> float:
    return x * units.GIGA


MACHINE_FIELDS = (
    Quantity("cores", "cores", integer=True, to_si=int, from_si=int),
    Quantity("peak.macs_per_s_per_core", "peak per core", "GMAC/s", _giga, _per_giga),
    Quantity("peak.efficiency_conv", "efficiency conv", "of peak"),
    Quantity("peak.efficiency_fc", "efficiency FC", "of peak"),
    Quantity("mac_time_s.conv", "MAC time conv", "ns/MAC per core", _per_giga, _giga),
    Quantity("mac_time_s.fc", "MAC time FC", "ns/MAC per core", _per_giga, _giga),
    Quantity("elem_time_s", "element op time", "ns per core", _per_giga, _giga),
    Quantity("cache_speedup", "in-cache speed-up", "x"),
    Quantity("llc_bytes", "last-level cache", "MiB", units.mib_to_bytes, lambda b: b / units.MIB),
    Quantity("memory_bytes", "memory", "GiB", units.gib_to_bytes, lambda b: b / units.GIB),
    Quantity("thread_contention", "thread contention σ", ""),
    Quantity("layer_overhead_s", "layer overhead", "µs per layer pass", units.us_to_s, lambda s: s * units.MEGA,
             advanced=True),
    Quantity("copy_time_s_per_byte", "message copy time", "ns per byte", _per_giga, _giga, advanced=True),
    Quantity("step_time_cv", "step-time jitter", "CV of a mini-batch", advanced=True),
)


def _tera(x: float) -> Any:
    """TFLOP/s shown to FLOP/s stored; 0 means the device has no such mode (None)."""
    return None if not x else x * units.TERA


def _per_tera(x: Any) -> float:
    return 0.0 if x is None else x / units.TERA


#: An accelerator's parts (docs/model.md §11), shown when the machine's speed is given as an accelerator.
ACCELERATOR_FIELDS = (
    Quantity("accelerator.peak_flops_per_s.fp32", "peak fp32", "TFLOP/s", _tera, _per_tera),
    Quantity("accelerator.peak_flops_per_s.tf32", "peak tf32", "TFLOP/s (0: none)", _tera, _per_tera, optional=True),
    Quantity("accelerator.peak_flops_per_s.fp16", "peak fp16", "TFLOP/s (0: none)", _tera, _per_tera, optional=True),
    Quantity("accelerator.peak_flops_per_s.bf16", "peak bf16", "TFLOP/s (0: none)", _tera, _per_tera, optional=True),
    Quantity("accelerator.memory_bytes", "device memory", "GB", lambda x: int(round(x * units.GIGA)),
             _per_giga),
    Quantity("accelerator.memory_bytes_per_s", "memory bandwidth", "GB/s", _giga, _per_giga),
    Quantity("accelerator.efficiency_conv", "efficiency conv", "of peak"),
    Quantity("accelerator.efficiency_fc", "efficiency matmul", "of peak"),
    Quantity("accelerator.half_efficiency_macs", "half efficiency at", "GMAC per call", _giga, _per_giga,
             advanced=True),
    Quantity("accelerator.half_efficiency_channels", "half efficiency at width", "channels (0: any width)",
             advanced=True),
    Quantity("accelerator.reserved_bytes", "reserved memory", "GiB", units.gib_to_bytes, lambda b: b / units.GIB,
             advanced=True),
    *(Quantity(f"accelerator.efficiency_by_precision.{p}.{kind}", f"{p} efficiency {label}", "of peak (0: as above)",
               advanced=True, optional=True)
      for p in PRECISIONS for kind, label in (("conv", "conv"), ("fc", "matmul"))),
)
#: Where one precision's own efficiency curve lies in a machine's data.
PRECISION_CURVES = "accelerator.efficiency_by_precision."
#: The parts of a machine the model reads only for workers (docs/model.md §2): the PS editor leaves them out.
WORKER_ONLY = frozenset({"peak.efficiency_fc", "mac_time_s.fc", "cache_speedup", "llc_bytes", "layer_overhead_s",
                         "step_time_cv"})
PS_FIELDS = tuple(q for q in MACHINE_FIELDS if q.path not in WORKER_ONLY)
WORKER_FIELDS = MACHINE_FIELDS + ACCELERATOR_FIELDS
#: The "Advanced" part's title in each machine editor.
ADVANCED_TITLE = "Advanced: framework overhead, message copies, step jitter"

NIC_FIELDS = (
    Quantity("upload_bits_per_s", "upload", "Gbit/s", units.gbit_per_s_to_bits_per_s,
             units.bits_per_s_to_gbit_per_s),
    Quantity("download_bits_per_s", "download", "Gbit/s", units.gbit_per_s_to_bits_per_s,
             units.bits_per_s_to_gbit_per_s),
    Quantity("latency_s", "latency per message", "µs", units.us_to_s, lambda s: s * units.MEGA),
    Quantity("goodput_factor", "goodput", "payload/wire"),
)

RATE_MODES = {"peak rate": "peak", "MAC times": "mac_time_s", "accelerator": "accelerator"}
#: The CPU rate fields an accelerator machine does not read.
CPU_RATE = frozenset({"peak", "mac_time_s"})


def _get(data: dict[str, Any], path: str) -> Any:
    for key in path.split("."):
        if not isinstance(data, dict) or key not in data or data[key] is None:
            return None
        data = data[key]
    return data


def _set(data: dict[str, Any], path: str, value: Any) -> None:
    keys = path.split(".")
    for key in keys[:-1]:
        if not isinstance(data.get(key), dict):
            data[key] = {}
        data = data[key]
    data[keys[-1]] = value


class _Editor:
    """The fields of one machine type or one NIC, under ``prefix`` (worker, ps, worker_nic, ps_nic)."""

    def __init__(self, panel: ClusterPanel, prefix: str, quantities: tuple[Quantity, ...]) -> None:
        self.prefix = prefix
        self.quantities = quantities
        self.machine = quantities in (MACHINE_FIELDS, PS_FIELDS, WORKER_FIELDS)
        self.fields: dict[str, Field] = {}
        for q in quantities:
            # The spec's own description of the field, as the tooltip (one text for docs, schema and UI).
            widget = control(w.IntText if q.integer else w.FloatText, width="110px",
                             tooltip=(Machine if self.machine else Nic).field_description(q.path),
                             css=f"dnnbench-{prefix}-{q.path.replace('.', '-')}")
            self.fields[q.path] = Field(q.label, widget, q.unit)
            panel.observe_widget(widget, lambda _: panel.edited())
        self.rate: w.ToggleButtons | None = None
        self.duplex: w.Dropdown | None = None
        extra: list[w.Widget] = []
        if self.machine:
            modes = [m for m in RATE_MODES if m != "accelerator" or quantities is WORKER_FIELDS]
            self.rate = control(w.ToggleButtons, options=modes, style={"button_width": "90px"},
                                css=f"dnnbench-{prefix}-rate")
            panel.observe_widget(self.rate, lambda _: self._rate_changed(panel))
            extra.append(Field("speed given as", self.rate).box)
        else:
            self.duplex = control(w.Dropdown, options=["full", "half"], width="110px")
            panel.observe_widget(self.duplex, lambda _: panel.edited())
        body = extra + [self.fields[q.path].box for q in quantities if not q.advanced]
        if self.duplex is not None:
            body.append(Field("duplex", self.duplex, "(half: shared medium)").box)
        advanced = [self.fields[q.path].box for q in quantities if q.advanced]
        self.advanced: w.Accordion | None = None
        if advanced:
            self.advanced = control(w.Accordion, children=[w.VBox(advanced, layout=layout())],
                                    titles=(ADVANCED_TITLE,), selected_index=None, css=f"dnnbench-{prefix}-advanced")
            body.append(self.advanced)
        self.box = w.VBox(body)  # its own layout: the PS editors are hidden and shown
        self._last: dict[str, Any] = {}

    def show(self, data: dict[str, Any]) -> None:
        self._last = data
        for q in self.quantities:
            value = _get(data, q.path)
            if value is not None:
                self.fields[q.path].widget.value = _tidy(q.from_si(value))
            elif q.optional:
                self.fields[q.path].widget.value = 0.0
            self.fields[q.path].show(None)
        if self.rate is not None:
            self.rate.value = ("accelerator" if data.get("accelerator") and "accelerator" in self.rate.options
                               else "peak rate" if data.get("peak") else "MAC times")
            self._visible()
        if self.duplex is not None:
            self.duplex.value = data.get("duplex", "full")

    def _visible(self) -> None:
        mode = RATE_MODES[self.rate.value] if self.rate is not None else ""
        for q in self.quantities:
            head = q.path.split(".")[0]
            hidden = head in RATE_MODES.values() and head != mode
            self.fields[q.path].visible = not hidden

    def _rate_changed(self, panel: ClusterPanel) -> None:
        # Switching modes: fill the other mode's fields from the last valid machine (the spec's own
        # Machine.mac_time / peak values), so the prediction does not jump.
        machine = getattr(panel.cluster, self.prefix)
        mode = RATE_MODES[self.rate.value] if self.rate is not None else ""
        with panel.quiet():
            if mode == "mac_time_s" and machine.has_cpu_rate:
                for kind in ("conv", "fc"):
                    if f"mac_time_s.{kind}" in self.fields:
                        self.fields[f"mac_time_s.{kind}"].widget.value = _giga(machine.mac_time(kind))
            if mode == "accelerator" and not self._last.get("accelerator"):
                device = presets.device("a100-80gb").to_dict()
                for q in self.quantities:
                    value = _get(device, q.path)
                    if q.path.startswith("accelerator."):
                        self.fields[q.path].widget.value = (0.0 if value is None and q.optional
                                                            else _tidy(q.from_si(value)))
        self._visible()
        panel.edited()

    def data(self) -> dict[str, Any]:
        out: dict[str, Any] = {k: v for k, v in self._last.items() if k not in ("peak", "mac_time_s", "accelerator")}
        mode = RATE_MODES[self.rate.value] if self.rate is not None else None
        if mode == "accelerator":
            # Switched to an accelerator: start from the last one shown (or the a100-80gb preset's).
            out["accelerator"] = dict(self._last.get("accelerator") or presets.device("a100-80gb").to_dict()[
                "accelerator"])
        for q in self.quantities:
            head = q.path.split(".")[0]
            if head in RATE_MODES.values() and head != mode:
                continue
            value = self.fields[q.path].widget.value
            if mode == "accelerator" and q.path.startswith("accelerator.peak_flops_per_s."):
                _set(out, q.path, _tera(value) if value else None)
                continue
            if q.path.startswith(PRECISION_CURVES):
                continue  # below, a precision's curve as one
            try:
                _set(out, q.path, _tidy(q.to_si(value)))
            except (TypeError, ValueError, OverflowError):
                _set(out, q.path, value)
        if mode == "accelerator":
            self._precision_curves(out["accelerator"])
        if mode == "peak" and "peak" not in out:
            out["peak"] = {}
        # A PS editor shows only what the PS reads; the FC rate it does not read follows the conv rate.
        if mode == "peak" and "peak.efficiency_fc" not in self.fields:
            out["peak"].setdefault("efficiency_fc", _get(self._last, "peak.efficiency_fc") or out["peak"].get(
                "efficiency_conv"))
        if mode == "mac_time_s" and "mac_time_s.fc" not in self.fields and isinstance(out.get("mac_time_s"), dict):
            out["mac_time_s"].setdefault("fc", _get(self._last, "mac_time_s.fc") or out["mac_time_s"].get("conv"))
        if self.duplex is not None:
            out["duplex"] = self.duplex.value
        return out

    def _precision_curves(self, acc: dict[str, Any]) -> None:
        """Each precision's own curve from its two fields: both 0 is none (the accelerator's); one 0 takes
        the accelerator's value for it; the call size at half efficiency is the curve's own as loaded,
        else the accelerator's; the width at half efficiency the curve's own as loaded, else none (the
        accelerator's)."""
        if f"{PRECISION_CURVES}fp32.conv" not in self.fields:
            return
        last = (self._last.get("accelerator") or {}).get("efficiency_by_precision") or {}
        curves: dict[str, Any] = {}
        for p in PRECISIONS:
            conv, fc = (self.fields[f"{PRECISION_CURVES}{p}.{k}"].widget.value for k in ("conv", "fc"))
            if not conv and not fc:
                curves[p] = None
                continue
            own = last.get(p) or {}
            half = own.get("half_efficiency_macs", acc.get("half_efficiency_macs"))
            curves[p] = {"conv": conv or acc.get("efficiency_conv"), "fc": fc or acc.get("efficiency_fc"),
                         "half_efficiency_macs": half, "half_efficiency_channels": own.get("half_efficiency_channels")}
        acc["efficiency_by_precision"] = curves

    def show_error(self, path: str, message: str) -> bool:
        for q in self.quantities:
            if q.path == path or q.path.startswith(path + ".") or path.startswith(q.path + "."):
                if self.fields[q.path].visible:
                    self.fields[q.path].show(message)
                    if q.advanced and self.advanced is not None:
                        self.advanced.selected_index = 0  # open the part that holds the message
                    return True
        return False

    def clear(self) -> None:
        for f in self.fields.values():
            f.show(None)


def _choices(cluster: Cluster, part: str) -> dict[str, dict[str, Any]]:
    """Machine types (``part`` "machine") or NICs ("nic") a class can take, by the name shown: the
    cluster's own worker and PS types, every preset cluster's worker, and the classes' own."""
    worker, ps = ("worker", "ps") if part == "machine" else ("worker_nic", "ps_nic")
    out = {f"this cluster's worker {'type' if part == 'machine' else 'NIC'}": getattr(cluster, worker).to_dict(),
           f"this cluster's PS {'type' if part == 'machine' else 'NIC'}": getattr(cluster, ps).to_dict()}
    for name in presets.names("clusters"):
        out[f"{name} worker{'' if part == 'machine' else ' NIC'}"] = getattr(presets.cluster(name), worker).to_dict()
    for c in cluster.classes:
        value = getattr(c, part).to_dict()
        if value not in out.values():
            out[f"class {c.name} (as loaded)"] = value
    return out


class _Classes:
    """Machine classes of a heterogeneous cluster: rows of name, count, machine type and NIC, added and
    removed with buttons. With classes the machine budget is their total (``Cluster.machines``)."""

    def __init__(self, panel: ClusterPanel) -> None:
        self.panel = panel
        self.rows: list[dict[str, Any]] = []
        self.list = w.VBox([], layout=layout())
        self.add_button = control(w.Button, description="Add class", icon="plus", width="110px",
                                  css="dnnbench-class-add")
        panel.on_click(self.add_button, self.add)
        self.box = w.VBox([
            control(w.HTML, value="<span style='font-size:12px;color:#555'>Machines of different types (a "
                    "heterogeneous cluster): the optimizer places replicas' partitions and PS shards on them "
                    "(docs/model.md §7); the summary shows the placement of the configuration and its cost against "
                    "the uniform cluster above. No classes: every machine is of the worker and PS types above.</span>",
                    layout=layout(max_width="420px")), self.list, self.add_button], layout=layout())
        self.machines: dict[str, dict[str, Any]] = {}
        self.nics: dict[str, dict[str, Any]] = {}

    def show(self, cluster: Cluster) -> None:
        self.machines, self.nics = _choices(cluster, "machine"), _choices(cluster, "nic")
        self._clear()
        for c in cluster.classes:
            self._row(c.name, c.count, self._name_of(self.machines, c.machine.to_dict()),
                      self._name_of(self.nics, c.nic.to_dict()))

    @staticmethod
    def _name_of(choices: dict[str, dict[str, Any]], value: dict[str, Any]) -> str:
        return next(k for k, v in choices.items() if v == value)

    def _clear(self) -> None:
        for row in self.rows:
            self.panel.forget([row["name"], row["count"], row["machine"], row["nic"], row["remove"]])
        self.rows = []
        self.list.children = ()

    def _row(self, name: str, count: int, machine: str, nic: str) -> None:
        row = {"name": control(w.Text, value=name, width="90px", continuous_update=False, css="dnnbench-class-name"),
               "count": control(w.IntText, value=count, width="70px", css="dnnbench-class-count"),
               "machine": control(w.Dropdown, options=list(self.machines), value=machine, width="190px",
                                  css="dnnbench-class-machine"),
               "nic": control(w.Dropdown, options=list(self.nics), value=nic, width="190px", css="dnnbench-class-nic"),
               "remove": control(w.Button, icon="trash", width="36px", tooltip="remove this class",
                                 css="dnnbench-class-remove"),
               "error": control(w.HTML, value="")}
        row["box"] = w.VBox([w.HBox([row["name"], row["count"], row["machine"], row["nic"], row["remove"]],
                                    layout=layout()), row["error"]], layout=layout())
        for key in ("name", "count", "machine", "nic"):
            self.panel.observe_widget(row[key], lambda _: self.panel.edited())
        self.panel.on_click(row["remove"], lambda r=row: self.remove(r))
        self.rows.append(row)
        self.list.children = tuple(r["box"] for r in self.rows)

    def add(self) -> None:
        taken = {r["name"].value for r in self.rows}
        name = next(f"class {i}" for i in range(1, len(taken) + 2) if f"class {i}" not in taken)
        with self.panel.quiet():
            self._row(name, 1, next(iter(self.machines)), next(iter(self.nics)))
        self.panel.edited()

    def remove(self, row: dict[str, Any]) -> None:
        self.panel.forget([row["name"], row["count"], row["machine"], row["nic"], row["remove"]])
        self.rows.remove(row)
        self.list.children = tuple(r["box"] for r in self.rows)
        self.panel.edited()

    def data(self) -> list[dict[str, Any]]:
        return [{"name": r["name"].value, "count": r["count"].value, "machine": self.machines[r["machine"].value],
                 "nic": self.nics[r["nic"].value]} for r in self.rows]

    def show_error(self, field: str, message: str) -> bool:
        """Put a ``classes[i]...`` error next to its row."""
        import re

        m = re.match(r"classes\[(\d+)\]", field)
        if m is None or int(m.group(1)) >= len(self.rows):
            return False
        self.rows[int(m.group(1))]["error"].value = error_html(message)
        return True

    def clear(self) -> None:
        for row in self.rows:
            row["error"].value = ""


class ClusterPanel(Panel):
    """Machine types, NICs, presets and the budget; emits ``cluster=`` and ``budget_machines=``."""

    def __init__(self, cluster: Cluster, budget_machines: int, emit: Emit | None = None) -> None:
        super().__init__(emit)
        self.cluster = cluster  # the last valid cluster
        self.budget_machines = budget_machines
        names = list(presets.names("clusters"))
        self.preset = control(w.Dropdown, options=names + ["(edited)"], width="200px", css="dnnbench-cluster-preset")
        self.path = control(w.Text, placeholder="path/to/cluster.json or .yaml", continuous_update=False,
                            width="230px", css="dnnbench-cluster-path")
        self.load_button = control(w.Button, description="Load file", width="90px", css="dnnbench-cluster-load")
        self.budget = control(w.IntText, width="110px", css="dnnbench-budget")
        self.budget_field = Field("machine budget", self.budget, "machines")
        self.worker = _Editor(self, "worker", WORKER_FIELDS)
        self.worker_nic = _Editor(self, "worker_nic", NIC_FIELDS)
        self.ps = _Editor(self, "ps", PS_FIELDS)
        self.ps_nic = _Editor(self, "ps_nic", NIC_FIELDS)
        self.ps_same = control(w.Checkbox, description="PS machines are the worker type", indent=False)
        self.ps_nic_same = control(w.Checkbox, description="PS NIC is the worker NIC", indent=False)
        self.host_cores = control(w.IntText, width="110px", tooltip=SharedHost.field_description("cores"),
                                  css="dnnbench-host-cores")
        self.host_cores_field = Field("shared host cores", self.host_cores, "0: separate machines")
        self.host_parts: dict[str, Field] = {}
        for part, label, unit in (("background_threads", "other programs", "runnable threads"),
                                  ("corun_slowdown", "co-run slowdown σ_h", ""),
                                  ("wakeup_delay_s", "wake-up delay d", "ms")):
            widget = control(w.FloatText, width="110px", tooltip=SharedHost.field_description(part),
                             css=f"dnnbench-host-{part.replace('_', '-')}")
            self.host_parts[part] = Field(label, widget, unit)
            self.observe_widget(widget, lambda _: self.edited())
        shared_host = w.VBox([
            control(w.HTML, value="<span style='font-size:12px;color:#555'>Emulation only: every machine a process "
                    "on one computer with this many cores (validation runs). Busy processes beyond it slow each other "
                    "down (docs/model.md §9). 0: separate machines, as in a real cluster.</span>",
                    layout=layout(max_width="420px")),
            self.host_cores_field.box, *(f.box for f in self.host_parts.values())], layout=layout())
        self.classes = _Classes(self)
        self.node_parts: dict[str, Field] = {}
        for part, label, unit, kind, options in (
                ("devices", "devices per node", "0: one machine per NIC", w.IntText, {}),
                ("nics", "NICs per node", "each the worker NIC", w.IntText, {}),
                ("link.kind", "intra-node link", "", w.Dropdown, {"options": ["nvlink", "nvswitch", "pcie"]}),
                ("link.bytes_per_s", "link bandwidth", "GB/s per device and direction", w.FloatText, {}),
                ("link.latency_s", "link latency", "µs", w.FloatText, {})):
            widget = control(kind, width="110px", tooltip=Node.field_description(part),
                             css="dnnbench-node-" + part.replace(".", "-").replace("_", "-"), **options)
            self.node_parts[part] = Field(label, widget, unit)
            self.observe_widget(widget, lambda _: (self._node_visible(), self.edited()))
        nodes = w.VBox([
            control(w.HTML, value="<span style='font-size:12px;color:#555'>Nodes of several devices (GPU servers): "
                    "the machine budget and W, R count devices; a replica inside one node exchanges on the intra-node "
                    "link and the node's devices share its NICs (docs/model.md §11).</span>",
                    layout=layout(max_width="420px")), *(f.box for f in self.node_parts.values())], layout=layout())
        sections = control(w.Accordion, children=[self.worker.box, self.worker_nic.box,
                                                  w.VBox([self.ps_same, self.ps.box], layout=layout()),
                                                  w.VBox([self.ps_nic_same, self.ps_nic.box], layout=layout()), nodes,
                                                  self.classes.box, shared_host],
                           titles=("Worker machine", "Worker NIC", "PS machine", "PS NIC", "Nodes and devices",
                                   "Machine classes", "Shared host (advanced)"), selected_index=0,
                           css="dnnbench-cluster-sections")
        self.description = control(w.HTML, value="", layout=layout(max_width="420px"))
        self.children = (
            Field("preset", self.preset, label_width="90px").box,
            w.HBox([self.path, self.load_button], layout=layout()),
            self.description,
            self.budget_field.box,
            self.error,
            sections,
        )
        self.observe_widget(self.preset, self._preset_changed)
        self.observe_widget(self.budget, self._budget_changed)
        self.observe_widget(self.ps_same, lambda _: self._same_changed())
        self.observe_widget(self.ps_nic_same, lambda _: self._same_changed())
        self.observe_widget(self.host_cores, lambda _: (self._host_visible(), self.edited()))
        self.on_click(self.load_button, self._load_file)
        self.set_cluster(cluster, budget_machines)

    def set_cluster(self, cluster: Cluster, budget_machines: int | None = None) -> None:
        """Show ``cluster`` (quietly) and make it the last valid one."""
        self.cluster = cluster
        if budget_machines is not None:
            self.budget_machines = budget_machines
        data = cluster.to_dict()
        with self.quiet():
            self.preset.value = cluster.name if cluster.name in self.preset.options else "(edited)"
            self.budget.value = self.budget_machines
            self.budget_field.show(None)
            self.ps_same.value = cluster.ps == cluster.worker
            self.ps_nic_same.value = cluster.ps_nic == cluster.worker_nic
            for editor in (self.worker, self.worker_nic, self.ps, self.ps_nic):
                editor.show(data[editor.prefix])
            self.classes.show(cluster)
            host = cluster.shared_host
            self.host_cores.value = host.cores if host else 0
            self.host_cores_field.show(None)
            for part, field in self.host_parts.items():
                value = getattr(host, part) if host else 0.0
                field.widget.value = _tidy(value * 1e3 if part == "wakeup_delay_s" else value)
                field.show(None)
            self._host_visible()
            node = cluster.node
            values = {"devices": node.devices if node else 0, "nics": node.nics if node else 1,
                      "link.kind": node.link.kind if node else "nvlink",
                      "link.bytes_per_s": _tidy(node.link.bytes_per_s / units.GIGA) if node else 300.0,
                      "link.latency_s": _tidy(node.link.latency_s * units.MEGA) if node else 2.0}
            for part, field in self.node_parts.items():
                field.widget.value = values[part]
                field.show(None)
            self._node_visible()
            self.description.value = (f"<span style='font-size:12px;color:#555'>{cluster.description}"
                                       f"{' (reconstructed estimates)' if cluster.reconstructed else ''}</span>")
        self._same_visible()
        self.error.value = ""

    def _same_visible(self) -> None:
        self.ps.box.layout.display = "none" if self.ps_same.value else None
        self.ps_nic.box.layout.display = "none" if self.ps_nic_same.value else None

    def _same_changed(self) -> None:
        self._same_visible()
        self.edited()

    def data(self) -> dict[str, Any]:
        out = self.cluster.to_dict()
        out["worker"] = self.worker.data()
        out["worker_nic"] = self.worker_nic.data()
        # A worker that computes on an accelerator cannot be the PS (it has no CPU rate): the PS editor's
        # machine serves then, whatever the checkbox says.
        same = self.ps_same.value and not out["worker"].get("accelerator")
        out["ps"] = dict(out["worker"]) if same else self.ps.data()
        out["ps_nic"] = dict(out["worker_nic"]) if self.ps_nic_same.value else self.ps_nic.data()
        out["machines"] = self.budget_machines
        out["classes"] = self.classes.data()
        if out["classes"]:  # a heterogeneous cluster: the budget is its machines
            out["machines"] = sum(c["count"] for c in out["classes"])
        parts = {k: f.widget.value for k, f in self.node_parts.items()}
        out["node"] = None if not parts["devices"] else {
            "devices": parts["devices"], "nics": parts["nics"],
            "link": {"kind": parts["link.kind"], "bytes_per_s": _tidy(_giga(parts["link.bytes_per_s"])),
                     "latency_s": _tidy(units.us_to_s(parts["link.latency_s"]))}}
        cores = self.host_cores.value
        out["shared_host"] = None if not cores else {  # 0: separate machines
            "cores": cores, **{part: _tidy(f.widget.value / 1e3 if part == "wakeup_delay_s" else f.widget.value)
                               for part, f in self.host_parts.items()}}
        return out

    def _node_visible(self) -> None:
        for part, field in self.node_parts.items():
            if part != "devices":
                field.visible = bool(self.node_parts["devices"].widget.value)

    def _host_visible(self) -> None:
        for field in self.host_parts.values():
            field.visible = bool(self.host_cores.value)

    def edited(self) -> None:
        for editor in (self.worker, self.worker_nic, self.ps, self.ps_nic):
            editor.clear()
        self.host_cores_field.show(None)
        for field in (*self.host_parts.values(), *self.node_parts.values()):
            field.show(None)
        self.classes.clear()
        try:
            cluster = Cluster.build(self.data())
        except SpecError as err:
            self._show(err)
            return
        self.cluster = cluster
        self.error.value = ""
        with self.quiet():
            if self.preset.value != "(edited)" and cluster != presets.cluster(self.preset.value):
                self.preset.value = "(edited)"
            if self.ps_same.value and cluster.ps != cluster.worker:
                self.ps_same.value = False
        self._same_visible()
        if cluster.classes and cluster.machines != self.budget_machines:  # the classes set the budget
            self.budget_machines = cluster.machines
            with self.quiet():
                self.budget.value = cluster.machines
            self.emit(cluster=cluster, budget_machines=cluster.machines)
            return
        self.emit(cluster=cluster)

    def _show(self, err: SpecError) -> None:
        message = f"{err} — the last valid cluster stays in use."
        if err.field.startswith("classes") and self.classes.show_error(err.field, message):
            self.error.value = ""
            return
        if err.field.startswith("node"):
            part = err.field.partition(".")[2]
            self.node_parts.get(part, self.node_parts["devices"]).show(message)
            self.error.value = ""
            return
        if err.field.startswith("shared_host"):
            part = err.field.partition(".")[2]
            (self.host_parts[part] if part in self.host_parts else self.host_cores_field).show(message)
            self.error.value = ""
            return
        head, _, rest = err.field.partition(".")
        editors = {"worker": self.worker, "worker_nic": self.worker_nic, "ps": self.ps, "ps_nic": self.ps_nic}
        editor = editors.get(head)
        if editor is not None and head in ("ps", "ps_nic") and (self.ps_same.value if head == "ps" else
                                                                self.ps_nic_same.value):
            editor = self.worker if head == "ps" else self.worker_nic
        if editor is not None and editor.show_error(rest, message):
            self.error.value = ""
            return
        self.error.value = error_html(message)

    def _budget_changed(self, change: dict[str, Any]) -> None:
        value = change["new"]
        try:
            cluster = self.cluster.evolve(machines=value)
        except SpecError as err:
            self.budget_field.show(f"{str(err).replace('machines:', 'machine budget:', 1)} "
                                   f"— the last valid budget stays in use.")
            return
        self.budget_field.show(None)
        self.budget_machines = int(value)
        self.cluster = cluster
        self.emit(cluster=cluster, budget_machines=int(value))

    def _preset_changed(self, change: dict[str, Any]) -> None:
        if change["new"] == "(edited)":
            return
        cluster = presets.cluster(change["new"])
        self.set_cluster(cluster, cluster.machines)
        self.emit(cluster=cluster, budget_machines=cluster.machines)

    def _load_file(self) -> None:
        text = self.path.value.strip()
        try:
            cluster = presets.cluster(text if text in presets.names("clusters") else confine(text, "cluster file"))
        except SpecError as err:
            self.error.value = error_html(str(err))
            return
        self.set_cluster(cluster, cluster.machines)
        self.emit(cluster=cluster, budget_machines=cluster.machines)
