"""PyTorch DDP (gloo, CPU) with 2-4 processes over loopback against the all-reduce model.

    python3 benchmarks/bench_ddp.py [--iterations 40] [--launches 5] [--batch 32] [--link 1g]
                                    [--emulated-compute] [--json FILE] [--replay FILE]

Calibration, in-sample: each network's one-process step, two processes side by side without their
all-reduce, a two-rank all-reduce of plain tensors (latency and bandwidth) and the host's wake-up delay.
Everything else is out of sample: 2, 3 and 4 replicas, DDP buckets of 25 MiB
and 1 MiB, the overlap of the buckets with backward, and the host's cores shared by more ranks than it
has (the model's shared-host layer, docs/model.md §9). Prints every row and the median and largest
|error| (targets: median <= 10 %, max <= 20 %).

``--link RATE`` runs every rank in a network namespace of its own on tbf-shaped links of that rate
(needs root) and fits the link there. ``--emulated-compute`` replaces each rank's compute by sleeps of
the model's per-layer times (dnnbench.measure.sleepnet): the all-reduce, its buckets and their overlap
with backward are then real and the host's cores stay free, so these rows are predicted as a cluster
of separate machines.
"""

from __future__ import annotations

import argparse

from dnnbench.measure.cli import _rate
from dnnbench.measure.ddp import benchmark_networks, replay_ddp, validate_ddp


def show(report: dict) -> None:
    """Print a report's link fits, rows and summary."""
    rate = report["link_bits_per_s"]
    where = ("loopback" if rate is None
             else f"tbf {rate / 1e9:g} Gbit/s (bucket {report['tbf_burst_bytes'] / 1e3:.0f} kB)")
    print(f"{where}; {'emulated' if report['emulated_compute'] else 'real'} compute; host cores {report['cores']}; "
          f"wake-up delay {report['wakeup']['host_wakeup_delay_s'] * 1e3:.2f} ms")
    for ranks, link in report["links"].items():
        print(f"all-reduce link fit at {ranks} ranks: latency {link['latency_s'] * 1e6:.1f} us, "
              f"{link['bytes_per_s'] / 1e9:.3f} GB/s (median of {len(link['fits'])} fits)")
    print(f"{'network':<14}{'R':>3}{'bucket':>10}{'measured':>11}{'predicted':>11}{'error':>8}  bottleneck")
    for row in report["rows"]:
        busy = row.get("launches_busy") or [False] * len(row["launches_samples_per_s"])
        print(f"{row['network']:<14}{row['ranks']:>3}{row['bucket_bytes'] / 2**20:>8.0f}Mi"
              f"{row['measured_samples_per_s']:>11,.0f}{row['predicted_samples_per_s']:>11,.0f}"
              f"{row['error']:>+8.1%}  {row['bottleneck']}; launches "
              + " ".join(f"{x:,.0f}" + ("*" if b else "")
                         for x, b in zip(row["launches_samples_per_s"], busy, strict=True)))
    gate = report.get("quiet_gate")
    if gate:
        print(f"quiet gate: {gate['checks']:.0f} checks, waited {gate['waited_s']:.0f} s, worst "
              f"{gate['worst_ratio']:.1f}x its quickest; * marks a launch the host was busy for (left out of "
              "the median)")
    print(f"out of sample: median |error| {report['median_abs_error']:.1%}, max {report['max_abs_error']:.1%} "
          f"over {len(report['rows'])} runs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=40)
    parser.add_argument("--launches", type=int, default=5)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--link", default=None, type=_rate, metavar="RATE",
                        help="emulated tbf links of this rate (1g, 100m)")
    parser.add_argument("--emulated-compute", action="store_true", help="ranks sleep each layer's time")
    parser.add_argument("--json", default=None, metavar="FILE", help="also write the whole report here")
    parser.add_argument("--replay", default=None, metavar="FILE",
                        help="predict a stored report (--json) again with the current model; nothing is run")
    args = parser.parse_args()
    nets = benchmark_networks()
    if args.replay:
        import json

        from dnnbench.fileio import read_text

        report = replay_ddp(json.loads(read_text(args.replay, field="--replay")), nets)
    else:
        report = validate_ddp(nets, batch_size=args.batch, iterations=args.iterations, launches=args.launches,
                              link_bits_per_s=args.link, emulated_compute=args.emulated_compute)
    show(report)
    if args.json:
        from dnnbench.fileio import write_json

        write_json(args.json, report, field="--json")


if __name__ == "__main__":
    main()
