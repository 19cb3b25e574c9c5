"""CLI plugin: ``dnnbench calibrate`` and ``dnnbench validate`` (docs/validation.md)."""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any


def _rate(text: str) -> float:
    """'1g', '100m' or a number of bit/s."""
    t = text.strip().lower().rstrip("bit/s").rstrip("b")
    mult = {"k": 1e3, "m": 1e6, "g": 1e9}.get(t[-1:], 1.0)
    try:
        v = float(t[:-1] if t[-1:] in "kmg" else t) * mult
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a rate such as 1g or 100m") from None
    if not math.isfinite(v):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite rate such as 1g or 100m")
    if v <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be positive")
    return v


def _threads_list(text: str) -> list[int]:
    """'1,4': a comma-separated list of whole numbers >= 1."""
    out = []
    for part in text.split(","):
        try:
            v = int(part.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of whole numbers") from None
        if not 1 <= v <= 4096:
            raise argparse.ArgumentTypeError(f"{text!r}: each number must be 1 to 4096")
        out.append(v)
    return out


def _non_negative(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not v >= 0 or v == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number >= 0")
    return v


def _profile(args: argparse.Namespace) -> int:
    """``calibrate --network``: time the network's layers and add them to the cluster spec."""
    from tqdm import tqdm

    from .. import fmt, presets
    from ..errors import SpecError
    from ..specs.io import save
    from .shapes import profile_and_check

    net = presets.network(args.network)
    base = presets.cluster(args.cluster)
    if base.worker.shape_rate is None:
        raise SpecError("--cluster", args.cluster, "has no worker shape_rate; expected a cluster spec written by "
                                                   "dnnbench calibrate")
    threads = args.threads or [1]
    batches = tuple(args.batch) if args.batch else None
    if batches is not None and (len(batches) != 2 or batches[0] == batches[1]):
        raise SpecError("--batch", ",".join(map(str, args.batch)), "two different mini-batches, e.g. 8,64")
    profiles = []
    worker = base.worker
    with tqdm(total=len(threads) * 3, desc="profiling", unit="launch", file=sys.stderr) as bar:
        for t in threads:
            kw = {"batches": batches} if batches else {}
            profiles.append(profile_and_check(net, base, threads=t, progress=lambda _name: bar.update(), **kw))
            worker = profiles[-1].merged_into(worker)
    ps = worker if base.ps == base.worker else base.ps
    save(base.evolve(worker=worker, ps=ps), args.output)
    first = profiles[0].layers[0]
    print(f"wrote {args.output}: {len(profiles[0].layers)} distinct layers of {net.name} timed inside training "
          f"steps at {', '.join(map(str, threads))} thread(s), mini-batches {first.batch_samples[0]} and "
          f"{first.batch_samples[1]}; predictions of layers with these signatures now use them")
    for p in (layer for profile in profiles for layer in profile.layers):
        kind = p.signature.split('"kind":"', 1)[-1].split('"', 1)[0]
        print(f"  {kind:<12} {p.signature.rsplit('@', 1)[-1]:<14} t{p.threads}  forward "
              f"{fmt.seconds(p.forward_s[1])}, backward {fmt.seconds(p.backward_s[1])} at b={p.batch_samples[1]}"
              f" (spread {100 * p.spread:.0f}%)")
    for profile in profiles:
        step = profile.step
        print(f"  whole steps at b={step.batch_samples}, t{step.threads}: predicted from these timings within "
              f"{100 * profile.error:.1f}% of measured (widens the p10-p90 interval); the step's own fixed time "
              f"set to {fmt.seconds(step.step_time_s)} to match them")
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from ..fileio import check_output_file
    from ..specs.io import save, write_json_atomic
    from .calibrate import calibrate, steps

    check_output_file(args.output, "-o")  # before minutes of measurements, not after
    if args.network:
        if not args.cluster:
            from ..errors import SpecError

            raise SpecError.plain("--cluster", "is required with --network (a cluster spec written by "
                                               "dnnbench calibrate, e.g. cluster.json)")
        return _profile(args)
    if args.report:
        check_output_file(args.report, "--report")
    with tqdm(total=steps(args.quick), desc="calibrating", unit="bench", file=sys.stderr) as bar:
        cluster, report = calibrate(quick=args.quick, progress=lambda name: (bar.set_postfix_str(name), bar.update()),
                                    shared_host=args.shared_host)
    save(cluster, args.output)
    if args.report:
        write_json_atomic(args.report, report)
    c, t = report["compute"], report["transfer"]
    print(f"calibrated in {report['elapsed_s']:.0f} s")
    print(f"wrote {args.output}: t_mac conv {c['mac_time_s']['conv']:.3g} s, fc {c['mac_time_s']['fc']:.3g} s, "
          f"t_elem {c['elem_time_s']:.3g} s, cache speed-up {c['cache_speedup']:.2f}, "
          f"layer overhead {c['layer_overhead_s'] * 1e6:.1f} us/pass; "
          f"loopback {t['bits_per_s'] / 1e9:.2f} Gbit/s, latency {t['latency_s'] * 1e6:.0f} us, "
          f"message copies {t['copy_time_s_per_byte'] * 1e9:.3f} ns/byte per end")
    where = "in shared_host" if cluster.shared_host else "for --shared-host"
    print(f"step-time jitter (CV) {cluster.worker.step_time_cv:.3f}; this host with its ranks together ({where}): "
          f"co-run slowdown {report['corun']['host_corun_slowdown']:.3f}, "
          + ("wake-up delay not measured (--shared-host measures it)" if "not_measured" in report["wakeup"]
             else f"wake-up delay {1e3 * report['wakeup']['host_wakeup_delay_s']:.2f} ms"))
    print(f"fit residuals (predicted/measured - 1): compute median {100 * c['median_abs_residual']:.0f}%, "
          f"max {100 * c['max_abs_residual']:.0f}%; transfers median {100 * t['median_abs_residual']:.0f}%, "
          f"max {100 * t['max_abs_residual']:.0f}%")
    for name, r in c["residuals"].items():
        print(f"  {name:<22}{100 * r:+7.1f}%")
    sh = report["shapes"]
    rate = cluster.worker.shape_rate
    band = cluster.worker.compute_error
    print(f"shape-aware compute ({sh['cases']} layer cases, phases timed apart): fit residuals median "
          f"{100 * sh['median_abs_residual']:.0f}%, max {100 * sh['max_abs_residual']:.0f}%; held out (5-fold) "
          f"median {100 * sh['held_out_median_abs_residual']:.0f}%, max {100 * sh['held_out_max_abs_residual']:.0f}%")
    if rate is not None and band is not None:
        per_core = " per core (memory per core)" if rate.memory_per_core else ""
        print(f"  cache level {rate.cache_bytes / 2**20:.0f} MiB{per_core}, "
              f"thread contention {rate.thread_contention:.2f}, "
              f"in-step call scale {rate.step_call_scale:.1f}, {1e6 * rate.layer_step_time_s:.1f} us per layer and "
              f"{1e6 * rate.step_time_s:.0f} us per step")
        if rate.recurrent_steps is not None:
            rs = rate.recurrent_steps
            print(f"  recurrent steps (per layer and direction): LSTM {1e6 * rs.lstm_s:.1f} us, GRU "
                  f"{1e6 * rs.gru_s:.1f} us, RNN {1e6 * rs.rnn_s:.1f} us")
        layer, whole = sh["band"], sh["step_band"]
        print(f"  prediction interval p10 {100 * band.p10:+.0f}%, p90 {100 * band.p90:+.0f}%; held out: whole steps "
              f"of chains the step fit did not see p10 {100 * whole['p10']:+.0f}%, p90 {100 * whole['p90']:+.0f}% "
              f"({whole['cases']} steps), single layers p10 {100 * layer['p10']:+.0f}%, p90 {100 * layer['p90']:+.0f}%"
              f" ({layer['cases']} phases)")
    worst = sorted(sh["residuals"].items(), key=lambda kv: -abs(kv[1]))[:5]
    print("  largest residuals: " + "; ".join(f"{k} {100 * v:+.0f}%" for k, v in worst))
    gate = sh.get("quiet_gate")
    if gate and (gate["waited_s"] > 0 or gate["disturbed"] > 0):
        print(f"  multi-thread timings: this host was busy now and then (a reference product ran up to "
              f"{gate['worst_ratio']:.1f}x its quickest); waited {gate['waited_s']:.0f} s for it"
              + (f", {gate['disturbed']:.0f} timings taken busy anyway (calibrate again on a quieter machine)"
                 if gate["disturbed"] else ""))
    return 0


def _advance(bar: Any, name: str) -> None:
    """One step of a progress bar, its total grown by the steps nobody planned (a launch run again
    because the host was busy), so that it never reads past 100 %."""
    if bar.total is not None and bar.n >= bar.total:
        bar.total = bar.n + 1
    bar.set_postfix_str(name)
    bar.update()


def cmd_validate(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from .. import presets
    from ..cliargs import finite as _finite
    from ..cliargs import print_json as _print_json
    from .plan import plan, progress_steps, runnable
    from .report import ValidationReport, replay, table
    from .validate import validate

    if args.output:
        from ..fileio import check_output_file

        check_output_file(args.output, "-o")  # before the runs, not after
    if args.replay:
        report = replay(ValidationReport.load(args.replay))
    elif args.network is None:
        from ..errors import SpecError

        raise SpecError.plain("--network", "is required (or --replay REPORT)")
    else:
        net = presets.network(args.network)
        rates = tuple(args.link or ())
        runs, _ = runnable(plan(args.smoke, rates), args.smoke, emulate=not args.no_emulation, net=net)
        total = progress_steps(runs, args.launches)
        with tqdm(total=total, desc="validating", unit="step", file=sys.stderr, disable=args.json) as bar:
            report = validate(net, smoke=args.smoke, batch_size=args.batch_size, iterations=args.iterations,
                              rates_bits_per_s=rates, emulate=not args.no_emulation, launches=args.launches,
                              exchange_overhead_s=args.exchange_overhead_s, pollers=args.pollers,
                              progress=lambda name: _advance(bar, name))
    if args.output:
        report.save(args.output)
    if args.json:
        _print_json(_finite(_strip(report.to_dict())))
        return 0
    try:
        text = table(report)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as err:
        if not args.replay:
            raise
        from ..errors import SpecError

        # A saved report's parts that only the table reads: a bad one is the same one line as replay's.
        raise SpecError.plain("report", f"is not a dnnbench validation report (missing or bad {err!r:.80})") from None
    print(text)
    return 0


def _strip(report: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(report, default=float))


def register(subparsers: Any) -> None:
    from ..cliargs import positive_int as _positive_int

    p = subparsers.add_parser("calibrate", help="micro-benchmark this machine (PyTorch) and write a cluster spec")
    p.add_argument("-o", "--output", default="cluster.json", help="cluster spec to write (default: cluster.json)")
    p.add_argument("--quick", action="store_true", help="fewer cases and repeats (about half the time)")
    p.add_argument("--report", help="also write the raw timings and fit residuals to this JSON file")
    p.add_argument("--shared-host", action="store_true",
                   help="write the cluster as processes on this one host (shared_host: its cores and the measured "
                        "co-run slowdown and wake-up delay), for emulating a cluster here")
    p.add_argument("--network", help="time this network's layers (a preset or spec file) inside training steps "
                                     "and add them to --cluster's worker: predictions of those layers then use "
                                     "the timings (seconds; no full calibration)")
    p.add_argument("--cluster", help="with --network: the calibrated cluster spec to add the timings to")
    p.add_argument("--threads", type=_threads_list, help="with --network: thread counts to time at (default 1), "
                                                         "e.g. 1,4")
    p.add_argument("--batch", type=_threads_list, help="with --network: the two mini-batches to time at "
                                                       "(default 8,64)")
    p.set_defaults(func=cmd_calibrate, steady_heap=True)

    p = subparsers.add_parser("validate", help="predicted against measured throughput of real training runs")
    p.add_argument("--network", help="preset name or spec file")
    p.add_argument("--replay", metavar="REPORT",
                   help="predict a saved report's runs again with the current model and the report's own "
                        "calibration (no runs; docs/validation.md)")
    p.add_argument("--batch-size", type=_positive_int, default=64, help="samples per mini-batch (default 64)")
    p.add_argument("--iterations", type=_positive_int, default=30, help="measured steps per run (default 30)")
    p.add_argument("--launches", type=_positive_int, default=1,
                   help="launches per run, interleaved across the runs; each run's median launch is kept "
                        "(default 1; the full sweep uses 5)")
    p.add_argument("--smoke", action="store_true", help="3 runs on loopback (1 process, PS sync R=1 and 2)")
    p.add_argument("--link", type=_rate, action="append",
                   help="also run on an emulated tbf link of this rate (e.g. 1g, 100m; repeatable; needs root)")
    p.add_argument("--no-emulation", action="store_true", help="loopback only, even with --link")
    p.add_argument("--pollers", action="store_true",
                   help="run every launch beside idle-priority busy loops, one per CPU, so that a woken rank "
                        "never waits behind another rank's compute (docs/validation.md, Wake-ups)")
    p.add_argument("--exchange-overhead-s", type=_non_negative, default=None,
                   help="model-parallel cost per exchange round in seconds (default: fitted on the loopback "
                        "W=2 run, which then counts as calibration)")
    p.add_argument("-o", "--output", help="write the full report (JSON) to this file")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_validate, steady_heap=True)
