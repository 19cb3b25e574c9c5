"""Optimizer speed: N = 10,000 (target < 0.5 s), N = 1,000,000 (target < 5 s), and the speed-up over
brute-force enumeration at N = 1,000 (same answer, measured in one run)."""

from __future__ import annotations

import time

from dnnbench import presets
from dnnbench.optimizer import brute_force, optimize


def main() -> None:
    net, cl, ds = presets.network("imagenet22k-adam"), presets.cluster("adam-2014"), presets.dataset("imagenet22k")
    optimize(net, cl, ds, 100)
    for n in (10_000, 1_000_000):
        t = time.perf_counter()
        res = optimize(net, cl, ds, n)
        dt = time.perf_counter() - t
        print(f"N = {n:>9,}: {dt:.3f} s, {res.evaluated:,} model evaluations; best W={res.best.workers_per_replica} "
              f"R={res.best.replicas} P={res.best.ps_machines}")
    n = 1_000
    t = time.perf_counter()
    res = optimize(net, cl, ds, n)
    t_opt = time.perf_counter() - t
    t = time.perf_counter()
    t_best, cfg = brute_force(net, cl, ds, n)
    t_brute = time.perf_counter() - t
    same = abs(res.best.epoch_time_s - t_best) <= 1e-12 * t_best
    print(f"N = 1,000: optimizer {t_opt * 1e3:.1f} ms, brute force {t_brute:.2f} s -> {t_brute / t_opt:,.0f}x faster; "
          f"same optimum: {same} ({cfg})")


if __name__ == "__main__":
    main()
