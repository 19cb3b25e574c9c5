"""Gathers by the positions a top k (or a sort, or an arg-max) chose: token pruning.

``x.gather(1, idx.unsqueeze(-1).expand(-1, -1, D))`` of ``idx = scores.topk(k, 1).indices`` keeps k of a
sample's S tokens. Which ones depends on the data, what it costs does not: it imports as a ``slice`` of k
positions. Positions are never differentiated, so a scorer used only to choose them is computed forward and
never trained; it is no layer (its weights get no gradient and are not pushed)."""

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

from .import_helpers import counted_like_pytorch, params, step_flops, structure


class Pruned(nn.Module):
    """Tokens embedded, a learned score per token, the k best kept by one of several forms, a block, a
    mean over the kept tokens and a head. ``form``: how the kept tokens are taken; ``first``: keep the
    first k instead (the twin whose counts the pruned network's must equal)."""

    def __init__(self, d: int = 16, k: int = 5, form: str = "gather", first: bool = False,
                 weigh: bool = False) -> None:
        super().__init__()
        self.embed, self.score = nn.Linear(8, d), nn.Linear(d, 1)
        self.block, self.head = nn.Linear(d, d), nn.Linear(d, 3)
        self.k, self.form, self.first, self.weigh = k, form, first, weigh

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.embed(x))
        if self.first:
            kept = h[:, :self.k]
        else:
            s = self.score(h).squeeze(-1)
            if self.form == "gather":
                idx = s.topk(self.k, dim=1).indices
                kept = h.gather(1, idx.unsqueeze(-1).expand(-1, -1, h.shape[-1]))
            elif self.form == "function":
                _, idx = torch.topk(s, self.k, 1)
                kept = torch.gather(h, 1, idx[..., None].expand(-1, -1, h.size(2)))
            elif self.form == "take":
                idx = s.argsort(dim=1, descending=True)[:, :self.k]
                kept = torch.take_along_dim(h, idx.unsqueeze(-1), dim=1)
            elif self.form == "index":  # advanced indexing: a column of sample numbers beside the positions
                idx = s.topk(self.k, dim=1).indices
                kept = h[torch.arange(h.shape[0], device=h.device)[:, None], idx]
            else:
                raise AssertionError(self.form)
            if self.weigh:  # the kept tokens' scores weigh them: the scorer is trained through them
                kept = kept * torch.sigmoid(s.gather(1, idx)).unsqueeze(-1)
        return self.head(torch.relu(self.block(kept)).mean(1))


@pytest.mark.parametrize("form", ["gather", "function", "take", "index"])
def test_tokens_kept_by_a_top_k_import_as_the_first_k(form: str) -> None:
    module, twin = Pruned(form=form), Pruned(first=True)
    net = dnnbench.from_torch(module, (12, 8))
    assert structure(net) == structure(dnnbench.from_torch(twin, (12, 8)))
    t = totals(net)
    assert t.weights == params(module) - params(module.score)  # the scorer gets no gradient
    x = torch.randn(4, 12, 8)
    forward, backward = step_flops(lambda: module(x))
    scorer = 12 * 16  # the scorer's forward, which the import leaves out
    assert forward == 2 * 4 * (t.macs_forward + scorer)
    assert backward == step_flops(lambda: twin(x))[1]
    built = torchnet.build_model(net)
    built(x).sum().backward()


def test_a_scorer_that_also_weighs_the_kept_tokens_is_a_layer() -> None:
    module = Pruned(weigh=True)
    net = dnnbench.from_torch(module, (12, 8))
    t = totals(net)
    assert t.weights == params(module)
    x = torch.randn(4, 12, 8)
    forward, backward = step_flops(lambda: module(x))
    assert forward == 2 * 4 * t.macs_forward
    kinds = [layer.kind for layer in net.layers]
    assert kinds.count("slice") == 2  # the kept tokens and their scores
    torchnet.build_model(net)(x).sum().backward()


class Wrong(nn.Module):
    def __init__(self, how: str) -> None:
        super().__init__()
        self.fc, self.how = nn.Linear(8, 6), how

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc(x)
        idx = h.sum(-1).topk(3, dim=1).indices
        if self.how == "narrow":  # the index not expanded over the features: a (k, 1) gather
            return h.gather(1, idx.unsqueeze(-1))
        return h.gather(0, idx.unsqueeze(-1).expand(-1, -1, 6))  # along the batch


@pytest.mark.parametrize(("how", "says"), [("narrow", "gathers [3, 1] from [10, 6]"),
                                           ("batch", "which is not one sample's")])
