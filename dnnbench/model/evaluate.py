"""The performance model, vectorised over configurations (docs/model.md §4-6, reconstructed).

``evaluate`` takes array-valued W, R, P, k_push, k_pull (and threads, overlap) that broadcast against
each other, plus a base :class:`Configuration` for the categorical choices, and returns one
:class:`Prediction` of arrays. ``predict`` is the same function on one configuration.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import checks
from ..specs import Cluster, Configuration, Dataset, Network
from ..units import BITS_PER_BYTE, FP32_BYTES
from .arrays import network_arrays
from .compute import effective_cores, worker_compute
from .prediction import BOTTLENECKS, Breakdown, Prediction
from .stragglers import straggler_factor
from .traffic import (
    choose_spatial,
    fc_offload,
    model_parallel_messages,
    model_parallel_rounds,
    model_parallel_values,
    ps_update_core_s,
    pull_values_per_fetch,
    push_values_per_update,
)

#: Adam (OSDI'14): PS shards are replicated on 3 machines.
PS_REPLICATION = 3
_INF = np.inf


def _combine(compute: np.ndarray, network: np.ndarray, overlap: np.ndarray | float) -> np.ndarray:
    """(1-o)·(a+b) + o·max(a,b): no overlap sums compute and network, full overlap takes the max."""
    return (1.0 - overlap) * (compute + network) + overlap * np.maximum(compute, network)


def _compression_terms(config: Configuration, replicas: np.ndarray) -> tuple[float, Any, float]:
    """(delta wire-bits ratio, pull wire-bits ratio, selection element-ops per element)."""
    comp = config.compression
    if comp.method == "none":
        return 1.0, 1.0, 0.0
    from ..esgd import wire

    # Sparsifiers: the encoding's bits at the density; quantisers: their own bits per element.
    ratio = float(wire.method_bits_per_element(comp.method, comp.encoding, comp.density)) / config.value_bits
    pull: Any = 1.0
    if comp.compress_pull:  # the union of the replicas' supports (quantised averages travel dense)
        bits = wire.pull_bits_per_element(comp.method, comp.encoding, comp.density, np.maximum(replicas, 1.0))
        pull = np.minimum(1.0, np.asarray(bits) / config.value_bits)
    return ratio, pull, float(wire.selection_ops_per_element(comp.method))


def evaluate(network: Network, cluster: Cluster, dataset: Dataset | None = None, config: Configuration | None = None,
             *, workers_per_replica: Any = None, replicas: Any = None, ps_machines: Any = None,
             push_interval_samples: Any = None, pull_interval_samples: Any = None,
             threads: Any = None, overlap: Any = None) -> Prediction:
    """Predict every configuration given by broadcasting the array arguments over ``config``.

    Arguments left as None take their value from ``config`` (``dataset`` None: the network's own).
    The specs may also be preset names, spec files or mappings; bad arguments (W = 0, a negative or
    fractional count, NaN) are a one-line SpecError (:mod:`dnnbench.checks`).
    """
    network, cluster, dataset, config = checks.problem(network, cluster, dataset, config)
    checks.configuration_arrays(workers_per_replica=workers_per_replica, replicas=replicas, ps_machines=ps_machines,
                                push_interval_samples=push_interval_samples,
                                pull_interval_samples=pull_interval_samples, threads=threads, overlap=overlap)
    # A product past the largest float (an extreme but valid spec) is an unbounded rate or time: inf.
    with np.errstate(over="ignore"):
        return _evaluate(network, cluster, dataset, config, workers_per_replica, replicas, ps_machines,
                         push_interval_samples, pull_interval_samples, threads, overlap)


def _evaluate(network: Network, cluster: Cluster, dataset: Dataset, config: Configuration,
              workers_per_replica: Any, replicas: Any, ps_machines: Any, push_interval_samples: Any,
              pull_interval_samples: Any, threads: Any, overlap: Any) -> Prediction:
    """:func:`evaluate` after its checks (the model's stages, in order)."""
    arr = network_arrays(network)
    w = np.asarray(config.workers_per_replica if workers_per_replica is None else workers_per_replica, dtype=float)
    r = np.asarray(config.replicas if replicas is None else replicas, dtype=float)
    p = np.asarray(config.ps_machines if ps_machines is None else ps_machines, dtype=float)
    pick = lambda given, default: np.asarray(default if given is None else given, dtype=float)  # noqa: E731
    k_push = pick(push_interval_samples, config.push_interval_samples)
    k_pull = pick(pull_interval_samples, config.pull_interval_samples)
    if config.mode == "sync":
        k_pull = k_push  # one round: k samples, push, apply, pull (model.md §6)
    thr = config.threads if threads is None else threads
    o = np.asarray(config.overlap if overlap is None else overlap, dtype=float)
    has_ps = p > 0
    vb = float(config.value_bits)
    wk, wn, pk, pn = cluster.worker, cluster.worker_nic, cluster.ps, cluster.ps_nic

    spatial = choose_spatial(arr, config.partitioning)
    offload = fc_offload(arr, config, k_push)
    comp = worker_compute(arr, wk, w, thr, offload, spatial, float(config.local_batch_samples))
    if not np.all(has_ps):  # without a PS every weight gradient is computed locally
        local = worker_compute(arr, wk, w, thr, np.zeros_like(arr.weights), spatial,
                               float(config.local_batch_samples))
        comp = local.where(~has_ps, comp)
    delta_ratio, pull_ratio, select_ops = _compression_terms(config, r)

    # PS volumes per update (one replica), and per sample per worker machine.
    push_dense, push_wire = push_values_per_update(arr, w, k_push, offload, spatial, delta_ratio)
    # The PS computes the k samples' outer products as one GEMM: compute-bound, at the conv rate.
    c_ps = ps_update_core_s(arr, k_push, offload, spatial, w, pk.mac_time("conv"), pk.elem_time_s)
    pull_vals = pull_values_per_fetch(arr, w, spatial)
    push_bits = np.where(has_ps, push_wire * vb, 0.0)  # per update, whole replica
    pull_bits = np.where(has_ps, pull_vals * vb * pull_ratio, 0.0)  # per fetch, whole replica
    push_bits_machine = push_bits / k_push / w  # per sample, one machine (each moves its slice)
    pull_bits_machine = pull_bits / k_pull / w

    # Compression costs compute: selection over the pushed deltas (esgd.md §4).
    cores = effective_cores(wk, thr)
    delta_values = push_dense - np.where(has_ps, 0.0, push_dense)
    select_s = select_ops * np.maximum(delta_values, 0.0) / k_push / w * wk.elem_time_s / cores

    # Model-parallel traffic (one machine, per sample): sent = received.
    mp_bits = model_parallel_values(arr, w, spatial) * vb
    # Each of the T threads has its own sample in flight, so message latencies overlap across threads
    # (reconstructed): latency per sample = messages · latency / (samples per message · T).
    in_flight = pick(threads, wk.cores if config.threads is None else config.threads)
    mp_msgs = model_parallel_messages(arr, w, spatial) / (config.samples_per_message * in_flight)
    up_bps, down_bps = wn.upload_bits_per_s * wn.goodput_factor, wn.download_bits_per_s * wn.goodput_factor
    mp_rounds = model_parallel_rounds(arr, w) / (config.samples_per_message * in_flight)
    mp_wait = mp_msgs * wn.latency_s + mp_rounds * wn.exchange_overhead_s
    mp_s = _link_time(mp_bits, mp_bits, up_bps, down_bps, wn.duplex) + mp_wait
    # One message per push and per pull: the connections to the P PS machines run in parallel.
    push_s = push_bits_machine / up_bps + np.where(has_ps, wn.latency_s / k_push, 0.0)
    pull_s = pull_bits_machine / down_bps + np.where(has_ps, wn.latency_s / k_pull, 0.0)
    # The worker NIC carries model-parallel and PS traffic together.
    net_s = (_link_time(mp_bits + push_bits_machine, mp_bits + pull_bits_machine, up_bps, down_bps, wn.duplex)
             + mp_wait + np.where(has_ps, wn.latency_s * (1 / k_push + 1 / k_pull), 0.0))

    # Message copies cost CPU on both ends (reconstructed; measured in docs/validation.md).
    # Per sample on a worker: the model-parallel copies, and those of its PS pushes and pulls (the
    # latter overlap the PS's own copies of the same bytes in a request–reply or synchronous exchange).
    mp_copy_s = 2.0 * mp_bits / BITS_PER_BYTE * wk.copy_time_s_per_byte / cores
    ps_copy_s = (push_bits_machine + pull_bits_machine) / BITS_PER_BYTE * wk.copy_time_s_per_byte / cores
    copy_s = mp_copy_s + ps_copy_s
    # The PS's copies: per update (every push) and per fetch (every pull).
    ps_push_copy = np.where(has_ps, push_bits / BITS_PER_BYTE * pk.copy_time_s_per_byte, 0.0)
    ps_pull_copy = np.where(has_ps, pull_bits / BITS_PER_BYTE * pk.copy_time_s_per_byte, 0.0)
    c_apply = c_ps
    c_ps = c_apply + ps_push_copy + ps_pull_copy * k_push / k_pull

    # CPU contention (reconstructed, docs/model.md §4): when every machine is a process on one host
    # (validation runs), busy threads beyond its cores stretch every process's compute by κ.
    ps_in_bps, ps_out_bps = pn.download_bits_per_s * pn.goodput_factor, pn.upload_bits_per_s * pn.goodput_factor
    ps_busy = None
    if config.mode == "async" and cluster.host_cores is not None:
        # An asynchronous PS competes with the workers for the host's cores only while it works: it
        # counts as x·c_PS/k_push busy threads (its CPU demand at throughput x; at most p·cores), x
        # taken from a first pass in which the PS takes no core (an upper bound on x, so on the PS's
        # share; reconstructed, docs/model.md §4).
        k0, _ = _host_contention(cluster, config, w, r, p, thr, ps_busy=0.0)
        x0 = r / _combine((comp.total_s + select_s + copy_s) * k0, net_s, o)
        with np.errstate(divide="ignore", invalid="ignore"):
            x0 = np.minimum(x0, np.where(has_ps & (push_bits > 0), p * ps_in_bps * k_push / push_bits, _INF))
            x0 = np.minimum(x0, np.where(has_ps & (pull_bits > 0), p * ps_out_bps * k_pull / pull_bits, _INF))
        ps_busy = np.where(has_ps, np.minimum(p * pk.cores, x0 * c_ps / k_push), 0.0)
    kappa, kappa_ps = _host_contention(cluster, config, w, r, p, thr, ps_busy)
    wake = np.where(has_ps, _host_wakeup_s(cluster, w, r, p, thr), 0.0)  # per PS exchange (push + pull)
    worker_s = (comp.total_s + select_s + copy_s) * kappa
    ps_cores = float(effective_cores(pk, None)) / kappa_ps

    straggle_s = np.zeros(())  # per sample: a synchronous round's wait for its slowest replica
    phase: tuple[Any, Any] | None = None  # request–reply replicas in lock step / staggered (model.md §6)
    with np.errstate(divide="ignore", invalid="ignore"):
        if config.mode == "async":
            t_rep = _combine(worker_s, net_s, o) + wake / k_push
            x_rep = r / t_rep
            if pn.duplex == "full":
                x_in = np.where(has_ps & (push_bits > 0), p * ps_in_bps * k_push / push_bits, _INF)
                x_out = np.where(has_ps & (pull_bits > 0), p * ps_out_bps * k_pull / pull_bits, _INF)
            else:  # a shared medium carries both directions
                per_sample = push_bits / k_push / ps_in_bps + pull_bits / k_pull / ps_out_bps
                x_in = np.where(has_ps & (per_sample > 0), p / per_sample, _INF)
                x_out = np.full_like(x_in, _INF)
            x_cpu = np.where(has_ps & (c_ps > 0), p * ps_cores * k_push / c_ps, _INF)
            x = np.minimum(np.minimum(x_rep, x_in), np.minimum(x_out, x_cpu))
            if config.ps_exchange == "request_reply":
                copy_w = wk.copy_time_s_per_byte / BITS_PER_BYTE / cores * kappa  # worker CPU per bit
                x_rr, lo_rr, hi_rr = _request_reply_throughput(
                    r, p, k_push, k_pull, worker_s - ps_copy_s * kappa, mp_s, o, push_bits, pull_bits,
                    np.maximum(push_bits_machine / up_bps, push_bits_machine * copy_w),
                    np.maximum(pull_bits_machine / down_bps, pull_bits_machine * copy_w),
                    ps_in_bps, ps_out_bps, pn.duplex, ps_push_copy, ps_pull_copy, c_ps, ps_cores,
                    wn.latency_s, wake)
                x = np.where(has_ps, x_rr, x)
                phase = (np.where(has_ps, lo_rr, x), np.where(has_ps, hi_rr, x))
            # Which bound binds, and inside the replica which resource dominates its time.
            rep_code = np.where(worker_s >= net_s, 0,
                                np.where(mp_s >= push_s + pull_s, 1, 2))
            stacked = np.stack(np.broadcast_arrays(x_rep, x_in, x_out, x_cpu))
            which = np.argmin(stacked, axis=0)
            code = np.where(which == 0, rep_code, which + 2)
            bounds = {"replicas": x_rep, "ps_network_in": x_in, "ps_network_out": x_out, "ps_compute": x_cpu}
            ps_cap = np.minimum(np.minimum(x_in, x_out), x_cpu)
        else:
            # Synchronous rounds (model.md §6): the replicas' k samples, then push, apply and pull.
            # A worker copies its push while the PS copies it in (and likewise the pull): the copies
            # overlap each other and the link, so each transfer takes the longest of them.
            # The round waits for the slowest of the R replicas' k samples (docs/model.md §6, reconstructed).
            t_mean = k_push * _combine(worker_s - ps_copy_s * kappa, mp_s, o)
            t_samples = t_mean * straggler_factor(np.where(has_ps, r, 1.0), wk.step_time_cv, k_push,
                                                  float(config.local_batch_samples))
            straggle_s = (t_samples - t_mean) / k_push
            ps_fan_in = np.where(has_ps, r / np.maximum(p, 1.0), 0.0)
            # A push takes the longer of the worker's upload of its slice and the PS's intake of all
            # replicas' pushes (R/P replicas per PS machine); pulls likewise in the other direction.
            push_worker, push_ps = push_bits / w / up_bps, ps_fan_in * push_bits / ps_in_bps
            pull_worker, pull_ps = pull_bits / w / down_bps, ps_fan_in * pull_bits / ps_out_bps
            push_cpu = np.maximum(push_bits / w / BITS_PER_BYTE * wk.copy_time_s_per_byte / cores * kappa,
                                  ps_fan_in * ps_push_copy / ps_cores)
            pull_cpu = np.maximum(pull_bits / w / BITS_PER_BYTE * wk.copy_time_s_per_byte / cores * kappa,
                                  ps_fan_in * ps_pull_copy / ps_cores)
            t_push = np.where(has_ps, np.maximum(np.maximum(push_worker, push_ps), push_cpu) + wn.latency_s, 0.0)
            t_apply = np.where(has_ps, ps_fan_in * c_apply / ps_cores, 0.0)
            t_pull = np.where(has_ps, np.maximum(np.maximum(pull_worker, pull_ps), pull_cpu) + wn.latency_s, 0.0)
            t_round = t_samples + t_push + t_apply + t_pull + wake
            x = r * k_push / t_round
            worker_nic = np.where(push_worker + pull_worker >= push_ps + pull_ps, t_push + t_pull, 0.0)
            parts = np.stack(np.broadcast_arrays(
                k_push * worker_s, k_push * mp_s, worker_nic,
                np.where(worker_nic > 0, 0.0, t_push), np.where(worker_nic > 0, 0.0, t_pull), t_apply))
            code = np.argmax(parts, axis=0)
            bounds = {"round_samples": r * k_push / t_samples,
                      "ps_push": np.where(has_ps, r * k_push / t_push, _INF),
                      "ps_pull": np.where(has_ps, r * k_push / t_pull, _INF),
                      "ps_compute": np.where(has_ps & (t_apply > 0), r * k_push / t_apply, _INF)}
            ps_cap = np.where(has_ps, r * k_push / (t_push + t_apply + t_pull), _INF)
        ps_util = np.where(has_ps & np.isfinite(ps_cap), x / ps_cap, 0.0)

    # Memory (reconstructed): weights and deltas of the machine's slice, activations and errors of
    # the samples in flight; PS: replicated shards plus an update accumulator.
    split_weights = float(np.sum(np.where(spatial, 0.0, arr.weights)))
    whole_weights = float(np.sum(np.where(spatial, arr.weights, 0.0)))
    mem_worker = (2.0 * (whole_weights + split_weights / w) * FP32_BYTES
                  + 2.0 * arr.activations.sum() / w * in_flight * FP32_BYTES)
    total_weights = float(arr.weights.sum())
    mem_ps = np.where(has_ps, 2.0 * np.minimum(PS_REPLICATION, np.maximum(p, 1.0)) * total_weights * FP32_BYTES
                      / np.maximum(p, 1.0), 0.0)
    infeasible = np.where(mem_worker > wk.memory_bytes, 1, np.where(mem_ps > pk.memory_bytes, 2, 0))

    single = _single_machine_time_per_sample(network, cluster, config)
    epoch = dataset.epoch_fraction * dataset.samples_per_epoch / x
    single_epoch = dataset.epoch_fraction * dataset.samples_per_epoch * single

    if phase is None:  # no replicas meeting at a PS in request–reply cycles: no phase enters
        phase = (x, x)
    shape = np.broadcast_shapes(*(np.shape(a) for a in (w, r, p, k_push, k_pull, o, x)))
    b = lambda a: np.broadcast_to(np.asarray(a, dtype=float), shape)  # noqa: E731
    breakdown = Breakdown(
        compute_forward_s=b(comp.forward_s * kappa), compute_backprop_s=b(comp.backprop_s * kappa),
        compute_weight_grad_s=b(comp.weight_grad_s * kappa), compute_update_s=b(comp.update_s * kappa),
        compute_compression_s=b(select_s * kappa), compute_messages_s=b(copy_s * kappa),
        model_parallel_network_s=b(mp_s),
        ps_push_s=b(push_s), ps_pull_s=b(pull_s),
        ps_compute_s=b(np.where(has_ps, c_ps / k_push / ps_cores / np.maximum(p, 1.0), 0.0)),
        sync_straggler_s=b(straggle_s), host_wakeup_s=b(wake / k_push),
        compute_by_kind_s={k: b(v * kappa) for k, v in comp.by_kind_s.items()},
    )
    return Prediction(
        workers_per_replica=b(w), replicas=b(r), ps_machines=b(p), samples_per_s=b(x),
        epoch_time_s=b(epoch), speedup=b(single_epoch / epoch), bottleneck_code=np.broadcast_to(code, shape),
        breakdown=breakdown, time_per_sample_s=b(1.0 / x),
        bounds_samples_per_s={k: b(v) for k, v in bounds.items()}, ps_utilisation=b(ps_util),
        phase_low_samples_per_s=b(phase[0]), phase_high_samples_per_s=b(phase[1]),
        memory_bytes_per_worker=b(mem_worker), memory_bytes_per_ps=b(mem_ps),
        infeasible_code=np.broadcast_to(infeasible, shape), single_machine_epoch_time_s=float(single_epoch),
    )


def _request_reply_throughput(r: Any, p: Any, k_push: Any, k_pull: Any, own_work_s: Any, mp_s: Any, o: Any,
                              push_bits: Any, pull_bits: Any, push_own_s: Any, pull_own_s: Any,
                              ps_in_bps: float, ps_out_bps: float, duplex: str, ps_push_copy: Any,
                              ps_pull_copy: Any, c_ps: Any, ps_cores: Any, latency_s: float,
                              wake_s: Any = 0.0) -> tuple[Any, Any, Any]:
    """Samples/s of R request–reply replicas sharing the PS (docs/model.md §6, reconstructed), and
    its phase range (:func:`phase_range`): the replicas in lock step and staggered.

    Each replica cycles through its own work (``own_work_s``: compute without its PS copies;
    model-parallel exchanges; the latencies; whatever part of its push and pull — ``push_own_s``,
    ``pull_own_s``, the longer of its link and its own copies, per sample — takes longer than the
    PS's side) and three stations it shares with the other replicas: the PS's CPU (copies in and
    out and the update, c_PS per push) and its inbound and outbound ports (the part of a transfer
    its copies do not already cover; ``wake_s`` per exchange, waiting for a CPU on an oversubscribed
    shared host). Concurrent TCP transfers share a port as a processor-sharing
    queue, so this is a closed product-form network; :func:`closed_network_throughput` solves it.
    One replica gets the serial cycle; many saturate the busiest station.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        pp = np.maximum(p, 1.0)
        per = lambda v, k: v / (k * pp)  # noqa: E731 - per sample, spread over the PS machines
        copy_in, copy_out = per(ps_push_copy, k_push) / ps_cores, per(ps_pull_copy, k_pull) / ps_cores
        if duplex == "full":
            link_in, link_out = per(push_bits, k_push) / ps_in_bps, per(pull_bits, k_pull) / ps_out_bps
        else:  # one shared medium carries both directions: one station
            link_in = per(push_bits, k_push) / ps_in_bps + per(pull_bits, k_pull) / ps_out_bps
            link_out = np.zeros_like(link_in)
        d_in, d_out = np.maximum(0.0, link_in - copy_in), np.maximum(0.0, link_out - copy_out)
        d_cpu = per(c_ps, k_push) / ps_cores
        own = (np.maximum(0.0, push_own_s - (copy_in + d_in)) + np.maximum(0.0, pull_own_s - (copy_out + d_out))
               + latency_s * (1.0 / k_push + 1.0 / k_pull) + wake_s / k_push)
        z = _combine(own_work_s, mp_s, o) + own
    lo, hi = phase_range(r, z, (d_in, d_out, d_cpu))
    return closed_network_throughput(r, z, (d_in, d_out, d_cpu)), lo, hi


def phase_range(customers: Any, think_s: Any, demands_s: tuple[Any, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(lowest, highest) throughput of the closed network of :func:`closed_network_throughput` over the
    customers' phase: the asymptotic bounds N/(N·ΣD + Z) and min(N/(ΣD + Z), 1/max D) (Lazowska et al.,
    Quantitative System Performance, 1984, §5.2). With deterministic transfers sharing a port fairly, a
    lag between request–reply replicas persists: replicas in lock step meet at every station (each
    transfer takes N times as long), staggered ones never meet. Schweitzer's solution lies between them
    (docs/model.md §6); for one customer all three coincide."""
    n = np.asarray(customers, dtype=float)
    z = np.asarray(think_s, dtype=float)
    d = np.stack(np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in demands_s)))
    total, top = d.sum(0), d.max(0)
    # Demands so small (subnormal) that 1/D exceeds the largest float mean an unbounded rate: inf.
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        lo = n / (n * total + z)
        hi = np.minimum(n / (total + z), np.where(top > 0, 1.0 / top, np.inf))
    return lo, hi


