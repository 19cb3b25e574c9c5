"""``torch.topk``'s values import as a ``topk`` layer: k-max pooling over a sentence's positions (Kalchbrenner
et al. 2014's dynamic CNN, here with a fixed k), with PyTorch's weights and FLOPs, and the runner's layer
computes what PyTorch computes."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import dnnbench
from dnnbench.errors import SpecError
from dnnbench.measure import torchnet
from dnnbench.specs.layers import TopK

from .import_helpers import imports_like_pytorch


class KMaxText(nn.Module):
    def __init__(self, k: int = 3, attribute: bool = False, largest: bool = True) -> None:
        super().__init__()
        self.embed = nn.Embedding(50, 8)
        self.conv = nn.Conv1d(8, 12, 3, padding=1)
        self.head = nn.Linear(12 * k, 4)
        self.k, self.attribute, self.largest = k, attribute, largest

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(self.conv(self.embed(tokens).transpose(1, 2)))
        if self.attribute:
            top = h.topk(self.k, dim=-1, largest=self.largest).values
        else:
            top, _ = torch.topk(h, self.k, 2, self.largest)
        return self.head(top.flatten(1))


@pytest.mark.parametrize(("k", "attribute", "largest"), [(3, False, True), (2, True, True), (4, True, False)])
def test_k_max_pooling_imports_as_topk(k: int, attribute: bool, largest: bool) -> None:
    net = imports_like_pytorch(KMaxText(k, attribute, largest), (20,), torch.randint(0, 50, (2, 20)))
    (layer,) = [layer for layer in net.layers if layer.kind == "topk"]
    assert (layer.k, layer.axis, layer.largest) == (k, 1, largest)
    c = net.layer_counts[net.layers.index(layer)]
    assert c.output_shape == (12, k) and c.elem_ops_forward == c.elem_ops_backprop == 12 * 20


def test_the_runner_takes_the_top_values_as_pytorch_does() -> None:
    x = torch.randn(3, 5, 7)
    for axis, largest in ((0, True), (-1, False), (1, True)):
        built = torchnet._topk(TopK(k=2, axis=axis, largest=largest), (5, 7))
        assert torch.equal(built(x), torch.topk(x, 2, axis % 2 + 1, largest).values)


def test_topk_positions_are_its_search_and_too_large_k_is_one_line() -> None:
    class Positions(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            values, index = torch.relu(x).topk(2)
            return values * index

    # positions used as values: the top k's own output, through a stop_gradient (they take no gradient)
    kinds = [layer.kind for layer in dnnbench.from_torch(Positions(), (6,)).layers]
    assert kinds[-3:] == ["topk", "stop_gradient", "mul"]
    with pytest.raises(SpecError, match="k: 9") as err:
        dnnbench.Network.build({"name": "t", "layers": [{"kind": "input", "shape": [4, 6]},
                                                        {"kind": "topk", "k": 9}]})
    assert "\n" not in str(err.value)
