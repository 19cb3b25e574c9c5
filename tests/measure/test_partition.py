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
    Attention,
    Conv2d,
    Flatten,
    FullyConnected,
    GroupNorm,
    LayerNorm,
    Permute,
    Repeat,
    Reshape,
    Slice,
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


@pytest.mark.parametrize("units,w", [(10, 2), (7, 2), (5, 3), (1, 2)])
def test_slices_cover_units(units: int, w: int) -> None:
    spans = [partition.slice_bounds(units, (p, w)) for p in range(w)]
    assert spans[0][0] == 0 and spans[-1][1] == units
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:], strict=False))


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


@pytest.mark.parametrize("spec", [BRANCHING, TWO_INPUTS, "mnist-adam", "chain-with-transposed"])
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


@pytest.mark.parametrize("spec,world", [(BRANCHING, 2), (BRANCHING, 3), (TWO_INPUTS, 2), ("lenet5", 3)])
def test_a_split_network_trained_over_sockets_computes_what_the_whole_one_does(spec: Any, world: int) -> None:
    """Every process starts from its slices of the whole network's weights: its loss equals the whole
    network's, and so does the loss after one update (the exchanged gradients are right)."""
    net = presets.network(spec) if isinstance(spec, str) else Network.build(spec)
    _assert_split_trains_as_whole(net, world, 8, rel=1e-5)


#: Kinds whose exchange the model prices: those that need their whole input, the split norms, and views
#: (nothing, or a regathered input where they cut the split axis).
PRICED = (Conv2d, FullyConnected, Attention, LayerNorm, GroupNorm, Reshape, Permute, Slice, Flatten, Repeat,
          Windows)


def _check_plan(spec: dict[str, Any], world: int) -> None:
    net = Network.build(spec)
    try:
        steps = partition.plan(net, world)
    except SpecError as err:
        assert "\n" not in str(err) and str(err).startswith("layers[")
        return
    moved = partition.exchanged_values(net, steps, world)
    arr = network_arrays(net)
    rows = dict(zip(arr.names, arr.fm_values, strict=True))
    axes, cuts = split_axes(net)  # the model's split axes and regathering views
    for step in steps:
        layer = net.layers[step.index]
        assert step.share is None or step.axis == axes[step.index], net.layer_names[step.index]
        assert cuts[step.index] == (isinstance(layer, (Reshape, Slice, Repeat, Windows)) and step.wants[0] is None)
        model = rows[net.layer_names[step.index]] * (world - 1) / world
        if isinstance(layer, (LayerNorm, GroupNorm)) and step.share is not None:
            # two partial statistics per token to every other process, each way: W times the model's
            # (W-1)/W of them (a few values per token beside attention's 4·S·D)
            model *= world
        if isinstance(layer, PRICED):
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


def test_a_layer_acting_on_another_axis_than_the_split_one_is_named() -> None:
    """A layer norm normalises the last axis: of maps split by channels (channels first), a one-line error."""
    spec = {"name": "ln-on-maps", "layers": _layers(
        {"kind": "input", "shape": [3, 8, 8]}, {"kind": "conv2d", "out_channels": 4, "kernel": 3, "padding": 1},
        {"kind": "layer_norm"}, {"kind": "flatten"}, {"kind": "fc", "out_features": 10})}
    with pytest.raises(SpecError, match=r"^layers\[2\]\.kind: 'layer_norm' acts along axis 2 of its input "):
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
    sliced = Network.build({"name": "prelu", "layers": _layers(  # a learned slope per value: not split
        {"kind": "input", "shape": [3, 8, 8]}, {"kind": "conv2d", "out_channels": 4, "kernel": 3},
        {"kind": "prelu"}, {"kind": "flatten"}, {"kind": "fc", "out_features": 10})})
    kept, why = runnable(runs, smoke=False, net=sliced)
    assert [r for r in kept if r.kind == "mp"] == [] and len(kept) == len(runs) - 1
    assert why is not None and why.startswith("model-parallel runs left out: layers[")
