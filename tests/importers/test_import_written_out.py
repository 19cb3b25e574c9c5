"""Normalisations and activations written out by hand, as research code often has them: ConvNeXt's
channels-first layer norm (a mean, a square, a square root, a division), GPT-2's tanh GELU (``x ** 3``),
BERT's erf GELU, a layer norm by ``x.var`` and one by ``x.std``, LLaMA's RMS norm (``torch.rsqrt``),
``1 / x``, selections by masks computed from data (``torch.where(x > 0, x, a * x)``, ``masked_fill``),
and the less common activation modules (CELU, log-sigmoid, tanhshrink, softshrink, hardshrink,
threshold, RReLU, softmin, alpha dropout). Each imports from PyTorch with its weights and FLOPs, is built
back by the runner, and where torch's ONNX export writes it node for node, imports from ONNX with the
same counts (docs/importing.md)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from importers.import_helpers import imports_like_pytorch, params, step_flops
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
        h = self.std_norm(h) - torch.logsumexp(h, -1, keepdim=True)
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


class Selections(nn.Module):
    """Values chosen by masks computed from data: a leaky ReLU by ``torch.where``, a mask multiplied in,
    a maximum of two outputs, ``masked_fill``, ``torch.maximum``/``minimum``/``max`` of two outputs, a
    number as a branch."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.c = nn.Linear(16, 16), nn.Linear(16, 16), nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h, g = self.a(x), self.b(x)
        h = torch.where(h > 0, h, 0.2 * h)
        h = h * (g < 0.5).float()
        h = torch.where(h >= g, h, g)
        h = h.masked_fill(g > 1.0, 0.0)
        h = torch.maximum(h, g) + torch.minimum(0.5 * h, g) + torch.max(h, 0.1 * g)
        return self.c(torch.where(0.1 < h, 0.0, h))


CASES = [(ConvNeXtBlock, (3, 32, 32), True), (WrittenOutMLP, (6, 24), False), (RareActivations, (16,), False),
         (Selections, (16,), True)]


@pytest.mark.parametrize("cls,shape,onnx", CASES, ids=[c.__name__ for c, _, _ in CASES])
def test_a_written_out_network_imports_with_pytorch_s_weights_and_flops(cls: type[nn.Module], shape: tuple[int, ...],
                                                                        onnx: bool, tmp_path: Path) -> None:
    """(torch's ONNX export writes ``x.var`` and ``x.std`` out as means, differences and products, ``torch.square``
    as a product, ``log1p`` as an add and a log, and softshrink, hardshrink and threshold as comparisons:
    those import with other counts, or not at all.)"""
    module = cls()
    net = imports_like_pytorch(module, shape, torch.randn(2, *shape))
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
    assert sorted(layer.mode for layer in net.layers if layer.kind == "reduce") == ["logsumexp", "mean", "mean",
                                                                                     "mean", "std", "var"]
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
        if self.how == "operator":
            return x ** self.exponent
        return x.pow(self.exponent) if self.how == "method" else torch.pow(x, self.exponent)


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


@pytest.mark.parametrize("mode", ["var", "std", "logsumexp"])
def test_a_variance_and_a_deviation_build_back_to_what_torch_computes(mode: str) -> None:
    net = Network.build({"name": mode, "layers": [{"kind": "input", "shape": [2, 3, 5]},
                                                  {"kind": "reduce", "axes": [-1], "mode": mode, "keepdim": True}]})
    assert net.shapes[-1] == (2, 3, 1)
    x = torch.randn(2, 2, 3, 5)
    want = getattr(x, mode)(-1, keepdim=True)
    assert torch.allclose(torchnet.build_model(net)(x), want)
    counts = net.layer_counts[-1]
    assert counts.elem_ops_forward == (3 if mode == "logsumexp" else 2) * 30
    summed = Network.build({"name": "sum", "layers": [{"kind": "input", "shape": [2, 3, 5], "needs_gradient": True},
                                                     {"kind": "reduce", "axes": [-1], "keepdim": True}]})
    spread = Network.build({"name": mode, "layers": [{"kind": "input", "shape": [2, 3, 5], "needs_gradient": True},
                                                     {"kind": "reduce", "axes": [-1], "mode": mode, "keepdim": True}]})
    # its backward reads its input (each value's distance from the mean); a sum's reads nothing
    assert network_arrays(spread).input_kept_values == 30 and network_arrays(summed).input_kept_values == 0
    assert np.isfinite(float(evaluate(net, presets.cluster("modern-2025"), presets.dataset("mnist"),
                                      Configuration()).time_per_sample_s))


