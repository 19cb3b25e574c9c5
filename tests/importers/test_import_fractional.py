"""Fractional max pooling (``nn.FractionalMaxPool2d``/``3d``, ``F.fractional_max_pool2d``) imports as the
adaptive max pooling of the same output size: a plain max pooling where the output divides the input."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn

import dnnbench
from dnnbench.errors import SpecError

from .import_helpers import imports_like_pytorch


class Fractional(nn.Module):
    def __init__(self, functional: bool) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.halve = nn.FractionalMaxPool2d(2, output_ratio=0.5)
        self.five = nn.FractionalMaxPool2d(3, output_size=5)
        self.functional = functional
        self.head = nn.Linear(8 * 5 * 5, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.conv(x))
        y = F.fractional_max_pool2d(y, 2, output_ratio=(0.5, 0.5)) if self.functional else self.halve(y)
        return self.head(self.five(y).flatten(1))


@pytest.mark.parametrize("functional", [False, True])
def test_fractional_max_pooling_imports_as_adaptive_max_pooling(functional: bool) -> None:
    net = imports_like_pytorch(Fractional(functional), (3, 16, 16), torch.randn(2, 3, 16, 16))
    pools = [(layer.kind, layer.mode) for layer in net.layers if "pool" in layer.kind]
    assert pools == [("pool", "max"), ("adaptive_pool", "max")]  # 16 → 8 divides: a plain 2x2 pooling
    assert [net.shapes[i] for i, layer in enumerate(net.layers) if "pool" in layer.kind] == [(8, 8, 8), (8, 5, 5)]


def test_three_d_fractional_max_pooling_imports() -> None:
    net = dnnbench.from_torch(nn.Sequential(nn.FractionalMaxPool3d(2, output_ratio=0.5), nn.Flatten(),
                                            nn.Linear(3 * 4 * 4 * 4, 2)), (3, 8, 8, 8))
    assert [layer.kind for layer in net.layers][:2] == ["input", "pool3d"] and net.shapes[1] == (3, 4, 4, 4)


def test_fractional_max_pooling_with_its_positions_is_a_one_line_error() -> None:
    module = nn.Sequential(nn.FractionalMaxPool2d(2, output_ratio=0.5, return_indices=True))
    with pytest.raises(SpecError, match=r"return_indices=True\); dnnbench imports fractional max pooling's values") \
            as err:
        dnnbench.from_torch(module, (3, 16, 16))
    assert "\n" not in str(err.value)
