"""The PyTorch model built from a spec has the spec's shapes, weights and MACs (docs/model.md §3)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from torch.utils.flop_counter import FlopCounterMode

from dnnbench import counts, presets
from dnnbench.measure.torchnet import batch, build_model


@pytest.mark.parametrize("name", ["lenet5", "mnist-adam"])
def test_model_matches_spec(name: str) -> None:
    net = presets.network(name)
    model = build_model(net)
    x, y = batch(net, 4)
    out = model(x)
    assert tuple(out.shape[1:]) == net.shapes[-1]
    assert sum(p.numel() for p in model.parameters()) == counts.totals(net).weights
    with FlopCounterMode(display=False) as fc:
        model(x)
    # torch counts FLOPs = 2 x MACs of conv and linear layers.
    assert fc.get_total_flops() == 2 * 4 * counts.totals(net).macs_forward


@pytest.mark.parametrize("ending", ["fc", "fc_relu", "softmax"])
def test_model_parallel_training_takes_the_loss_on_the_whole_output(ending: str) -> None:
    """An imported PyTorch model usually ends in a plain FC layer: over 2 partitions each rank holds
    half of the logits, so the loss needs all of them gathered (a softmax layer gathers them itself)."""
    from dnnbench.measure.launch import run_ranks
    from dnnbench.specs import Network

    layers: list[dict[str, Any]] = [{"kind": "input", "shape": [1, 8, 8]},
                                    {"kind": "conv2d", "out_channels": 4, "kernel": 3, "activation": "relu"},
                                    {"kind": "flatten"}, {"kind": "fc", "out_features": 10}]
    if ending == "fc_relu":
        layers.append({"kind": "activation"})
    if ending == "softmax":
        layers.append({"kind": "softmax"})
    net = Network.build({"name": f"ends-in-{ending}", "layers": layers})
    args = {"network": net.to_dict(), "batch_size": 8, "iterations": 2, "warmup": 1}
    res = run_ranks("dnnbench.measure.modelparallel:mp_main", 2, args, timeout_s=90)
    assert len(res) == 2 and all(r["samples_per_s"] > 0 for r in res)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 24), st.integers(1, 24), st.integers(1, 5), st.integers(1, 4), st.integers(0, 2),
       st.booleans(), st.sampled_from(["max", "avg"]))
def test_pooling_shapes_equal_pytorch_s_with_and_without_ceil_mode(h: int, w: int, k: int, s: int, p: int,
                                                                   ceil: bool, mode: str) -> None:
    """The spec's output size, the runner's module and the importer agree with PyTorch's pooling for
    every window, stride, padding and ceil_mode (a last, partial window)."""
    import torch

    import dnnbench
    from dnnbench.specs import Network

    assume(2 * p <= k <= min(h, w) + 2 * p)
    layer = {"kind": "pool", "mode": mode, "window": k, "stride": s, "padding": p, "ceil_mode": ceil}
    net = Network.build({"name": "pool", "layers": [{"kind": "input", "shape": [2, h, w]}, layer]})
    module = (torch.nn.MaxPool2d if mode == "max" else torch.nn.AvgPool2d)(k, s, p, ceil_mode=ceil)
    want = tuple(module(torch.zeros(1, 2, h, w)).shape[1:])
    assert net.shapes[-1] == want
    assert tuple(build_model(net)(torch.zeros(1, 2, h, w)).shape[1:]) == want
    if (k, s, p) != (1, 1, 0):  # a 1x1 window of stride 1 is a copy: the importer emits no layer
        imported = dnnbench.from_torch(torch.nn.Sequential(module), (2, h, w))
        assert imported.shapes[-1] == want
