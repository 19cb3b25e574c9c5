"""Predictions from the device presets alone against vendors' published multi-GPU training throughput.

The published numbers are NVIDIA's Deep Learning Examples tables (PyTorch, ConvNets: ResNet-50 v1.5 in the
pytorch-21.03 container, ResNeXt101-32x4d in pytorch-20.06), synthetic-free ImageNet training, per-GPU
batch sizes from the repository's configs.yml. Nothing here is fitted to them: the device presets hold
datasheet numbers and a priori efficiencies (docs/presets.md). Prints one row per table entry and the
median and largest |error|.

A second part shows what one measurement per device and precision buys: each precision's efficiency of
each system is fitted to that system's ResNet-50 one-GPU row alone
(``dnnbench.measure.device.fit_precision_efficiency``), and the other rows of the same system and
precision (ResNet-50 on 8 GPUs, ResNeXt101 on 1 and 8) are predicted with it, out of sample.

    python3 benchmarks/bench_published.py
"""

from __future__ import annotations

import statistics
import sys
from typing import Any

from dnnbench import presets
from dnnbench.model import predict
from dnnbench.specs import Configuration

#: (network, cluster, precision, per-GPU batch, GPUs, published images/s). Source: NVIDIA
#: DeepLearningExamples, PyTorch/Classification/ConvNets/{resnet50v1.5,resnext101-32x4d}/README.md,
#: "Training performance results"; batch sizes from PyTorch/Classification/ConvNets/configs.yml.
#: DGX-1 rows are the 16 GB tables; "fp16" is the tables' mixed precision (AMP).
PUBLISHED: tuple[tuple[str, str, str, int, int, float], ...] = (
    ("resnet50", "dgx-a100", "tf32", 256, 1, 938), ("resnet50", "dgx-a100", "tf32", 256, 8, 7248),
    ("resnet50", "dgx-a100", "fp16", 256, 1, 2470), ("resnet50", "dgx-a100", "fp16", 256, 8, 16621),
    ("resnet50", "dgx1-v100", "fp32", 112, 1, 367), ("resnet50", "dgx1-v100", "fp32", 112, 8, 2855),
    ("resnet50", "dgx1-v100", "fp16", 256, 1, 1200), ("resnet50", "dgx1-v100", "fp16", 256, 8, 8322),
    ("resnext101-32x4d", "dgx-a100", "tf32", 128, 1, 300.42),
    ("resnext101-32x4d", "dgx-a100", "tf32", 128, 8, 2380.51),
    ("resnext101-32x4d", "dgx-a100", "fp16", 128, 1, 908.40),
    ("resnext101-32x4d", "dgx-a100", "fp16", 128, 8, 6887.59),
    ("resnext101-32x4d", "dgx1-v100", "fp32", 64, 1, 150.05),
    ("resnext101-32x4d", "dgx1-v100", "fp32", 64, 8, 1151.01),
    ("resnext101-32x4d", "dgx1-v100", "fp16", 128, 1, 534.91),
    ("resnext101-32x4d", "dgx1-v100", "fp16", 128, 8, 4000.79),
)
#: The tables' A100 runs are on DGX A100 80GB (ResNet-50) and 40GB (ResNeXt): both presets' A100s have the
#: same peak rates; the 40GB's memory bandwidth is 1,555 GB/s against 2,039.
CLUSTER_FOR = {("resnext101-32x4d", "dgx-a100"): "a100-40gb"}


def network(name: str) -> Any:
    if name != "resnext101-32x4d":
        return presets.network(name)
    from pathlib import Path

    from dnnbench import from_torch

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from torchvision_models import models  # torchvision's definitions, without its compiled operators

    tm = models()
    model = tm.resnet.ResNet(tm.resnet.Bottleneck, [3, 4, 23, 3], groups=32, width_per_group=4)
    return from_torch(model, (3, 224, 224), name="resnext101-32x4d")


def cluster(net: str, name: str) -> Any:
    base = presets.cluster(name)
    device = CLUSTER_FOR.get((net, name))
    return base if device is None else base.evolve(worker=presets.device(device))


