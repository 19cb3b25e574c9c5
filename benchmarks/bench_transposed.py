"""Transposed convolutions on this machine against the shape-aware model (docs/model.md §12).

    python3 benchmarks/bench_transposed.py [--cluster cluster.json] [--cases 24] [--seed 0] [--threads 1]

A transposed convolution is priced as the convolution it is the input gradient of: its forward at that
convolution's input-gradient rate, its input gradient at its forward rate (oneDNN runs a deconvolution
that way). The calibration times no transposed convolution, so every case here is out of sample.
Random layers (input channels 4-512, output channels 4-256, maps 4-32, kernels 2-5, strides 1-2, the
padding and output padding a decoder uses, batch 1-64) are timed as ``dnnbench calibrate`` times its
cases, and predicted with the calibrated cluster (``--cluster``; without it a quick calibration runs
first, about 30 s). Prints each phase's median and largest |error|, and, on the same timings, the
errors with the two phases' rates not swapped, for comparison.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Any

import numpy as np

from dnnbench.measure.generalisation import calibrated_cluster
from dnnbench.measure.shapes import ShapeCase, _predict, case_arrays, time_cases

PHASES = ("forward", "input_grad", "weight_grad")


def cases(count: int, seed: int, threads: int) -> list[ShapeCase]:
    rng = np.random.default_rng(seed)
    out: list[ShapeCase] = []
    while len(out) < count:
        c_in, c_out = int(rng.choice([4, 16, 32, 64, 128, 256, 512])), int(rng.choice([4, 8, 16, 32, 64, 128, 256]))
        side, kernel, stride = int(rng.choice([4, 8, 16, 32])), int(rng.integers(2, 6)), int(rng.integers(1, 3))
        batch = int(rng.choice([1, 4, 16, 64]))
        padding = (kernel - stride + 1) // 2 if kernel >= stride else 0
        extra = (kernel - stride) % 2 if stride > 1 else 0
        out_side = (side - 1) * stride - 2 * padding + kernel + extra
        if c_in * side * side * batch > 4_000_000 or c_out * out_side * out_side * batch > 4_000_000:
            continue
        layer: dict[str, Any] = {"kind": "conv_transpose2d", "out_channels": c_out, "kernel": kernel, "stride": stride,
                                 "padding": padding, **({"output_padding": extra} if extra else {})}
        out.append(ShapeCase(f"T{c_in}x{side}->{c_out}k{kernel}s{stride}b{batch}", layer, (c_in, side, side), batch,
                             threads))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cluster", type=Path, help="a cluster spec written by dnnbench calibrate")
    ap.add_argument("--cases", type=int, default=24)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    machine = calibrated_cluster(args.cluster).worker
    if machine.shape_rate is None:
        sys.exit(f"--cluster: {args.cluster} has no shape-aware rate; write it with dnnbench calibrate")
    todo = cases(args.cases, args.seed, args.threads)
    measured = np.array([[row[p] for p in PHASES] for row in time_cases(todo, rounds=3)])
    arr = case_arrays(todo)
    swapped = _predict(arr, todo, machine.shape_rate, machine.cores)[:, :3]
    plain = _predict(dataclasses.replace(arr, transposed=np.zeros_like(arr.transposed)), todo, machine.shape_rate,
                     machine.cores)[:, :3]
    for case, m, p in zip(todo, measured, swapped, strict=True):
        print(f"{case.name:28s} " + "  ".join(f"{ph} {mi * 1e3:7.2f} ms {pi / mi - 1:+6.0%}"
                                              for ph, mi, pi in zip(PHASES, m, p, strict=True)))
    for label, pred in (("phases swapped (the model)", swapped), ("phases not swapped", plain)):
        err = np.abs(pred / measured - 1.0)
        parts = ", ".join(f"{ph} {np.median(err[:, j]):.0%} / {err[:, j].max():.0%}" for j, ph in enumerate(PHASES))
        print(f"{label}: median / max |error| {parts}; all {np.median(err):.0%} / {err.max():.0%}")


if __name__ == "__main__":
    from dnnbench.measure.alloc import restart_with_steady_heap

    restart_with_steady_heap([__file__, *sys.argv[1:]])  # it times PyTorch here: a steady heap
    main()
