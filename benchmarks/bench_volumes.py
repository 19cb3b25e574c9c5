"""3-D convolutional networks (video clips, scans) trained on this machine against the shape-aware model.

    python3 benchmarks/bench_volumes.py [--cluster cluster.json] [--points 12] [--seed 0] [--launches 3]

The calibration times 2-D layers only, so every point is out of sample. A seeded generator draws
volume networks (a 3-D convolution stem, one or two more, 3-D pools, batch norm, a global pool and a
head) on clips of 4-16 frames of 16-56 pixels, and a mini-batch and thread count; each is trained by a
plain PyTorch loop (SGD, synthetic data, ``plain_step_s``: the median step) in ``--launches``
interleaved launches (the median launch is kept), and predicted with the calibrated cluster
(``--cluster``; without it a quick calibration runs first, about 30 s). Prints each point and the
median and largest |error|.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from dnnbench.measure.generalisation import calibrated_cluster, measure_networks, predict_networks
from dnnbench.specs import Network


def network(rng: np.random.Generator) -> Network:
    frames, side = int(rng.choice([4, 8, 16])), int(rng.choice([16, 32, 56]))
    width = int(rng.choice([8, 16, 32, 64]))
    k = int(rng.choice([1, 3]))
    layers: list[dict[str, object]] = [
        {"kind": "input", "shape": [3, frames, side, side]},
        {"kind": "conv3d", "out_channels": width, "kernel": [k, 3, 3], "padding": [k // 2, 1, 1],
         "activation": "relu"},
        {"kind": "batchnorm"},
        {"kind": "pool3d", "mode": str(rng.choice(["max", "avg"])), "window": [1, 2, 2]}]
    for _ in range(int(rng.integers(1, 3))):
        width = 2 * width if rng.integers(0, 2) else width
        stride = int(rng.integers(1, 3))
        layers.append({"kind": "conv3d", "out_channels": width, "kernel": 3, "stride": [1, stride, stride],
                       "padding": 1, "activation": "relu"})
    shape = Network.build({"name": "probe", "layers": layers}).shapes[-1]
    layers += [{"kind": "pool3d", "mode": "avg", "window": list(shape[1:])}, {"kind": "flatten"},
               {"kind": "fc", "out_features": 10}]
    return Network.build({"name": f"c3d-f{frames}-s{side}-w{width}-{len(layers)}", "layers": layers})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cluster", type=Path, help="a cluster spec written by dnnbench calibrate")
    ap.add_argument("--points", type=int, default=12)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--launches", type=int, default=3)
    args = ap.parse_args()
    cluster = calibrated_cluster(args.cluster)
    rng = np.random.default_rng(args.seed)
    points = [(network(rng), int(rng.choice([1, 4, 16])), int(rng.integers(1, cluster.worker.cores + 1)))
              for _ in range(args.points)]
    measured = measure_networks(points, args.launches)
    predicted = predict_networks(points, cluster)
    for (net, b, t), m, p in zip(points, measured, predicted, strict=True):
        print(f"{net.name:28s} batch {b:3d} threads {t}: {m * 1e3:8.3f} ms/sample, predicted {p / m - 1:+6.0%}")
    err = np.abs(predicted / measured - 1.0)
    print(f"median |error| {np.median(err):.0%}, max {err.max():.0%}, median error "
          f"{np.median(predicted / measured - 1.0):+.0%} over {len(points)} points")


if __name__ == "__main__":
    main()
