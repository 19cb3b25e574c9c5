"""Micro-benchmarks with PyTorch on the CPU (docs/validation.md §"Calibration").

Each case is one layer (conv, FC across sizes in and out of the last-level cache, pooling,
elementwise) trained in isolation: forward, back-prop to its input, weight gradient and an SGD step,
timed by CPU time of the thread (1 thread). Its per-sample counts come from the spec layer, as a
non-first layer (docs/model.md §3), so the fit sees exactly the terms the model charges.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..specs.layers import Activation, Conv2d, FullyConnected, LayerCounts, Pool, _Layer
from .timing import Samples, Stopwatch


@dataclass(frozen=True)
class Case:
    """One micro-benchmark: a spec layer on an input shape, run with a mini-batch."""

    name: str
    group: str  # conv | fc | pool | elementwise (the model's KIND_GROUPS)
    layer: _Layer
    input_shape: tuple[int, ...]

    def counts(self) -> LayerCounts:
        out = self.layer.output_shape(self.input_shape, self.name)
        return self.layer.counts(self.input_shape, out, first=False)


def cases(quick: bool = False) -> list[Case]:
    """The calibration cases. FC weights span 0.25 MB to 128 MB: in and out of a 32 MB LLC."""
    conv = [(1, 28, 32, 5), (32, 12, 64, 5), (3, 32, 64, 3), (64, 16, 128, 3), (16, 32, 32, 3), (128, 8, 256, 3)]
    fc = [(256, 256), (1024, 1024), (1024, 1500), (1500, 1500), (2048, 4096), (4096, 4096), (4096, 8192)]
    if quick:
        conv = conv[:4]
        fc = [(256, 256), (1024, 1500), (4096, 4096), (4096, 8192)]
    out = [Case(f"conv{c}x{h}->{o}k{k}", "conv", Conv2d(out_channels=o, kernel=k), (c, h, h)) for c, h, o, k in conv]
    out += [Case(f"fc{i}->{o}", "fc", FullyConnected(out_features=o), (i,)) for i, o in fc]
    out += [
        Case("maxpool32x24", "pool", Pool(mode="max", window=2), (32, 24, 24)),
        Case("maxpool64x8", "pool", Pool(mode="max", window=2), (64, 8, 8)),
        Case("avgpool6x28", "pool", Pool(mode="avg", window=2), (6, 28, 28)),
        Case("relu32x24", "elementwise", Activation(function="relu"), (32, 24, 24)),
        Case("tanh6x28", "elementwise", Activation(function="tanh"), (6, 28, 28)),
        Case("relu4096", "elementwise", Activation(function="relu"), (4096,)),
    ]
    if quick:
        out = [c for c in out if c.name not in ("maxpool64x8", "relu4096")]
    return out


def run_case(case: Case, batch_size: int = 32, repeats: int = 5) -> dict[str, Any]:
    """Median CPU and wall seconds per mini-batch of one training step of the case's layer."""
    import torch

    from .torchnet import _module

    mod = _module(case.layer, case.input_shape, case.name)
    params = list(mod.parameters())
    opt = torch.optim.SGD(params, lr=1e-3) if params else None
    x = torch.randn((batch_size, *case.input_shape)).requires_grad_(True)
    s = Samples()
    for i in range(repeats + 1):
        with Stopwatch() as sw:
            y = mod(x)
            y.backward(torch.ones_like(y))
            if opt is not None:
                opt.step()
                opt.zero_grad(set_to_none=False)
        x.grad = None
        if i:  # the first run warms up caches and allocators
            s.add(sw.wall_s, sw.cpu_s)
    c = case.counts()
    return {"name": case.name, "group": case.group, "batch_size": batch_size,
            "macs": c.macs_forward + c.macs_backprop + c.macs_weight_grad,
            "elem_ops": c.elem_ops_forward + c.elem_ops_backprop, "weights": c.weights, **s.median()}


def run_cases(items: list[Case], batch_size: int = 32, repeats: int = 5,
              progress: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    import torch

    torch.set_num_threads(1)
    rows = []
    for case in items:
        rows.append(run_case(case, batch_size, repeats))
        if progress is not None:
            progress(case.name)
    return rows


def thread_efficiency(threads: int = 2, size: int = 1024, repeats: int = 5) -> float:
    """η(T) = t(1 thread) / (T · t(T threads)) of a square GEMM, in wall time (needs idle cores)."""
    import torch

    a, b = torch.randn(size, size), torch.randn(size, size)
    times = []
    for t in (1, threads):
        torch.set_num_threads(t)
        s = Samples()
        for _ in range(repeats + 1):
            with Stopwatch() as sw:
                a @ b
            s.add(sw.wall_s, sw.cpu_s)
        times.append(min(s.wall_s[1:]))
    torch.set_num_threads(1)
    return float(times[0] / (threads * times[1]))
