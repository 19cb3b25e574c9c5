"""Optimizer speed: N = 10,000 (target < 0.5 s), N = 1,000,000 (target < 5 s), the speed-up over
brute-force enumeration at N = 1,000 (same answer, measured in one run), and GPU clusters searched over
both data-parallel schemes, every precision, three per-device mini-batches and four ZeRO stages."""

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
    from dnnbench.specs import Configuration

    for name, budget in (("dgx-a100", 32), ("dgx-h100", 256)):
        gpu = presets.cluster(name)
        acc = gpu.worker.accelerator
        assert acc is not None
        t = time.perf_counter()
        res = optimize("resnet50", gpu, "imagenet1k", budget, Configuration(optimizer="momentum"),
                       data_parallels=["ps", "allreduce"], allreduce_algorithms=["ring", "tree", "hierarchical"],
                       precisions=list(acc.peak_flops_per_s.supported), local_batches=[64, 128, 256],
                       zero_stages=[0, 1, 2, 3])
        dt = time.perf_counter() - t
        b = res.best
        print(f"{name}, {budget} devices, resnet50, 2 schemes x {len(acc.peak_flops_per_s.supported)} precisions x "
              f"3 batches x 4 ZeRO stages: {dt:.2f} s, {res.evaluated:,} evaluations; best {b.data_parallel} "
              f"{b.allreduce_algorithm} R={b.replicas} {b.precision} b={b.local_batch_samples} ZeRO {b.zero_stage}")


if __name__ == "__main__":
    main()
