"""Full validation sweep: predicted against measured throughput of real runs (docs/validation.md).

    python3 benchmarks/bench_validation.py [--networks lenet5 mnist-adam] [--links 1g] [--launches 3]
                                           [--repeat K] [-o DIR] [--pollers]
    python3 benchmarks/bench_validation.py --aggregate validation-*.json   # saved sweeps, current model

Each network: the single-process calibration run, then PS sync R=1,2, PS async R=2 and model-parallel
W=2 on loopback and on each emulated link (root only; loopback otherwise), each run the median of
``--launches`` launches, the launches of all runs interleaved in rounds (docs/validation.md
§"Interleaved launches"). The model-parallel exchange overhead (``Nic.exchange_overhead_s``) is fitted on
the first network's loopback W=2 run (in-sample) and given unchanged to every other run.
Prints the table, the out-of-sample median and maximum |error| (wall time and
CPU view), the ranking (Kendall tau) and the host's load; writes one JSON report per network.
Each network's calibration also measures the host's co-run slowdown σ_h (``SharedHost.corun_slowdown``).
Both networks, one link: 3 min 40 s with 1 launch (busy 2-core host), 4 min 17 s with 3 (quiet host),
about 12 min with 5 (``--launches 5 --repeat 3``: 36 min). With ``--repeat``, the per-configuration
medians over the sweeps, and each network's ranking on them, strictly and over the pairs the pooled
launches tell apart, and how many launches of each request–reply run fell inside its phase range
(docs/model.md §6).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from dnnbench import presets
from dnnbench.measure.cli import _rate
from dnnbench.measure.report import ranking, table
from dnnbench.measure.validate import validate


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--networks", nargs="+", default=["lenet5", "mnist-adam"])
    ap.add_argument("--links", nargs="*", type=_rate, default=[1e9])
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--launches", type=int, default=1, help="launches per run; the median is kept (3: ~6 min)")
    ap.add_argument("--exchange-overhead-s", type=float, default=None,
                    help="Nic.exchange_overhead_s for every model-parallel run (default: fitted on the first "
                         "network's loopback W=2 run, then given to the other networks)")
    ap.add_argument("-o", "--output", default=".", help="folder for validation-NETWORK.json")
    ap.add_argument("--pollers", action="store_true", help="runs beside idle pollers (docs/validation.md, Wake-ups)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="whole sweeps in a row (each with its own calibration); with more than one, also the "
                         "per-configuration median of the signed errors across sweeps")
    ap.add_argument("--aggregate", nargs="+", metavar="REPORT",
                    help="run nothing: replay saved reports (validation-NETWORK-K.json) with the current model "
                         "and print the per-configuration medians over them")
    args = ap.parse_args(argv)
    runs: dict[tuple[str, str], list[dict]] = {}
    if args.aggregate:
        from dnnbench.measure.report import replay

        for path in args.aggregate:
            report = replay(json.loads(Path(path).read_text()))
            for r in report.rows:
                if not r["in_sample"]:
                    runs.setdefault((report.network, r["label"]), []).append(r)
        aggregate(runs, max(len(rows) for rows in runs.values()))
        return 0
    for k in range(max(1, args.repeat)):
        if args.repeat > 1:
            print(f"=== sweep {k + 1} of {args.repeat}")
        suffix = f"-{k + 1}" if args.repeat > 1 else ""
        for key, row in sweep(args, suffix).items():
            runs.setdefault(key, []).append(row)
    if args.repeat > 1:
        aggregate(runs, args.repeat)
    return 0


def aggregate(runs: dict[tuple[str, str], list[dict]], repeat: int) -> None:
    """Per configuration, the median over the sweeps of the signed error, the prediction and the
    measurement; the headline figures and each network's ranking on those medians (launches of
    every sweep pooled to tell runs apart)."""
    print(f"per-configuration median error over {repeat} sweeps (out-of-sample):")
    med = {key: float(np.median([r["error"] for r in rows])) for key, rows in runs.items()}
    for (net, label), m in med.items():
        print(f"  {net:<12}{label:<38}{100 * m:+7.1f}%   sweeps: "
              + ", ".join(f"{100 * r['error']:+.1f}%" for r in runs[(net, label)]))
    absm = np.abs(list(med.values()))
    print(f"all networks, per-configuration medians: median |error| {100 * float(np.median(absm)):.1f}%, "
          f"max {100 * float(np.max(absm)):.1f}% over {len(absm)} configurations")
    for net in dict.fromkeys(n for n, _ in runs):
        keys = [k for k in runs if k[0] == net]
        order = ranking([float(np.median([r["predicted_samples_per_s"] for r in runs[k]])) for k in keys],
                        [float(np.median([r["measured_samples_per_s"] for r in runs[k]])) for k in keys],
                        [[x for r in runs[k] for x in r["launches_samples_per_s"]] for k in keys])
        print(f"  {net}: ranking on the medians {'preserved' if order['ranking_preserved'] else 'NOT preserved'} "
              f"(Kendall tau {order['kendall_tau']:.2f}); pairs every launch tells apart: "
              f"{order['measured_apart_pairs']}, ordered the other way by the model: {order['misordered_apart_pairs']}")
    for (net, label), rows in runs.items():  # request–reply runs whose phase the model leaves open
        ranged = [r for r in rows if r.get("predicted_phase_range_samples_per_s")]
        ends = [r["predicted_phase_range_samples_per_s"] for r in ranged]
        if not any(b > 1.01 * a for a, b in ends):
            continue
        inside = sum(int(r.get("launches_in_phase_range", 0)) for r in ranged)
        total = sum(len(r["launches_samples_per_s"]) for r in ranged)
        lo, hi = min(a for a, _ in ends), max(b for _, b in ends)
        print(f"  {net} {label}: phase range {lo:.1f}-{hi:.1f}/s (lock step to staggered), "
              f"{inside} of {total} launches inside their sweep's range")
    return 0


def sweep(args: argparse.Namespace, suffix: str) -> dict[tuple[str, str], dict]:
    """One sweep over the networks; prints its tables and summary, writes its reports, and returns
    the out-of-sample rows by (network, configuration)."""
    all_err: list[float] = []
    all_cpu: list[float] = []
    taus: list[float] = []
    ranked: list[bool] = []
    apart: list[str] = []
    out: dict[tuple[str, str], dict] = {}
    exchange = args.exchange_overhead_s
    for name in args.networks:
        report = validate(presets.network(name), batch_size=args.batch_size, iterations=args.iterations,
                          rates_bits_per_s=tuple(args.links), launches=args.launches, exchange_overhead_s=exchange,
                          pollers=args.pollers,
                          progress=lambda m: print(f"  done: {m}", file=sys.stderr))
        fitted = report.calibration["exchange"]
        if exchange is None and fitted:  # the first network's W=2 loopback run calibrates the others
            exchange = fitted["exchange_overhead_s"]
        report.save(Path(args.output, f"validation-{name}{suffix}.json"))
        print(table(report))
        out.update({(name, r["label"]): r for r in report.rows if not r["in_sample"]})
        all_err += [abs(r["error"]) for r in report.rows if not r["in_sample"]]
        all_cpu += [abs(r["cpu_view_error"]) for r in report.rows
                    if not r["in_sample"] and r["cpu_view_error"] is not None]
        taus.append(report.summary["kendall_tau"])
        ranked.append(report.summary["ranking_preserved"])
        apart.append(f"{report.summary['misordered_apart_pairs']} of {report.summary['measured_apart_pairs']}")
    if all_err:
        print(f"all networks: median |error| {100 * float(np.median(all_err)):.1f}%, max {100 * max(all_err):.1f}% "
              f"over {len(all_err)} out-of-sample configurations; Kendall tau per network "
              + ", ".join(f"{t:.2f}" for t in taus) + "; ranking preserved per network "
              + ", ".join("yes" if r else "no" for r in ranked)
              + "; pairs the launches tell apart, misordered: " + ", ".join(apart))
    if all_cpu:
        print(f"all networks, CPU view: median |error| {100 * float(np.median(all_cpu)):.1f}%, "
              f"max {100 * max(all_cpu):.1f}% over {len(all_cpu)} configurations")
    return out


if __name__ == "__main__":
    from dnnbench.measure.alloc import restart_with_steady_heap

    restart_with_steady_heap([__file__, *sys.argv[1:]])  # it times PyTorch here: a steady heap
    sys.exit(main())
