"""Model throughput on graph networks: distinct configurations evaluated per second on one core for
resnet50 (about 160 layers; target >= 1,000,000/s), gpt2-small and bert-base, each as a ratio to lenet5
(10 layers) in the same run, so a cost that grows with depth shows as a ratio well above 1."""

from __future__ import annotations

import os
import statistics
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from dnnbench import presets  # noqa: E402
from dnnbench.model import evaluate, predict  # noqa: E402
from dnnbench.specs import Configuration  # noqa: E402


def rate(name: str, n: int = 1_048_576, repeats: int = 5) -> tuple[float, float]:
    """(evaluations/s over n distinct flat (W, R, P) configurations, one prediction's seconds)."""
    net = presets.network(name)
    cl, ds, cfg = presets.cluster("modern-2025"), presets.default_dataset_for(net), Configuration()
    rng = np.random.default_rng(0)
    w, r, p = (rng.integers(1, 65, n).astype(float), rng.integers(1, 129, n).astype(float),
               rng.integers(0, 129, n).astype(float))
    evaluate(net, cl, ds, cfg, workers_per_replica=w, replicas=r, ps_machines=p)
    runs = []
    for _ in range(repeats):
        t = time.perf_counter()
        evaluate(net, cl, ds, cfg, workers_per_replica=w, replicas=r, ps_machines=p)
        runs.append(time.perf_counter() - t)
    one = Configuration(workers_per_replica=8, replicas=4, ps_machines=8)
    predict(net, cl, ds, one)
    lat = []
    for _ in range(100):
        t = time.perf_counter()
        predict(net, cl, ds, one)
        lat.append(time.perf_counter() - t)
    return n / statistics.median(runs), statistics.median(lat)


def main() -> None:
    base, base_lat = rate("lenet5")
    print(f"lenet5 (10 layers): {base / 1e6:.2f} M evaluations/s, one prediction {base_lat * 1e3:.3f} ms")
    for name in ("resnet50", "mobilenet-v2", "gpt2-small", "bert-base"):
        layers = len(presets.network(name).layers)
        r, lat = rate(name)
        target = " (target >= 1 M/s)" if name == "resnet50" else ""
        print(f"{name} ({layers} layers): {r / 1e6:.2f} M evaluations/s{target}, ratio to lenet5 {base / r:.2f}; "
              f"one prediction {lat * 1e3:.3f} ms (ratio {lat / base_lat:.2f})")


if __name__ == "__main__":
    main()
