"""Data parallelism by all-reduce (docs/model.md §10, reconstructed from the cited α–β costs).

Each of a replica's W machines holds a slice of the weights (all of a row-split conv layer); every
k_push samples it all-reduces its slice's gradient with the same slice of the other R − 1 replicas,
in buckets of ``bucket_bytes``, on its own NIC, synchronously. Per all-reduce of n bytes over p ranks
(α the latency per message, B the payload rate, γ the reduction's time per element):

    ring  2(p − 1)·α + 2·(p − 1)/p · n/B + (p − 1)/p · n_elems · γ        (Thakur, Rabenseifner, Gropp 2005)
    tree  2·⌈log2 p⌉·α + 2·n/B + (p − 1)/p · n_elems · γ                   (NCCL's double binary tree)

a half-duplex NIC moving both directions in turn (twice the transfer). With DDP's overlap the buckets
are reduced while backward runs: the step waits for max(last bucket, all buckets − backward).

    t_step = t_samples (k samples, the slowest of R replicas) + exposed all-reduce + wake-up
    x      = R · k / t_step
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..specs import Cluster, Configuration
from ..units import BITS_PER_BYTE
from .arrays import NetworkArrays
from .costs import Costs, combine, payload_bits_per_s
from .knobs import Knobs
from .shared_host import HostEffects
from .stragglers import straggler_factor
from .throughput import Throughput
from .volumes import Layout

#: BOTTLENECKS index of "all-reduce network" (prediction.BOTTLENECKS).
ALLREDUCE_BOTTLENECK = 6


@dataclass(frozen=True)
class AllReduceCost:
    """One machine's all-reduce per step (k_push samples of its replica)."""

    bytes_per_machine: np.ndarray  # n: the gradient bytes of its slice
    buckets: np.ndarray  # all-reduces per step
    total_s: np.ndarray  # all buckets, one after another
    last_bucket_s: np.ndarray  # the last bucket (it cannot overlap backward)


def collective_s(algorithm: str, n_bytes: Any, ranks: Any, latency_s: float, bytes_per_s: float,
                 elem_s: Any, bytes_per_elem: float, messages: Any = 1.0) -> np.ndarray:
    """Seconds of ``messages`` all-reduces moving ``n_bytes`` in all over ``ranks`` ranks (0 for one rank)."""
    p = np.asarray(ranks, dtype=float)
    n = np.asarray(n_bytes, dtype=float)
    share = (p - 1.0) / np.maximum(p, 1.0)
    reduce_s = share * n / bytes_per_elem * elem_s
    if algorithm == "ring":
        steps = 2.0 * (p - 1.0)
        wire = 2.0 * share * n / bytes_per_s
    else:
        steps = 2.0 * np.ceil(np.log2(np.maximum(p, 1.0)))
        wire = np.where(p > 1, 2.0 * n / bytes_per_s, 0.0)
    return np.asarray(np.where(p > 1, messages * steps * latency_s + wire + reduce_s, 0.0))


def allreduce_cost(arr: NetworkArrays, cluster: Cluster, config: Configuration, k: Knobs, lay: Layout,
                   cost: Costs) -> AllReduceCost:
    ar, nic = config.allreduce, cluster.worker_nic
    value_bytes = config.value_bits / BITS_PER_BYTE
    split = float(np.sum(np.where(lay.spatial, 0.0, arr.weights)))
    whole = float(np.sum(np.where(lay.spatial, arr.weights, 0.0)))
    n = (split / k.w + whole) * value_bytes
    up, down = payload_bits_per_s(nic)
    rate = min(up, down) / BITS_PER_BYTE
    if nic.duplex == "half":
        rate /= 2.0  # sending and receiving take turns on one medium
    elem_s = cluster.worker.elem_time_s / cost.cores
    buckets = np.maximum(1.0, np.ceil(n / ar.bucket_bytes))
    total = collective_s(ar.algorithm, n, k.r, nic.latency_s, rate, elem_s, value_bytes, buckets)
    # Copying every byte sent and received costs the CPU (docs/model.md §4); it runs beside the link.
    # Bytes sent and received: 2(p − 1)/p·n each way (ring) or 2·n (tree).
    each_way = 2.0 * n * ((k.r - 1.0) / np.maximum(k.r, 1.0) if ar.algorithm == "ring" else 1.0)
    copy = 2.0 * each_way * cluster.worker.copy_time_s_per_byte / cost.cores
    total = np.maximum(total, np.where(k.r > 1, copy, 0.0))
    last_n = np.minimum(n, float(ar.bucket_bytes))
    last = collective_s(ar.algorithm, last_n, k.r, nic.latency_s, rate, elem_s, value_bytes)
    return AllReduceCost(bytes_per_machine=np.asarray(n), buckets=buckets, total_s=np.asarray(total),
                         last_bucket_s=np.asarray(np.minimum(last, total)))


def allreduce_throughput(cluster: Cluster, config: Configuration, k: Knobs, cost: Costs, host: HostEffects,
                         ar: AllReduceCost) -> tuple[Throughput, np.ndarray]:
    """(throughput, exposed all-reduce seconds per sample of one replica)."""
    kappa, kp = host.worker_stretch, k.k_push
    worker_s = cost.worker_s * kappa
    t_mean = kp * combine(worker_s, cost.model_parallel_s, k.overlap)
    t_samples = t_mean * straggler_factor(k.r, cluster.worker.step_time_cv, kp, float(config.local_batch_samples))
    if config.allreduce.overlap_backward:
        backward = kp * (cost.compute.backprop_s + cost.compute.weight_grad_s) * kappa
        exposed = np.maximum(ar.last_bucket_s, ar.total_s - backward)
    else:
        exposed = ar.total_s
    exposed = np.where(k.r > 1, exposed, 0.0)
    t_step = t_samples + exposed + host.wakeup_s
    with np.errstate(divide="ignore", invalid="ignore"):
        x = k.r * kp / t_step
        parts = np.stack(np.broadcast_arrays(kp * worker_s, kp * cost.model_parallel_s, exposed))
        code = np.asarray([0, 1, ALLREDUCE_BOTTLENECK])[np.argmax(parts, axis=0)]
        bounds = {"round_samples": k.r * kp / t_samples,
                  "allreduce": np.where(exposed > 0, k.r * kp / exposed, np.inf)}
    zero = np.zeros(np.shape(x))
    tp = Throughput(samples_per_s=x, bottleneck_code=code, bounds_samples_per_s=bounds, ps_utilisation=zero,
                    phase_low_samples_per_s=x, phase_high_samples_per_s=x, straggler_s=(t_samples - t_mean) / kp,
                    ps_compute_s=zero)
    return tp, np.asarray(exposed / kp)
