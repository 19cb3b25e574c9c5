"""Per-layer MACs of the preset networks against PyTorch's FlopCounterMode (issue 2; model.md §3).

Each preset's plain-PyTorch mirror (tests/torch_nets.py) runs forward and backward with batch 1 on the
meta device (no weight memory: imagenet22k-adam has 2.1 B weights) under FlopCounterMode. torch counts
FLOPs = 2 x MACs and leaves bias adds out, as dnnbench's MACs do. Three passes separate the phases:
forward only; forward + backward; forward + backward with the weights frozen (biases still trainable, so
every layer but the first still passes its error down), which leaves only the input-gradient work.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode
from torch_nets import PRESET_MODULES, build

from dnnbench import presets
from dnnbench.counts import totals
from dnnbench.specs.layers import Conv2d, FullyConnected


def _flops(name: str, *, backward: bool, freeze_weights: bool = False) -> dict[str, int]:
    """FLOPs per module path (``features.0``) and under "Global", for one pass of batch 1."""
    module, shape = build(name)
    if freeze_weights:
        for mod in module.modules():
            if isinstance(mod, (nn.Conv2d, nn.Linear)):
                mod.weight.requires_grad_(False)
    x = torch.empty((1, *shape), device="meta")  # the input needs no gradient: the first layer sends none
    counter = FlopCounterMode(display=False)
    with counter:
        y = module(x)
        if backward:
            y.sum().backward()
    prefix = type(module).__name__ + "."
    return {("Global" if k == "Global" else k.removeprefix(prefix)): sum(v.values())
            for k, v in counter.get_flop_counts().items()}


def _pairs(name: str) -> list[tuple[str, object]]:
    """(torch module path, dnnbench LayerCounts) of each conv/fc layer, in order."""
    module, _ = build(name)
    paths = [p for p, m in module.named_modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
    net = presets.network(name)
    counts = [c for layer, c in zip(net.layers, net.layer_counts, strict=True)
              if isinstance(layer, (Conv2d, FullyConnected))]
    assert len(paths) == len(counts), "the torch mirror and the preset have different conv/fc layers"
    return list(zip(paths, counts, strict=True))


@pytest.fixture(scope="module")
def measured() -> Callable[[str], tuple[dict[str, int], dict[str, int], dict[str, int]]]:
    cache: dict[str, tuple[dict[str, int], dict[str, int], dict[str, int]]] = {}

    def get(name: str) -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
        if name not in cache:
            cache[name] = (_flops(name, backward=False), _flops(name, backward=True),
                           _flops(name, backward=True, freeze_weights=True))
        return cache[name]

    return get


@pytest.mark.parametrize("name", list(PRESET_MODULES))
def test_forward_macs_equal_flop_counter(name: str, measured) -> None:
    forward, _, _ = measured(name)
    for path, c in _pairs(name):
        assert forward[path] == 2 * c.macs_forward, path


@pytest.mark.parametrize("name", list(PRESET_MODULES))
def test_backprop_macs_equal_flop_counter(name: str, measured) -> None:
    """Input-gradient FLOPs (weights frozen) = 2 x macs_backprop; 0 for the first layer."""
    forward, _, frozen = measured(name)
    pairs = _pairs(name)
    assert pairs[0][1].macs_backprop == 0
    for path, c in pairs:
        assert frozen.get(path, 0) - forward[path] == 2 * c.macs_backprop, path


@pytest.mark.parametrize("name", list(PRESET_MODULES))
def test_weight_grad_macs_equal_flop_counter(name: str, measured) -> None:
    """Backward FLOPs minus input-gradient FLOPs = 2 x macs_weight_grad (strided convs included)."""
    _, full, frozen = measured(name)
    for path, c in _pairs(name):
        assert full[path] - frozen.get(path, 0) == 2 * c.macs_weight_grad, path


@pytest.mark.parametrize("name", list(PRESET_MODULES))
def test_training_total_equals_flop_counter(name: str, measured) -> None:
    """All of torch's counted FLOPs are conv/linear work: the total is 2 x dnnbench's training MACs."""
    _, full, _ = measured(name)
    assert full["Global"] == 2 * totals(presets.network(name)).macs_training


def test_meta_device_allocates_no_weights() -> None:
    module, _ = build("imagenet22k-adam")
    n = sum(p.numel() for p in module.parameters())
    assert n == totals(presets.network("imagenet22k-adam")).weights  # 2.1 B, all on the meta device
    assert all(p.device.type == "meta" for p in module.parameters())
