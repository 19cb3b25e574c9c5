"""Cluster, machine, NIC and data-set specs (SI units, the unit in every field name)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from ..errors import SpecError
from .base import Spec, fail
from .shape import ErrorBand, ProfiledLayer, ProfiledStep, ShapeRate

LayerKindCost = Literal["conv", "fc"]

#: Arithmetic precisions a configuration may train in. fp16 and bf16 are mixed precision (16-bit
#: activations and matrix products, fp32 master weights); tf32 runs fp32 matrix products on tensor cores.
Precision = Literal["fp32", "tf32", "fp16", "bf16"]
PRECISIONS: tuple[str, ...] = ("fp32", "tf32", "fp16", "bf16")


class MacTimes(Spec):
    """Seconds per multiply-add per core, by layer kind, for data outside the last-level cache."""

    conv: float = Field(gt=0, lt=1, description="Seconds per multiply-add per core in convolution layers.")
    fc: float = Field(gt=0, lt=1, description="Seconds per multiply-add per core in fully connected layers.")


class PeakRate(Spec):
    """A datasheet peak rate and the fraction of it each layer kind reaches."""

    macs_per_s_per_core: float = Field(gt=0, description="Datasheet peak multiply-adds per second of one core.")
    efficiency_conv: float = Field(gt=0, le=1, description="Fraction of the peak convolution layers reach (0-1].")
    efficiency_fc: float = Field(gt=0, le=1, description="Fraction of the peak fully connected layers reach (0-1].")


class PeakFlops(Spec):
    """Dense datasheet peak FLOP/s of one accelerator by precision (a multiply-add is 2 FLOPs).
    None: the device has no such mode."""

    fp32: float = Field(gt=0, description="Peak fp32 FLOP/s (CUDA cores), dense.")
    tf32: float | None = Field(default=None, gt=0, description="Peak TF32 tensor-core FLOP/s, dense (None: none).")
    fp16: float | None = Field(default=None, gt=0, description="Peak fp16 tensor-core FLOP/s, dense (None: none).")
    bf16: float | None = Field(default=None, gt=0, description="Peak bf16 tensor-core FLOP/s, dense (None: none).")

    def of(self, precision: str) -> float | None:
        """Peak FLOP/s of the matrix products of ``precision`` (None: not supported)."""
        value = getattr(self, precision)
        return None if value is None else float(value)

    @property
    def supported(self) -> tuple[str, ...]:
        return tuple(p for p in PRECISIONS if getattr(self, p) is not None)


#: Channels per group at which a layer of a device reaches half its efficiency when no other value is
#: given (docs/model.md §11, reconstructed: chosen on one H200's measured training rows).
HALF_EFFICIENCY_CHANNELS = 64.0


class DeviceEfficiency(Spec):
    """How close one precision's layers come to its peak: the efficiency curve
    e(m, n) = e·m/(m + m_half)·n/(n + n_half)."""

    conv: float = Field(gt=0, le=1, description="Fraction of the precision's peak a large convolution reaches "
                                                "(0-1].")
    fc: float = Field(gt=0, le=1, description="Fraction of the precision's peak a large matrix product (fc, "
                                              "attention) reaches (0-1].")
    half_efficiency_macs: float = Field(ge=0, le=1e15, description="Multiply-adds of one kernel call at which it "
                                                                    "reaches half its efficiency.")
    half_efficiency_channels: float | None = Field(
        default=None, ge=0, le=1e6,
        description="Width (channels per group, an fc's neurons) of a phase's output matrix at which it reaches "
                    "half its efficiency: narrow products fill few of the device's tiles (0: every width alike; "
                    "None: the accelerator's).")


class PrecisionEfficiencies(Spec):
    """A device's efficiency curve per precision where it differs from the accelerator's own
    (``efficiency_conv``, ``efficiency_fc``, ``half_efficiency_macs``). None: the accelerator's."""

    fp32: DeviceEfficiency | None = Field(default=None, description="fp32 on the CUDA cores (None: the "
                                                                    "accelerator's efficiencies).")
    tf32: DeviceEfficiency | None = Field(default=None, description="TF32 tensor cores (None: the accelerator's "
                                                                    "efficiencies).")
    fp16: DeviceEfficiency | None = Field(default=None, description="fp16 mixed precision (None: the "
                                                                    "accelerator's efficiencies).")
    bf16: DeviceEfficiency | None = Field(default=None, description="bf16 mixed precision (None: the "
                                                                    "accelerator's efficiencies).")


