"""Runs mapped to the per-sample model (docs/validation.md §"Mapping"): the configuration, cluster and
NIC each run is predicted on, the token bucket's rate factor, the exchange overhead fitted on a
model-parallel run, and the prediction of a run.

A run with mini-batch b measures b samples per step. The model's configuration is W, R, P = 1 per PS
run, k_push = k_pull = b, threads = 1, local batch b, FC updates as deltas (the runner pushes plain
gradients), samples_per_message = b (a model-parallel message carries the mini-batch). Measured
throughput = samples / wall seconds."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..specs import Cluster, Configuration, Machine, Network, Nic, SharedHost
from .plan import Run, processes
from .runs import measured_step_s, measured_wait_s


def configuration(run: Run, batch_size: int) -> Configuration:
    """The model's configuration for a run (module docstring, "Mapping")."""
    base = {"threads": 1, "local_batch_samples": batch_size, "fc_update": "deltas",
            "push_interval_samples": batch_size, "pull_interval_samples": batch_size}
    if run.kind == "dp":
        # The runner's workers push, wait for the PS and pull (request–reply), and its async PS serves
        # each worker's connection concurrently (docs/validation.md §"Mapping").
        return Configuration.build({**base, "replicas": run.ranks, "ps_machines": 1, "mode": run.mode,
                                    "ps_exchange": "request_reply"})
    if run.kind == "mp":
        return Configuration.build({**base, "workers_per_replica": run.ranks, "samples_per_message": batch_size})
    return Configuration.build(base)


def run_cluster(machine: Machine, nic: Nic, run: Run, shared_host_cores: int | None,
                ps_machine: Machine | None = None, background_threads: float = 0.0,
                corun_slowdown: float = 0.0, wakeup_delay_s: float = 0.0) -> Cluster:
    """The cluster a run is predicted on: every process a one-core machine (1 torch thread, the PS
    too) on a host of ``shared_host_cores`` cores (None: as if each process had its own machine)
    shared with ``background_threads`` runnable threads of other programs, busy threads slowing each
    other by σ_h = ``corun_slowdown`` and a woken rank waiting ``wakeup_delay_s`` for a CPU when the
    ranks outnumber the cores (``Cluster.shared_host``, docs/model.md §9)."""
    from .calibrate import build_cluster

    host = None if not shared_host_cores else SharedHost(
        cores=shared_host_cores, background_threads=float(background_threads), corun_slowdown=float(corun_slowdown),
        wakeup_delay_s=float(wakeup_delay_s))
    return build_cluster(machine.evolve(cores=1), nic, name="calibrated-processes", machines=processes(run),
                         shared_host=host, ps_machine=None if ps_machine is None else ps_machine.evolve(cores=1))


def own_busy_threads(run: Run) -> tuple[float, float]:
    """(busy threads the workers compete with, busy threads the PS competes with) among the run's
    own processes, as the model's κ counts them (docs/model.md §9): synchronous rounds separate the
    workers' compute from the PS's, asynchronous ones overlap them."""
    if run.kind == "single":
        return 1.0, 1.0
    if run.kind == "mp":
        return float(run.ranks), 0.0
    if run.mode == "sync":
        return float(run.ranks), 1.0
    return float(run.ranks + 1), float(run.ranks + 1)


def predicted_samples_per_s(net: Network, cluster: Cluster, run: Run, batch_size: int) -> tuple[float, dict[str, Any]]:
    from .. import presets
    from ..model import predict

    pred = predict(net, cluster, presets.default_dataset_for(net), configuration(run, batch_size)).item()
    return float(pred["samples_per_s"]), pred


def scale_compute(machine: Machine, factor: float) -> Machine:
    """``machine`` with every CPU time (MAC, element op, per-layer overhead, message copies) times
    ``factor``."""
    mac = machine.mac_time_s
    if mac is None:  # calibrated machines always carry MAC times
        raise ValueError("machine has no mac_time_s")
    return machine.evolve(mac_time_s=mac.evolve(conv=mac.conv * factor, fc=mac.fc * factor),
                          elem_time_s=machine.elem_time_s * factor,
                          layer_overhead_s=min(0.5, machine.layer_overhead_s * factor),
                          copy_time_s_per_byte=min(1e-4, machine.copy_time_s_per_byte * factor))


