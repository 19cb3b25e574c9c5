"""Predictions for networks the model has not seen, against a plain PyTorch loop (docs/validation.md
§"Networks the model has not seen").

``measure`` trains random chains (:mod:`.chains`) at several mini-batches and thread counts, in
launches that interleave the points (each point's median launch is kept, so a machine whose speed
drifts moves every point alike); ``predict`` prices the same points with a calibrated cluster, with
its p10–p90 interval; ``summary`` gives the errors and how often the interval holds the measurement.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..specs import Cluster, Configuration, Network
from .chains import random_chain, step_times, torch_chain
from .quiet import QuietGate, quiet_median


@dataclass(frozen=True)
class Point:
    seed: int
    batch: int
    threads: int


def measure(points: Sequence[Point], launches: int = 3, steps: int = 8,
            progress: Callable[[str], None] | None = None, gate: QuietGate | None = None) -> list[float]:
    """Seconds per sample of each point: the median over ``launches`` interleaved launches of each
    launch's median step (over the launches a :class:`~.quiet.QuietGate` found the host quiet for)."""
    gate = QuietGate() if gate is None else gate
    models: dict[int, Any] = {}
    per: list[list[float]] = [[] for _ in points]
    refs: list[list[float]] = [[] for _ in points]
    for launch in range(launches):
        for i, p in enumerate(points):
            spec = random_chain(p.seed)
            model = models.setdefault(p.seed, torch_chain(spec))
            refs[i].append(gate.wait(p.threads))
            times = step_times(model, tuple(spec["layers"][0]["shape"]), p.batch, p.threads, steps=steps)
            per[i].append(float(np.median(times)) / p.batch)
        if progress is not None:
            progress(f"launch {launch + 1}/{launches}")
    return [quiet_median(v, r, p.threads, gate) for v, r, p in zip(per, refs, points, strict=True)]


def predict(points: Sequence[Point], cluster: Cluster) -> list[dict[str, float]]:
    """The model's seconds per sample of each point on one machine of ``cluster`` (with its interval
    when the machine carries a compute error band)."""
    from ..model.evaluate import single_machine_time_per_sample
    from ..model.interval import compute_band

    out = []
    for p in points:
        net = Network.build(random_chain(p.seed))
        cfg = Configuration(threads=p.threads, local_batch_samples=p.batch)
        t = single_machine_time_per_sample(net, cluster, cfg)
        band = compute_band(net, cluster.worker)  # the model's own band, narrowed by profiled layers
        lo, hi = (t, t) if band is None else (t * (1.0 + band[0]), t * (1.0 + band[1]))
        out.append({"time_per_sample_s": t, "p10_s": lo, "p90_s": hi})
    return out


def calibrated_cluster(path: str | os.PathLike[str] | None = None) -> Cluster:
    """The cluster spec ``path`` (written by ``dnnbench calibrate``), or, without one, this machine
    calibrated now (``calibrate(quick=True)``, about 30 s)."""
    if path is None:
        from .calibrate import calibrate

        return calibrate(quick=True)[0]
    from ..specs.io import load

    return load(Cluster, path)


def measure_networks(points: Sequence[tuple[Network, int, int]], launches: int = 3,
                     gate: QuietGate | None = None) -> np.ndarray:
    """Seconds per sample of each (network, mini-batch, threads) trained by a plain PyTorch loop (SGD,
    synthetic data, the median step): the median over ``launches`` launches that interleave the points
    (a drift of the machine's speed moves every point alike)."""
    from .chains import plain_step_s

    gate = QuietGate() if gate is None else gate
    runs: list[list[float]] = [[] for _ in points]
    refs: list[list[float]] = [[] for _ in points]
    for _ in range(launches):
        for i, (net, batch, threads) in enumerate(points):
            refs[i].append(gate.wait(threads))
            runs[i].append(plain_step_s(net, batch, threads) / batch)
    return np.array([quiet_median(r, q, p[2], gate) for r, q, p in zip(runs, refs, points, strict=True)])


def predict_networks(points: Sequence[tuple[Network, int, int]], cluster: Cluster) -> np.ndarray:
    """The model's seconds per sample of each (network, mini-batch, threads) on one machine of ``cluster``."""
    from ..model.evaluate import single_machine_time_per_sample

    return np.array([single_machine_time_per_sample(net, cluster, Configuration(threads=t, local_batch_samples=b))
                     for net, b, t in points])


def benchmark_points(description: str, draw: Callable[[np.random.Generator], Network], batches: Sequence[int]
                     ) -> tuple[list[tuple[Network, int, int]], Cluster, int]:
    """A networks benchmark's command line (``--cluster``, ``--points``, ``--seed``, ``--launches``): its
    (network, mini-batch, threads) points, each network from ``draw``, a mini-batch of ``batches`` and
    1 to all cores' threads; the calibrated cluster; the launches."""
    import argparse
    from pathlib import Path

    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--cluster", type=Path, help="a cluster spec written by dnnbench calibrate")
    ap.add_argument("--points", type=int, default=12)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--launches", type=int, default=3)
    args = ap.parse_args()
    cluster = calibrated_cluster(args.cluster)
    rng = np.random.default_rng(args.seed)
    points = [(draw(rng), int(rng.choice(list(batches))), int(rng.integers(1, cluster.worker.cores + 1)))
              for _ in range(args.points)]
    return points, cluster, int(args.launches)


def print_points(points: Sequence[tuple[Network, int, int]], measured: np.ndarray,
                 predictions: Sequence[tuple[str, np.ndarray]]) -> None:
    """Each point's measurement and the first prediction's error, then per labelled prediction the
    median and largest |error| and the median signed error."""
    for (net, b, t), m, p in zip(points, measured, predictions[0][1], strict=True):
        print(f"{net.name:28s} batch {b:3d} threads {t}: {m * 1e3:8.3f} ms/sample, predicted {p / m - 1:+6.0%}")
    for label, pred in predictions:
        err = np.abs(pred / measured - 1.0)
        print(f"{label}: median |error| {np.median(err):.0%}, max {err.max():.0%}, median error "
              f"{np.median(pred / measured - 1.0):+.0%} over {len(points)} points")


def summary(measured: Sequence[float], predicted: Sequence[dict[str, float]]) -> dict[str, float]:
    """Median and max |predicted / measured − 1| and the share of points inside their p10–p90 interval."""
    m = np.asarray(measured)
    p = np.array([q["time_per_sample_s"] for q in predicted])
    lo = np.array([q["p10_s"] for q in predicted])
    hi = np.array([q["p90_s"] for q in predicted])
    err = np.abs(p / m - 1.0)
    return {"points": int(m.size), "median_abs_error": float(np.median(err)), "max_abs_error": float(np.max(err)),
            "interval_coverage": float(np.mean((m >= lo) & (m <= hi)))}