class Accelerator(Spec):
    """One accelerator (a GPU) of a node: datasheet peaks, its memory, and how close layers come to the
    peak (docs/model.md §11). Time of a layer phase = max(MACs / (peak · efficiency), bytes / bandwidth) +
    the bytes of eager PyTorch's own passes / bandwidth + the machine's ``layer_overhead_s``; the
    efficiency falls for small calls (``half_efficiency_macs``) and narrow products
    (``half_efficiency_channels``)."""

    name: str = Field(default="", description="The device's name, for people.")
    source: str = Field(default="", description="Where its numbers come from (the datasheet).")
    peak_flops_per_s: PeakFlops = Field(description="Dense peak FLOP/s by precision.")
    memory_bytes: int = Field(gt=0, description="Device memory (HBM or GDDR), bytes.")
    memory_bytes_per_s: float = Field(gt=0, description="Device memory bandwidth, bytes per second.")
    efficiency_conv: float = Field(default=0.6, gt=0, le=1,
                                   description="Fraction of the peak a large convolution reaches (0-1].")
    efficiency_fc: float = Field(default=0.7, gt=0, le=1,
                                 description="Fraction of the peak a large matrix product (fc, attention) reaches.")
    half_efficiency_macs: float = Field(default=2e8, ge=0, le=1e15,
                                        description="Multiply-adds of one kernel call (a layer on a mini-batch) at "
                                                    "which it reaches half its efficiency: small calls run below "
                                                    "peak, e(m) = e·m/(m + m_half).")
    half_efficiency_channels: float = Field(
        default=HALF_EFFICIENCY_CHANNELS, ge=0, le=1e6,
        description="Width (channels per group, an fc's neurons) of a phase's output matrix at which it reaches "
                    "half its efficiency: narrow products fill few of the device's tiles, e·n/(n + n_half) "
                    "(0: every width alike).")
    reserved_bytes: int = Field(default=2**30, ge=0,
                                description="Device memory training cannot use: the runtime's context and the "
                                            "libraries' workspaces, bytes.")
    efficiency_by_precision: PrecisionEfficiencies = Field(
        default_factory=PrecisionEfficiencies,
        description="Efficiency curves of single precisions where they differ from the three fields above "
                    "(tensor-core modes often reach a different fraction of their peak than fp32).")

    @model_validator(mode="after")
    def _efficiencies_of_modes(self) -> Accelerator:
        for p in PRECISIONS:
            own = getattr(self.efficiency_by_precision, p)
            if own is not None and self.peak_flops_per_s.of(p) is None:
                fail(f"efficiency_by_precision.{p}", own.to_dict(),
                     f"is for a mode the device lacks; expected one of {', '.join(self.peak_flops_per_s.supported)}")
        return self

    def efficiency(self, precision: str) -> DeviceEfficiency:
        """The efficiency curve of ``precision``'s layers (its own, or the accelerator's)."""
        own: DeviceEfficiency | None = getattr(self.efficiency_by_precision, precision, None)
        if own is not None:
            if own.half_efficiency_channels is None:
                return own.evolve(half_efficiency_channels=self.half_efficiency_channels)
            return own
        return DeviceEfficiency(conv=self.efficiency_conv, fc=self.efficiency_fc,
                                half_efficiency_macs=self.half_efficiency_macs,
                                half_efficiency_channels=self.half_efficiency_channels)

    def peak_macs_per_s(self, precision: str) -> float:
        """Peak multiply-adds per second of ``precision``'s matrix products."""
        flops = self.peak_flops_per_s.of(precision)
        if flops is None:
            raise SpecError("precision", precision, f"is not supported by {self.name or 'the accelerator'}; "
                                                    f"expected one of {', '.join(self.peak_flops_per_s.supported)}")
        return flops / 2.0


