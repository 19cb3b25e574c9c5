"""Cluster, machine, NIC and data-set specs (SI units, the unit in every field name)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from .base import Spec, fail

LayerKindCost = Literal["conv", "fc"]


class MacTimes(Spec):
    """Seconds per multiply-add per core, by layer kind, for data outside the last-level cache."""

    conv: float = Field(gt=0, lt=1)
    fc: float = Field(gt=0, lt=1)


class PeakRate(Spec):
    """A datasheet peak rate and the fraction of it each layer kind reaches."""

    macs_per_s_per_core: float = Field(gt=0)
    efficiency_conv: float = Field(gt=0, le=1)
    efficiency_fc: float = Field(gt=0, le=1)


class Machine(Spec):
    """One machine type. Give per-core MAC times (``mac_time_s``) or a peak rate with efficiencies."""

    name: str = ""
    cores: int = Field(gt=0, le=4096)
    mac_time_s: MacTimes | None = None
    peak: PeakRate | None = None
    elem_time_s: float = Field(gt=0, lt=1)  # seconds per memory-bound element op per core
    cache_speedup: float = Field(default=1.0, ge=1.0, le=100.0)  # MAC-time divisor when in cache
    llc_bytes: int = Field(gt=0)  # last-level cache of the whole machine
    memory_bytes: int = Field(gt=0)
    thread_contention: float = Field(default=0.0, ge=0.0, le=1.0)  # σ in η(T) = 1/(1 + σ(T-1))
    # Fixed cost of running one layer once (framework dispatch, memory allocation), per forward or
    # backward pass of a mini-batch; shared by the local_batch_samples samples of that pass.
    layer_overhead_s: float = Field(default=0.0, ge=0.0, lt=1.0)
    # CPU time to copy one byte of a message in or out (serialisation, the TCP stack), per core.
    copy_time_s_per_byte: float = Field(default=0.0, ge=0.0, lt=1e-3)
    # Coefficient of variation of one local mini-batch's compute time (the OS, the allocator, the
    # framework): a synchronous round waits for its slowest replica (docs/model.md §6). 0: deterministic.
    step_time_cv: float = Field(default=0.0, ge=0.0, le=10.0)

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

    upload_bits_per_s: float = Field(gt=0)
    download_bits_per_s: float = Field(gt=0)
    latency_s: float = Field(ge=0, lt=10)
    goodput_factor: float = Field(default=0.956, gt=0, le=1)  # TCP payload per wire bit at MTU 1500
    duplex: Literal["full", "half"] = "full"  # half: a shared medium (Wi-Fi) sums both directions
    # Fixed cost of one model-parallel exchange round (waking the peer, synchronising), on top of the
    # per-message latency; measured on loaded hosts (docs/validation.md). 0 for the presets.
    exchange_overhead_s: float = Field(default=0.0, ge=0, lt=10)


class MachineClass(Spec):
    """``count`` machines of one type with one NIC: a part of a heterogeneous cluster."""

    name: str = Field(min_length=1)
    count: int = Field(gt=0, le=10_000_000)
    machine: Machine
    nic: Nic


class Cluster(Spec):
    name: str = Field(min_length=1)
    description: str = ""
    source: str = ""
    reconstructed: bool = False
    worker: Machine
    worker_nic: Nic
    ps: Machine
    ps_nic: Nic
    machines: int = Field(gt=0, le=10_000_000)  # the machine budget N (workers + PS)
    price_per_machine_hour: float = Field(default=0.0, ge=0)
    # A heterogeneous cluster lists its machine classes; worker/ps above then describe the reference
    # machine of the uniform comparison (dnnbench.optimizer.hetero).
    classes: tuple[MachineClass, ...] = ()
    # All machines are processes on one host with this many cores (emulation and validation runs on
    # one computer): busy processes beyond it slow every process down. None: real, separate machines.
    host_cores: int | None = Field(default=None, gt=0, le=4096)
    # Runnable threads of other programs on that shared host (measured during validation runs).
    host_background_threads: float = Field(default=0.0, ge=0, le=100_000)
    # σ_h: how much slower a thread computes when the host's other cores are busy too (shared caches and
    # memory bandwidth); measured by timing one step alone and beside a busy loop.
    host_corun_slowdown: float = Field(default=0.0, ge=0, le=10)
    # d: when the host's processes outnumber its cores, how long a rank woken by a message waits for a
    # CPU that another rank is computing on; measured by a ping-pong beside busy threads.
    host_wakeup_delay_s: float = Field(default=0.0, ge=0, le=1.0)

    @model_validator(mode="after")
    def _classes_fit(self) -> Cluster:
        if self.classes and sum(c.count for c in self.classes) != self.machines:
            total = sum(c.count for c in self.classes)
            fail("machines", self.machines, f"must equal the machines of its classes ({total})")
        return self


class Dataset(Spec):
    name: str = Field(min_length=1)
    source: str = ""
    samples_per_epoch: int = Field(gt=0)
    epoch_fraction: float = Field(default=1.0, gt=0, le=1)  # Adam ends an epoch at 0.75
