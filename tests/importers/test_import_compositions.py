"""Operations PyTorch runs as one kernel that the importer writes as the layers they are made of:
``torch.lerp``, ``torch.addcmul`` of three layer outputs, ``torch.baddbmm``, ``torch.diff``,
``index_select`` of constant positions, the values of ``torch.sort`` and ``torch.tril``/``triu`` of
data (docs/importing.md)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn

import dnnbench
from dnnbench.counts import totals
from dnnbench.errors import SpecError

from .import_helpers import imports_like_pytorch


class Around(nn.Module):
    """``body`` between a convolution (so every operand needs its gradient) and a linear head."""

    def __init__(self, body: Callable[[Any, torch.Tensor], torch.Tensor]) -> None:
        super().__init__()
        self.body = body
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.head = nn.LazyLinear(5)
        self.register_buffer("idx", torch.tensor([0, 2, 3, 4, 9, 1]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(self, self.conv(x)).flatten(1))


def _imported(body: Callable[[Any, torch.Tensor], torch.Tensor]) -> dnnbench.Network:
    module = Around(body)
    module(torch.zeros(1, 3, 12, 10))  # the lazy head takes its width
    return imports_like_pytorch(module, (3, 12, 10), torch.randn(2, 3, 12, 10))


def _middle(net: dnnbench.Network) -> list[tuple[str, tuple[int, ...]]]:
    """The layers between the convolution and the head's flatten, with their shapes."""
    return [(layer.kind, shape) for layer, shape in zip(net.layers[2:-2], net.shapes[2:-2], strict=True)]


def _elementwise(net: dnnbench.Network) -> tuple[int, int]:
    t = totals(net)
    return t.elem_ops_forward, t.elem_ops_backprop


BODIES: dict[str, Callable[[Any, torch.Tensor], torch.Tensor]] = {
    "lerp by a number": lambda s, x: torch.lerp(x, torch.relu(x), 0.3),
    "lerp by a tensor": lambda s, x: x.lerp(torch.relu(x), torch.sigmoid(x)),
    "addcmul": lambda s, x: torch.addcmul(x, x, x.mean(1, keepdim=True), value=0.5),
    "baddbmm": lambda s, x: torch.baddbmm(x[:, 0], x[:, 1], x[:, 2][:, :10], beta=0.5, alpha=2.0),
    "diff": lambda s, x: torch.diff(x, n=2, dim=3),
    "index_select": lambda s, x: x.index_select(2, s.idx),
    "sort": lambda s, x: torch.sort(x, dim=2, descending=True)[0],
    "tril": lambda s, x: torch.tril(x, diagonal=-1),
    "triu": lambda s, x: x.triu(2),
}


@pytest.mark.parametrize("name", list(BODIES))
def test_each_imports_with_pytorchs_weights_flops_and_shapes(name: str) -> None:
    """imports_like_pytorch: weights, forward and backward FLOPs against FlopCounterMode (baddbmm's
    product included), the runner's build and its import back."""
    net = _imported(BODIES[name])
    body = Around(BODIES[name])
    expected = tuple(body.body(body, torch.zeros(1, 4, 12, 10)).shape[1:])
    assert net.shapes[-3] == expected


def test_lerp_is_a_gap_a_step_and_an_add() -> None:
    by_number = _middle(_imported(BODIES["lerp by a number"]))
    assert [k for k, _ in by_number] == ["activation", "add", "scale", "add"]
    by_tensor = _middle(_imported(BODIES["lerp by a tensor"]))
    assert [k for k, _ in by_tensor] == ["activation", "activation", "add", "mul", "add"]


def test_addcmul_of_outputs_broadcasts_its_product() -> None:
    layers = _middle(_imported(BODIES["addcmul"]))
    assert layers == [("reduce", (1, 12, 10)), ("mul", (4, 12, 10)), ("scale", (4, 12, 10)), ("add", (4, 12, 10))]


def test_baddbmm_scales_both_terms_and_beta_zero_drops_the_tensor() -> None:
    kinds = [k for k, _ in _middle(_imported(BODIES["baddbmm"]))]
    assert kinds[-4:] == ["matmul", "scale", "scale", "add"]
    dropped = _middle(_imported(lambda s, x: torch.baddbmm(x[:, 0], x[:, 1], x[:, 2][:, :10], beta=0)))
    assert [k for k, _ in dropped][-1] == "matmul"


def test_diff_takes_two_slices_and_their_difference_each_time() -> None:
    net = _imported(BODIES["diff"])
    layers = _middle(net)
    assert layers == [("slice", (4, 12, 9)), ("slice", (4, 12, 9)), ("add", (4, 12, 9)),
                      ("slice", (4, 12, 8)), ("slice", (4, 12, 8)), ("add", (4, 12, 8))]


def test_index_select_takes_runs_of_positions_and_sort_is_a_topk_of_every_value() -> None:
    selected = _middle(_imported(BODIES["index_select"]))
    # positions 0, 2-4, 9, 1: four runs, joined
    assert [k for k, _ in selected] == ["slice"] * 4 + ["concat"] and selected[-1][1] == (4, 6, 10)
    sorted_net = _imported(BODIES["sort"])
    (layer,) = [layer for layer in sorted_net.layers if layer.kind == "topk"]
    assert (layer.k, layer.axis, layer.largest) == (12, 1, True)
    ascending = _imported(lambda s, x: x.sort(-1).values)
    (layer,) = [layer for layer in ascending.layers if layer.kind == "topk"]
    assert (layer.k, layer.axis, layer.largest) == (10, 2, False)


def test_a_triangle_of_each_samples_matrices_is_a_constant_factor() -> None:
    """tril and triu zero what lies outside the triangle: one op per value each way, as masked_fill by a
    constant mask."""
    for name in ("tril", "triu"):
        net = _imported(BODIES[name])
        assert _middle(net) == [("scale", (4, 12, 10))] and not net.layers[2].learned
        n = 4 * 12 * 10
        assert net.layer_counts[2].elem_ops_forward == net.layer_counts[2].elem_ops_backprop == n


@pytest.mark.parametrize(("body", "message"), [
    (lambda s, x: torch.tril(x.flatten(1)), "whose last two axes include the batch"),
    (lambda s, x: torch.diff(x, dim=3, prepend=x[..., :1]), "takes 2 data tensors"),
    (lambda s, x: torch.diff(x, dim=3, prepend=torch.zeros(1, 4, 12, 1)), "takes differences with prepend or"),
    (lambda s, x: torch.sort(x, dim=0)[0], "sorts along the batch axis"),
    (lambda s, x: torch.lerp(x, torch.ones_like(x), 0.5), "interpolates between tensors that are not two layer"),
])
def test_what_does_not_import_is_a_one_line_error(body: Callable[[Any, torch.Tensor], torch.Tensor],
                                                  message: str) -> None:
    module = Around(body)
    module(torch.zeros(1, 3, 12, 10))
    with pytest.raises(SpecError) as err:
        dnnbench.from_torch(module, (3, 12, 10))
    assert "\n" not in str(err.value) and message in str(err.value)
