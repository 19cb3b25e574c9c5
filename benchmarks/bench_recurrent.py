"""Recurrent networks (LSTM, GRU, RNN) trained on this machine against the shape-aware model.

    python3 benchmarks/bench_recurrent.py [--cluster cluster.json] [--points 12] [--seed 0] [--launches 3]

The calibration times one small recurrent network per mode at two sequence lengths (its time per
step, ``ShapeRate.recurrent_steps``), none of these, so every point is out of sample. A seeded
generator draws text classifiers (token embedding, one recurrent layer: cell, hidden width, layers,
directions; the last step's state into a linear head) and a sequence length, mini-batch and thread
count; each is trained by a plain PyTorch loop (SGD, synthetic tokens, ``plain_step_s``: the median
step) in ``--launches`` interleaved launches (the median launch is kept), and predicted with the
calibrated cluster (``--cluster``; without it a quick calibration runs first, about 30 s). Prints each
point and the median and largest |error|, and the same without the measured step times (each of a GRU's
or RNN's steps paying a whole layer's fixed time, as an uncalibrated rate does), for comparison.
"""

from __future__ import annotations

import numpy as np

from dnnbench.measure.generalisation import benchmark_points, measure_networks, predict_networks, print_points
from dnnbench.specs import Network


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
    points, cluster, launches = benchmark_points(__doc__.splitlines()[0], network, (1, 8, 32))
    measured = measure_networks(points, launches)
    model = predict_networks(points, cluster)
    rate = cluster.worker.shape_rate
    if rate is None:
        raise SystemExit("the cluster's worker has no shape rate: calibrate this machine (dnnbench calibrate)")
    if rate.recurrent_steps is None:
        print("note: this cluster has no measured recurrent step times (an older calibration)")
    unmeasured = cluster.evolve(worker=cluster.worker.evolve(shape_rate=rate.evolve(recurrent_steps=None)))
    print_points(points, measured, [("measured step times (the model)", model),
                                    ("each step a layer's fixed time", predict_networks(points, unmeasured))])


if __name__ == "__main__":
    import sys

    from dnnbench.measure.alloc import restart_with_steady_heap

    restart_with_steady_heap([__file__, *sys.argv[1:]])  # it times PyTorch here: a steady heap
    main()
