"""Message passing over a fixed graph, written with index operations (no graph library): each edge's
source node gathered (``x[:, src]``, ``x.index_select(1, src)``) and its message summed into its target
node (``torch.zeros_like(x).index_add_(1, dst, m)``, ``x.index_add(1, dst, m, alpha=)``): ``gather`` and
``scatter_add`` layers (docs/importing.md, docs/model.md §3)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

import dnnbench
from dnnbench import presets
from dnnbench.counts import totals
from dnnbench.errors import SpecError
from dnnbench.measure import partition, torchnet
from dnnbench.model import evaluate
from dnnbench.specs import Configuration, Network

from .import_helpers import builds_what_the_module_computes, imports_like_pytorch

NODES, EDGES, WIDTH = 30, 120, 16


class MessagePassing(nn.Module):
    """Two rounds of a graph convolution over a fixed graph of NODES nodes and EDGES edges (buffers):
    messages gathered at the edges' sources, summed at their targets onto zeros, then onto the features."""

    def __init__(self, alpha: float = 1.0) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(0)
        self.register_buffer("src", torch.randint(0, NODES, (EDGES,), generator=generator))
        self.register_buffer("dst", torch.randint(0, NODES, (EDGES,), generator=generator))
        self.first, self.second = nn.Linear(WIDTH, WIDTH), nn.Linear(WIDTH, WIDTH)
        self.head = nn.Linear(NODES * WIDTH, 3)
        self.alpha = alpha

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.first(x)
        h = torch.relu(torch.zeros_like(h).index_add_(1, self.dst, h[:, self.src]))
        m = self.second(h).index_select(1, self.src)
        h = torch.relu(h.index_add(1, self.dst, m, alpha=self.alpha))
        return self.head(h.flatten(1))


def test_message_passing_imports_as_gathers_and_scatter_adds_and_the_runner_computes_it() -> None:
    net = builds_what_the_module_computes(MessagePassing(), (NODES, WIDTH))
    kinds = [layer.kind for layer in net.layers]
    assert kinds.count("gather") == 2 and kinds.count("scatter_add") == 2 and "zeros" in kinds
    gathers = [layer for layer in net.layers if layer.kind == "gather"]
    module = MessagePassing()
    assert all(list(g.index) == module.src.tolist() for g in gathers)
    adds = [layer for layer in net.layers if layer.kind == "scatter_add"]
    assert all(list(a.index) == module.dst.tolist() for a in adds)


def test_alpha_scales_the_messages_first() -> None:
    net = imports_like_pytorch(MessagePassing(alpha=0.5), (NODES, WIDTH), torch.randn(2, NODES, WIDTH))
    kinds = dict(zip(net.layer_names, (layer.kind for layer in net.layers), strict=True))
    adds = [layer for layer in net.layers if layer.kind == "scatter_add"]
    assert [kinds[layer.inputs[1]] for layer in adds] == ["gather", "scale"]


def test_counts_are_a_copy_and_an_add_per_message() -> None:
    net = Network.build({"name": "m", "layers": [
        {"kind": "input", "shape": [2, NODES, WIDTH]},
        {"kind": "conv2d", "name": "h", "out_channels": 2, "kernel": 1},
        {"kind": "gather", "name": "m", "axis": 1, "index": [1, 1, 5, 0]},
        {"kind": "scatter_add", "inputs": ["h", "m"], "axis": -2, "index": [2, 3, 3, 29]}]})
    gather, scatter = net.layer_counts[2], net.layer_counts[3]
    n, m = 2 * NODES * WIDTH, 2 * 4 * WIDTH  # values of the maps and of the messages
    assert net.shapes[2:] == ((2, 4, WIDTH), (2, NODES, WIDTH))
    assert (gather.elem_ops_forward, gather.elem_ops_backprop) == (m, m + n)
    assert (scatter.elem_ops_forward, scatter.elem_ops_backprop) == (n + m, m)
    pred = evaluate(net, presets.cluster("modern-2025"), presets.dataset("mnist"), Configuration())
    assert float(pred.epoch_time_s) > 0
    with pytest.raises(SpecError, match=r"layers\[2\]\.kind: 'gather' cannot be split by dnnbench's model-parallel"):
        partition.check(net, 2)