@pytest.mark.parametrize("op", ["gt", "ge", "lt", "le", "eq", "ne"])
def test_a_comparison_and_a_selection_compute_what_pytorch_computes(op: str) -> None:
    """The runner's compare and where layers against torch's, with a number and with a second input; a
    comparison sends no gradient back and a selection one per branch."""
    from dnnbench.specs.layers import Compare, Where

    a, b = torch.randn(3, 5), torch.randn(3, 5)
    a[0, :2] = 0.5  # some values equal to the number
    compare = torchnet._compare(Compare(op=op, value=0.5), (5,))
    assert torch.equal(compare(a), getattr(torch, op)(a, 0.5)) and torch.equal(compare(a, b), getattr(torch, op)(a, b))
    mask = compare(a, b)
    assert torch.equal(torchnet._where(Where(), (5,))(mask, a, b), torch.where(mask, a, b))
    for first in (False, True):
        got = torchnet._where(Where(value=-2.0, value_first=first), (5,))(mask, a)
        assert torch.equal(got, torch.where(mask, -2.0, a) if first else torch.where(mask, a, -2.0))
    net = Network.build({"name": "sel", "layers": [
        {"kind": "input", "shape": [5], "needs_gradient": True}, {"kind": "fc", "name": "h", "out_features": 5},
        {"kind": "compare", "name": "m", "op": op}, {"kind": "where", "inputs": ["m", "h"]}]})
    assert not net.needs_gradient[2]
    assert [(c.elem_ops_forward, c.elem_ops_backprop) for c in net.layer_counts[2:]] == [(5, 0), (5, 5)]


def test_a_selection_it_cannot_import_is_one_line() -> None:
    class Learned(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.table = nn.Linear(4, 4), nn.Parameter(torch.zeros(4))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = self.a(x)
            return h > self.table

    with pytest.raises(SpecError, match="compares with a tensor that is no layer output") as err:
        dnnbench.from_torch(Learned(), (4,))
    assert "\n" not in str(err.value)


class PaddingMask(nn.Module):
    """Attention scores filled with -inf where the key is a padding token (``x == 0``): a mask computed
    from the input, as sequence models with padding write it."""

    def __init__(self) -> None:
        super().__init__()
        self.embed, self.query, self.out = nn.Embedding(50, 8), nn.Linear(8, 8), nn.Linear(8, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x)
        scores = (self.query(h) @ h.transpose(1, 2)).masked_fill((x == 0).unsqueeze(1), float("-inf"))
        return self.out((scores.softmax(-1) @ h)[:, 0])


def test_a_padding_mask_from_the_tokens_imports_and_saves(tmp_path: Path) -> None:
    """The fill of -inf is held as -1e30 (a spec holds finite numbers); the spec saves and loads, and the
    ONNX export imports with the same counts."""
    module = PaddingMask()
    net = dnnbench.from_torch(module, (6,))
    where = next(layer for layer in net.layers if layer.kind == "where")
    assert where.value == -1e30 and where.value_first
    t = totals(net)
    assert t.weights == params(module)
    tokens = torch.randint(0, 50, (2, 6))
    forward, backward = step_flops(lambda: module(tokens))
    assert forward == 2 * 2 * t.macs_forward and backward == 2 * 2 * (t.macs_backprop + t.macs_weight_grad)
    assert totals(Network.build(json.loads(json.dumps(net.to_dict())))) == t
    built = torchnet.build_model(net)
    assert torch.isfinite(built(tokens)).all() and totals(dnnbench.from_torch(built, (6,))) == t
    onnx = dnnbench.from_onnx(export(module, (6,), tmp_path / "mask.onnx", dtype=torch.long))
    assert totals(onnx) == t


def test_a_log_sum_exp_imports_from_pytorch_and_onnx_alike(tmp_path: Path) -> None:
    class LogSoftmaxByHand(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b = nn.Linear(8, 8), nn.Linear(8, 2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = self.a(x)
            return self.b(h - h.logsumexp(-1, keepdim=True))

    module = LogSoftmaxByHand()
    net = dnnbench.from_torch(module, (8,))
    assert [layer.mode for layer in net.layers if layer.kind == "reduce"] == ["logsumexp"]
    assert totals(dnnbench.from_onnx(export(module, (8,), tmp_path / "lse.onnx"))) == totals(net)


def test_an_extremum_of_two_outputs_computes_what_pytorch_computes() -> None:
    """``torch.maximum(a, b)`` as the mask a >= b and the where it chooses by; of a vector, a reduction to
    one number per sample is kept as a (1,) axis."""
    class Extremes(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            a, b = x[:, 0], x[:, 1]
            return torch.cat((torch.maximum(a, b), torch.minimum(a, b), a.max(dim=-1).values.unsqueeze(1)), 1)

    net = dnnbench.from_torch(Extremes(), (2, 6))
    x = torch.randn(3, 2, 6)
    assert torch.equal(torchnet.build_model(net)(x), Extremes()(x))
    assert net.shapes[-1] == (13,)