def closed_network_throughput(customers: Any, think_s: Any, demands_s: tuple[Any, ...]) -> np.ndarray:
    """Throughput of a closed network of ``customers`` cycling through a delay of ``think_s`` and
    processor-sharing queues with service demands ``demands_s`` (seconds per cycle each): Schweitzer's
    approximate mean value analysis, X·(Z + Σ_k D_k / (1 − (N−1)/N·D_k·X)) = N, solved by Newton's
    method from the upper bound N / (Z + Σ D) (the left side is convex and increasing in X, so the
    iterates fall monotonically onto the root). Exact for one customer; tends to min_k 1/D_k as the
    customers grow. Vectorised over every argument."""
    n = np.asarray(customers, dtype=float)
    shape = np.broadcast_shapes(n.shape, np.shape(think_s), *(np.shape(v) for v in demands_s))
    n, z = np.broadcast_to(n, shape), np.broadcast_to(np.asarray(think_s, dtype=float), shape)
    d = np.stack([np.broadcast_to(np.asarray(v, dtype=float), shape) for v in demands_s])
    alpha = (n - 1.0) / n
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # a subnormal demand: X = inf
        x = n / (z + d.sum(0))
        pole = 1.0 / (alpha * d.max(0))
        x = np.where(np.isfinite(pole), np.minimum(x, pole * (1.0 - 1e-9)), x)
        live = np.isfinite(x) & (x > 0)
        for _ in range(200):
            a = 1.0 - alpha * d * x
            g = x * z + np.sum(x * d / a, axis=0) - n
            slope = z + np.sum(d / (a * a), axis=0)
            step = np.where(live, g / slope, 0.0)
            x = x - step
            if not np.any(np.abs(step) > 1e-13 * np.abs(x)):
                break
    return x


