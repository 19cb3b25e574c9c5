"""Train standard networks on one GPU in each precision and compare with the model's predictions.

    python3 benchmarks/gpu_train.py [--device h200-sxm] [--networks resnet50,vgg16,mobilenet-v2,vit-b16]
                                    [--precisions fp16,bf16,tf32,fp32] [--batch 256] [--steps 300]
                                    [--seconds 10] [--ceilings] [--json FILE]

Every network is torchvision's definition (the same layers as dnnbench's preset of that name), trained on
synthetic ImageNet-sized data (no loader in the way) with SGD and momentum, channels-last, and
``torch.autocast`` for fp16 (with a gradient scaler) and bf16; tf32 and fp32 switch cuDNN's and cuBLAS's
TF32 modes on and off. After warm-up steps (cuDNN picks its kernels) the steps are timed one by one
(synchronised) until ``--steps`` steps or ``--seconds`` seconds, and the median step gives images/s.

``--networks`` takes dnnbench's presets that are torchvision's models and any other torchvision
classification model by its torchvision name (``resnet18``, ``densenet121``, ...), imported with ``dnnbench.from_torch``
for its prediction; one the importer cannot read is skipped with its reason. For each precision the
first network (ResNet-50 by default) is the one measured row the device's
efficiency is fitted to (``dnnbench.measure.device.fit_precision_efficiency``); every other network is
predicted twice, from the device preset as shipped (datasheet peaks, a priori efficiencies) and with the
fitted efficiency, out of sample. The device's peak memory during the timed steps
(``torch.cuda.max_memory_allocated``) is printed beside the model's memory per device without its reserved
workspace (weights, gradients, optimizer state, activations kept for backward).

``--ceilings`` first measures the device's bf16 matrix-product rate (8192³, random data) and its
device-to-device copy bandwidth, against the preset's datasheet numbers. ``--cpu-smoke`` runs the same
code on the CPU with a tiny batch (the test suite's check that the script works); without it the script
exits with code 2 when no CUDA device is present.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

#: dnnbench's preset name -> torchvision's constructor name. Any other torchvision classification model
#: (``resnet18``, ``densenet121``, ...) is imported with ``dnnbench.from_torch`` for its prediction.
TORCHVISION = {"resnet50": "resnet50", "vgg16": "vgg16", "mobilenet-v2": "mobilenet_v2", "vit-b16": "vit_b_16",
               "alexnet": "alexnet"}
PRECISIONS = ("fp32", "tf32", "fp16", "bf16")


def _models() -> Any:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from torchvision_models import models  # the model definitions, without torchvision's compiled operators

    return models()


def step_times(network: str, precision: str, batch: int, steps: int, seconds: float, warmup: int,
               device: str = "cuda") -> tuple[list[float], float]:
    """Seconds of each timed training step of ``network`` and the peak device memory (bytes) during them."""
    import torch

    try:
        return _train(network, precision, batch, steps, seconds, warmup, device)
    finally:
        if device == "cuda":
            torch.cuda.empty_cache()  # the next run starts with the device's memory free


def _train(network: str, precision: str, batch: int, steps: int, seconds: float, warmup: int,
           device: str) -> tuple[list[float], float]:
    import torch

    cuda = device == "cuda"
    dev = torch.device(device)
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
        torch.backends.cudnn.allow_tf32 = precision == "tf32"
        torch.backends.cudnn.benchmark = True
    model = getattr(_models(), TORCHVISION.get(network, network))().to(dev, memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(batch, 3, 224, 224, device=dev).to(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (batch,), device=dev)
    half = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(precision) if cuda else None
    scaler = torch.amp.GradScaler("cuda", enabled=cuda and precision == "fp16")

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    def step() -> None:
        with torch.autocast(device, dtype=half or torch.float32, enabled=half is not None):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    for _ in range(warmup):
        step()
    sync()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < steps and (len(times) < min(20, steps) or time.perf_counter() - start < seconds):
        sync()
        t0 = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - t0)
    return times, float(torch.cuda.max_memory_allocated()) if cuda else float("nan")


def network_spec(name: str) -> Any:
    """The network to predict: the preset of that name, or torchvision's model imported (meta device)."""
    if name in TORCHVISION:
        return name
    import torch

    import dnnbench

    with torch.device("meta"):
        module = getattr(_models(), name)()
    return dnnbench.from_torch(module, (3, 224, 224))


def _is_torchvision_model(name: str) -> bool:
    try:
        return name in _models().list_models(module=_models())
    except (AttributeError, TypeError):
        return callable(getattr(_models(), name, None))