@pytest.mark.parametrize(("layers", "message"), [
    ([{"kind": "gather", "axis": 1, "index": [0, 30]}], r"layers\[1\]\.index: 30 must be below the size 30 of the "
                                                        r"axis it takes positions of"),
    ([{"kind": "gather", "axis": 3, "index": [0]}], r"layers\[1\]\.axis: 3 must name an axis of the input"),
    ([{"kind": "gather", "axis": 1, "index": []}], r"index"),
    ([{"kind": "gather", "name": "g", "axis": 1, "index": [0, 1]},
      {"kind": "scatter_add", "inputs": ["input", "g"], "axis": 1, "index": [0, 1, 2]}],
     r"layers\[2\]\.inputs: \[\[2, 30, 16\], \[2, 2, 16\]\] expected a second input of \[2, 3, 16\]"),
    ([{"kind": "gather", "name": "g", "axis": 1, "index": [0, 1]},
      {"kind": "scatter_add", "inputs": ["input", "g"], "axis": 1, "index": [0, 31]}],
     r"layers\[2\]\.index: 31 must be below the size 30 of the axis it adds to"),
])
def test_bad_positions_and_shapes_are_one_line_errors(layers: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(SpecError, match=message) as err:
        Network.build({"name": "bad", "layers": [{"kind": "input", "shape": [2, NODES, WIDTH]}, *layers]})
    assert "\n" not in str(err.value)


def test_a_few_runs_of_positions_stay_slices_and_many_are_one_gather() -> None:
    class Pick(nn.Module):
        def __init__(self, positions: list[int]) -> None:
            super().__init__()
            self.fc = nn.Linear(8, 8)
            self.positions = positions
            self.head = nn.Linear(len(positions) * 8, 2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.head(self.fc(x)[:, self.positions].flatten(1))

    few = builds_what_the_module_computes(Pick([0, 2, 3, 9]), (40, 8))
    assert "gather" not in [layer.kind for layer in few.layers]
    many = builds_what_the_module_computes(Pick(list(range(0, 40, 2))), (40, 8))
    assert [layer.kind for layer in many.layers].count("gather") == 1


@settings(max_examples=40, deadline=None)
@given(shape=st.one_of(st.lists(st.integers(1, 6), min_size=1, max_size=1),
                      st.lists(st.integers(1, 6), min_size=3, max_size=3)), data=st.data())
def test_the_runner_gathers_and_scatters_as_pytorch_does(shape: list[int], data: st.DataObject) -> None:
    """Any axis (counted from either end), any positions (repeats, any order): the spec's shapes are the
    runner's, which are index_select's and index_add's."""
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    size = shape[axis]
    src = data.draw(st.lists(st.integers(0, size - 1), min_size=1, max_size=8))
    dst = data.draw(st.lists(st.integers(0, size - 1), min_size=len(src), max_size=len(src)))
    reduce = data.draw(st.sampled_from(["sum", "mean", "amax", "amin", "prod"]))
    include_self, per_value = data.draw(st.booleans()), data.draw(st.booleans())
    net = Network.build({"name": "g", "layers": [
        {"kind": "input", "shape": shape},
        {"kind": "gather", "name": "m", "axis": axis, "index": src},
        {"kind": "scatter_add", "inputs": ["input", "m"], "axis": axis, "index": dst, "reduce": reduce,
         "include_self": include_self, "index_per_value": per_value}]})
    x = torch.randn(2, *net.shapes[0])
    model = torchnet.build_model(net)
    dim = axis % len(net.shapes[0]) + 1
    values = x.index_select(dim, torch.tensor(src))
    view = [1] * x.dim()
    view[dim] = -1
    expected = x.scatter_reduce(dim, torch.tensor(dst).view(view).expand_as(values), values, reduce,
                                include_self=include_self)
    torch.testing.assert_close(model(x), expected)
    assert tuple(expected.shape[1:]) == net.shapes[-1]
    assert totals(dnnbench.from_torch(model, net.shapes[0])) == totals(net)
    back = dnnbench.from_torch(model, net.shapes[0]).layers[-1]
    assert back.model_dump(exclude={"name", "inputs"}) == net.layers[-1].model_dump(exclude={"name", "inputs"})


class Aggregate(nn.Module):
    """A graph layer whose messages combine at their target nodes by ``reduce``, written the ways
    hand-written graph networks write it: ``scatter_add``/``scatter_reduce`` of the edges' targets
    broadcast over the features (``dst.view(1, -1, 1).expand_as(m)``), or ``index_reduce`` of the
    targets themselves."""

    def __init__(self, how: str, reduce: str, include_self: bool = True) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(1)
        self.register_buffer("src", torch.randint(0, NODES, (EDGES,), generator=generator))
        self.register_buffer("dst", torch.randint(0, NODES, (EDGES,), generator=generator))
        self.lin, self.head = nn.Linear(WIDTH, WIDTH), nn.Linear(NODES * WIDTH, 3)
        self.how, self.reduce, self.include_self = how, reduce, include_self

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.lin(x)
        m = h[:, self.src]
        index = self.dst.view(1, -1, 1).expand_as(m)
        if self.how == "scatter_add":
            out = torch.zeros_like(h).scatter_add_(1, index, m)
        elif self.how == "torch.scatter_add":
            out = torch.scatter_add(h, 1, index, m)
        elif self.how == "scatter_reduce":
            out = h.scatter_reduce(1, index, m, self.reduce, include_self=self.include_self)
        elif self.how == "torch.scatter_reduce":
            out = torch.scatter_reduce(torch.zeros_like(h), 1, index, m, reduce=self.reduce,
                                       include_self=self.include_self)
        else:
            out = h.index_reduce(1, self.dst, m, self.reduce, include_self=self.include_self)
        return self.head(torch.relu(out).flatten(1))


@pytest.mark.parametrize(("how", "reduce", "include_self"), [
    ("scatter_add", "sum", True), ("torch.scatter_add", "sum", True), ("scatter_reduce", "sum", False),
    ("scatter_reduce", "mean", False), ("torch.scatter_reduce", "amax", True), ("scatter_reduce", "amin", False),
    ("scatter_reduce", "prod", True), ("index_reduce", "mean", True), ("index_reduce", "amax", False),
    ("index_reduce", "prod", False)])
@pytest.mark.filterwarnings("ignore:index_reduce\\(\\) is in beta")
def test_scatters_of_an_index_broadcast_over_the_features_import_with_their_reduction(
        how: str, reduce: str, include_self: bool) -> None:
    module = Aggregate(how, reduce, include_self)
    net = imports_like_pytorch(module, (NODES, WIDTH), torch.randn(2, NODES, WIDTH))
    (scatter,) = [layer for layer in net.layers if layer.kind == "scatter_add"]
    assert (scatter.reduce, scatter.include_self, list(scatter.index)) == (reduce, include_self, module.dst.tolist())
    assert scatter.index_per_value == how.startswith(("scatter", "torch.scatter"))
    built = torchnet.build_model(net)
    for mine, theirs in zip(built.parameters(), module.parameters(), strict=True):
        mine.data.copy_(theirs.data)
    x = torch.randn(3, NODES, WIDTH)
    torch.testing.assert_close(built(x), module(x))


def test_each_kernel_and_reduction_prices_its_own_element_ops() -> None:
    """Each kernel's and reduction's ops, per value and per output, are SCATTER_OPS's; leaving the base
    out adds SCATTER_WITHOUT_SELF_OPS's; a sum by slices is the index_add the other entries are measured
    against, and every other form costs more."""
    from dnnbench.specs.layers import SCATTER_OPS, SCATTER_WITHOUT_SELF_OPS

    def scatter_counts(**fields: Any) -> Any:
        net = Network.build({"name": "m", "layers": [
            {"kind": "input", "shape": [2, NODES, WIDTH]},
            {"kind": "scale", "name": "h"},
            {"kind": "gather", "name": "m", "axis": 1, "index": [1, 1, 5, 0]},
            {"kind": "scatter_add", "inputs": ["h", "m"], "axis": 1, "index": [2, 3, 3, 29], **fields}]})
        return net.layer_counts[3]

    n, m = 2 * NODES * WIDTH, 2 * 4 * WIDTH
    base = scatter_counts()
    assert (base.elem_ops_forward, base.elem_ops_backprop) == (n + m, m)
    for (per_value, reduce), (value_fwd, out_fwd, value_bwd, out_bwd) in SCATTER_OPS.items():
        for include_self in (True, False):
            c = scatter_counts(reduce=reduce, include_self=include_self, index_per_value=per_value)
            extra_fwd, extra_bwd = (0, 0) if include_self else SCATTER_WITHOUT_SELF_OPS[per_value]
            assert c.elem_ops_forward == n * out_fwd + m * (value_fwd + extra_fwd)
            assert c.elem_ops_backprop == n * out_bwd + m * (value_bwd + extra_bwd)
            if (per_value, reduce, include_self) != (False, "sum", True):
                assert c.elem_ops_forward + c.elem_ops_backprop > base.elem_ops_forward + base.elem_ops_backprop


@pytest.mark.parametrize(("forward", "message"), [
    (lambda self, h, m: h.scatter_add(1, (h[:, :EDGES // 4] > 0).long().cumsum(1), m[:, :EDGES // 4]),
     r"positions that are not constants"),
    (lambda self, h, m: h.scatter_add(1, (self.dst.view(1, -1, 1) + torch.arange(WIDTH).view(1, 1, -1)) % NODES, m),
     r"same at every position but along the axis"),
    (lambda self, h, m: h.scatter_reduce(1, self.dst.view(1, -1, 1).expand_as(m), m, "median"),
     r"does not fit the module .*reduce argument must be"),
])
def test_scatters_it_cannot_price_are_one_line_errors(forward: Any, message: str) -> None:
    class Scatter(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            generator = torch.Generator().manual_seed(2)
            self.register_buffer("src", torch.randint(0, NODES, (EDGES,), generator=generator))
            self.register_buffer("dst", torch.randint(0, NODES, (EDGES,), generator=generator))
            self.lin = nn.Linear(WIDTH, WIDTH)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = self.lin(x)
            return forward(self, h, h[:, self.src])

    with pytest.raises(SpecError, match=message) as err:
        dnnbench.from_torch(Scatter(), (NODES, WIDTH))
    assert "\n" not in str(err.value)


@pytest.mark.filterwarnings("ignore:index_reduce\\(\\) is in beta")
def test_the_scatter_benchmark_times_the_kernels_the_runner_builds() -> None:
    """benchmarks/bench_scatter.py, which measured SCATTER_OPS, times for each kernel and reduction what
    the runner computes for a scatter_add layer of those fields."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import benchmark_scripts

    bench = benchmark_scripts.load("bench_scatter")
    nodes, edges = 6, 10
    dst = torch.randint(0, nodes, (edges,), generator=torch.Generator().manual_seed(3))
    forms = bench._forms(dst, edges)
    assert len(forms) == 20
    h = torch.randn(bench.BATCH, nodes, bench.FEATURES)
    m = torch.randn(bench.BATCH, edges, bench.FEATURES)
    for (per_value, reduce, include_self), form in forms.items():
        net = Network.build({"name": "s", "layers": [
            {"kind": "input", "shape": [1, nodes, bench.FEATURES]},
            {"kind": "input", "name": "m", "shape": [1, edges, bench.FEATURES]},
            {"kind": "scatter_add", "inputs": ["input", "m"], "axis": 1, "index": dst.tolist(), "reduce": reduce,
             "include_self": include_self, "index_per_value": per_value}]})
        built = torchnet.build_model(net)(h.unsqueeze(1), m.unsqueeze(1)).squeeze(1)
        torch.testing.assert_close(built, form(h, m))
