"""Predictions for networks the model has never seen, after ``dnnbench calibrate`` alone.

    python3 benchmarks/bench_generalisation.py [--networks 20] [--launches 3] [--json out.json]

1. ``dnnbench calibrate`` (its full run: the shape cases, the calibration's own chains, the rest) on
   this machine; nothing else is fitted.
2. ``--networks`` random chains (dnnbench.measure.chains, seeds 0..n-1; the calibration draws its
   chains from other seeds) trained by a plain PyTorch loop at mini-batches 16 and 64 and at 1 and
   all cores' threads, in launches that interleave every point; each point keeps its median launch.
3. The model's time per sample of every point, with its p10–p90 interval: median and largest
   |error| and how often the interval holds the measurement (targets: median <= 10 %, max <= 25 %,
   coverage about 80 %).
4. ``calibrate --network`` on each chain (its layers timed inside training steps), predicted again
   (targets: median <= 5 %, max <= 10 %).
5. The same points measured again, later: the run-to-run difference of the measurement itself, the
   floor under any prediction's error on this machine.

The calibration's own timings are also fitted again with oneDNN's layout copies priced the other way
(ShapeRate.layout_copies, which the fit chooses), and again with caches and memory bandwidth per core
the other way (ShapeRate.memory_per_core), and the points predicted with those fits too: the same
measurements both ways.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

import numpy as np

from dnnbench.measure.calibrate import calibrate
from dnnbench.measure.generalisation import Point, measure, predict, summary
from dnnbench.measure.hostload import host_cores
from dnnbench.measure.quiet import QuietGate
from dnnbench.measure.shapes import profile_and_check
from dnnbench.specs import Network


def _line(name: str, s: dict[str, float]) -> str:
    return (f"{name:<34} median |error| {100 * s['median_abs_error']:5.1f} %   max {100 * s['max_abs_error']:6.1f} %"
            f"   p10-p90 coverage {100 * s['interval_coverage']:4.0f} %   ({s['points']} points)")


def _refit(cluster: Any, sh: dict[str, Any], cores: int, **forced: bool) -> Any:
    """``cluster`` with its worker's shape rate fitted again on the calibration's own timings with the
    choices ``forced`` (``layout_copies``, ``memory_per_core``) made for the fit."""
    from dnnbench.measure.calibrate import cache_levels
    from dnnbench.measure.shapes import ShapeCase, fit_shape_rate, fit_steps

    cases = [ShapeCase(f"case{i}", t["layer"], tuple(t["input_shape"]), t["batch"], t["threads"])
             for i, t in enumerate(sh["timings"])]
    measured = [{k: v for k, v in t.items() if k not in ("layer", "input_shape", "batch", "threads")}
                for t in sh["timings"]]
    fit = fit_shape_rate(cases, measured, cache_levels(), cores, **forced)
    points = [(r["seed"], r["batch"], r["threads"]) for r in sh["steps"]]
    rate = fit_steps(fit.rate, cores, points, [r["step_s"] for r in sh["steps"]])
    return cluster.evolve(worker=cluster.worker.evolve(shape_rate=rate))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--networks", type=int, default=20)
    parser.add_argument("--launches", type=int, default=3)
    parser.add_argument("--json", help="write every point to this file")
    args = parser.parse_args()
    threads = sorted({1, host_cores()})
    t0 = time.perf_counter()
    cluster, report = calibrate()
    t_cal = time.perf_counter() - t0
    sh = report["shapes"]
    print(f"calibrate: {t_cal:.0f} s (busy host: {sh['quiet_gate']})")
    print(f"shape fit residuals median {100 * sh['median_abs_residual']:.0f} %, max "
          f"{100 * sh['max_abs_residual']:.0f} % ({sh['cases']} cases); held out median "
          f"{100 * sh['held_out_median_abs_residual']:.0f} %, max {100 * sh['held_out_max_abs_residual']:.0f} %")
    points = [Point(s, b, t) for s in range(args.networks) for b in (16, 64) for t in threads]
    gate = QuietGate()
    first = measure(points, launches=args.launches, gate=gate)
    plain = predict(points, cluster)
    # The same predictions with the band of whole steps (leave one calibration chain out) instead of
    # the layer cases' band: which of the two holds about 80 % of the points.
    sb = sh["step_band"]
    stepwise = [{**q, "p10_s": q["time_per_sample_s"] * (1 + sb["p10"]), "p90_s": q["time_per_sample_s"]
                 * (1 + sb["p90"])} for q in plain]
    chosen = cluster.worker.shape_rate
    other = _refit(cluster, sh, host_cores(), layout_copies=not chosen.layout_copies)
    flipped = predict(points, other)
    shared = _refit(cluster, sh, host_cores(), memory_per_core=not chosen.memory_per_core)
    flipped_memory = predict(points, shared)
    print(f"layer band p10 {100 * sh['band']['p10']:+.0f} % p90 {100 * sh['band']['p90']:+.0f} %; whole-step band "
          f"p10 {100 * sb['p10']:+.0f} % p90 {100 * sb['p90']:+.0f} % ({sb['cases']} steps)")
    t1 = time.perf_counter()
    from dnnbench.measure.chains import random_chain

    worker = cluster.worker
    for s in range(args.networks):
        for t in threads:
            worker = profile_and_check(Network.build(random_chain(s)), cluster.evolve(worker=worker),
                                       threads=t).merged_into(worker)
    t_prof = (time.perf_counter() - t1) / args.networks
    profiled_cluster = cluster.evolve(worker=worker)
    profiled = predict(points, profiled_cluster)
    again = measure(points, launches=args.launches, gate=gate)
    floor = np.abs(np.asarray(again) / np.asarray(first) - 1.0)
    print(f"{len(points)} points: {args.networks} random chains x mini-batch 16, 64 x threads "
          f"{', '.join(map(str, threads))}; {args.launches} interleaved launches each")
    for name, meas in (("first measurement", first), ("second measurement", again)):
        print(f"-- against the {name}")
        print(_line("after calibrate alone", summary(meas, plain)))
        print(_line("  with the whole-step band", summary(meas, stepwise)))
        print(_line(f"  layout copies {'off' if other.worker.shape_rate.layout_copies is False else 'on'} (the fit "
                    f"chose {'on' if cluster.worker.shape_rate.layout_copies else 'off'})", summary(meas, flipped)))
        print(_line(f"  caches and memory per core {'off' if chosen.memory_per_core else 'on'} (the fit chose "
                    f"{'on' if chosen.memory_per_core else 'off'})", summary(meas, flipped_memory)))
        print(_line("with calibrate --network", summary(meas, profiled)))
    print(f"measurement against itself (run to run): median {100 * np.median(floor):.1f} %, max "
          f"{100 * np.max(floor):.1f} %")
    print(f"calibrate --network: {t_prof:.1f} s per network ({len(threads)} thread counts)")
    print(f"busy host while measuring the points: {gate.report()}")
    if args.json:
        rows = [{"seed": p.seed, "batch": p.batch, "threads": p.threads, "measured_s": a, "measured_again_s": b,
                 "predicted": q, "predicted_profiled": r}
                for p, a, b, q, r in zip(points, first, again, plain, profiled, strict=True)]
        tmp = f"{args.json}.tmp"
        with open(tmp, "w") as f:
            json.dump({"calibration": {k: v for k, v in sh.items() if k != "residuals"},
                       "cluster": cluster.to_dict(), "profiled_cluster": profiled_cluster.to_dict(), "points": rows},
                      f, indent=1)
        os.replace(tmp, args.json)


if __name__ == "__main__":
    import sys

    from dnnbench.measure.alloc import restart_with_steady_heap

    restart_with_steady_heap([__file__, *sys.argv[1:]])  # it times PyTorch here: a steady heap
    main()
