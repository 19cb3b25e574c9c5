"""The full ESGD study, timed: 4 workers, 5,000 real MNIST digits, drop ratios 0 / 50 / 75 / 87.5 % and beyond
(notebooks/esgd_study.ipynb's defaults). Target: under 3 minutes on 2 cores.

    python benchmarks/bench_esgd.py [--n-jobs 2] [--rounds 300] [--json out.json]

Prints the wall time and CPU time, the accuracy of every run, and ESGD's accuracy beside the paper's
abstract numbers (ESGD here is reconstructed: docs/esgd.md).
"""

from __future__ import annotations

import argparse
import os
import resource
import time

from dnnbench.esgd import EdgeLink, StudyConfig, analysis, run_study
from dnnbench.esgd.paper import PAPER_MNIST_ACCURACY

TARGET_S = 180.0


def _cpu_s() -> float:
    """CPU seconds of this process and its finished children (the study's worker processes)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-jobs", type=int, default=2, help="processes (default 2)")
    parser.add_argument("--rounds", type=int, default=StudyConfig().rounds)
    parser.add_argument("--json", default="", help="also write the study's results JSON here")
    args = parser.parse_args()

    config = StudyConfig(rounds=args.rounds)  # dataset "mnist", 4 workers, the notebook's defaults
    cpu0, wall0 = _cpu_s(), time.perf_counter()
    result = run_study(config, n_jobs=args.n_jobs)
    wall, cpu = time.perf_counter() - wall0, _cpu_s() - cpu0
    load = os.getloadavg()[0]

    print(f"ESGD study: {len(result.runs)} runs, {config.workers} workers, {config.rounds} rounds, "
          f"dataset {config.dataset}, drop ratios {list(config.drop_ratios)}")
    print(f"wall time {wall:.1f} s (target < {TARGET_S:.0f} s) on {args.n_jobs} process(es); "
          f"CPU time {cpu:.1f} s; 1-min load average at the end {load:.1f}")
    print()
    print(f"{'run':52s} {'final acc':>9s} {'best acc':>9s} {'density':>8s} {'run s':>6s}")
    for row in analysis.run_table(result):
        print(f"{row['label']:52s} {100 * row['final_accuracy']:8.1f}% {100 * row['best_accuracy']:8.1f}% "
              f"{100 * row['density_up']:7.2f}% {row['wall_time_s']:6.1f}")
    print()
    print("ESGD (ours, reconstructed) beside the paper's abstract (MNIST):")
    for row in analysis.accuracy_vs_drop(result):
        paper = PAPER_MNIST_ACCURACY.get(row["drop_ratio"])
        paper_text = "" if paper is None else f"   paper {100 * paper:.1f} %"
        print(f"  drop {100 * row['drop_ratio']:5.1f} %: ESGD {100 * row['esgd_accuracy']:.1f} %, "
              f"top-k EF {100 * row['topk_ef_accuracy']:.1f} %{paper_text}")
    if args.json:
        link = EdgeLink(20e6, 40e6, 0.003, 0.003, 2.5e8, True)  # the notebook's default link
        analysis.write_json(analysis.summarize(result, link, 0.9), args.json)
        print(f"results JSON: {args.json}")
    print("PASS" if wall < TARGET_S else "SLOW", f"({wall:.1f} s)")


if __name__ == "__main__":
    main()
