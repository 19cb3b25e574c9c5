"""(C, D, H, W) volumes (video clips, scans): ``conv3d`` and ``pool3d`` shapes, weights and MACs equal
PyTorch's for every spec the kinds allow; imported from torch and ONNX, trained back by the runner,
priced by the model (docs/model.md §3, §12)."""

from __future__ import annotations

import warnings
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
from dnnbench.measure import torchnet
from dnnbench.model import evaluate
from dnnbench.specs import Configuration, Network


class Video(nn.Module):
    """A small video network: 3-D convolutions (grouped, strided in time, dilated 'same'), batch norm,
    max, average (ceil_mode) and adaptive pooling, a head."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv3d(3, 8, 3, padding=1), nn.BatchNorm3d(8), nn.ReLU(), nn.MaxPool3d((1, 2, 2)),
            nn.Conv3d(8, 16, (3, 1, 1), stride=(2, 1, 1), padding=(1, 0, 0), groups=2), nn.ReLU(),
            nn.Conv3d(16, 16, 3, padding="same", dilation=2), nn.AvgPool3d(2, ceil_mode=True),
            nn.AdaptiveAvgPool3d(1))
        self.head = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).flatten(1))


class UNet3d(nn.Module):
    """A 3-D U-Net step (Çiçek et al. 2016's shape): convolutions with instance norm, down by a max pool,
    up by a transposed convolution, joined to the skip."""

    def __init__(self) -> None:
        super().__init__()
        self.down = nn.Sequential(nn.Conv3d(1, 8, 3, padding=1), nn.InstanceNorm3d(8, affine=True), nn.ReLU())
        self.pool = nn.MaxPool3d(2)
        self.mid = nn.Sequential(nn.Conv3d(8, 16, 3, padding=1), nn.ReLU())
        self.up = nn.ConvTranspose3d(16, 8, 2, stride=2)
        self.head = nn.Conv3d(16, 2, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.down(x)
        return self.head(torch.cat([a, self.up(self.mid(self.pool(a)))], 1))




def test_a_video_network_imports_with_pytorch_s_weights_and_flops() -> None:
    module = Video()
    net = dnnbench.from_torch(module, (3, 8, 32, 32))
    assert [layer.kind for layer in net.layers] == ["input", "conv3d", "batchnorm", "activation", "pool3d", "conv3d",
                                                    "conv3d", "pool3d", "pool3d", "flatten", "fc"]
    assert net.layers[5].activation == "relu"  # fused into the 3-D convolution before it
    t = totals(net)
    assert t.weights == params(module)
    forward, backward = step_flops(lambda: module(torch.zeros(2, 3, 8, 32, 32)))
    assert forward == 2 * 2 * t.macs_forward
    assert backward == 2 * 2 * (t.macs_backprop + dense_weight_grad(net))
    built = torchnet.build_model(net)
    assert params(built) == t.weights
    assert totals(dnnbench.from_torch(built, (3, 8, 32, 32))) == t
    for cluster in ("adam-2014", "modern-2025", "dgx-a100"):
        assert float(evaluate(net, presets.cluster(cluster), presets.dataset("imagenet1k"),
                              Configuration()).time_per_sample_s) > 0


def test_the_onnx_export_of_a_video_network_imports_as_the_module_does(tmp_path: Path) -> None:
    module = Video()
    with warnings.catch_warnings():  # a training export of batch norm drops its counter's update
        warnings.filterwarnings("ignore", message="ONNX Preprocess - Removing mutation", category=UserWarning)
        net = dnnbench.from_onnx(export(module, (3, 8, 32, 32), tmp_path / "video.onnx"))
    assert totals(net) == totals(dnnbench.from_torch(module, (3, 8, 32, 32)))


def test_a_3d_unet_imports_with_pytorch_s_weights_and_flops(tmp_path: Path) -> None:
    module = UNet3d()
    net = dnnbench.from_torch(module, (1, 8, 16, 16))
    assert "conv_transpose3d" in [layer.kind for layer in net.layers] and net.shapes[-1] == (2, 8, 16, 16)
    t = totals(net)
    assert t.weights == params(module)
    forward, backward = step_flops(lambda: module(torch.zeros(2, 1, 8, 16, 16)))
    assert forward == 2 * 2 * t.macs_forward
    assert backward == 2 * 2 * (t.macs_backprop + t.macs_weight_grad)
    assert totals(dnnbench.from_torch(torchnet.build_model(net), (1, 8, 16, 16))) == t
    with warnings.catch_warnings():  # instance norm exports in training mode only
        warnings.filterwarnings("ignore", message="ONNX export mode is set to", category=UserWarning)
        onnx = dnnbench.from_onnx(export(module, (1, 8, 16, 16), tmp_path / "unet3d.onnx"))
    assert totals(onnx) == t


class Resized(UNet3d):
    """The 3-D U-Net step up by resizing (nearest or trilinear) and a 1x1x1 convolution instead."""

    def __init__(self, mode: str) -> None:
        super().__init__()
        self.up = nn.Sequential(nn.Upsample(scale_factor=2, mode=mode), nn.Conv3d(16, 8, 1))  # type: ignore[assignment]


@pytest.mark.parametrize("mode", ["nearest", "trilinear"])
def test_a_3d_unet_that_resizes_imports_and_trains_back(mode: str) -> None:
    module = Resized(mode)
    net = dnnbench.from_torch(module, (1, 8, 16, 16))
    resize = next(layer for layer in net.layers if layer.kind == "upsample")
    assert (resize.mode, resize.size) == (mode, (8, 16, 16))
    t = totals(net)
    assert t.weights == params(module)
    forward, backward = step_flops(lambda: module(torch.zeros(2, 1, 8, 16, 16)))
    assert forward == 2 * 2 * t.macs_forward and backward == 2 * 2 * (t.macs_backprop + t.macs_weight_grad)
    assert totals(dnnbench.from_torch(torchnet.build_model(net), (1, 8, 16, 16))) == t
    assert net.layer_counts[net.layers.index(resize)].elem_ops_forward == {"nearest": 1, "trilinear": 8}[mode] * 16 \
        * 8 * 16 * 16


@pytest.mark.parametrize("layer,shape,message", [
    ({"kind": "upsample", "size": 8, "mode": "bilinear"}, [2, 4, 4, 4], r"layers\[1\]\.mode: 'bilinear' is not a mode "
                                                                       r"for \(C, D, H, W\) volumes"),
    ({"kind": "upsample", "size": [8, 8], "mode": "nearest"}, [2, 4, 4, 4], r"layers\[1\]\.size: \[8, 8\] must be "
                                                                            r"one number or \[depth, height, width\]"),
    ({"kind": "upsample", "size": 8, "mode": "trilinear"}, [2, 4, 4], r"layers\[1\]\.mode: 'trilinear' is for "
                                                                      r"\(C, D, H, W\) volumes"),
])
def test_a_resize_of_the_wrong_rank_is_one_line(layer: dict[str, Any], shape: list[int], message: str) -> None:
    with pytest.raises(SpecError, match=message) as err:
        Network.build({"name": "v", "layers": [{"kind": "input", "shape": shape}, layer]})
    assert "\n" not in str(err.value)


@given(st.integers(1, 3), st.integers(1, 3), st.integers(1, 2), st.integers(0, 1), st.integers(1, 2),
       st.integers(1, 2), st.integers(0, 1), st.booleans())
@settings(max_examples=30, deadline=None)
def test_every_3d_transposed_convolution_counts_as_pytorch_runs_it(k: int, stride: int, groups: int, padding: int,
                                                                   dilation: int, width: int, extra: int,
                                                                   bias: bool) -> None:
    extra = min(extra, max(stride, dilation) - 1)
    conv = nn.ConvTranspose3d(2 * groups, 2 * groups, (k, 2, k), stride, padding, extra, groups, bias, dilation)
    shape = (2 * groups, width, 3, 2)
    x = torch.zeros(2, *shape, requires_grad=True)
    layer = {"kind": "conv_transpose3d", "out_channels": 2 * groups, "kernel": [k, 2, k], "stride": stride,
             "padding": padding, "output_padding": extra, "groups": groups, "bias": bias, "dilation": dilation}
    spec = {"name": "t", "layers": [{"kind": "input", "shape": list(shape), "needs_gradient": True}, layer]}
    try:
        out_shape = tuple(conv(x).shape)
    except RuntimeError:  # PyTorch refuses an output cropped to nothing
        out_shape = (0,)
    if 0 in out_shape:
        with pytest.raises(SpecError, match=r"^layers\[1\]\.padding: "):
            Network.build(spec)
        return
    net = Network.build(spec)
    assert net.shapes[-1] == out_shape[1:]
    t = totals(net)
    assert t.weights == params(conv)
    forward, backward = step_flops(lambda: conv(x))
    assert forward == 2 * 2 * t.macs_forward
    assert backward == 2 * 2 * (t.macs_backprop + groups * t.macs_weight_grad)


@st.composite
def _conv3d(draw: Any) -> tuple[dict[str, Any], tuple[int, ...]]:
    groups = draw(st.integers(1, 2))
    kernel = [draw(st.integers(1, 3)) for _ in range(3)]
    layer = {"kind": "conv3d", "out_channels": groups * draw(st.integers(1, 3)), "kernel": kernel,
             "stride": [draw(st.integers(1, 2)) for _ in range(3)], "padding": [draw(st.integers(0, 1))
                                                                               for _ in range(3)],
             "dilation": [draw(st.integers(1, 2)) for _ in range(3)], "groups": groups, "bias": draw(st.booleans()),
             "activation": draw(st.sampled_from(["none", "relu"]))}
    return layer, (groups * draw(st.integers(1, 2)), *(draw(st.integers(1, 6)) for _ in range(3)))


@given(_conv3d(), st.booleans(), st.sampled_from(["none", "max", "avg"]), st.booleans())
@settings(max_examples=40, deadline=None)
def test_every_3d_convolution_and_pool_counts_as_pytorch_runs_them(case: tuple[dict[str, Any], tuple[int, ...]],
                                                                   trained_input: bool, pool: str,
                                                                   ceil: bool) -> None:
    layer, shape = case
    conv = nn.Conv3d(shape[0], layer["out_channels"], tuple(layer["kernel"]), tuple(layer["stride"]),
                     tuple(layer["padding"]), tuple(layer["dilation"]), layer["groups"], layer["bias"])
    spec = {"name": "v", "layers": [{"kind": "input", "shape": list(shape), "needs_gradient": trained_input}, layer]}
    x = torch.zeros(2, *shape, requires_grad=trained_input)
    try:
        out = conv(x)
    except RuntimeError:  # PyTorch refuses it: the spec too, in one line
        with pytest.raises(SpecError, match=r"^layers\[1\]\.kernel: ") as err:
            Network.build(spec)
        assert "\n" not in str(err.value)
        return
    mods: list[nn.Module] = [conv, *([nn.ReLU()] if layer["activation"] == "relu" else [])]
    if pool != "none" and min(out.shape[2:]) >= 2:
        window = [1, 2, 2] if out.shape[2] < 2 else 2
        spec["layers"].append({"kind": "pool3d", "mode": pool, "window": window, "ceil_mode": ceil})
        cls = nn.MaxPool3d if pool == "max" else nn.AvgPool3d
        mods.append(cls(window, ceil_mode=ceil))
    module = nn.Sequential(*mods)
    net = Network.build(spec)
    assert net.shapes[-1] == tuple(module(x).shape[1:])
    t = totals(net)
    assert t.weights == params(module)
    forward, backward = step_flops(lambda: module(x))
    assert forward == 2 * 2 * t.macs_forward
    assert backward == 2 * 2 * (t.macs_backprop + dense_weight_grad(net))
    assert params(torchnet.build_model(net)) == t.weights


@pytest.mark.parametrize("layer,shape,message", [
    ({"kind": "conv3d", "out_channels": 4, "kernel": 3}, [2, 8, 8], r"layers\[1\]\.kind: 'conv3d' needs a \(C, D, H, "
                                                                     r"W\) volume input"),
    ({"kind": "conv3d", "out_channels": 4, "kernel": [3, 3, 0]}, [2, 4, 8, 8], r"layers\[1\]\.kernel: 0 must be >= 1"),
    ({"kind": "conv3d", "out_channels": 4, "kernel": 5}, [2, 4, 8, 8], r"layers\[1\]\.kernel: 5 is larger than the "
                                                                       r"input depth 4"),
    ({"kind": "pool3d", "window": 2, "padding": 2}, [2, 4, 8, 8], r"layers\[1\]\.padding: 2 must be at most half"),
    ({"kind": "conv3d", "out_channels": 4, "kernel": 1, "groups": 3}, [2, 4, 8, 8],
     r"layers\[1\]\.groups: 3 must divide out_channels 4"),
])
def test_what_a_volume_layer_cannot_be_is_one_line(layer: dict[str, Any], shape: list[int], message: str) -> None:
    with pytest.raises(SpecError, match=message) as err:
        Network.build({"name": "v", "layers": [{"kind": "input", "shape": shape}, layer]})
    assert "\n" not in str(err.value)


class Uneven(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.adaptive_avg_pool3d(x, (3, 3, 3))


def test_volume_operations_dnnbench_does_not_import_are_one_line() -> None:
    with pytest.raises(SpecError, match="pools .* in uneven windows") as err:
        dnnbench.from_torch(Uneven(), (2, 4, 8, 8))
    assert "\n" not in str(err.value)
    with pytest.raises(SpecError, match="has padding_mode='reflect'") as err:
        dnnbench.from_torch(nn.Sequential(nn.Conv3d(2, 2, 3, padding=1, padding_mode="reflect")), (2, 4, 8, 8))
    assert "\n" not in str(err.value)


def test_a_3d_convolution_costs_what_the_2d_one_of_the_same_product_costs() -> None:
    """Priced as the implicit GEMM it lowers to (reconstructed): a 3x3x3 convolution on 8 frames and the
    3x9 convolution on the frames laid side by side (the same M, N, K and stride) cost the same."""
    volume = Network.build({"name": "v", "layers": [{"kind": "input", "shape": [16, 8, 32, 32]},
                                                    {"kind": "conv3d", "out_channels": 16, "kernel": 3, "padding": 1}]})
    flat = Network.build({"name": "f", "layers": [{"kind": "input", "shape": [16, 32, 256]},
                                                  {"kind": "conv2d", "out_channels": 16, "kernel": [3, 9],
                                                   "padding": [1, 4]}]})
    assert totals(volume).macs_forward == totals(flat).macs_forward
    for cluster in ("adam-2014", "modern-2025", "dgx-a100"):
        cl, ds = presets.cluster(cluster), presets.dataset("imagenet1k")
        a, b = (float(evaluate(n, cl, ds, Configuration()).time_per_sample_s) for n in (volume, flat))
        assert np.isclose(a, b, rtol=1e-9)
