"""Layers that libraries such as timm write with functional calls on their own parameters (docs/importing.md):
``F.batch_norm`` (a batch norm fused with its activation), ``F.linear`` (a bias assembled from pieces),
``F.conv2d`` (a standardised weight), ``x - y``, ``unsqueeze``/``squeeze``, a mean over a sequence's
tokens, and batch norms that meet one value per channel in a trace of one sample. Each imports to the
same counts as the plain module it stands for."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

import dnnbench
from dnnbench.counts import totals
from dnnbench.errors import SpecError
from dnnbench.specs import Network

from .import_helpers import imports_like_pytorch


class NormAct(nn.BatchNorm2d):
    """A batch norm whose forward calls F.batch_norm with its own parameters, then an activation (timm's
    BatchNormAct2d)."""

    def __init__(self, channels: int) -> None:
        super().__init__(channels)
        self.act = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias, self.training,
                         self.momentum, self.eps)
        return self.act(x)


class StdConv(nn.Conv2d):
    """A convolution of a standardised weight (NFNet's ScaledStdConv2d without its gain)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.weight
        w = (w - w.mean(dim=(1, 2, 3), keepdim=True)) / (w.std(dim=(1, 2, 3), keepdim=True) + 1e-5)
        return F.conv2d(x, w, self.bias, self.stride, self.padding, self.dilation, self.groups)


class AssembledBias(nn.Module):
    """BEiT's projection: F.linear with a learned query bias, zeros for the keys and a learned value bias."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.qkv = nn.Linear(width, 3 * width, bias=False)
        self.q_bias, self.v_bias = nn.Parameter(torch.zeros(width)), nn.Parameter(torch.zeros(width))
        self.register_buffer("k_bias", torch.zeros(width), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bias = torch.cat((self.q_bias, self.k_bias, self.v_bias))
        return F.linear(x, self.qkv.weight, bias)


def _counts(net: dnnbench.Network) -> list[tuple[int, int, int, int]]:
    return [(c.weights, c.macs_forward, c.macs_backprop, c.macs_weight_grad) for c in net.layer_counts]


def test_functional_batch_norm_and_convolution_import_as_their_modules() -> None:
    functional = nn.Sequential(StdConv(3, 8, 3, padding=1, stride=2), NormAct(8), nn.Conv2d(8, 8, 1))
    plain = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, stride=2), nn.BatchNorm2d(8), nn.ReLU(), nn.Conv2d(8, 8, 1))
    a, b = dnnbench.from_torch(functional, (3, 16, 16)), dnnbench.from_torch(plain, (3, 16, 16))
    assert [layer.kind for layer in a.layers] == [layer.kind for layer in b.layers]
    assert _counts(a) == _counts(b)
    assert totals(a).weights == sum(p.numel() for p in functional.parameters())


class Blur(nn.Module):
    """An anti-aliasing blur (TResNet's, antialiased CNNs'): a fixed binomial filter of a buffer applied
    per channel with stride 2 after a reflect pad."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        a = torch.tensor([1.0, 2.0, 1.0])
        self.register_buffer("filt", (a[:, None] * a[None, :] / 16.0)[None, None].repeat(channels, 1, 1, 1))
        self.channels = channels

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.conv2d(F.pad(x, (1, 1, 1, 1), "reflect"), self.filt, stride=2, groups=self.channels)


def test_a_fixed_filter_of_buffers_imports_as_a_conv2d_that_is_not_learned() -> None:
    module = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), Blur(8), nn.Conv2d(8, 4, 1))
    net = dnnbench.from_torch(module, (3, 16, 16))
    blur = next(layer for layer in net.layers if layer.kind == "conv2d" and not layer.learned)
    assert (blur.groups, blur.stride, blur.bias, blur.out_channels) == (8, 2, False, 8)
    index = net.layers.index(blur)
    c = net.layer_counts[index]
    # no weights and no weight gradient; the forward and the input gradient as a depthwise 3x3 convolution's
    assert (c.weights, c.macs_weight_grad, c.macs_forward, c.macs_backprop) == (0, 0, 8 * 8 * 8 * 9, 8 * 8 * 8 * 9)
    assert totals(net).weights == sum(p.numel() for p in module.parameters())
    assert Network.build(net.to_dict()).layers[index] == blur  # saved and read back
    # PyTorch counts the same: 2 FLOPs per MAC forward, and backward only the input gradient
    x = torch.zeros((1, 8, 16, 16), requires_grad=True)
    counter = FlopCounterMode(display=False)
    with counter:
        y = Blur(8)(x)
    forward = counter.get_total_flops()
    with counter:
        y.sum().backward()
    assert (forward, counter.get_total_flops()) == (2 * c.macs_forward, 2 * c.macs_backprop)
    # a fixed filter with a bias (of parameters) is not one dnnbench imports
    class BiasedBlur(Blur):
        def __init__(self, channels: int) -> None:
            super().__init__(channels)
            self.b = nn.Parameter(torch.zeros(channels))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return F.conv2d(x, self.filt, self.b, groups=self.channels)

    with pytest.raises(SpecError, match="has no learned 4-D weight applied to one input"):
        dnnbench.from_torch(nn.Sequential(nn.Conv2d(3, 8, 1), BiasedBlur(8)), (3, 8, 8))


