"""Constant positions picked by indexing (``x[:, idx]`` with a list, or a tensor the forward makes or
holds; DLRM's ``Z[:, li, lj]`` of ``torch.tril_indices``): the indexed axes viewed as one, each run of
consecutive positions a slice, the runs joined; the runner's build computes exactly what the module
computes, and its FLOPs are FlopCounterMode's."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from importers.import_helpers import AfterFc, builds_what_the_module_computes
from torch import nn

import dnnbench
from dnnbench.errors import SpecError


class Pairs(nn.Module):
    """DLRM's feature interactions: the lower triangle of a (5, 5) matrix of dot products, its positions
    made in the forward from constants."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(6, 20)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = self.fc(x).view(-1, 5, 4)
        z = torch.bmm(t, t.transpose(1, 2))
        li, lj = torch.tril_indices(5, 5, offset=-1)
        return z[:, li, lj]


class Chosen(nn.Module):
    """Features chosen by positions held as a buffer."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.register_buffer("keep", torch.tensor([0, 2, 3, 6]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)[:, self.keep]


@pytest.mark.parametrize("fn,shape,runs", [
    (lambda x: x[:, [0, 2, 3]], (8,), 2),                          # a list of positions
    (lambda x: x[:, [4, 1, 1]], (8,), 3),                          # descending and repeated
    (lambda x: x[:, :, [0, 5]], (3, 6), 2),                        # on the last axis of tokens
    (lambda x: x[..., torch.tensor([[2, 3], [0, 1]])], (3, 6), 2),  # a tensor of positions, a new axis
    (lambda x: x[:, [1, 2], [0, 3]], (3, 6), 2),                   # two adjacent axes
])
def test_constant_positions_compute_what_pytorch_computes(fn: Callable[[torch.Tensor], torch.Tensor],
                                                          shape: tuple[int, ...], runs: int) -> None:
    net = builds_what_the_module_computes(AfterFc(shape[-1], fn), shape)
    assert sum(layer.kind == "slice" for layer in net.layers) in (runs, 0)
    assert (runs == 1) or any(layer.kind == "concat" for layer in net.layers)


def test_dlrm_pairs_of_tril_indices_and_positions_in_a_buffer_compute_what_pytorch_computes() -> None:
    net = builds_what_the_module_computes(Pairs(), (6,))
    assert net.shapes[-1] == (10,) and [layer.kind for layer in net.layers].count("slice") == 4
    net = builds_what_the_module_computes(Chosen(), (8,))
    assert net.shapes[-1] == (4,)


def test_positions_the_importer_does_not_take_are_one_line_errors() -> None:
    cases = [
        (AfterFc(5, lambda x: x[:, [0, 1], :, [1, 2]]), (3, 4, 5), r"changes the batch dimension"),
        (AfterFc(600, lambda x: x[:, list(range(0, 600, 2))]), (600,), r"picks 300 separate runs of positions; "
                                                                       r"dnnbench imports up to 256"),
        (AfterFc(4, lambda x: x[torch.tensor([0])]), (4,), r"indexes the batch axis with positions"),
    ]
    for module, shape, message in cases:
        with pytest.raises(SpecError, match=message) as err:
            dnnbench.from_torch(module, shape)
        assert "\n" not in str(err.value)
