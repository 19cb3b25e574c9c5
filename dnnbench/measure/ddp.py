"""Data parallelism by all-reduce: PyTorch DistributedDataParallel over gloo (docs/validation.md
§"All-reduce runs").

Every rank is one replica (W = 1) training the same network on its own mini-batch of b samples with
SGD; DDP all-reduces the gradients in buckets of ``bucket_bytes`` while backward runs (its default
overlap), so a step is forward, backward with the buckets' all-reduce, and the optimizer step. The
result is each rank's median step, its compute alone (a step's forward and backward timed with the
all-reduce skipped under ``no_sync``, every ``probe_every`` steps), and its throughput.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .plan import SMOKE_BOUND
from .quiet import QuietGate, bracket, launch_again, quiet_median
from .timing import Samples, Stopwatch

__all__ = ["SMOKE_BOUND", "allreduce_bench_main", "benchmark_networks", "ddp_buckets_main", "ddp_main",
           "fit_allreduce_link", "predicted", "replay_ddp", "run_ddp", "sleep_layers_for", "tbf_bucket_factor",
           "validate_ddp"]


def ddp_main(rank: int, world: int, args: dict[str, Any]) -> dict[str, Any]:
    import time

    import torch
    from torch.nn.parallel import DistributedDataParallel

    from ..specs import Network
    from .timing import coefficient_of_variation
    from .torchnet import batch, build_model, loss_fn

    net = Network.build(args["network"])
    x, y = batch(net, int(args["batch_size"]), seed=1 + rank)
    if args.get("sleep_layers"):  # emulated compute (:mod:`.sleepnet`): the output is the loss
        from .sleepnet import fine_timer_slack, sleeping_model

        fine_timer_slack()
        model = sleeping_model(args["sleep_layers"])

        def crit(out: Any, _target: Any) -> Any:
            return out
    else:
        model = build_model(net)
        crit = loss_fn(net)
    ddp = DistributedDataParallel(model, bucket_cap_mb=float(args.get("bucket_bytes", 25 * 2**20)) / 2**20)
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
    warmup, iterations = int(args["warmup"]), int(args["iterations"])
    step, local = Samples(), Samples()
    t_start = 0.0
    for i in range(iterations + warmup):
        if i == warmup:
            t_start = time.perf_counter()
        with Stopwatch() as st:
            opt.zero_grad(set_to_none=False)
            crit(ddp(x), y).backward()  # DDP's hooks all-reduce each bucket as backward fills it
            opt.step()
        if i >= warmup:
            step.add(st.wall_s, st.cpu_s)
    elapsed = time.perf_counter() - t_start
    for _ in range(max(3, iterations // 4)):  # the same step without the all-reduce
        with Stopwatch() as sl, ddp.no_sync():
            opt.zero_grad(set_to_none=False)
            crit(ddp(x), y).backward()
            opt.step()
        local.add(sl.wall_s, sl.cpu_s)
    return {"role": "replica", "rank": rank, "step": step.median(), "local_step": local.median(),
            "emulated_compute": bool(args.get("sleep_layers")),
            "local_step_cv": coefficient_of_variation(local.wall_s),
            "elapsed_s": elapsed, "iterations": iterations,
            "samples_per_s": iterations * int(args["batch_size"]) / elapsed}


def ddp_buckets_main(rank: int, world: int, args: dict[str, Any]) -> dict[str, Any]:
    """The bytes of DDP's buckets of ``args["network"]`` at ``args["bucket_bytes"]``, in the order they are
    reduced, after DDP has rebuilt them in the order backward produced the gradients (its first steps);
    what :func:`dnnbench.model.allreduce.bucket_plan` plans."""
    import torch
    from torch.nn.parallel import DistributedDataParallel

    from ..specs import Network
    from .torchnet import batch, build_model, loss_fn

    net = Network.build(args["network"])
    ddp = DistributedDataParallel(build_model(net), bucket_cap_mb=float(args["bucket_bytes"]) / 2**20)
    crit = loss_fn(net)
    x, y = batch(net, 2, seed=rank)
    for _ in range(11):  # DDP logs its rebuilt buckets at its tenth step
        with torch.no_grad():
            for p in ddp.parameters():
                p.grad = None
        crit(ddp(x), y).backward()
    sizes = ddp._get_ddp_logging_data().get("rebuilt_bucket_sizes", "")
    return {"bucket_bytes": [int(v) for v in str(sizes).split(",") if v.strip()]}


def allreduce_bench_main(rank: int, world: int, args: dict[str, Any]) -> dict[str, Any]:
    """Median seconds of one gloo all-reduce of each size in ``args["sizes_bytes"]`` (fp32 values), the
    sizes interleaved round by round, so that a slow spell of the host shifts every size alike instead
    of one size's every repeat."""
    import time

    import torch
    import torch.distributed as dist

    from .timing import median

    sizes = [int(s) for s in args["sizes_bytes"]]
    tensors = {s: torch.ones(max(1, s // 4)) for s in sizes}
    times: dict[int, list[float]] = {s: [] for s in sizes}
    for i in range(int(args["repeats"]) + 2):
        for size in sizes:
            dist.barrier()
            t0 = time.perf_counter()
            dist.all_reduce(tensors[size])
            if i >= 2:
                times[size].append(time.perf_counter() - t0)
    return {"rank": rank, "seconds": {str(s): median(v) for s, v in times.items()}}


#: All-reduce sizes of the link fit, bytes (64 KiB to 16 MiB).
ALLREDUCE_SIZES_BYTES = (2**16, 2**18, 2**20, 2**22, 2**24)


def _where(topology: Any, ranks: int) -> dict[str, Any]:
    """run_ranks' keywords for ``ranks`` processes: loopback, or the first ``ranks`` hosts of an emulated
    network (:func:`.netns.emulated`)."""
    if topology is None:
        return {}
    return {"addrs": topology.addrs[:ranks], "namespaces": topology.namespaces[:ranks]}


def fit_allreduce_link(world: int = 2, repeats: int = 7, topology: Any = None) -> dict[str, float]:
    """α (seconds per message) and B (payload bytes/s) of a ring all-reduce over loopback, fitted to
    T(n) = 2(p − 1)·α + 2(p − 1)/p · n/B on ``world`` ranks (least squares, both ≥ 0).

    On the hosts of an emulated ``topology`` B is the link's: tbf's rate times the TCP goodput at MTU
    1500 (:data:`.netns.TBF_GOODPUT`), and α alone is fitted (the token bucket lets a small transfer
    through faster than the rate, which a free fit would read as a faster link)."""
    import numpy as np
    from scipy.optimize import nnls

    from .launch import run_ranks

    res = run_ranks("dnnbench.measure.ddp:allreduce_bench_main", world,
                    {"sizes_bytes": list(ALLREDUCE_SIZES_BYTES), "repeats": repeats}, timeout_s=240,
                    **_where(topology, world))
    sizes = np.array(ALLREDUCE_SIZES_BYTES, dtype=float)
    t = np.array([max(r["seconds"][str(int(s))] for r in res) for s in sizes])
    p = float(world)
    a = np.stack([np.full_like(sizes, 2.0 * (p - 1.0)), 2.0 * (p - 1.0) / p * sizes], axis=1)
    if topology is not None:
        from .netns import TBF_GOODPUT

        inv_b = 8.0 / (topology.rate_bits_per_s * TBF_GOODPUT)
        # Least squares on relative residuals, as below, with B fixed: α = Σ u·v / Σ u².
        u, v = a[:, 0] / t, (t - a[:, 1] * inv_b) / t
        alpha = max(0.0, float(np.sum(u * v) / np.sum(u * u)))
        return {"latency_s": alpha, "bytes_per_s": 1.0 / inv_b, "sizes_bytes": sizes.tolist(), "seconds": t.tolist()}
    # Relative residuals: every size weighs alike.
    coef, _ = nnls(a / t[:, None], np.ones_like(t))
    alpha, inv_b = float(coef[0]), float(coef[1])
    return {"latency_s": alpha, "bytes_per_s": 1.0 / inv_b if inv_b > 0 else float("inf"),
            "sizes_bytes": sizes.tolist(), "seconds": t.tolist()}


def _quiet_link_fit(world: int, topology: Any, gate: QuietGate, cores: int, tries: int = 3) -> dict[str, Any]:
    """:func:`fit_allreduce_link` on a quiet host: fitted again (up to ``tries`` times in all) while the
    gate found the host busy before or after it."""
    fit: dict[str, Any] = {}
    for _ in range(tries):
        fit, ref = bracket(gate, cores, lambda: fit_allreduce_link(world=world, topology=topology))
        if not gate.is_busy(ref, cores):
            break
    return fit


def run_ddp(net: Any, ranks: int, batch_size: int, iterations: int, bucket_bytes: int,
            warmup: int = 3, topology: Any = None, sleep_layers: list[tuple[float, float, int]] | None = None
            ) -> dict[str, Any]:
    """One DDP run of ``ranks`` processes on loopback (or the hosts of an emulated ``topology``):
    samples/s of all replicas together. ``sleep_layers``: emulated compute (:mod:`.sleepnet`)."""
    from .launch import run_ranks

    args = {"network": net.to_dict(), "batch_size": batch_size, "iterations": iterations, "warmup": warmup,
            "bucket_bytes": bucket_bytes, "sleep_layers": sleep_layers}
    res = run_ranks("dnnbench.measure.ddp:ddp_main", ranks, args, timeout_s=90 + 3.0 * iterations * ranks,
                    **_where(topology, ranks))
    return {"samples_per_s": sum(r["samples_per_s"] for r in res),
            "step_s": max(r["step"]["wall_s"] for r in res),
            "local_step_s": max(r["local_step"]["wall_s"] for r in res),
            "local_step_cv": max(r["local_step_cv"] for r in res), "raw": res}


def benchmark_networks() -> list[Any]:
    """The networks of ``benchmarks/bench_ddp.py``: LeNet-5 and mnist-adam (presets) and conv-wide-fc,
    a network in no preset (two convolutions and a 640-wide FC layer, about 1.1 M weights)."""
    from .. import presets
    from ..specs import Network

    wide = Network.build({"name": "conv-wide-fc", "layers": [
        {"kind": "input", "shape": [1, 28, 28]},
        {"kind": "conv2d", "out_channels": 16, "kernel": 5, "padding": 2, "activation": "relu"},
        {"kind": "pool", "mode": "max", "window": 2},
        {"kind": "conv2d", "out_channels": 32, "kernel": 3, "padding": 1, "activation": "relu"},
        {"kind": "pool", "mode": "max", "window": 2},
        {"kind": "flatten"},
        {"kind": "fc", "out_features": 640, "activation": "relu"},
        {"kind": "fc", "out_features": 10},
    ]})
    return [presets.network("lenet5"), presets.network("mnist-adam"), wide]


def tbf_bucket_factor(net: Any, ranks: int, burst_bytes: float) -> float:
    """Link-rate multiplier for a DDP step over tbf-shaped links whose bucket of ``burst_bytes`` the
    step's compute refills: a ring all-reduce sends 2(p − 1)/p of the gradient's bytes S through each
    rank's port per step, and tbf passes the first ``burst_bytes`` of them at once, the rest at its rate
    (docs/validation.md §"Network emulation"), so the model's bucket-less link time S/B becomes
    max(0, S − burst)/B. 1 on loopback (``burst_bytes`` 0); at most ``mapping.BUCKET_CAP``."""
    from ..model.arrays import network_arrays
    from ..units import FP32_BYTES
    from .mapping import BUCKET_CAP

    if burst_bytes <= 0 or ranks < 2:
        return 1.0
    sent = 2.0 * (ranks - 1) / ranks * float(network_arrays(net).weights.sum()) * FP32_BYTES
    rest = sent - burst_bytes
    return min(BUCKET_CAP, sent / rest) if rest > 0 else BUCKET_CAP


def predicted(net: Any, machine: Any, link: dict[str, float], ranks: int, batch_size: int,
              bucket_bytes: int, cores: int, corun_slowdown: float = 0.0, background_threads: float = 0.0,
              wakeup_delay_s: float = 0.0, shared_host: bool = True, burst_bytes: float = 0.0) -> dict[str, Any]:
    """The all-reduce model's prediction of a DDP run (docs/validation.md §"All-reduce runs"): one
    one-thread replica per process on a host of ``cores`` cores (the shared-host layer, §9: its
    co-run slowdown, other programs' threads and the wake-up delay of each message), the link fitted
    by :func:`fit_allreduce_link`, one all-reduce per mini-batch. ``shared_host=False``: a cluster of
    separate machines (the runs of emulated compute, whose ranks leave the host's cores idle).
    ``burst_bytes``: the tbf bucket of an emulated link (:func:`tbf_bucket_factor`); 0 on loopback."""
    from .. import presets
    from ..model import predict
    from ..specs import Configuration, Nic, SharedHost
    from .calibrate import build_cluster

    bits = link["bytes_per_s"] * 8.0 * tbf_bucket_factor(net, ranks, burst_bytes)
    nic = Nic(upload_bits_per_s=bits, download_bits_per_s=bits, latency_s=link["latency_s"], goodput_factor=1.0)
    host = SharedHost(cores=cores, corun_slowdown=corun_slowdown, background_threads=background_threads,
                      wakeup_delay_s=wakeup_delay_s)
    cluster = build_cluster(machine, nic, name="ddp-processes", machines=ranks,
                            shared_host=host if ranks > 1 and shared_host else None)
    cfg = Configuration(data_parallel="allreduce", replicas=ranks, threads=1, local_batch_samples=batch_size,
                        push_interval_samples=batch_size, allreduce={"bucket_bytes": bucket_bytes})
    return predict(net, cluster, presets.default_dataset_for(net), cfg).item()


def _two_tensor_op_s(op: str, n: int, repeats: int) -> float:
    """Median seconds of ``b.<op>(a)`` on two fp32 tensors of ``n`` values, on one thread (two warm-up
    calls left out)."""
    import time

    import torch

    from .timing import median

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        a, b = torch.ones(n), torch.zeros(n)
        call = getattr(b, op)
        times = []
        for i in range(repeats + 2):
            t0 = time.perf_counter()
            call(a)
            if i >= 2:
                times.append(time.perf_counter() - t0)
    finally:
        torch.set_num_threads(threads)
    return median(times)


def elem_time_s(n: int = 2**22, repeats: int = 15) -> float:
    """Seconds per element of an in-place fp32 add on one thread (the all-reduce's reduction reads two
    values and writes one, as this does): a micro-benchmark, in-sample."""
    return _two_tensor_op_s("add_", n, repeats) / n


def copy_time_s(n: int = 2**24, repeats: int = 15) -> float:
    """Seconds per byte of copying an fp32 tensor into another on one thread (DDP's copies of the
    gradients into their buckets and back), tensors of 64 MiB, out of the caches as a step's gradients
    are: a micro-benchmark, in-sample."""
    return _two_tensor_op_s("copy_", n, repeats) / (4 * n)


def machine_for(net: Any, step_s: float, batch_size: int, elem_s: float, copy_s: float = 0.0) -> Any:
    """A one-core machine whose predicted one-process step is the measured ``step_s`` (in-sample): the
    modern-2025 preset's relative multiply-add costs with one factor, and the measured element and copy
    times."""
    from .. import presets
    from ..model import predict
    from ..specs import Configuration
    from .calibrate import build_cluster

    base = presets.cluster("modern-2025").worker
    nic = presets.cluster("modern-2025").worker_nic
    cfg = Configuration(threads=1, local_batch_samples=batch_size, push_interval_samples=batch_size)

    def machine(f: float) -> Any:
        return base.evolve(cores=1, peak=None, cache_speedup=1.0, thread_contention=0.0, elem_time_s=elem_s,
                           copy_time_s_per_byte=copy_s,
                           mac_time_s={"conv": base.mac_time("conv") * f, "fc": base.mac_time("fc") * f})

    def per_sample(f: float) -> float:
        return 1.0 / float(predict(net, build_cluster(machine(f), nic), presets.default_dataset_for(net),
                                   cfg).samples_per_s)

    # Per-sample time is linear in the multiply-add factor: two points give it.
    t1, t2 = per_sample(1.0), per_sample(2.0)
    target = step_s / batch_size
    factor = max(1e-3, (target - (2.0 * t1 - t2)) / (t2 - t1)) if t2 > t1 else target / t1
    return machine(factor)


def _median_link(fits: list[dict[str, Any]]) -> dict[str, Any]:
    """The median latency and bandwidth of several link fits (each fit's sizes and seconds kept)."""
    import statistics

    return {"latency_s": statistics.median(f["latency_s"] for f in fits),
            "bytes_per_s": statistics.median(f["bytes_per_s"] for f in fits), "fits": fits}


def sleep_layers_for(net: Any, machine: Any, batch_size: int) -> list[tuple[float, float, int]]:
    """Emulated compute of ``net`` on ``machine`` (one thread, W = 1): each layer's forward and backward
    (back-prop and weight gradient) seconds for a mini-batch, from the model's own per-layer compute,
    and its weights (:mod:`.sleepnet`)."""
    import numpy as np

    from ..model.arrays import network_arrays
    from ..model.compute import layer_parts

    arr = network_arrays(net)
    none = np.zeros_like(arr.weights)
    parts = layer_parts(arr, machine, np.asarray(1.0), 1, none, none.astype(bool), float(batch_size))
    back = parts.backprop_s + parts.weight_grad_s
    return [(float(f) * batch_size, float(b) * batch_size, int(w))
            for f, b, w in zip(parts.forward_s, back, arr.weights, strict=True)]


def _gated_runs(gate: QuietGate, threads: int, runs: int, timing: Callable[[], Any],
                extra: int = 3) -> tuple[list[Any], list[float]]:
    """``runs`` results of ``timing``, each bracketed by the gate (:func:`.quiet.bracket`), and up to
    ``extra`` more while fewer than two of them ran on a quiet host: (results, reference times)."""
    results, refs = [], []

    def once(_key: int = 0) -> None:
        result, ref = bracket(gate, threads, timing)
        results.append(result)
        refs.append(ref)

    for _ in range(runs):
        once()
    launch_again([0], lambda _k: sum(not gate.is_busy(r, threads) for r in refs), once, min(2, runs), extra)
    return results, refs


def _one_process_step(net: Any, batch_size: int, iterations: int, bucket: int, gate: QuietGate, threads: int,
                      sleep_layers: list[tuple[float, float, int]] | None = None) -> tuple[float, float]:
    """(median step, median step without the all-reduce) of three one-process runs on a quiet host:
    the calibration."""
    one, refs = _gated_runs(gate, threads, 3,
                            lambda: run_ddp(net, 1, batch_size, iterations, bucket, sleep_layers=sleep_layers))
    return (quiet_median([r["step_s"] for r in one], refs, threads, gate),
            quiet_median([r["local_step_s"] for r in one], refs, threads, gate))


def validate_ddp(nets: list[Any], ranks: tuple[int, ...] = (2, 3, 4), buckets: tuple[int, ...] = (25 * 2**20, 2**20),
                 batch_size: int = 32, iterations: int = 40, launches: int = 5, link_bits_per_s: float | None = None,
                 emulated_compute: bool = False, gate_budget_s: float = 180.0) -> dict[str, Any]:
    """Every network trained by DDP at each rank count and bucket size, against the all-reduce model.

    ``link_bits_per_s``: the ranks run in network namespaces joined by tbf-shaped links of that rate
    (:func:`.netns.emulated`, needs root) instead of loopback. ``emulated_compute``: every rank sleeps
    each layer's time instead of computing it (:mod:`.sleepnet`); such runs are predicted as a cluster
    of separate machines, without the shared-host layer, since their ranks leave the host's cores idle.

    Calibration (in sample): the one-process step of each network; the host's time per element of an
    add (the reduction) and per byte of a copy (DDP's bucket copies); an all-reduce of plain tensors over
    the same link at each rank count, as one would run an all-reduce benchmark at a job's size before
    predicting it (fitted once per network, the median kept: the loopback's latency drifts with the
    host, and on a host with fewer cores than ranks a message waits for its rank to be scheduled);
    with real compute also its co-run slowdown σ_h and step jitter
    (:func:`.corun.corun_slowdown`), two processes side by side without their all-reduce (σ_h and the
    jitter again, the larger kept) and the host's wake-up delay d (:func:`.wakeup.measure_wakeup_delay`).
    Measurement: ``launches`` rounds, each running every (ranks, bucket) configuration once in an order
    rotated by one per round, so a slow spell of the host falls on different configurations; the
    median of the rounds is the measured throughput. Every launch, calibration included, is bracketed
    by a :class:`~.quiet.QuietGate` on the host's cores (it waits, within ``gate_budget_s`` in all,
    while another tenant holds a core): the medians are of the launches the host was quiet for, and a
    configuration with fewer than two such launches runs again. Returns the rows and the out-of-sample
    errors."""
    import os
    from contextlib import nullcontext

    from . import netns

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    wake = {"host_wakeup_delay_s": 0.0, "not_measured": "emulated compute"}
    if not emulated_compute:
        from .wakeup import measure_wakeup_delay

        wake = measure_wakeup_delay(launches=5)
    gate = QuietGate(budget_s=gate_budget_s)
    fits = []
    elem, copy = elem_time_s(), copy_time_s()
    configs = [(r, bucket) for r in ranks for bucket in buckets]
    rows = []
    where = nullcontext(None) if link_bits_per_s is None else netns.emulated(max(2, *ranks), link_bits_per_s)
    with where as topo:
        for net in nets:
            fits.append({r: _quiet_link_fit(r, topo, gate, cores) for r in ranks})
            rows += _validate_net(net, configs, batch_size, iterations, launches, buckets[0], cores, elem, copy,
                                  topo, emulated_compute, gate)
    links = {r: _median_link([f[r] for f in fits]) for r in ranks}
    # The all-reduce benchmark's sizes follow each other and drain the tbf bucket, so the link fit has
    # none; a training step's compute refills it (tbf_bucket_factor).
    burst = 0.0 if link_bits_per_s is None else float(netns.burst_for(link_bits_per_s))
    for row in rows:
        row["machine"] = row["machine"].to_dict()  # (the report can be predicted again: replay_ddp)
    report = {"links": {str(r): v for r, v in links.items()}, "wakeup": wake, "elem_time_s": elem,
              "copy_time_s_per_byte": copy, "cores": cores, "batch_size": batch_size,
              "link_bits_per_s": link_bits_per_s, "tbf_burst_bytes": burst, "emulated_compute": emulated_compute,
              "quiet_gate": gate.report(), "rows": rows}
    return replay_ddp(report, nets)


def replay_ddp(report: dict[str, Any], nets: list[Any]) -> dict[str, Any]:
    """A DDP report (:func:`validate_ddp`, or its JSON) predicted again by the current model from what
    it measured: every row's machine, the links fitted at each rank count, the host's load and wake-up
    delay, the tbf bucket (a report from before it was recorded: the bucket of its link's rate)."""
    import copy as copying
    import statistics

    from ..specs import Machine
    from . import netns

    out = copying.deepcopy(report)
    rate = out.get("link_bits_per_s")
    burst = out.setdefault("tbf_burst_bytes", 0.0 if rate is None else float(netns.burst_for(rate)))
    d = float(out["wakeup"]["host_wakeup_delay_s"])
    emulated = bool(out["emulated_compute"])
    for row in out["rows"]:
        net = next(n for n in nets if n.name == row["network"])
        machine = Machine.model_validate(row["machine"])
        item = predicted(net, machine, out["links"][str(row["ranks"])], row["ranks"], int(out["batch_size"]),
                         row["bucket_bytes"], int(out["cores"]), row["corun_slowdown"], row["background_threads"], d,
                         shared_host=not emulated, burst_bytes=burst)
        parts = item["breakdown_s_per_sample"]
        row.update(predicted_samples_per_s=item["samples_per_s"],
                   error=item["samples_per_s"] / row["measured_samples_per_s"] - 1.0, bottleneck=item["bottleneck"],
                   allreduce_s_per_sample=parts["allreduce"], host_wakeup_s_per_sample=parts["host_wakeup"],
                   tbf_bucket_factor=tbf_bucket_factor(net, row["ranks"], burst))
    errors = [abs(row["error"]) for row in out["rows"]]
    out.update(median_abs_error=statistics.median(errors), max_abs_error=max(errors))
    return out


def _validate_net(net: Any, configs: list[tuple[int, int]], batch_size: int, iterations: int, launches: int,
                  bucket: int, cores: int, elem: float, copy: float, topo: Any, emulated_compute: bool,
                  gate: QuietGate) -> list[dict[str, Any]]:
    """One network's calibration and measured rows (:func:`validate_ddp`); the rows carry the machine
    and the host's measured load, and are predicted afterwards with the link of every network."""

    from .corun import corun_slowdown
    from .hostload import background_threads

    step, local_one = _one_process_step(net, batch_size, iterations, bucket, gate, cores)
    sleep_layers = None
    sigma, jitter, bg = 0.0, 0.0, 0.0
    if emulated_compute:
        # The sleeps are the model's per-layer times on the machine of the real one-process step; the
        # emulated one-process step then calibrates the machine the runs are predicted on.
        sleep_layers = sleep_layers_for(net, machine_for(net, step, batch_size, elem, copy), batch_size)
        step, _ = _one_process_step(net, batch_size, iterations, bucket, gate, cores, sleep_layers)
    else:
        corun = corun_slowdown(net, batch_size, steps=iterations)
        # σ_h and the step jitter of two training processes side by side, from their steps without the
        # all-reduce (launches of their own, calibration only): busy loops (corun_slowdown) understate
        # what real training peers cost each other; the larger of the two is kept. The jitter is what a
        # synchronous step waits for (the slowest rank's backward ends the all-reduce).
        pair, refs = (_gated_runs(gate, cores, 3, lambda: run_ddp(net, 2, batch_size, iterations, bucket))
                      if cores >= 2 else ([], []))
        beside = quiet_median([r["local_step_s"] for r in pair], refs, cores, gate) if pair else step
        sigma = max(float(corun["host_corun_slowdown"]), beside / local_one - 1.0)
        jitter = max(float(corun["alone_step_cv"]),
                     quiet_median([r["local_step_cv"] for r in pair], refs, cores, gate) if pair else 0.0)
        bg = background_threads()
    machine = machine_for(net, step, batch_size, elem, copy).evolve(step_time_cv=min(10.0, jitter))
    measured: dict[tuple[int, int], list[float]] = {c: [] for c in configs}
    refs: dict[tuple[int, int], list[float]] = {c: [] for c in configs}

    def launch_one(config: tuple[int, int]) -> None:
        r, b = config
        result, ref = bracket(gate, cores, lambda: run_ddp(net, r, batch_size, iterations, b, topology=topo,
                                                           sleep_layers=sleep_layers))
        measured[config].append(result["samples_per_s"])
        refs[config].append(ref)

    def quiet_launches(config: tuple[int, int]) -> int:
        return sum(not gate.is_busy(x, cores) for x in refs[config])

    for launch in range(launches):
        shift = launch % len(configs)
        for config in configs[shift:] + configs[:shift]:
            launch_one(config)
    launch_again(configs, quiet_launches, launch_one, min(2, launches), launches)  # the host was busy for them
    return [{"network": net.name, "ranks": r, "bucket_bytes": b,
             "measured_samples_per_s": quiet_median(measured[(r, b)], refs[(r, b)], cores, gate),
             "launches_samples_per_s": measured[(r, b)],
             "launches_busy": [gate.is_busy(x, cores) for x in refs[(r, b)]], "machine": machine,
             "corun_slowdown": sigma, "step_time_cv": machine.step_time_cv, "background_threads": bg}
            for r, b in configs]