def test_a_fixed_filter_with_a_bias_is_a_one_line_error() -> None:
    spec = {"name": "fixed", "layers": [{"kind": "input", "shape": [2, 8, 8]},
                                        {"kind": "conv2d", "out_channels": 2, "kernel": 3, "learned": False}]}
    with pytest.raises(SpecError, match=r"bias: True .*must be false for a fixed filter") as err:
        Network.build(spec)
    assert "\n" not in str(err.value)


def test_f_linear_with_an_assembled_bias_is_an_fc_and_its_learned_bias() -> None:
    module = nn.Sequential(nn.Embedding(50, 16), AssembledBias(16))
    net = dnnbench.from_torch(module, (8,))
    fc, bias = net.layers[-2:]
    assert fc.kind == "fc" and fc.out_features == 48 and not fc.bias
    # The key bias is a constant buffer: the bias layer holds the query's and the value's, 32 values.
    assert bias.kind == "bias" and bias.weights == 32 and net.shapes[-1] == (8, 48)
    assert totals(net).weights == 50 * 16 + 16 * 48 + 32 == sum(p.numel() for p in module.parameters())
    # A whole bias of parameters stays the fc's own.
    whole = dnnbench.from_torch(nn.Sequential(nn.Embedding(50, 16), nn.Linear(16, 48)), (8,))
    assert whole.layers[-1].kind == "fc" and whole.layers[-1].bias


