"""Sequences first (``batch_first=False`` layers, the batch on axis 1; a forward that takes (S, N)
inputs with ``batch_axis=1``): imported as one sample's layers, the same as the batch-first twin's;
the runner's build computes what the module computes; FLOPs are FlopCounterMode's; what works along
the batch, or what the importer cannot count anew, is a one-line error."""

from __future__ import annotations

import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from importers.import_helpers import imports_like_pytorch
from importers.seq_first_nets import AttentionPool, FinalStates, LastStep, TokensEncoder, WordLanguageModel
from torch import nn

import dnnbench
from dnnbench.cli import main
from dnnbench.errors import SpecError
from dnnbench.measure import torchnet
from dnnbench.specs import Network
from dnnbench.specs.io import load


def test_permuted_encoder_imports_as_its_batch_first_twin() -> None:
    net = imports_like_pytorch(TokensEncoder(seq_first=True), (6, 8), torch.randn(2, 6, 8))
    twin = dnnbench.from_torch(TokensEncoder(seq_first=False), (6, 8))
    assert net.layers == twin.layers and net.shapes == twin.shapes
    assert not any(layer.kind == "permute" for layer in net.layers)  # the batch's moves are no layers


def test_a_forward_that_takes_sequences_first_imports_with_batch_axis_one() -> None:
    net = dnnbench.from_torch(WordLanguageModel(seq_first=True), (7,), batch_axis=1)
    twin = dnnbench.from_torch(WordLanguageModel(seq_first=False), (7,))
    assert net.layers == twin.layers and net.shapes[-1] == (7, 50)
    attention = [layer for layer in net.layers if layer.kind == "attention"]
    assert len(attention) == 2 and all(layer.causal for layer in attention)  # the mask of constants
    with pytest.raises(SpecError, match=r"has batch_first=False, so it takes the batch on axis 1, but its input "
                                        r"holds the batch on axis 0") as err:
        dnnbench.from_torch(WordLanguageModel(seq_first=True), (7,))  # (1, 7) ids: the batch read as tokens
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("module", [LastStep(), FinalStates(), AttentionPool()],
                         ids=["lstm-last-step", "lstm-final-states", "attention-mean"])
def test_runner_builds_what_the_seq_first_module_computes(module: nn.Module) -> None:
    shape = (6, 16) if isinstance(module, AttentionPool) else (5, 8)
    if isinstance(module, FinalStates):
        assert dnnbench.from_torch(module, shape).layers == dnnbench.from_torch(FinalStates(False), shape).layers
    if not isinstance(module, AttentionPool):  # FlopCounterMode does not count an LSTM's products
        net = dnnbench.from_torch(module, shape)
    else:
        net = imports_like_pytorch(module, shape, torch.randn(2, *shape))
    built = torchnet.build_model(net)
    for mine, theirs in zip(built.parameters(), module.parameters(), strict=True):
        mine.data.copy_(theirs.data)
    x = torch.randn(3, *shape)
    torch.testing.assert_close(built(x), module(x))


class _After(nn.Module):
    def __init__(self, fn) -> None:  # type: ignore[no-untyped-def]
        super().__init__()
        self.fc, self.fn = nn.Linear(8, 8), fn

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fn(self.fc(x))


@pytest.mark.parametrize("fn,message", [
    (lambda y: nn.functional.pad(y.transpose(0, 1), (1, 1)), r"works on a value whose batch is axis 1 "
                                                             r"\(batch_first=False layout\); dnnbench imports "
                                                             r"transposes"),
    (lambda y: y.transpose(0, 1).reshape(5, -1), r"views a value whose batch is axis 1 as \[5, 8\], merging the "
                                                 r"batch with one sample's axes"),
    (lambda y: y.transpose(0, 1).squeeze(1), r"squeezes the batch axis \(axis 1 of this value\)"),
    (lambda y: y.transpose(0, 1).mean(dim=1), r"works along the batch axis \(axis 1 of this value\)"),
    (lambda y: y.transpose(0, 1)[:, 0], r"indexes the batch axis \(axis 1 of this value\)"),
    (lambda y: y.transpose(0, 1) + y, r"combines values whose batch is on different axes \(\[0, 1\]\)"),
    (lambda y: y.transpose(0, 1).chunk(2, dim=-1)[0], r"splits a value whose batch is axis 1"),
    (lambda y: nn.functional.linear(y.permute(1, 2, 0), torch.ones(3, 1)), r"works along the last axis, which "
                                                                             r"holds the batch here"),
])
def test_what_works_along_a_moved_batch_is_a_one_line_error(fn, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SpecError, match=message) as err:
        dnnbench.from_torch(_After(fn), (5, 8))
    assert "\n" not in str(err.value)


