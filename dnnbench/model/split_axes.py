"""Which axis of each value a vertical partition splits (docs/model.md §5, reconstructed for graphs).

A layer that makes new units (a convolution's maps, an FC layer's neurons, an embedding's columns,
attention's width) splits them along its output's unit axis (:func:`unit_axis`); layers that act per
unit keep their input's split; a view carries the split to the axis its units move to. Some views
cannot carry it: a reshape that divides the split axis itself (a channel shuffle's (C, H, W) →
(g, C/g, H, W)), a slice along the split axis (``x.chunk`` of maps split by channels), and copies of
the whole split axis one after another (a ``repeat`` along it; interleaved copies keep the split), and
windows sliding along the split axis (``x.unfold``). Those
*regather*: every process assembles the whole input, as a convolution does, takes the view, and keeps
its own range of the output's units again (or, where that axis has one unit, the whole output: a
norm's one value per sample, one gate map). The model prices their exchange like a convolution's,
2·(W−1)/W of the input per sample; ``dnnbench.measure.partition`` runs them so. A layer that acts along
one axis (:func:`acting_axis`: pooling and padding of maps by channels, a layer norm and a softmax along
the last axis, a layer scale along its own) regathers an input split along another, the same way.

Products of two layer outputs (``matmul``, ``sdpa``: attention written by hand) keep a split shared by
every split operand along one leading axis (the heads; an operand held whole takes its own heads there,
one broadcast over them is used as it is). Otherwise each machine computes its range of the output's
rows: it keeps a first operand already split by rows (or held whole), assembles one split along another
axis, and assembles every other split operand whole, 2·(W−1)/W of each assembled operand per sample
(:func:`product_split`). A reduction keeps a split along an axis it does not reduce and regathers one
along an axis it does; running sums likewise along their own axis. Comparisons and ``where`` take their
operands as add and mul do; zeros (a cell's first state) are held whole.

Pure functions of shapes and layers; the measurement's partition plan uses the same rules.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..specs import Network
from ..specs.layers import (
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
    CumSum,
    Embedding,
    Flatten,
    Fold,
    FullyConnected,
    Gather,
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
    ScatterAdd,
    SelectToken,
    Slice,
    Softmax,
    Unfold,
    Upsample,
    Where,
    Windows,
    Zeros,
)

Shape = tuple[int, ...]

#: Layers that make new units along their output's unit axis (besides convolutions, whose maps are axis 0).
UNIT_MAKING = (FullyConnected, Embedding, Attention, Recurrent)


def unit_axis(shape: Sequence[int]) -> int:
    """The per-sample axis of ``shape`` whose units a layer that makes new units splits: a map's
    channels (axis 0), a vector's features and a sequence's width (the last axis)."""
    return 0 if len(shape) == 3 else len(shape) - 1


def view_groups(in_shape: Sequence[int], out_shape: Sequence[int]) -> list[tuple[range, range]]:
    """A reshape's axes in matching groups: consecutive input axes and consecutive output axes of the
    same number of values, each group as small as it can be (axes of size 1 join the group before
    them). (C, H, W) → (C, H·W) is [C]↔[C], [H, W]↔[H·W]; (C, H, W) → (g, C/g, H, W) is
    [C]↔[g, C/g], [H]↔[H], [W]↔[W]."""
    groups: list[tuple[range, range]] = []
    i = j = 0
    n, m = len(in_shape), len(out_shape)
    while i < n or j < m:
        i0, j0 = i, j
        a = in_shape[i] if i < n else 1
        b = out_shape[j] if j < m else 1
        i, j = min(i + 1, n), min(j + 1, m)
        while a != b:
            if a < b and i < n:
                a *= in_shape[i]
                i += 1
            elif j < m:
                b *= out_shape[j]
                j += 1
            else:  # unreachable for shapes of equal size
                raise ValueError(f"{list(in_shape)} and {list(out_shape)} do not hold the same number of values")
        while i < n and in_shape[i] == 1 and (j >= m or out_shape[j] != 1):  # size-1 axes join this group
            i += 1
        while j < m and out_shape[j] == 1 and (i >= n or in_shape[i] != 1):
            j += 1
        groups.append((range(i0, i), range(j0, j)))
    return groups


def view_keeps(in_shape: Sequence[int], out_shape: Sequence[int], axis: int) -> int | None:
    """The output axis a reshape carries a split along input ``axis`` to, or None when the reshape
    divides that axis into several (or regroups it with others into several): the split is cut."""
    for ins, outs in view_groups(in_shape, out_shape):
        if axis in ins:
            real = [o for o in outs if out_shape[o] != 1]
            if len(real) == 1:
                return real[0]
            if not real and len(outs):  # a single unit: any of its axes of size 1
                return outs[0]
            return None
    return None


def regather_axis(in_shape: Sequence[int], out_shape: Sequence[int], axis: int) -> int:
    """The output axis a reshape that cuts the split along input ``axis`` splits again: the largest
    axis of the output group that input axis lies in (the first of equal ones)."""
    for ins, outs in view_groups(in_shape, out_shape):
        if axis in ins and len(outs):
            return max(outs, key=lambda o: (out_shape[o], -o))
    return unit_axis(out_shape)


def acting_axis(layer: object, in_shape: Sequence[int]) -> int | None:
    """The per-sample axis a layer that acts along the others needs its input split along (None: any):
    maps' channels for pooling (of volumes too), padding, upsampling, im2col and col2im (``unfold``, ``fold``)
    and the norms of maps; the channels (axis 0) for a batch norm of any rank and a PReLU of one slope per
    channel; the last axis for a layer norm, a softmax, a position table, a class token and the selection
    of a token; a per-channel layer scale's own axis."""
    if isinstance(layer, (Pool, Pool3d, AdaptivePool, LocalResponseNorm, Upsample, Pad, GroupNorm, BatchNorm,
                          Unfold, Fold)):
        return 0
    if isinstance(layer, (LayerNorm, PositionEmbedding, ClassToken, SelectToken, Softmax)):
        return len(in_shape) - 1
    if isinstance(layer, Scale) and layer.learned and not layer.shared:
        return layer.axis % len(in_shape)
    if isinstance(layer, PReLU) and layer.per_channel:
        return 0
    return None