def main() -> None:
    nets: dict[str, Any] = {}
    errors = []
    single: dict[tuple[str, str, str], tuple[float, float]] = {}
    scaling = []
    print(f"{'network':<18}{'cluster':<11}{'prec':<6}{'b':>5}{'GPUs':>6}{'published':>11}{'predicted':>11}"
          f"{'error':>8}  bottleneck")
    for net, cl, prec, batch, gpus, published in PUBLISHED:
        if net not in nets:
            nets[net] = network(net)
        cfg = _config(prec, batch, gpus)
        item = predict(nets[net], cluster(net, cl), "imagenet1k", cfg).item()
        err = item["samples_per_s"] / published - 1.0
        errors.append(abs(err))
        if gpus == 1:
            single[(net, cl, prec)] = (published, item["samples_per_s"])
        else:
            pub1, pred1 = single[(net, cl, prec)]
            scaling.append((net, cl, prec, gpus, published / pub1, item["samples_per_s"] / pred1))
        fits = "" if item["feasible"] else f" (does not fit: {item['infeasible_detail']})"
        print(f"{net:<18}{cl:<11}{prec:<6}{batch:>5}{gpus:>6}{published:>11,.0f}{item['samples_per_s']:>11,.0f}"
              f"{err:>+8.0%}  {item['bottleneck']}{fits}")
    print(f"median |error| {statistics.median(errors):.0%}, max {max(errors):.0%} over {len(errors)} published "
          "points (predicted from datasheet presets, nothing fitted)")
    print("strong scaling, 8 GPUs over 1 (published, predicted):")
    for net, cl, prec, _gpus, pub, pred in scaling:
        print(f"  {net:<18}{cl:<11}{prec:<6}{pub:>6.2f}x {pred:>6.2f}x {pred / pub - 1:>+6.0%}")
    worst = max(abs(pred / pub - 1) for *_, pub, pred in scaling)
    print(f"scaling |error| median {statistics.median(abs(p / q - 1) for *_, q, p in scaling):.0%}, max {worst:.0%}")
    calibrated_on_one_row(nets)


def _config(prec: str, batch: int, gpus: int) -> Configuration:
    return Configuration(data_parallel="allreduce", replicas=gpus, precision=prec, local_batch_samples=batch,
                         push_interval_samples=batch, optimizer="momentum")


def calibrated_on_one_row(nets: dict[str, Any]) -> None:
    """Each (system, precision)'s efficiency fitted to its ResNet-50 one-GPU row; the other rows predicted."""
    from dnnbench.measure.device import fit_precision_efficiency

    print("one row per system and precision calibrates that precision's efficiency (ResNet-50, 1 GPU); "
          "the other rows out of sample:")
    held_out = []
    for net, cl, prec, batch, gpus, published in PUBLISHED:
        if net != "resnet50" or gpus != 1:
            continue
        worker, report = fit_precision_efficiency(nets[net], cluster(net, cl), "imagenet1k", _config(prec, batch, 1),
                                                  published)
        curve = worker.accelerator.efficiency_by_precision
        print(f"  {cl:<11}{prec:<6} efficiency x{report['factor']:.2f}: conv {report['efficiency']['conv']:.2f}, "
              f"matmul {report['efficiency']['fc']:.2f}{' (' + report['bound'] + ')' if report['bound'] else ''}")
        for net2, cl2, prec2, batch2, gpus2, published2 in PUBLISHED:
            if (cl2, prec2) != (cl, prec) or (net2, gpus2) == (net, 1):
                continue
            base = cluster(net2, cl2)
            # The same chip in every device of this system: its curve travels to the 40 GB A100 too.
            fitted = base.evolve(worker=base.worker.evolve(accelerator=base.worker.accelerator.evolve(
                efficiency_by_precision=curve.to_dict())))
            got = float(predict(nets[net2], fitted, "imagenet1k", _config(prec2, batch2, gpus2)).samples_per_s)
            err = got / published2 - 1.0
            held_out.append(abs(err))
            print(f"    {net2:<18}{gpus2:>3} GPUs {published2:>9,.0f} {got:>9,.0f} {err:>+6.0%}")
    print(f"out of sample after one row each: median |error| {statistics.median(held_out):.0%}, "
          f"max {max(held_out):.0%} over {len(held_out)} points")


if __name__ == "__main__":
    main()
