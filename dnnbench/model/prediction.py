"""Result values of the model: a named time breakdown and a prediction, both arrays over configurations."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

#: Names of the binding bounds, indexed by ``Prediction.bottleneck_code``.
BOTTLENECKS = (
    "worker compute",
    "model-parallel network",
    "worker NIC (PS traffic)",
    "PS network in",
    "PS network out",
    "PS compute",
    "all-reduce network",
)

#: The additive per-sample parts of :class:`Breakdown`, in stacking order, with the words a person reads
#: (legends, explanations).
PART_LABELS: dict[str, str] = {
    "compute_forward": "compute: forward",
    "compute_backprop": "compute: back-prop",
    "compute_weight_grad": "compute: weight gradients",
    "compute_update": "compute: local update",
    "compute_compression": "compute: compression",
    "compute_messages": "compute: message copies",
    "model_parallel_network": "model-parallel network",
    "ps_push": "PS push",
    "ps_pull": "PS pull",
    "ps_compute": "PS compute",
    "sync_straggler": "sync: waiting for the slowest replica",
    "host_wakeup": "shared host: waiting for a CPU after a message",
    "allreduce": "all-reduce (not hidden by backward)",
}

#: Why a configuration cannot run, indexed by ``Prediction.infeasible_code`` (0: it can).
INFEASIBLE_REASONS = (
    "",
    "worker memory",
    "PS memory",
)


@dataclass(frozen=True)
class Breakdown:
    """Per-sample time of one replica's resources, by named part (seconds per sample, per replica).

    ``serial_s`` is the plain sum; ``overlapped_s`` is what the model charges once compute and
    communication overlap as configured (docs/model.md §5-6).
    """

    compute_forward_s: np.ndarray
    compute_backprop_s: np.ndarray
    compute_weight_grad_s: np.ndarray
    compute_update_s: np.ndarray
    compute_compression_s: np.ndarray
    compute_messages_s: np.ndarray
    model_parallel_network_s: np.ndarray
    ps_push_s: np.ndarray
    ps_pull_s: np.ndarray
    ps_compute_s: np.ndarray
    # A synchronous round's wait for its slowest replica beyond the mean compute (docs/model.md §6).
    sync_straggler_s: np.ndarray
    # A worker woken by its PS reply waiting for a CPU of an oversubscribed shared host (docs/model.md §9).
    host_wakeup_s: np.ndarray
    # The all-reduce time a step waits for, beyond what overlaps backward (docs/model.md §10).
    allreduce_s: np.ndarray
    compute_by_kind_s: dict[str, np.ndarray] = field(default_factory=dict)

    def parts(self) -> dict[str, np.ndarray]:
        """The additive parts (without the by-kind view, which re-splits compute)."""
        return {f.name[: -len("_s")]: getattr(self, f.name) for f in fields(self)
                if f.name != "compute_by_kind_s"}

    @property
    def compute_s(self) -> np.ndarray:
        return np.asarray(self.compute_forward_s + self.compute_backprop_s + self.compute_weight_grad_s
                + self.compute_update_s + self.compute_compression_s + self.compute_messages_s)

    @property
    def serial_s(self) -> np.ndarray:
        return np.asarray(sum(self.parts().values()))


@dataclass(frozen=True)
class Prediction:
    """The model's answer for an array of configurations (all fields broadcast to one shape)."""

    workers_per_replica: np.ndarray
    replicas: np.ndarray
    ps_machines: np.ndarray
    samples_per_s: np.ndarray
    epoch_time_s: np.ndarray
    speedup: np.ndarray
    bottleneck_code: np.ndarray
    breakdown: Breakdown  # per sample of one replica
    time_per_sample_s: np.ndarray  # 1 / samples_per_s: the cluster's time per sample
    bounds_samples_per_s: dict[str, np.ndarray]
    ps_utilisation: np.ndarray
    # Request–reply replicas of an asynchronous PS (docs/model.md §6): samples/s if they meet at the
    # PS's stations in lock step (low) or never (high); samples_per_s lies between. Elsewhere both equal it.
    phase_low_samples_per_s: np.ndarray
    phase_high_samples_per_s: np.ndarray
    memory_bytes_per_worker: np.ndarray
    memory_bytes_per_ps: np.ndarray
    infeasible_code: np.ndarray
    single_machine_epoch_time_s: float
    # memory_bytes_per_worker by part (weights, gradients, optimizer_state, activations, workspace)
    memory_parts_bytes_per_worker: dict[str, np.ndarray] = field(default_factory=dict)
    memory_capacity_bytes_per_worker: float = float("inf")  # the device's (else the machine's) memory
    # p10–p90 of time_per_sample_s, epoch_time_s, samples_per_s and speedup from the compute model's
    # error band (docs/model.md §12); empty when the worker machine has no band.
    interval: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)

    @property
    def feasible(self) -> np.ndarray:
        return np.asarray(self.infeasible_code == 0)

    @property
    def machines(self) -> np.ndarray:
        return np.asarray(self.workers_per_replica * self.replicas + self.ps_machines)

    @property
    def bottleneck(self) -> np.ndarray:
        return np.asarray(np.asarray(BOTTLENECKS, dtype=object)[self.bottleneck_code])

    @property
    def infeasible_reason(self) -> np.ndarray:
        return np.asarray(np.asarray(INFEASIBLE_REASONS, dtype=object)[self.infeasible_code])

    def item(self, index: Any = ()) -> dict[str, Any]:
        """One configuration as plain Python values with the stable, unit-bearing JSON keys."""

        def at(a: np.ndarray) -> Any:
            v = np.asarray(a)[index] if np.ndim(a) else np.asarray(a)
            return v.item()

        code = int(at(self.bottleneck_code))
        infeasible = int(at(self.infeasible_code))
        return {
            "workers_per_replica": int(at(self.workers_per_replica)),
            "replicas": int(at(self.replicas)),
            "ps_machines": int(at(self.ps_machines)),
            "machines": int(at(self.machines)),
            "epoch_time_s": float(at(self.epoch_time_s)),
            "samples_per_s": float(at(self.samples_per_s)),
            "speedup": float(at(self.speedup)),
            "bottleneck": BOTTLENECKS[code],
            "breakdown_s_per_sample": {k: float(at(v)) for k, v in self.breakdown.parts().items()},
            "compute_by_kind_s_per_sample": {k: float(at(v)) for k, v in self.breakdown.compute_by_kind_s.items()},
            "bounds_samples_per_s": {k: float(at(v)) for k, v in self.bounds_samples_per_s.items()},
            "ps_utilisation": float(at(self.ps_utilisation)),
            "phase_range_samples_per_s": [float(at(self.phase_low_samples_per_s)),
                                          float(at(self.phase_high_samples_per_s))],
            "memory_bytes_per_worker": float(at(self.memory_bytes_per_worker)),
            "memory_bytes_per_ps": float(at(self.memory_bytes_per_ps)),
            "memory_bytes_per_worker_parts": {k: float(at(v)) for k, v in self.memory_parts_bytes_per_worker.items()},
            "memory_capacity_bytes_per_worker": self.memory_capacity_bytes_per_worker,
            "feasible": infeasible == 0,
            "infeasible_reason": INFEASIBLE_REASONS[infeasible] or None,
            "infeasible_detail": self.infeasible_detail(index) if infeasible else None,
            "interval_p10_p90": ({k: [float(at(lo)), float(at(hi))] for k, (lo, hi) in self.interval.items()}
                                 if self.interval else None),
        }

    def infeasible_detail(self, index: Any = ()) -> str:
        """What does not fit and by how much, in words ('' when it fits)."""
        from ..fmt import nbytes as fmt_bytes

        def at(a: np.ndarray) -> float:
            return float(np.asarray(a)[index] if np.ndim(a) else np.asarray(a))

        code = int(at(self.infeasible_code))
        if code == 0:
            return ""
        if code == 2:
            return (f"PS memory: each PS machine needs {fmt_bytes(at(self.memory_bytes_per_ps))} for its "
                    "replicated shards")
        need, cap = at(self.memory_bytes_per_worker), self.memory_capacity_bytes_per_worker
        parts = {k: at(v) for k, v in self.memory_parts_bytes_per_worker.items()}
        words = ", ".join(f"{k.replace('_', ' ')} {fmt_bytes(v)}" for k, v in
                          sorted(parts.items(), key=lambda kv: -kv[1]) if v > 0)
        return (f"worker memory: needs {fmt_bytes(need)} ({words}) of {fmt_bytes(cap)}, "
                f"{fmt_bytes(need - cap)} over")
