"""Stage 4: samples per second of the whole cluster, which bound binds, and the PS's load
(docs/model.md §6): asynchronous replicas beside the PS (overlapped or request–reply) or synchronous
rounds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..specs import Cluster, Configuration
from ..units import BITS_PER_BYTE
from .compute import effective_cores
from .costs import Costs, combine, payload_bits_per_s
from .knobs import Knobs
from .shared_host import HostEffects
from .stragglers import straggler_factor
from .volumes import Volumes

_INF = np.inf


@dataclass(frozen=True)
class Throughput:
    """The cluster's samples/s and what limits it."""

    samples_per_s: np.ndarray
    bottleneck_code: np.ndarray  # index into prediction.BOTTLENECKS
    bounds_samples_per_s: dict[str, np.ndarray]  # each bound's samples/s
    ps_utilisation: np.ndarray  # x over the PS's own capacity
    phase_low_samples_per_s: np.ndarray  # request–reply replicas in lock step (elsewhere = samples_per_s)
    phase_high_samples_per_s: np.ndarray  # request–reply replicas staggered
    straggler_s: Any  # per sample: a synchronous round's wait for its slowest replica
    ps_compute_s: np.ndarray  # per sample: the PS's CPU time on one replica's work, over its P machines


@dataclass(frozen=True)
class Stations:
    """What a PS's side costs per sample, spread over its P machines (request–reply and sync rounds)."""

    ps_cores: Any  # the PS machine's effective cores, after the shared host's stretch
    in_bps: float  # the PS NIC's inbound payload rate
    out_bps: float  # outbound


def stations(cluster: Cluster, host: HostEffects) -> Stations:
    out_bps, in_bps = payload_bits_per_s(cluster.ps_nic)
    return Stations(float(effective_cores(cluster.ps, None)) / host.ps_stretch, in_bps, out_bps)


def ps_compute_s(k: Knobs, cost: Costs, st: Stations) -> np.ndarray:
    """The PS's CPU seconds per sample of one replica, spread over its P machines."""
    return np.where(k.has_ps, cost.ps_core_s(k) / k.k_push / st.ps_cores / np.maximum(k.p, 1.0), 0.0)


def throughput(cluster: Cluster, config: Configuration, k: Knobs, vol: Volumes, cost: Costs,
               host: HostEffects) -> Throughput:
    """:func:`async_throughput` or :func:`sync_throughput` as the configuration's mode says."""
    with np.errstate(divide="ignore", invalid="ignore"):
        if config.mode == "async":
            return async_throughput(cluster, config, k, vol, cost, host)
        return sync_throughput(cluster, config, k, vol, cost, host)


def async_throughput(cluster: Cluster, config: Configuration, k: Knobs, vol: Volumes, cost: Costs,
                     host: HostEffects) -> Throughput:
    """x = min(R / t_replica, PS inbound, PS outbound, PS CPU) (docs/model.md §6); request–reply
    replicas wait for the PS instead and queue at it (:func:`request_reply_throughput`)."""
    st = stations(cluster, host)
    has, kappa = k.has_ps, host.worker_stretch
    worker_s, net_s = cost.worker_s * kappa, cost.network_s
    c_ps = cost.ps_core_s(k)
    x_rep = k.r / (combine(worker_s, net_s, k.overlap) + host.wakeup_s / k.k_push)
    if cluster.ps_nic.duplex == "full":
        x_in = np.where(has & (vol.push_bits > 0), k.p * st.in_bps * k.k_push / vol.push_bits, _INF)
        x_out = np.where(has & (vol.pull_bits > 0), k.p * st.out_bps * k.k_pull / vol.pull_bits, _INF)
    else:  # a shared medium carries both directions
        per_sample = vol.push_bits / k.k_push / st.in_bps + vol.pull_bits / k.k_pull / st.out_bps
        x_in = np.where(has & (per_sample > 0), k.p / per_sample, _INF)
        x_out = np.full_like(x_in, _INF)
    x_cpu = np.where(has & (c_ps > 0), k.p * st.ps_cores * k.k_push / c_ps, _INF)
    x = np.minimum(np.minimum(x_rep, x_in), np.minimum(x_out, x_cpu))
    lo, hi = x, x
    if config.ps_exchange == "request_reply":
        x_rr, lo_rr, hi_rr = request_reply_throughput(cluster, k, vol, cost, host, st)
        x = np.where(has, x_rr, x)
        lo, hi = np.where(has, lo_rr, x), np.where(has, hi_rr, x)
    # Which bound binds, and inside the replica which resource dominates its time.
    rep_code = np.where(worker_s >= net_s, 0, np.where(cost.model_parallel_s >= cost.push_s + cost.pull_s, 1, 2))
    which = np.argmin(np.stack(np.broadcast_arrays(x_rep, x_in, x_out, x_cpu)), axis=0)
    ps_cap = np.minimum(np.minimum(x_in, x_out), x_cpu)
    return Throughput(
        samples_per_s=x, bottleneck_code=np.where(which == 0, rep_code, which + 2),
        bounds_samples_per_s={"replicas": x_rep, "ps_network_in": x_in, "ps_network_out": x_out,
                              "ps_compute": x_cpu},
        ps_utilisation=np.where(has & np.isfinite(ps_cap), x / ps_cap, 0.0),
        phase_low_samples_per_s=lo, phase_high_samples_per_s=hi, straggler_s=np.zeros(()),
        ps_compute_s=ps_compute_s(k, cost, st))


