"""Transposed convolutions (``conv_transpose2d``): shapes, weights and MACs equal PyTorch's for every
spec the kind allows; imported from torch and ONNX, trained back by the runner, split by the
model-parallel runs, priced by the model (docs/model.md §3, §12)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from importers.import_helpers import dense_weight_grad, params, step_flops
from importers.onnx_export import export
from torch import nn

import dnnbench
from dnnbench import presets
from dnnbench.counts import totals
from dnnbench.errors import SpecError
from dnnbench.measure import partition, torchnet
from dnnbench.model import evaluate
from dnnbench.specs import Configuration, Network


class Decoder(nn.Module):
    """A small U-Net: down by a conv and a pool, up by two transposed convs (one grouped, with
    output_padding), joined to the skip."""

    def __init__(self) -> None:
        super().__init__()
        self.down = nn.Conv2d(3, 16, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.mid = nn.Conv2d(16, 32, 3, padding=1)
        self.up = nn.ConvTranspose2d(32, 16, 2, stride=2)
        self.up2 = nn.ConvTranspose2d(32, 8, 3, stride=2, padding=1, output_padding=1, groups=2)
        self.head = nn.Conv2d(8, 2, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = torch.relu(self.down(x))
        b = torch.relu(self.mid(self.pool(a)))
        return self.head(self.up2(torch.cat([a, self.up(b)], 1)))


class Functional(nn.Module):
    """``F.conv_transpose2d`` with a weight of parameters (a generator's hand-written upsampling)."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(4, 6, 3, 3))
        self.bias = nn.Parameter(torch.zeros(6))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.conv_transpose2d(x, self.weight, self.bias, stride=2, padding=1, output_padding=1)




def test_a_unet_decoder_imports_with_pytorch_s_weights_and_flops() -> None:
    module = Decoder()
    net = dnnbench.from_torch(module, (3, 16, 16))
    assert [layer.kind for layer in net.layers].count("conv_transpose2d") == 2
    assert net.shapes[-1] == (2, 32, 32)
    t = totals(net)
    assert t.weights == params(module) == 3 * 16 * 9 + 16 + 16 * 32 * 9 + 32 + 32 * 16 * 4 + 16 + 32 * 4 * 9 + 8 \
        + 8 * 2 + 2
    forward, backward = step_flops(lambda: module(torch.zeros(2, 3, 16, 16)))
    assert forward == 2 * 2 * t.macs_forward
    assert backward == 2 * 2 * (t.macs_backprop + dense_weight_grad(net))
    built = torchnet.build_model(net)
    assert params(built) == params(module)
    assert tuple(built(torch.zeros(2, 3, 16, 16)).shape[1:]) == (2, 32, 32)
    assert totals(dnnbench.from_torch(built, (3, 16, 16))) == t


def test_the_onnx_export_of_a_decoder_imports_as_the_module_does(tmp_path: Path) -> None:
    module = Decoder()
    net = dnnbench.from_onnx(export(module, (3, 16, 16), tmp_path / "decoder.onnx"))
    assert totals(net) == totals(dnnbench.from_torch(module, (3, 16, 16)))
    assert [layer.to_dict() for layer in net.layers if layer.kind == "conv_transpose2d"][1] == {
        "name": net.layers[6].name, "kind": "conv_transpose2d", "out_channels": 8, "kernel": 3, "stride": 2,
        "padding": 1, "groups": 2, "output_padding": 1, "bias": True, "activation": "none"}


def test_a_functional_transposed_convolution_imports() -> None:
    module = Functional()
    net = dnnbench.from_torch(module, (4, 5, 5))
    layer = net.layers[1]
    assert (layer.kind, layer.out_channels, layer.stride, layer.output_padding) == ("conv_transpose2d", 6, 2, 1)
    assert net.shapes[-1] == (6, 10, 10) and totals(net).weights == params(module)


@st.composite
def _layers(draw: Any) -> tuple[dict[str, Any], tuple[int, int, int]]:
    groups = draw(st.integers(1, 3))
    stride, dilation = draw(st.integers(1, 3)), draw(st.integers(1, 2))
    kernel = (draw(st.integers(1, 4)), draw(st.integers(1, 4)))
    layer = {"kind": "conv_transpose2d", "out_channels": groups * draw(st.integers(1, 4)), "kernel": list(kernel),
             "stride": stride, "padding": draw(st.integers(0, 2)), "dilation": dilation, "groups": groups,
             "output_padding": draw(st.integers(0, max(stride, dilation) - 1)), "bias": draw(st.booleans())}
    return layer, (groups * draw(st.integers(1, 3)), draw(st.integers(1, 6)), draw(st.integers(1, 6)))


@given(_layers(), st.booleans())
@settings(max_examples=60, deadline=None)
def test_every_transposed_convolution_counts_as_pytorch_runs_it(case: tuple[dict[str, Any], tuple[int, ...]],
                                                                trained_input: bool) -> None:
    layer, shape = case
    module = nn.ConvTranspose2d(shape[0], layer["out_channels"], tuple(layer["kernel"]), layer["stride"],
                                layer["padding"], layer["output_padding"], layer["groups"], layer["bias"],
                                layer["dilation"])
    x = torch.zeros(2, *shape, requires_grad=trained_input)
    try:
        out_shape = tuple(module(x).shape[1:])
    except RuntimeError:
        out_shape = (0,)
    if 0 in out_shape:  # PyTorch's output is empty or an error: the spec names the crop in one line
        with pytest.raises(SpecError, match=r"^layers\[1\]\.padding: "):
            Network.build({"name": "t", "layers": [{"kind": "input", "shape": list(shape)}, layer]})
        return
    net = Network.build({"name": "t", "layers": [{"kind": "input", "shape": list(shape),
                                                  "needs_gradient": trained_input}, layer]})
    assert net.shapes[-1] == out_shape
    t = totals(net)
    assert t.weights == params(module)
    forward, backward = step_flops(lambda: module(x))
    assert forward == 2 * 2 * t.macs_forward
    assert backward == 2 * 2 * (t.macs_backprop + layer["groups"] * t.macs_weight_grad)
    assert params(torchnet.build_model(net)) == t.weights


@pytest.mark.parametrize("change,message", [
    ({"output_padding": 2}, r"layers\[1\]\.output_padding: 2 must be >= 0 and below the stride 2"),
    ({"output_padding": -1}, r"layers\[1\]\.output_padding: -1 must be >= 0"),
    ({"padding": 9}, r"layers\[1\]\.padding: 9 crops 18 rows off the output height 8, leaving none"),
    ({"groups": 3, "out_channels": 6}, r"layers\[1\]\.groups: 3 must divide the input channels 4"),
    ({"groups": 4, "out_channels": 6}, r"layers\[1\]\.groups: 4 must divide out_channels 6"),
])
def test_what_a_transposed_convolution_cannot_be_is_one_line(change: dict[str, Any], message: str) -> None:
    layer = {"kind": "conv_transpose2d", "out_channels": 4, "kernel": 2, "stride": 2, **change}
    with pytest.raises(SpecError, match=message) as err:
        Network.build({"name": "t", "layers": [{"kind": "input", "shape": [4, 4, 4]}, layer]})
    assert "\n" not in str(err.value)


def _generator() -> Network:
    """A DCGAN-like generator, a chain: an FC layer to maps, three transposed convs doubling them."""
    return Network.build({"name": "generator", "layers": [
        {"kind": "input", "shape": [16]},
        {"kind": "fc", "out_features": 64 * 4 * 4, "activation": "relu"},
        {"kind": "reshape", "shape": [64, 4, 4]},
        {"kind": "conv_transpose2d", "out_channels": 32, "kernel": 4, "stride": 2, "padding": 1, "activation": "relu"},
        {"kind": "conv_transpose2d", "out_channels": 16, "kernel": 4, "stride": 2, "padding": 1, "activation": "relu"},
        {"kind": "conv_transpose2d", "out_channels": 3, "kernel": 4, "stride": 2, "padding": 1, "activation": "tanh"},
        {"kind": "flatten"}, {"kind": "fc", "out_features": 10}]})


def test_model_parallel_partitions_split_a_transposed_convolution_by_its_output_maps() -> None:
    net = Network.build({"name": "chain", "layers": [
        {"kind": "input", "shape": [3, 8, 8]},
        {"kind": "conv2d", "out_channels": 8, "kernel": 3, "padding": 1, "activation": "relu"},
        {"kind": "conv_transpose2d", "out_channels": 6, "kernel": 2, "stride": 2, "activation": "relu"},
        {"kind": "flatten"}, {"kind": "fc", "out_features": 10}]})
    steps = partition.plan(net, 2)
    held = sum(q.numel() for p in range(2) for mod in partition.modules(net, steps, p, 2).values()
               if mod is not None for q in mod.parameters())
    assert held == totals(net).weights


@pytest.mark.parametrize("cluster,precision", [("adam-2014", "fp32"), ("modern-2025", "fp32"),
                                               ("dgx-a100", "fp16")])
def test_a_transposed_convolution_is_priced_like_the_convolution_it_is_the_gradient_of(cluster: str,
                                                                                       precision: str) -> None:
    """Its forward is the input gradient of the convolution from its output to its input: the same
    MACs, and (reconstructed) the same GEMM at the same rates, so the two cost alike within the
    memory-bound terms (they read and write swapped tensors)."""
    up = Network.build({"name": "up", "layers": [
        {"kind": "input", "shape": [64, 16, 16]},
        {"kind": "conv_transpose2d", "out_channels": 32, "kernel": 3, "padding": 1}]})
    down = Network.build({"name": "down", "layers": [
        {"kind": "input", "shape": [32, 16, 16]},
        {"kind": "conv2d", "out_channels": 64, "kernel": 3, "padding": 1}]})
    assert totals(up).macs_forward == totals(down).macs_forward and totals(up).weights + 64 == \
        totals(down).weights + 32
    cl, ds = presets.cluster(cluster), presets.dataset("imagenet1k")
    config = Configuration(precision=precision)
    a, b = (float(evaluate(n, cl, ds, config).time_per_sample_s) for n in (up, down))
    assert np.isfinite(a) and a > 0 and abs(a / b - 1.0) < 0.1
    generator = _generator()
    assert generator.shapes[-3] == (3, 32, 32)
    assert float(evaluate(generator, cl, ds, config).time_per_sample_s) > 0