def _host_contention(cluster: Cluster, config: Configuration, w: Any, r: Any, p: Any,
                     threads: Any, ps_busy: Any = None) -> tuple[Any, Any]:
    """(κ for workers, κ for the PS): max(1, busy threads / host cores) when all machines share one
    host, else 1. Asynchronous workers and PS run at once; in synchronous rounds the PS works while
    the workers wait, so each side only competes with itself. ``ps_busy``: the PS's busy threads
    (default: all its cores)."""
    if cluster.host_cores is None:
        return 1.0, 1.0
    t = cluster.worker.cores if threads is None else np.minimum(np.asarray(threads, float), cluster.worker.cores)
    bg = cluster.host_background_threads
    workers = w * r * t
    ps = np.where(p > 0, p * cluster.ps.cores, 0.0) if ps_busy is None else ps_busy
    if config.mode == "sync":
        return _stretch(cluster, workers + bg), _stretch(cluster, ps + bg)
    both = _stretch(cluster, workers + ps + bg)
    return both, both


def _host_wakeup_s(cluster: Cluster, w: Any, r: Any, p: Any, threads: Any) -> Any:
    """Seconds a worker waits for a CPU after each PS exchange on a shared host (reconstructed,
    docs/model.md §4): d = ``host_wakeup_delay_s`` times min(1, max(0, n − cores)), n the ranks' threads
    (W·R·T' workers, P·cores_PS PS) plus the other programs' runnable threads. When the ranks fit one per
    core a woken rank finds a free CPU; one more and its reply arrives while another rank computes on it."""
    d = cluster.host_wakeup_delay_s
    if cluster.host_cores is None or d == 0.0:
        return 0.0
    t = cluster.worker.cores if threads is None else np.minimum(np.asarray(threads, float), cluster.worker.cores)
    ranks = w * r * t + np.where(p > 0, p * cluster.ps.cores, 0.0) + cluster.host_background_threads
    return d * np.clip(ranks - float(cluster.host_cores), 0.0, 1.0)


