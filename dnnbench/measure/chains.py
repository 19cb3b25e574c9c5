"""Random chain networks and a plain PyTorch training loop (docs/validation.md §"Networks the model
has not seen").

``random_chain`` draws (seeded) a chain network spec: 1–4 convolution blocks with 1–256 channels,
kernels 1–7, strides 1–2, fused or separate activations (ReLU, tanh, sigmoid), batch norm and max or
average pooling; then 1–3 fully connected layers 10–4096 wide and a 10-way output. ``torch_chain``
builds the same network directly in ``torch.nn`` (not through dnnbench's runner), and ``step_time``
trains it the way a user's script does: SGD, cross-entropy on synthetic data, the median step.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

#: Largest multiply-adds per sample of a drawn chain (keeps a benchmark point to seconds).
MAX_MACS_PER_SAMPLE = 60e6


def _draw(rng: np.random.Generator, name: str) -> dict[str, Any]:
    c, h = int(rng.choice([1, 3, 3, 8])), int(rng.choice([16, 24, 28, 32, 48, 64]))
    layers: list[dict[str, Any]] = [{"kind": "input", "name": "input", "shape": [c, h, h]}]
    for i in range(int(rng.integers(1, 5))):
        k = int(rng.choice([1, 3, 3, 5, 7]))
        s = int(rng.choice([1, 1, 2]))
        if k > h:
            break
        conv: dict[str, Any] = {"kind": "conv2d", "name": f"conv{i}", "kernel": k, "stride": s, "padding": k // 2,
                                "out_channels": int(rng.choice([4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256]))}
        act = str(rng.choice(["relu", "tanh", "sigmoid", "none"]))
        separate = rng.random() < 0.5
        if not separate and act != "none":
            conv["activation"] = act
        layers.append(conv)
        h = (h + 2 * (k // 2) - k) // s + 1
        if rng.random() < 0.35:
            layers.append({"kind": "batchnorm", "name": f"bn{i}"})
        if separate and act != "none":
            layers.append({"kind": "activation", "name": f"act{i}", "function": act})
        if h >= 4 and rng.random() < 0.6:
            layers.append({"kind": "pool", "name": f"pool{i}", "mode": str(rng.choice(["max", "avg"])), "window": 2})
            h //= 2
    layers.append({"kind": "flatten", "name": "flatten"})
    for j in range(int(rng.integers(0, 3))):
        act = str(rng.choice(["relu", "tanh", "none"]))
        fc: dict[str, Any] = {"kind": "fc", "name": f"fc{j}",
                              "out_features": int(rng.choice([10, 32, 64, 128, 256, 512, 1024, 2048, 4096]))}
        if act != "none":
            fc["activation"] = act
        layers.append(fc)
    layers.append({"kind": "fc", "name": "out", "out_features": 10})
    return {"name": name, "description": "A random chain (dnnbench.measure.chains).", "layers": layers}


def random_chain(seed: int, name: str | None = None) -> dict[str, Any]:
    """The spec (a mapping) of the random chain of ``seed``; redrawn until it is small enough."""
    from ..specs import Network

    rng = np.random.default_rng(seed)
    while True:
        spec = _draw(rng, name or f"chain{seed}")
        net = Network.build(spec)
        macs = sum(c.macs_forward for c in net.layer_counts)
        if macs <= MAX_MACS_PER_SAMPLE and sum(c.weights for c in net.layer_counts) <= 40e6:
            return spec


def torch_chain(spec: dict[str, Any]) -> Any:
    """The chain as a plain ``torch.nn.Sequential`` (built from the mapping here, not by dnnbench)."""
    import torch
    import torch.nn as nn

    torch.manual_seed(0)
    acts = {"relu": nn.ReLU, "tanh": nn.Tanh, "sigmoid": nn.Sigmoid}
    shape = list(spec["layers"][0]["shape"])
    mods: list[Any] = []
    for layer in spec["layers"][1:]:
        kind = layer["kind"]
        if kind == "conv2d":
            mods.append(nn.Conv2d(shape[0], layer["out_channels"], layer["kernel"], layer["stride"], layer["padding"]))
            shape = [layer["out_channels"], *[(d + 2 * layer["padding"] - layer["kernel"]) // layer["stride"] + 1
                                              for d in shape[1:]]]
        elif kind == "batchnorm":
            mods.append(nn.BatchNorm2d(shape[0]))
        elif kind == "activation":
            mods.append(acts[layer["function"]]())
        elif kind == "pool":
            mods.append((nn.MaxPool2d if layer["mode"] == "max" else nn.AvgPool2d)(layer["window"]))
            shape = [shape[0], *[d // layer["window"] for d in shape[1:]]]
        elif kind == "flatten":
            mods.append(nn.Flatten())
            shape = [int(np.prod(shape))]
        elif kind == "fc":
            mods.append(nn.Linear(shape[0], layer["out_features"]))
            shape = [layer["out_features"]]
        else:
            raise ValueError(f"layer kind {kind!r} is not drawn by random_chain")
        if layer.get("activation", "none") != "none":
            mods.append(acts[layer["activation"]]())
    return nn.Sequential(*mods)


def step_times(model: Any, input_shape: tuple[int, ...], batch: int, threads: int, steps: int = 10,
               warmup: int = 3) -> list[float]:
    """Wall seconds of ``steps`` training steps (SGD, cross-entropy, synthetic data) after ``warmup``."""
    import torch

    g = torch.Generator().manual_seed(0)
    x = torch.randn((batch, *input_shape), generator=g)
    y = torch.randint(0, 10, (batch,), generator=g)
    return timed_steps(model, x, y, torch.nn.CrossEntropyLoss(), threads, steps, warmup, lr=1e-3)


def timed_steps(model: Any, x: Any, y: Any, crit: Any, threads: int, steps: int, warmup: int,
                lr: float = 1e-6) -> list[float]:
    """Wall seconds of ``steps`` SGD steps of ``model`` on (x, y) with loss ``crit`` at ``threads``
    threads, after ``warmup`` untimed ones."""
    import torch

    from .alloc import steady_allocator

    steady_allocator()  # as in the runs' processes (docs/validation.md §"Runs")
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        opt = torch.optim.SGD(model.parameters(), lr=lr)
        out = []
        for i in range(warmup + steps):
            t = time.perf_counter()
            opt.zero_grad()
            crit(model(x), y).backward()
            opt.step()
            if i >= warmup:
                out.append(time.perf_counter() - t)
        return out
    finally:
        torch.set_num_threads(before)


def plain_step_s(net: Any, batch: int, threads: int, steps: int = 6, warmup: int = 2) -> float:
    """Median wall seconds of a training step of ``net`` (a Network; SGD, synthetic data), without any
    hooks."""
    from .torchnet import batch as make_batch
    from .torchnet import build_model, loss_fn

    x, y = make_batch(net, batch)
    return float(np.median(timed_steps(build_model(net), x, y, loss_fn(net), threads, steps, warmup)))
