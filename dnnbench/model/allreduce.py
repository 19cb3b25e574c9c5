"""Data parallelism by all-reduce (docs/model.md §10, reconstructed from the cited α–β costs).

Each of a replica's W machines holds a slice of the weights (all of a row-split conv layer); every
k_push samples it all-reduces its slice's gradient with the same slice of the other R − 1 replicas,
in buckets of ``bucket_bytes``, on its own NIC, synchronously. Per all-reduce of n bytes over p ranks
(α the latency per message, B the payload rate, γ the reduction's time per element):

    ring  2(p − 1)·α + 2·(p − 1)/p · n/B + (p − 1)/p · n_elems · γ        (Thakur, Rabenseifner, Gropp 2005)
    tree  2·⌈log2 p⌉·α + 2·n/B + (p − 1)/p · n_elems · γ                   (NCCL's double binary tree)
    hierarchical, g ranks per node on N nodes (modern.md §4):
          2(g − 1)·α_in + 2(g − 1)/g · n/B_in + 2(N − 1)·α + 2(N − 1)/N · (n/g)/B + the reduction

On nodes (:mod:`.fabric`) a flat ring or tree spanning nodes moves at min(B_in, g·B), B a device's
share of its node's NICs, and NCCL's tree latency is 2·((g − 1)·α_in + ⌈log2 N⌉·α).

a half-duplex NIC moving both directions in turn (twice the transfer).

Buckets (reconstructed after PyTorch DDP's reducer): walking the layers in the order backward reaches
them (last layer first), a bucket takes whole gradient tensors (a layer's bias before its weight) until
it holds ``bucket_bytes`` or more, and is ready when backward has finished its earliest layer; the
buckets are reduced one after another, in that order. With DDP's overlap the reduction runs while
backward does, so bucket i ends at

    F_i = max(F_{i−1}, ready_i) + c_i,    ready_i = f_i · t_backward,    exposed = F_last − t_backward

f_i the fraction of backward done when bucket i is ready (from the layers' backward times on one
machine of the replica, W = 1) and c_i its all-reduce; exposed ≥ c_last, the bucket of the first
layers, which no backward is left to hide.

    t_step = t_samples (k samples, the slowest of R replicas) + exposed all-reduce + DDP's own work
             (its copies of the gradients into the buckets and back, the division by R) + wake-up
    x      = R · k / t_step
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..specs import Cluster, Configuration
from ..units import BITS_PER_BYTE
from .arrays import NetworkArrays
from .costs import Costs, combine, payload_bits_per_s
from .fabric import Fabric
from .knobs import Knobs
from .shared_host import HostEffects, no_spare_core
from .stragglers import straggler_factor
from .throughput import Throughput
from .volumes import Layout, compression_ratios

#: BOTTLENECKS index of "all-reduce network" (prediction.BOTTLENECKS).
ALLREDUCE_BOTTLENECK = 6


@dataclass(frozen=True)
class BucketPlan:
    """DDP's buckets of one replica's gradient, in the order they are reduced (see the module doc)."""

    bytes: np.ndarray  # gradient bytes of each bucket (the whole replica's, at W = 1)
    ready_fraction: np.ndarray  # f_i: the fraction of backward done when bucket i is ready

    @property
    def share(self) -> np.ndarray:
        """Each bucket's fraction of the gradient."""
        total = float(self.bytes.sum())
        return self.bytes / total if total > 0 else np.full(self.bytes.shape, 1.0 / max(len(self.bytes), 1))


