"""Constant positions picked by indexing (``x[:, idx]`` with a list, or a tensor the forward makes or
holds; DLRM's ``Z[:, li, lj]`` of ``torch.tril_indices``): the indexed axes viewed as one, each run of
consecutive positions a slice, the runs joined; the runner's build computes exactly what the module
computes, and its FLOPs are FlopCounterMode's."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from importers.import_helpers import AfterFc, builds_what_the_module_computes, step_flops
from torch import nn

import dnnbench
from dnnbench.counts import totals
from dnnbench.errors import SpecError
from dnnbench.measure import torchnet


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
        (AfterFc(4, lambda x: x[torch.tensor([0])]), (4,), r"indexes the batch axis with positions"),
    ]
    for module, shape, message in cases:
        with pytest.raises(SpecError, match=message) as err:
            dnnbench.from_torch(module, shape)
        assert "\n" not in str(err.value)


class _EndOfText(nn.Module):
    """CLIP's text tower in small: token ids, a position table, a causal encoder of ``batch_first=False``
    layers between two permutes, a final norm, the end-of-text token's features picked per sample
    (``x[torch.arange(B), text.argmax(-1)]``) and projected by a learned matrix."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(100, 32)
        self.pos = nn.Parameter(torch.zeros(16, 32))
        layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0)
        self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.ln = nn.LayerNorm(32)
        self.proj = nn.Parameter(torch.randn(32, 24))

    def forward(self, text: torch.Tensor) -> torch.Tensor:
        x = (self.emb(text) + self.pos).permute(1, 0, 2)
        x = self.enc(x, mask=torch.full((16, 16), float("-inf")).triu(1)).permute(1, 0, 2)
        x = self.ln(x)
        return x[torch.arange(x.shape[0]), text.argmax(dim=-1)] @ self.proj


class _LastNonPadding(nn.Module):
    """A GRU's output at each sample's last non-padding step (``lengths - 1``, lengths counted from the ids)."""

    def __init__(self, pick: str = "step") -> None:
        super().__init__()
        self.pick = pick
        self.emb, self.rnn, self.fc = nn.Embedding(100, 16), nn.GRU(16, 16, batch_first=True), nn.Linear(16, 2)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        out, _ = self.rnn(self.emb(ids))
        lengths = (ids != 0).sum(1)
        if self.pick == "map":  # the positions pick a row of each sample's (16, 4, 4) value: not one token
            return out.view(ids.size(0), -1, 4, 4)[torch.arange(ids.size(0)), lengths - 1].flatten(1)
        return self.fc(out[torch.arange(ids.size(0)), lengths - 1])


def test_a_position_picked_per_sample_from_the_data_is_one_token() -> None:
    """The positions (computed from the ids: argmax, a count less one) are no layers; the pick is one token
    of the (S, D) sequence, whichever it is (a select_token; the runner picks the first). FLOPs equal
    FlopCounterMode's for the module picking the end-of-text token."""
    module = _EndOfText()
    net = dnnbench.from_torch(module, (16,))
    kinds = [layer.kind for layer in net.layers]
    assert kinds[-2:] == ["select_token", "fc"] and net.shapes[-1] == (24,)
    assert "compare" not in kinds and "reduce" not in kinds
    ids = torch.randint(1, 100, (2, 16))
    t = totals(net)
    forward, backward = step_flops(lambda: module(ids))
    assert forward == 2 * 2 * t.macs_forward and backward == 2 * 2 * (t.macs_backprop + t.macs_weight_grad)
    net = dnnbench.from_torch(_LastNonPadding(), (16,))
    assert [layer.kind for layer in net.layers] == ["input", "embedding", "recurrent", "select_token", "fc"]
    model = torchnet.build_model(net)
    x, y = torchnet.batch(net, 4)
    torchnet.loss_fn(net)(model(x), y).backward()
    with pytest.raises(SpecError, match=r"picks \[4, 4\] per sample of a \[16, 4, 4\] value; dnnbench imports "
                                        r"such a pick of one token of an \(S, D\) sequence") as err:
        dnnbench.from_torch(_LastNonPadding("map"), (16,))
    assert "\n" not in str(err.value)