class Machine(Spec):
    """One machine type. Give per-core MAC times (``mac_time_s``) or a peak rate with efficiencies; a
    machine with an ``accelerator`` computes its layers there and needs neither."""

    name: str = Field(default="", description="The machine type's name, for people.")
    source: str = Field(default="", description="Where its numbers come from (a datasheet or a calibration).")
    cores: int = Field(gt=0, le=4096, description="CPU cores of one machine.")
    mac_time_s: MacTimes | None = Field(default=None, description="Measured seconds per multiply-add per core by "
                                                                  "layer kind (give this or peak).")
    peak: PeakRate | None = Field(default=None, description="A datasheet peak rate with efficiencies (give this "
                                                            "or mac_time_s).")
    elem_time_s: float = Field(gt=0, lt=1, description="Seconds per memory-bound element operation per core.")
    cache_speedup: float = Field(default=1.0, ge=1.0, le=100.0,
                                 description="How much faster multiply-adds run when a layer's weights fit in the "
                                             "last-level cache (the MAC time is divided by it).")
    llc_bytes: int = Field(gt=0, description="Last-level cache of the whole machine, in bytes.")
    memory_bytes: int = Field(gt=0, description="Main memory of one machine, in bytes.")
    thread_contention: float = Field(default=0.0, ge=0.0, le=1.0,
                                     description="σ in the thread efficiency η(T) = 1/(1 + σ(T-1)).")
    layer_overhead_s: float = Field(default=0.0, ge=0.0, lt=1.0,
                                    description="Fixed cost of running one layer once (framework dispatch, memory "
                                                "allocation) per forward or backward pass of a mini-batch, seconds.")
    copy_time_s_per_byte: float = Field(default=0.0, ge=0.0, lt=1e-3,
                                        description="CPU seconds per core to copy one byte of a message in or out "
                                                    "(serialisation, the TCP stack).")
    step_time_cv: float = Field(default=0.0, ge=0.0, le=10.0,
                                description="Coefficient of variation of one local mini-batch's compute time: a "
                                            "synchronous round waits for its slowest replica. 0: deterministic.")
    accelerator: Accelerator | None = Field(
        default=None, description="The accelerator this machine computes on: the model's machine is then one "
                                  "device (a rank), and cores, element time and copies describe its share of "
                                  "the host. None: a CPU machine.")
    shape_rate: ShapeRate | None = Field(
        default=None, description="Compute from each layer's shape (docs/model.md §12), fitted by dnnbench "
                                  "calibrate; replaces mac_time_s, cache_speedup and elem_time_s for a network's "
                                  "layers on a CPU machine. None: the per-kind MAC times (§4).")
    compute_error: ErrorBand | None = Field(
        default=None, description="Measured / predicted - 1 of the compute model on this machine (its p10 and "
                                  "p90): every prediction then carries a p10-p90 interval. None: no interval.")
    profiled_layers: tuple[ProfiledLayer, ...] = Field(
        default=(), description="Layers timed on this machine (dnnbench calibrate --network), used instead of "
                                "the shape model for layers of the same signature.")
    profiled_steps: tuple[ProfiledStep, ...] = Field(
        default=(), description="Networks whose whole training steps were timed on this machine (dnnbench "
                                "calibrate --network): their step's own fixed time, used instead of the shape "
                                "rate's step_time_s for the same network.")

    @model_validator(mode="after")
    def _one_rate(self) -> Machine:
        if self.mac_time_s is not None and self.peak is not None:
            fail("mac_time_s", self.mac_time_s, "give exactly one of 'mac_time_s' or 'peak'")
        if self.mac_time_s is None and self.peak is None and self.accelerator is None and self.shape_rate is None:
            fail("mac_time_s", None, "give exactly one of 'mac_time_s' or 'peak' (or an 'accelerator' or a "
                                     "'shape_rate')")
        return self

    @property
    def has_cpu_rate(self) -> bool:
        return self.mac_time_s is not None or self.peak is not None

    def mac_time(self, kind: LayerKindCost) -> float:
        """Seconds per MAC per core for ``kind`` ('conv' or 'fc'), out of cache."""
        if self.mac_time_s is not None:
            return float(getattr(self.mac_time_s, kind))
        peak = self.peak
        if peak is None:
            raise SpecError("mac_time_s", None, f"is not given: machine {self.name or '(unnamed)'} has no CPU rate "
                                                "(mac_time_s or peak)")
        eff = peak.efficiency_conv if kind == "conv" else peak.efficiency_fc
        return 1.0 / (peak.macs_per_s_per_core * eff)


