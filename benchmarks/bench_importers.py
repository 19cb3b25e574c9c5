"""How long importing takes: from_torch (meta-device trace) for every preset mirror, from_onnx for small ones.

Run: ``python benchmarks/bench_importers.py`` (from the repository root; uses tests/torch_nets.py).
Prints seconds per import (best of a few runs) and the imported weight count; importing must stay far
below a second even for the 2.1-billion-weight network, because no weight memory is touched.
"""

from __future__ import annotations

import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "importers")]

import resource  # noqa: E402

import dnnbench  # noqa: E402
from dnnbench.counts import totals  # noqa: E402


def best_of(fn, repeat: int = 3) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def main() -> None:
    from onnx_export import export
    from torch_nets import PRESET_MODULES, build

    print(f"{'network':<18}{'from_torch s':>14}{'from_onnx s':>13}{'weights':>16}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in PRESET_MODULES:
            module, shape = build(name)
            t_torch, net = best_of(lambda m=module, s=shape: dnnbench.from_torch(m, s))
            onnx_text = "-"
            if name in ("lenet5", "mnist-adam"):
                cpu_module, _ = build(name, device="cpu")
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    path = export(cpu_module, shape, Path(tmp) / f"{name}.onnx")
                t_onnx, _ = best_of(lambda p=path: dnnbench.from_onnx(p))
                onnx_text = f"{t_onnx:.4f}"
            print(f"{name:<18}{t_torch:>14.4f}{onnx_text:>13}{totals(net).weights:>16,}")
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak resident memory of this process: {rss_mib:.0f} MiB (the 2.1 B-weight model would need 8,000+)")


if __name__ == "__main__":
    main()