def test_a_difference_of_two_outputs_and_views_by_unsqueeze_and_squeeze() -> None:
    class PoolMixer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv, self.pool = nn.Conv2d(4, 4, 3, padding=1), nn.AvgPool2d(3, 1, 1)
            self.fc = nn.Linear(4, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = self.conv(x)
            x = self.pool(x) - x
            x = x.mean((2, 3)).unsqueeze(1).squeeze(1)
            return self.fc(torch.unsqueeze(x, 1)).squeeze(1)

    net = dnnbench.from_torch(PoolMixer(), (4, 8, 8))
    kinds = [layer.kind for layer in net.layers]
    assert "add" in kinds and net.shapes[-1] == (3,)

    class Shift(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.offset = nn.Parameter(torch.zeros(4))
            self.register_buffer("table", torch.ones(3, 4))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return 1.0 - torch.sigmoid((x - 1.0) - self.offset)

    shifted = dnnbench.from_torch(Shift(), (4,))
    # x - 1 a bias of a constant, x - offset a learned shift, 1 - s a constant factor (PyTorch's rsub)
    assert [(layer.kind, layer.to_dict().get("weights", layer.to_dict().get("learned"))) for layer in
            shifted.layers[1:]] == [("bias", 0), ("bias", 4), ("activation", None), ("scale", False)]

    class Table(Shift):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.unsqueeze(1) - self.table  # (1, 4) broadcast up to the constant's (3, 4)

    tabled = dnnbench.from_torch(Table(), (4,))
    assert [(layer.kind, layer.to_dict().get("times")) for layer in tabled.layers[1:]] == [
        ("reshape", None), ("repeat", 3), ("bias", None)]
    assert tabled.shapes[-1] == (3, 4)

    class Deeper(Shift):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x - self.table.unsqueeze(0)  # a constant with an axis more than the values

    with pytest.raises(SpecError, match=r"a tensor of shape \[1, 3, 4\] that is no layer's output") as err:
        dnnbench.from_torch(Deeper(), (4,))
    assert "\n" not in str(err.value)


def test_a_mean_over_a_sequences_tokens_is_global_average_pooling() -> None:
    class Head(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed, self.fc = nn.Embedding(20, 8), nn.Linear(8, 5)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            return self.fc(self.embed(ids).mean(1))

    net = dnnbench.from_torch(Head(), (12,))
    pool = next(layer for layer in net.layers if layer.kind in ("pool", "adaptive_pool"))
    c = net.layer_counts[net.layers.index(pool)]
    assert c.input_shape == (8, 12, 1) and c.output_shape == (8, 1, 1)
    assert c.elem_ops_forward == 8 * 12  # one per token and feature
    assert net.shapes[-1] == (5,)


def test_batch_norm_on_one_value_per_channel_traces() -> None:
    """A trace has one sample: a batch norm after global pooling sees one value per channel, which PyTorch
    refuses in training and its meta kernel cannot run; its shape is all the import needs. momentum=None
    (a cumulative average) divides by the batches seen."""
    net = nn.Sequential(nn.Conv2d(3, 8, 3), nn.AdaptiveAvgPool2d(1), nn.BatchNorm2d(8, momentum=None), NormAct(8),
                        nn.Flatten(), nn.Linear(8, 4))
    spec = dnnbench.from_torch(net, (3, 8, 8))
    assert [layer.kind for layer in spec.layers].count("batchnorm") == 2
    assert totals(spec).weights == sum(p.numel() for p in net.parameters())
    assert net.training and float(net[2].num_batches_tracked) == 0  # the module is not changed


def test_group_norm_module_and_function() -> None:
    class Functional(nn.GroupNorm):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return F.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)

    module = nn.Sequential(nn.Conv2d(3, 8, 3), nn.GroupNorm(2, 8), nn.SiLU(), nn.Conv2d(8, 8, 3), Functional(4, 8),
                           nn.Conv2d(8, 8, 1), nn.GroupNorm(8, 8, affine=False))
    net = dnnbench.from_torch(module, (3, 10, 10))
    norms = [(layer.groups, layer.affine) for layer in net.layers if layer.kind == "group_norm"]
    assert norms == [(2, True), (4, True), (8, False)]
    assert totals(net).weights == sum(p.numel() for p in module.parameters())
    c = net.layer_counts[2]
    assert (c.weights, c.elem_ops_forward, c.elem_ops_backprop) == (16, 2 * 8 * 8 * 8, 2 * 8 * 8 * 8)
    with pytest.raises(SpecError, match=r"layers\[1\]\.groups: 3 must divide the channels \(8\)"):
        dnnbench.Network.build({"name": "g", "layers": [{"kind": "input", "shape": [8, 4, 4]},
                                                        {"kind": "group_norm", "groups": 3}]})


def test_upsampling_modules_and_interpolate(tmp_path) -> None:
    from onnx_export import export

    class Decoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(4, 4, 3, stride=2, padding=1)
            self.up, self.up2 = nn.Upsample(scale_factor=2, mode="bilinear"), nn.UpsamplingNearest2d(scale_factor=2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.conv(x)
            z = F.interpolate(y, size=(8, 8)) + self.up(y)  # nearest to a size; bilinear by a factor
            return self.up2(z)

    net = dnnbench.from_torch(Decoder(), (4, 8, 8))
    ups = [(layer.size, layer.mode) for layer in net.layers if layer.kind == "upsample"]
    assert ups == [(8, "nearest"), (8, "bilinear"), (16, "nearest")]
    c = net.layer_counts[-1]
    assert (c.elem_ops_forward, c.elem_ops_backprop, c.weights) == (4 * 16 * 16, 4 * 16 * 16, 0)
    bilinear = next(c for layer, c in zip(net.layers, net.layer_counts, strict=True)
                    if getattr(layer, "mode", "") == "bilinear")
    assert bilinear.elem_ops_forward == 4 * 4 * 8 * 8

    class Exact(nn.Module):  # another rounding of the source position, nearest's cost
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return F.interpolate(x, scale_factor=2, mode="nearest-exact")

    exact = dnnbench.from_torch(Exact(), (4, 8, 8))
    assert [(layer.kind, layer.to_dict().get("mode")) for layer in exact.layers[1:]] == [("upsample", "nearest")]

    class Bicubic(nn.Module):  # CrossViT resizes its input so, to a smaller size
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return F.interpolate(x, size=(6, 6), mode="bicubic")

    cubic = dnnbench.from_torch(Bicubic(), (4, 8, 8))
    assert (cubic.layers[1].mode, cubic.layer_counts[1].elem_ops_forward) == ("bicubic", 16 * 4 * 6 * 6)
    assert dnnbench.from_onnx(export(Bicubic(), (4, 8, 8), tmp_path / "cubic.onnx")).layer_counts == cubic.layer_counts

    class Area(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return F.interpolate(x, scale_factor=2, mode="area")

    with pytest.raises(SpecError, match="mode='area'; dnnbench's upsample is nearest, bilinear or bicubic"):
        dnnbench.from_torch(Area(), (4, 8, 8))


def test_leaky_relu_module_function_and_onnx(tmp_path) -> None:
    from onnx_export import export

    module = nn.Sequential(nn.Conv2d(3, 8, 3), nn.LeakyReLU(0.1), nn.Conv2d(8, 8, 3), nn.LeakyReLU(inplace=True),
                           nn.Flatten(), nn.Linear(8 * 4 * 4, 4))
    net = dnnbench.from_torch(module, (3, 8, 8))
    assert [getattr(layer, "activation", None) for layer in net.layers[1:3]] == ["leaky_relu", "leaky_relu"]

    class Functional(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return F.leaky_relu(x, 0.2)

    assert dnnbench.from_torch(Functional(), (8,)).layers[1].function == "leaky_relu"
    onnx = dnnbench.from_onnx(export(module, (3, 8, 8), tmp_path / "leaky.onnx"))
    assert onnx.layer_counts == net.layer_counts and onnx.layers[1].activation == "leaky_relu"


ACTIVATION_MODULES = [(nn.ELU(), "elu"), (nn.SELU(), "selu"), (nn.Mish(), "mish"), (nn.Softplus(), "softplus"),
                      (nn.Hardtanh(-2.0, 2.0), "hardtanh"), (nn.Hardtanh(0.0, 6.0), "relu6"),
                      (nn.ReLU6(), "relu6")]


@pytest.mark.parametrize(("act", "function"), ACTIVATION_MODULES, ids=[f for _, f in ACTIVATION_MODULES])
def test_more_activations_import_from_torch_and_onnx_and_train_back(act: nn.Module, function: str,
                                                                   tmp_path) -> None:
    """ELU, SELU, Mish, softplus and hardtanh: fused into the convolution before them (a module and its
    ONNX export alike), alone after a pooling, and built back by the runner as the same module."""
    from onnx_export import export

    from dnnbench.measure import torchnet

    module = nn.Sequential(nn.Conv2d(3, 8, 3), act, nn.MaxPool2d(2), act, nn.Flatten(), nn.Linear(72, 4))
    net = dnnbench.from_torch(module, (3, 8, 8))
    assert net.layers[1].activation == function and net.layers[3].function == function
    onnx = dnnbench.from_onnx(export(module, (3, 8, 8), tmp_path / f"{function}.onnx"))
    assert onnx.layer_counts == net.layer_counts and onnx.layers[1].activation == net.layers[1].activation
    built = torchnet.build_model(net)
    assert totals(dnnbench.from_torch(built, (3, 8, 8))) == totals(net)
    assert dnnbench.from_torch(built, (3, 8, 8)).layers[3].function == function


def test_prelu_learns_one_slope_or_one_per_channel(tmp_path) -> None:
    from onnx_export import export

    from dnnbench.measure import torchnet

    class Functional(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.slope = nn.Parameter(torch.full((4,), 0.25))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return F.prelu(x, self.slope)

    module = nn.Sequential(nn.Conv2d(3, 4, 3), nn.PReLU(4), Functional(), nn.Conv2d(4, 4, 3), nn.PReLU(),
                           nn.Flatten(), nn.Linear(64, 3))
    net = dnnbench.from_torch(module, (3, 8, 8))
    prelus = [(layer.per_channel, c.weights) for layer, c in zip(net.layers, net.layer_counts, strict=True)
              if layer.kind == "prelu"]
    assert prelus == [(True, 4), (True, 4), (False, 1)]
    assert totals(net).weights == sum(p.numel() for p in module.parameters())
    c = net.layer_counts[2]
    assert (c.elem_ops_forward, c.elem_ops_backprop) == (4 * 6 * 6, 4 * 6 * 6)
    assert dnnbench.from_onnx(export(module, (3, 8, 8), tmp_path / "prelu.onnx")).layer_counts == net.layer_counts
    built = torchnet.build_model(net)
    assert totals(dnnbench.from_torch(built, (3, 8, 8))) == totals(net)
    with pytest.raises(SpecError, match=r"^Sequential input_shape: \[4, 8, 8\] does not fit the module"):
        dnnbench.from_torch(nn.Sequential(nn.PReLU(3)), (4, 8, 8))  # (torch's own check)
    fixed = type("Fixed", (nn.Module,), {"forward": lambda self, x: F.prelu(x, torch.full((1,), 0.1))})()
    assert dnnbench.from_torch(fixed, (12,)).layers[1].function == "leaky_relu"  # constant slopes: nothing learned


def test_sums_and_means_over_axes_are_reduce_layers(tmp_path) -> None:
    """A split attention's branches added up (SK-Net's, ResNeSt's ``x.view(B, r, C, H, W).sum(1)``), a
    mean over one axis, a sum keeping its axis: reduce layers, from torch and ONNX alike, trained back;
    a sum over the batch is a one-line error."""
    from onnx_export import export

    from dnnbench.measure import torchnet

    class Split(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(8, 16, 3, padding=1)
            self.fc = nn.Linear(8, 10)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            branches = self.conv(x).view(x.shape[0], 2, 8, 6, 6)
            z = branches.sum(1)
            return self.fc(z.mean((2, 3)) + torch.sum(z.mean(2), -1, keepdim=True).squeeze(-1))

    module = Split()
    net = dnnbench.from_torch(module, (8, 6, 6))
    reduces = [(layer.axes, layer.mode, layer.keepdim) for layer in net.layers if layer.kind == "reduce"]
    assert reduces == [((0,), "sum", False), ((1,), "mean", False), ((1,), "sum", True)]
    c = next(c for layer, c in zip(net.layers, net.layer_counts, strict=True) if layer.kind == "reduce")
    assert (c.output_shape, c.elem_ops_forward, c.elem_ops_backprop) == ((8, 6, 6), 576, 576)
    assert totals(dnnbench.from_onnx(export(module, (8, 6, 6), tmp_path / "split.onnx"))) == totals(net)
    built = torchnet.build_model(net)
    x, y = torchnet.batch(net, 2)
    torchnet.loss_fn(net)(built(x), y).backward()
    assert totals(dnnbench.from_torch(built, (8, 6, 6))) == totals(net)
    everything = type("Everything", (nn.Module,), {"forward": lambda self, x: x.sum((0, 1), keepdim=True)})()
    with pytest.raises(SpecError, match=r"^sum_1 \(Tensor.sum\): takes a sum over the batch axis; dnnbench reduces "
                                        r"axes of one sample$"):
        dnnbench.from_torch(everything, (8,))
    bad = [{"kind": "input", "shape": [3, 4, 5]}, {"kind": "reduce", "axes": [0, -3]}]
    with pytest.raises(SpecError, match=r"^layers\[1\]\.axes: \[0, -3\] must name distinct axes of the input"):
        Network.build({"name": "bad", "layers": bad})


def test_a_division_of_two_outputs_and_a_product_broadcast_both_ways(tmp_path) -> None:
    """Attention normalised by its sum (ConViT's, a linear attention's ``x / (x.sum(-1) + eps)``) and
    FocalNet's (C, 1, 1) gate times a (1, H, W) map: `mul` layers (dividing, broadcasting both ways),
    from torch and ONNX alike, trained back."""
    from onnx_export import export

    from dnnbench.measure import torchnet

    class Normalised(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 6, 3, padding=1)
            self.gate = nn.Conv2d(6, 6, 1)
            self.spot = nn.Conv2d(6, 1, 1)
            self.fc = nn.Linear(6 * 8 * 8, 2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = torch.relu(self.conv(x))
            h = h / (h.sum(-1, keepdim=True) + 1e-6)
            g = self.gate(h.mean((2, 3), keepdim=True)) * self.spot(h)  # (6, 1, 1) by (1, 8, 8)
            return self.fc(torch.flatten(g, 1))

    module = Normalised()
    net = dnnbench.from_torch(module, (3, 8, 8))
    muls = [(layer.divide, c.output_shape, c.elem_ops_backprop)
            for layer, c in zip(net.layers, net.layer_counts, strict=True) if layer.kind == "mul"]
    assert muls == [(True, (6, 8, 8), 3 * 384), (False, (6, 8, 8), 2 * 384)]
    assert totals(dnnbench.from_onnx(export(module, (3, 8, 8), tmp_path / "norm.onnx"))) == totals(net)
    built = torchnet.build_model(net)
    assert totals(dnnbench.from_torch(built, (3, 8, 8))) == totals(net)
    text = net.to_dict()
    assert sum("divide" in layer for layer in text["layers"]) == 1  # saved only where it divides


def test_a_global_response_norm_and_an_affine_layer(tmp_path) -> None:
    """ConvNeXt-V2's global response norm (a 2-norm over height and width, divided by its mean over
    channels, then ``addcmul(beta, gamma, x * n)``) and ResMLP's affine layer: reduce (l2), mul (divide),
    scale and bias layers, weights equal to the module's, from torch and ONNX alike, trained back."""
    from onnx_export import export

    from dnnbench.measure import torchnet

    class ResponseNorm(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, padding=1)
            self.gamma, self.beta = nn.Parameter(torch.ones(1, 8, 1, 1)), nn.Parameter(torch.zeros(1, 8, 1, 1))
            self.fc = nn.Linear(8 * 8 * 8, 2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = self.conv(x)
            g = torch.linalg.vector_norm(h, 2, dim=(2, 3), keepdim=True)
            n = g / (g.mean(dim=1, keepdim=True) + 1e-6)
            h = h + torch.addcmul(self.beta, self.gamma, h * n)
            return self.fc(torch.flatten(h, 1))

    module = ResponseNorm()
    net = dnnbench.from_torch(module, (3, 8, 8))
    kinds = [layer.kind for layer in net.layers]
    assert kinds.count("reduce") == 2 and "scale" in kinds and "bias" in kinds
    norm = next(layer for layer in net.layers if layer.kind == "reduce")
    assert (norm.mode, norm.axes, norm.keepdim) == ("l2", (1, 2), True)
    assert totals(net).weights == sum(p.numel() for p in module.parameters())
    assert totals(dnnbench.from_onnx(export(module, (3, 8, 8), tmp_path / "grn.onnx"))) == totals(net)
    built = torchnet.build_model(net)
    assert totals(dnnbench.from_torch(built, (3, 8, 8))) == totals(net)
    assert net.layer_counts[kinds.index("reduce")].elem_ops_forward == 2 * 8 * 8 * 8  # square and add


def test_clamp_between_numbers_is_an_activation() -> None:
    class Clamps(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.clamp(x.clamp(min=0), -1.0, 1.0).clip(0, 6)

    net = dnnbench.from_torch(Clamps(), (8,))
    assert [layer.function for layer in net.layers[1:]] == ["relu", "hardtanh", "relu6"]
    with pytest.raises(SpecError, match=r"^NoBounds input_shape: \[8\] does not fit the module \(ValueError"):
        dnnbench.from_torch(type("NoBounds", (nn.Module,), {"forward": lambda self, x: x.clamp()})(), (8,))


def test_tensorflow_same_padding_is_a_pad_layer_before_the_convolution() -> None:
    class SameConv(nn.Conv2d):
        """A stride-2 convolution padded as TensorFlow's "same" (one more at the bottom and right)."""

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return super().forward(F.pad(x, [0, 1, 0, 1]))

    module = nn.Sequential(SameConv(3, 8, 3, stride=2), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1))
    net = dnnbench.from_torch(module, (3, 16, 16))
    pad = net.layers[1]
    assert pad.kind == "pad" and list(pad.padding) == [0, 1, 0, 1]
    c = net.layer_counts[1]
    assert c.output_shape == (3, 17, 17) and (c.elem_ops_forward, c.elem_ops_backprop) == (3 * 17 * 17, 0)
    assert net.shapes[2] == (8, 8, 8) and totals(net).weights == sum(p.numel() for p in module.parameters())

    class Rows(nn.Module):
        def __init__(self, pad: list[int]) -> None:
            super().__init__()
            self.pad = pad

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return F.pad(x.view(-1, 4, 6), self.pad, mode="reflect")

    # Along the last axis of (4, 6) values (a (C, L) signal's length): the pad of its one-row maps' width
    rows = dnnbench.from_torch(Rows([1, 1]), (24,))
    assert rows.layers[-2].kind == "pad" and list(rows.layers[-2].padding) == [1, 1, 0, 0]
    assert tuple(rows.shapes[-2:]) == ((4, 1, 8), (4, 8))
    with pytest.raises(SpecError, match="mode='reflect'.*adds values around the height and width of feature maps"):
        dnnbench.from_torch(Rows([1, 1, 1, 1]), (24,))


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular", "constant"])
def test_pads_of_every_mode_import_count_and_train_back(mode: str, tmp_path) -> None:
    """Reflection, replication, circular and constant (1.0) padding: as a module, F.pad and a convolution's
    padding_mode (a pad layer before it), from torch and ONNX alike, built back by the runner."""
    from onnx_export import export

    from dnnbench.measure import torchnet

    modules = {"reflect": nn.ReflectionPad2d(2), "replicate": nn.ReplicationPad2d(2),
               "circular": nn.CircularPad2d(2), "constant": nn.ConstantPad2d(2, 1.0)}
    conv = nn.Conv2d(4, 4, 3, padding=1, padding_mode="zeros" if mode == "constant" else mode)
    module = nn.Sequential(nn.Conv2d(3, 4, 3), modules[mode], conv, nn.Flatten(), nn.Linear(4 * 10 * 10, 2))
    net = dnnbench.from_torch(module, (3, 8, 8))
    pads = [layer for layer in net.layers if layer.kind == "pad"]
    assert [(p.mode, p.value) for p in pads] == ([(mode, 0.0)] * 2 if mode != "constant" else [(mode, 1.0)])
    c = net.layer_counts[2]
    assert c.output_shape == (4, 10, 10) and c.elem_ops_forward == 400
    assert c.elem_ops_backprop == (4 * 6 * 6 if mode == "constant" else 400)  # the border's errors added in
    assert totals(net).weights == sum(p.numel() for p in module.parameters())
    if mode != "circular":  # (torch exports circular padding as slices and a concat)
        onnx = dnnbench.from_onnx(export(module, (3, 8, 8), tmp_path / f"{mode}.onnx"))
        assert totals(onnx) == totals(net)
    built = torchnet.build_model(net)
    assert totals(dnnbench.from_torch(built, (3, 8, 8))) == totals(net)


def test_a_reflection_must_fit_its_map() -> None:
    layers = [{"kind": "input", "shape": [2, 3, 5]}, {"kind": "pad", "padding": [1, 1, 3, 0], "mode": "reflect"}]
    with pytest.raises(SpecError, match=r"^layers\[1\]\.padding: \[1, 1, 3, 0\] is more than reflect padding of a "
                                        r"3x5 map allows \(less than its size on each side\)$"):
        Network.build({"name": "bad", "layers": layers})
    layers[1] = {"kind": "pad", "padding": [1, 1, 1, 1], "mode": "replicate", "value": 2.0}
    with pytest.raises(SpecError, match=r"^layers\[1\]\.value: 2.0 is for the constant mode; mode is 'replicate'$"):
        Network.build({"name": "bad", "layers": layers})


def test_onnx_pad_and_resize_are_pad_and_upsample_layers(tmp_path) -> None:
    from onnx_export import export

    class Decoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.down, self.conv = nn.Conv2d(4, 8, 3, stride=2), nn.Conv2d(8, 4, 3, padding=1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.down(F.pad(x, [0, 1, 0, 1]))
            y = F.interpolate(y, scale_factor=2, mode="bilinear") + F.interpolate(y, size=(8, 8))
            return self.conv(y)

    module = Decoder()
    a = dnnbench.from_onnx(export(module, (4, 8, 8), tmp_path / "decoder.onnx"))
    b = dnnbench.from_torch(module, (4, 8, 8))
    assert [layer.kind for layer in a.layers] == [layer.kind for layer in b.layers]
    assert a.layer_counts == b.layer_counts and a.input_indices == b.input_indices


def test_instance_norm_is_a_group_norm_of_one_channel_per_group() -> None:
    """nn.InstanceNorm2d trains as a group norm with a group per channel (running statistics, when
    tracked, only serve evaluation); its FLOPs and parameters equal the module's."""
    module = nn.Sequential(nn.Conv2d(3, 8, 3), nn.InstanceNorm2d(8, affine=True), nn.ReLU(),
                           nn.Conv2d(8, 4, 3), nn.InstanceNorm2d(4, track_running_stats=True))
    net = dnnbench.from_torch(module, (3, 10, 10))
    norms = [(layer.groups, layer.affine) for layer in net.layers if layer.kind == "group_norm"]
    assert norms == [(8, True), (4, False)]
    assert totals(net).weights == sum(p.numel() for p in module.parameters())
    same = nn.Sequential(nn.Conv2d(3, 8, 3), nn.GroupNorm(8, 8), nn.ReLU(), nn.Conv2d(8, 4, 3),
                         nn.GroupNorm(4, 4, affine=False))
    assert net.layer_counts == dnnbench.from_torch(same, (3, 10, 10)).layer_counts


@pytest.mark.parametrize("affine", [True, False])
def test_onnx_group_and_instance_norms_as_torch_exports_them(tmp_path, affine: bool) -> None:
    """torch exports nn.GroupNorm as Reshape, InstanceNormalization, Reshape, Mul and Add (ones and zeros
    without affine), and nn.InstanceNorm2d as one InstanceNormalization: each is one group_norm layer,
    equal to from_torch's, with the module's parameters."""
    from onnx_export import export

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1, self.norm1 = nn.Conv2d(3, 16, 3, padding=1), nn.GroupNorm(4, 16, affine=affine)
            self.conv2, self.norm2 = nn.Conv2d(16, 8, 3), nn.GroupNorm(8, 8, affine=affine)
            self.head = nn.Linear(8 * 6 * 6, 10)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = F.silu(self.norm1(self.conv1(x)))
            y = self.conv2(y)
            y = self.norm2(y) + y  # a norm whose input has another consumer
            return self.head(y.flatten(1))

    module = Block()
    a = dnnbench.from_onnx(export(module, (3, 8, 8), tmp_path / "norms.onnx"))
    b = dnnbench.from_torch(module, (3, 8, 8))
    assert [(layer.kind, getattr(layer, "groups", None)) for layer in a.layers] == [
        (layer.kind, getattr(layer, "groups", None)) for layer in b.layers]
    assert a.layer_counts == b.layer_counts and a.input_indices == b.input_indices
    assert totals(a).weights == sum(p.numel() for p in module.parameters())
    instance = nn.Sequential(nn.Conv2d(3, 8, 3), nn.InstanceNorm2d(8, affine=affine), nn.ReLU(), nn.Flatten(),
                             nn.Linear(8 * 6 * 6, 10))
    c = dnnbench.from_onnx(export(instance, (3, 8, 8), tmp_path / "instance.onnx"))
    assert c.layer_counts == dnnbench.from_torch(instance, (3, 8, 8)).layer_counts


def test_new_axes_by_indexing_with_none_are_views() -> None:
    """Squeeze-and-excitation written with ``w[:, :, None, None]``, a slice with a new axis
    (``g[:, 1:5, None]``) and ``x[..., None]``: the indexing without its new axes, then a view; a new
    axis before the batch is a one-line error."""
    from dnnbench.measure import torchnet

    class Excite(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv, self.squeeze, self.fc = nn.Conv2d(3, 8, 3), nn.Linear(8, 8), nn.Linear(8, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.conv(x)
            g = torch.sigmoid(self.squeeze(y.mean((2, 3))))
            y = y * g[:, :, None, None] + g[:, 1:5, None].mean(1)[..., None, None]
            return self.fc(y[:, :, None].flatten(2).mean(2))

    module = Excite()
    net = dnnbench.from_torch(module, (3, 8, 8))
    views = [(layer.name, shape) for layer, shape in zip(net.layers, net.shapes, strict=True)
             if layer.name.endswith("_axes")]
    assert views == [("getitem_axes", (8, 1, 1)), ("getitem_1_axes", (4, 1)), ("getitem_2_axes", (1, 1, 1)),
                     ("getitem_3_axes", (8, 1, 6, 6))]
    assert [layer.kind for layer in net.layers if layer.name == "getitem_1"] == ["slice"]
    counter = FlopCounterMode(display=False)
    with counter:
        module(torch.randn(1, 3, 8, 8))
    assert counter.get_total_flops() == 2 * totals(net).macs_forward
    assert totals(net).weights == sum(p.numel() for p in module.parameters())
    built = torchnet.build_model(net)
    assert tuple(built(torch.randn(2, 3, 8, 8)).shape) == (2, 3)

    class Front(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x[None].sum(0)

    with pytest.raises(SpecError, match="a new axis before the batch") as err:
        dnnbench.from_torch(Front(), (4,))
    assert "\n" not in str(err.value)


class AtenForms(nn.Module):
    """An FC layer written in ATen's own form (``torch.addmm(bias, x, weight)``, the weight (in, out)) and
    one-sided clamps (``clamp_min``, ``torch.clamp_max``)."""

    def __init__(self) -> None:
        super().__init__()
        self.weight, self.bias = nn.Parameter(torch.randn(8, 6)), nn.Parameter(torch.zeros(6))
        self.head = nn.Linear(6, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.addmm(self.bias, x, self.weight).clamp_min(0.0)
        return self.head(torch.clamp_max(h, 6.0))


def test_addmm_and_one_sided_clamps_import_as_an_fc_and_activations() -> None:
    net = imports_like_pytorch(AtenForms(), (8,), torch.randn(3, 8))
    layers = [(layer.kind, getattr(layer, "activation", getattr(layer, "function", None))) for layer in net.layers]
    assert layers == [("input", None), ("fc", "relu"), ("activation", "hardtanh"), ("fc", "none")]


class _Unscaled(nn.Module):
    """Batch norms without a learned scale and shift: a module's (2-D and 1-D) and F.batch_norm's."""

    def __init__(self) -> None:
        super().__init__()
        self.conv, self.bn = nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4, affine=False)
        self.fc, self.bn1 = nn.Linear(4 * 6 * 6, 8), nn.BatchNorm1d(8, affine=False)
        self.register_buffer("mean", torch.zeros(8))
        self.register_buffer("var", torch.ones(8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.bn1(self.fc(torch.relu(self.bn(self.conv(x))).flatten(1)))
        return F.batch_norm(h, self.mean, self.var, training=True)


def test_a_batch_norm_without_a_scale_and_shift_holds_no_weights() -> None:
    net = imports_like_pytorch(_Unscaled(), (3, 8, 8), torch.randn(4, 3, 8, 8))
    norms = [layer for layer in net.layers if layer.kind == "batchnorm"]
    assert [layer.affine for layer in norms] == [False, False, False]
    assert [c.weights for layer, c in zip(net.layers, net.layer_counts, strict=True) if layer.kind == "batchnorm"] \
        == [0, 0, 0]
    assert all(layer.to_dict()["affine"] is False for layer in norms)
    # the default is left out of a saved spec, so specs written before the field read as they did
    assert "affine" not in Network.build({"name": "n", "layers": [
        {"kind": "input", "shape": [4, 2, 2]}, {"kind": "batchnorm"}]}).layers[1].to_dict()


class LogFeatures(nn.Module):
    """Log features cleaned of the NaN and infinities a log of a ReLU's zeros makes: ``torch.nan_to_num``
    on a layer's output alone and after an FC layer (fused), and the method with fill values."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.c = nn.Linear(12, 24), nn.Linear(24, 24), nn.Linear(24, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.nan_to_num(torch.log(torch.relu(self.a(x))))
        return self.c(self.b(h).nan_to_num(nan=0.0, posinf=1e4, neginf=-1e4))


def test_nan_to_num_is_a_function_of_two_comparisons() -> None:
    from dnnbench.specs.shape import FUNCTION_PRICED_AS

    net = imports_like_pytorch(LogFeatures(), (12,), torch.randn(3, 12))
    functions = [(layer.kind, getattr(layer, "function", None) or getattr(layer, "activation", None))
                 for layer in net.layers[1:]]
    assert functions == [("fc", "relu"), ("activation", "log"), ("activation", "nan_to_num"),
                         ("fc", "nan_to_num"), ("fc", "none")]
    assert FUNCTION_PRICED_AS["nan_to_num"] == "relu6"
    # The runner builds it as PyTorch's own: NaN and infinities replaced.
    from dnnbench.measure import torchnet

    built = torchnet._act("nan_to_num")
    assert torch.equal(built(torch.tensor([float("nan"), float("inf"), 1.0])),
                       torch.nan_to_num(torch.tensor([float("nan"), float("inf"), 1.0])))