def _stretch(cluster: Cluster, busy: Any) -> Any:
    """max(1, busy / cores) for time-sharing, times 1 + σ_h·min(1, (busy − 1)/(cores − 1)) for threads
    that slow each other down on shared caches and memory even when each has its own core."""
    cores = float(cluster.host_cores or 1)
    share = np.clip((busy - 1.0) / max(cores - 1.0, 1.0), 0.0, 1.0)
    return np.maximum(1.0, busy / cores) * (1.0 + cluster.host_corun_slowdown * share)


def _link_time(up_bits: Any, down_bits: Any, up_bps: float, down_bps: float, duplex: str) -> Any:
    """Time to move ``up_bits`` out and ``down_bits`` in: the slower direction when full duplex,
    both in turn on a shared (half-duplex) medium."""
    if duplex == "full":
        return np.maximum(up_bits / up_bps, down_bits / down_bps)
    return up_bits / up_bps + down_bits / down_bps


def _single_machine_time_per_sample(network: Network, cluster: Cluster, config: Configuration) -> float:
    """Seconds per sample of the baseline: one machine, no PS, everything local (speed-up = 1)."""
    arr = network_arrays(network)
    spatial = choose_spatial(arr, config.partitioning)
    comp = worker_compute(arr, cluster.worker, np.asarray(1.0), config.threads,
                          np.zeros_like(arr.weights), spatial, float(config.local_batch_samples))
    kappa, _ = _host_contention(cluster, config, 1.0, 1.0, 0.0, config.threads)
    return float(comp.total_s * kappa)


def predict(network: Network, cluster: Cluster, dataset: Dataset | None = None,
            config: Configuration | None = None) -> Prediction:
    """The prediction for one configuration: :func:`evaluate` on a single element (0-d arrays)."""
    return evaluate(network, cluster, dataset, config)


__all__ = ["BOTTLENECKS", "evaluate", "predict"]