class Nic(Spec):
    """A network interface. Upload and download may differ (edge links); latency is per message."""

    upload_bits_per_s: float = Field(gt=0, description="Sending bandwidth, bits per second (on the wire).")
    download_bits_per_s: float = Field(gt=0, description="Receiving bandwidth, bits per second (on the wire).")
    latency_s: float = Field(ge=0, lt=10, description="One-way latency per message, seconds.")
    goodput_factor: float = Field(default=0.956, gt=0, le=1,
                                  description="Payload bits per wire bit (TCP/IP headers at MTU 1500: 0.956).")
    duplex: Literal["full", "half"] = Field(default="full", description="full: both directions at once; half: a "
                                                                        "shared medium (Wi-Fi) sums both directions.")
    exchange_overhead_s: float = Field(default=0.0, ge=0, lt=10,
                                       description="Fixed cost of one model-parallel exchange round (waking the "
                                                   "peer, synchronising) on top of the latency, seconds.")


class IntraLink(Spec):
    """The link between the devices of one node."""

    kind: Literal["nvlink", "nvswitch", "pcie"] = Field(description="nvlink, nvswitch or pcie.")
    bytes_per_s: float = Field(gt=0, description="Bandwidth per device in each direction, bytes per second.")
    latency_s: float = Field(default=2e-6, ge=0, lt=1, description="Latency of one message, seconds.")


class Node(Spec):
    """A node of ``devices`` accelerators on one intra-node link, with ``nics`` NICs (each the cluster's
    ``worker_nic``) shared by its devices."""

    devices: int = Field(gt=0, le=1024, description="G: devices (model machines) per node.")
    link: IntraLink = Field(description="The intra-node link (NVLink, NVSwitch or PCIe).")
    nics: int = Field(default=1, gt=0, le=1024, description="NICs per node, each as worker_nic.")


class MachineClass(Spec):
    """``count`` machines of one type with one NIC: a part of a heterogeneous cluster."""

    name: str = Field(min_length=1, description="The class's name, for people.")
    count: int = Field(gt=0, le=10_000_000, description="Machines of this class.")
    machine: Machine = Field(description="The machine type of the class.")
    nic: Nic = Field(description="The network interface of each machine of the class.")


class SharedHost(Spec):
    """Every machine of the cluster is a process on one host: the effects of sharing its cores
    (docs/model.md §9). An optional layer of the model for emulated clusters; a real cluster leaves
    ``Cluster.shared_host`` unset and none of this enters its prediction."""

    cores: int = Field(gt=0, le=4096, description="Cores of the one host every machine's process runs on.")
    background_threads: float = Field(default=0.0, ge=0, le=100_000,
                                      description="Runnable threads of other programs on the host.")
    corun_slowdown: float = Field(default=0.0, ge=0, le=10,
                                  description="σ_h: how much slower a thread computes when the host's other "
                                              "cores are busy too (0.1: 10 % slower).")
    wakeup_delay_s: float = Field(default=0.0, ge=0, le=1.0,
                                  description="d: seconds a rank woken by a message waits for a CPU when the "
                                              "host's processes outnumber its cores.")


#: The flat fields that held SharedHost's parts in older files, and the part each one is.
_LEGACY_HOST_FIELDS = {"host_cores": "cores", "host_background_threads": "background_threads",
                       "host_corun_slowdown": "corun_slowdown", "host_wakeup_delay_s": "wakeup_delay_s"}


