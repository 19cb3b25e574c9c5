"""The computations behind the Adam-style studies (MNIST, ImageNet-22K), as JSON-ready data.

The study notebooks are thin: every number they plot or explain comes from a function here, which
in turn only calls the model and the optimizer (docs/model.md §3-7; the model is reconstructed).
Each function returns plain dicts of lists and floats so the notebook can both plot it and write it
to its results JSON. Unbounded values (an infinite PS bound) become ``None`` in :func:`json_ready`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..counts import describe
from ..errors import SpecError
from ..fileio import json_ready as json_ready  # results JSON: one definition, re-exported for the notebooks
from ..specs import Cluster, Configuration, Dataset, Machine, MacTimes, Network, PeakRate
from ..specs.base import Spec

SpecLike = str | dict | Spec


# ---- specs from parameters ------------------------------------------------------------------------

def resolve_specs(network: SpecLike, cluster: SpecLike, dataset: SpecLike | None = None,
                  configuration: dict | None = None) -> tuple[Network, Cluster, Dataset, Configuration]:
    """Specs from study parameters: a preset name, a spec file path, a dict (nested YAML) or a spec.

    ``dataset`` None or "" means the network's own data set. Errors are one-line ``SpecError``s
    whose field path starts with the parameter name (``cluster.worker.cores: ...``).
    """
    from .. import presets

    net = _resolve(Network, network, "network", presets.network)
    cl = _resolve(Cluster, cluster, "cluster", presets.cluster)
    ds = (presets.default_dataset_for(net) if dataset in (None, "")
          else _resolve(Dataset, dataset, "dataset", presets.dataset))
    cfg = Configuration.build(dict(configuration or {}), where="configuration")
    return net, cl, ds, cfg


def _resolve(cls: type[Spec], value: Any, where: str, loader: Any) -> Any:
    if isinstance(value, cls):
        return value
    if isinstance(value, dict):
        return cls.build(value, where=where)
    if isinstance(value, str):
        return loader(value)
    raise SpecError(where, value, f"is not valid: expected a preset name, a spec file or a mapping for {cls.__name__}")


# ---- 1. counts and where the time goes -------------------------------------------------------------

def layer_table(network: Network) -> dict[str, Any]:
    """Per-layer shapes, weights and MACs (``counts.describe``) plus each layer's share of the MACs."""
    data = describe(network)
    total = max(1, int(data["totals"]["macs_training"]))  # type: ignore[index]
    for row in data["layers"]:  # type: ignore[union-attr]
        macs = row["macs_forward"] + row["macs_backprop"] + row["macs_weight_grad"]
        row["macs_training"] = macs
        row["macs_share"] = macs / total
    return data


def time_split(network: Network, cluster: Cluster, dataset: Dataset, config: Configuration) -> dict[str, Any]:
    """Where one sample's time goes for ``config``: by phase and resource, and compute by layer kind.

    Returns the model's item (``Prediction.item()``) for the configuration, so every key is the
    model's own name (``breakdown_s_per_sample``, ``compute_by_kind_s_per_sample``, ...).
    """
    from ..model import predict

    return predict(network, cluster, dataset, config).item()


# ---- 2. model parallelism -------------------------------------------------------------------------

def without_cache_effect(cluster: Cluster) -> Cluster:
    """The same cluster whose machines gain nothing when a slice fits in cache (cache_speedup = 1)."""
    return cluster.evolve(worker=cluster.worker.evolve(cache_speedup=1.0),
                          ps=cluster.ps.evolve(cache_speedup=1.0))


