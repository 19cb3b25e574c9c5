"""Products with fixed tables and stopped gradients, as users write them.

- ``A @ x`` of a buffer A (a graph convolution over a fixed adjacency, a fixed mixing or DCT matrix) and
  ``x @ C``: a ``matmul`` of a ``zeros`` layer standing for the constants and the layer output. Backward
  computes x's gradient only (the constants need none), as PyTorch does.
- ``x[..., None] * freqs`` of a constant vector (NeRF's positional encoding, Fourier features): a ``mul``
  by such a table, spreading the values over the new axis.
- ``x.detach()`` (a straight-through estimator, a stopped branch): a ``stop_gradient`` layer. Whatever
  only reaches the loss through it computes no gradient, its weights' neither.

Every form's FLOPs are checked against FlopCounterMode, forward and backward."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

import dnnbench
from dnnbench.counts import totals
from dnnbench.errors import SpecError
from dnnbench.measure import torchnet

from .import_helpers import params, step_flops


def _checked(module: nn.Module, shape: tuple[int, ...], batch: int = 3) -> dnnbench.Network:
    """Import ``module``; its weights, forward and backward FLOPs are PyTorch's; the runner's build of it
    trains and imports back to the same counts."""
    net = dnnbench.from_torch(module, shape)
    t = totals(net)
    x = torch.randn(batch, *shape)
    forward, backward = step_flops(lambda: module(x))
    assert forward == 2 * batch * t.macs_forward
    assert backward == 2 * batch * (t.macs_backprop + t.macs_weight_grad)
    built = torchnet.build_model(net)
    assert step_flops(lambda: built(x)) == (forward, backward)
    assert totals(dnnbench.from_torch(built, shape)) == t
    return net


class GraphConv(nn.Module):
    """Two graph convolutions over a fixed normalised adjacency of n nodes (a traffic network's roads):
    ``A @ (x W)``; ``right``: the transposed form ``(W x)ᵀ``-style ``h @ Aᵀ`` on (D, n) features."""

    def __init__(self, n: int = 10, d: int = 8, right: bool = False, batched: bool = False) -> None:
        super().__init__()
        a = torch.eye(n) + (torch.rand(n, n) > 0.7).float()
        a = a / a.sum(1, keepdim=True)
        self.register_buffer("adjacency", a.unsqueeze(0) if batched else a)
        self.w1, self.w2, self.right = nn.Linear(d, 16), nn.Linear(16, 4), right

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.right:
            h = torch.relu(self.w1(x)).transpose(1, 2) @ self.adjacency.transpose(-2, -1)
            return self.w2(h.transpose(1, 2)).mean(1)
        h = torch.relu(self.adjacency @ self.w1(x))
        return torch.matmul(self.adjacency, self.w2(h)).mean(1)


@pytest.mark.parametrize("kw", [{}, {"right": True}, {"batched": True}])
def test_a_fixed_adjacency_times_features_is_a_product_with_constants(kw: dict) -> None:
    module = GraphConv(**kw)
    net = _checked(module, (10, 8))
    assert totals(net).weights == params(module)
    products = [c for layer, c in zip(net.layers, net.layer_counts, strict=True) if layer.kind == "matmul"]
    assert len(products) == (1 if kw.get("right") else 2)
    assert all(c.macs_backprop == c.macs_forward for c in products)  # x's gradient only


class Fourier(nn.Module):
    """NeRF's positional encoding: each coordinate times L frequencies, their sines and cosines beside
    the coordinates, an MLP."""

    def __init__(self, levels: int = 6) -> None:
        super().__init__()
        self.register_buffer("freqs", 2.0 ** torch.arange(levels) * math.pi)
        self.mlp = nn.Sequential(nn.Linear(3 + 6 * levels, 32), nn.ReLU(), nn.Linear(32, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xb = x[..., None] * self.freqs
        return self.mlp(torch.cat([x, torch.sin(xb).flatten(-2), torch.cos(xb).flatten(-2)], -1))


def test_coordinates_times_fixed_frequencies_spread_over_a_new_axis() -> None:
    module = Fourier()
    net = _checked(module, (3,))
    assert totals(net).weights == params(module)
    spread = [(layer, s) for layer, s in zip(net.layers, net.shapes, strict=True) if layer.kind == "mul"]
    assert [s for _, s in spread] == [(3, 6)]


class StraightThrough(nn.Module):
    """A quantiser's straight-through estimator, ``h + (q(h) - h).detach()``: q is computed forward, no
    gradient reaches it; ``stopped``: a whole learned branch added through ``.detach()``."""

    def __init__(self, stopped: bool = False) -> None:
        super().__init__()
        self.enc, self.q, self.dec = nn.Linear(12, 16), nn.Linear(16, 16), nn.Linear(16, 3)
        self.stopped = stopped

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(self.enc(x))
        if self.stopped:
            return self.dec(h + self.q(h).detach())
        return self.dec(h + (torch.round(torch.sigmoid(self.q(h))) - h).detach())


class SimSiamHead(nn.Module):
    """SimSiam's symmetric loss on one view pair: a predictor's output against the other branch's
    projection with its gradient stopped (``z.detach()``), as the forward's return."""

    def __init__(self) -> None:
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                                      nn.Flatten(), nn.Linear(8, 16))
        self.predictor = nn.Sequential(nn.Linear(16, 8), nn.ReLU(), nn.Linear(8, 16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z1, z2 = self.backbone(x), self.backbone(torch.flip(x, [3]))
        p1 = self.predictor(z1)
        return -(F.normalize(p1, dim=1) * F.normalize(z2.detach(), dim=1)).sum(1, keepdim=True)


@pytest.mark.parametrize(("module", "shape"), [(StraightThrough(), (12,)), (StraightThrough(stopped=True), (12,))])
def test_what_reaches_the_loss_only_through_detach_trains_nothing(module: StraightThrough,
                                                                  shape: tuple[int, ...]) -> None:
    net = _checked(module, shape)
    q = net.layer_names.index("q")
    assert not net.reaches_loss[q]
    assert net.layer_counts[q].macs_weight_grad == 0 and net.layer_counts[q].macs_backprop == 0
    assert [layer.kind for layer in net.layers].count("stop_gradient") == 1


def test_a_stopped_branch_of_a_shared_encoder_still_trains_the_encoder() -> None:
    """SimSiam: the backbone is used twice, once through ``.detach()``; its weights' gradient comes from the
    other use (FlopCounterMode counts the one backward pass)."""
    module = SimSiamHead()
    x = torch.randn(3, 3, 8, 8)
    net = dnnbench.from_torch(module, (3, 8, 8))
    t = totals(net)
    assert t.weights == params(module)
    forward, backward = step_flops(lambda: module(x))
    assert forward == 2 * 3 * t.macs_forward
    assert backward == 2 * 3 * (t.macs_backprop + t.macs_weight_grad)
    torchnet.build_model(net)(x).sum().backward()


class ConstantTimesBatch(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 6)
        self.register_buffer("table", torch.randn(5, 2, 6))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x) * self.table  # (N, 6) by (5, 2, 6): the table's leading axes stand before the batch


def test_a_constant_that_would_broadcast_over_the_batch_is_one_line() -> None:
    with pytest.raises(SpecError) as e:
        dnnbench.from_torch(ConstantTimesBatch(), (4,))
    assert "\n" not in str(e.value)


@settings(max_examples=25, deadline=None)
@given(st.integers(2, 5), st.lists(st.sampled_from(["fc", "tanh", "detach", "branch", "fixed"]), min_size=1,
                                   max_size=5))
def test_any_chain_of_detaches_and_fixed_products_counts_what_pytorch_computes(width: int, ops: list[str]) -> None:
    """A chain of layers, detaches, learned branches added through a detach, and products with a fixed
    matrix, in any order: forward and backward FLOPs are FlopCounterMode's (a detach at the head
    stops all of backward but what follows it)."""
    class Chain(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.first = nn.Linear(3, width)
            self.layers = nn.ModuleList(nn.Linear(width, width) for _ in ops)
            self.register_buffer("mix", torch.rand(4, 4))
            self.last = nn.Linear(width, 2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = self.first(x)
            for op, layer in zip(ops, self.layers, strict=True):
                if op == "fc":
                    h = layer(h)
                elif op == "tanh":
                    h = torch.tanh(h)
                elif op == "detach":
                    h = h.detach()
                elif op == "branch":
                    h = h + layer(h).detach()
                else:
                    h = self.mix @ h
            return self.last(h)

    module = Chain()
    net = dnnbench.from_torch(module, (4, 3))
    t = totals(net)
    x = torch.randn(2, 4, 3)
    forward, backward = step_flops(lambda: module(x))
    assert forward == 2 * 2 * t.macs_forward
    assert backward == 2 * 2 * (t.macs_backprop + t.macs_weight_grad)
    built = torchnet.build_model(net)
    assert step_flops(lambda: built(x)) == (forward, backward)


class Flips(nn.Module):
    def __init__(self, how: str) -> None:
        super().__init__()
        self.conv, self.how = nn.Conv2d(2, 4, 3), how

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.conv(x)
        if self.how == "batch":
            return torch.flipud(h)
        return h + (h.flip([2, 3]) if self.how == "both" else torch.fliplr(h))


@pytest.mark.parametrize("how", ["both", "channels"])
def test_a_flip_is_one_copy_of_the_values(how: str) -> None:
    net = _checked(Flips(how), (2, 7, 7))
    flips = [c for layer, c in zip(net.layers, net.layer_counts, strict=True) if layer.kind == "repeat"]
    assert len(flips) == 1 and flips[0].output_shape == flips[0].input_shape == (4, 5, 5)


def test_a_flip_of_the_batch_is_one_line() -> None:
    with pytest.raises(SpecError, match="flips axes \\[0\\]; dnnbench imports flips of a sample's axes") as e:
        dnnbench.from_torch(Flips("batch"), (2, 7, 7))
    assert "\n" not in str(e.value)


class Standardised(nn.Module):
    """An input standardised by buffers (``(x - mean) / std``), a learned temperature dividing the logits,
    and a Gumbel-softmax sample of a discrete latent (``hard``: its one-hot passed straight through)."""

    def __init__(self, hard: bool = False) -> None:
        super().__init__()
        self.register_buffer("mean", torch.randn(3, 1, 1))
        self.register_buffer("std", torch.rand(3, 1, 1) + 0.5)
        self.conv, self.fc, self.dec = nn.Conv2d(3, 4, 3), nn.Linear(4, 6), nn.Linear(6, 2)
        self.temperature = nn.Parameter(torch.ones(1))
        self.hard = hard

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.conv((x - self.mean) / self.std).mean((2, 3))
        return self.dec(F.gumbel_softmax(self.fc(h) / self.temperature, tau=0.5, hard=self.hard))


@pytest.mark.parametrize("hard", [False, True])
def test_division_by_constants_and_a_learned_temperature_and_a_gumbel_sample(hard: bool) -> None:
    module = Standardised(hard)
    net = dnnbench.from_torch(module, (3, 8, 8))
    t = totals(net)
    assert t.weights == params(module)
    kinds = [layer.kind for layer in net.layers]
    assert "softmax" in kinds and kinds.count("scale") == 3  # 1/std, 1/temperature, 1/tau
    x = torch.randn(2, 3, 8, 8)
    forward, backward = step_flops(lambda: module(x))
    assert forward == 2 * 2 * t.macs_forward
    assert backward == 2 * 2 * (t.macs_backprop + t.macs_weight_grad)
    torchnet.build_model(net)(x).sum().backward()