def bucket_plan(layer_tensor_bytes: Sequence[Sequence[float]], layer_backward_s: Any, bucket_bytes: float
                ) -> BucketPlan:
    """Buckets of whole gradient tensors in backward order (the last layer's first, a layer's last
    registered tensor first), each closed once it holds ``bucket_bytes`` or more (PyTorch's
    ``compute_bucket_assignment_by_size``); a bucket is ready when backward has passed the earliest
    layer it holds. ``layer_tensor_bytes``: each layer's parameter tensors' bytes, in registration order.
    ``layer_backward_s``: each layer's back-prop and weight gradient, which set the fractions (all zero:
    every bucket ready at the end)."""
    back = np.asarray(layer_backward_s, dtype=float)
    total = float(back.sum())
    done = np.cumsum(back[::-1])[::-1]  # backward done once layer l is finished: layers l..L−1
    sizes, ready = [], []
    size, frac = 0.0, 1.0
    for layer in range(len(layer_tensor_bytes) - 1, -1, -1):
        for tensor in reversed(layer_tensor_bytes[layer]):
            if tensor <= 0:
                continue
            size += float(tensor)
            frac = float(done[layer]) / total if total > 0 else 1.0
            if size >= bucket_bytes:
                sizes.append(size)
                ready.append(frac)
                size = 0.0
    if size > 0 or not sizes:
        sizes.append(size)
        ready.append(frac if size > 0 else 1.0)
    return BucketPlan(bytes=np.asarray(sizes), ready_fraction=np.minimum(np.asarray(ready), 1.0))


@dataclass(frozen=True)
class AllReduceCost:
    """One machine's all-reduce per step (k_push samples of its replica)."""

    bytes_per_machine: np.ndarray  # n: the gradient bytes of its slice
    buckets: np.ndarray  # all-reduces per step
    total_s: np.ndarray  # all buckets, one after another
    bucket_s: tuple[np.ndarray, ...]  # c_i: each bucket's all-reduce, in plan order (they sum to total_s)
    ready_fraction: np.ndarray  # f_i of each bucket (:class:`BucketPlan`)
    bucket_copy_s: np.ndarray  # DDP's own work: the gradients copied into their buckets and back, divided by R

    @property
    def last_bucket_s(self) -> np.ndarray:
        """The last bucket (the first layers'): it cannot overlap backward."""
        return self.bucket_s[-1]

    def exposed_s(self, backward_s: Any) -> np.ndarray:
        """What the step waits for after a backward of ``backward_s``: F_last − t_backward."""
        end = np.zeros(np.shape(backward_s))
        for c, f in zip(self.bucket_s, self.ready_fraction, strict=True):
            end = np.maximum(end, f * backward_s) + c
        return np.asarray(np.maximum(end - backward_s, self.last_bucket_s))


def collective_s(algorithm: str, n_bytes: Any, ranks: Any, latency_s: Any, bytes_per_s: Any,
                 elem_s: Any, bytes_per_elem: float, messages: Any = 1.0, per_node: Any = 1.0,
                 intra_bytes_per_s: float = np.inf, intra_latency_s: float = 0.0) -> np.ndarray:
    """Seconds of ``messages`` all-reduces moving ``n_bytes`` in all over ``ranks`` ranks (0 for one rank).

    ``per_node`` (g) of the ranks share a node, linked by ``intra_bytes_per_s``; between nodes each rank
    has ``bytes_per_s`` and ``latency_s``. With g = 1 this is the flat α–β cost of the module doc.
    """
    p = np.asarray(ranks, dtype=float)
    n = np.asarray(n_bytes, dtype=float)
    g = np.minimum(np.asarray(per_node, dtype=float), np.maximum(p, 1.0))
    nodes = np.ceil(np.maximum(p, 1.0) / g)
    spans = nodes > 1
    share = (p - 1.0) / np.maximum(p, 1.0)
    reduce_s = share * n / bytes_per_elem * elem_s
    # A flat ring or tree across nodes runs at the slower of the intra link and the g ranks' NICs.
    flat_rate = np.where(spans, np.minimum(intra_bytes_per_s, g * bytes_per_s), intra_bytes_per_s)
    alpha = np.where(spans, latency_s, intra_latency_s)
    if algorithm == "ring":
        steps = 2.0 * (p - 1.0) * alpha
        wire = 2.0 * share * n / flat_rate
    elif algorithm == "tree":
        steps = 2.0 * ((g - 1.0) * intra_latency_s + np.ceil(np.log2(nodes)) * latency_s)
        wire = 2.0 * n / flat_rate
    else:  # hierarchical: reduce-scatter in the node, all-reduce n/g between nodes, all-gather in the node
        inner = (g - 1.0) / g
        outer = (nodes - 1.0) / nodes
        steps = 2.0 * (g - 1.0) * intra_latency_s + 2.0 * (nodes - 1.0) * latency_s
        with np.errstate(invalid="ignore"):
            wire = (np.where(g > 1, 2.0 * inner * n / intra_bytes_per_s, 0.0)
                    + np.where(nodes > 1, 2.0 * outer * (n / g) / bytes_per_s, 0.0))
    return np.asarray(np.where(p > 1, messages * steps + wire + reduce_s, 0.0))


