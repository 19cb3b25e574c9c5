"""Normalisations and activations written out by hand, as research code often has them: ConvNeXt's
channels-first layer norm (a mean, a square, a square root, a division), GPT-2's tanh GELU (``x ** 3``),
BERT's erf GELU, a layer norm by ``x.var`` and one by ``x.std``, LLaMA's RMS norm (``torch.rsqrt``),
``1 / x``, and the less common activation modules (CELU, log-sigmoid, tanhshrink, softshrink, hardshrink,
threshold, RReLU, softmin, alpha dropout). Each imports from PyTorch with its weights and FLOPs, is built
back by the runner, and where torch's ONNX export writes it node for node, imports from ONNX with the
same counts (docs/importing.md)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
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
from dnnbench.model.arrays import network_arrays
from dnnbench.specs import Configuration, Network
from dnnbench.specs.shape import ACTIVATION_FUNCTIONS, pow_priced_as


class ChannelsFirstLayerNorm(nn.Module):
    """ConvNeXt's layer norm over the channels of (N, C, H, W) maps, as its reference code writes it."""

    #: Compute ``x - u`` once, as torch's ONNX export does (it merges the two differences).
    once = False

    def __init__(self, channels: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight, self.bias = nn.Parameter(torch.ones(channels)), nn.Parameter(torch.zeros(channels))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        u = x.mean(1, keepdim=True)
        if self.once:
            d = x - u
            return self.weight[:, None, None] * (d / torch.sqrt(d.pow(2).mean(1, keepdim=True) + self.eps)) \
                + self.bias[:, None, None]
        s = (x - u).pow(2).mean(1, keepdim=True)
        x = (x - u) / torch.sqrt(s + self.eps)
        return self.weight[:, None, None] * x + self.bias[:, None, None]


class ConvNeXtBlock(nn.Module):
    """A ConvNeXt block in channels-first form: a 7x7 depthwise convolution, the written-out norm, 1x1
    convolutions with a GELU between, a residual."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 4, stride=4)
        self.norm0 = ChannelsFirstLayerNorm(16)
        self.dw = nn.Conv2d(16, 16, 7, padding=3, groups=16)
        self.norm = ChannelsFirstLayerNorm(16)
        self.pw1, self.pw2 = nn.Conv2d(16, 64, 1), nn.Conv2d(64, 16, 1)
        self.head = nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.norm0(self.stem(x))
        x = x + self.pw2(F.gelu(self.pw1(self.norm(self.dw(x)))))
        return self.head(x.mean((2, 3)))


class NewGELU(nn.Module):
    """GPT-2's GELU (the tanh approximation written out, ``torch.pow(x, 3.0)``)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class HandLayerNorm(nn.Module):
    """A layer norm by the variance (``unbiased=False``) or, with ``std``, by the deviation plus eps
    (the Annotated Transformer's)."""

    def __init__(self, width: int, std: bool) -> None:
        super().__init__()
        self.a, self.b, self.std = nn.Parameter(torch.ones(width)), nn.Parameter(torch.zeros(width)), std

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mean = x.mean(-1, keepdim=True)
        if self.std:
            return self.a * (x - mean) / (x.std(-1, keepdim=True) + 1e-6) + self.b
        return self.a * (x - mean) / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + 1e-5) + self.b