def ceilings() -> dict[str, float]:
    """The device's bf16 matrix-product rate (FLOP/s) and device-to-device copy bandwidth (bytes/s)."""
    import torch

    n = 8192
    a, b = (torch.randn(n, n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    src = torch.randn(2**30 // 4, device="cuda")
    dst = torch.empty_like(src)

    def timed(fn: Any, reps: int) -> float:
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        runs = []
        for _ in range(reps):
            start.record()
            fn()
            end.record()
            end.synchronize()
            runs.append(start.elapsed_time(end) / 1e3)
        return statistics.median(runs)

    mm = timed(lambda: a @ b, 20)
    cp = timed(lambda: dst.copy_(src), 20)
    return {"bf16_matmul_flops_per_s": 2 * n**3 / mm, "copy_bytes_per_s": 2 * src.numel() * 4 / cp}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="h100-sxm", help="the device preset to predict with")
    parser.add_argument("--networks", default="resnet50,vgg16,mobilenet-v2,vit-b16",
                        help="comma-separated presets; the first is the one the efficiency is fitted to")
    parser.add_argument("--precisions", default="fp16,bf16,tf32,fp32")
    parser.add_argument("--batch", type=int, default=256, help="images per step")
    parser.add_argument("--steps", type=int, default=300, help="timed steps at most (20 at least)")
    parser.add_argument("--seconds", type=float, default=10.0, help="time the steps of one run for about this long")
    parser.add_argument("--warmup", type=int, default=10, help="untimed steps first")
    parser.add_argument("--ceilings", action="store_true", help="measure the matrix rate and copy bandwidth first")
    parser.add_argument("--json", default=None, metavar="FILE", help="write every row as JSON")
    parser.add_argument("--cpu-smoke", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    networks = [n.strip() for n in args.networks.split(",") if n.strip()]
    precisions = [p.strip() for p in args.precisions.split(",") if p.strip()]
    def fail(message: str) -> int:
        print(f"gpu_train: {message}", file=sys.stderr)
        return 2

    for n in networks or [""]:
        if n not in TORCHVISION and not _is_torchvision_model(n):
            return fail(f"--networks: {n!r} is not a network this script trains; expected presets "
                        f"({', '.join(TORCHVISION)}) or torchvision classification models (resnet18, ...)")
    for p in precisions or [""]:
        if p not in PRECISIONS:
            return fail(f"--precisions: {p!r} is not a precision; expected some of {', '.join(PRECISIONS)}")
    for name in ("batch", "steps"):
        if getattr(args, name) < 1:
            return fail(f"--{name}: {getattr(args, name)}; expected a positive integer")
    import torch

    if not args.cpu_smoke and not torch.cuda.is_available():
        print("gpu_train: no CUDA device here; this benchmark needs one", file=sys.stderr)
        return 2
    from dnnbench import presets
    from dnnbench.errors import SpecError
    from dnnbench.model import predict
    from dnnbench.specs import Configuration

    device = "cpu" if args.cpu_smoke else "cuda"
    try:
        machine = presets.device(args.device)
    except SpecError as exc:
        return fail(str(exc).replace("device:", "--device:", 1))
    if machine.accelerator is None:
        return fail(f"--device: {args.device!r} is a CPU machine; expected a device preset with an accelerator")
    cluster = presets.cluster("dgx-a100").evolve(worker=machine, node=None, machines=1)
    out: dict[str, Any] = {"device": args.device, "gpu": torch.cuda.get_device_name() if device == "cuda" else "cpu",
                           "torch": torch.__version__, "batch": args.batch, "rows": []}
    print(f"{out['gpu']}, torch {out['torch']}, predicted as {args.device}; batch {args.batch}", flush=True)
    if args.ceilings and device == "cuda":
        c = ceilings()
        acc = machine.accelerator
        out["ceilings"] = c
        print(f"ceilings: bf16 matrix product {c['bf16_matmul_flops_per_s'] / 1e12:,.0f} TFLOP/s (datasheet "
              f"{(acc.peak_flops_per_s.bf16 or 0) / 1e12:,.0f}), copy {c['copy_bytes_per_s'] / 1e9:,.0f} GB/s "
              f"(datasheet {acc.memory_bytes_per_s / 1e9:,.0f})", flush=True)
    print(f"{'network':<13} {'prec':<5} {'steps':>5} {'measured':>9} {'preset':>9} {'err':>6} {'fitted':>9} "
          f"{'err':>6}  {'peak mem':>9} {'model mem':>9}", flush=True)
    specs: dict[str, Any] = {}
    for precision in precisions:
        if machine.accelerator.peak_flops_per_s.of(precision) is None:
            print(f"{precision}: {args.device} has no {precision} rate; skipped", flush=True)
            continue
        cfg = Configuration(precision=precision, local_batch_samples=args.batch, optimizer="momentum")
        fitted = None
        for network in networks:
            try:
                spec = specs[network] if network in specs else specs.setdefault(network, network_spec(network))
            except SpecError as exc:
                print(f"{network}: dnnbench cannot import it ({exc}); skipped", flush=True)
                continue
            times, peak = step_times(network, precision, args.batch, args.steps, args.seconds, args.warmup, device)
            measured = args.batch / statistics.median(times)
            item = predict(spec, cluster, "imagenet1k", cfg).item()
            first = fitted is None
            if first:
                from dnnbench.measure.device import fit_precision_efficiency

                worker, report = fit_precision_efficiency(spec, cluster, "imagenet1k", cfg, measured)
                fitted = cluster.evolve(worker=worker)
            after = predict(spec, fitted, "imagenet1k", cfg).item()["samples_per_s"]
            parts = item["memory_bytes_per_worker_parts"]
            model_mem = sum(v for k, v in parts.items() if k != "workspace")
            row = {"network": network, "precision": precision, "steps": len(times), "measured_samples_per_s": measured,
                   "spread": (max(times) - min(times)) / statistics.median(times),
                   "predicted_preset_samples_per_s": item["samples_per_s"],
                   "predicted_fitted_samples_per_s": after, "fitted_to_this_row": first,
                   "fit_factor": report["factor"], "fit_bound": report["bound"],
                   "peak_memory_bytes": peak, "model_memory_bytes": model_mem, "model_memory_parts_bytes": parts}
            out["rows"].append(row)
            err_pre = item["samples_per_s"] / measured - 1
            err_fit = "  (fit)" if first else f"{after / measured - 1:+6.0%}"
            print(f"{network:<13} {precision:<5} {len(times):>5} {measured:>9,.0f} {item['samples_per_s']:>9,.0f} "
                  f"{err_pre:+6.0%} {after:>9,.0f} {err_fit:>6}  {peak / 2**30:>7.1f}Gi {model_mem / 2**30:>7.1f}Gi",
                  flush=True)
            if args.json:
                from dnnbench.fileio import write_json

                write_json(args.json, out, field="--json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