def allgather_s(piece_bytes: Any, ranks: Any, latency_s: Any, bytes_per_s: Any, messages: Any = 1.0,
                per_node: Any = 1.0, intra_bytes_per_s: float = np.inf, intra_latency_s: float = 0.0) -> np.ndarray:
    """Seconds of a ring all-gather in which each of ``ranks`` ranks contributes ``piece_bytes``:
    (p − 1)·α per message and (p − 1) pieces received, at the flat rate of :func:`collective_s`."""
    p = np.asarray(ranks, dtype=float)
    g = np.minimum(np.asarray(per_node, dtype=float), np.maximum(p, 1.0))
    spans = np.ceil(np.maximum(p, 1.0) / g) > 1
    rate = np.where(spans, np.minimum(intra_bytes_per_s, g * bytes_per_s), intra_bytes_per_s)
    alpha = np.where(spans, latency_s, intra_latency_s)
    return np.asarray(np.where(p > 1, messages * (p - 1.0) * alpha + (p - 1.0) * piece_bytes / rate, 0.0))


#: ZeRO's traffic per step relative to an all-reduce (Rajbhandari et al., SC'20): stages 1 and 2 move
#: 2Ψ like plain data parallelism (reduce-scatter, then all-gather), stage 3 moves 3Ψ.
ZERO_TRAFFIC = (1.0, 1.0, 1.0, 1.5)