def model_parallel(network: Network, cluster: Cluster, dataset: Dataset, config: Configuration,
                   max_workers: int) -> dict[str, Any]:
    """Speed-up of one replica against W = 1..max_workers, in four variants.

    ``speedup``: the cluster as given, feature-map partitioning; ``speedup_no_cache``: the same
    without the cache effect; ``speedup_spatial``: row-strip (spatial) partitioning of conv layers;
    ``speedup_no_cache_vs_cached_baseline``: the no-cache curve measured against the cached single
    machine, so both curves share one baseline. Each speed-up is relative to one machine of the
    cluster it runs on unless said otherwise.
    """
    from ..model import evaluate

    w = np.arange(1, max_workers + 1, dtype=float)
    base = config.evolve(replicas=1, ps_machines=0)

    def run(cl: Cluster, cfg: Configuration) -> Any:
        return evaluate(network, cl, dataset, cfg, workers_per_replica=w, replicas=1.0, ps_machines=0.0)

    fm = run(cluster, base.evolve(partitioning="feature-map"))
    nc = run(without_cache_effect(cluster), base.evolve(partitioning="feature-map"))
    sp = run(cluster, base.evolve(partitioning="spatial"))
    peak = int(np.argmax(fm.speedup))
    return {
        "workers_per_replica": w.astype(int).tolist(),
        "speedup": fm.speedup.tolist(),
        "speedup_no_cache": nc.speedup.tolist(),
        "speedup_no_cache_vs_cached_baseline": (fm.single_machine_epoch_time_s / nc.epoch_time_s).tolist(),
        "speedup_spatial": sp.speedup.tolist(),
        "epoch_time_s": fm.epoch_time_s.tolist(),
        "bottleneck": fm.bottleneck.tolist(),
        "compute_s_per_sample": fm.breakdown.compute_s.tolist(),
        "network_s_per_sample": fm.breakdown.model_parallel_network_s.tolist(),
        "peak_workers": int(w[peak]),
        "peak_speedup": float(fm.speedup[peak]),
        "super_linear_workers": w[fm.speedup > w * (1 + 1e-9)].astype(int).tolist(),
    }


# ---- 3. data parallelism and PS provisioning ------------------------------------------------------

def data_parallel(network: Network, cluster: Cluster, dataset: Dataset, config: Configuration,
                  max_replicas: int, ps_options: list[int], workers_per_replica: int = 1) -> dict[str, Any]:
    """Speed-up against R = 1..max_replicas replicas of W machines for each PS count in ``ps_options``.

    With too few PS machines the curve flattens where a PS bound (network in/out, compute) binds;
    ``saturation`` gives, per P, the first R at which a PS bound is the bottleneck (None if never).
    """
    from ..model import evaluate

    r = np.arange(1, max_replicas + 1, dtype=float)
    p = np.asarray(sorted(set(int(v) for v in ps_options)), dtype=float)
    rr, pp = np.meshgrid(r, p, indexing="ij")  # shape (R, P)
    cfg = config.evolve(workers_per_replica=workers_per_replica)
    pred = evaluate(network, cluster, dataset, cfg, workers_per_replica=float(workers_per_replica),
                    replicas=rr, ps_machines=pp)
    ps_bound = pred.bottleneck_code >= 3  # PS network in / out / compute (model.prediction.BOTTLENECKS)
    curves = {}
    for j, pv in enumerate(p.astype(int)):
        hit = np.flatnonzero(ps_bound[:, j])
        curves[str(pv)] = {
            "speedup": pred.speedup[:, j].tolist(),
            "epoch_time_s": pred.epoch_time_s[:, j].tolist(),
            "bottleneck": pred.bottleneck[:, j].tolist(),
            "ps_utilisation": pred.ps_utilisation[:, j].tolist(),
            "saturation_replicas": int(r[hit[0]]) if hit.size else None,
            "max_speedup": float(pred.speedup[:, j].max()),
        }
    return {"replicas": r.astype(int).tolist(), "workers_per_replica": int(workers_per_replica),
            "ps_machines": p.astype(int).tolist(), "curves": curves}


# ---- 4. the optimizer across budgets --------------------------------------------------------------

def optimizer_choices(network: Network, cluster: Cluster, dataset: Dataset, config: Configuration,
                      budgets: list[int], top_k: int = 3) -> dict[str, Any]:
    """The optimizer's best configuration, runners-up and explanation for every budget."""
    from ..optimizer import optimize

    rows = []
    for n in budgets:
        res = optimize(network, cluster, dataset, int(n), config, top_k=top_k)
        rows.append(res.to_dict())
    return {"budgets": [int(n) for n in budgets], "results": rows}


