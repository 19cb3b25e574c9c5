"""Model throughput: configuration evaluations per second on one core for imagenet22k-adam
(target >= 1,000,000/s), and the latency of one prediction (target < 1 ms)."""

from __future__ import annotations

import os
import statistics
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from dnnbench import presets  # noqa: E402
from dnnbench.model import evaluate, predict  # noqa: E402
from dnnbench.specs import Configuration  # noqa: E402


def main() -> None:
    net, cl, ds = presets.network("imagenet22k-adam"), presets.cluster("adam-2014"), presets.dataset("imagenet22k")
    cfg = Configuration()
    # A grid the optimizer and the workbench ask for: W x R x P broadcast (64 x 128 x 128 = 1,048,576).
    w = np.arange(1, 65, dtype=float)[:, None, None]
    r = np.arange(1, 129, dtype=float)[None, :, None]
    p = np.arange(1, 129, dtype=float)[None, None, :]
    evaluate(net, cl, ds, cfg, workers_per_replica=w, replicas=r, ps_machines=p)
    runs = []
    for _ in range(5):
        t = time.perf_counter()
        pred = evaluate(net, cl, ds, cfg, workers_per_replica=w, replicas=r, ps_machines=p)
        runs.append(time.perf_counter() - t)
    n = pred.epoch_time_s.size
    print(f"vectorised grid: {n:,} configurations in {statistics.median(runs) * 1e3:.0f} ms "
          f"= {n / statistics.median(runs) / 1e6:.2f} M evaluations/s (target >= 1 M/s)")
    # Flat arrays (no broadcasting help): every configuration distinct in W.
    rng = np.random.default_rng(0)
    wf, rf, pf = (rng.integers(1, 65, n).astype(float), rng.integers(1, 129, n).astype(float),
                  rng.integers(1, 129, n).astype(float))
    t = time.perf_counter()
    evaluate(net, cl, ds, cfg, workers_per_replica=wf, replicas=rf, ps_machines=pf)
    flat = time.perf_counter() - t
    print(f"flat arrays: {n:,} configurations in {flat * 1e3:.0f} ms = {n / flat / 1e6:.2f} M evaluations/s")
    # Synchronous rounds, without and with the straggler term (Machine.step_time_cv, docs/model.md §6),
    # compared within this run.
    sync = Configuration(mode="sync")
    times = {}
    for cv in (0.0, 0.06):
        jittery = cl.evolve(worker=cl.worker.evolve(step_time_cv=cv))
        evaluate(net, jittery, ds, sync, workers_per_replica=wf, replicas=rf, ps_machines=pf)
        t = time.perf_counter()
        evaluate(net, jittery, ds, sync, workers_per_replica=wf, replicas=rf, ps_machines=pf)
        times[cv] = time.perf_counter() - t
    print(f"synchronous, flat arrays: {n / times[0.0] / 1e6:.2f} M evaluations/s without step jitter, "
          f"{n / times[0.06] / 1e6:.2f} M/s with it (ratio {times[0.06] / times[0.0]:.2f})")
    one = Configuration(workers_per_replica=8, replicas=4, ps_machines=8)
    predict(net, cl, ds, one)
    lat = []
    for _ in range(200):
        t = time.perf_counter()
        predict(net, cl, ds, one)
        lat.append(time.perf_counter() - t)
    print(f"one prediction: median {statistics.median(lat) * 1e3:.3f} ms (target < 1 ms)")


if __name__ == "__main__":
    main()