def allreduce_cost(arr: NetworkArrays, cluster: Cluster, config: Configuration, k: Knobs, lay: Layout,
                   cost: Costs, fab: Fabric) -> AllReduceCost:
    ar, nic = config.allreduce, cluster.worker_nic
    value_bytes = config.value_bits / BITS_PER_BYTE
    split = float(np.sum(np.where(lay.spatial, 0.0, arr.weights)))
    whole = float(np.sum(np.where(lay.spatial, arr.weights, 0.0)))
    n = (split / k.w + whole) * value_bytes
    up, down = payload_bits_per_s(nic)
    rate = min(up, down) / BITS_PER_BYTE * fab.nic_share
    if nic.duplex == "half":
        rate = rate / 2.0  # sending and receiving take turns on one medium
    acc = cluster.worker.accelerator
    # The reduction reads two values and writes one: on a device at its memory bandwidth.
    elem_s = (3.0 * value_bytes / acc.memory_bytes_per_s if acc is not None
              else cluster.worker.elem_time_s / cost.cores)
    tensors = [[t * value_bytes for t in layer] for layer in arr.tensors] or [[w] for w in arr.weights * value_bytes]
    plan = bucket_plan(tensors, _layer_backward_s(arr, cluster, config), ar.bucket_bytes)
    buckets = np.asarray(float(len(plan.bytes)))
    zero = ZERO_TRAFFIC[config.zero_stage]
    g, b_in, a_in = fab.group_per_node, fab.intra_bytes_per_s, fab.intra_latency_s
    if config.compression.method != "none":
        # Compressed gradients cannot be summed on the way: every rank all-gathers the others' pieces
        # (top-k, random-k, quantised), then sums them, after selecting its own (docs/model.md §10).
        ratio, _, select_ops = compression_ratios(config, k.r)
        elems = n / value_bytes
        density = config.compression.density
        gather = allgather_s(n * ratio, k.r, nic.latency_s, rate, buckets, g, b_in, a_in)
        work = (select_ops + (k.r - 1.0) * density) * elems * elem_s
        total = zero * (gather + np.where(k.r > 1, work, 0.0))
    else:
        total = zero * collective_s(ar.algorithm, n, k.r, nic.latency_s, rate, elem_s, value_bytes, buckets, g, b_in,
                                    a_in)
    # Copying every byte sent and received costs the CPU (docs/model.md §4); it runs beside the link.
    # Bytes sent and received: 2(p − 1)/p·n each way (ring) or 2·n (tree).
    each_way = 2.0 * n * ((k.r - 1.0) / np.maximum(k.r, 1.0) if ar.algorithm != "tree" else 1.0)
    if config.compression.method != "none":  # an all-gather of the compressed pieces
        each_way = (k.r - 1.0) * n * compression_ratios(config, k.r)[0]
    copy = zero * 2.0 * each_way * cluster.worker.copy_time_s_per_byte / cost.cores
    total = np.maximum(total, np.where(k.r > 1, copy, 0.0))
    # Each bucket's all-reduce: its share of n; the reduction time over the plan (latencies, copy floor,
    # ZeRO and compression included) is split in proportion to what each bucket costs alone.
    if config.compression.method != "none":
        alone = [share * np.ones(np.shape(total)) for share in plan.share]
    else:
        alone = [collective_s(ar.algorithm, n * share, k.r, nic.latency_s, rate, elem_s, value_bytes, 1.0, g, b_in,
                              a_in) for share in plan.share]
    raw = np.sum(alone, axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.where(raw > 0, total / raw, 0.0)
    # DDP copies each gradient into its bucket as backward hands it over, divides the bucket by R, and
    # copies it back out after the reduction (reconstructed from PyTorch's reducer): in the training
    # thread, hidden by nothing. On a device every pass reads and writes its memory.
    bucket_copy = (6.0 * n / acc.memory_bytes_per_s if acc is not None
                   else 2.0 * n * cluster.worker.copy_time_s_per_byte / cost.cores + n / value_bytes * elem_s)
    return AllReduceCost(bytes_per_machine=np.asarray(n), buckets=buckets, total_s=np.asarray(total),
                         bucket_s=tuple(np.asarray(c * scale) for c in alone), ready_fraction=plan.ready_fraction,
                         bucket_copy_s=np.asarray(zero * bucket_copy))


def _layer_backward_s(arr: NetworkArrays, cluster: Cluster, config: Configuration) -> np.ndarray:
    """Each layer's back-prop and weight gradient on one machine holding the whole replica (W = 1): what
    sets when DDP's buckets are ready (:func:`bucket_plan`)."""
    from .compute import layer_parts

    none = np.zeros_like(arr.weights)
    parts = layer_parts(arr, cluster.worker, np.asarray(1.0), config.threads, none, none.astype(bool),
                        float(config.local_batch_samples), config.precision, config.optimizer)
    return np.asarray(parts.backprop_s + parts.weight_grad_s)


def allreduce_throughput(cluster: Cluster, config: Configuration, k: Knobs, cost: Costs, host: HostEffects,
                         ar: AllReduceCost) -> tuple[Throughput, np.ndarray]:
    """(throughput, exposed all-reduce seconds per sample of one replica)."""
    kappa, kp = host.worker_stretch, k.k_push
    worker_s = cost.worker_s * kappa
    t_mean = kp * combine(worker_s, cost.model_parallel_s, k.overlap)
    t_samples = t_mean * straggler_factor(k.r, cluster.worker.step_time_cv, kp, float(config.local_batch_samples))
    if config.allreduce.overlap_backward:
        backward = kp * (cost.compute.backprop_s + cost.compute.weight_grad_s) * kappa
        exposed = ar.exposed_s(backward)
        # Emulation only (docs/model.md §9): with every core of a shared host busy, none of it hides.
        exposed = np.where(no_spare_core(cluster, k), ar.total_s, exposed)
    else:
        exposed = ar.total_s
    exposed = np.where(k.r > 1, exposed + ar.bucket_copy_s, 0.0)
    t_step = t_samples + exposed + host.wakeup_s  # the waits of every message on a shared host (§9)
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
