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

import numpy as np

from dnnbench.measure.generalisation import benchmark_points, measure_networks, predict_networks, print_points
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
    points, cluster, launches = benchmark_points(__doc__.splitlines()[0], network, (1, 4, 16))
    measured = measure_networks(points, launches)
    print_points(points, measured, [("the model", predict_networks(points, cluster))])


if __name__ == "__main__":
    import sys

    from dnnbench.measure.alloc import restart_with_steady_heap

    restart_with_steady_heap([__file__, *sys.argv[1:]])  # it times PyTorch here: a steady heap
    main()
