"""Import time of the core: `import dnnbench` plus the model and optimizer (target < 0.3 s).

Runs each import in a fresh interpreter, several times, and prints the median.
"""

from __future__ import annotations

import statistics
import subprocess
import sys

CODE = ("import time; t = time.perf_counter(); import dnnbench; from dnnbench import presets, model, optimizer; "
        "print(time.perf_counter() - t)")


def main(runs: int = 7) -> None:
    times = [float(subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, check=True).stdout)
             for _ in range(runs)]
    print(f"import dnnbench (+ presets, model, optimizer): median {statistics.median(times) * 1e3:.0f} ms "
          f"over {runs} fresh interpreters (target < 300 ms)")


if __name__ == "__main__":
    main()
