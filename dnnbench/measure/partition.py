"""A network vertically partitioned over W processes (Adam's model parallelism, docs/model.md §5): the
plan of which units (feature maps of maps, features of vectors) each process holds of every layer's
output, and each process's share of the layers as PyTorch modules.

The plan follows the model's reconstruction for graphs (docs/model.md §5): a convolution or an FC layer
computes its slice of output units (⌈u/W⌉ or ⌊u/W⌋ of them, the larger first: the largest is the model's
⌈u/W⌉) from its whole input, which is exchanged unless every process holds it already (the network's
input); a depthwise convolution needs only its own maps; every other layer (activations, normalisation
over channels, pooling, add, mul, concat, flatten, a ViT's maps viewed as a sequence of patches) keeps
the partition of its input and exchanges nothing; a reshape that divides the split axis, a slice along
it, and a layer that acts along another axis than the split one (a layer norm of maps split by channels)
regather their input (:mod:`dnnbench.model.split_axes`): every process assembles it whole, applies the
layer, and keeps its range of the output's units (a layer's weights on every process, their gradients
summed). A softmax at the end runs on the whole logits, and a network without one has its logits
assembled before the loss. Products of two layer outputs (``matmul``, ``sdpa``: attention written by
hand) follow :func:`dnnbench.model.split_axes.product_split`: split along a leading axis (the heads) that
every split operand shares, each process multiplies its own heads; otherwise each computes its range of
the output's rows, from its rows of the first operand and the other operands assembled whole. A 3-D
convolution computes its own volumes from its whole input; ``unfold`` keeps the maps' split (each map's
rows of the columns) and ``fold`` takes it back. A regathered layer of one unit is computed whole by
every process; a layer every process computes whole (from the input, or after such a layer) holds its
whole weights, their gradients summed over the processes.

A :data:`Share` is, per process, the units it holds in the order it holds them, or None when every
process holds all of them (the input, and layers computed from it alone). Concatenation makes shares
that are not contiguous ranges; when every process holds the input, a concatenation of it with a split
output gives shares that overlap. An exchange (:func:`realign`) therefore moves, from each process,
the units it is the first to hold, and lets the receiver put every unit in its place. torch is
imported inside functions only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import SpecError
from ..model.split_axes import product_split, split_axes, unit_axis, view_groups
from ..specs import Network
from ..specs.layers import (
    RECURRENT_GATES,
    Activation,
    AdaptivePool,
    Add,
    Attention,
    BatchNorm,
    Bias,
    ClassToken,
    Compare,
    Concat,
    Conv2d,
    Conv3d,
    ConvTranspose2d,
    ConvTranspose3d,
    CumSum,
    Dropout,
    Embedding,
    Flatten,
    Fold,
    FullyConnected,
    GroupNorm,
    InputLayer,
    LayerNorm,
    LocalResponseNorm,
    MatMul,
    Multiply,
    Pad,
    Permute,
    Pool,
    Pool3d,
    PositionEmbedding,
    PReLU,
    Recurrent,
    Reduce,
    Repeat,
    Reshape,
    Scale,
    ScaledDotProductAttention,
    SelectToken,
    Slice,
    Softmax,
    StopGradient,
    Unfold,
    Upsample,
    Where,
    Windows,
    Zeros,
    _pair,
)

#: Per process, the units it holds (in order); None: every process holds every unit.
Share = tuple[np.ndarray, ...] | None

#: Layers that act on each unit alone and keep their input's partition.
PER_UNIT_KINDS = (Activation, Dropout, Pool, Pool3d, AdaptivePool, BatchNorm, LocalResponseNorm, Upsample, Pad,
                  PositionEmbedding, ClassToken, SelectToken, Scale, GroupNorm, Bias, PReLU, CumSum, StopGradient)
#: Element-wise layers of several operands, broadcast over each other.
ELEMENTWISE_KINDS = (Add, Multiply, Compare, Where)
#: Kinds a process may hold none of the units of (a layer of fewer units than processes: a regression's
#: one output): FC, embedding and recurrent layers of no units, and what keeps their split (or views it);
#: a constant factor (``Scale`` of ``learned=False``, a mask's fill) too.
EMPTY_SHARE_KINDS = (FullyConnected, Embedding, Recurrent, Activation, Dropout, BatchNorm, Add, Multiply, Concat,
                     Flatten, Reshape, Permute, Softmax, StopGradient)
#: Every kind a partitioned run takes.
PARTITIONED_KINDS = (InputLayer, Conv2d, Conv3d, Unfold, Fold, FullyConnected, Flatten, *ELEMENTWISE_KINDS, Concat,
                     Softmax, Embedding, LayerNorm, Attention, Recurrent, Reshape, Permute, Slice, Repeat, Windows,
                     MatMul, ScaledDotProductAttention, Reduce, Zeros, *PER_UNIT_KINDS)
#: Products of two layer outputs (attention written by hand).
PRODUCT_KINDS = (MatMul, ScaledDotProductAttention)
#: Kinds a partitioned run takes on values of any rank (views, and layers acting on each value alone).
ANY_RANK_KINDS = (Conv3d, Reshape, Permute, Flatten, Slice, Repeat, Windows, Activation, Dropout, *ELEMENTWISE_KINDS,
                  Concat, Scale, Softmax, MatMul, ScaledDotProductAttention, Bias, Reduce, Zeros, PReLU, CumSum,
                  BatchNorm, Pool3d, StopGradient)
#: Views and copies: the split follows the model's split axes (regathering where they cut it).
VIEW_KINDS = (Flatten, Reshape, Permute, Slice, Repeat, Windows)
#: Kinds that take feature maps only.
MAP_KINDS = (Conv2d, Pool, AdaptivePool, LocalResponseNorm, Upsample, Pad, Unfold)


def slice_bounds(units: int, part: tuple[int, int]) -> tuple[int, int]:
    """[start, stop) of process p's share of ``units`` split over W: shares of ⌈units/W⌉ and ⌊units/W⌋
    units, the larger first, so that the largest share is the model's ⌈u/W⌉ (its imbalance ι(W)) and
    every process holds at least one unit once there are as many units as processes."""
    p, w = part
    size, extra = divmod(units, w)
    start = p * size + min(p, extra)
    return start, start + size + (p < extra)


def split(units: int, world: int) -> Share:
    """The units split in ranges over ``world`` processes (a conv's maps, an FC layer's neurons)."""
    return tuple(np.arange(*slice_bounds(units, (r, world))) for r in range(world))


def same(a: Share, b: Share) -> bool:
    """Whether two shares put the same units on every process, in the same order."""
    if a is None or b is None:
        return a is None and b is None
    return all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))


def _normal(share: Share, units: int) -> Share:
    """None for a share in which every process holds every unit in order."""
    if share is not None and all(np.array_equal(s, np.arange(units)) for s in share):
        return None
    return share


@dataclass(frozen=True)
class Step:
    """One layer of the plan: its inputs, the share each is brought to first (``keep``: as it is) and
    the per-sample axis it is brought along (``dims``), the share of its output and the per-sample axis
    of its units (``axis``), and for a convolution the first and last group each process's maps lie in."""

    index: int
    inputs: tuple[int, ...]
    wants: tuple[Share | str, ...]
    share: Share
    groups_span: tuple[tuple[int, int], ...] = ()
    inner: Share = None  # attention split by heads: each process's columns of the head outputs
    dims: tuple[int, ...] = ()
    axis: int = 0
    rows: bool = False  # a product: each process multiplies its range (``share``) of the first operand's rows
    regathers: bool = False  # the whole input assembled, the layer applied, each process its range of the output
    aligned: tuple[tuple[int, int], ...] = ()  # (operand, axis): assembled whole, then this process's units taken


