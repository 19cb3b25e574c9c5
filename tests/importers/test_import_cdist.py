"""``torch.cdist`` imports as ATen's product form: ``|a|² + |c|² - 2 a·c`` and a square root.

FlopCounterMode counts no forward FLOPs for ``cdist`` (ATen's ``_euclidean_dist`` runs its product below
the dispatcher's Python mode) but counts its backward, two products, as formulas of ``mm``/``bmm``. The
forward product is therefore checked against the formula and against FlopCounterMode on the runner's
build, which computes it as an fc layer or a ``bmm``."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

import dnnbench
from dnnbench.counts import totals
from dnnbench.errors import SpecError
from dnnbench.measure import torchnet

from .import_helpers import params, step_flops


class PrototypeHead(nn.Module):
    """Features, then minus the distance to each of R learned centres (a prototype or RBF classifier)."""

    def __init__(self, d_in: int = 12, width: int = 32, centres: int = 10, tokens: bool = False) -> None:
        super().__init__()
        self.features = nn.Linear(d_in, width)
        self.centres = nn.Parameter(torch.randn(centres, width))
        self.tokens = tokens

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        d = -torch.cdist(torch.relu(self.features(x)), self.centres)
        return d.mean(1) if self.tokens else d


class PointDistances(nn.Module):
    """A point cloud's embedded points against each other (a k-nearest-neighbour graph's distances) and
    against a second embedding of fewer points, then a pool over the points."""

    def __init__(self, width: int = 16, other: int = 0) -> None:
        super().__init__()
        self.embed = nn.Linear(3, width)
        self.other = nn.Linear(3, width) if other else None
        self.keep = other

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x)
        c = self.other(x[:, :self.keep]) if self.other is not None else h
        return torch.cdist(h, c).mean(-1)


def _cdist_product(net: dnnbench.Network) -> int:
    return sum(c.macs_forward for name, c in zip(net.layer_names, net.layer_counts, strict=True)
               if name.endswith("_product") or name.startswith("cdist_product"))


@pytest.mark.parametrize(("module", "shape", "rows", "batch"), [
    (PrototypeHead(), (12,), 1, 32), (PrototypeHead(tokens=True), (30, 12), 30, 4),
])
def test_distances_to_learned_centres_are_an_fc_product(module: PrototypeHead, shape: tuple[int, ...],
                                                        rows: int, batch: int) -> None:
    """(ATen takes the product form beyond 25 rows, where FlopCounterMode sees its backward: a batch of 32
    vectors, or 30 tokens per sample.)"""
    net = dnnbench.from_torch(module, shape)
    t = totals(net)
    assert t.weights == params(module)  # the centres are learned weights, pushed and pulled like any
    r, m = module.centres.shape
    assert _cdist_product(net) == rows * r * m
    x = torch.randn(batch, *shape)
    forward, backward = step_flops(lambda: module(x))
    features = rows * m * shape[-1]
    # FlopCounterMode sees the features' product only in the forward (cdist's is below it) ...
    assert forward == 2 * batch * features
    # ... and every product in the backward: the centres' and the features' gradients through cdist, and
    # the features' weight gradient (the first layer has no input gradient).
    assert backward == 2 * batch * (2 * rows * r * m + features)
    built = torchnet.build_model(net)
    assert params(built) == t.weights
    fwd_built, _ = step_flops(lambda: built(x))
    assert fwd_built == 2 * batch * t.macs_forward
    assert totals(dnnbench.from_torch(built, shape)) == t


@pytest.mark.parametrize("other", [0, 27])
def test_distances_between_layer_outputs_are_a_batched_product(other: int) -> None:
    module, points = PointDistances(other=other), 40
    net = dnnbench.from_torch(module, (points, 3))
    t = totals(net)
    assert t.weights == params(module)
    cols = other or points
    assert _cdist_product(net) == points * cols * 16
    x = torch.randn(2, points, 3)
    forward, backward = step_flops(lambda: module(x))
    embeds = points * 16 * 3 + cols * 16 * 3 * (other > 0)
    assert forward == 2 * 2 * embeds
    assert backward == 2 * 2 * (2 * points * cols * 16 + embeds)
    built = torchnet.build_model(net)
    out = built(x)
    assert tuple(out.shape) == (2, points)
    out.sum().backward()  # the runner trains it
    assert totals(dnnbench.from_torch(built, (points, 3))) == t


class Between(nn.Module):
    def __init__(self, p: float = 2.0, across: bool = False) -> None:
        super().__init__()
        self.fc, self.p, self.across = nn.Linear(6, 8), p, across
        self.centres = nn.Parameter(torch.randn(2, 5, 8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc(x)
        if self.across:
            return torch.cdist(h, h)
        if self.p != 2.0:
            return torch.cdist(h, h, p=self.p)
        return torch.cdist(h, self.centres)


@pytest.mark.parametrize(("module", "shape", "says"), [
    (Between(across=True), (6,), "distances between the samples of a batch"),
    (Between(p=1.0), (9, 6), "1.0-norm distance"),
    (Between(), (6,), "changes the batch dimension"),
])
def test_distances_dnnbench_does_not_import_are_one_line(module: nn.Module, shape: tuple[int, ...],
                                                         says: str) -> None:
    with pytest.raises(SpecError) as e:
        dnnbench.from_torch(module, shape)
    text = str(e.value)
    assert "\n" not in text and "cdist" in text and says in text


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 40), st.integers(1, 30), st.integers(1, 12), st.booleans())
def test_any_row_counts_price_the_product_and_train(rows: int, centres: int, width: int, learned: bool) -> None:
    """Whatever the rows, centres and width, the product is rows·centres·width multiply-adds, the weights
    are the module's, and the runner's build of the import trains."""
    k = centres if learned else min(centres, rows)  # the other operand's rows are taken from the input's

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(3, width)
            self.centres = nn.Parameter(torch.randn(k, width)) if learned else None
            self.other = None if learned else nn.Linear(3, width)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = self.fc(x)
            c = self.centres if self.centres is not None else self.other(x[:, :k])
            return torch.cdist(h, c)

    module = Net()
    net = dnnbench.from_torch(module, (rows, 3))
    assert totals(net).weights == params(module)
    assert _cdist_product(net) == rows * k * width
    built = torchnet.build_model(net)
    built(torch.randn(2, rows, 3)).sum().backward()
