"""How long a woken rank waits on this host (docs/validation.md §"Shared host").

    python3 benchmarks/bench_wakeups.py [--trials 3] [--repeats 300]

A gloo ping-pong between two ranks over loopback (4 kB and 256 kB, LeNet-5's push is 247 kB), in
three conditions, interleaved trial by trial so the host's drift hits them alike:

- alone;
- beside one busy thread (a pure-Python loop at normal priority), as when one rank computes while
  two others exchange a message;
- beside the same busy thread and the idle pollers (one ``SCHED_IDLE`` loop per CPU,
  :func:`dnnbench.measure.pollers.idle_pollers`), which ``dnnbench validate --pollers`` runs beside.

Prints the one-way time (median of ``--repeats`` round trips) per trial and the median over the trials;
the ratio "busy / busy + pollers" is the wait the pollers remove.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from contextlib import ExitStack

import numpy as np

from dnnbench.measure.launch import run_ranks
from dnnbench.measure.pollers import idle_pollers

SIZES_BYTES = (4096, 262144)
CONDITIONS = ("alone", "beside a busy thread", "beside a busy thread, with pollers")


def one_way_s(condition: str, repeats: int) -> dict[int, float]:
    with ExitStack() as stack:
        if condition != "alone":
            busy = subprocess.Popen([sys.executable, "-c", "while True:\n    pass\n"])
            stack.callback(lambda: (busy.kill(), busy.wait()))
            time.sleep(0.2)
        res = run_ranks("dnnbench.measure.transfer:pingpong_main", 2,
                        {"sizes_bytes": list(SIZES_BYTES), "repeats": repeats},
                        pollers="pollers" in condition, timeout_s=120)
    return {s: float(res[0]["one_way_s"][str(s)]) for s in SIZES_BYTES}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=300, help="round trips per size (median kept)")
    args = ap.parse_args()
    with idle_pollers() as pids:
        if not pids:
            print("no idle pollers on this host (one CPU or not Linux): nothing to compare")
            return
    seen: dict[str, list[dict[int, float]]] = {c: [] for c in CONDITIONS}
    for trial in range(args.trials):
        for c in CONDITIONS:
            t = one_way_s(c, args.repeats)
            seen[c].append(t)
            print(f"trial {trial + 1}  {c:36s} " + "  ".join(f"{s // 1024:>4d} kB {1e6 * t[s]:7.1f} us"
                                                            for s in SIZES_BYTES), flush=True)
    med = {c: {s: float(np.median([t[s] for t in seen[c]])) for s in SIZES_BYTES} for c in CONDITIONS}
    print("median over trials, one way:")
    for c in CONDITIONS:
        print(f"  {c:36s} " + "  ".join(f"{s // 1024:>4d} kB {1e6 * med[c][s]:7.1f} us" for s in SIZES_BYTES))
    for s in SIZES_BYTES:
        print(f"{s // 1024} kB: beside a busy thread / with pollers = "
              f"{med[CONDITIONS[1]][s] / med[CONDITIONS[2]][s]:.1f}x")


if __name__ == "__main__":
    main()