def anchored_to_step(net: Network, cfit: Any, step_samples_per_s: float, batch_size: int, tfit: Any) -> Any:
    """``cfit`` (a :class:`.fit.ComputeFit`) with its times scaled by the one factor that makes the
    model reproduce the calibration run's step, ``step_samples_per_s`` at its CPU time: the per-kind
    constants fitted to the run's layers (and its smaller mini-batch) may miss its step where they
    cannot describe the network (depthwise convolutions priced at the dense rate, a working set that
    leaves the cache at the larger batch), and the runs are predicted at the run's batch."""
    from .calibrate import machine_from_fit, nic_from_fit

    run = Run("single")
    factor = 1.0
    for _ in range(3):  # the model is linear in the compute times but for its bounds: converges at once
        machine = machine_from_fit(cfit.scaled(factor), copy_time_s_per_byte=tfit.copy_time_s_per_byte)
        pred, _ = predicted_samples_per_s(net, run_cluster(machine, nic_from_fit(tfit), run, None), run, batch_size)
        if not (pred > 0 and step_samples_per_s > 0):
            return cfit
        factor *= pred / step_samples_per_s
    return cfit.scaled(factor)


def exchange_rounds_per_step(net: Network, run: Run) -> float:
    """Model-parallel exchange rounds per mini-batch as the model counts them: forward and backward
    of every exchanging layer (``model.traffic.model_parallel_rounds``; samples_per_message = b), and
    one per tensor of the weights every process holds whole (their gradients' sums)."""
    from ..model.arrays import network_arrays
    from ..model.traffic import gradient_sums, model_parallel_rounds

    arr, w = network_arrays(net), np.asarray(float(run.ranks))
    return float(model_parallel_rounds(arr, w) + gradient_sums(arr, w)[2])


def fit_exchange_overhead(net: Network, cluster: Cluster, run: Run, batch_size: int,
                          meas: dict[str, Any], cores: int) -> dict[str, float]:
    """``Nic.exchange_overhead_s`` from one model-parallel run (docs/validation.md §"Exchange
    overhead"): the o_x ≥ 0 at which the model reproduces the run's measured step time
    (:func:`measured_step_s`; root-finding, the model's step time grows with o_x). Everything the
    model does not charge a model-parallel step otherwise (waiting for the other partition, the
    exchange op's framework and copy costs, gloo's wake-ups) lands in this one per-round constant,
    which the other model-parallel runs then test out of sample. The report also keeps the wait
    the ranks measured (:func:`measured_wait_s`) and the model's link time per step."""
    from scipy.optimize import brentq

    def step_s(o_x: float) -> float:
        c = cluster.evolve(worker_nic=cluster.worker_nic.evolve(exchange_overhead_s=o_x))
        return batch_size / predicted_samples_per_s(net, c, run, batch_size)[0]

    target = measured_step_s(meas)
    rounds = exchange_rounds_per_step(net, run)
    bare = cluster.evolve(worker_nic=cluster.worker_nic.evolve(exchange_overhead_s=0.0))
    _, item = predicted_samples_per_s(net, bare, run, batch_size)
    link_s = float(item["breakdown_s_per_sample"]["model_parallel_network"]) * batch_size
    o_x = 0.0
    if rounds and step_s(0.0) < target:
        hi = max(1e-3, target)
        while step_s(hi) < target:  # the step grows at least linearly in o_x: a few doublings at most
            hi *= 2.0
        o_x = float(brentq(lambda v: step_s(v) - target, 0.0, hi, xtol=1e-9, rtol=1e-9))
    return {"exchange_overhead_s": o_x, "step_s": target, "wait_s_per_step": measured_wait_s(meas, run, cores),
            "model_link_s_per_step": link_s, "rounds_per_step": rounds}


def worker_link(nic: Nic, run: Run) -> Nic:
    """The workers' NIC as a run uses it (docs/validation.md §"Mapping"): a PS worker pushes and
    then waits for its pull (request–reply), so its link never carries both directions at once —
    duplex "half" (the model then adds push and pull, docs/model.md §6); the PS's NIC stays full
    duplex (it receives the next push while its replies go out). Model-parallel ranks send and
    receive each exchange at once: full duplex."""
    return nic.evolve(duplex="half") if run.kind == "dp" else nic


#: Largest rate factor :func:`bucket_rate_factor` returns (traffic the bucket passes whole).
BUCKET_CAP = 100.0


