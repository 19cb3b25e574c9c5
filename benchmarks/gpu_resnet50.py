"""Train torchvision's ResNet-50 with mixed precision on one GPU and compare with the prediction.

    python3 benchmarks/gpu_resnet50.py --device a100-80gb [--batch 256] [--steps 300] [--precision fp16]
                                       [--write-device my-a100.json]

Synthetic ImageNet-sized data (no loader in the way), SGD with momentum, channels-last, torch.autocast.
Prints the median step's images/s (after 10 untimed warm-up steps), the prediction from the device
preset on one device, and their ratio. With ``--write-device`` it also writes the device preset with this
precision's efficiency fitted to the measurement (``dnnbench.measure.device.fit_precision_efficiency``),
for predictions of other networks and GPU counts on this device. Exits with code 2 when no CUDA device is
present.
"""

from __future__ import annotations

import argparse
import statistics
import sys


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="a100-80gb", help="the device preset to predict with")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--precision", default="fp16", choices=["fp32", "tf32", "fp16", "bf16"])
    parser.add_argument("--write-device", default=None, metavar="FILE",
                        help="write the device preset with this precision's efficiency fitted to the measurement")
    args = parser.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("gpu_resnet50: no CUDA device here; this benchmark needs one", file=sys.stderr)
        return 2
    from pathlib import Path

    from dnnbench import presets
    from dnnbench.model import predict
    from dnnbench.specs import Configuration

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from gpu_train import step_times  # the same training loop as the other networks' (warm-up untimed)

    times, _ = step_times("resnet50", args.precision, args.batch, args.steps, float("inf"), warmup=10)
    measured = args.batch / statistics.median(times)
    cluster = presets.cluster("dgx-a100").evolve(worker=presets.device(args.device), node=None, machines=1)
    cfg = Configuration(precision=args.precision, local_batch_samples=args.batch, optimizer="momentum")
    predicted = predict("resnet50", cluster, "imagenet1k", cfg).item()["samples_per_s"]
    print(f"{torch.cuda.get_device_name()}: measured {measured:,.0f} img/s, predicted ({args.device}) "
          f"{predicted:,.0f} img/s, ratio {predicted / measured:.2f}")
    if args.write_device:
        from dnnbench.fileio import write_json
        from dnnbench.measure.device import fit_precision_efficiency

        machine, report = fit_precision_efficiency("resnet50", cluster, "imagenet1k", cfg, measured)
        eff = report["efficiency"]
        write_json(args.write_device, machine.to_dict(), field="--write-device")
        print(f"{args.precision} efficiency fitted: conv {eff['conv']:.3f}, matmul {eff['fc']:.3f} "
              f"(x{report['factor']:.3f}){' at its bound: ' + report['bound'] if report['bound'] else ''}; "
              f"wrote {args.write_device}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
