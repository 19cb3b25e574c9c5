"""Heterogeneous clusters: place replicas' partitions and PS shards on machines of different classes.

Reconstructed (docs/model.md §7). For a configuration (W, R, P) every machine gets one role: a
partition of a replica, or a PS machine.
- Roles: every split of the P PS machines over the machine classes is tried (exact; a handful of
  splits for a few classes). The remaining machines are workers, grouped into replicas
  fastest-with-fastest: a replica runs at the pace of its slowest partition, and sorted grouping
  maximises the sum of the replicas' paces.
- PS shards: the model's weights are cut into 1 MiB shards (Adam, OSDI'14) and placed on the PS
  machines: slot j of machine i costs (j + 1)/c_i, c_i the machine's capacity, and the shards take the
  cheapest slots (:func:`place_shards`): the least-loaded-first placement, whose largest load time (the
  bottleneck) is minimal for identical shards.
- Throughput (asynchronous mode): X = min(Σ_j 1/T_rep,j, min_i c_i·S/n_i) with n_i of the S shards on
  PS machine i.
The report compares with a uniform cluster of the same configuration on the reference machine (the
cluster's ``worker``/``ps`` types).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import SpecError
from ..model import evaluate
from ..specs import Cluster, Configuration, Dataset, Network


@dataclass(frozen=True)
class Placement:
    workers_per_replica: int
    replicas: int
    ps_machines: int
    replica_classes: tuple[tuple[str, ...], ...]  # the class of each partition of each replica
    ps_classes: tuple[str, ...]
    samples_per_s: float
    epoch_time_s: float
    uniform_epoch_time_s: float  # the same (W, R, P) on the uniform reference cluster

    @property
    def heterogeneity_cost(self) -> float:
        """Relative epoch-time cost against the uniform cluster (0.1 = 10 % slower)."""
        return self.epoch_time_s / self.uniform_epoch_time_s - 1.0

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "heterogeneity_cost": self.heterogeneity_cost}


def _class_cluster(cluster: Cluster, i: int) -> Cluster:
    c = cluster.classes[i]
    # A machine that computes on an accelerator alone has no CPU rate to serve as a PS: the cluster's
    # PS type stands in, and its capacity as a PS is 0 (:func:`_rates`).
    ps = c.machine if c.machine.has_cpu_rate else cluster.ps
    return cluster.evolve(worker=c.machine, worker_nic=c.nic, ps=ps, ps_nic=c.nic, classes=())


def _rates(network: Network, cluster: Cluster, dataset: Dataset, config: Configuration, w: int, r: int, p: int
           ) -> tuple[np.ndarray, np.ndarray]:
    """Per class: replica time per sample (s) as a worker, and samples/s as one PS machine."""
    t_rep, cap = [], []
    for i in range(len(cluster.classes)):
        pred = evaluate(network, _class_cluster(cluster, i), dataset, config, workers_per_replica=w,
                        replicas=r, ps_machines=max(p, 1))
        b = pred.bounds_samples_per_s
        t_rep.append(r / float(b["replicas"]))
        serves = cluster.classes[i].machine.has_cpu_rate
        cap.append(min(float(b["ps_network_in"]), float(b["ps_network_out"]), float(b["ps_compute"])) / max(p, 1)
                   if serves else 0.0)
    return np.asarray(t_rep), np.asarray(cap)


SHARD_BYTES = 2**20  # Adam (OSDI'14): PS state in 1 MB shards


def place_shards(capacity: np.ndarray, n_shards: int) -> np.ndarray:
    """Shards per PS machine minimising the bottleneck max n_i / c_i: the ``n_shards`` cheapest of the
    slots (j + 1)/c_i (see above). Every machine first takes floor(S·c_i/Σc) shards, slots that all cost
    at most S/Σc and so are among the S cheapest; each of the fewer than P left goes to the machine
    whose next slot is cheapest. O(P²) however many shards (an assignment solver over S × P·S slots
    took minutes for ImageNet-22K's 8,000 shards)."""
    c = np.asarray(capacity, dtype=float)
    n: np.ndarray = np.floor(n_shards * c / c.sum()).astype(int)
    for _ in range(n_shards - int(n.sum())):
        n[int(np.argmin((n + 1) / c))] += 1
    return n


def _splits(counts: list[int], p: int) -> list[tuple[int, ...]]:
    """Every way to take ``p`` machines from classes with ``counts`` machines each."""
    if not counts:
        return [()] if p == 0 else []
    out: list[tuple[int, ...]] = []
    for k in range(min(counts[0], p) + 1):
        out.extend((k, *rest) for rest in _splits(counts[1:], p - k))
    return out


def place(network: Network, cluster: Cluster, dataset: Dataset, config: Configuration) -> Placement:
    """Assign the machines of a heterogeneous ``cluster`` to the roles of ``config`` (asynchronous)."""
    if not cluster.classes:
        raise SpecError("cluster.classes", [], "is empty: placement needs a heterogeneous cluster")
    if config.mode != "async":
        raise SpecError("mode", config.mode, "is not supported for heterogeneous placement yet (use 'async')")
    w, r, p = config.workers_per_replica, config.replicas, config.ps_machines
    if w * r + p > cluster.machines:
        raise SpecError("configuration", (w, r, p), f"needs {w * r + p} machines, the cluster has {cluster.machines}")
    t_rep, cap = _rates(network, cluster, dataset, config, w, r, p)
    counts = [c.count for c in cluster.classes]
    n_shards = max(1, int(np.ceil(sum(c.weights for c in network.layer_counts) * 4 / SHARD_BYTES)))
    splits = _splits(counts, p)
    if len(splits) > 100_000:
        raise SpecError("cluster.classes", len(cluster.classes), "has too many classes to try every PS split")
    best = None
    for split in splits:
        ps = np.repeat(np.arange(len(counts)), split)
        left = np.repeat(np.arange(len(counts)), [c - k for c, k in zip(counts, split, strict=True)])
        workers = left[np.argsort(t_rep[left], kind="stable")][: w * r]  # the fastest remaining machines
        groups = workers.reshape(r, w)
        x_rep = float(np.sum(1.0 / t_rep[groups].max(axis=1)))
        if p and not np.any(cap[ps] > 0):
            x_ps = 0.0  # no machine of this split can serve as a PS
        elif p:
            shards = place_shards(cap[ps], n_shards)
            used = shards > 0
            x_ps = float(np.min(cap[ps][used] * n_shards / shards[used]))
        else:
            x_ps = np.inf
        x = min(x_rep, x_ps)
        if best is None or x > best[0]:
            best = (x, groups, ps)
    if best is None:  # unreachable: a split exists whenever w·r + p <= machines
        raise SpecError("ps_machines", p, "cannot be taken from the cluster's classes")
    x, groups, ps = best
    epoch = dataset.epoch_fraction * dataset.samples_per_epoch / x
    uniform_epoch = float(evaluate(network, cluster.evolve(classes=()), dataset, config).epoch_time_s)
    names = [c.name for c in cluster.classes]
    return Placement(w, r, p, tuple(tuple(names[i] for i in g) for g in groups), tuple(names[i] for i in ps),
                     x, epoch, uniform_epoch)


def optimize_heterogeneous(network: Network, cluster: Cluster, dataset: Dataset, config: Configuration | None = None,
                           budget_machines: int | None = None) -> Placement:
    """The best placement over W, R and P = N − W·R (every machine used), by enumeration of (W, R)."""
    config = config or Configuration()
    n = budget_machines or cluster.machines
    best: Placement | None = None
    for w in range(1, n + 1):
        for r in range(1, n // w + 1):
            p = n - w * r
            if p == 0 and r > 1:
                continue
            pl = place(network, cluster, dataset, config.evolve(workers_per_replica=w, replicas=r, ps_machines=p))
            if best is None or pl.epoch_time_s < best.epoch_time_s:
                best = pl
    if best is None:  # pragma: no cover - n >= 1 always yields (1, 1, n - 1)
        raise SpecError("machines", n, "admits no configuration")
    return best