def _check_weight_norm(layer: Any, where: str) -> None:
    """A weight normalisation splits with its layer's output units where each unit's magnitude is its
    own (g per output of a convolution or an fc layer, or of a transposed convolution without groups);
    one per input, or one for the whole weight, normalises over every process's units: a one-line error."""
    mode = getattr(layer, "weight_norm", "none")
    transposed = isinstance(layer, (ConvTranspose2d, ConvTranspose3d))
    if mode == "none" or mode == "output" and not (transposed and layer.groups > 1):
        return
    raise SpecError(f"{where}.weight_norm", mode, "cannot be split by dnnbench's model-parallel runs (its norm "
                    "spans every process's units; they split weight norms of one magnitude per output unit)")


def check(net: Network, world: int) -> None:
    """A one-line error unless a partitioned run can split ``net`` over ``world`` processes."""
    plan(net, world)


def plan(net: Network, world: int) -> list[Step]:
    """The partition plan of ``net`` over ``world`` processes (the module docstring); a one-line
    :class:`SpecError` for a layer it cannot split."""
    shares: dict[int, Share] = {}
    axes: dict[int, int] = {}  # the per-sample axis of each output's units
    view_axes, regathers = split_axes(net)
    steps: list[Step] = []
    last = len(net.layers) - 1
    for i, (layer, ids, shape) in enumerate(zip(net.layers, net.input_indices, net.shapes, strict=True)):
        where = f"layers[{i}]"
        if not isinstance(layer, PARTITIONED_KINDS) or isinstance(layer, ConvTranspose3d):
            raise SpecError(f"{where}.kind", layer.kind, "cannot be split by dnnbench's model-parallel runs "
                            "(they split conv2d, conv3d, fc, pooling, add, mul, comparisons, where, concat, "
                            "embeddings, layer and group norm, attention, recurrent layers, matmul, sdpa, layer "
                            "scales, added biases, reductions, running sums, zeros, unfold, fold, views, slices, "
                            "copies and element-wise layers)")
        in_shape = net.shapes[ids[0]] if ids else shape
        if (len(shape) not in (1, 2, 3) and not isinstance(layer, (*ANY_RANK_KINDS, InputLayer))) or (
                isinstance(layer, MAP_KINDS) and len(in_shape) != 3):
            raise SpecError(f"{where}.shape", list(shape), f"of a {layer.kind} layer cannot be split by dnnbench's "
                            "model-parallel runs (they split feature maps (C, H, W) by channels, and vectors and "
                            "(S, D) sequences by their last axis)")
        if isinstance(layer, InputLayer):
            shares[i], axes[i] = None, unit_axis(shape)
            continue
        _check_weight_norm(layer, where)
        ins = [shares[k] for k in ids]
        held_axis = axes[ids[0]] if ins and ins[0] is not None else None  # the first input's, where split
        _check_axis(layer, in_shape, held_axis, where)
        wants: list[Share | str] = ["keep"] * len(ids)
        dims = [axes[k] for k in ids]
        span: tuple[tuple[int, int], ...] = ()
        inner: Share = None
        rows = regather = False
        aligned: list[tuple[int, int]] = []
        axis = unit_axis(shape)
        if isinstance(layer, Zeros):  # every process the whole zeros (its input gives only the batch)
            shares[i], axes[i] = None, unit_axis(shape)
            steps.append(Step(i, tuple(ids), ("keep",) * len(ids), None, dims=tuple(axes[k] for k in ids)))
            continue
        if regathers[i] and ins[0] is not None and not isinstance(layer, (*PRODUCT_KINDS, *ELEMENTWISE_KINDS)):
            # a view that cuts the split axis, a layer acting along another axis than the split one: the
            # whole input, the layer, each process its range of the output along the model's split axis
            split_at = view_axes[i]
            regather, wants = True, [None] * len(ids)
            # one unit along that axis (the model's None: a norm's one value, a gate's one map), or fewer
            # than processes: every process computes the whole output
            axis = unit_axis(shape) if split_at is None else split_at
            share = None
            if split_at is not None and shape[axis] >= world:
                _enough(shape[axis], world, where, layer.kind)
                share = split(shape[axis], world)
        elif isinstance(layer, Conv2d) and 1 < layer.groups == net.shapes[ids[0]][0]:
            # depthwise: each process the maps of its own input maps (every process its range of them
            # when it holds the input whole): nothing exchanged
            held = ins[0]
            if held is None:
                _enough(layer.groups, world, where, layer.kind)
                held = split(layer.groups, world)
                wants, dims = [held], [0]
            assert held is not None
            share: Share = _expand(held, shape[0] // layer.groups)
        elif isinstance(layer, Conv2d):
            units = shape[0]
            _enough(units, world, where, layer.kind)
            share = split(units, world)
            assert share is not None
            if layer.groups > 1:  # the groups each process's maps lie in; the input exchanged whole
                opg = units // layer.groups
                span = tuple((int(o[0]) // opg, int(o[-1]) // opg) for o in share)
            wants = [None]
        elif isinstance(layer, Conv3d):  # its own volumes from the whole input
            if layer.groups > 1:
                raise SpecError(f"{where}.groups", layer.groups, "cannot be split by dnnbench's model-parallel runs "
                                "(they split 3-D convolutions of one group)")
            _enough(shape[0], world, where, layer.kind)
            wants, share, axis = [None], split(shape[0], world), 0
        elif isinstance(layer, Unfold) and ins[0] is not None:  # each map's k_h·k_w rows of the columns
            share, axis = _expand(ins[0], math.prod(_pair(layer.window))), 0
        elif isinstance(layer, Fold) and ins[0] is not None:
            # each process its range of the maps, from their k_h·k_w rows of the columns (realigned where
            # its rows are not whole maps' rows; the model does not price that)
            _enough(shape[0], world, where, layer.kind)
            share = split(shape[0], world)
            assert share is not None
            want = _expand(share, math.prod(_pair(layer.window)))
            wants, dims, axis = ["keep" if same(ins[0], want) else want], [axes[ids[0]]], 0
        elif isinstance(layer, (FullyConnected, Embedding)):  # neurons; a table's columns (with fewer than
            # processes, the last ones hold none: a regression's or a click model's one output)
            wants, share = [None], split(shape[axis], world)
        elif isinstance(layer, Recurrent):  # by hidden units (each direction's), the whole input in; every
            # step's hidden state assembled whole for the next step (_SplitRecurrent)
            if layer.projection:
                raise SpecError(f"{where}.projection", layer.projection, "cannot be split by dnnbench's "
                                "model-parallel runs (they split recurrent layers without a projection)")
            units = split(layer.hidden, world)  # with fewer than processes, the last ones hold none
            assert units is not None
            share = tuple(np.concatenate([u + d * layer.hidden for d in range(layer.directions)]) for u in units)
            wants, axis = [None], len(shape) - 1
        elif isinstance(layer, Attention):  # by heads: the whole sequence in, the whole head outputs out
            _enough(layer.heads, world, where, layer.kind)
            heads = split(layer.heads, world)
            assert heads is not None
            inner = _expand(heads, shape[-1] // layer.heads)
            wants, share = [None], split(shape[-1], world)
        elif isinstance(layer, Softmax) and i == last:
            wants, share = [None], None
        elif isinstance(layer, PRODUCT_KINDS):
            wants, share, axis, dims, rows, aligned = _product(layer, ins, [net.shapes[k] for k in ids],
                                                               [axes[k] for k in ids], shape, world, where)
        elif isinstance(layer, VIEW_KINDS) and ins[0] is not None:
            axis = view_axes[i]  # the model's rules (split_axes): where the split lies after the view
            if isinstance(layer, (Flatten, Reshape)):  # the split axis's group merged into one output axis
                share = _merged(ins[0], in_shape, shape, axes[ids[0]])
            elif isinstance(layer, Repeat) and layer.axis % len(in_shape) == axis:  # interleaved copies
                assert ins[0] is not None
                share = _expand(ins[0], layer.times)
            else:  # a permutation moves the split; a slice, copies or windows along another axis keep it
                share = ins[0]
        elif isinstance(layer, VIEW_KINDS):  # of a value every process holds whole
            share = None
        elif isinstance(layer, ELEMENTWISE_KINDS):
            wants, share, axis, dims, aligned = _elementwise(ins, [net.shapes[k] for k in ids],
                                                             [axes[k] for k in ids], shape)
        elif isinstance(layer, Concat):
            wants, share, axis, dims = _concat(layer, ins, [net.shapes[k] for k in ids], [axes[k] for k in ids],
                                               world, where)
        else:  # per unit: the input's partition (a selected token drops the axis before the units)
            share = ins[0]
            if share is not None:
                axis = axes[ids[0]] - (len(in_shape) - len(shape))
                if isinstance(layer, Reduce):  # the split axis moves down past the reduced axes before it
                    axis = int(view_axes[i])
        if (share is not None and not isinstance(layer, EMPTY_SHARE_KINDS) and any(len(s) == 0 for s in share)
                and not (isinstance(layer, Scale) and not layer.learned)):
            raise SpecError(f"{where}.kind", layer.kind, f"would leave a process without units ({shape[axis]} over "
                            f"{world}); dnnbench's model-parallel runs do that only in FC, embedding and recurrent "
                            "layers and in activations, dropout, batch norms, constant factors, softmax, adds, "
                            "products, concatenations, flattens, reshapes and permutes of their outputs")
        shares[i], axes[i] = share, axis
        steps.append(Step(i, tuple(ids), tuple(wants), share, span, inner, tuple(dims), axis, rows, regather,
                          tuple(aligned)))
    return steps


def _product(layer: MatMul | ScaledDotProductAttention, ins: list[Share], shapes: list[tuple[int, ...]],
             axes: list[int], out: tuple[int, ...], world: int,
             where: str) -> tuple[list[Share | str], Share, int, list[int], bool, list[tuple[int, int]]]:
    """A product's (wants, share, axis, dims, rows, aligned) by
    :func:`~dnnbench.model.split_axes.product_split`: by a leading axis every split operand shares (a
    split operand held otherwise, and one held whole of that axis's size, brought to the first split
    one's share; one broadcast over it kept), by the output's rows (the first operand kept where split
    by its rows, else assembled and each process taking its rows; the others assembled whole), or, for
    one row, by the largest leading axis (every operand assembled whole, each process taking its own
    positions of those of that axis's size)."""
    held = [a if s is not None else None for a, s in zip(axes, ins, strict=True)]
    axis, assembled = product_split(shapes, held, out)
    dims = list(axes)
    if axis is None:  # every operand held whole: every process computes it whole
        return ["keep"] * len(ins), None, unit_axis(out), dims, False, []
    if axis < len(out) - 2 and assembled:  # one row: by the largest leading axis, the operands assembled
        _enough(out[axis], world, where, layer.kind)
        return ([None] * len(ins), split(out[axis], world), axis, dims, False,
                [(j, axis) for j, sh in enumerate(shapes) if sh[axis] == out[axis]])
    if axis < len(out) - 2:  # by a leading axis (the heads)
        ref = next(s for s in ins if s is not None)
        wants: list[Share | str] = [
            "keep" if (s is not None and same(s, ref)) or (s is None and sh[axis] != out[axis]) else ref
            for s, sh in zip(ins, shapes, strict=True)]
        return wants, ref, axis, [axis] * len(ins), False, []
    if ins[0] is not None and axes[0] == len(shapes[0]) - 2:  # the first operand already split by its rows
        return ["keep", *([None] * (len(ins) - 1))], ins[0], axis, dims, False, []
    _enough(out[axis], world, where, layer.kind)
    return [None] * len(ins), split(out[axis], world), axis, dims, True, []


def _check_axis(layer: Any, in_shape: tuple[int, ...], held_axis: int | None, where: str) -> None:
    """A one-line error for a depthwise convolution of maps split along another axis than their channels
    (the other layers that act along one axis regather such an input, :func:`plan`)."""
    need = 0 if isinstance(layer, Conv2d) and 1 < layer.groups == in_shape[0] else None
    if held_axis is not None and need is not None and held_axis != need:
        raise SpecError(f"{where}.kind", layer.kind, f"acts along axis {need} of its input {list(in_shape)}, which "
                        f"dnnbench's model-parallel runs hold split along axis {held_axis}")


def _enough(units: int, world: int, where: str, kind: str) -> None:
    """A one-line error unless every process gets at least one of the layer's output units."""
    if units < world:
        raise SpecError(f"{where}.kind", kind, f"has {units} output units, fewer than the {world} processes of a "
                        "model-parallel run: one would hold none")


def _expand(share: tuple[np.ndarray, ...], per: int) -> Share:
    """Each unit of ``share`` as the ``per`` units it becomes (a map's values when flattened, a depthwise
    convolution's maps of one input map)."""
    return tuple((s[:, None] * per + np.arange(per)[None, :]).reshape(-1) for s in share)


def _merged(share: Share, in_shape: tuple[int, ...], out: tuple[int, ...], axis: int) -> Share:
    """A split value's share after a reshape that merges its split axis with the axes around it into one
    output axis (a flatten, (C/g, g, H, W) viewed as (C, H, W)): the positions of each process's units
    of ``axis`` in the merged axis, in the order the process's own part reshapes (its units in its
    order along ``axis``)."""
    assert share is not None
    for ins, _ in view_groups(in_shape, out):
        if axis in ins:
            sub = tuple(in_shape[i] for i in ins)
            positions = np.arange(math.prod(sub)).reshape(sub)
            return tuple(np.take(positions, s, axis=axis - ins.start).reshape(-1) for s in share)
    raise AssertionError("the split axis lies in no group of the reshape")


def _elementwise(ins: list[Share], shapes: list[tuple[int, ...]], axes: list[int], out: tuple[int, ...]
                 ) -> tuple[list[Share | str], Share, int, list[int], list[tuple[int, int]]]:
    """Add and mul (:func:`~dnnbench.model.split_axes.elementwise_split`): the operands of the output's
    units take the first split one's partition; an operand broadcast over the units (one unit, or none
    of their axis) is held whole; one split along another axis is assembled whole and each process takes
    its own units of it. Returns the wants, the output's share and unit axis, the axis each operand is
    brought along, and the (operand, axis) pairs of those assembled and then taken."""
    split_at = [(s, len(out) - len(sh) + a) for s, sh, a in zip(ins, shapes, axes, strict=True) if s is not None]
    if not split_at:
        return ["keep"] * len(ins), None, unit_axis(out), list(axes), []
    share, axis = split_at[0]
    wants: list[Share | str] = []
    dims: list[int] = []
    aligned: list[tuple[int, int]] = []
    for j, (s, sh, a) in enumerate(zip(ins, shapes, axes, strict=True)):
        own = axis - (len(out) - len(sh))  # the operand's axis that broadcasts against the output's units
        spans = own >= 0 and sh[own] == out[axis]
        if s is not None and a != own:  # split along another axis: assembled along it, then its units taken
            wants.append(None)
            dims.append(a)
            if spans:
                aligned.append((j, own))
            continue
        wants.append(share if spans else None if s is not None else "keep")
        dims.append(max(own, 0))
    return wants, share, axis, dims, aligned


def _concat(layer: Concat, ins: list[Share], shapes: list[tuple[int, ...]], axes: list[int], world: int,
            where: str) -> tuple[list[Share | str], Share, int, list[int]]:
    """Along the units: each process holds its share of every input, in the output's numbering. Along
    another axis: the inputs take the first split one's partition."""
    split_axes = {a for s, a in zip(ins, axes, strict=True) if s is not None}
    if not split_axes:
        return ["keep"] * len(ins), None, unit_axis(shapes[0]), list(axes)
    if len(split_axes) > 1:
        raise SpecError(f"{where}.inputs", "split along different axes", "inputs dnnbench's model-parallel runs "
                        "hold split along the same axis")
    axis = split_axes.pop()
    if layer.axis % len(shapes[0]) != axis:
        return _elementwise(ins, shapes, axes, shapes[0])[:4]
    parts: list[list[np.ndarray]] = [[] for _ in range(world)]
    offset = 0
    for s, sh in zip(ins, shapes, strict=True):
        for r in range(world):
            parts[r].append(offset + (np.arange(sh[axis]) if s is None else s[r]))
        offset += sh[axis]
    return ["keep"] * len(ins), tuple(np.concatenate(p) for p in parts), axis, [axis] * len(ins)


def owned(share: Share, units: int) -> tuple[np.ndarray, ...]:
    """Per process, the positions (in its own order) of the units it is the first process to hold:
    what it sends in an exchange. Together they cover every unit once."""
    assert share is not None
    seen = np.zeros(units, dtype=bool)
    out = []
    for s in share:
        first = ~seen[s]
        # a unit held twice by one process (never made by the plan) is sent once
        _, idx = np.unique(s, return_index=True)
        once = np.zeros(len(s), dtype=bool)
        once[idx] = True
        out.append(np.flatnonzero(first & once))
        seen[s] = True
    if not seen.all():
        raise ValueError("a share that does not cover every unit cannot be assembled")
    return tuple(out)


def gather_order(share: Share, units: int) -> np.ndarray | None:
    """Where each unit lies in the processes' sent parts laid end to end (rank order); None when they
    already lie in unit order."""
    assert share is not None
    pos = owned(share, units)
    sent = np.concatenate([s[p] for s, p in zip(share, pos, strict=True)])
    if np.array_equal(sent, np.arange(units)):
        return None
    return np.argsort(sent)


def modules(net: Network, steps: list[Step], rank: int, world: int) -> dict[int, Any]:
    """This process's module of each step's layer (None: the layer is the identity here), its weights
    its slice of the layer's."""
    import torch
    import torch.nn as nn

    from .torchnet import _act, _graph_module, _module, lookup, weight_normed

    torch.manual_seed(rank)
    out: dict[int, Any] = {}
    for step in steps:
        layer = net.layers[step.index]
        in_shape = net.shapes[step.inputs[0]]
        if (step.share is not None and len(step.share[rank]) == 0 and not step.regathers
                and (isinstance(layer, (Activation, Dropout, BatchNorm))
                     or isinstance(layer, Scale) and not layer.learned)):
            out[step.index] = nn.Identity()  # none of its units here: its input is empty too
            continue
        if step.aligned:  # operands assembled whole, then this process's units of them taken
            assert step.share is not None
            inner = (_SplitSdpa(layer, in_shape, net.shapes[step.inputs[1]], step.axis, step.share[rank], False,
                                world) if isinstance(layer, ScaledDotProductAttention)
                     else _module(layer, in_shape, f"layers[{step.index}]"))
            out[step.index] = _Aligned(inner, step.aligned, step.share[rank])
        elif step.regathers:  # the whole layer on the whole input, then this process's range of its output
            keep = [] if step.share is None else [_Narrow(step.axis, int(step.share[rank][0]), len(step.share[rank]))]
            out[step.index] = nn.Sequential(_module(layer, in_shape, f"layers[{step.index}]"), *keep)
        elif isinstance(layer, Conv2d):
            out[step.index] = _conv_slice(layer, in_shape, net.shapes[step.index], step, rank)
        elif isinstance(layer, Conv3d):
            assert step.share is not None
            own = layer.model_copy(update={"out_channels": len(step.share[rank])})
            out[step.index] = _module(own, in_shape, f"layers[{step.index}]")
        elif isinstance(layer, FullyConnected):
            assert step.share is not None
            if len(in_shape) == 2:  # on every token
                mods: list[Any] = [weight_normed(nn.Linear(in_shape[1], len(step.share[rank]), bias=layer.bias),
                                                 layer.weight_norm)]
            else:
                mods = [nn.Flatten()] if len(in_shape) > 1 else []
                mods.append(weight_normed(nn.Linear(math.prod(in_shape), len(step.share[rank]), bias=layer.bias),
                                          layer.weight_norm))
            act = _act(layer.activation)
            out[step.index] = nn.Sequential(*mods, *([act] if act is not None else []))
        elif isinstance(layer, BatchNorm):  # its own channels
            held = in_shape[0] if step.share is None else len(step.share[rank])
            out[step.index] = _module(layer, (held, *in_shape[1:]), f"layers[{step.index}]")
        elif isinstance(layer, Embedding):
            assert step.share is not None
            out[step.index] = lookup(layer.vocabulary, len(step.share[rank]))
        elif isinstance(layer, (PositionEmbedding, ClassToken)):  # its own columns of the table
            held = in_shape[-1] if step.share is None else len(step.share[rank])
            out[step.index] = _module(layer, (*in_shape[:-1], held), f"layers[{step.index}]")
        elif isinstance(layer, LayerNorm) and step.share is not None:
            out[step.index] = _SplitLayerNorm(layer, in_shape[-1], step.share, rank, world)
        elif isinstance(layer, GroupNorm) and step.share is not None:
            out[step.index] = _SplitGroupNorm(layer, in_shape, step.share, rank, world)
        elif isinstance(layer, Attention):
            out[step.index] = _SplitAttention(layer, in_shape, step, rank, world)
        elif isinstance(layer, Recurrent):
            out[step.index] = _SplitRecurrent(layer, in_shape, rank, world)
        elif isinstance(layer, Bias):
            out[step.index] = _SplitBias(layer, in_shape, step.axis, None if step.share is None else step.share[rank],
                                         world)
        elif isinstance(layer, ScaledDotProductAttention) and (step.share is not None or layer.bias_weights):
            out[step.index] = _SplitSdpa(layer, in_shape, net.shapes[step.inputs[1]], step.axis,
                                         None if step.share is None else step.share[rank], step.rows, world)
        elif isinstance(layer, MatMul) and step.rows:
            assert step.share is not None
            lo, n = int(step.share[rank][0]), len(step.share[rank])
            out[step.index] = _graph_module(lambda self, a, b, lo=lo, n=n: a.narrow(-2, lo, n) @ b)
        elif isinstance(layer, Reshape) and step.share is not None:  # its own units along the view's axis
            local = _local(net.shapes[step.index], step.axis, step.share[rank])
            if not len(step.share[rank]):  # none of its units here (a view of an FC layer's too few): empty
                out[step.index] = _graph_module(lambda self, x, local=local: x.reshape(x.shape[0], *local))
            else:
                out[step.index] = _module(Reshape(shape=local), in_shape, f"layers[{step.index}]")
        elif isinstance(layer, Scale) and step.share is not None:  # its own units' factors
            out[step.index] = _module(layer, _local(in_shape, step.axis, step.share[rank]), f"layers[{step.index}]")
            if layer.shared:  # one factor every process holds and computes the gradient of its own part of
                _sum_gradients(out[step.index], world)
        elif isinstance(layer, PReLU) and step.share is not None:  # its own channels' slopes, or the one slope
            out[step.index] = _module(layer, _local(in_shape, step.axis, step.share[rank]), f"layers[{step.index}]")
            if not layer.per_channel:
                _sum_gradients(out[step.index], world)
        else:
            out[step.index] = _module(layer, in_shape, f"layers[{step.index}]")
        if step.share is None or step.regathers:
            # every process holds the whole layer and computes the gradient of its own part of what
            # follows: the weights' gradients are summed over the processes
            _sum_gradients(out[step.index], world)
    _tie_shared(net, out)
    return out


def _tie_shared(net: Network, mods: dict[int, Any]) -> None:
    """A layer that ``shares`` another's parameters uses this process's slices of them (both are split
    alike: the same kind and units), so the slices' gradients add up from both uses, as in the whole
    network (:func:`~dnnbench.measure.torchnet._tie`). A parameter read in another shape (a VQ-VAE's
    codebook as a table and as a product's matrix) is split along other axes by the two layers: each
    process's parts keep copies of their own, which start equal and are updated apart (docs/validation.md)."""
    from .torchnet import _share

    index = {name: i for i, name in enumerate(net.layer_names)}
    for i, layer in enumerate(net.layers):
        owner = index.get(layer.shares) if layer.shares else None
        if owner is not None and mods.get(i) is not None and mods.get(owner) is not None:
            _share(mods[i], mods[owner], views=False)


def _local(shape: tuple[int, ...], axis: int, held: np.ndarray) -> tuple[int, ...]:
    """The per-sample shape of a process's part of a value: its ``held`` units along ``axis``."""
    return (*shape[:axis], len(held), *shape[axis + 1:])


def take_weights(net: Network, steps: list[Step], mods: dict[int, Any], whole: Any, rank: int) -> None:
    """This process's modules given their slices of the weights of ``whole``, the unpartitioned model
    (:func:`.torchnet.build_model`): the partitioned network then computes what the whole one does."""
    import torch

    from .torchnet import held_tensors

    held = dict(zip(whole.layer_index, (whole_module(whole, i) for i in whole.layer_index), strict=True))
    with torch.no_grad():
        for step in steps:
            mine, theirs = mods[step.index], held.get(step.index)
            if mine is None or theirs is None or step.share is not None and len(step.share[rank]) == 0:
                continue  # (none of the layer's units here: nothing to take)
            layer = net.layers[step.index]
            if isinstance(layer, (Bias, ScaledDotProductAttention)):  # a bias's whole table on every process
                for a, b in zip(mine.parameters(), theirs.parameters(), strict=True):
                    a.copy_(b)
                continue
            if getattr(layer, "weight_norm", "none") != "none":  # the weights g·v/‖v‖ come to the same
                _take_normed(net, step, rank, mine, theirs)
                continue
            mp = [p for p in mine.parameters()] + [b for b in mine.buffers()]
            tp = held_tensors(theirs) + [b for b in theirs.buffers()]
            if isinstance(layer, Conv2d):
                assert step.share is not None
                _conv_weights(net, step, rank, mp, tp)
                continue
            rows = None if step.share is None else torch.as_tensor(step.share[rank], dtype=torch.long)
            if isinstance(layer, Recurrent):  # its units' rows of every gate's block, per layer and direction
                h = layer.hidden
                lo, hi = slice_bounds(h, (rank, len(step.share or ())))
                gates = torch.cat([torch.arange(lo, hi) + g * h for g in range(RECURRENT_GATES[layer.mode])])
                for name, param in mine.named_parameters():
                    param.copy_(getattr(theirs.rnn, name).index_select(0, gates))
                continue
            if isinstance(layer, Attention):
                assert step.inner is not None and rows is not None
                d = net.shapes[step.index][-1]
                heads = torch.as_tensor(step.inner[rank], dtype=torch.long)
                qkv = torch.cat([heads, heads + d, heads + 2 * d])  # its heads' rows of the q, k and v blocks
                mha = theirs.mha
                mine.qkv.weight.copy_(mha.in_proj_weight.index_select(0, qkv))
                mine.out.weight.copy_(mha.out_proj.weight.index_select(0, rows))
                if layer.bias:
                    mine.qkv.bias.copy_(mha.in_proj_bias.index_select(0, qkv))
                    mine.out.bias.copy_(mha.out_proj.bias.index_select(0, rows))
                continue
            # a table's columns (an embedding's, a position table's, a class token's); a layer scale's
            # factors along its axis; else rows
            axis = 1 if isinstance(layer, (Embedding, PositionEmbedding, ClassToken)) else 0
            if isinstance(layer, Scale):
                axis = layer.axis % len(net.shapes[step.index])
            for a, b in zip(mp, tp, strict=True):
                whole = rows is None or b.dim() == 0 or b.shape == a.shape
                a.copy_(b if whole else b.index_select(axis, rows))


def _take_normed(net: Network, step: Step, rank: int, mine: Any, theirs: Any) -> None:
    """A weight-normalised layer's slice (g per output unit, :func:`_check_weight_norm`): its rows of the
    whole layer's weight g·v/‖v‖, set through its own normalisation (which then holds v and g of those
    rows, as the whole layer does), and of the bias."""
    import torch
    from torch.nn.utils import parametrize

    def normed(module: Any) -> Any:
        return next(m for m in module.modules() if parametrize.is_parametrized(m, "weight"))

    own, whole = normed(mine), normed(theirs)
    mw, tw = [own.weight.detach().clone(), *([own.bias] if own.bias is not None else [])], \
        [whole.weight.detach(), *([whole.bias] if whole.bias is not None else [])]
    layer = net.layers[step.index]
    if all(a.shape == b.shape for a, b in zip(mw, tw, strict=True)):  # the whole layer on this process
        for a, b in zip(mw, tw, strict=True):
            a.copy_(b)
    elif isinstance(layer, Conv2d):
        _conv_weights(net, step, rank, mw, tw)
    else:  # fc, conv3d: their rows
        rows = torch.as_tensor(step.share[rank], dtype=torch.long)  # type: ignore[index]
        for a, b in zip(mw, tw, strict=True):
            a.copy_(b if b.shape == a.shape else b.index_select(0, rows))
    own.weight = mw[0]


def _conv_weights(net: Network, step: Step, rank: int, mine: list[Any], theirs: list[Any]) -> None:
    """A convolution's slice of the whole one's weight and bias (a transposed convolution's weight is
    (in, out / groups, ...), a convolution's (out, in / groups, ...))."""
    import torch

    layer = net.layers[step.index]
    assert isinstance(layer, Conv2d) and step.share is not None
    c_in, units = net.shapes[step.inputs[0]][0], net.shapes[step.index][0]
    own = step.share[rank]
    if 1 < layer.groups == c_in:  # depthwise: its maps; a transposed one's weight rows are its input maps
        out_rows = torch.as_tensor(own, dtype=torch.long)
        w_rows = torch.as_tensor(own[::units // c_in] // (units // c_in), dtype=torch.long) \
            if isinstance(layer, ConvTranspose2d) else out_rows
        mine[0].copy_(theirs[0].index_select(0, w_rows))
    else:
        g0, g1 = step.groups_span[rank] if layer.groups > 1 else (0, 0)
        opg, ipg = units // layer.groups, c_in // layer.groups
        lo, hi = (int(own[0]), int(own[-1]) + 1) if layer.groups == 1 else (g0 * opg, (g1 + 1) * opg)
        out_rows = torch.arange(lo, hi)
        if isinstance(layer, ConvTranspose2d):
            mine[0].copy_(theirs[0][:, lo:hi] if layer.groups == 1 else theirs[0][g0 * ipg:(g1 + 1) * ipg])
        else:
            mine[0].copy_(theirs[0][lo:hi])
    if layer.bias:
        mine[1].copy_(theirs[1].index_select(0, out_rows))


def whole_module(model: Any, index: int) -> Any:
    """The module of spec layer ``index`` in a model :func:`.torchnet.build_model` built."""
    if hasattr(model, f"l{index}"):
        return getattr(model, f"l{index}")
    return list(model.children())[list(model.layer_index).index(index)]


def _conv_slice(layer: Conv2d, in_shape: tuple[int, ...], out_shape: tuple[int, ...], step: Step, rank: int) -> Any:
    """This process's maps of a convolution: a dense one's own maps from the whole input; a depthwise
    one's from its own input maps; any other grouped one's groups that its maps lie in, computed whole
    from their input maps, then its own maps kept (only a slice that ends inside a group computes maps
    of another process)."""
    import torch.nn as nn

    from .torchnet import _act, fixed_filter, weight_normed

    assert step.share is not None
    mine = step.share[rank]
    pre: list[Any] = []
    post: list[Any] = []
    if 1 < layer.groups == in_shape[0]:  # depthwise
        maps_in = len(mine) * in_shape[0] // out_shape[0]
        maps_out, groups = len(mine), maps_in
    elif layer.groups == 1:
        maps_in, maps_out, groups = in_shape[0], len(mine), 1
    else:
        g0, g1 = step.groups_span[rank]
        groups = g1 - g0 + 1
        ipg, opg = in_shape[0] // layer.groups, out_shape[0] // layer.groups
        maps_in, maps_out = groups * ipg, groups * opg
        if groups < layer.groups:  # the maps of its groups, of the whole input
            pre.append(_Keep(g0 * ipg, (g1 + 1) * ipg))
        lo, hi = int(mine[0]) - g0 * opg, int(mine[-1]) + 1 - g0 * opg
        if (lo, hi) != (0, maps_out):
            post.append(_Keep(lo, hi))
    common: dict[str, Any] = {"dilation": _pair(layer.dilation), "groups": groups, "bias": layer.bias}
    if isinstance(layer, ConvTranspose2d):
        conv: Any = nn.ConvTranspose2d(maps_in, maps_out, _pair(layer.kernel), _pair(layer.stride),
                                       _pair(layer.padding), output_padding=_pair(layer.output_padding), **common)
    else:
        conv = nn.Conv2d(maps_in, maps_out, _pair(layer.kernel), _pair(layer.stride), _pair(layer.padding), **common)
    conv = fixed_filter(conv) if not layer.learned else weight_normed(conv, layer.weight_norm)
    act = _act(layer.activation)
    return nn.Sequential(*pre, conv, *post, *([act] if act is not None else []))


def _Narrow(axis: int, lo: int, n: int) -> Any:  # noqa: N802 - a module factory
    """A module keeping units [lo, lo + n) of per-sample ``axis`` of its input."""
    from .torchnet import _graph_module

    return _graph_module(lambda self, x: x.narrow(axis + 1, lo, n))


def _SplitBias(layer: Bias, in_shape: tuple[int, ...], axis: int, held: np.ndarray | None,  # noqa: N802
               world: int) -> Any:
    """A bias added to this process's units (``held`` along ``axis``; None: all of them): its values of
    the added tensor (:func:`.torchnet._bias`'s layout). A learned table is held whole by every process
    (its values are shared between positions that different processes hold) and its gradient summed over
    the processes after backward, so that every copy takes the same update."""
    import torch

    from .torchnet import _graph_module

    index = torch.arange(math.prod(in_shape)).view(in_shape)
    if held is not None:
        index = index.index_select(axis, torch.as_tensor(held, dtype=torch.long))
    shape = tuple(index.shape)
    if not layer.weights:
        module = _graph_module(lambda self, x: x + self.added)
        module.register_buffer("added", torch.zeros(shape))
        return module
    module = _graph_module(lambda self, x: x + self.table[self.index].view(shape), {"table": (layer.weights,)})
    module.register_buffer("index", index.reshape(-1) % layer.weights)
    return _sum_gradients(module, world)


def _sum_gradients(module: Any, world: int) -> Any:
    """``module``, its parameters' gradients summed over the processes as they are computed (every
    process holds the whole layer and computes the gradient of its own range of the output)."""
    import torch.distributed as dist

    def summed(g: Any) -> Any:  # noqa: ANN401
        g = g.contiguous().clone()
        dist.all_reduce(g)
        return g

    if world > 1 and not getattr(module, "gradients_summed", False):
        for p in module.parameters():
            p.register_hook(summed)
        module.gradients_summed = True
    return module


def _SplitSdpa(layer: ScaledDotProductAttention, q_shape: tuple[int, ...], k_shape: tuple[int, ...],  # noqa: N802
               axis: int, held: np.ndarray | None, rows: bool, world: int) -> Any:
    """sdpa on this process's part of the output: its ``held`` positions along ``axis`` (None: all), its
    heads (a leading axis) or its rows (axis −2; ``rows``: of queries it holds whole, which it takes
    first). A causal mask and a learned bias on the scores are taken at those positions (its rows'
    own positions, not the first ones); the bias's table is held whole by every process and its
    gradient summed over them (:func:`_sum_gradients`), as an added bias's."""
    import torch
    import torch.nn.functional as F

    from .torchnet import _graph_module

    scores = (*q_shape[:-1], k_shape[-2])
    pick = None if held is None else torch.as_tensor(held, dtype=torch.long)
    row_axis = len(q_shape) - 2
    positions = torch.arange(scores[-2]) if pick is None or axis != row_axis else pick
    mask = None
    if layer.causal:  # an additive mask of the held rows by their own positions
        allowed = positions[:, None] >= torch.arange(scores[-1])[None, :]
        mask = torch.zeros(allowed.shape).masked_fill(~allowed, float("-inf"))
    index = None
    if layer.bias_weights:
        index = torch.arange(math.prod(scores)).view(scores)
        index = (index if pick is None else index.index_select(axis, pick)) % layer.bias_weights
    def forward(self: Any, q: Any, k: Any, v: Any) -> Any:  # noqa: ANN401
        if rows and pick is not None:
            q = q.index_select(-2, pick)
        add = self.mask
        if index is not None:
            bias = self.table[self.index]
            add = bias if add is None else bias + add
        return F.scaled_dot_product_attention(q, k, v, attn_mask=add)

    module = _graph_module(forward, {"table": (layer.bias_weights,)} if layer.bias_weights else None)
    module.register_buffer("mask", mask)
    module.register_buffer("index", index)
    return _sum_gradients(module, world)


def _Aligned(inner: Any, aligned: tuple[tuple[int, int], ...], held: np.ndarray) -> Any:  # noqa: N802
    """``inner`` on its operands, those of ``aligned`` (operand, per-sample axis) first narrowed to this
    process's units ``held`` along that axis."""
    import torch

    from .torchnet import _graph_module

    index = torch.as_tensor(held, dtype=torch.long)
    axis_of = dict(aligned)

    def forward(self: Any, *xs: Any) -> Any:  # noqa: ANN401
        return self.inner(*(x.index_select(axis_of[j] + 1, index) if j in axis_of else x for j, x in enumerate(xs)))

    module = _graph_module(forward)
    module.inner = inner
    return module


def _Keep(lo: int, hi: int) -> Any:  # noqa: N802 - a module factory
    """A module keeping maps [lo, hi) of its input."""
    from .torchnet import _graph_module

    return _graph_module(lambda self, x: x[:, lo:hi])


def realign(x: Any, have: Share, want: Share, units: int, rank: int, world: int, sum_back: bool = True,
            dim: int = 1) -> Any:
    """``x``, this process's units (along ``dim``) of a tensor held as ``have``, brought to ``want``: as it
    is when the two are the same, a local selection when every process holds the whole tensor, else an
    exchange that assembles the whole tensor (:func:`exchange`) and then the selection. ``sum_back``:
    the backward pass sums the processes' partial gradients of the whole tensor (False when every
    process holds the same gradient of it: the loss is taken on the same whole logits everywhere)."""
    import torch

    if same(have, want):
        return x
    if have is None:
        assert want is not None
        return x.index_select(dim, torch.as_tensor(want[rank], dtype=torch.long))
    pos = owned(have, units)
    mine = x if len(pos[rank]) == x.shape[dim] and np.array_equal(pos[rank], np.arange(x.shape[dim])) else \
        x.index_select(dim, torch.as_tensor(pos[rank], dtype=torch.long))
    whole = exchange(world, rank, mine, [len(p) for p in pos], sum_back, dim)
    order = gather_order(have, units)
    if order is not None:
        whole = whole.index_select(dim, torch.as_tensor(order, dtype=torch.long))
    if want is None:
        return whole
    return whole.index_select(dim, torch.as_tensor(want[rank], dtype=torch.long))


def exchange(world: int, rank: int, mine: Any, sizes: list[int], sum_back: bool, dim: int = 1) -> Any:
    """An autograd op over gloo: every process's part (``sizes[r]`` units along ``dim``) sent to every
    other, the parts laid end to end in rank order (forward); backward, each process's part of the
    gradient sent to it and summed with its own (or, with ``sum_back`` off, its own part kept): the
    model's (W−1)/W of the input each way."""
    import torch
    import torch.distributed as dist

    class Gather(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:  # noqa: ANN401
            def shape(r: int) -> tuple[int, ...]:
                return (*x.shape[:dim], sizes[r], *x.shape[dim + 1:])
            parts = [x.contiguous() if r == rank else x.new_empty(shape(r)) for r in range(world)]
            # receives posted before the sends: gloo then carries both directions at once (sends first,
            # a 4 MB exchange over a tbf-shaped 1 Gbit/s link ran at half the rate each way)
            ops = [dist.P2POp(dist.irecv, parts[r], r) for r in range(world) if r != rank]
            ops += [dist.P2POp(dist.isend, parts[rank], r) for r in range(world) if r != rank]
            for req in dist.batch_isend_irecv(ops):
                req.wait()
            return torch.cat(parts, dim=dim)

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:  # noqa: ANN401
            chunks = [c.contiguous() for c in torch.split(g, sizes, dim=dim)]
            if not sum_back:
                return chunks[rank]
            recv = [torch.empty_like(chunks[rank]) for _ in range(world)]
            ops = [dist.P2POp(dist.irecv, recv[r], r) for r in range(world) if r != rank]
            ops += [dist.P2POp(dist.isend, chunks[r], r) for r in range(world) if r != rank]
            for req in dist.batch_isend_irecv(ops):
                req.wait()
            total = chunks[rank].clone()
            for r in range(world):
                if r != rank:
                    total += recv[r]
            return total

    return Gather.apply(mine)


def _SplitLayerNorm(layer: LayerNorm, width: int, share: Share, rank: int, world: int) -> Any:  # noqa: N802
    """Layer norm over a width split between the processes: each sums its own columns and their squares
    per token, the processes exchange those two partial statistics (:func:`exchange`), and each
    normalises its columns by the whole width's mean and variance."""
    import torch
    import torch.nn as nn

    assert share is not None
    held = len(share[rank])

    class SplitLayerNorm(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            if layer.affine:
                self.weight = nn.Parameter(torch.ones(held))
                self.bias = nn.Parameter(torch.zeros(held)) if layer.bias else None

        def forward(self, x: Any) -> Any:  # noqa: ANN401
            stats = torch.cat([x.sum(-1, keepdim=True), (x * x).sum(-1, keepdim=True)], -1)
            every = exchange(world, rank, stats, [2] * world, True, dim=x.dim() - 1)
            total = every.unflatten(-1, (world, 2)).sum(-2)
            mean = total[..., :1] / width
            var = (total[..., 1:] / width - mean * mean).clamp_min(0.0)
            y = (x - mean) * torch.rsqrt(var + 1e-5)
            if layer.affine:
                y = y * self.weight + (self.bias if self.bias is not None else 0.0)
            return y

    return SplitLayerNorm()


def _SplitGroupNorm(layer: GroupNorm, in_shape: tuple[int, ...], share: Share, rank: int,  # noqa: N802
                    world: int) -> Any:
    """Group norm of maps split by channels: each process sums its own channels' values and their squares
    per group, the processes exchange those 2·G partial statistics (:func:`exchange`), and each
    normalises its channels by their whole group's mean and variance."""
    import torch
    import torch.nn as nn

    assert share is not None
    own = share[rank]
    channels, groups = in_shape[0], layer.groups
    per_group = channels // groups * math.prod(in_shape[1:])  # values one group normalises over

    class SplitGroupNorm(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.group = torch.as_tensor(own // (channels // groups), dtype=torch.long)  # not state
            if layer.affine:
                self.weight = nn.Parameter(torch.ones(len(own)))
                self.bias = nn.Parameter(torch.zeros(len(own)))

        def forward(self, x: Any) -> Any:  # noqa: ANN401
            flat = x.flatten(2)
            sums = [x.new_zeros(x.shape[0], groups).index_add(1, self.group, v)
                    for v in (flat.sum(-1), (flat * flat).sum(-1))]
            every = exchange(world, rank, torch.cat(sums, 1), [2 * groups] * world, True, dim=1)
            total = every.unflatten(1, (world, 2, groups)).sum(1)
            mean = total[:, 0] / per_group
            var = (total[:, 1] / per_group - mean * mean).clamp_min(0.0)
            view = (x.shape[0], len(own), *([1] * (x.dim() - 2)))
            y = (x - mean[:, self.group].view(view)) * torch.rsqrt(var[:, self.group].view(view) + 1e-5)
            if layer.affine:
                y = y * self.weight.view(view[1:]) + self.bias.view(view[1:])
            return y

    return SplitGroupNorm()


def _SplitAttention(layer: Attention, in_shape: tuple[int, ...], step: Step, rank: int, world: int) -> Any:  # noqa: N802
    """Self-attention split by heads: this process's heads' queries, keys and values from the whole
    sequence, their attention, the whole head outputs assembled (:func:`realign`), then its columns of
    the output projection."""
    import torch.nn as nn
    import torch.nn.functional as F  # noqa: N812

    assert step.inner is not None and step.share is not None
    s, d = in_shape
    head_width = d // layer.heads
    mine = len(step.inner[rank])
    heads_here = mine // head_width
    inner, causal = step.inner, layer.causal

    class SplitAttention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.qkv = nn.Linear(d, 3 * mine, bias=layer.bias)
            self.out = nn.Linear(d, len(step.share[rank]), bias=layer.bias)  # type: ignore[index]

        def forward(self, x: Any) -> Any:  # noqa: ANN401
            b = x.shape[0]
            q, k, v = (t.view(b, s, heads_here, head_width).transpose(1, 2) for t in self.qkv(x).split(mine, -1))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=causal).transpose(1, 2).reshape(b, s, mine)
            return self.out(realign(y, inner, None, d, rank, world, dim=2))

    return SplitAttention()


def _SplitRecurrent(layer: Recurrent, in_shape: tuple[int, ...], rank: int, world: int) -> Any:  # noqa: N802
    """A recurrent layer split by hidden units: this process's units of every direction and stacked layer
    (their rows of each gate's block of the input and state matrices, named as ``nn.LSTM`` names them),
    from the whole input; the directions step together, and every step's hidden states (this process's
    units of both directions) are assembled whole (:func:`exchange`) for the next step and the next
    layer. Returns this process's units of the last layer's every step, ``(…, S, dirs·n)``. The cells
    compute as PyTorch's (gates i, f, g, o of an LSTM; r, z, n of a GRU, its reset gate applied to the
    state's product with its bias)."""
    import torch
    import torch.nn as nn

    h = layer.hidden
    lo, hi = slice_bounds(h, (rank, world))
    n = hi - lo
    sizes = [len(range(*slice_bounds(h, (r, world)))) for r in range(world)]  # each process's units
    gates = RECURRENT_GATES[layer.mode]
    dirs = layer.directions
    suffixes = ["", "_reverse"][:dirs]
    mode = layer.mode

    class SplitRecurrent(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            bound = 1.0 / math.sqrt(h)  # nn.LSTM's initialisation
            for k in range(layer.layers):
                width = in_shape[-1] if k == 0 else dirs * h
                for sfx in suffixes:
                    self.register_parameter(f"weight_ih_l{k}{sfx}",
                                            nn.Parameter(torch.empty(gates * n, width).uniform_(-bound, bound)))
                    self.register_parameter(f"weight_hh_l{k}{sfx}",
                                            nn.Parameter(torch.empty(gates * n, h).uniform_(-bound, bound)))
                    if layer.bias:
                        for which in ("ih", "hh"):
                            self.register_parameter(f"bias_{which}_l{k}{sfx}",
                                                    nn.Parameter(torch.empty(gates * n).uniform_(-bound, bound)))

        def cell(self, k: int, sfx: str, x_t: Any, state: Any, c: Any) -> tuple[Any, Any]:  # noqa: ANN401
            """One step of this process's units: from the input's product and the whole previous state."""
            b_hh = getattr(self, f"bias_hh_l{k}{sfx}") if layer.bias else None
            hh = torch.nn.functional.linear(state, getattr(self, f"weight_hh_l{k}{sfx}"), b_hh)
            if mode == "lstm":
                i, f, g, o = (x_t + hh).chunk(4, -1)
                c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
                return torch.sigmoid(o) * torch.tanh(c), c
            if mode == "gru":
                xr, xz, xn = x_t.chunk(3, -1)
                hr, hz, hn = hh.chunk(3, -1)
                r, z = torch.sigmoid(xr + hr), torch.sigmoid(xz + hz)
                mine = state[:, lo:hi]
                return (1 - z) * torch.tanh(xn + r * hn) + z * mine, c
            act = torch.tanh if mode == "rnn_tanh" else torch.relu
            return act(x_t + hh), c

        def forward(self, x: Any) -> Any:  # noqa: ANN401
            lead = x.shape[:-2]
            seq = x.reshape(-1, *x.shape[-2:])  # sequences side by side into the batch
            rows, steps = seq.shape[0], seq.shape[1]
            for k in range(layer.layers):
                # each direction's input products for every step at once
                xs = [torch.nn.functional.linear(seq, getattr(self, f"weight_ih_l{k}{sfx}"),
                                                 getattr(self, f"bias_ih_l{k}{sfx}") if layer.bias else None)
                      for sfx in suffixes]
                states = [seq.new_zeros(rows, h) for _ in suffixes]
                cells = [seq.new_zeros(rows, n) for _ in suffixes]
                outs: list[list[Any]] = [[None] * steps for _ in suffixes]
                whole: list[list[Any]] = [[None] * steps for _ in suffixes]
                for t in range(steps):
                    mine = []
                    for d, sfx in enumerate(suffixes):
                        at = t if d == 0 else steps - 1 - t
                        y, cells[d] = self.cell(k, sfx, xs[d][:, at], states[d], cells[d])
                        outs[d][at] = y
                        mine.append(y)
                    # this process's units of every direction to every other process, in one exchange
                    every = exchange(world, rank, torch.stack(mine, 1), sizes, True, dim=2)
                    for d in range(dirs):
                        at = t if d == 0 else steps - 1 - t
                        states[d] = every[:, d]
                        whole[d][at] = every[:, d]
                if k < layer.layers - 1:  # the next layer reads the whole states of every step
                    seq = torch.cat([torch.stack(w, 1) for w in whole], -1)
            y = torch.cat([torch.stack(o, 1) for o in outs], -1)
            return y.reshape(*lead, steps, dirs * n)

    return SplitRecurrent()


def exchanged_values(net: Network, steps: list[Step], world: int) -> dict[int, float]:
    """Values per sample one process sends, averaged over the processes, for each layer whose inputs a
    partitioned run exchanges (forward: its first-held units to each other process; backward: each other
    process's part of its partial gradient): what the model prices as 2·(W−1)/W·N_in (docs/model.md §5).
    Attention split by heads also assembles its head outputs (the model's second 2·(W−1)/W·S·D); a layer
    norm over a split width exchanges two partial statistics per token, 2·2·(W−1)·S, and a group norm of
    maps split by channels two per group, 2·2·(W−1)·G (the model counts (W−1)/W of each). A recurrent
    layer also assembles every step's hidden states, 2·(W−1)/W·R·S·L·dirs·H. The logits' assembly before
    the loss is not a layer's and is not counted."""
    shares: dict[int, Share] = {i: None for i in net.input_layers}
    shares.update({s.index: s.share for s in steps})
    axes = {s.index: s.axis for s in steps}

    def gathered(have: Share, shape: tuple[int, ...], axis: int) -> float:
        units = shape[axis]
        pos = owned(have, units)
        per = math.prod(shape) // units
        return sum(len(p) * (world - 1) + (units - len(p)) for p in pos) * per / world

    out: dict[int, float] = {}
    for step in steps:
        total = 0.0
        for k, want in zip(step.inputs, step.wants, strict=True):
            have = shares[k]
            if isinstance(want, str) or have is None or same(have, want):
                continue
            total += gathered(have, net.shapes[k], axes[k])
        layer, shape = net.layers[step.index], net.shapes[step.index]
        if step.inner is not None:
            total += gathered(step.inner, shape, len(shape) - 1)
        if isinstance(layer, LayerNorm) and step.share is not None and not step.regathers:
            total += 2 * 2 * (world - 1) * math.prod(shape[:-1])
        if isinstance(layer, GroupNorm) and step.share is not None and not step.regathers:
            total += 2 * 2 * (world - 1) * layer.groups
        if isinstance(layer, Recurrent):  # every step's states of every direction, assembled whole
            total += 2 * (world - 1) / world * math.prod(shape[:-2]) * shape[-2] * layer.layers * shape[-1]
        if total:
            out[step.index] = total
    return out
