"""im2col and col2im: ``F.unfold``/``nn.Unfold`` and ``F.fold``/``nn.Fold`` import as ``unfold`` and ``fold``
layers, with PyTorch's shapes and FLOPs (a convolution written as a matrix product, the teaching example),
and the runner's layers compute what PyTorch computes."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

import dnnbench
from dnnbench.errors import SpecError
from dnnbench.measure import torchnet
from dnnbench.specs import Network
from dnnbench.specs.layers import Fold, Unfold

from .import_helpers import imports_like_pytorch


class ConvAsMatmul(nn.Module):
    """A 3×3 convolution as im2col and a matrix product, as it is taught (and as a CPU library runs it)."""

    def __init__(self, c: int = 3, out: int = 8, stride: int = 1, dilation: int = 1) -> None:
        super().__init__()
        self.out, self.stride, self.dilation = out, stride, dilation
        self.proj = nn.Linear(c * 9, out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = (x.shape[2] + 2 * self.dilation - 2 * self.dilation - 1) // self.stride + 1
        w = (x.shape[3] + 2 * self.dilation - 2 * self.dilation - 1) // self.stride + 1
        cols = F.unfold(x, 3, dilation=self.dilation, padding=self.dilation, stride=self.stride)
        y = self.proj(cols.transpose(1, 2)).transpose(1, 2)
        return torch.relu(y.reshape(x.shape[0], self.out, h, w))


class PatchRoundTrip(nn.Module):
    """Patches cut by nn.Unfold, weighted, and put back by nn.Fold (overlapping windows add up)."""

    def __init__(self, size: int, window: int, stride: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 1)
        self.unfold = nn.Unfold(window, stride=stride)
        self.fold = nn.Fold(size, window, stride=stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fold(self.unfold(self.conv(x)) * 0.5)


@pytest.mark.parametrize(("stride", "dilation"), [(1, 1), (2, 1), (1, 2)])
def test_convolution_as_unfold_and_a_product(stride: int, dilation: int) -> None:
    net = imports_like_pytorch(ConvAsMatmul(stride=stride, dilation=dilation), (3, 10, 12),
                               torch.randn(2, 3, 10, 12))
    (unfold,) = [layer for layer in net.layers if layer.kind == "unfold"]
    assert (unfold.window, unfold.stride, unfold.padding, unfold.dilation) == (3, stride, dilation, dilation)
    # The product's MACs are the convolution's.
    same = dnnbench.from_torch(nn.Conv2d(3, 8, 3, stride, dilation, dilation), (3, 10, 12))
    fc = next(c for layer, c in zip(net.layers, net.layer_counts, strict=True) if layer.kind == "fc")
    assert fc.macs_forward == same.layer_counts[1].macs_forward


@pytest.mark.parametrize(("size", "window", "stride"), [(8, 2, 2), (9, 3, 2), (6, 3, 1)])
def test_patches_folded_back(size: int, window: int, stride: int) -> None:
    net = imports_like_pytorch(PatchRoundTrip(size, window, stride), (2, size, size), torch.randn(2, 2, size, size))
    assert [layer.kind for layer in net.layers][-3:] == ["unfold", "scale", "fold"]
    assert net.shapes[-1] == (4, size, size)


@settings(max_examples=25, deadline=None)
@given(c=st.integers(1, 3), h=st.integers(3, 9), w=st.integers(3, 9), k=st.integers(1, 3), s=st.integers(1, 3),
       p=st.integers(0, 1), d=st.integers(1, 2))
def test_the_runner_s_layers_are_pytorch_s(c: int, h: int, w: int, k: int, s: int, p: int, d: int) -> None:
    """Shapes, values and counts of unfold and fold over generated windows: what F.unfold and F.fold give."""
    if d * (k - 1) + 1 > min(h, w) + 2 * p:
        return
    x = torch.randn(2, c, h, w)
    unfold = Unfold(window=k, stride=s, padding=p, dilation=d)
    cols = F.unfold(x, k, d, p, s)
    assert unfold.output_shape((c, h, w), "u") == tuple(cols.shape[1:])
    assert torch.equal(torchnet._unfold(unfold, (c, h, w))(x), cols)
    fold = Fold(window=k, stride=s, padding=p, dilation=d, size=[h, w])
    assert fold.output_shape(tuple(cols.shape[1:]), "f") == (c, h, w)
    assert torch.equal(torchnet._fold(fold, tuple(cols.shape[1:]))(cols), F.fold(cols, (h, w), k, d, p, s))
    counts = unfold.counts((c, h, w), tuple(cols.shape[1:]), first=False)
    assert counts.elem_ops_forward == counts.elem_ops_backprop == cols[0].numel()


def test_a_fold_of_the_wrong_columns_is_one_line() -> None:
    with pytest.raises(SpecError) as err:
        Network.build({"name": "f", "layers": [{"kind": "input", "shape": [10, 16]},
                                               {"kind": "fold", "window": 2, "size": 8}]})
    text = str(err.value)
    assert "\n" not in text and "layers[1]" in text and "(C·4, 49)" in text
    with pytest.raises(SpecError, match="stride"):
        Network.build({"name": "u", "layers": [{"kind": "input", "shape": [1, 5, 5]},
                                               {"kind": "unfold", "window": 2, "stride": 0}]})