def message_bytes(net: Network, run: Run, batch_size: int) -> list[float]:
    """Bytes of each message that crosses the busiest tbf port of a run, each starting on a full
    bucket: a PS run's push (or pull) of the weights, all R of them at the PS's port in a synchronous
    round; a model-parallel run's exchange of one layer in one pass ((W-1)/W of its input, b samples;
    the layers' compute refills the bucket in between), and of a recurrent layer's states after each
    step."""
    from ..model.arrays import network_arrays
    from ..units import FP32_BYTES

    arr = network_arrays(net)
    weights_bytes = float(arr.weights.sum()) * FP32_BYTES
    if run.kind == "dp":
        return [weights_bytes * (run.ranks if run.mode == "sync" else 1)]
    if run.kind == "mp":  # each exchange's, of the input or statistics and of every recurrent step's states
        share = (run.ranks - 1) / run.ranks
        each = [(float(v - s), 1.0) for v, s in zip(arr.fm_values, arr.state_values, strict=True) if v - s > 0]
        each += [(float(s / n), float(n)) for s, n in zip(arr.state_values, arr.state_rounds, strict=True) if n > 0]
        sums = [float(t) / run.ranks * FP32_BYTES for sizes, n in zip(arr.tensors, arr.replicated_tensors, strict=True)
                if n > 0 for t in sizes for _ in range(2 * (run.ranks - 1))]  # a ring all-reduce's steps
        return [v / 2 * share * batch_size * FP32_BYTES for v, n in each for _ in range(int(n))] * 2 + sums
    return []


def bucket_rate_factor(net: Network, run: Run, batch_size: int, burst_bytes: float) -> float:
    """Link-rate multiplier that makes the model's bucket-less link time of a run's messages equal
    tbf's Σ max(0, S - burst)·8/(g·R) (docs/validation.md §"Network emulation"); ≤ ``BUCKET_CAP``."""
    sizes = message_bytes(net, run, batch_size)
    total = sum(sizes)
    rest = sum(max(0.0, m - burst_bytes) for m in sizes)
    if total <= 0:
        return 1.0
    return min(BUCKET_CAP, total / rest) if rest > 0 else BUCKET_CAP


def run_nic(net: Network, run: Run, batch_size: int, tfit: Any,
            links: dict[float, dict[str, Any]]) -> tuple[Nic, float]:
    """The NIC a run is predicted on, and its tbf bucket factor: loopback's fit, or the emulated
    link's rate × :func:`bucket_rate_factor` with goodput 0.956 and the link's measured latency
    (``links[rate]["latency_s"]``; loopback's when the link was not measured)."""
    from . import netns
    from .calibrate import nic_from_fit, tbf_nic

    if run.link_bits_per_s is None:
        return nic_from_fit(tfit), 1.0
    bucket = bucket_rate_factor(net, run, batch_size, netns.burst_for(run.link_bits_per_s))
    latency = links.get(run.link_bits_per_s, {}).get("latency_s", tfit.latency_s)
    return tbf_nic(run.link_bits_per_s * bucket, latency), bucket


def predict_run(net: Network, run: Run, batch_size: int, machine: Machine, free_machine: Machine, nic: Nic,
                cores: int, background_threads: float | None, sigma_h: float,
                exchange_overhead_s: float | None, wakeup_delay_s: float = 0.0) -> tuple[float, dict[str, Any], float]:
    """(predicted samples/s on this shared host, the prediction, the CPU view's uncontended
    samples/s) of one run: the single-process run on ``machine`` (the calibration run's own load,
    λ), the others on ``free_machine`` with the host's cores, the other programs' threads measured
    during the run, σ_h and the wake-up delay d (docs/validation.md §"Mapping")."""
    if run.kind == "mp":
        nic = nic.evolve(exchange_overhead_s=float(exchange_overhead_s or 0.0))
    worker_nic = worker_link(nic, run)
    if run.kind == "single":  # in-sample: the machine as loaded during this very run (λ)
        cluster = run_cluster(machine, nic, run, cores)
    else:  # the other programs' runnable threads measured during the run join the model's κ
        cluster = run_cluster(free_machine, nic, run, cores, background_threads=background_threads or 0.0,
                              corun_slowdown=sigma_h, wakeup_delay_s=wakeup_delay_s)
    pred, item = predicted_samples_per_s(net, cluster.evolve(worker_nic=worker_nic), run, batch_size)
    free, _ = predicted_samples_per_s(net, run_cluster(free_machine, nic, run, None).evolve(worker_nic=worker_nic),
                                      run, batch_size)
    return pred, item, free


def phase_fields(item: dict[str, Any], launches: list[float]) -> dict[str, Any]:
    """A run's phase range (docs/model.md §6: request–reply replicas in lock step and staggered) and
    how many of its launches fell inside it; the range is the prediction itself where no phase enters."""
    lo, hi = item["phase_range_samples_per_s"]
    inside = sum(1 for v in launches if lo * (1 - 1e-9) <= v <= hi * (1 + 1e-9))
    return {"predicted_phase_range_samples_per_s": [lo, hi], "launches_in_phase_range": inside}