class WrittenOutMLP(nn.Module):
    """Token MLP blocks with the GPT-2 GELU, BERT's erf GELU, both hand-written norms, an RMS norm by
    ``torch.rsqrt`` and a ``1 / x``."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2, self.fc3, self.fc4 = (nn.Linear(24, 48), nn.Linear(48, 24), nn.Linear(24, 24),
                                                  nn.Linear(24, 24))
        self.gelu, self.var_norm, self.std_norm = NewGELU(), HandLayerNorm(24, std=False), HandLayerNorm(24, std=True)
        self.g = nn.Parameter(torch.ones(24))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.var_norm(x + self.fc2(self.gelu(self.fc1(x))))
        h = h * 0.5 * (1.0 + torch.erf(self.fc3(h) / math.sqrt(2.0)))  # BERT's gelu
        h = self.std_norm(h)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6) * self.g
        return self.fc4(h) + 1.0 / (1.0 + h.square())


class RareActivations(nn.Module):
    """The activation modules and functions that appear less often."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Linear(16, 32), nn.CELU(0.5), nn.Linear(32, 32), nn.LogSigmoid(), nn.Linear(32, 32), nn.Tanhshrink(),
            nn.Linear(32, 32), nn.Softshrink(0.3), nn.Linear(32, 32), nn.Hardshrink(0.2), nn.Linear(32, 32),
            nn.Threshold(0.1, -1.0), nn.AlphaDropout(0.1), nn.Linear(32, 32), nn.RReLU(), nn.Linear(32, 10),
            nn.Softmin(dim=-1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log1p(F.celu(self.body(x)).abs())


CASES = [(ConvNeXtBlock, (3, 32, 32), True), (WrittenOutMLP, (6, 24), False), (RareActivations, (16,), False)]


@pytest.mark.parametrize("cls,shape,onnx", CASES, ids=[c.__name__ for c, _, _ in CASES])
def test_a_written_out_network_imports_with_pytorch_s_weights_and_flops(cls: type[nn.Module], shape: tuple[int, ...],
                                                                        onnx: bool, tmp_path: Path) -> None:
    """(torch's ONNX export writes ``x.var`` and ``x.std`` out as means, differences and products, ``torch.square``
    as a product, ``log1p`` as an add and a log, and softshrink, hardshrink and threshold as comparisons:
    those import with other counts, or not at all.)"""
    module = cls()
    net = dnnbench.from_torch(module, shape)
    t = totals(net)
    assert t.weights == params(module)
    forward, backward = step_flops(lambda: module(torch.randn(2, *shape)))
    assert forward == 2 * 2 * t.macs_forward
    assert backward == 2 * 2 * (t.macs_backprop + dense_weight_grad(net))
    built = torchnet.build_model(net)
    assert params(built) == t.weights
    out = built(torch.randn(2, *shape))
    assert tuple(out.shape[1:]) == net.shapes[-1]
    assert totals(dnnbench.from_torch(built, shape)) == t
    if onnx:
        for m in module.modules():
            if isinstance(m, ChannelsFirstLayerNorm):
                m.once = True  # what the export writes: one difference x - u per norm
        assert totals(dnnbench.from_onnx(export(cls(), shape, tmp_path / "net.onnx"))) == totals(
            dnnbench.from_torch(module, shape))
    pred = evaluate(net, presets.cluster("modern-2025"), presets.dataset("mnist"), Configuration())
    assert float(pred.time_per_sample_s) > 0


def _functions(net: Network) -> list[str]:
    return [getattr(layer, "function", None) or getattr(layer, "activation", "none") for layer in net.layers]


def test_the_steps_of_a_written_out_norm_are_their_own_layers() -> None:
    net = dnnbench.from_torch(WrittenOutMLP(), (6, 24))
    functions = _functions(net)
    for name in ("pow", "sqrt", "rsqrt", "erf", "reciprocal"):
        assert name in functions
    assert sorted(layer.mode for layer in net.layers if layer.kind == "reduce") == ["mean", "mean", "mean", "std",
                                                                                     "var"]
    assert {layer.exponent for layer in net.layers if getattr(layer, "function", "") == "pow"} == {2.0, 3.0}
    rare = _functions(dnnbench.from_torch(RareActivations(), (16,)))
    for name in ("celu", "log_sigmoid", "tanhshrink", "softshrink", "hardshrink", "threshold", "rrelu", "log",
                 "abs"):
        assert name in rare
    assert [layer.kind for layer in dnnbench.from_torch(RareActivations(), (16,)).layers].count("dropout") == 1


class _Power(nn.Module):
    def __init__(self, exponent: float, how: str) -> None:
        super().__init__()
        self.exponent, self.how = exponent, how

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.lin(x) if hasattr(self, "lin") else x
        if self.how == "operator":
            return y ** self.exponent
        return y.pow(self.exponent) if self.how == "method" else torch.pow(y, self.exponent)


@given(st.sampled_from([2.0, 3.0, 0.5, -0.5, -1.0, -2.0, 1.5, 4.0, 1.0, 2]),
       st.sampled_from(["operator", "method", "function"]))
@settings(max_examples=30, deadline=None)
def test_a_power_imports_as_its_function_and_is_priced_by_its_exponent(exponent: float, how: str) -> None:
    net = dnnbench.from_torch(nn.Sequential(nn.Linear(4, 6), _Power(exponent, how)), (4,))
    last = net.layers[-1]
    named = {0.5: "sqrt", -0.5: "rsqrt", -1.0: "reciprocal"}
    if exponent == 1.0:
        assert last.kind == "fc"
        return
    function = named.get(float(exponent), "pow")
    got = last.function if last.kind == "activation" else last.activation
    assert got == function
    if function == "pow":
        assert last.exponent == float(exponent)
        arr = network_arrays(net)
        assert arr.act_function[-1] == ACTIVATION_FUNCTIONS.index(pow_priced_as(float(exponent)))
    built = torchnet.build_model(net)
    x = torch.randn(3, 4)
    lin = built.get_submodule(next(name for name, m in built.named_modules() if isinstance(m, nn.Linear)))
    y = lin(x)
    want = y ** float(exponent)
    assert torch.allclose(built(x), want, equal_nan=True)


@pytest.mark.parametrize("code,message", [
    (lambda x, y: x ** y, "raises to a power that is no constant number"),
    (lambda x, y: 2.0 ** x, "raises to a power that is no constant number"),
    (lambda x, y: x ** float("inf"), r"raises to the power inf; dnnbench imports x \*\* p of a finite number p"),
])
def test_a_power_it_cannot_import_is_one_line(code: object, message: str) -> None:
    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return code(self.a(x), self.b(x))  # type: ignore[operator]

    with pytest.raises(SpecError, match=message) as err:
        dnnbench.from_torch(Net(), (4,))
    assert "\n" not in str(err.value)


def test_pow_needs_its_exponent_and_only_pow_has_one() -> None:
    for layer in ({"kind": "activation", "function": "pow"}, {"kind": "activation", "function": "relu",
                                                               "exponent": 2.0}):
        with pytest.raises(SpecError, match="exponent"):
            Network.build({"name": "p", "layers": [{"kind": "input", "shape": [4]}, layer]})
    net = Network.build({"name": "p", "layers": [{"kind": "input", "shape": [4]},
                                                 {"kind": "activation", "function": "pow", "exponent": 3}]})
    assert {k: v for k, v in net.to_dict()["layers"][1].items() if k != "name"} == {
        "kind": "activation", "function": "pow", "exponent": 3.0}
    assert "exponent" not in Network.build({"name": "r", "layers": [{"kind": "input", "shape": [4]},
                                                                    {"kind": "activation"}]}).to_dict()["layers"][1]


@pytest.mark.parametrize("mode", ["var", "std"])
def test_a_variance_and_a_deviation_build_back_to_what_torch_computes(mode: str) -> None:
    net = Network.build({"name": mode, "layers": [{"kind": "input", "shape": [2, 3, 5]},
                                                  {"kind": "reduce", "axes": [-1], "mode": mode, "keepdim": True}]})
    assert net.shapes[-1] == (2, 3, 1)
    x = torch.randn(2, 2, 3, 5)
    want = getattr(x, mode)(-1, keepdim=True)
    assert torch.allclose(torchnet.build_model(net)(x), want)
    counts = net.layer_counts[-1]
    assert counts.elem_ops_forward == 2 * 30
    summed = Network.build({"name": "sum", "layers": [{"kind": "input", "shape": [2, 3, 5], "needs_gradient": True},
                                                     {"kind": "reduce", "axes": [-1], "keepdim": True}]})
    spread = Network.build({"name": mode, "layers": [{"kind": "input", "shape": [2, 3, 5], "needs_gradient": True},
                                                     {"kind": "reduce", "axes": [-1], "mode": mode, "keepdim": True}]})
    # its backward reads its input (each value's distance from the mean); a sum's reads nothing
    assert network_arrays(spread).input_kept_values == 30 and network_arrays(summed).input_kept_values == 0
    assert np.isfinite(float(evaluate(net, presets.cluster("modern-2025"), presets.dataset("mnist"),
                                      Configuration()).time_per_sample_s))