def request_reply_throughput(cluster: Cluster, k: Knobs, vol: Volumes, cost: Costs, host: HostEffects,
                             st: Stations) -> tuple[Any, Any, Any]:
    """Samples/s of R request–reply replicas sharing the PS (docs/model.md §6, reconstructed), and
    its phase range (:func:`phase_range`): the replicas in lock step and staggered.

    Each replica cycles through its own work (compute without its PS copies; model-parallel
    exchanges; the latencies; whatever part of its push and pull, the longer of its link and its own
    copies, takes longer than the PS's side; the wait for a CPU of a shared host) and three stations
    it shares with the other replicas: the PS's CPU (copies in and out and the update, C_PS per push)
    and its inbound and outbound ports (the part of a transfer its copies do not already cover).
    Concurrent TCP transfers share a port as a processor-sharing queue, so this is a closed
    product-form network; :func:`closed_network_throughput` solves it. One replica gets the serial
    cycle; many saturate the busiest station.
    """
    wn, kappa = cluster.worker_nic, host.worker_stretch
    up_bps, down_bps = payload_bits_per_s(wn)
    copy_w = cluster.worker.copy_time_s_per_byte / BITS_PER_BYTE / cost.cores * kappa  # worker CPU per bit
    push_m, pull_m = vol.push_bits_per_sample, vol.pull_bits_per_sample
    push_own_s = np.maximum(push_m / up_bps, push_m * copy_w)
    pull_own_s = np.maximum(pull_m / down_bps, pull_m * copy_w)
    own_work_s = cost.worker_s * kappa - cost.ps_copy_s * kappa
    pp = np.maximum(k.p, 1.0)
    def per(v: Any, kk: Any) -> Any:  # per sample, spread over the PS machines
        return v / (kk * pp)

    copy_in = per(cost.ps_push_copy_core_s, k.k_push) / st.ps_cores
    copy_out = per(cost.ps_pull_copy_core_s, k.k_pull) / st.ps_cores
    if cluster.ps_nic.duplex == "full":
        link_in, link_out = per(vol.push_bits, k.k_push) / st.in_bps, per(vol.pull_bits, k.k_pull) / st.out_bps
    else:  # one shared medium carries both directions: one station
        link_in = per(vol.push_bits, k.k_push) / st.in_bps + per(vol.pull_bits, k.k_pull) / st.out_bps
        link_out = np.zeros_like(link_in)
    d_in, d_out = np.maximum(0.0, link_in - copy_in), np.maximum(0.0, link_out - copy_out)
    d_cpu = per(cost.ps_core_s(k), k.k_push) / st.ps_cores
    own = (np.maximum(0.0, push_own_s - (copy_in + d_in)) + np.maximum(0.0, pull_own_s - (copy_out + d_out))
           + wn.latency_s * (1.0 / k.k_push + 1.0 / k.k_pull) + host.wakeup_s / k.k_push)
    z = combine(own_work_s, cost.model_parallel_s, k.overlap) + own
    lo, hi = phase_range(k.r, z, (d_in, d_out, d_cpu))
    return closed_network_throughput(k.r, z, (d_in, d_out, d_cpu)), lo, hi


