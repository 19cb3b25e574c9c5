"""Stage 5: memory per machine, and whether a configuration fits (docs/model.md §6, reconstructed).

    M_worker = 2·(|W_whole| + |W_split| / W)·4 B + 2·A / W · T · 4 B
    M_PS     = 2·min(3, P)·|W| / P · 4 B          (Adam's shards are replicated on 3 machines)

weights and their deltas of the machine's slice (conv layers split by rows hold their weights whole),
activations and errors of the T samples in flight; the PS holds its replicated shards and an update
accumulator.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..specs import Cluster
from ..units import FP32_BYTES
from .arrays import NetworkArrays
from .knobs import Knobs
from .volumes import Layout

#: Adam (OSDI'14): PS shards are replicated on 3 machines.
PS_REPLICATION = 3


@dataclass(frozen=True)
class Memory:
    """Bytes per worker and per PS machine, and why a configuration cannot run (0: it can; index into
    prediction.INFEASIBLE_REASONS)."""

    worker_bytes: np.ndarray
    ps_bytes: np.ndarray
    infeasible_code: np.ndarray


def ps_bytes(total_weights: float, p: Any) -> Any:
    """M_PS of P ≥ 1 PS machines holding ``total_weights`` weights."""
    pp = np.maximum(p, 1.0)
    return 2.0 * np.minimum(PS_REPLICATION, pp) * total_weights * FP32_BYTES / pp


def memory(arr: NetworkArrays, cluster: Cluster, k: Knobs, lay: Layout) -> Memory:
    split_weights = float(np.sum(np.where(lay.spatial, 0.0, arr.weights)))
    whole_weights = float(np.sum(np.where(lay.spatial, arr.weights, 0.0)))
    worker = (2.0 * (whole_weights + split_weights / k.w) * FP32_BYTES
              + 2.0 * arr.activations.sum() / k.w * k.in_flight * FP32_BYTES)
    ps = np.where(k.has_ps, ps_bytes(float(arr.weights.sum()), k.p), 0.0)
    code = np.where(worker > cluster.worker.memory_bytes, 1, np.where(ps > cluster.ps.memory_bytes, 2, 0))
    return Memory(worker_bytes=worker, ps_bytes=ps, infeasible_code=code)