def budget_cells(network: Network, cluster: Cluster, dataset: Dataset, config: Configuration,
                 budget: int) -> Any:
    """The model over every (W, R) split of one budget, the rest going to the PS (P = N - W·R).

    A single replica also appears with P = N - W (R = 1); cells without a PS machine to spare are
    left out. Returns a :class:`~dnnbench.model.Prediction` over the flat list of cells, the input
    of ``dnnbench.face.plots.heatmap_figure``.
    """
    from ..model import evaluate

    w_list, r_list = [], []
    for w in range(1, budget + 1):
        for r in range(1, max(1, (budget - 1) // w) + 1):
            if w * r + (1 if r > 1 else 0) <= budget:
                w_list.append(w)
                r_list.append(r)
    w = np.asarray(w_list, float)
    r = np.asarray(r_list, float)
    return evaluate(network, cluster, dataset, config, workers_per_replica=w, replicas=r,
                    ps_machines=np.maximum(budget - w * r, 0.0))


# ---- 5. sensitivity -------------------------------------------------------------------------------

def scale_nic_bandwidth(cluster: Cluster, factor: float) -> Cluster:
    """Every NIC (workers' and PS machines') ``factor`` times faster, both directions."""
    def nic(n: Any) -> Any:
        return n.evolve(upload_bits_per_s=n.upload_bits_per_s * factor,
                        download_bits_per_s=n.download_bits_per_s * factor)
    return cluster.evolve(worker_nic=nic(cluster.worker_nic), ps_nic=nic(cluster.ps_nic))


def scale_mac_time(cluster: Cluster, factor: float) -> Cluster:
    """Every machine's seconds per multiply-add multiplied by ``factor`` (element ops unchanged)."""
    def machine(m: Machine) -> Machine:
        if m.mac_time_s is not None:
            return m.evolve(mac_time_s=MacTimes(conv=m.mac_time_s.conv * factor, fc=m.mac_time_s.fc * factor))
        peak = m.peak
        if peak is None:  # unreachable: a Machine has exactly one of the two
            raise TypeError("machine has neither mac_time_s nor peak")
        return m.evolve(peak=PeakRate(macs_per_s_per_core=peak.macs_per_s_per_core / factor,
                                      efficiency_conv=peak.efficiency_conv, efficiency_fc=peak.efficiency_fc))
    return cluster.evolve(worker=machine(cluster.worker), ps=machine(cluster.ps))


def sensitivity(network: Network, cluster: Cluster, dataset: Dataset, config: Configuration, budget: int,
                nic_factors: list[float], mac_factors: list[float], update_batches: list[int]) -> dict[str, Any]:
    """How epoch time responds to NIC bandwidth, MAC time and the update batch k_push.

    The configuration is the optimizer's best for ``budget`` on the cluster as given ("fixed"); for
    NIC and MAC factors the optimizer is also re-run on the changed cluster ("reoptimised"), because
    a faster network may move the best split between replicas and PS machines. ``elasticity`` is
    d ln(epoch time) / d ln(factor) around factor 1 for the fixed configuration.
    """
    from ..model import evaluate
    from ..optimizer import optimize

    best = optimize(network, cluster, dataset, budget, config, top_k=1)
    cfg = best.configuration(config)
    out: dict[str, Any] = {"budget_machines": int(budget), "configuration": {
        "workers_per_replica": cfg.workers_per_replica, "replicas": cfg.replicas, "ps_machines": cfg.ps_machines,
        "push_interval_samples": cfg.push_interval_samples}, "base_epoch_time_s": best.best.epoch_time_s}
    for key, scale, factors in (("nic_bandwidth", scale_nic_bandwidth, nic_factors),
                                ("mac_time", scale_mac_time, mac_factors)):
        fs = sorted(set(float(f) for f in factors))
        fixed, reopt, bottleneck = [], [], []
        for f in fs:
            cl = scale(cluster, f)
            pred = evaluate(network, cl, dataset, cfg)
            fixed.append(float(pred.epoch_time_s))
            bottleneck.append(str(pred.bottleneck))
            reopt.append(optimize(network, cl, dataset, budget, config, top_k=1).best.epoch_time_s)
        out[key] = {"factors": fs, "epoch_time_s_fixed": fixed, "epoch_time_s_reoptimised": reopt,
                    "bottleneck_fixed": bottleneck, "elasticity": _elasticity(fs, fixed)}
    k = np.asarray(sorted(set(int(v) for v in update_batches)), dtype=float)
    pred = evaluate(network, cluster, dataset, cfg, push_interval_samples=k)
    out["update_batch"] = {"push_interval_samples": k.astype(int).tolist(),
                           "epoch_time_s": pred.epoch_time_s.tolist(), "bottleneck": pred.bottleneck.tolist()}
    return out


def _elasticity(factors: list[float], times: list[float]) -> float | None:
    """d log(epoch time) / d log(factor) around factor 1 (None if 1 is not among the factors' range)."""
    f = np.asarray(factors, float)
    t = np.asarray(times, float)
    if f.size < 2 or not (f.min() <= 1.0 <= f.max()):
        return None
    order = np.argsort(f)
    lf, lt = np.log(f[order]), np.log(t[order])
    i = int(np.clip(np.searchsorted(lf, 0.0), 1, lf.size - 1))
    return float((lt[i] - lt[i - 1]) / (lf[i] - lf[i - 1]))


# ---- results --------------------------------------------------------------------------------------
