"""A network split over processes (model parallelism, docs/model.md §5; dnnbench.measure.partition): the
plan exchanges what the model prices, the processes hold the weights once between them, and trained
over real gloo sockets the split network computes what the whole one does, chains and graphs alike."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import graph_network_dicts, network_dicts, partitionable_graph_dicts, partitionable_token_dicts

from dnnbench import counts, presets
from dnnbench.errors import SpecError
from dnnbench.measure import partition
from dnnbench.measure.launch import run_ranks
from dnnbench.measure.plan import plan, runnable
from dnnbench.measure.torchnet import batch, build_model, loss_fn
from dnnbench.model.arrays import network_arrays
from dnnbench.model.split_axes import split_axes
from dnnbench.specs import Network
from dnnbench.specs.layers import (
    Add,
    Attention,
    Bias,
    Conv2d,
    Conv3d,
    Flatten,
    FullyConnected,
    GroupNorm,
    LayerNorm,
    Multiply,
    Permute,
    Recurrent,
    Repeat,
    Reshape,
    Slice,
    Softmax,
    Windows,
)


def _layers(*rows: dict[str, Any]) -> list[dict[str, Any]]:
    return list(rows)


#: A residual block (its add with a fused ReLU), a depthwise and a grouped convolution, an inception-style
#: concatenation of two branches and the block's output, a batch norm, max pooling and a plain FC head.
BRANCHING = {"name": "branching", "layers": _layers(
    {"kind": "input", "shape": [3, 12, 12]},
    {"kind": "conv2d", "name": "c1", "out_channels": 8, "kernel": 3, "padding": 1, "activation": "relu"},
    {"kind": "batchnorm", "name": "bn"},
    {"kind": "conv2d", "name": "dw", "out_channels": 8, "kernel": 3, "padding": 1, "groups": 8},
    {"kind": "conv2d", "name": "pw", "out_channels": 8, "kernel": 1, "groups": 2},
    {"kind": "add", "name": "res", "inputs": ["bn", "pw"], "activation": "relu"},
    {"kind": "conv2d", "name": "b1", "out_channels": 6, "kernel": 1, "inputs": ["res"]},
    {"kind": "conv2d", "name": "b2", "out_channels": 5, "kernel": 3, "padding": 1, "inputs": ["res"]},
    {"kind": "concat", "name": "cat", "inputs": ["b1", "b2", "res"]},
    {"kind": "conv2d", "name": "mix", "out_channels": 19, "kernel": 1, "groups": 19},
    {"kind": "pool", "window": 2, "mode": "max"},
    {"kind": "flatten"},
    {"kind": "fc", "out_features": 10})}

#: Two inputs: maps pooled before their first convolution (held whole, nothing exchanged), and a vector
#: through its own FC layer, the two joined by an add, ending in a softmax.
TWO_INPUTS = {"name": "two-inputs", "layers": _layers(
    {"kind": "input", "shape": [2, 8, 8]},
    {"kind": "pool", "name": "p", "window": 2, "mode": "avg"},
    {"kind": "conv2d", "name": "c", "out_channels": 6, "kernel": 3, "padding": 1},
    {"kind": "input", "name": "v", "shape": [5]},
    {"kind": "fc", "name": "f", "out_features": 6, "inputs": ["v"]},
    {"kind": "flatten", "name": "fl", "inputs": ["c"]},
    {"kind": "fc", "name": "h", "out_features": 6},
    {"kind": "add", "name": "s", "inputs": ["h", "f"]},
    {"kind": "fc", "out_features": 4},
    {"kind": "softmax"})}


@given(st.integers(1, 2000), st.integers(1, 64))
def test_slices_cover_units_and_the_largest_is_the_model_s(units: int, w: int) -> None:
    """Contiguous shares covering every unit once, sizes ⌈u/W⌉ or ⌊u/W⌋ with the larger first: the
    busiest process holds the model's ⌈u/W⌉ (ι(W)), and none is empty once u ≥ W."""
    spans = [partition.slice_bounds(units, (p, w)) for p in range(w)]
    assert spans[0][0] == 0 and spans[-1][1] == units
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:], strict=False))
    sizes = [b - a for a, b in spans]
    assert max(sizes) == -(-units // w) and min(sizes) == units // w and sizes == sorted(sizes, reverse=True)


def _head(*rows: dict[str, Any], shape: list[int] | None = None) -> dict[str, Any]:
    return {"name": "narrow", "layers": [{"kind": "input", "shape": shape or [8]}, *rows]}


#: Layers of fewer units than processes, which leave the last processes none of them, and what keeps
#: their split: a regression's (or a click model's) one output, a one-unit bottleneck, two features
#: through a batch norm and dropout, an add and a concatenation of them, a 2-wide embedding, a GRU of 2,
#: a one-unit score per token squeezed to a vector (a graph attention's) and scaled by a constant, two
#: features permuted and viewed.
NARROW = {
    "one-output": _head({"kind": "fc", "out_features": 6, "activation": "relu"}, {"kind": "fc", "out_features": 1}),
    "bottleneck": _head({"kind": "fc", "out_features": 1, "activation": "tanh"}, {"kind": "fc", "out_features": 4}),
    "batch-norm": _head({"kind": "fc", "out_features": 2}, {"kind": "batchnorm"}, {"kind": "dropout", "p": 0.1},
                        {"kind": "activation", "function": "gelu"}, {"kind": "fc", "out_features": 4}),
    "add-concat": _head({"kind": "fc", "name": "a", "out_features": 2},
                        {"kind": "fc", "name": "b", "out_features": 2, "inputs": ["input"]},
                        {"kind": "add", "name": "s", "inputs": ["a", "b"]}, {"kind": "concat", "inputs": ["s", "a"]},
                        {"kind": "fc", "out_features": 3}, {"kind": "softmax"}),
    "embedding": _head({"kind": "embedding", "vocabulary": 10, "dim": 2}, {"kind": "flatten"},
                       {"kind": "fc", "out_features": 4}, shape=[5]),
    "recurrent": _head({"kind": "recurrent", "mode": "gru", "hidden": 2}, {"kind": "flatten"},
                       {"kind": "fc", "out_features": 3}, shape=[5, 4]),
    "squeeze": _head({"kind": "reshape", "shape": [5, 4]}, {"kind": "fc", "out_features": 1},
                     {"kind": "reshape", "shape": [5]}, {"kind": "activation", "function": "relu"},
                     {"kind": "fc", "out_features": 3}, shape=[20]),
    "masked-scores": _head({"kind": "reshape", "shape": [5, 4]}, {"kind": "fc", "out_features": 1},
                           {"kind": "reshape", "shape": [5]}, {"kind": "scale", "learned": False},
                           {"kind": "fc", "out_features": 3}, shape=[20]),
    "permute": _head({"kind": "reshape", "shape": [5, 4]}, {"kind": "fc", "out_features": 2},
                     {"kind": "permute", "dims": [1, 0]}, {"kind": "reshape", "shape": [10]},
                     {"kind": "fc", "out_features": 3}, shape=[20]),
}


@pytest.mark.parametrize("name", sorted(NARROW))
def test_a_layer_of_fewer_units_than_processes_leaves_the_last_ones_none(name: str) -> None:
    """Over 3 processes (2 for the one output), the last processes hold none of such a layer's units,
    as the model's ⌈u/W⌉ has them idle; what the split run computes is what the whole network does and
    its exchanges are what the model prices."""
    world = 2 if name == "one-output" else 3
    net = Network.build(NARROW[name])
    assert any(len(units) == 0 for s in partition.plan(net, world) if s.share is not None for units in s.share)
    _check_plan(NARROW[name], world)
    _assert_split_trains_as_whole(net, world, 4)


def test_a_layer_of_fewer_units_than_processes_is_named_where_the_runs_cannot_leave_one_none() -> None:
    """A convolution of fewer maps than processes, or a layer norm of an FC layer's too few features."""
    conv = Network.build({"name": "narrow", "layers": [
        {"kind": "input", "shape": [3, 6, 6]}, {"kind": "conv2d", "out_channels": 3, "kernel": 3},
        {"kind": "flatten"}, {"kind": "fc", "out_features": 4}]})
    partition.check(conv, 3)
    with pytest.raises(SpecError, match=r"^layers\[1\]\.kind: 'conv2d' has 3 output units, fewer than the 4 "
                                        r"processes of a model-parallel run: one would hold none$"):
        partition.check(conv, 4)
    norm = Network.build(_head({"kind": "fc", "out_features": 2}, {"kind": "layer_norm"},
                               {"kind": "fc", "out_features": 4}, shape=[5, 8]))
    with pytest.raises(SpecError, match=r"^layers\[2\]\.kind: 'layer_norm' would leave a process without units "
                                        r"\(2 over 3\)") as err:
        partition.check(norm, 3)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("world", [4])
def test_squeeze_and_excitation_of_six_channels_splits_over_four_processes(world: int) -> None:
    """EfficientNet-B0's first gate squeezes to 6 channels: over 4 processes, 2, 2, 1 and 1 of them (the
    busiest holds the model's ⌈6/4⌉), trained as the whole network over sockets."""
    net = Network.build({"name": "se", "layers": [
        {"kind": "input", "shape": [3, 6, 6]},
        {"kind": "conv2d", "name": "c", "out_channels": 8, "kernel": 3, "padding": 1, "activation": "relu"},
        {"kind": "adaptive_pool", "output_size": 1, "mode": "avg"},
        {"kind": "conv2d", "name": "squeeze", "out_channels": 6, "kernel": 1, "activation": "relu"},
        {"kind": "conv2d", "name": "expand", "out_channels": 8, "kernel": 1, "activation": "sigmoid"},
        {"kind": "mul", "inputs": ["c", "expand"]}, {"kind": "flatten"}, {"kind": "fc", "out_features": 5}]})
    steps = {net.layer_names[s.index]: s for s in partition.plan(net, world)}
    assert [len(units) for units in steps["squeeze"].share or ()] == [2, 2, 1, 1]
    _check_plan(net.to_dict(), world)
    _assert_split_trains_as_whole(net, world, 4)


def test_flatten_carries_a_split_of_maps_to_the_values_they_hold() -> None:
    net = presets.network("lenet5")
    steps = {s.index: s for s in partition.plan(net, 2)}
    flat = next(i for i, layer in enumerate(net.layers) if layer.kind == "flatten")
    share = steps[flat].share
    assert share is not None and [len(s) for s in share] == [8 * 25, 8 * 25]  # 16 maps of 5x5 split 8 + 8
    assert np.array_equal(share[1][:25], np.arange(200, 225))


def test_a_concatenation_holds_each_process_s_share_of_every_input_in_the_output_s_numbering() -> None:
    net = Network.build(BRANCHING)
    steps = {net.layer_names[s.index]: s for s in partition.plan(net, 2)}
    share = steps["cat"].share
    assert share is not None
    assert list(share[0]) == [0, 1, 2, 6, 7, 8, 11, 12, 13, 14]  # b1's 0-2, b2's 0-2, res's 0-3
    assert list(share[1]) == [3, 4, 5, 9, 10, 15, 16, 17, 18]
    assert steps["cat"].wants == ("keep", "keep", "keep")
    # the depthwise convolution reads its own maps (nothing exchanged); a grouped one its whole input,
    # as the model counts it (an upper bound: here each process's groups are its own maps)
    assert steps["dw"].wants == ("keep",) and partition.same(steps["dw"].share, steps["bn"].share)
    assert steps["pw"].wants == (None,)


#: Weight norms of one magnitude per output unit, which split with their layers' units.
WEIGHT_NORMED = {"name": "normed", "layers": [
    {"kind": "input", "shape": [3, 8, 8]},
    {"kind": "conv2d", "out_channels": 8, "kernel": 3, "padding": 1, "weight_norm": "output", "activation": "relu"},
    {"kind": "conv_transpose2d", "out_channels": 6, "kernel": 2, "stride": 2, "weight_norm": "output"},
    {"kind": "conv2d", "out_channels": 6, "kernel": 3, "groups": 2, "weight_norm": "output"},
    {"kind": "flatten"}, {"kind": "fc", "out_features": 12, "weight_norm": "output", "activation": "relu"},
    {"kind": "fc", "out_features": 10}]}


@pytest.mark.parametrize("spec", [BRANCHING, TWO_INPUTS, "mnist-adam", "chain-with-transposed", WEIGHT_NORMED])
def test_the_processes_hold_the_weights_once(spec: Any) -> None:
    if spec == "chain-with-transposed":
        spec = {"name": "t", "layers": [{"kind": "input", "shape": [3, 8, 8]},
                                        {"kind": "conv2d", "out_channels": 8, "kernel": 3, "padding": 1},
                                        {"kind": "conv_transpose2d", "out_channels": 6, "kernel": 2, "stride": 2},
                                        {"kind": "flatten"}, {"kind": "fc", "out_features": 10}]}
    net = presets.network(spec) if isinstance(spec, str) else Network.build(spec)
    steps = partition.plan(net, 2)
    held = sum(q.numel() for r in range(2) for m in partition.modules(net, steps, r, 2).values() if m is not None
               for q in m.parameters())
    assert held == counts.totals(net).weights


def _whole_losses(net: Network, batch_size: int, lr: float = 0.01) -> list[float]:
    """The loss of the whole network's first two SGD steps (the second after one update)."""
    torch.set_num_threads(1)
    model = build_model(net)
    x, y = batch(net, batch_size, seed=1)
    crit = loss_fn(net)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    out = []
    for _ in range(2):
        opt.zero_grad()
        loss = crit(model(*(x if isinstance(x, tuple) else (x,))), y)
        loss.backward()
        opt.step()
        out.append(float(loss.detach()))
    return out


def _split_losses(net: Network, world: int, batch_size: int) -> list[list[float]]:
    """Each process's losses of two SGD steps of ``net`` split over ``world`` processes over gloo
    sockets, every process starting from its slices of the whole network's weights."""
    args = {"network": net.to_dict(), "batch_size": batch_size, "iterations": 2, "warmup": 0, "same_weights": True}
    res = run_ranks("dnnbench.measure.modelparallel:mp_main", world, args, timeout_s=90)
    assert len(res) == world
    return [r["losses"] for r in res]


def _assert_split_trains_as_whole(net: Network, world: int, batch_size: int, rel: float = 1e-4,
                                  abs_tol: float | None = None) -> None:
    """Every process's losses of two SGD steps of ``net`` split over ``world`` processes equal the whole
    network's (:func:`_whole_losses`, :func:`_split_losses`)."""
    want = _whole_losses(net, batch_size)
    for losses in _split_losses(net, world, batch_size):
        assert losses == pytest.approx(want, rel=rel, abs=abs_tol)  # abs None: pytest's default


def _splits(net: Network, world: int) -> bool:
    try:
        partition.check(net, world)
    except SpecError:
        return False  # too few units or heads for the processes: the one-line error is checked below
    return True


@pytest.mark.parametrize("spec,world", [(BRANCHING, 2), (BRANCHING, 3), (TWO_INPUTS, 2), ("lenet5", 3),
                                        (WEIGHT_NORMED, 2), (WEIGHT_NORMED, 3)])
def test_a_split_network_trained_over_sockets_computes_what_the_whole_one_does(spec: Any, world: int) -> None:
    """Every process starts from its slices of the whole network's weights: its loss equals the whole
    network's, and so does the loss after one update (the exchanged gradients are right)."""
    net = presets.network(spec) if isinstance(spec, str) else Network.build(spec)
    _assert_split_trains_as_whole(net, world, 8, rel=1e-5)


@pytest.mark.parametrize(("mode", "kind", "groups"), [("input", "conv2d", 1), ("whole", "fc", 1),
                                                      ("output", "conv_transpose2d", 2), ("kernel_rows", "conv2d", 1),
                                                      ("kernel_columns", "conv_transpose2d", 1)])
def test_a_weight_norm_over_every_process_s_units_is_a_one_line_error(mode: str, kind: str, groups: int) -> None:
    layer = {"kind": kind, "out_channels": 4, "kernel": 3, "groups": groups} if kind != "fc" else {
        "kind": "fc", "out_features": 4}
    net = Network.build({"name": "n", "layers": [{"kind": "input", "shape": [4, 6, 6]}, {**layer, "weight_norm": mode},
                                                 {"kind": "flatten"}, {"kind": "fc", "out_features": 3}]})
    with pytest.raises(SpecError, match=rf"^layers\[1\]\.weight_norm: '{mode}' cannot be split by dnnbench's "
                                        r"model-parallel runs \(its norm spans every process's units"):
        partition.check(net, 2)


#: Kinds whose exchange the model prices: those that need their whole input, the split norms, and views
#: (nothing, or a regathered input where they cut the split axis).
PRICED = (Conv2d, Conv3d, FullyConnected, Attention, LayerNorm, GroupNorm, Reshape, Permute, Slice, Flatten, Repeat,
          Windows, Softmax, Bias, Recurrent, *partition.PRODUCT_KINDS)


def _check_plan(spec: dict[str, Any], world: int) -> None:
    net = Network.build(spec)
    try:
        steps = partition.plan(net, world)
    except SpecError as err:
        assert "\n" not in str(err) and str(err).startswith("layers[")
        return
    moved = partition.exchanged_values(net, steps, world)
    shares = {s.index: s.share for s in steps} | {i: None for i in net.input_layers}
    arr = network_arrays(net)
    rows = dict(zip(arr.names, arr.fm_values, strict=True))
    axes, cuts = split_axes(net)  # the model's split axes and regathering views
    if any(s.regathers and s.share is None and axes[s.index] is not None for s in steps):
        # a regathered layer of fewer units than processes, which every process computes whole, and what
        # follows from it: the model (its split axes do not depend on W) prices them as split (docs/model.md §5)
        return
    # the weights every process holds whole and sums the gradients of are those the model prices so
    # (each once: layers that share a table hold the one parameter, whose gradient is summed once)
    summed = list({id(p): p for m in partition.modules(net, steps, 0, world).values()
                   if m is not None and getattr(m, "gradients_summed", False) for p in m.parameters()}.values())
    assert (sum(p.numel() for p in summed), len(summed)) == (arr.replicated_weights.sum(),
                                                              arr.replicated_tensors.sum())
    for step in steps:
        layer = net.layers[step.index]
        assert step.share is None or step.axis == axes[step.index], net.layer_names[step.index]
        if not isinstance(layer, (*partition.PRODUCT_KINDS, Add, Multiply)):  # assembled operands: priced below
            assert (cuts[step.index] > 0) == step.regathers
        model = rows[net.layer_names[step.index]] * (world - 1) / world
        if isinstance(layer, (LayerNorm, GroupNorm)) and step.share is not None and not step.regathers:
            # two partial statistics per token to every other process, each way: W times the model's
            # (W-1)/W of them (a few values per token beside attention's 4·S·D)
            model *= world
        # an add of operands split alike but shared out differently realigns them: the model does not price
        # that (docs/model.md §5)
        realigned = any(not isinstance(w, str) and w is not None and shares[k] is not None and not partition.same(
            shares[k], w) for k, w in zip(step.inputs, step.wants, strict=True))
        if isinstance(layer, (Add, Multiply)) and not realigned or isinstance(layer, PRICED) and not (
                isinstance(layer, Softmax) and step.index == len(net.layers) - 1):
            assert math.isclose(moved.get(step.index, 0.0), model, rel_tol=1e-9, abs_tol=1e-9), net.layer_names[
                step.index]


@settings(max_examples=60, deadline=None)
@given(network_dicts(), st.integers(2, 4))
def test_a_split_chain_exchanges_what_the_model_prices(spec: dict[str, Any], world: int) -> None:
    """Each conv and FC layer of a random chain moves 2·(W−1)/W of its input per sample (the mean over
    the processes), as the model's exchange says; nothing where the input is held whole."""
    _check_plan(spec, world)


@settings(max_examples=60, deadline=None)
@given(graph_network_dicts(), st.integers(2, 4))
def test_a_split_graph_exchanges_what_the_model_prices_or_names_the_layer_it_cannot_split(spec: dict[str, Any],
                                                                                          world: int) -> None:
    _check_plan(spec, world)


@settings(max_examples=100, deadline=None)
@given(partitionable_graph_dicts(), st.integers(2, 4))
def test_a_split_residual_or_branching_graph_exchanges_what_the_model_prices(spec: dict[str, Any],
                                                                              world: int) -> None:
    _check_plan(spec, world)


@settings(max_examples=6, deadline=None)
@given(partitionable_graph_dicts(), st.integers(2, 3))
def test_any_split_graph_computes_what_the_whole_one_does(spec: dict[str, Any], world: int) -> None:
    """Random residual and branching graphs (every kind a split run takes), over real sockets."""
    net = Network.build(spec)
    if _splits(net, world):
        _assert_split_trains_as_whole(net, world, 4, abs_tol=1e-6)


def test_a_graph_network_s_validation_replays_to_its_own_predictions() -> None:
    """A stored `dnnbench validate --link 1g` report of benchmarks/graph_nets.py's mobile_mini (inverted
    residuals, depthwise convolutions, gates) predicts again what it printed: its model-parallel rows
    (the graph's exchange) and its PS rows (the compute fit scaled to its calibration step, x1.13)."""
    from pathlib import Path

    from dnnbench.measure.report import ValidationReport, replay

    report = ValidationReport.load(Path(__file__).parent / "data" / "validate-mobile-mini-tbf-1g.json")
    assert report.calibration["compute"]["step_scale"] == pytest.approx(1.129, abs=1e-3)
    again = replay(report)
    for old, new in zip(report.rows, again.rows, strict=True):
        assert new["predicted_samples_per_s"] == pytest.approx(old["predicted_samples_per_s"], rel=1e-9), old["label"]
    mp = [r for r in again.rows if r["kind"] == "mp" and not r["in_sample"]]
    assert len(mp) == 1 and abs(mp[0]["error"]) < 0.2  # -5.5 % when measured
    assert again.summary["median_abs_error"] < 0.1


@settings(max_examples=100, deadline=None)
@given(partitionable_token_dicts(), st.integers(2, 4))
def test_a_split_transformer_exchanges_what_the_model_prices(spec: dict[str, Any], world: int) -> None:
    """Attention split by heads moves the whole sequence in and its head outputs out, 4·(W−1)/W·S·D per
    sample; FC layers on tokens 2·(W−1)/W of their input; embeddings, position tables and class tokens
    nothing."""
    _check_plan(spec, world)


GPT = {"name": "gpt-like", "layers": _layers(
    {"kind": "input", "shape": [12]},
    {"kind": "embedding", "name": "tok", "vocabulary": 50, "dim": 16},
    {"kind": "position_embedding", "name": "pos", "rows": 12},
    {"kind": "layer_norm", "name": "ln1"},
    {"kind": "attention", "name": "att", "heads": 4, "causal": True},
    {"kind": "add", "name": "r1", "inputs": ["pos", "att"]},
    {"kind": "layer_norm", "name": "ln2"},
    {"kind": "fc", "name": "up", "out_features": 32, "activation": "gelu"},
    {"kind": "fc", "name": "down", "out_features": 16},
    {"kind": "add", "name": "r2", "inputs": ["r1", "down"]},
    {"kind": "layer_norm", "name": "lnf"},
    {"kind": "fc", "name": "head", "out_features": 50})}


@pytest.mark.parametrize("world", [2, 4])
def test_a_split_transformer_trained_over_sockets_computes_what_the_whole_one_does(world: int) -> None:
    """GPT-like: embedding and position table by columns, layer norms exchanging their statistics,
    causal attention by heads, the MLP by neurons, the per-token logits assembled before the loss."""
    net = Network.build(GPT)
    _assert_split_trains_as_whole(net, world, 4)


def _hand_attention(form: str, heads: int, causal: bool = False, tokens: int = 6, width: int = 16,
                    biases: int = 0) -> Network:
    """A block of attention written by hand (nanoGPT's): one FC layer of Q, K and V, sliced, viewed as
    (tokens, heads, width/heads) and permuted to heads first, then ``q @ kᵀ``, a softmax and ``@ v``
    (``matmul``) or ``sdpa``; permuted back, viewed, projected, a residual add and per-token logits.
    ``biases``: learned biases of that many values added to Q, K and V (BEiT's) and to the scores
    (Swin's relative-position bias)."""
    d = width // heads
    rows: list[dict[str, Any]] = [{"kind": "input", "shape": [tokens]},
                                  {"kind": "embedding", "name": "x0", "vocabulary": 20, "dim": width},
                                  {"kind": "layer_norm"}, {"kind": "fc", "out_features": 3 * width, "bias": False},
                                  {"kind": "bias", "name": "qkv", "weights": biases} if biases else
                                  {"kind": "dropout", "name": "qkv", "p": 0.0}]
    for i, n in enumerate("qkv"):
        rows += [{"kind": "slice", "inputs": ["qkv"], "axis": 1, "start": i * width, "stop": (i + 1) * width},
                 {"kind": "reshape", "shape": [tokens, heads, d]}, {"kind": "permute", "name": n, "dims": [1, 0, 2]}]
    if form == "sdpa":
        rows.append({"kind": "sdpa", "name": "y", "inputs": ["q", "k", "v"], "causal": causal, "bias_weights": biases})
    else:
        rows += [{"kind": "permute", "name": "kt", "inputs": ["k"], "dims": [0, 2, 1]},
                 {"kind": "matmul", "name": "s", "inputs": ["q", "kt"]},
                 *([{"kind": "bias", "weights": biases}] if biases else []), {"kind": "softmax", "name": "p"},
                 {"kind": "matmul", "name": "y", "inputs": ["p", "v"]}]
    rows += [{"kind": "permute", "inputs": ["y"], "dims": [1, 0, 2]}, {"kind": "reshape", "shape": [tokens, width]},
             {"kind": "fc", "name": "proj", "out_features": width}, {"kind": "add", "inputs": ["x0", "proj"]},
             {"kind": "fc", "out_features": 10}]
    return Network.build({"name": f"hand-{form}", "layers": rows})


@pytest.mark.parametrize("form,heads,causal,world,by_rows,biases", [
    ("matmul", 4, False, 2, False, 0), ("matmul", 2, False, 2, True, 0), ("matmul", 2, False, 3, True, 0),
    ("sdpa", 4, False, 4, False, 0), ("sdpa", 2, True, 3, True, 0), ("sdpa", 2, False, 2, True, 0),
    ("matmul", 4, False, 2, False, 7), ("matmul", 2, False, 3, True, 7), ("sdpa", 2, True, 2, True, 5),
    ("sdpa", 4, True, 2, False, 5)])
def test_attention_written_by_hand_splits_by_heads_or_by_rows_and_computes_what_the_whole_one_does(
        form: str, heads: int, causal: bool, world: int, by_rows: bool, biases: int) -> None:
    """Q, K and V viewed as (tokens, heads, d) regather along the larger of heads and d (the view
    divides the split width). Split by heads, the products keep that split and exchange nothing; split
    by d (the axis ``q @ kᵀ`` sums over), each process computes its rows of the scores from its rows of
    q and the whole k, and ``@ v`` its rows from its rows of the weights and the whole v: the model
    prices what the plan moves, and over real sockets the split block's losses, before and after one
    update, equal the whole block's (a causal sdpa masks each process's rows by their own positions;
    every process holds a learned bias's whole table and their gradients are summed)."""
    net = _hand_attention(form, heads, causal, biases=biases)
    steps = {s.index: s for s in partition.plan(net, world)}
    products = [i for i, layer in enumerate(net.layers) if isinstance(layer, partition.PRODUCT_KINDS)]
    for i in products:
        assert steps[i].axis == (1 if by_rows else 0)  # (heads, tokens, ·): rows are the tokens
    moved = partition.exchanged_values(net, list(steps.values()), world)
    assert (sum(moved.get(i, 0.0) for i in products) > 0) == by_rows
    _check_plan(net.to_dict(), world)
    _assert_split_trains_as_whole(net, world, 8, rel=1e-5)


@pytest.mark.parametrize("form,biases", [("sdpa", 0), ("sdpa", 7), ("matmul", 0)])
def test_class_attention_of_one_query_splits_by_heads(form: str, biases: int) -> None:
    """CaiT's class attention: one query (the class token's) over every token. One row cannot be split
    over the processes: the product splits by heads, its operands assembled whole (priced so)."""
    heads, d, tokens = 4, 4, 5
    width = heads * d
    rows: list[dict[str, Any]] = [
        {"kind": "input", "shape": [tokens]}, {"kind": "embedding", "name": "x", "vocabulary": 20, "dim": width},
        {"kind": "select_token", "index": 0}, {"kind": "fc", "out_features": width},
        {"kind": "reshape", "shape": [1, heads, d]}, {"kind": "permute", "name": "q", "dims": [1, 0, 2]},
        {"kind": "fc", "inputs": ["x"], "out_features": 2 * width}]
    for i, n in enumerate("kv"):
        rows += [{"kind": "slice", "inputs": ["fc1"], "axis": 1, "start": i * width, "stop": (i + 1) * width},
                 {"kind": "reshape", "shape": [tokens, heads, d]}, {"kind": "permute", "name": n, "dims": [1, 0, 2]}]
    if form == "sdpa":
        rows.append({"kind": "sdpa", "name": "y", "inputs": ["q", "k", "v"], "bias_weights": biases})
    else:
        rows += [{"kind": "permute", "name": "kt", "inputs": ["k"], "dims": [0, 2, 1]},
                 {"kind": "matmul", "inputs": ["q", "kt"]}, {"kind": "softmax"},
                 {"kind": "matmul", "name": "y", "inputs": ["-", "v"]}]
        rows[-2]["name"] = "-"
    rows += [{"kind": "permute", "inputs": ["y"], "dims": [1, 0, 2]}, {"kind": "reshape", "shape": [width]},
             {"kind": "fc", "out_features": 10}]
    rows[3]["name"], rows[6]["name"] = "fc0", "fc1"
    net = Network.build({"name": "class-attention", "layers": rows})
    for world in (2, 4):
        steps = {s.index: s for s in partition.plan(net, world)}
        for i, layer in enumerate(net.layers):
            if isinstance(layer, partition.PRODUCT_KINDS):
                assert steps[i].axis == 0
        _check_plan(net.to_dict(), world)
        _assert_split_trains_as_whole(net, world, 8, rel=1e-5)


@pytest.mark.parametrize("causal,biases", [(False, 0), (True, 0), (True, 11)])
def test_attention_over_maps_split_by_channels_keeps_its_rows_and_masks_them_by_their_own_positions(
        causal: bool, biases: int) -> None:
    """sdpa of maps viewed as (C, H·W), split by channels: the queries are already split by their rows
    (kept), the keys and values assembled whole; a causal mask and a learned bias are taken at each
    process's own channels."""
    net = Network.build({"name": "channel-attention", "layers": [
        {"kind": "input", "shape": [2, 4, 4]}, {"kind": "conv2d", "out_channels": 6, "kernel": 3, "padding": 1},
        {"kind": "reshape", "name": "r", "shape": [6, 16]},
        {"kind": "sdpa", "inputs": ["r", "r", "r"], "causal": causal, "bias_weights": biases},
        {"kind": "reshape", "shape": [6, 4, 4]}, {"kind": "flatten"}, {"kind": "fc", "out_features": 10}]})
    for world in (2, 3):
        step = partition.plan(net, world)[2]
        assert step.wants == ("keep", None, None) and step.axis == 0 and not step.rows
        _check_plan(net.to_dict(), world)
        _assert_split_trains_as_whole(net, world, 8, rel=1e-5)


@settings(max_examples=4, deadline=None)
@given(partitionable_token_dicts(), st.integers(2, 3))
def test_any_split_transformer_computes_what_the_whole_one_does(spec: dict[str, Any], world: int) -> None:
    net = Network.build(spec)
    if _splits(net, world):
        _assert_split_trains_as_whole(net, world, 4, abs_tol=1e-6)


VIT = {"name": "vit-like", "layers": _layers(
    {"kind": "input", "shape": [3, 8, 12]},
    {"kind": "conv2d", "name": "patches", "out_channels": 16, "kernel": 4, "stride": 4},
    {"kind": "reshape", "shape": [16, 6]},
    {"kind": "permute", "dims": [1, 0]},
    {"kind": "class_token"},
    {"kind": "position_embedding", "name": "pos", "rows": 7},
    {"kind": "layer_norm", "name": "ln1"},
    {"kind": "attention", "name": "att", "heads": 4},
    {"kind": "add", "name": "r1", "inputs": ["pos", "att"]},
    {"kind": "layer_norm", "name": "ln2"},
    {"kind": "fc", "name": "up", "out_features": 32, "activation": "gelu"},
    {"kind": "fc", "name": "down", "out_features": 16},
    {"kind": "add", "name": "r2", "inputs": ["r1", "down"]},
    {"kind": "layer_norm"},
    {"kind": "select_token", "index": 0},
    {"kind": "fc", "out_features": 10})}


@pytest.mark.parametrize("world", [2, 4])
def test_a_split_vit_trained_over_sockets_computes_what_the_whole_one_does(world: int) -> None:
    """ViT-like: the patch convolution split by maps, its maps viewed as a sequence of patches whose
    columns are those maps (nothing exchanged), then the transformer split as any."""
    net = Network.build(VIT)
    _assert_split_trains_as_whole(net, world, 4)


def test_torchvision_s_vision_transformer_imported_splits_and_computes_what_the_whole_one_does() -> None:
    """torchvision's own ViT (its patches reshaped and permuted, dropout, its encoder blocks), imported."""
    from torchvision_models import models

    from dnnbench.importers.torch_import import from_torch

    vit = models().vision_transformer.VisionTransformer(image_size=16, patch_size=4, num_layers=1, num_heads=2,
                                                        hidden_dim=8, mlp_dim=16, num_classes=5)
    net = from_torch(vit, (3, 16, 16))
    _check_plan(net.to_dict(), 2)
    _assert_split_trains_as_whole(net, 2, 4)


@pytest.mark.parametrize("world", [2, 3])
def test_a_multi_task_network_s_outputs_of_different_shapes_split_and_compute_what_the_whole_one_does(
        world: int) -> None:
    """Heads of different shapes (class logits, a box, a dense map), imported as their flattened outputs
    joined: every head split, the join holding each process's share of every head."""
    from importers.import_helpers import MultiTask

    from dnnbench.importers.torch_import import from_torch

    net = from_torch(MultiTask(width=6, box=6, segments=3), (3, 6, 6))
    assert net.layers[-1].kind == "concat"
    _check_plan(net.to_dict(), world)
    _assert_split_trains_as_whole(net, world, 4)


@pytest.mark.parametrize("world", [2, 3])
def test_dlrm_imported_splits_and_computes_what_the_whole_one_does(world: int) -> None:
    """DLRM (``importers.test_import_inputs.Dlrm``): its tables split by columns, the pairwise products
    of the stacked vectors, the triangle's slices and their join, and a click logit of one unit, which
    the last processes hold none of."""
    from importers.test_import_inputs import Dlrm

    from dnnbench.importers.torch_import import from_torch

    net = from_torch(Dlrm(), [(13,), (4,)])
    _check_plan(net.to_dict(), world)
    _assert_split_trains_as_whole(net, world, 4)


@pytest.mark.parametrize("world", [2, 3])
def test_a_graph_attention_s_one_unit_scores_split_and_compute_what_the_whole_one_does(world: int) -> None:
    """A graph attention layer (``importers.import_helpers.GraphAttention``): the pairs' one-unit scores,
    which the first process holds all of, squeezed, activated, masked by a constant and normalised by a
    softmax on that process alone, the others holding none, then the product with the projections."""
    from importers.import_helpers import GraphAttention

    from dnnbench.importers.torch_import import from_torch

    net = from_torch(GraphAttention(), (10, 8))
    steps = {net.layer_names[s.index]: s for s in partition.plan(net, world)}
    assert [len(units) for units in steps["softmax"].share or ()] == [10] + [0] * (world - 1)
    _check_plan(net.to_dict(), world)
    _assert_split_trains_as_whole(net, world, 4)


@pytest.mark.parametrize("name", ["swin", "maxvit"])
def test_torchvision_s_swin_and_maxvit_imported_split_and_compute_what_the_whole_ones_do(name: str) -> None:
    """Attention written as products of split values: torchvision's Swin (shifted windows, a learned
    relative-position bias added to the scores) and MaxViT (block and grid attention, its bias by
    sdpa's mask), small instances of its own classes, imported."""
    from torchvision_models import models

    from dnnbench.importers.torch_import import from_torch

    tm = models()
    if name == "swin":
        module = tm.swin_transformer.SwinTransformer(patch_size=[2, 2], embed_dim=8, depths=[1, 1], num_heads=[2, 4],
                                                     window_size=[2, 2], num_classes=5)
        net = from_torch(module, (3, 8, 8))
    else:
        module = tm.maxvit.MaxVit(input_size=(16, 16), stem_channels=8, partition_size=2, block_channels=[8, 16],
                                  block_layers=[1, 1], head_dim=4, stochastic_depth_prob=0.0, num_classes=5)
        net = from_torch(module, (3, 16, 16))
    assert any(isinstance(layer, partition.PRODUCT_KINDS) for layer in net.layers)
    _check_plan(net.to_dict(), 2)
    _assert_split_trains_as_whole(net, 2, 4)


def test_vit_b16_splits_and_exchanges_what_the_model_prices() -> None:
    net = presets.network("vit-b16")
    steps = partition.plan(net, 2)
    assert partition.exchanged_values(net, steps, 2).get(2, 0.0) == 0.0  # the view of the patches
    _check_plan(net.to_dict(), 2)


def test_a_reshape_that_cuts_the_split_axis_regathers_its_input() -> None:
    """Maps split by channels viewed with their channels cut into rows: every process assembles the
    whole maps (as a convolution does, priced so by the model) and keeps its range of the new rows."""
    spec = {"name": "odd-view", "layers": _layers(
        {"kind": "input", "shape": [3, 8, 8]}, {"kind": "conv2d", "out_channels": 4, "kernel": 3, "padding": 1},
        {"kind": "reshape", "shape": [8, 32]}, {"kind": "flatten"}, {"kind": "fc", "out_features": 10})}
    net = Network.build(spec)
    step = partition.plan(net, 2)[1]
    assert step.wants == (None,) and step.axis == 1 and [list(s) for s in step.share] == [list(range(16)),
                                                                                          list(range(16, 32))]
    assert partition.exchanged_values(net, partition.plan(net, 2), 2)[2] == 2 * 256 / 2  # (W−1)/W of 256, each way
    _check_plan(spec, 2)
    _assert_split_trains_as_whole(net, 2, 4, rel=1e-5)
    # a view of the input, which every process holds whole, is itself held whole
    spec["layers"][1:3] = [{"kind": "reshape", "shape": [12, 16]}, {"kind": "reshape", "shape": [3, 8, 8]},
                           {"kind": "conv2d", "out_channels": 4, "kernel": 3, "padding": 1}]
    _check_plan(spec, 2)
    assert partition.plan(Network.build(spec), 2)[1].share is None


def test_copies_keep_the_split_but_tiled_copies_of_the_split_axis_regather() -> None:
    """Maps split by channels: copies of rows (tiled) and of each channel (interleaved) keep the split,
    each process copying its own maps; tiled copies of the channels regather (every process assembles
    the whole maps, copies them and keeps its range), as the model prices them."""
    spec = {"name": "copies", "layers": _layers(
        {"kind": "input", "shape": [3, 6, 6]}, {"kind": "conv2d", "out_channels": 4, "kernel": 3, "padding": 1},
        {"kind": "repeat", "axis": 1, "times": 2}, {"kind": "repeat", "axis": 0, "times": 3, "interleave": True},
        {"kind": "repeat", "axis": -3, "times": 2}, {"kind": "conv2d", "out_channels": 4, "kernel": 1},
        {"kind": "flatten"}, {"kind": "fc", "out_features": 10})}
    net = Network.build(spec)
    steps = partition.plan(net, 2)
    rows, interleaved, tiled = steps[1:4]
    assert rows.wants == ("keep",) and [list(s) for s in rows.share] == [[0, 1], [2, 3]]
    assert interleaved.wants == ("keep",) and [list(s) for s in interleaved.share] == [list(range(6)),
                                                                                     list(range(6, 12))]
    assert tiled.wants == (None,) and [list(s) for s in tiled.share] == [list(range(12)), list(range(12, 24))]
    assert partition.exchanged_values(net, steps, 2).get(2, 0.0) == 0.0
    _check_plan(spec, 2)
    _assert_split_trains_as_whole(net, 2, 4, rel=1e-5)


def test_windows_along_rows_keep_the_split_and_along_channels_regather() -> None:
    """Maps split by channels: overlapping windows of rows keep the split (each process its own maps'
    windows); windows sliding across the channels regather, as the model prices them."""
    spec = {"name": "windows", "layers": _layers(
        {"kind": "input", "shape": [3, 6, 6]}, {"kind": "conv2d", "out_channels": 4, "kernel": 3, "padding": 1},
        {"kind": "windows", "axis": 1, "size": 3, "step": 1}, {"kind": "windows", "axis": 0, "size": 2, "step": 1},
        {"kind": "flatten"}, {"kind": "fc", "out_features": 10})}
    net = Network.build(spec)
    steps = partition.plan(net, 2)
    rows, channels = steps[1:3]
    assert rows.wants == ("keep",) and [list(s) for s in rows.share] == [[0, 1], [2, 3]]
    assert channels.wants == (None,) and [list(s) for s in channels.share] == [[0, 1], [2]]
    _check_plan(spec, 2)
    _assert_split_trains_as_whole(net, 2, 4, rel=1e-5)


#: A ShuffleNet V2 unit: the maps chunked in two by channels (slices along the split axis, regathered),
#: one half through a 1x1, depthwise 3x3, 1x1 branch, the halves joined and their channels shuffled
#: ((C, H, W) viewed as (2, C/2, H, W), the two axes swapped, viewed as (C, H, W) again).
SHUFFLE = {"name": "shuffle-like", "layers": _layers(
    {"kind": "input", "shape": [3, 8, 8]},
    {"kind": "conv2d", "name": "stem", "out_channels": 8, "kernel": 3, "padding": 1, "activation": "relu"},
    {"kind": "slice", "name": "x1", "inputs": ["stem"], "axis": 0, "start": 0, "stop": 4},
    {"kind": "slice", "name": "x2", "inputs": ["stem"], "axis": 0, "start": 4, "stop": 8},
    {"kind": "conv2d", "out_channels": 4, "kernel": 1, "activation": "relu"},
    {"kind": "conv2d", "out_channels": 4, "kernel": 3, "padding": 1, "groups": 4},
    {"kind": "batchnorm"},
    {"kind": "conv2d", "name": "b", "out_channels": 4, "kernel": 1, "activation": "relu"},
    {"kind": "concat", "name": "j", "inputs": ["x1", "b"]},
    {"kind": "reshape", "shape": [2, 4, 8, 8]},
    {"kind": "permute", "dims": [1, 0, 2, 3]},
    {"kind": "reshape", "name": "shuffled", "shape": [8, 8, 8]},
    {"kind": "pool", "window": 2},
    {"kind": "flatten"}, {"kind": "fc", "out_features": 10})}


@pytest.mark.parametrize("world", [2, 4])
def test_a_split_channel_shuffle_trained_over_sockets_computes_what_the_whole_one_does(world: int) -> None:
    net = Network.build(SHUFFLE)
    steps = {s.index: s for s in partition.plan(net, world)}
    names = {n: i for i, n in enumerate(net.layer_names)}
    assert steps[names["x1"]].wants == (None,) and steps[names["x2"]].wants == (None,)  # regathered
    shuffled = steps[names["shuffled"]]  # the view back to maps merges the swapped axes: kept, nothing moved
    assert shuffled.wants == ("keep",) and shuffled.axis == 0
    _check_plan(SHUFFLE, world)
    _assert_split_trains_as_whole(net, world, 4, rel=1e-5)


def test_torchvision_s_shufflenet_imported_splits_and_computes_what_the_whole_one_does() -> None:
    """torchvision's ShuffleNet V2 (its chunks and channel shuffles) imported with from_torch."""
    from torchvision_models import models

    from dnnbench import from_torch

    net = from_torch(models().shufflenet_v2_x0_5(num_classes=10), (3, 32, 32))
    for world in (2, 3, 4):
        _check_plan(net.to_dict(), world)
    _assert_split_trains_as_whole(net, 3, 4, abs_tol=1e-6)


#: Layers acting along another axis than the split one: a layer norm of maps split by channels (it
#: normalises their rows), then, channels last, an average pool and a learned scale along the first axis.
ACROSS = {"name": "across-the-split", "layers": _layers(
    {"kind": "input", "shape": [3, 6, 6]}, {"kind": "conv2d", "out_channels": 6, "kernel": 3, "padding": 1},
    {"kind": "layer_norm"}, {"kind": "permute", "dims": [1, 2, 0]},
    {"kind": "pool", "window": 2, "mode": "avg"}, {"kind": "scale", "axis": 0},
    {"kind": "flatten"}, {"kind": "fc", "out_features": 10})}


@pytest.mark.parametrize("world", [2, 3])
def test_a_layer_acting_on_another_axis_than_the_split_one_regathers_its_input(world: int) -> None:
    """Each of them assembles its whole input, applies the whole layer and keeps its range of the output
    along the split axis (the model prices 2·(W−1)/W of the input, as for a convolution); its learned
    weights are on every process, their gradients summed: the split network trains as the whole one."""
    net = Network.build(ACROSS)
    steps = {s.index: s for s in partition.plan(net, world)}
    assert [i for i, s in steps.items() if s.regathers] == [2, 4, 5]
    assert [steps[i].axis for i in (2, 4, 5)] == [0, 2, 2]
    _check_plan(ACROSS, world)
    _assert_split_trains_as_whole(net, world, 8, rel=1e-5)


#: An MLP-Mixer's block: patches as tokens (split by channels, the last axis), a token-mixing FC layer on
#: the transposed tokens (split by tokens), transposed back and added to its input split by channels.
MIXER = {"name": "mixer-like", "layers": _layers(
    {"kind": "input", "shape": [3, 12, 12]}, {"kind": "conv2d", "out_channels": 6, "kernel": 4, "stride": 4},
    {"kind": "reshape", "shape": [6, 9]}, {"kind": "permute", "name": "x", "dims": [1, 0]}, {"kind": "layer_norm"},
    {"kind": "permute", "dims": [1, 0]}, {"kind": "fc", "out_features": 9, "activation": "gelu"},
    {"kind": "permute", "name": "t", "dims": [1, 0]}, {"kind": "add", "name": "y", "inputs": ["x", "t"]},
    {"kind": "mul", "inputs": ["t", "y"]}, {"kind": "fc", "out_features": 10})}


@pytest.mark.parametrize("world", [2, 3])
def test_an_add_of_operands_split_along_different_axes_assembles_the_other_one(world: int) -> None:
    """The mixer's add takes its first operand's split (channels); the token-mixed operand, split by
    tokens, is assembled whole and each process takes its own channels of it (the model prices
    2·(W−1)/W of it); a mul of the two the other way round takes the tokens' split. The split network
    trains as the whole one."""
    net = Network.build(MIXER)
    steps = {s.index: s for s in partition.plan(net, world)}
    assert steps[8].axis == 1 and steps[8].wants[1] is None and steps[8].aligned == ((1, 1),)  # the add
    assert steps[9].axis == 0 and steps[9].aligned == ((1, 0),)  # the mul: split by tokens, as its first
    _check_plan(MIXER, world)
    _assert_split_trains_as_whole(net, world, 8, rel=1e-5)


#: Reductions (SKNet's and ResNeSt's attention over branches, ConvNeXt V2's global response norm): a
#: mean over rows and columns keeps the channels' split; a sum over the channels regathers its maps.
REDUCTIONS = {"name": "reductions", "layers": _layers(
    {"kind": "input", "shape": [3, 6, 6]},
    {"kind": "conv2d", "name": "c", "out_channels": 6, "kernel": 3, "padding": 1},
    {"kind": "reduce", "name": "s", "axes": [1, 2], "mode": "mean", "keepdim": True},
    {"kind": "mul", "inputs": ["c", "s"]},
    {"kind": "reduce", "axes": [0], "mode": "sum", "keepdim": True},
    {"kind": "reduce", "axes": [-1], "mode": "max"},
    {"kind": "flatten"}, {"kind": "fc", "out_features": 10})}


@pytest.mark.parametrize("world", [2, 3])
def test_a_reduction_keeps_a_split_it_does_not_reduce_and_regathers_one_it_does(world: int) -> None:
    net = Network.build(REDUCTIONS)
    steps = {s.index: s for s in partition.plan(net, world)}
    assert (steps[2].axis, steps[2].regathers) == (0, False)
    assert (steps[4].axis, steps[4].regathers) == (1, True)  # (1, 6, 6): split again by rows
    assert (steps[5].axis, steps[5].regathers) == (1, False)  # (1, 6): the rows' split kept
    _check_plan(REDUCTIONS, world)
    _assert_split_trains_as_whole(net, world, 8, rel=1e-5)


#: What leaves one unit to split (ConvNeXt-V2's global response norm, FocalNet's gates, LeViT's batch norm
#: of tokens): a batch norm of the input (held whole, learned); a norm per map (split kept), then their mean
#: over the maps (regathered: one value, which every process computes whole) scaling the maps; one gate
#: map sliced from three (regathered: one map, whole) scaling them; a batch norm of (C, L) tokens (per
#: channel, the split kept).
ONE_UNIT = {"name": "one-unit", "layers": _layers(
    {"kind": "input", "shape": [3, 6, 6]},
    {"kind": "batchnorm", "name": "bn0"},
    {"kind": "conv2d", "name": "c", "out_channels": 6, "kernel": 3, "padding": 1},
    {"kind": "reduce", "name": "g", "axes": [1, 2], "mode": "l2", "keepdim": True},
    {"kind": "reduce", "name": "n", "axes": [0], "mode": "mean", "keepdim": True},
    {"kind": "mul", "name": "x", "inputs": ["c", "n"]},
    {"kind": "conv2d", "name": "gates", "out_channels": 3, "kernel": 1, "inputs": ["x"]},
    {"kind": "slice", "name": "gate", "axis": 0, "start": 1, "stop": 2},
    {"kind": "mul", "name": "y", "inputs": ["x", "gate"]},
    {"kind": "reshape", "shape": [6, 36]},
    {"kind": "batchnorm", "name": "bn1"},
    {"kind": "flatten"}, {"kind": "fc", "out_features": 10})}


@pytest.mark.parametrize("world", [2, 3])
def test_a_regathered_layer_of_one_unit_is_computed_whole_by_every_process(world: int) -> None:
    """The model holds the one-unit outputs whole (split axis None; nothing to exchange after them), the
    plan computes them whole on every process, and the weights every process holds whole (the input's
    batch norm) have their gradients summed: the split network trains as the whole one."""
    net = Network.build(ONE_UNIT)
    axes, _ = split_axes(net)
    steps = {net.layer_names[s.index]: s for s in partition.plan(net, world)}
    for name in ("n", "gate"):
        assert axes[net.layer_names.index(name)] is None
        assert steps[name].regathers and steps[name].share is None
    assert steps["bn0"].share is None
    assert steps["bn1"].share is not None and steps["bn1"].axis == 0 and not steps["bn1"].regathers
    assert steps["y"].wants[1] == "keep"  # the whole gate: each process takes its own maps' broadcast
    _check_plan(ONE_UNIT, world)
    _assert_split_trains_as_whole(net, world, 8, rel=1e-5)


@pytest.mark.parametrize("world", [2, 3])
def test_a_network_every_process_computes_whole_takes_a_share_of_the_loss_gradient(world: int) -> None:
    """Nothing split: a learned batch norm of the input, then the softmax. Every process computes the
    whole loss and its whole gradient; the weights' gradients are summed over the processes, so each
    process backs 1/W of the loss: the split network trains as the whole one."""
    net = Network.build({"name": "whole", "layers": _layers(
        {"kind": "input", "shape": [10]}, {"kind": "batchnorm"}, {"kind": "softmax"})})
    assert all(s.share is None for s in partition.plan(net, world))
    _assert_split_trains_as_whole(net, world, 8, rel=1e-5)


#: Masks and learned slopes: a shared factor, PReLUs of one slope and of one per channel, a comparison with a
#: number and with a second output, values chosen by it (from a number, from two outputs), running sums along rows
#: (the split kept) and along channels (regathered), zeros (a recurrent cell's state: every process holds them).
MASKS = {"name": "masks", "layers": _layers(
    {"kind": "input", "shape": [3, 6, 6]},
    {"kind": "conv2d", "name": "c", "out_channels": 6, "kernel": 3, "padding": 1},
    {"kind": "scale", "name": "t", "shared": True},
    {"kind": "prelu", "name": "p1"},
    {"kind": "prelu", "name": "p2", "per_channel": True},
    {"kind": "compare", "name": "m", "op": "gt", "value": 0.1},
    {"kind": "where", "name": "w", "inputs": ["m", "p2"], "value": -0.5},
    {"kind": "compare", "name": "m2", "op": "lt", "inputs": ["w", "c"]},
    {"kind": "where", "name": "w2", "inputs": ["m2", "w", "c"]},
    {"kind": "cumsum", "name": "r", "axis": 1},
    {"kind": "cumsum", "name": "q", "axis": 0},
    {"kind": "zeros", "name": "z", "shape": [6, 6, 6]},
    {"kind": "add", "inputs": ["q", "z"]},
    {"kind": "flatten"}, {"kind": "fc", "out_features": 10})}


@pytest.mark.parametrize("world", [2, 3])
def test_masks_slopes_running_sums_and_zeros_split_and_compute_what_the_whole_one_does(world: int) -> None:
    """Every process holds the one learned factor and the one slope whole, their gradients summed (without
    the sum the second loss drifts by 7e-5 relative), its own channels' slopes, and the whole zeros; running
    sums along the split channels regather them."""
    net = Network.build(MASKS)
    steps = {net.layer_names[s.index]: s for s in partition.plan(net, world)}
    assert steps["z"].share is None
    assert (steps["r"].axis, steps["r"].regathers) == (0, False)
    assert (steps["q"].axis, steps["q"].regathers) == (0, True)
    assert all(steps[n].share is not None and not steps[n].regathers for n in ("t", "p1", "p2", "m", "w", "m2", "w2"))
    held = sum(q.numel() for r in range(world) for m in partition.modules(net, list(steps.values()), r, world).values()
               if m is not None for q in m.parameters())
    assert held == counts.totals(net).weights + (world - 1) * 2  # the factor and the slope on every process
    _check_plan(MASKS, world)
    _assert_split_trains_as_whole(net, world, 8, rel=1e-6)


def _recurrent_net(mode: str, stacked: int, bidirectional: bool, start: str) -> Network:
    """A recurrent layer (each cell, stacked or not, one or two directions) after an embedding (its input
    split, assembled), on a sequence the processes hold whole, or on sequences side by side (R, S, D);
    then a second one on its split output, and an FC head."""
    head = ([{"kind": "input", "shape": [7]}, {"kind": "embedding", "vocabulary": 20, "dim": 6}]
            if start == "embedding" else [{"kind": "input", "shape": [6, 4] if start == "sequence" else [3, 6, 4]}])
    return Network.build({"name": "recurrent", "layers": [
        *head, {"kind": "recurrent", "name": "rnn", "mode": mode, "hidden": 5, "layers": stacked,
                "bidirectional": bidirectional},
        {"kind": "recurrent", "mode": "lstm", "hidden": 7}, {"kind": "flatten"}, {"kind": "fc", "out_features": 5}]})


@pytest.mark.parametrize("mode,stacked,bidirectional,start", [
    ("lstm", 1, False, "embedding"), ("gru", 2, True, "embedding"), ("rnn_tanh", 1, True, "sequence"),
    ("lstm", 2, True, "side-by-side"), ("rnn_relu", 2, False, "sequence")])
def test_a_recurrent_layer_splits_by_hidden_units_and_computes_what_the_whole_one_does(
        mode: str, stacked: int, bidirectional: bool, start: str) -> None:
    """Each process its hidden units of every direction and stacked layer; every step's states are
    assembled whole for the next step, which the model prices: 2·(W−1)/W·R·S·L·dirs·H per sample and S·L
    exchanges each way beside the input's."""
    from dnnbench.model.traffic import exchanges

    net = _recurrent_net(mode, stacked, bidirectional, start)
    arr = network_arrays(net)
    rnn = arr.names.index("rnn")
    side, steps = (3, 6) if start == "side-by-side" else (1, 7 if start == "embedding" else 6)
    assert arr.state_values[rnn] == 2 * side * steps * stacked * (1 + bidirectional) * 5
    assert exchanges(arr)[rnn] == (start == "embedding") + steps * stacked
    for world in (2, 3):
        _check_plan(net.to_dict(), world)
        _assert_split_trains_as_whole(net, world, 4, rel=1e-6)


def test_a_batch_norm_of_tokens_split_by_positions_regathers_them() -> None:
    """A batch norm of (C, L) values acts per channel (axis 0): split along L (maps split by channels,
    viewed as (H·W, C)), it regathers."""
    spec = {"name": "bn-of-positions", "layers": _layers(
        {"kind": "input", "shape": [3, 4, 4]}, {"kind": "conv2d", "out_channels": 6, "kernel": 3, "padding": 1},
        {"kind": "reshape", "shape": [6, 16]}, {"kind": "permute", "dims": [1, 0]}, {"kind": "batchnorm"},
        {"kind": "flatten"}, {"kind": "fc", "out_features": 10})}
    net = Network.build(spec)
    step = partition.plan(net, 2)[3]
    assert net.shapes[step.index] == (16, 6) and step.regathers and step.axis == 1
    _check_plan(spec, 2)
    _assert_split_trains_as_whole(net, 2, 8, rel=1e-5)


#: A 3-D convolution of maps viewed as one volume (LambdaNet's position lambdas), im2col and col2im
#: (VOLO's outlook attention): the convolution computes its own volumes from the whole input; ``unfold``
#: keeps the maps' split, each map's k_h·k_w rows of the columns, and ``fold`` takes them back; a fold
#: of columns whose split does not follow the maps' rows (12 rows of 3 maps) realigns them first.
VOLUME_COLUMNS = {"name": "volume-columns", "layers": _layers(
    {"kind": "input", "shape": [3, 6, 6]},
    {"kind": "conv2d", "name": "c", "out_channels": 6, "kernel": 3, "padding": 1},
    {"kind": "reshape", "shape": [1, 6, 6, 6]},
    {"kind": "conv3d", "name": "v", "out_channels": 6, "kernel": 3, "padding": 1, "activation": "relu"},
    {"kind": "reshape", "shape": [36, 6, 6]},
    {"kind": "unfold", "name": "u", "window": 2, "stride": 2},
    {"kind": "activation", "function": "tanh"},
    {"kind": "fold", "name": "f", "size": 6, "window": 2, "stride": 2},
    {"kind": "conv2d", "name": "m", "out_channels": 12, "kernel": 2, "stride": 2},
    {"kind": "reshape", "shape": [12, 9]},
    {"kind": "fold", "name": "g", "size": 4, "window": 2},
    {"kind": "flatten"}, {"kind": "fc", "out_features": 10})}


@pytest.mark.parametrize("world", [2, 3])
def test_a_3d_convolution_and_im2col_split_and_compute_what_the_whole_one_does(world: int) -> None:
    net = Network.build(VOLUME_COLUMNS)
    steps = {net.layer_names[s.index]: s for s in partition.plan(net, world)}
    assert steps["v"].axis == 0 and steps["v"].wants == (None,)
    assert steps["u"].axis == 0 and steps["u"].wants == ("keep",) and steps["u"].share is not None
    maps = steps[net.layer_names[steps["u"].inputs[0]]].share
    assert maps is not None and [len(s) for s in steps["u"].share] == [len(s) * 4 for s in maps]
    assert steps["f"].wants == ("keep",) and partition.same(steps["f"].share, maps)
    # 12 rows split 6 + 6 are not 2 + 1 maps' 8 + 4: realigned; split 4 + 4 + 4, they are 1 + 1 + 1 maps'
    assert steps["g"].axis == 0 and (steps["g"].wants != ("keep",)) == (world == 2)
    _check_plan(VOLUME_COLUMNS, world)
    _assert_split_trains_as_whole(net, world, 8, rel=1e-5)


#: A video network's residual block (torchvision's r3d): 3-D convolutions, batch norms and pooling of volumes
#: (C, D, H, W), an add, a global pooling of the volume.
VOLUMES = {"name": "volumes", "layers": _layers(
    {"kind": "input", "shape": [3, 4, 8, 8]},
    {"kind": "conv3d", "name": "stem", "out_channels": 6, "kernel": 3, "padding": 1},
    {"kind": "batchnorm", "name": "bn"},
    {"kind": "activation", "function": "relu"},
    {"kind": "pool3d", "name": "p", "window": [1, 2, 2]},
    {"kind": "conv3d", "name": "c", "out_channels": 6, "kernel": 3, "padding": 1},
    {"kind": "batchnorm", "name": "bn2"},
    {"kind": "add", "inputs": ["p", "bn2"]},
    {"kind": "pool3d", "name": "g", "window": [4, 4, 4], "mode": "avg"},
    {"kind": "flatten"}, {"kind": "fc", "out_features": 10})}


@pytest.mark.parametrize("world", [2, 3])
def test_batch_norms_and_pooling_of_volumes_keep_the_channels_split(world: int) -> None:
    net = Network.build(VOLUMES)
    steps = {net.layer_names[s.index]: s for s in partition.plan(net, world)}
    for name in ("bn", "p", "bn2", "g"):
        assert steps[name].axis == 0 and steps[name].wants == ("keep",) and not steps[name].regathers
    _check_plan(VOLUMES, world)
    _assert_split_trains_as_whole(net, world, 8, rel=1e-5)


def test_a_grouped_or_transposed_3d_convolution_is_named() -> None:
    for extra, field in (({"groups": 2}, "groups"), ({"kind": "conv_transpose3d"}, "kind")):
        spec = {"name": "vol", "layers": _layers(
            {"kind": "input", "shape": [2, 4, 4, 4]},
            {"kind": "conv3d", "out_channels": 4, "kernel": 3, "padding": 1, **extra},
            {"kind": "flatten"}, {"kind": "fc", "out_features": 10})}
        with pytest.raises(SpecError, match=rf"^layers\[1\]\.{field}: "):
            partition.check(Network.build(spec), 2)


@pytest.mark.parametrize("world", [2, 3])
def test_a_fixed_filter_splits_as_a_convolution_and_keeps_its_buffer(world: int) -> None:
    """An anti-aliasing blur (a depthwise conv2d that is not learned) after a dense one, and a dense fixed
    filter: each process holds its maps' slice of the filters as buffers (no parameters), and the split
    network trains as the whole one."""
    spec = {"name": "blur", "layers": _layers(
        {"kind": "input", "shape": [3, 8, 8]}, {"kind": "conv2d", "out_channels": 6, "kernel": 3, "padding": 1},
        {"kind": "pad", "padding": [1, 1, 1, 1], "mode": "reflect"},
        {"kind": "conv2d", "out_channels": 6, "kernel": 3, "stride": 2, "groups": 6, "learned": False, "bias": False},
        {"kind": "conv2d", "out_channels": 6, "kernel": 1, "learned": False, "bias": False, "activation": "relu"},
        {"kind": "flatten"}, {"kind": "fc", "out_features": 10})}
    net = Network.build(spec)
    steps = partition.plan(net, world)
    mods = partition.modules(net, steps, 0, world)
    assert all(sum(p.numel() for p in mods[i].parameters()) == 0 for i in (3, 4))
    _check_plan(spec, world)
    _assert_split_trains_as_whole(net, world, 8, rel=1e-5)


def test_a_depthwise_convolution_of_maps_split_along_another_axis_is_named() -> None:
    """A depthwise convolution computes the maps of its own input maps: maps split by rows, a one-line
    error."""
    spec = {"name": "dw-on-rows", "layers": _layers(
        {"kind": "input", "shape": [3, 8, 8]}, {"kind": "conv2d", "out_channels": 4, "kernel": 3, "padding": 1},
        {"kind": "reshape", "shape": [2, 2, 8, 8]}, {"kind": "reshape", "shape": [4, 8, 8]},
        {"kind": "permute", "dims": [1, 0, 2]},
        {"kind": "conv2d", "out_channels": 8, "kernel": 3, "padding": 1, "groups": 8},
        {"kind": "flatten"}, {"kind": "fc", "out_features": 10})}
    with pytest.raises(SpecError, match=r"^layers\[5\]\.kind: 'conv2d' acts along axis 0 of its input "):
        partition.check(Network.build(spec), 2)


#: A ConvNeXt stage: a depthwise 7x7 convolution, channels last for a layer norm and an MLP on every
#: position (FC layers on the positions viewed as tokens), a layer scale, channels first again, an add.
CONVNEXT = {"name": "convnext-like", "layers": _layers(
    {"kind": "input", "shape": [3, 8, 8]},
    {"kind": "conv2d", "name": "stem", "out_channels": 8, "kernel": 2, "stride": 2},
    {"kind": "conv2d", "out_channels": 8, "kernel": 3, "padding": 1, "groups": 8},
    {"kind": "permute", "dims": [1, 2, 0]},
    {"kind": "layer_norm"},
    {"kind": "reshape", "shape": [16, 8]},
    {"kind": "fc", "out_features": 32, "activation": "gelu"},
    {"kind": "fc", "out_features": 8},
    {"kind": "reshape", "shape": [4, 4, 8]},
    {"kind": "scale", "axis": -1},
    {"kind": "permute", "dims": [2, 0, 1]},
    {"kind": "add", "name": "res", "inputs": ["stem", "-"]},
    {"kind": "adaptive_pool"},
    {"kind": "permute", "dims": [1, 2, 0]},
    {"kind": "layer_norm"},
    {"kind": "permute", "dims": [2, 0, 1]},
    {"kind": "reshape", "shape": [8]},
    {"kind": "fc", "out_features": 5})}
CONVNEXT["layers"][10]["name"] = "-"


#: Group norms of maps split by channels, their groups across the processes' shares (6 channels in 3
#: groups of 2 over 2 processes; 8 in 2 groups of 4 over 3), with and without a learned scale and shift.
GROUP_NORMS = {"name": "group-norms", "layers": _layers(
    {"kind": "input", "shape": [2, 8, 8]},
    {"kind": "conv2d", "name": "c1", "out_channels": 6, "kernel": 3, "padding": 1},
    {"kind": "group_norm", "groups": 3},
    {"kind": "activation", "function": "silu"},
    {"kind": "conv2d", "out_channels": 8, "kernel": 3, "padding": 1},
    {"kind": "group_norm", "groups": 2, "affine": False},
    {"kind": "pool", "window": 2, "mode": "avg"},
    {"kind": "flatten"},
    {"kind": "fc", "out_features": 5})}


@pytest.mark.parametrize("world", [2, 3])
def test_a_split_group_norm_trained_over_sockets_computes_what_the_whole_one_does(world: int) -> None:
    """Each process sums its channels per group, the 2·G partial statistics are exchanged, and each
    normalises its channels by their whole group's."""
    net = Network.build(GROUP_NORMS)
    _check_plan(GROUP_NORMS, world)
    _assert_split_trains_as_whole(net, world, 4)


@pytest.mark.parametrize("world", [2, 3])
def test_a_split_convnext_trained_over_sockets_computes_what_the_whole_one_does(world: int) -> None:
    """Maps permuted to channels last keep their channels' split on the last axis: the layer norm
    exchanges its statistics, the FC layers on every position split by neurons, the layer scale keeps
    its own factors, and the maps permuted back are split by channels again."""
    net = Network.build(CONVNEXT)
    _check_plan(CONVNEXT, world)
    _assert_split_trains_as_whole(net, world, 4)


def test_torchvision_s_convnext_imported_splits_and_computes_what_the_whole_one_does() -> None:
    from torchvision_models import models

    from dnnbench.importers.torch_import import from_torch

    tm = models()
    config = tm.convnext.CNBlockConfig
    convnext = tm.convnext.ConvNeXt([config(8, 16, 1), config(16, None, 1)], num_classes=5)
    net = from_torch(convnext, (3, 16, 16))
    _check_plan(net.to_dict(), 2)
    _assert_split_trains_as_whole(net, 2, 4)


def test_validate_leaves_out_the_model_parallel_runs_of_a_network_it_cannot_split() -> None:
    runs = plan(False)
    kept, why = runnable(runs, smoke=False, net=Network.build(BRANCHING))
    assert kept == runs and why is None
    sliced = Network.build({"name": "unpool", "layers": _layers(  # a max unpooling: not split
        {"kind": "input", "shape": [3, 8, 8]}, {"kind": "conv2d", "out_channels": 4, "kernel": 3},
        {"kind": "max_unpool", "window": 2}, {"kind": "flatten"}, {"kind": "fc", "out_features": 10})})
    kept, why = runnable(runs, smoke=False, net=sliced)
    assert [r for r in kept if r.kind == "mp"] == [] and len(kept) == len(runs) - 1
    assert why is not None and why.startswith("model-parallel runs left out: layers[")


@pytest.mark.parametrize("world", [2, 3])
def test_a_stopped_branch_splits_and_trains_as_the_whole_network(world: int) -> None:
    """A straight-through branch (``x + q(x).detach()``): q is computed on every process's channels and
    takes no gradient; the split run's losses are the whole network's, its exchanges what the model prices."""
    spec = {"name": "straight-through", "layers": [
        {"kind": "input", "shape": [2, 8, 8]},
        {"kind": "conv2d", "name": "stem", "out_channels": 4, "kernel": 3, "padding": 1, "activation": "relu"},
        {"kind": "conv2d", "name": "q", "inputs": ["stem"], "out_channels": 4, "kernel": 1},
        {"kind": "stop_gradient", "name": "d"},
        {"kind": "add", "name": "s", "inputs": ["stem", "d"]},
        {"kind": "conv2d", "name": "c2", "out_channels": 4, "kernel": 3, "padding": 1},
        {"kind": "flatten"}, {"kind": "fc", "out_features": 3}]}
    net = Network.build(spec)
    assert not net.reaches_loss[net.layer_names.index("q")]
    _check_plan(spec, world)
    _assert_split_trains_as_whole(net, world, 4, abs_tol=1e-6)


@pytest.mark.parametrize("name", ["graph_conv", "lstm_by_hand", "token_pruning", "zeros_branches", "tied_autoencoder",
                                  "decoder_loop", "seq2seq_gru", "selective_scan", "mamba_block"])
def test_user_networks_split_and_train_as_the_whole_network(name: str) -> None:
    """Networks of tests/user_nets.py, imported (a product with a fixed adjacency, a zero state run through a
    gate's layer, tokens kept by a top k's positions, branches of zeros, a tied decoder), split over two
    processes: the runs train as the whole network, their exchanges what the model prices."""
    from user_nets import NETWORKS

    import dnnbench

    factory, shape, _ = NETWORKS[name]
    torch.manual_seed(0)
    net = dnnbench.from_torch(factory(), shape)
    _check_plan(net.to_dict(), 2)
    _assert_split_trains_as_whole(net, 2, 4, abs_tol=1e-5)


def test_a_vq_vae_s_codebook_read_in_two_shapes_splits_and_computes_as_the_whole_network() -> None:
    """The VQ-VAE of tests/importers/test_import_vqvae.py (its codebook a table added to the distances and
    the matrix of two products, one of them transposed; its losses returned), split over two processes:
    the first step computes what the whole network does. (The parts' copies of the codebook read in the
    other shape are updated apart from it, so later steps may differ: docs/validation.md.)"""
    from importers.test_import_vqvae import VQVAE

    import dnnbench

    torch.manual_seed(0)
    net = dnnbench.from_torch(VQVAE(), (3, 16, 16))
    _check_plan(net.to_dict(), 2)
    want = _whole_losses(net, 4)
    for losses in _split_losses(net, 2, 4):
        assert losses[0] == pytest.approx(want[0], rel=1e-4, abs=1e-5)


@pytest.mark.parametrize("cell", ["lstm", "rnn", "gru"])
def test_a_seq2seq_run_step_by_step_splits_and_trains_as_the_whole_network(cell: str) -> None:
    """An encoder whose final states start its decoder (imported step by step, docs/importing.md), split
    over two processes: the runs train as the whole network."""
    from importers.test_import_seq2seq import Seq2Seq

    import dnnbench

    torch.manual_seed(0)
    net = dnnbench.from_torch(Seq2Seq(cell), (3,))
    _check_plan(net.to_dict(), 2)
    _assert_split_trains_as_whole(net, 2, 4, abs_tol=1e-5)


def test_a_shared_fc_on_a_sum_of_its_owner_s_output_splits_and_trains_as_the_whole_network() -> None:
    """Two steps of a recurrence over one shared matrix: each process's slices of it are one set of
    parameters, whose gradients add up from both uses (before, each use had its own copy: the first
    step's loss agreed, the second, after one update, did not)."""
    spec = {"name": "shared-recurrence", "layers": [
        {"kind": "input", "shape": [12]}, {"kind": "fc", "name": "a", "out_features": 12, "activation": "tanh"},
        {"kind": "fc", "name": "hh", "out_features": 12}, {"kind": "add", "name": "m", "inputs": ["hh", "a"]},
        {"kind": "fc", "name": "hh2", "inputs": ["m"], "out_features": 12, "shares": "hh"},
        {"kind": "add", "name": "m2", "inputs": ["hh2", "m"]}, {"kind": "fc", "out_features": 3}]}
    torch.manual_seed(0)
    _assert_split_trains_as_whole(Network.build(spec), 2, 4, abs_tol=1e-6)