def test_batch_axis_out_of_range_is_a_one_line_error() -> None:
    for bad in (3, -1, True, 1.0):
        with pytest.raises(SpecError, match=r"^batch_axis: .* expected a whole number from 0 to 2") as err:
            dnnbench.from_torch(LastStep(), (5, 8), batch_axis=bad)  # type: ignore[arg-type]
        assert "\n" not in str(err.value)


def test_cli_batch_axis(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "lm.dnn.json"
    assert main(["import", "importers.seq_first_nets:WordLanguageModel", "-o", str(out), "--input-shape", "7",
                 "--batch-axis", "1"]) == 0
    assert load(Network, out).layers == dnnbench.from_torch(WordLanguageModel(seq_first=False), (7,)).layers
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        main(["import", "importers.seq_first_nets:WordLanguageModel", "-o", str(out), "--input-shape", "7",
              "--batch-axis", "2"])
    assert stop.value.code == 2 and "--batch-axis: invalid choice: 2" in capsys.readouterr().err


class _Fn(nn.Module):
    def __init__(self, fn) -> None:  # type: ignore[no-untyped-def]
        super().__init__()
        self.fn = fn

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fn(x)


@settings(max_examples=60, deadline=None)
@given(order=st.permutations(range(4)), op=st.sampled_from(["none", "mean", "sum_keepdim", "index", "slice", "relu",
                                                            "transpose", "unsqueeze", "merge"]),
       axis=st.integers(0, 3), other=st.integers(0, 3))
def test_moved_batch_property_runner_computes_what_the_module_computes(order: list[int], op: str, axis: int,
                                                                       other: int) -> None:
    """Any permute of a (N, 3, 4, 5) value, then an operation along another axis (a mean, a sum that keeps
    it, an index, a slice, a transpose, a new axis, two axes viewed as one) or none: the import either
    computes what the module computes, the batch moved first, or is a one-line error; an operation along
    the batch (a view that merges it included) is always an error."""
    batch = order.index(0)  # where the permute puts the batch
    assume(not (op == "merge" and batch == 0 and axis == 0))  # the batch folded into an axis: not this test

    def fn(x: torch.Tensor) -> torch.Tensor:
        y = x.permute(*order)
        if op == "mean":
            return y.mean(dim=axis)
        if op == "sum_keepdim":
            return y.sum(dim=axis, keepdim=True)
        if op == "index":
            return y[(slice(None),) * axis + (0,)]
        if op == "slice":
            return y[(slice(None),) * axis + (slice(0, 1),)]
        if op == "relu":
            return torch.relu(y)
        if op == "transpose":
            return y.transpose(axis, other)
        if op == "unsqueeze":
            return y.unsqueeze(axis)
        if op == "merge":  # axis and the next one viewed as one (the last with the first when axis is 3)
            a = min(axis, 2)
            return y.reshape(*y.shape[:a], y.shape[a] * y.shape[a + 1], *y.shape[a + 2:])
        return y

    along_batch = (op in ("mean", "sum_keepdim", "index", "slice") and axis == batch
                   or op == "merge" and batch in (min(axis, 2), min(axis, 2) + 1))
    try:
        net = dnnbench.from_torch(_Fn(fn), (3, 4, 5))
    except SpecError as err:
        assert "\n" not in str(err)
        if along_batch and batch:  # (the batch first: the importer's own messages, tested elsewhere)
            assert "batch" in str(err)
        return
    assert not along_batch
    out = fn(torch.zeros(1, 3, 4, 5, device="meta"))
    ones = [k for k, size in enumerate(out.shape) if size == 1]
    x = torch.randn(2, 3, 4, 5)
    want = fn(x)
    out_batch = next(k for k, (one, two) in enumerate(zip(out.shape, want.shape, strict=True)) if one != two)
    assert ones  # the batch's axis is one of the size-1 axes at batch 1
    torch.testing.assert_close(torchnet.build_model(net)(x), want.movedim(out_batch, 0))
