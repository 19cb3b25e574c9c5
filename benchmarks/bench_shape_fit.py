"""The shape-aware fit's residuals with and without the terms for grouped and depthwise convolutions,
activation functions and normalisations' weight gradients (docs/model.md §12), on one set of timings.

    python3 benchmarks/bench_shape_fit.py [--cases 200] [--rounds 3] [--json out.json]
                                          [--save-timings t.json | --timings t.json]

The calibration's layer cases are timed once (as ``dnnbench calibrate`` times them), then fitted three
times: with every term; without the grouped convolutions' element times t_ga and t_gc; and without
those, t_dw, the per-function times, the families' backward op times and the weight-gradient byte time
(a normalisation's weight gradient then priced as a backward pass). The same measurements in every fit,
so the difference is the form's, not the host's noise. Prints the median and largest |residual|, fitted
and 5-fold held out, and the median residual of the case kinds the terms are for. The full form is also
fitted with and without oneDNN's layout copies of a convolution's tensors (ShapeRate.layout_copies; the
fit chooses).
``--save-timings`` keeps the timings, ``--timings`` fits saved ones (no timing at all).

Then 40 convolutions that PyTorch runs natively (im2col and a matrix product, not oneDNN: batch 1 with
a small input, 1x1 below batch 16 on one thread) are timed and predicted with the first fit, priced as
the model prices them (the FC layers' rates) and, for comparison, as oneDNN convolutions.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from typing import Any

import numpy as np

from dnnbench.measure import shapes
from dnnbench.measure.calibrate import cache_levels
from dnnbench.measure.hostload import host_cores
from dnnbench.model.arrays import NATIVE_CONV_BATCH, NATIVE_CONV_INPUT_VALUES

GROUPED_FIELDS = ("grouped_input_element_time_s", "grouped_output_element_time_s")
NEW_FIELDS = ("depthwise_wide_mac_time_s", "weight_grad_byte_time_s", "backward_op_time_s", *GROUPED_FIELDS)


def _kind(case: shapes.ShapeCase, arr: Any, i: int) -> str:
    layer = case.layer
    if layer["kind"] == "conv2d":
        if arr.grouped[i]:
            return "grouped <8 per group" if arr.group_channels[i] < 8 else "grouped"
        return "depthwise k>3" if arr.depthwise_wide[i] else "conv"
    if layer["kind"] == "activation":
        return f"activation {layer['function']}"
    return str(layer["kind"])


def native_cases(count: int = 40, seed: int = 5) -> list[shapes.ShapeCase]:
    """Convolutions ATen runs natively: half at batch 1 (no groups, kernel 1 or 3, at most 20,480 input
    values, 1 or 2 threads), half 1x1 of stride 1 at batches 1-15 on one thread."""
    rng = np.random.default_rng(seed)
    out: list[shapes.ShapeCase] = []
    while len(out) < count:
        layer: dict[str, Any]
        if len(out) % 2 == 0:
            c, h = int(rng.choice([1, 3, 8, 16, 32, 64, 128])), int(rng.choice([4, 7, 8, 14, 16, 28, 32]))
            if c * h * h > NATIVE_CONV_INPUT_VALUES:
                continue
            k = int(rng.choice([1, 3]))
            layer = {"kind": "conv2d", "out_channels": int(rng.choice([8, 16, 32, 64, 128, 256])), "kernel": k,
                     "stride": int(rng.choice([1, 2])), "padding": k // 2}
            b, t = 1, int(rng.choice([1, 2]))
        else:
            c, h = int(rng.choice([3, 16, 32, 64, 128, 256, 512])), int(rng.choice([7, 14, 28, 56]))
            layer = {"kind": "conv2d", "out_channels": int(rng.choice([16, 32, 64, 128, 256, 512])), "kernel": 1}
            b, t = int(rng.choice([1, 2, 4, 8, NATIVE_CONV_BATCH - 1])), 1
            if c * h * h * layer["out_channels"] * b > 3e8:
                continue
        if rng.random() < 0.3:
            layer["activation"] = "relu"
        out.append(shapes.ShapeCase(f"native{len(out)}", layer, (c, h, h), b, t))
    return out


def _native(cores: int, rate: Any) -> dict[str, dict[str, float]]:
    cases = native_cases()
    measured = shapes.time_cases(cases, rounds=3)
    y = np.array([[m[p] for p in shapes.PHASES[:3]] for m in measured])
    arr = shapes.case_arrays(cases)
    as_onednn = dataclasses.replace(arr, conv_small_kernel=np.zeros_like(arr.conv_small_kernel),
                                    conv_pointwise=np.zeros_like(arr.conv_pointwise))
    rows = {}
    for label, a in (("priced natively (FC rates)", arr), ("priced as oneDNN's", as_onednn)):
        r = shapes._predict(a, cases, rate, cores)[:, :3] / y - 1.0
        rows[label] = {"median_abs_error": float(np.median(np.abs(r))), "max_abs_error": float(np.max(np.abs(r))),
                       "median_error": float(np.median(r))}
        print(f"native convolutions, {label:27s} median |error| {rows[label]['median_abs_error']:.0%}, max "
              f"{rows[label]['max_abs_error']:.0%}, median error {rows[label]['median_error']:+.0%} "
              f"({len(cases)} cases, 3 phases)")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", default=None)
    ap.add_argument("--save-timings", default=None, metavar="FILE", help="write the cases and their timings")
    ap.add_argument("--timings", default=None, metavar="FILE", help="fit these saved timings instead of timing")
    args = ap.parse_args()
    cores = host_cores()
    if args.timings:
        with open(args.timings) as f:
            saved = json.load(f)
        cases = [shapes.ShapeCase(**{**c, "input_shape": tuple(c["input_shape"])}) for c in saved["cases"]]
        measured, cores = saved["measured"], int(saved["cores"])
    else:
        cases = shapes.shape_cases(args.cases, seed=0, threads=shapes.calibration_threads(cores))
        measured = shapes.time_cases(cases, rounds=args.rounds)
    if args.save_timings:
        with open(args.save_timings, "w") as f:
            json.dump({"cores": cores, "cases": [dataclasses.asdict(c) for c in cases], "measured": measured}, f)
    arr = shapes.case_arrays(cases)
    kinds = [_kind(c, arr, i) for i, c in enumerate(cases)]
    no_grouped = tuple(c for c in shapes.COLUMNS if c[1] not in GROUPED_FIELDS)
    without = tuple(c for c in shapes.COLUMNS if not (c[0].startswith("fn:") or c[1] in NEW_FIELDS))
    out: dict[str, Any] = {}
    rates: dict[str, Any] = {}
    for label, cols, copies in (("every term", shapes.COLUMNS, None),
                                ("every term, layout copies", shapes.COLUMNS, True),
                                ("every term, no layout copies", shapes.COLUMNS, False),
                                ("without t_ga, t_gc", no_grouped, None),
                                ("without t_ga, t_gc, t_dw, t_fn, t_wg, t_op,b", without, None)):
        fit = shapes.fit_shape_rate(cases, measured, cache_levels(), cores, columns=cols, layout_copies=copies)
        rates[label] = fit.rate
        s = fit.summary()
        by_kind = {}
        for k in sorted(set(kinds)):
            rows = fit.residuals[[i for i, kk in enumerate(kinds) if kk == k]]
            vals = np.abs(rows[np.isfinite(rows)])
            by_kind[k] = float(np.median(vals)) if vals.size else float("nan")
        out[label] = {**s, "median_abs_residual_by_kind": by_kind}
        print(f"{label:38s} fit median {s['median_abs_residual']:.1%} max {s['max_abs_residual']:.0%}; held out "
              f"median {s['held_out_median_abs_residual']:.1%} max {s['held_out_max_abs_residual']:.0%}"
              f"{'; layout copies' if fit.rate.layout_copies else ''}")
        top = np.nan_to_num(np.abs(fit.residuals), nan=0.0).max(axis=1)
        print("    largest: " + "; ".join(f"{kinds[i]} {cases[i].layer} on {list(cases[i].input_shape)} "
                                          f"b={cases[i].batch} T={cases[i].threads}: {top[i]:.0%}"
                                          for i in np.argsort(-top)[:3]))
    print("cases per kind:", ", ".join(f"{k} {kinds.count(k)}" for k in sorted(set(kinds))))
    for label, row in out.items():
        print(f"  {label:36s}", " ".join(f"{v:6.0%}" for v in row["median_abs_residual_by_kind"].values()))
    if not args.timings:  # (saved timings: no timing at all)
        out["native convolutions"] = _native(cores, rates["every term"])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    import sys

    from dnnbench.measure.alloc import restart_with_steady_heap

    restart_with_steady_heap([__file__, *sys.argv[1:]])  # it times PyTorch here: a steady heap
    main()
