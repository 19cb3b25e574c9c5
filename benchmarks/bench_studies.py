"""Wall time of every shipped study with its default parameters (target: under 60 s each on 2 cores).

    python benchmarks/bench_studies.py [NAME ...]

Prints, per study, the wall time of the whole ``studies.run`` (kernel start, notebook, HTML report)
and the notebook's own compute time, then exits 1 if any study took 60 s or more.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

LIMIT_S = 60.0


def main(argv: list[str]) -> int:
    from dnnbench import studies

    names = argv or list(studies.available())
    print(f"{'study':<14}{'wall s':>9}{'notebook s':>12}{'report MiB':>12}   ({os.cpu_count()} cores)")
    slow = []
    for name in names:
        with tempfile.TemporaryDirectory(prefix=f"bench-{name}-") as out:
            t0 = time.perf_counter()
            res = studies.run(name, {}, out)
            wall = time.perf_counter() - t0
            inner = res.results.get("elapsed_s", float("nan"))
            size = res.html_path.stat().st_size / 2**20 if res.html_path else 0.0
        print(f"{name:<14}{wall:>9.1f}{inner:>12.1f}{size:>12.1f}")
        if wall >= LIMIT_S:
            slow.append(name)
    if slow:
        print(f"over {LIMIT_S:.0f} s: {', '.join(slow)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
