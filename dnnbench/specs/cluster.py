"""Cluster, machine, NIC and data-set specs (SI units, the unit in every field name)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from .base import Spec, fail

LayerKindCost = Literal["conv", "fc"]


class MacTimes(Spec):
    """Seconds per multiply-add per core, by layer kind, for data outside the last-level cache."""

    conv: float = Field(gt=0, lt=1, description="Seconds per multiply-add per core in convolution layers.")
    fc: float = Field(gt=0, lt=1, description="Seconds per multiply-add per core in fully connected layers.")


class PeakRate(Spec):
    """A datasheet peak rate and the fraction of it each layer kind reaches."""

    macs_per_s_per_core: float = Field(gt=0, description="Datasheet peak multiply-adds per second of one core.")
    efficiency_conv: float = Field(gt=0, le=1, description="Fraction of the peak convolution layers reach (0-1].")
    efficiency_fc: float = Field(gt=0, le=1, description="Fraction of the peak fully connected layers reach (0-1].")


class Machine(Spec):
    """One machine type. Give per-core MAC times (``mac_time_s``) or a peak rate with efficiencies."""

    name: str = Field(default="", description="The machine type's name, for people.")
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

    @model_validator(mode="after")
    def _one_rate(self) -> Machine:
        if (self.mac_time_s is None) == (self.peak is None):
            fail("mac_time_s", self.mac_time_s, "give exactly one of 'mac_time_s' or 'peak'")
        return self

    def mac_time(self, kind: LayerKindCost) -> float:
        """Seconds per MAC per core for ``kind`` ('conv' or 'fc'), out of cache."""
        if self.mac_time_s is not None:
            return float(getattr(self.mac_time_s, kind))
        peak = self.peak
        if peak is None:  # unreachable: _one_rate guarantees one of the two
            raise TypeError("machine has neither mac_time_s nor peak")
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
    shared_host: SharedHost | None = Field(
        default=None, description="Emulation only: every machine is a process on one host (validation runs "
                                  "on one computer). None: separate machines, the cluster a user predicts.")

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
