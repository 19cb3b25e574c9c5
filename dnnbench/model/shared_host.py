"""The optional shared-host layer (docs/model.md §9, reconstructed): effects that exist only because
every machine of an emulated cluster is a process on one host (``Cluster.shared_host``).

Three effects, each the identity without a shared host (:data:`NO_SHARED_HOST`):

    κ   = max(1, n / cores) · (1 + σ_h · min(1, (n − 1)/(cores − 1)))   compute stretch, n busy threads
    d_w = d · min(1, max(0, n_ranks − cores))                          wait for a CPU after a PS reply
                                                                      or in an all-reduce step

Asynchronous workers and PS run at once and share κ; in synchronous rounds the PS works while the
workers wait, so each side competes only with itself. An asynchronous PS counts as x·C_PS/k_push busy
threads (its CPU demand at throughput x), x from a first pass in which the PS takes no core.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..specs import Cluster, Configuration, SharedHost
from .costs import Costs, combine, payload_bits_per_s
from .knobs import Knobs
from .volumes import Volumes


@dataclass(frozen=True)
class HostEffects:
    """κ for the workers' and the PS's compute, and the wait for a CPU per PS exchange (seconds)."""

    worker_stretch: Any
    ps_stretch: Any
    wakeup_s: Any


#: A cluster of separate machines: nothing stretched, nothing waited for.
NO_SHARED_HOST = HostEffects(1.0, 1.0, 0.0)


def stretch(host: SharedHost, busy: Any) -> Any:
    """κ(n): max(1, n / cores) for time-sharing, times 1 + σ_h·min(1, (n − 1)/(cores − 1)) for threads
    that slow each other down on shared caches and memory even when each has its own core."""
    cores = float(host.cores)
    share = np.clip((busy - 1.0) / max(cores - 1.0, 1.0), 0.0, 1.0)
    return np.maximum(1.0, busy / cores) * (1.0 + host.corun_slowdown * share)


def _worker_threads(cluster: Cluster, threads: Any) -> Any:
    return cluster.worker.cores if threads is None else np.minimum(np.asarray(threads, float), cluster.worker.cores)


def contention(cluster: Cluster, config: Configuration, k: Knobs, ps_busy: Any = None) -> tuple[Any, Any]:
    """(κ of the workers, κ of the PS) on the shared host; ``ps_busy``: the PS's busy threads
    (default: all its cores)."""
    host = cluster.shared_host
    if host is None:
        return 1.0, 1.0
    workers = k.w * k.r * _worker_threads(cluster, k.threads)
    ps = np.where(k.p > 0, k.p * cluster.ps.cores, 0.0) if ps_busy is None else ps_busy
    bg = host.background_threads
    if config.mode == "sync":
        return stretch(host, workers + bg), stretch(host, ps + bg)
    both = stretch(host, workers + ps + bg)
    return both, both


def no_spare_core(cluster: Cluster, k: Knobs) -> Any:
    """Whether the ranks' compute threads W·R·T' fill the shared host's cores (docs/model.md §9): then a
    collective's CPU work (loopback copies and reductions) has no core to run beside backward. Always
    False for a real cluster (no ``shared_host``)."""
    host = cluster.shared_host
    if host is None:
        return False
    return np.asarray(k.w * k.r * _worker_threads(cluster, k.threads) >= host.cores)


def wakeup_s(cluster: Cluster, k: Knobs) -> Any:
    """d_w per PS exchange: ``wakeup_delay_s`` times min(1, max(0, n − cores)), n the ranks' threads
    (W·R·T' workers, P·cores_PS PS) plus the other programs' runnable threads. When the ranks fit one
    per core a woken rank finds a free CPU; one more and its reply arrives while another computes."""
    host = cluster.shared_host
    if host is None or host.wakeup_delay_s == 0.0:
        return 0.0
    ranks = (k.w * k.r * _worker_threads(cluster, k.threads) + np.where(k.p > 0, k.p * cluster.ps.cores, 0.0)
             + host.background_threads)
    return host.wakeup_delay_s * np.clip(ranks - float(host.cores), 0.0, 1.0)


def allreduce_wakeup_s(cluster: Cluster, k: Knobs) -> Any:
    """t_wake of one all-reduce step on the shared host: the step's collective wakes each rank's
    communication thread once, which waits d_w (:func:`wakeup_s`) for a CPU when the ranks' threads
    outnumber the cores; once awake it carries the step's buckets and ring steps without sleeping
    again (as a PS round's exchange). 0 without a host or with one rank."""
    host = cluster.shared_host
    if host is None or host.wakeup_delay_s == 0.0:
        return 0.0
    return np.where(np.asarray(k.r, dtype=float) > 1, wakeup_s(cluster, k), 0.0)


def _async_ps_busy(cluster: Cluster, config: Configuration, k: Knobs, vol: Volumes, cost: Costs) -> Any:
    """The asynchronous PS's busy threads: its CPU demand x·C_PS/k_push (at most P·cores), x from a
    first pass in which the PS takes no core (an upper bound on x, so on the PS's share)."""
    k0, _ = contention(cluster, config, k, ps_busy=0.0)
    ps_out_bps, ps_in_bps = payload_bits_per_s(cluster.ps_nic)
    has = k.has_ps
    x0 = k.r / combine(cost.worker_s * k0, cost.network_s, k.overlap)
    with np.errstate(divide="ignore", invalid="ignore"):
        x0 = np.minimum(x0, np.where(has & (vol.push_bits > 0), k.p * ps_in_bps * k.k_push / vol.push_bits, np.inf))
        x0 = np.minimum(x0, np.where(has & (vol.pull_bits > 0), k.p * ps_out_bps * k.k_pull / vol.pull_bits, np.inf))
    return np.where(has, np.minimum(k.p * cluster.ps.cores, x0 * cost.ps_core_s(k) / k.k_push), 0.0)


def host_effects(cluster: Cluster, config: Configuration, k: Knobs, vol: Volumes, cost: Costs) -> HostEffects:
    """The shared host's effects on these configurations (:data:`NO_SHARED_HOST` without one)."""
    if cluster.shared_host is None:
        return NO_SHARED_HOST
    ps_busy = _async_ps_busy(cluster, config, k, vol, cost) if config.mode == "async" else None
    kappa, kappa_ps = contention(cluster, config, k, ps_busy)
    return HostEffects(kappa, kappa_ps, np.where(k.has_ps, wakeup_s(cluster, k), 0.0))


def alone_stretch(cluster: Cluster, config: Configuration) -> Any:
    """κ of the one-machine baseline (one worker, no PS) on the shared host; 1 without one."""
    one = Knobs(w=np.asarray(1.0), r=np.asarray(1.0), p=np.asarray(0.0), k_push=np.asarray(1.0),
                k_pull=np.asarray(1.0), threads=config.threads, in_flight=np.asarray(1.0), overlap=np.asarray(0.0))
    return contention(cluster, config, one)[0]