class Cluster(Spec):
    """Machines for workers and the parameter server, their NICs, and the machine budget."""

    name: str = Field(min_length=1, description="The cluster's name.")
    description: str = Field(default="", description="What the cluster is, for people.")
    source: str = Field(default="", description="Where its numbers come from (a citation or a calibration).")
    reconstructed: bool = Field(default=False, description="True if the numbers are our estimates, not published.")
    worker: Machine = Field(description="The machine type of the workers.")
    worker_nic: Nic = Field(description="The network interface of each worker.")
    ps: Machine = Field(description="The machine type of the parameter-server machines. The PS reads its cores, "
                                    "thread_contention, conv multiply-add rate, elem_time_s, copy_time_s_per_byte "
                                    "and memory_bytes; the other parts describe the machine as a worker.")
    ps_nic: Nic = Field(description="The network interface of each parameter-server machine.")
    machines: int = Field(gt=0, le=10_000_000, description="The machine budget N: workers plus PS machines.")
    price_per_machine_hour: float = Field(default=0.0, ge=0, description="Price of one machine for one hour "
                                                                         "(any currency; 0: no price).")
    classes: tuple[MachineClass, ...] = Field(default=(), description="Machine classes of a heterogeneous "
                                              "cluster; worker and ps then describe the uniform comparison.")
    node: Node | None = Field(
        default=None, description="Nodes of several devices: ``machines`` and W, R count devices; a node's devices "
                                  "share its intra-node link and NICs. None: one machine per NIC.")
    shared_host: SharedHost | None = Field(
        default=None, description="Emulation only: every machine is a process on one host (validation runs "
                                  "on one computer). None: separate machines, the cluster a user predicts.")

    @model_validator(mode="before")
    @classmethod
    def _device_names(cls, data: Any) -> Any:
        # ``worker`` and ``ps`` may name a device preset (dnnbench/presets/devices).
        if not isinstance(data, dict) or not any(isinstance(data.get(k), str) for k in ("worker", "ps")):
            return data
        from .devices import device_data, device_names

        data = dict(data)
        for key in ("worker", "ps"):
            if isinstance(data.get(key), str):
                machine = device_data(data[key])
                if machine is None:
                    fail(key, data[key], f"is not a device preset; expected one of {', '.join(device_names())}, "
                                         "or a machine spec")
                data[key] = machine
        return data

    @model_validator(mode="before")
    @classmethod
    def _legacy_host_fields(cls, data: Any) -> Any:
        # Files written before ``shared_host`` held its parts as flat ``host_*`` fields; they are read
        # into the sub-spec. Without host_cores the other three never had an effect and are dropped.
        if not isinstance(data, dict) or not any(k in data for k in _LEGACY_HOST_FIELDS):
            return data
        data = dict(data)
        legacy = {new: data.pop(old) for old, new in _LEGACY_HOST_FIELDS.items() if old in data}
        if legacy.get("cores") is not None:
            if data.get("shared_host") is not None:
                fail("shared_host", data["shared_host"], "give shared_host or the older host_* fields, not both")
            data["shared_host"] = legacy
        return data

    @model_validator(mode="after")
    def _ps_has_cpu(self) -> Cluster:
        if not self.ps.has_cpu_rate:
            fail("ps", self.ps.name or "(unnamed)",
                 "computes only on an accelerator; the PS computes updates on a CPU: give it mac_time_s or peak")
        return self

    @model_validator(mode="after")
    def _classes_fit(self) -> Cluster:
        if self.classes and sum(c.count for c in self.classes) != self.machines:
            total = sum(c.count for c in self.classes)
            fail("machines", self.machines, f"must equal the machines of its classes ({total})")
        return self


class Dataset(Spec):
    """A training data set: how many samples one epoch reads."""

    name: str = Field(min_length=1, description="The data set's name.")
    source: str = Field(default="", description="Where it comes from (a citation).")
    samples_per_epoch: int = Field(gt=0, description="Training samples in one epoch.")
    epoch_fraction: float = Field(default=1.0, gt=0, le=1, description="Fraction of the samples an epoch "
                                                                       "processes (Adam ends an epoch at 0.75).")
