"""Recurrent networks (LSTM, GRU, RNN) trained on this machine against the shape-aware model.

    python3 benchmarks/bench_recurrent.py [--cluster cluster.json] [--points 12] [--seed 0] [--launches 3]

The calibration times no recurrent layer, so every point is out of sample. A seeded generator draws
text classifiers (token embedding, one recurrent layer: cell, hidden width, layers, directions; the
last step's state into a linear head) and a sequence length, mini-batch and thread count; each is
trained by a plain PyTorch loop (SGD, synthetic tokens, ``plain_step_s``: the median step) in
``--launches`` interleaved launches (the median launch is kept), and predicted with the calibrated
cluster (``--cluster``; without it a quick calibration runs first, about 30 s). Prints each point
and the median and largest |error|, and the same with every layer priced as one call per phase (as
if a GRU's or RNN's steps were one product), for comparison.
"""

from __future__ import annotations

import argparse
import dataclasses
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

import dnnbench.model.arrays as arrays
from dnnbench.measure.shapes import plain_step_s
from dnnbench.model.evaluate import single_machine_time_per_sample
from dnnbench.specs import Cluster, Configuration, Network
from dnnbench.specs.io import load


def network(rng: np.random.Generator) -> Network:
    mode = str(rng.choice(["lstm", "gru", "rnn_tanh"]))
    steps, width = int(rng.choice([8, 16, 32, 64])), int(rng.choice([16, 32, 64, 128]))
    hidden, layers = int(rng.choice([16, 32, 64, 128, 256])), int(rng.integers(1, 3))
    return Network.build({"name": f"{mode}-s{steps}-d{width}-h{hidden}x{layers}", "layers": [
        {"kind": "input", "shape": [steps]},
        {"kind": "embedding", "vocabulary": 1000, "dim": width},
        {"kind": "recurrent", "mode": mode, "hidden": hidden, "layers": layers,
         "bidirectional": bool(rng.integers(0, 2))},
        {"kind": "select_token", "index": steps - 1},
        {"kind": "fc", "out_features": 10}]})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cluster", type=Path, help="a cluster spec written by dnnbench calibrate")
    ap.add_argument("--points", type=int, default=12)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--launches", type=int, default=3)
    args = ap.parse_args()
    path = args.cluster
    if path is None:
        path = Path(tempfile.mkdtemp()) / "cluster.json"
        subprocess.run([sys.executable, "-c", "from dnnbench.cli import main; main()", "calibrate", "--quick",
                        "-o", str(path)], check=True, stdout=subprocess.DEVNULL)
    cluster = load(Cluster, path)
    rng = np.random.default_rng(args.seed)
    cores = cluster.worker.cores
    points = [(network(rng), int(rng.choice([1, 8, 32])), int(rng.integers(1, cores + 1))) for _ in range(args.points)]
    runs: list[list[float]] = [[] for _ in points]
    for _ in range(args.launches):  # interleaved: a drift of the machine's speed moves every point alike
        for i, (net, batch, threads) in enumerate(points):
            runs[i].append(plain_step_s(net, batch, threads) / batch)
    measured = np.array([float(np.median(r)) for r in runs])

    def predicted() -> np.ndarray:
        arrays._CACHE.clear()
        return np.array([single_machine_time_per_sample(net, cluster, Configuration(threads=t, local_batch_samples=b))
                         for net, b, t in points])

    model = predicted()
    build = arrays._build

    def once(net: Network) -> arrays.NetworkArrays:  # every layer one call per phase
        arr = build(net)
        return dataclasses.replace(arr, calls=np.ones_like(arr.calls), cpu_calls=np.ones_like(arr.cpu_calls))
    arrays._build = once  # type: ignore[assignment]
    try:
        flat = predicted()
    finally:
        arrays._build = build  # type: ignore[assignment]
        arrays._CACHE.clear()
    for (net, b, t), m, p in zip(points, measured, model, strict=True):
        print(f"{net.name:28s} batch {b:3d} threads {t}: {m * 1e3:8.3f} ms/sample, predicted {p / m - 1:+6.0%}")
    for label, pred in (("per-step calls (the model)", model), ("one call per layer", flat)):
        err = np.abs(pred / measured - 1.0)
        print(f"{label}: median |error| {np.median(err):.0%}, max {err.max():.0%}, median error "
              f"{np.median(pred / measured - 1.0):+.0%} over {len(points)} points")


if __name__ == "__main__":
    main()
