"""``dnnbench calibrate``: micro-benchmarks on this machine fitted into a cluster spec (docs/validation.md).

Compute constants come from PyTorch layer benchmarks (CPU time, 1 thread, :mod:`.microbench`), the
NIC from gloo ping-pong over loopback (:mod:`.transfer`), cache and memory sizes from the OS. The
result is a valid :class:`~dnnbench.specs.Cluster` whose worker and PS are this machine.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..specs import Cluster, Machine, Nic, SharedHost
from . import netns
from .fit import ComputeFit, TransferFit, fit_compute, fit_copy_time, fit_transfer
from .hostload import host_cores

#: Mini-batch of the second pass of micro-benchmarks (separates the per-layer overhead).
SMALL_BATCH = 2


def _caches() -> list[tuple[int, int]]:
    """(level, bytes) of each cache of CPU 0 (sysfs); empty when unknown."""
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        entries = [e for e in os.listdir(base) if e.startswith("index")]
    except OSError:
        entries = []
    out = []
    for entry in entries:
        try:
            level = int(Path(f"{base}/{entry}/level").read_text().strip())
            text = Path(f"{base}/{entry}/size").read_text().strip()
            mult = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1], 1)
            out.append((level, int(text.rstrip("KMG")) * mult))
        except (OSError, ValueError):
            continue
    return out


def llc_bytes() -> int:
    """The last-level cache of this machine (sysfs), 8 MiB when unknown."""
    return max((size for _, size in _caches()), default=0) or 8 * 2**20


def cache_levels() -> list[int]:
    """Sizes of this machine's level-2 and higher caches (sysfs), for the shape fit's working-set rule."""
    return sorted({size for level, size in _caches() if level >= 2}) or [llc_bytes()]


def calibrate_shapes(quick: bool, progress: Callable[[str], None] | None = None) -> tuple[Any, Any, dict[str, Any]]:
    """The shape-aware compute constants of this machine (:func:`.shapes.calibrate_shapes`)."""
    from .shapes import calibrate_shapes as run

    return run(host_cores(), cache_levels(), quick=quick, progress=progress)


def memory_bytes() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 8 * 2**30


def machine_from_fit(fit: ComputeFit, contention: float = 0.0, name: str = "this machine (calibrated)",
                     cores: int | None = None, copy_time_s_per_byte: float = 0.0) -> Machine:
    """A machine spec of the fitted constants; ``cores`` defaults to this host's (docs/validation.md).
    ``copy_time_s_per_byte``: CPU per message byte sent or received (:func:`.fit.fit_copy_time`)."""
    return Machine.build({
        "name": name, "cores": cores or host_cores(),
        "mac_time_s": {"conv": fit.mac_time_conv_s, "fc": fit.mac_time_fc_s},
        "elem_time_s": fit.elem_time_s, "cache_speedup": fit.cache_speedup,
        "llc_bytes": llc_bytes(), "memory_bytes": memory_bytes(),
        "thread_contention": min(1.0, max(0.0, contention)),
        "layer_overhead_s": fit.layer_overhead_s, "copy_time_s_per_byte": copy_time_s_per_byte,
    })


def nic_from_fit(fit: TransferFit) -> Nic:
    """Loopback: the fitted bandwidth is already payload goodput (goodput_factor 1)."""
    return Nic.build({"upload_bits_per_s": fit.bits_per_s, "download_bits_per_s": fit.bits_per_s,
                      "latency_s": fit.latency_s, "goodput_factor": 1.0, "duplex": "full"})


def tbf_nic(rate_bits_per_s: float, latency_s: float) -> Nic:
    """A tbf-shaped emulated link: TCP goodput 0.956 of the rate at MTU 1500 (real-runs guide). The
    validation scales the rate for the token bucket (:func:`.mapping.bucket_rate_factor`)."""
    return Nic.build({"upload_bits_per_s": rate_bits_per_s, "download_bits_per_s": rate_bits_per_s,
                      "latency_s": latency_s, "goodput_factor": netns.TBF_GOODPUT, "duplex": "full"})


def build_cluster(machine: Machine, nic: Nic, name: str = "calibrated", source: str = "",
                  machines: int = 1, shared_host: SharedHost | None = None,
                  ps_machine: Machine | None = None) -> Cluster:
    """Worker = PS = ``machine`` (or PS = ``ps_machine``) with ``nic``. ``shared_host``: every machine
    is a process on one host (validation runs, docs/model.md §9): its cores, the other programs'
    runnable threads, the co-run slowdown σ_h (:func:`.corun.corun_slowdown`) and the wake-up delay d
    (:func:`.wakeup.measure_wakeup_delay`)."""
    desc = ("Processes on this host, calibrated by dnnbench validate (PyTorch on the CPU, 1 thread each)."
            if shared_host else "This machine, calibrated by dnnbench calibrate (PyTorch on the CPU, 1 thread).")
    return Cluster.build({
        "name": name, "description": desc,
        "source": source or "dnnbench calibrate: micro-benchmarks fitted with scipy", "reconstructed": False,
        "worker": machine.to_dict(), "worker_nic": nic.to_dict(),
        "ps": (ps_machine or machine).to_dict(), "ps_nic": nic.to_dict(),
        "machines": machines, "shared_host": None if shared_host is None else shared_host.to_dict(),
    })


def measure_transfer(quick: bool = False, launches: int = 1) -> TransferFit:
    """Gloo ping-pong over loopback between two processes: the CPU per message byte from both ranks'
    CPU time, then latency + size / bandwidth of what the copies leave (:mod:`.fit`). With
    ``launches`` > 1 the ping-pong runs that often in fresh processes and the fit of median copy time
    is kept (one launch in four measured twice the others' copy time, docs/validation.md)."""
    from .launch import run_ranks
    from .transfer import SIZES_BYTES

    args = {"repeats": 3 if quick else 8, "sizes_bytes": list(SIZES_BYTES)}
    fits = []
    for _ in range(max(1, launches)):
        res = run_ranks("dnnbench.measure.transfer:pingpong_main", 2, args, timeout_s=90)
        one_way = res[0]["one_way_s"]
        sizes = [int(k) for k in one_way]
        cpu = [sum(r["cpu_s_per_round_trip"][k] for r in res) / len(res) for k in one_way]
        copy = fit_copy_time(sizes, cpu)
        fits.append(fit_transfer(sizes, list(one_way.values()), copy))
    fits.sort(key=lambda f: f.copy_time_s_per_byte)
    return fits[(len(fits) - 1) // 2]


#: Message sizes of the emulated-link latency measurement: all pass a tbf bucket of 64 kB or more.
LINK_LATENCY_SIZES_BYTES = (4096, 16384, 65536)


def measure_link_latency(rate_bits_per_s: float, copy_time_s_per_byte: float, repeats: int = 20) -> dict[str, Any]:
    """Per-message latency of an emulated link (docs/validation.md §"Network emulation"): gloo
    ping-pong of small messages between two namespaces joined by the tbf-shaped link, fitted like the
    loopback transfers (latency + size / bandwidth + both ends' copies); the messages pass within
    the bucket, so the intercept is the path's latency (veth pairs, the bridge, the qdiscs and the
    namespaces' packet processing), which loopback does not have."""
    from .launch import run_ranks

    args = {"repeats": repeats, "sizes_bytes": list(LINK_LATENCY_SIZES_BYTES)}
    with netns.emulated(2, rate_bits_per_s) as topo:
        res = run_ranks("dnnbench.measure.transfer:pingpong_main", 2, args, addrs=topo.addrs,
                        namespaces=topo.namespaces, timeout_s=90)
    one_way = res[0]["one_way_s"]
    fit = fit_transfer([int(k) for k in one_way], list(one_way.values()), copy_time_s_per_byte)
    return {"rate_bits_per_s": rate_bits_per_s, "latency_s": fit.latency_s, "one_way_s": one_way,
            "residuals": fit.residuals}


def calibrate(quick: bool = False, progress: Callable[[str], None] | None = None,
              batch_size: int = 32, shared_host: bool = False) -> tuple[Cluster, dict[str, Any]]:
    """Run the micro-benchmarks and fit them: (cluster spec, report with residuals and raw rows).
    ``shared_host``: the cluster is this host's processes (``Cluster.shared_host`` with its cores and
    the measured σ_h and d); else separate machines like this one, σ_h and d only in the report."""
    from .alloc import steady_allocator
    from .microbench import cases, run_cases, thread_efficiency

    started = time.perf_counter()
    steady_allocator()  # as in the runs' processes (docs/validation.md §"Runs")
    items = cases(quick)
    rows = run_cases(items, batch_size=batch_size, repeats=3 if quick else 7, progress=progress)
    # The same cases at a small batch: the fixed per-layer-pass overhead is what does not shrink.
    small = run_cases(items, batch_size=SMALL_BATCH, repeats=3 if quick else 7)
    rows += [{**r, "name": f"{r['name']}@b{SMALL_BATCH}"} for r in small]
    cfit = fit_compute(rows, llc_bytes())
    contention = 0.0
    eff = None
    if not quick:
        eff = thread_efficiency(min(2, os.cpu_count() or 1))
        # η(2) = 1 / (1 + σ): σ = 1/η - 1 (docs/model.md §4); noisy on a shared machine.
        contention = max(0.0, 1.0 / max(eff, 1e-3) - 1.0) if (os.cpu_count() or 1) > 1 else 0.0
        if progress is not None:
            progress("threads")
    tfit = measure_transfer(quick, launches=1 if quick else 3)
    if progress is not None:
        progress("transfer")
    # σ_h: LeNet-5's step alone and beside a busy loop, median of 3 pairs (shorter when quick), docs/validation.md.
    from .. import presets
    from .corun import corun_slowdown

    corun = corun_slowdown(presets.network("lenet5"), batch_size, steps=5 if quick else 10, repeats=3)
    # The steps' jitter, from the same LeNet-5 steps alone (Machine.step_time_cv, docs/model.md §6).
    machine = machine_from_fit(cfit, contention, copy_time_s_per_byte=tfit.copy_time_s_per_byte).evolve(
        step_time_cv=min(10.0, float(corun.get("alone_step_cv", 0.0))))
    # d: a woken rank's wait for a CPU when the host's processes outnumber its cores (docs/validation.md).
    # Only measured for a shared host: a cluster of separate machines has no use for it, and it is a
    # sixth of the calibration's time (three launches of a ping-pong beside busy threads).
    from .wakeup import measure_wakeup_delay

    wakeup = (measure_wakeup_delay(launches=1 if quick else 3) if shared_host
              else {"host_wakeup_delay_s": 0.0, "not_measured": "measured with --shared-host"})
    # σ_h and d describe this host running many ranks at once: the shared host of an emulated cluster
    # (dnnbench calibrate --shared-host), not a property of this machine in a cluster of separate ones.
    host = SharedHost(cores=host_cores(), corun_slowdown=float(corun["host_corun_slowdown"]),
                      wakeup_delay_s=float(wakeup["host_wakeup_delay_s"]))
    # Compute from each layer's shape, with its error band (docs/model.md §12).
    rate, band, shapes = calibrate_shapes(quick, progress)
    machine = machine.evolve(shape_rate=rate, compute_error=band)
    cluster = build_cluster(machine, nic_from_fit(tfit), shared_host=host if shared_host else None)
    report = {"compute": cfit.to_dict(), "transfer": tfit.to_dict(), "thread_efficiency": eff, "corun": corun,
              "wakeup": wakeup, "shapes": shapes,
              "rows": rows, "batch_size": batch_size, "quick": quick, "elapsed_s": time.perf_counter() - started}
    return cluster, report


def steps(quick: bool) -> int:
    """Progress-bar steps of :func:`calibrate`."""
    from .microbench import cases
    from .shapes import shape_steps

    return len(cases(quick)) + (1 if quick else 2) + shape_steps(quick)
