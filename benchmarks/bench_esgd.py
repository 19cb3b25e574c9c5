"""The full ESGD study, timed: 4 workers, 5,000 real MNIST digits, drop ratios 0 / 50 / 75 / 87.5 % and beyond
(notebooks/esgd_study.ipynb's defaults). Target: under 3 minutes on 2 cores.

    python benchmarks/bench_esgd.py [--n-jobs 2] [--rounds 300] [--json out.json]
    python benchmarks/bench_esgd.py --quantisers [--rounds 300]   # signSGD / QSGD beside dense SGD, same set-up
    python benchmarks/bench_esgd.py --hook                       # the DDP hook on 2 gloo ranks, timed

Prints the wall time and CPU time, the accuracy of every run, and ESGD's accuracy beside the paper's
abstract numbers (ESGD here is reconstructed: docs/esgd.md).
"""

from __future__ import annotations

import argparse
import os
import resource
import time

import numpy as np

from dnnbench.esgd import ClusterConfig, EdgeLink, StudyConfig, analysis, run_study, simulate, time_to_accuracy_s
from dnnbench.esgd.paper import PAPER_MNIST_ACCURACY

TARGET_S = 180.0


def _cpu_s() -> float:
    """CPU seconds of this process and its finished children (the study's worker processes)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


NOTEBOOK_LINK = EdgeLink(20e6, 40e6, 0.003, 0.003, 2.5e8, True)  # the notebook's default edge link

QUANTISER_RUNS: tuple[tuple[str, str, dict[str, object]], ...] = (
    ("dense SGD", "dense", {}),
    ("EF-signSGD (per-tensor scale)", "signsgd", {}),
    ("signSGD without error feedback", "signsgd", {"error_feedback": False}),
    ("QSGD s = 7, B = 512", "qsgd", {}),
    ("QSGD s = 1, B = 512", "qsgd", {"levels": 1}),
    ("QSGD s = 15, whole tensor", "qsgd", {"levels": 15, "bucket_size": None}),
)


def quantisers(rounds: int) -> None:
    """The quantisers on the study's set-up (MNIST, 4 workers, MLP, seed 0), one run each, serially."""
    base = StudyConfig(rounds=rounds)
    print(f"quantisers: MNIST, {base.workers} workers, {rounds} rounds, the study's MLP and learning rate")
    print(f"{'run':34s} {'final acc':>9s} {'bits/element up (per format)':44s} {'to 90 %':>8s} {'run s':>6s}")
    for label, method, options in QUANTISER_RUNS:
        config = ClusterConfig(method=method, drop_ratio=None, options=options, dataset=base.dataset,
                               n_workers=base.workers, rounds=rounds, batch_size=base.batch_size,
                               learning_rate=base.learning_rate, server_momentum=base.momentum,
                               hidden_units=base.hidden_units, eval_every=base.eval_every, seed=base.seed)
        run = simulate(config)
        per = {e: float(np.mean(run.bits_up(e))) / run.n_params for e in run.encodings if e != "dense"}
        per_text = ", ".join(f"{e} {b:.3f}" for e, b in per.items()) or "dense 32"
        seconds = time_to_accuracy_s(run, 0.9, NOTEBOOK_LINK)
        print(f"{label:34s} {100 * run.final_accuracy:8.1f}% {per_text:44s} {seconds:7.1f}s {run.wall_time_s:6.1f}")


def hook() -> None:
    """The DDP hook on 2 gloo ranks (20 steps): wall time, and that it behaves."""
    from dnnbench.esgd.torch_demo import run_ddp_check

    wall0 = time.perf_counter()
    a, b = run_ddp_check(world_size=2, steps=20, drop_ratio=0.5)
    wall = time.perf_counter() - wall0
    same = a["esgd"]["params"] == b["esgd"]["params"]
    drop0 = float(np.max(np.abs(np.subtract(a["esgd_drop0"]["params"], a["allreduce"]["params"]))))
    losses = np.array(a["esgd"]["losses"])
    print(f"DDP hook, 2 gloo ranks, 20 steps, drop 50 %: wall {wall:.1f} s; replicas identical: {same}; "
          f"rank 0 loss {losses[:5].mean():.3f} -> {losses[-5:].mean():.3f} (first / last 5 steps); "
          f"drop 0 vs all-reduce max |diff| {drop0:.1e}; density {a['esgd']['density']:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-jobs", type=int, default=2, help="processes (default 2)")
    parser.add_argument("--rounds", type=int, default=StudyConfig().rounds)
    parser.add_argument("--json", default="", help="also write the study's results JSON here")
    parser.add_argument("--quantisers", action="store_true", help="run signSGD / QSGD instead of the study")
    parser.add_argument("--hook", action="store_true", help="time the DDP hook instead of the study")
    args = parser.parse_args()
    if args.quantisers or args.hook:
        if args.quantisers:
            quantisers(args.rounds)
        if args.hook:
            hook()
        return

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
        analysis.write_json(analysis.summarize(result, NOTEBOOK_LINK, 0.9), args.json)
        print(f"results JSON: {args.json}")
    print("PASS" if wall < TARGET_S else "SLOW", f"({wall:.1f} s)")


if __name__ == "__main__":
    main()
