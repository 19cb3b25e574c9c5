"""The device model against the stored training rows of one H200 (no GPU needed).

    python3 benchmarks/bench_gpu_rows.py [--half-channels N]

``tests/model/data/gpu-h200-rows.json`` holds 30 training throughputs measured by ``benchmarks/gpu_train.py``
on one H200 SXM (docs/validation.md, "One GPU"). This predicts each row again with the current model: from
the ``h200-sxm`` preset as shipped, and after fitting each precision's efficiency to that run's ResNet-50
row alone (``fit_precision_efficiency``), the other rows out of sample. It prints every row, the median
and maximum |error| of both, and the p10 / p90 of the held-out rows' measured / predicted step-time
ratio − 1 (the band a device fitted to one row carries, ``ONE_ROW_FIT_BAND``). ``--half-channels N``
predicts with the devices' ``half_efficiency_channels`` set to N instead (0: every layer width alike).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "model" / "data" / "gpu-h200-rows.json"
PRESETS = {"resnet50", "vgg16", "mobilenet-v2", "vit-b16"}


def predicted_rows(half_channels: float | None = None) -> list[dict[str, Any]]:
    """Every stored row with ``preset_error`` and ``fitted_error`` (predicted / measured − 1)."""
    import torch

    import dnnbench
    from dnnbench import presets
    from dnnbench.measure.device import fit_precision_efficiency
    from dnnbench.model import predict
    from dnnbench.specs import Configuration

    sys.path.insert(0, str(ROOT / "tests"))
    from torchvision_models import models

    data = json.loads(DATA.read_text())
    device = presets.device(data["device"])
    if half_channels is not None:
        device = device.evolve(accelerator=device.accelerator.evolve(half_efficiency_channels=half_channels))
    cluster = presets.cluster("dgx-a100").evolve(worker=device, node=None, machines=1)
    nets: dict[str, Any] = {}
    fitted: dict[tuple[str, str], Any] = {}
    out = []
    for row in data["rows"]:
        name = row["network"]
        if name not in nets:
            if name in PRESETS:
                nets[name] = name
            else:
                with torch.device("meta"):
                    nets[name] = dnnbench.from_torch(getattr(models(), name)(), (3, 224, 224))
        cfg = Configuration(precision=row["precision"], local_batch_samples=data["batch"], optimizer="momentum")
        key = (row["run"], row["precision"])
        if row["fitted_to_this_row"]:
            worker, _ = fit_precision_efficiency(nets[name], cluster, "imagenet1k", cfg, row["measured_samples_per_s"])
            fitted[key] = cluster.evolve(worker=worker)
        preset = predict(nets[name], cluster, "imagenet1k", cfg).item()
        item = predict(nets[name], fitted[key], "imagenet1k", cfg).item()
        memory = item["memory_bytes_per_worker"] - item["memory_bytes_per_worker_parts"]["workspace"]
        out.append({**row, "preset_samples_per_s": preset["samples_per_s"],
                    "fitted_samples_per_s": item["samples_per_s"],
                    "preset_error": preset["samples_per_s"] / row["measured_samples_per_s"] - 1,
                    "fitted_error": item["samples_per_s"] / row["measured_samples_per_s"] - 1,
                    "memory_error": memory / row["peak_memory_bytes"] - 1,
                    "step_ratio": item["samples_per_s"] / row["measured_samples_per_s"] - 1})
    return out


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--half-channels", type=float, default=None, metavar="N",
                        help="the devices' half_efficiency_channels (default: the preset's)")
    args = parser.parse_args(argv)
    rows = predicted_rows(args.half_channels)
    print(f"{'network':<18}{'prec':<6}{'measured':>10}{'preset':>10}{'error':>8}{'fitted':>10}{'error':>8}")
    for r in rows:
        fitted = "(fitted)" if r["fitted_to_this_row"] else f"{r['fitted_error']:+.0%}"
        print(f"{r['network']:<18}{r['precision']:<6}{r['measured_samples_per_s']:>10,.0f}"
              f"{r['preset_samples_per_s']:>10,.0f}{r['preset_error']:>+8.0%}{r['fitted_samples_per_s']:>10,.0f}"
              f"{fitted:>8}")
    preset = [abs(r["preset_error"]) for r in rows]
    held = [r for r in rows if not r["fitted_to_this_row"]]
    fitted_abs = [abs(r["fitted_error"]) for r in held]
    # Measured step time / predicted − 1 = predicted throughput / measured − 1.
    ratios = [r["step_ratio"] for r in held]
    print(f"from the preset alone: median |error| {statistics.median(preset):.1%}, max {max(preset):.1%} "
          f"over {len(rows)} rows")
    print(f"fitted to one ResNet-50 row per run and precision: median |error| {statistics.median(fitted_abs):.1%}, "
          f"max {max(fitted_abs):.1%} over {len(held)} held-out rows")
    print(f"held-out step time / prediction − 1: p10 {_quantile(ratios, 0.1):+.0%}, "
          f"median {statistics.median(ratios):+.0%}, p90 {_quantile(ratios, 0.9):+.0%}")
    memory = [abs(r["memory_error"]) for r in rows]
    print(f"memory per device: median |error| {statistics.median(memory):.1%}, max {max(memory):.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
