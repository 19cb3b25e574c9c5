"""Stage 0: the configuration knobs of one :func:`~dnnbench.model.evaluate` call as arrays.

W, R, P, k_push, k_pull, threads and overlap may each be an array; they broadcast against each other,
and every stage of the model is vectorised over them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..specs import Cluster, Configuration


@dataclass(frozen=True)
class Knobs:
    """The numeric configuration, as arrays that broadcast (docs/model.md §2, symbols)."""

    w: np.ndarray  # W: machines per replica
    r: np.ndarray  # R: replicas
    p: np.ndarray  # P: PS machines
    k_push: np.ndarray  # samples between pushes
    k_pull: np.ndarray  # samples between pulls (= k_push in synchronous rounds)
    threads: Any  # T: threads per machine (None: one per core), scalar or array
    in_flight: np.ndarray  # samples in flight on one machine: one per thread
    overlap: np.ndarray  # o: overlap of compute and communication, 0..1

    @property
    def has_ps(self) -> np.ndarray:
        return self.p > 0


def knobs(config: Configuration, cluster: Cluster, given: dict[str, Any]) -> Knobs:
    """The knobs: each from ``given`` (field name -> array) where given, else from ``config``."""

    def pick(name: str, default: Any = None) -> np.ndarray:
        value = given.get(name)
        return np.asarray(getattr(config, name) if default is None and value is None
                          else default if value is None else value, dtype=float)

    k_push = pick("push_interval_samples")
    threads = given["threads"] if given.get("threads") is not None else config.threads
    return Knobs(
        w=pick("workers_per_replica"), r=pick("replicas"), p=pick("ps_machines"), k_push=k_push,
        # One synchronous round: k samples, push, apply, pull (docs/model.md §6).
        k_pull=k_push if config.mode == "sync" else pick("pull_interval_samples"),
        threads=threads,
        in_flight=pick("threads", cluster.worker.cores if config.threads is None else config.threads),
        overlap=pick("overlap"),
    )