def product_split(shapes: Sequence[Shape], axes: Sequence[int | None], out_shape: Shape) -> tuple[int | None, float]:
    """A product's (``matmul``'s, ``sdpa``'s) output split axis and the values per sample it assembles
    (the regather convention, 2·N of each assembled operand; times (W−1)/W at evaluation), from its
    operands' ``shapes`` and split ``axes`` (None: held whole). A split shared by every split operand
    along one leading axis, where none of them is broadcast, is kept: nothing is assembled. Otherwise
    the output is split by its rows (axis −2): the first operand is kept when split by its rows or
    held whole, else assembled; every other split operand is assembled whole. A product of one row (a
    class token's query, CaiT's) is split by its largest leading axis instead, every split operand
    assembled whole."""
    if all(a is None for a in axes):
        return None, 0.0
    rank = len(out_shape)
    split = {a for a in axes if a is not None}
    if len(split) == 1:
        t = next(iter(split))
        if t < rank - 2 and all(sh[t] == out_shape[t] for sh, a in zip(shapes, axes, strict=True) if a is not None):
            return t, 0.0
    if out_shape[rank - 2] == 1 and rank > 2:  # one row: by the largest leading axis (the heads)
        return (max(range(rank - 2), key=lambda o: (out_shape[o], -o)),
                sum(2.0 * math.prod(sh) for sh, a in zip(shapes, axes, strict=True) if a is not None))
    values = sum(2.0 * math.prod(sh) for j, (sh, a) in enumerate(zip(shapes, axes, strict=True))
                 if a is not None and not (j == 0 and a == len(sh) - 2))
    return rank - 2, values


def elementwise_split(shapes: Sequence[Shape], axes: Sequence[int | None],
                      out_shape: Shape) -> tuple[int | None, float]:
    """An add's, mul's, comparison's or ``where``'s output split axis and the values per sample it
    assembles (2·N of each assembled operand, as :func:`product_split`): the output takes the first split
    operand's axis (counted from the end, as broadcasting aligns them); a split operand that is split
    along another axis, or broadcast along that one, is assembled whole (and each machine takes its own
    units of it)."""
    first = next(((a, sh) for a, sh in zip(axes, shapes, strict=True) if a is not None), None)
    if first is None:
        return None, 0.0
    axis = len(out_shape) - len(first[1]) + first[0]
    values = 0.0
    for a, sh in zip(axes, shapes, strict=True):
        own = axis - (len(out_shape) - len(sh))  # the operand's axis aligned with the output's split one
        if a is not None and (a != own or sh[own] != out_shape[axis]):
            values += 2.0 * math.prod(sh)
    return axis, values


