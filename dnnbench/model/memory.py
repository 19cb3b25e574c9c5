"""Stage 5: memory per machine, and whether a configuration fits (docs/model.md §6 and §11, reconstructed).

    M_worker = weights + gradients + optimizer state + activations + workspace
    weights  = Ψ·v (+ Ψ_wn·4 B),  gradients = Ψ·v,  state = Ψ·s   (Ψ: the weights of the machine's slice;
                                                              Ψ_wn: the weights its weight norms compute)
    M_PS     = 2·min(3, P)·|W| / P · 4 B          (Adam's shards are replicated on 3 machines)

v is 4 bytes in fp32 and tf32 and 2 in mixed precision, whose fp32 master weights add 4 bytes to the
state; the optimizer's state is 0 (SGD), 4 (momentum) or 8 (Adam) bytes per weight (ZeRO, Rajbhandari
et al. SC'20: mixed-precision Adam keeps 2Ψ + 2Ψ + 12Ψ). ZeRO stage 1 divides the state over the R
replicas, stage 2 also the gradients, stage 3 also the weights. Activations: on a CPU machine the
activations and errors of the T samples in flight, 2·A/W·T·4 B (conv layers split by rows hold their
weights whole); on an accelerator the values kept for backward (NetworkArrays.kept_values: what
autograd saves) for the b-sample mini-batch, A_kept/W·b·v, plus the two largest errors in flight, one
byte per value of each dropout's mask, and the device's reserved workspace. In mixed precision the kept
values autocast leaves in fp32 (layer and group norms' and softmax's outputs, values an fp32 parameter
entered: embeddings, position tables, learned scales) take 4 bytes, and a product that reads such a
value keeps a 16-bit copy of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..specs import Cluster, Configuration
from ..units import FP32_BYTES
from .arrays import NetworkArrays
from .compute import OPTIMIZER_STATE_BYTES, VALUE_BYTES
from .knobs import Knobs
from .volumes import Layout

#: Adam (OSDI'14): PS shards are replicated on 3 machines.
PS_REPLICATION = 3
#: Bytes per value of a dropout mask kept for backward on an accelerator (a bool tensor).
DROPOUT_MASK_BYTES = 1.0
#: The parts of a worker's memory, in stacking order.
MEMORY_PARTS = ("weights", "gradients", "optimizer_state", "activations", "workspace")
#: Their words for people.
MEMORY_LABELS = {"weights": "weights", "gradients": "gradients", "optimizer_state": "optimizer state",
                 "activations": "activations kept for backward", "workspace": "workspace (reserved)"}


@dataclass(frozen=True)
class Memory:
    """Bytes per worker (by part) and per PS machine, the worker's capacity, and why a configuration
    cannot run (0: it can; index into prediction.INFEASIBLE_REASONS)."""

    worker_bytes: np.ndarray
    ps_bytes: np.ndarray
    infeasible_code: np.ndarray
    worker_parts_bytes: dict[str, np.ndarray]
    worker_capacity_bytes: float


def ps_bytes(total_weights: float, p: Any) -> Any:
    """M_PS of P ≥ 1 PS machines holding ``total_weights`` weights."""
    pp = np.maximum(p, 1.0)
    return 2.0 * np.minimum(PS_REPLICATION, pp) * total_weights * FP32_BYTES / pp


def worker_capacity_bytes(cluster: Cluster) -> float:
    """The memory one worker may fill: its accelerator's, else its own."""
    acc = cluster.worker.accelerator
    return float(acc.memory_bytes if acc is not None else cluster.worker.memory_bytes)


def worker_parts(arr: NetworkArrays, cluster: Cluster, config: Configuration, k: Knobs,
                 lay: Layout) -> dict[str, np.ndarray]:
    """M_worker by part (:data:`MEMORY_PARTS`), arrays over the knobs."""
    acc = cluster.worker.accelerator
    split_weights = float(np.sum(np.where(lay.spatial, 0.0, arr.weights)))
    whole_weights = float(np.sum(np.where(lay.spatial, arr.weights, 0.0)))
    psi = whole_weights + split_weights / k.w
    v = VALUE_BYTES[config.precision] if acc is not None else FP32_BYTES
    master = FP32_BYTES if v < FP32_BYTES else 0.0
    state = OPTIMIZER_STATE_BYTES[config.optimizer] + master
    r = np.maximum(k.r, 1.0)
    stage = config.zero_stage
    weights = psi * v / (r if stage >= 3 else 1.0)
    # A weight-normalised layer also holds the weight it computes from v and g (fp32) through the step.
    normed = float(np.sum(np.where(lay.spatial, arr.normed_weights, 0.0)))
    weights = weights + (normed + float(np.sum(np.where(lay.spatial, 0.0, arr.normed_weights))) / k.w) * FP32_BYTES
    grads = psi * v / (r if stage >= 2 else 1.0)
    opt = psi * state / (r if stage >= 1 else 1.0)
    if acc is None:
        acts = 2.0 * arr.activations.sum() / k.w * k.in_flight * FP32_BYTES
        work = np.zeros(())
    else:
        b = float(config.local_batch_samples)
        biggest = float(np.sort(arr.out_values)[-2:].sum()) if arr.out_values.size else 0.0
        # Dropout masks are kept as one byte per value (CUDA's native_dropout). In mixed precision the
        # values autocast leaves in fp32 take 4 bytes, and products keep 16-bit copies of fp32 inputs.
        kept = arr.kept_values.sum() + arr.input_kept_values
        if v < FP32_BYTES:
            kept = kept + arr.autocast_fp32_kept_values * (FP32_BYTES - v) / v + arr.autocast_copy_values
        acts = ((kept + biggest) * v + arr.mask_values.sum() * DROPOUT_MASK_BYTES) / k.w * b
        work = np.asarray(float(acc.reserved_bytes))
    return {"weights": np.asarray(weights), "gradients": np.asarray(grads), "optimizer_state": np.asarray(opt),
            "activations": np.asarray(acts), "workspace": work}


def memory(arr: NetworkArrays, cluster: Cluster, config: Configuration, k: Knobs, lay: Layout) -> Memory:
    parts = worker_parts(arr, cluster, config, k, lay)
    worker = (parts["weights"] + parts["gradients"] + parts["optimizer_state"] + parts["activations"]
              + parts["workspace"])
    ps = np.where(k.has_ps, ps_bytes(float(arr.weights.sum()), k.p), 0.0)
    capacity = worker_capacity_bytes(cluster)
    code = np.where(worker > capacity, 1, np.where(ps > cluster.ps.memory_bytes, 2, 0))
    return Memory(worker_bytes=worker, ps_bytes=ps, infeasible_code=code, worker_parts_bytes=parts,
                  worker_capacity_bytes=capacity)