def sync_throughput(cluster: Cluster, config: Configuration, k: Knobs, vol: Volumes, cost: Costs,
                    host: HostEffects) -> Throughput:
    """Synchronous rounds (docs/model.md §6): the replicas' k samples, then push, apply and pull.

    A worker copies its push while the PS copies it in (and likewise the pull): the copies overlap
    each other and the link, so each transfer takes the longest of them. The round waits for the
    slowest of the R replicas' k samples (reconstructed). A push takes the longer of the worker's
    upload of its slice and the PS's intake of all replicas' pushes (R/P replicas per PS machine);
    pulls likewise in the other direction.
    """
    st = stations(cluster, host)
    wk, wn = cluster.worker, cluster.worker_nic
    has, kappa, kp, w = k.has_ps, host.worker_stretch, k.k_push, k.w
    up_bps, down_bps = payload_bits_per_s(wn)
    worker_s = cost.worker_s * kappa
    t_mean = kp * combine(worker_s - cost.ps_copy_s * kappa, cost.model_parallel_s, k.overlap)
    t_samples = t_mean * straggler_factor(np.where(has, k.r, 1.0), wk.step_time_cv, kp,
                                          float(config.local_batch_samples))
    fan_in = np.where(has, k.r / np.maximum(k.p, 1.0), 0.0)
    push_bits, pull_bits = vol.push_bits, vol.pull_bits
    push_worker, push_ps = push_bits / w / up_bps, fan_in * push_bits / st.in_bps
    pull_worker, pull_ps = pull_bits / w / down_bps, fan_in * pull_bits / st.out_bps
    copy = wk.copy_time_s_per_byte
    push_cpu = np.maximum(push_bits / w / BITS_PER_BYTE * copy / cost.cores * kappa,
                          fan_in * cost.ps_push_copy_core_s / st.ps_cores)
    pull_cpu = np.maximum(pull_bits / w / BITS_PER_BYTE * copy / cost.cores * kappa,
                          fan_in * cost.ps_pull_copy_core_s / st.ps_cores)
    t_push = np.where(has, np.maximum(np.maximum(push_worker, push_ps), push_cpu) + wn.latency_s, 0.0)
    t_apply = np.where(has, fan_in * cost.ps_apply_core_s / st.ps_cores, 0.0)
    t_pull = np.where(has, np.maximum(np.maximum(pull_worker, pull_ps), pull_cpu) + wn.latency_s, 0.0)
    t_round = t_samples + t_push + t_apply + t_pull + host.wakeup_s
    x = k.r * kp / t_round
    worker_nic = np.where(push_worker + pull_worker >= push_ps + pull_ps, t_push + t_pull, 0.0)
    parts = np.stack(np.broadcast_arrays(
        kp * worker_s, kp * cost.model_parallel_s, worker_nic,
        np.where(worker_nic > 0, 0.0, t_push), np.where(worker_nic > 0, 0.0, t_pull), t_apply))
    ps_cap = np.where(has, k.r * kp / (t_push + t_apply + t_pull), _INF)
    return Throughput(
        samples_per_s=x, bottleneck_code=np.argmax(parts, axis=0),
        bounds_samples_per_s={"round_samples": k.r * kp / t_samples,
                              "ps_push": np.where(has, k.r * kp / t_push, _INF),
                              "ps_pull": np.where(has, k.r * kp / t_pull, _INF),
                              "ps_compute": np.where(has & (t_apply > 0), k.r * kp / t_apply, _INF)},
        ps_utilisation=np.where(has & np.isfinite(ps_cap), x / ps_cap, 0.0),
        phase_low_samples_per_s=x, phase_high_samples_per_s=x, straggler_s=(t_samples - t_mean) / kp,
        ps_compute_s=ps_compute_s(k, cost, st))


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
    return np.asarray(x)
