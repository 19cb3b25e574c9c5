"""The all-reduce study's computations (notebooks/allreduce_study.ipynb): when a parameter server beats an
all-reduce and when it does not, by network size, NIC bandwidth and PS machines. Pure functions of the
specs returning plain data; the notebook shows them (docs/model.md §6 and §10).
"""

from __future__ import annotations

from typing import Any

from .. import presets
from ..counts import totals
from ..errors import SpecError
from ..model import predict
from ..optimizer import optimize
from ..specs import Cluster, Configuration, Dataset, Network
from .analysis import scale_nic_bandwidth


def best_of_each(network: Network, cluster: Cluster, dataset: Dataset, config: Configuration,
                 budget: int) -> dict[str, Any]:
    """The optimizer's best with the PS and with an all-reduce at ``budget`` machines, and the ratio."""
    out: dict[str, Any] = {}
    for scheme in ("ps", "allreduce"):
        try:
            best = optimize(network, cluster, dataset, budget, config, top_k=1, data_parallels=[scheme]).best
        except SpecError:  # nothing of this scheme fits the budget
            out[scheme] = None
            continue
        out[scheme] = {"epoch_time_s": best.epoch_time_s, "speedup": best.speedup, "bottleneck": best.bottleneck,
                       "workers_per_replica": best.workers_per_replica, "replicas": best.replicas,
                       "ps_machines": best.ps_machines}
    ps, ar = out["ps"], out["allreduce"]
    out["ps_over_allreduce"] = (ps["epoch_time_s"] / ar["epoch_time_s"]) if ps and ar else None
    out["winner"] = (None if not (ps or ar) else "allreduce" if not ps else "ps" if not ar else
                     "allreduce" if ar["epoch_time_s"] < ps["epoch_time_s"] else "ps")
    return out


def by_network(names: list[str], cluster: Cluster, config: Configuration, budget: int) -> list[dict[str, Any]]:
    """:func:`best_of_each` for every network (preset names or specs), with its weights."""
    rows = []
    for name in names:
        net = presets.network(name)
        ds = presets.default_dataset_for(net)
        row = {"network": net.name, "weights": totals(net).weights, **best_of_each(net, cluster, ds, config, budget)}
        rows.append(row)
    return rows


def by_bandwidth(network: Network, cluster: Cluster, dataset: Dataset, config: Configuration, budget: int,
                 factors: list[float]) -> list[dict[str, Any]]:
    """:func:`best_of_each` with every NIC's bandwidth scaled by each factor."""
    return [{"factor": f, "worker_nic_bits_per_s": cluster.worker_nic.upload_bits_per_s * f,
             **best_of_each(network, scale_nic_bandwidth(cluster, f), dataset, config, budget)} for f in factors]


def ps_machines_to_match(network: Network, cluster: Cluster, dataset: Dataset, config: Configuration,
                         replicas: int, ps_options: list[int]) -> dict[str, Any]:
    """R one-machine replicas synchronised by a PS of P machines (synchronous rounds, as an all-reduce
    is) for every P, against the same R replicas by an all-reduce: the fewest P that matches it."""
    ar = predict(network, cluster, dataset, config.evolve(data_parallel="allreduce", replicas=replicas,
                                                           ps_machines=0, workers_per_replica=1)).item()
    rows = []
    for p in ps_options:
        ps_config = config.evolve(data_parallel="ps", mode="sync", replicas=replicas, ps_machines=p,
                                  workers_per_replica=1, zero_stage=0)
        item = predict(network, cluster, dataset, ps_config).item()
        rows.append({"ps_machines": p, "samples_per_s": item["samples_per_s"], "bottleneck": item["bottleneck"]})
    match = next((r["ps_machines"] for r in rows if r["samples_per_s"] >= ar["samples_per_s"]), None)
    return {"replicas": replicas, "allreduce_samples_per_s": ar["samples_per_s"],
            "allreduce_bottleneck": ar["bottleneck"], "ps": rows, "ps_machines_to_match": match}


def memory_on_devices(network: Network, cluster: Cluster, dataset: Dataset, config: Configuration, replicas: int,
                      batches: list[int], precision: str) -> list[dict[str, Any]]:
    """Memory per device and samples/s of R one-device replicas all-reducing every mini-batch with
    Adam, for every ZeRO stage and per-device mini-batch (docs/model.md §11): what fits, and how fast."""
    rows = []
    for zero in range(4):
        for b in batches:
            cfg = config.evolve(data_parallel="allreduce", replicas=replicas, ps_machines=0, workers_per_replica=1,
                                precision=precision, optimizer="adam", zero_stage=zero, local_batch_samples=b,
                                push_interval_samples=b)
            item = predict(network, cluster, dataset, cfg).item()
            rows.append({"zero_stage": zero, "batch": b, "memory_bytes": item["memory_bytes_per_worker"],
                         "parts_bytes": item["memory_bytes_per_worker_parts"],
                         "capacity_bytes": item["memory_capacity_bytes_per_worker"], "feasible": item["feasible"],
                         "samples_per_s": item["samples_per_s"], "bottleneck": item["bottleneck"]})
    return rows


def largest_batch(rows: list[dict[str, Any]], zero_stage: int) -> int | None:
    """The largest per-device mini-batch that fits at ``zero_stage`` (None: none does)."""
    fits = [r["batch"] for r in rows if r["zero_stage"] == zero_stage and r["feasible"]]
    return max(fits) if fits else None
