"""The performance model, vectorised over configurations (docs/model.md, reconstructed).

``evaluate`` takes array-valued W, R, P, k_push, k_pull (and threads, overlap) that broadcast against
each other, plus a base :class:`Configuration` for the categorical choices, and returns one
:class:`Prediction` of arrays. ``predict`` is the same function on one configuration.

The model is a list of stages, each a pure function returning a frozen value with named parts:

    counts      network_arrays    per-layer weights, activations, MACs        (:mod:`.arrays`)    §3
    layout      layout            how each layer is split, where its update is (:mod:`.volumes`)  §5
    compute     machine_compute   a worker machine's compute by phase          (:mod:`.compute`)   §4
    volumes     volumes           bits and messages per sample                 (:mod:`.volumes`)   §5-6
    costs       costs             seconds per resource, PS core-seconds        (:mod:`.costs`)     §4-6
    shared host host_effects      the optional emulation layer (identity)      (:mod:`.shared_host`) §9
    throughput  throughput        samples/s, the binding bound                 (:mod:`.throughput`) §6
                (or, with data_parallel 'allreduce', allreduce_cost and allreduce_throughput (:mod:`.allreduce`) §10)
    memory      memory            bytes per machine, what does not fit         (:mod:`.memory`)    §6
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from .. import checks, presets
from ..specs import Cluster, Configuration, Dataset, Network
from .allreduce import allreduce_cost, allreduce_throughput
from .arrays import network_arrays
from .compute import machine_compute, worker_compute
from .costs import Costs, costs
from .fabric import fabric
from .interval import compute_band, with_interval
from .knobs import Knobs, knobs
from .memory import PS_REPLICATION, Memory, memory
from .prediction import BOTTLENECKS, Breakdown, Prediction
from .shared_host import HostEffects, allreduce_wakeup_s, alone_stretch, host_effects
from .throughput import Throughput, closed_network_throughput, phase_range, throughput
from .traffic import choose_spatial
from .volumes import layout, volumes


def evaluate(network: Network, cluster: Cluster, dataset: Dataset | None = None, config: Configuration | None = None,
             *, workers_per_replica: Any = None, replicas: Any = None, ps_machines: Any = None,
             push_interval_samples: Any = None, pull_interval_samples: Any = None,
             threads: Any = None, overlap: Any = None, interval: bool = False) -> Prediction:
    """Predict every configuration given by broadcasting the array arguments over ``config``.

    Arguments left as None take their value from ``config`` (``dataset`` None: the network's own).
    ``interval``: also the p10–p90 interval from the worker's compute error band (:mod:`.interval`;
    three evaluations instead of one, so the optimizer's searches leave it off).
    The specs may also be preset names, spec files or mappings; bad arguments (W = 0, a negative or
    fractional count, NaN) are a one-line SpecError (:mod:`dnnbench.checks`).
    """
    network, cluster, dataset, config = presets.problem(network, cluster, dataset, config)
    given = {"workers_per_replica": workers_per_replica, "replicas": replicas, "ps_machines": ps_machines,
             "push_interval_samples": push_interval_samples, "pull_interval_samples": pull_interval_samples,
             "threads": threads, "overlap": overlap}
    checks.configuration_arrays(**given)
    check_precision(cluster, config)
    if config.data_parallel == "allreduce" and ps_machines is not None and np.any(np.asarray(ps_machines) != 0):
        raise checks.fail("ps_machines", ps_machines, "must be 0 when data_parallel is 'allreduce' (the replicas "
                                                      "reduce their gradients among themselves)")
    # A product past the largest float (an extreme but valid spec) is an unbounded rate or time: inf.
    k = knobs(config, cluster, given)
    with np.errstate(over="ignore"):
        pred = _evaluate(network, cluster, dataset, config, k)
        band = compute_band(network, cluster.worker) if interval else None
        if band is None:
            return pred
        low, high = (_evaluate(network, cluster, dataset, config, k, 1.0 + f) for f in band)
    return with_interval(pred, low, high)


def _evaluate(network: Network, cluster: Cluster, dataset: Dataset, config: Configuration, k: Knobs,
              compute_scale: float = 1.0) -> Prediction:
    """:func:`evaluate` after its checks: the model's stages, in order. ``compute_scale`` multiplies
    every machine's compute (an end of the compute error band)."""
    arr = network_arrays(network)
    lay = layout(arr, config, k)
    comp = machine_compute(arr, cluster.worker, k, lay, float(config.local_batch_samples), config.precision,
                           config.optimizer)
    if compute_scale != 1.0:
        comp = comp.scaled(compute_scale)
    vol = volumes(arr, config, k, lay)
    fab = fabric(cluster, k)
    cost = costs(arr, cluster, k, lay, comp, vol, fab)
    host = host_effects(cluster, config, k, vol, cost)
    if config.data_parallel == "allreduce":
        ar = allreduce_cost(arr, cluster, config, k, lay, cost, fab)
        host = replace(host, wakeup_s=allreduce_wakeup_s(cluster, k))
        tp, allreduce_s = allreduce_throughput(cluster, config, k, cost, host, ar)
    else:
        tp, allreduce_s = throughput(cluster, config, k, vol, cost, host), np.zeros(())
    mem = memory(arr, cluster, config, k, lay)
    single_s = single_machine_time_per_sample(network, cluster, config) * compute_scale
    return prediction(dataset, k, cost, host, tp, mem, single_s, allreduce_s)


def prediction(dataset: Dataset, k: Knobs, cost: Costs, host: HostEffects, tp: Throughput, mem: Memory,
               single_s: float, allreduce_s: Any = 0.0) -> Prediction:
    """The stages' values as one :class:`Prediction`, every field broadcast to the knobs' shape."""
    x = tp.samples_per_s
    samples = dataset.epoch_fraction * dataset.samples_per_epoch
    epoch, single_epoch = samples / x, samples * single_s
    shape = np.broadcast_shapes(*(np.shape(a) for a in (k.w, k.r, k.p, k.k_push, k.k_pull, k.overlap, x)))
    def b(a: Any) -> np.ndarray:
        """``a`` at the knobs' shape, read-only (a view when it has that shape already: most parts do)."""
        arr = np.asarray(a, dtype=float)
        if arr.shape != shape:
            return np.broadcast_to(arr, shape)
        view = arr.view()
        view.flags.writeable = False
        return view

    kappa, comp = host.worker_stretch, cost.compute
    breakdown = Breakdown(
        compute_forward_s=b(comp.forward_s * kappa), compute_backprop_s=b(comp.backprop_s * kappa),
        compute_weight_grad_s=b(comp.weight_grad_s * kappa), compute_update_s=b(comp.update_s * kappa),
        compute_compression_s=b(cost.select_s * kappa), compute_messages_s=b(cost.copy_s * kappa),
        model_parallel_network_s=b(cost.model_parallel_s),
        ps_push_s=b(cost.push_s), ps_pull_s=b(cost.pull_s), ps_compute_s=b(tp.ps_compute_s),
        sync_straggler_s=b(tp.straggler_s), host_wakeup_s=b(host.wakeup_s / k.k_push),
        allreduce_s=b(allreduce_s),
        compute_by_kind_s={name: b(v * kappa) for name, v in comp.by_kind_s.items()},
    )
    return Prediction(
        workers_per_replica=b(k.w), replicas=b(k.r), ps_machines=b(k.p), samples_per_s=b(x),
        epoch_time_s=b(epoch), speedup=b(single_epoch / epoch),
        bottleneck_code=np.broadcast_to(tp.bottleneck_code, shape),
        breakdown=breakdown, time_per_sample_s=b(1.0 / x),
        bounds_samples_per_s={name: b(v) for name, v in tp.bounds_samples_per_s.items()},
        ps_utilisation=b(tp.ps_utilisation),
        phase_low_samples_per_s=b(tp.phase_low_samples_per_s),
        phase_high_samples_per_s=b(tp.phase_high_samples_per_s),
        memory_bytes_per_worker=b(mem.worker_bytes), memory_bytes_per_ps=b(mem.ps_bytes),
        memory_parts_bytes_per_worker={name: b(v) for name, v in mem.worker_parts_bytes.items()},
        memory_capacity_bytes_per_worker=mem.worker_capacity_bytes,
        infeasible_code=np.broadcast_to(mem.infeasible_code, shape),
        single_machine_epoch_time_s=float(single_epoch),
    )


def check_precision(cluster: Cluster, config: Configuration) -> None:
    """A one-line error unless the worker computes in ``config.precision``."""
    acc = cluster.worker.accelerator
    if acc is None:
        if config.precision != "fp32":
            raise checks.fail("precision", config.precision, f"is not a mode of the CPU machine "
                                                             f"{cluster.worker.name or '(unnamed)'}; expected fp32")
    elif acc.peak_flops_per_s.of(config.precision) is None:
        raise checks.fail("precision", config.precision, f"is not supported by {acc.name or 'the accelerator'}; "
                                                         f"expected one of {', '.join(acc.peak_flops_per_s.supported)}")


def single_machine_time_per_sample(network: Network, cluster: Cluster, config: Configuration) -> float:
    """Seconds per sample of the baseline: one machine, no PS, everything local (speed-up = 1)."""
    arr = network_arrays(network)
    spatial = choose_spatial(arr, config.partitioning)
    comp = worker_compute(arr, cluster.worker, np.asarray(1.0), config.threads,
                          np.zeros_like(arr.weights), spatial, float(config.local_batch_samples), config.precision,
                          config.optimizer)
    return float(comp.total_s * alone_stretch(cluster, config))


def predict(network: Network, cluster: Cluster, dataset: Dataset | None = None,
            config: Configuration | None = None) -> Prediction:
    """The prediction for one configuration: :func:`evaluate` on a single element (0-d arrays), with
    its p10–p90 interval when the worker machine carries a compute error band."""
    return evaluate(network, cluster, dataset, config, interval=True)


__all__ = ["BOTTLENECKS", "PS_REPLICATION", "closed_network_throughput", "evaluate", "phase_range", "predict"]