def test_gathers_that_do_not_keep_whole_positions_are_one_line(how: str, says: str) -> None:
    with pytest.raises(SpecError) as e:
        dnnbench.from_torch(Wrong(how), (10, 8))
    text = str(e.value)
    assert "\n" not in text and says in text and "gather" in text


@settings(max_examples=25, deadline=None)
@given(st.integers(2, 9), st.data(), st.integers(1, 7), st.sampled_from([1, 2]), st.sampled_from(["gather", "take"]))
def test_any_kept_count_and_axis_prices_a_copy_of_the_kept_positions(s: int, data: st.DataObject, d: int,
                                                                      axis: int, form: str) -> None:
    """Tokens (axis 1) or features (axis 2) kept by a top k of a (S, D) value's sums: a slice of k along
    that axis, whose backward FLOPs and forward FLOPs (but the chooser's) are what PyTorch counts."""
    k = data.draw(st.integers(1, s if axis == 1 else d))

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc, self.head = nn.Linear(4, d), nn.Linear(d if axis == 1 else k, 2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = self.fc(x)
            idx = h.detach().sum(3 - axis).topk(k, dim=1).indices
            idx = idx.unsqueeze(-1).expand(-1, -1, d) if axis == 1 else idx.unsqueeze(1).expand(-1, s, -1)
            kept = h.gather(axis, idx) if form == "gather" else torch.take_along_dim(h, idx, axis)
            return self.head(kept).mean(1)

    module = Net()
    net = dnnbench.from_torch(module, (s, 4))
    sliced = [layer for layer in net.layers if layer.kind == "slice"]
    assert [(layer.axis, layer.start, layer.stop) for layer in sliced] == [(axis - 1, 0, k)]
    t = totals(net)
    assert t.weights == params(module)
    x = torch.randn(3, s, 4)
    forward, backward = step_flops(lambda: module(x))
    assert forward == 2 * 3 * t.macs_forward
    built = torchnet.build_model(net)
    assert step_flops(lambda: built(x))[1] == backward


class IdsFromPositions(nn.Module):
    """The positions of a maximum or a top 1 used as token ids (a greedy decoder's next input)."""

    def __init__(self, how: str) -> None:
        super().__init__()
        self.logits, self.emb, self.head = nn.Linear(8, 20), nn.Embedding(20, 6), nn.Linear(6, 3)
        self.how = how

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scores = self.logits(x)
        ids = scores.max(1)[1] if self.how == "max" else scores.topk(1)[1].squeeze(-1).detach()
        return self.head(self.emb(ids)) + scores[:, :3]


@pytest.mark.parametrize("how", ["max", "topk"])
def test_positions_used_as_ids_are_the_search_s_output_without_a_gradient(how: str) -> None:
    torch.manual_seed(0)
    net = counted_like_pytorch(IdsFromPositions(how), (8,), torch.randn(2, 8))
    assert "stop_gradient" in [layer.kind for layer in net.layers]
    built = torchnet.build_model(net)
    built(torch.randn(2, 8)).sum().backward()


class Scattered(nn.Module):
    """Scores' top k along ``axis`` of a (4, 6) value, softmaxed and scattered back into zeros (a
    mixture's gates), then weighing the value; ``into_layer``: scattered into the value itself."""

    def __init__(self, k: int, axis: int, into_layer: bool = False) -> None:
        super().__init__()
        self.proj, self.head = nn.Linear(6, 6), nn.Linear(24, 3)
        self.k, self.axis, self.into_layer = k, axis, into_layer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.proj(x)
        top, idx = h.topk(self.k, dim=self.axis)
        base = h if self.into_layer else torch.zeros_like(h)
        gates = base.scatter(self.axis, idx, torch.softmax(top, dim=self.axis))
        return self.head((gates * h).flatten(1))


@given(st.integers(1, 4), st.sampled_from([1, 2, -1]))
@settings(max_examples=12, deadline=None)
def test_a_scatter_into_zeros_at_chosen_positions_counts_as_pytorch_runs_it(k: int, axis: int) -> None:
    torch.manual_seed(0)
    net = counted_like_pytorch(Scattered(k, axis), (4, 6), torch.randn(2, 4, 6))
    torchnet.build_model(net)(torch.randn(2, 4, 6)).sum().backward()


def test_a_scatter_into_a_layer_output_is_one_line() -> None:
    with pytest.raises(SpecError, match="scatters into a layer output") as err:
        dnnbench.from_torch(Scattered(2, -1, into_layer=True), (4, 6))
    assert "\n" not in str(err.value)