def split_axes(net: Network) -> tuple[list[int | None], list[float]]:
    """Per layer, the per-sample axis its output is split along in a model-parallel replica (None:
    every machine holds it whole), and the values per sample it regathers (0: none; the module
    docstring). Kinds a partitioned run does not take follow the same rules: a layer with a split input
    keeps its axis (counted from the end when its rank changes)."""
    axes: list[int | None] = []
    cuts: list[float] = []
    for layer, ids, shape in zip(net.layers, net.input_indices, net.shapes, strict=True):
        held: list[tuple[int, Shape]] = [(a, net.shapes[k]) for k in ids if (a := axes[k]) is not None]
        first = axes[ids[0]] if ids else None
        in_shape = net.shapes[ids[0]] if ids else shape
        cut = False
        gathered = 0.0
        axis: int | None
        if isinstance(layer, InputLayer):
            axis = None
        elif isinstance(layer, Conv2d | Conv3d):
            axis = 0
        elif isinstance(layer, Recurrent):  # hidden units: the last axis (of (R, S, H) sequences too)
            axis = len(shape) - 1
        elif isinstance(layer, UNIT_MAKING):
            axis = unit_axis(shape)
        elif not held or isinstance(layer, Zeros):  # (zeros: its input gives only the batch)
            axis = None
        elif isinstance(layer, Softmax) and layer is net.layers[-1]:
            axis = None
        elif (need := acting_axis(layer, in_shape)) is not None and first is not None and first != need:
            cut, axis = True, first - (len(in_shape) - len(shape))  # acting along another axis: regathered
        elif isinstance(layer, Reduce) and first is not None:
            reduced = {x % len(in_shape) for x in layer.axes}
            if first in reduced:  # the split axis summed up: regathered, split again along the largest axis
                cut, axis = True, max(range(len(shape)), key=lambda o: (shape[o], -o))  # the spec keeps one
            else:
                axis = first if layer.keepdim else first - sum(r < first for r in reduced)
        elif isinstance(layer, MatMul | ScaledDotProductAttention):
            axis, gathered = product_split([net.shapes[k] for k in ids], [axes[k] for k in ids], shape)
        elif isinstance(layer, Flatten | Reshape) and first is not None:
            axis = view_keeps(in_shape, shape, first)
            if axis is None:
                cut, axis = True, regather_axis(in_shape, shape, first)
        elif isinstance(layer, Permute) and first is not None:
            axis = list(layer.dims).index(first)
        elif isinstance(layer, Slice) and first is not None:
            axis = first
            cut = layer.axis % len(in_shape) == axis
        elif isinstance(layer, Repeat) and first is not None:  # copies of the whole split axis: regathered
            axis = first
            cut = not layer.interleave and layer.times > 1 and layer.axis % len(in_shape) == axis
        elif isinstance(layer, CumSum) and first is not None:  # running sums along the split axis: regathered
            axis = first
            cut = layer.axis % len(in_shape) == axis
        elif isinstance(layer, Windows | Gather) and first is not None:  # windows sliding along, or positions
            axis = first  # taken along, the split axis: regathered
            cut = layer.axis % len(in_shape) == axis
        elif isinstance(layer, ScatterAdd) and (first is not None or axes[ids[1]] is not None):
            # added along the split axis, or values split another way added: regathered
            axis = first if first is not None else axes[ids[1]]
            cut = first is None or layer.axis % len(in_shape) == axis or axes[ids[1]] != first
        elif isinstance(layer, Add | Multiply | Compare | Where):
            axis, gathered = elementwise_split([net.shapes[k] for k in ids], [axes[k] for k in ids], shape)
        elif isinstance(layer, Unfold | Fold):  # each map's windows, its k_h·k_w rows of the columns (and back):
            axis = 0  # the split kept
        elif isinstance(layer, Concat):
            a, sh = held[0]
            axis = len(shape) - len(sh) + a
        else:
            a, sh = held[0]
            axis = a - (len(sh) - len(shape))
        if axis is not None and not 0 <= axis < max(len(shape), 1):
            axis = unit_axis(shape)
        if cut and axis is not None and shape[axis] == 1:  # one unit to split again: every machine computes it
            axis = None
        axes.append(axis)
        cuts.append(regathered_values(in_shape) if cut else gathered)
    return axes, cuts


def replicated(net: Network) -> list[bool]:
    """Per layer: whether every machine of a model-parallel replica holds its whole weights, each
    computing their gradient from its own part of what follows, the gradients summed over the machines
    once per mini-batch: a layer held whole (split axis None: computed from values every machine holds)
    or regathering (it computes its whole output), an added bias's table and an ``sdpa`` layer's learned
    bias (positions on different machines share their values), a shared factor and a PReLU's one slope."""
    axes, cuts = split_axes(net)
    out = []
    for layer, axis, cut, counts in zip(net.layers, axes, cuts, net.layer_counts, strict=True):
        if not counts.weights:
            out.append(False)
            continue
        whole = axis is None or (cut > 0 and not isinstance(layer, Add | Multiply | Compare | Where | MatMul
                                                                 | ScaledDotProductAttention))
        shared = (isinstance(layer, Bias | ScaledDotProductAttention) or (isinstance(layer, Scale) and layer.shared)
                  or (isinstance(layer, PReLU) and not layer.per_channel))
        out.append(whole or shared)
    return out


def regathered_values(in_shape: Sequence[int]) -> float:
    """Values per sample per direction the model counts for a regathering layer (times (W−1)/W at
    evaluation): 2·N_in, a convolution's exchange of its input."""
    return 2.0 * math.prod(in_shape)


__all__ = ["UNIT_MAKING", "acting_axis", "elementwise_split", "product_split", "regather_axis", "regathered_values",
           "replicated", "split_axes", "unit_axis", "view_groups", "view_keeps"]
