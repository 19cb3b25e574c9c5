"""The shape-aware fit's residuals with and without the terms for grouped and depthwise convolutions,
activation functions and normalisations' weight gradients (docs/model.md §12), on one set of timings.

    python3 benchmarks/bench_shape_fit.py [--cases 200] [--rounds 3] [--json out.json]

The calibration's layer cases are timed once (as ``dnnbench calibrate`` times them), then fitted three
times: with every term; without the grouped convolutions' element times t_ga and t_gc; and without
those, t_dw, the per-function times and the weight-gradient byte time (a normalisation's weight
gradient then priced as a backward pass). The same measurements in every fit, so the difference is the
form's, not the host's noise. Prints the median and largest |residual|, fitted and 5-fold held out, and
the median residual of the case kinds the terms are for.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import numpy as np

from dnnbench.measure import shapes
from dnnbench.measure.calibrate import cache_levels
from dnnbench.measure.hostload import host_cores

GROUPED_FIELDS = ("grouped_input_element_time_s", "grouped_output_element_time_s")
NEW_FIELDS = ("depthwise_wide_mac_time_s", "weight_grad_byte_time_s", *GROUPED_FIELDS)


def _kind(case: shapes.ShapeCase, arr: Any, i: int) -> str:
    layer = case.layer
    if layer["kind"] == "conv2d":
        if arr.grouped[i]:
            return "grouped <8 per group" if arr.group_channels[i] < 8 else "grouped"
        return "depthwise k>3" if arr.depthwise_wide[i] else "conv"
    if layer["kind"] == "activation":
        return f"activation {layer['function']}"
    return str(layer["kind"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    cores = host_cores()
    cases = shapes.shape_cases(args.cases, seed=0, threads=shapes.calibration_threads(cores))
    measured = shapes.time_cases(cases, rounds=args.rounds)
    arr = shapes.case_arrays(cases)
    kinds = [_kind(c, arr, i) for i, c in enumerate(cases)]
    no_grouped = tuple(c for c in shapes.COLUMNS if c[1] not in GROUPED_FIELDS)
    without = tuple(c for c in shapes.COLUMNS if not (c[0].startswith("fn:") or c[1] in NEW_FIELDS))
    out = {}
    for label, cols in (("every term", shapes.COLUMNS), ("without t_ga, t_gc", no_grouped),
                        ("without t_ga, t_gc, t_dw, t_fn, t_wg", without)):
        fit = shapes.fit_shape_rate(cases, measured, cache_levels(), cores, columns=cols)
        s = fit.summary()
        by_kind = {}
        for k in sorted(set(kinds)):
            rows = fit.residuals[[i for i, kk in enumerate(kinds) if kk == k]]
            vals = np.abs(rows[np.isfinite(rows)])
            by_kind[k] = float(np.median(vals)) if vals.size else float("nan")
        out[label] = {**s, "median_abs_residual_by_kind": by_kind}
        print(f"{label:38s} fit median {s['median_abs_residual']:.1%} max {s['max_abs_residual']:.0%}; held out "
              f"median {s['held_out_median_abs_residual']:.1%} max {s['held_out_max_abs_residual']:.0%}")
    print("cases per kind:", ", ".join(f"{k} {kinds.count(k)}" for k in sorted(set(kinds))))
    for label, row in out.items():
        print(f"  {label:36s}", " ".join(f"{v:6.0%}" for v in row["median_abs_residual_by_kind"].values()))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
