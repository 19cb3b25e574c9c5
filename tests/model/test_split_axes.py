"""The axis a vertical partition splits each value along, through views (dnnbench.model.split_axes)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dnnbench.measure.partition import _merged, split
from dnnbench.model.split_axes import (
    elementwise_split,
    product_split,
    regather_axis,
    split_axes,
    view_groups,
    view_keeps,
)
from dnnbench.specs import Network


@st.composite
def reshapes(draw: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Two shapes of the same values: one list of factors grouped two ways into consecutive axes."""
    factors = draw(st.lists(st.integers(1, 5), min_size=1, max_size=6))

    def grouping() -> tuple[int, ...]:
        cuts = sorted(draw(st.sets(st.integers(1, len(factors) - 1), max_size=len(factors) - 1))) \
            if len(factors) > 1 else []
        bounds = [0, *cuts, len(factors)]
        return tuple(math.prod(factors[a:b]) for a, b in zip(bounds, bounds[1:], strict=False))

    return grouping(), grouping()


@settings(max_examples=300, deadline=None)
@given(reshapes(), st.integers(0, 5), st.integers(2, 4))
def test_a_kept_split_is_what_each_process_s_own_part_reshapes_to(shapes: Any, pick: int, world: int) -> None:
    """Where a reshape keeps a split, each process's own part of the input, reshaped locally, is
    exactly its share of the output (the positions :func:`_merged` gives, along the axis
    :func:`view_keeps` names); where it cuts, the regathered axis is one of the output's."""
    in_shape, out_shape = shapes
    axis = pick % len(in_shape)
    x = np.arange(math.prod(in_shape)).reshape(in_shape)
    y = x.reshape(out_shape)
    share = split(in_shape[axis], world)
    assert share is not None
    groups = view_groups(in_shape, out_shape)
    assert [i for g, _ in groups for i in g] == list(range(len(in_shape)))
    assert [o for _, g in groups for o in g] == list(range(len(out_shape)))
    for ins, outs in groups:
        assert math.prod(in_shape[i] for i in ins) == math.prod(out_shape[o] for o in outs)
    kept = view_keeps(in_shape, out_shape, axis)
    if kept is None:
        assert 0 <= regather_axis(in_shape, out_shape, axis) < len(out_shape)
        return
    out_share = _merged(share, in_shape, out_shape, axis)
    assert out_share is not None
    for own, theirs in zip(share, out_share, strict=True):
        local = np.take(x, own, axis=axis)
        want = np.take(y, theirs, axis=kept)
        assert local.reshape(want.shape).tolist() == want.tolist()


def test_a_channel_shuffle_regathers_once_and_the_merge_back_keeps_the_split() -> None:
    net = Network.build({"name": "shuffle", "layers": [
        {"kind": "input", "shape": [3, 4, 4]}, {"kind": "conv2d", "out_channels": 6, "kernel": 1},
        {"kind": "reshape", "shape": [2, 3, 4, 4]}, {"kind": "permute", "dims": [1, 0, 2, 3]},
        {"kind": "reshape", "shape": [6, 4, 4]}, {"kind": "slice", "axis": 1, "start": 0, "stop": 2},
        {"kind": "slice", "axis": 0, "start": 0, "stop": 3}, {"kind": "flatten"},
        {"kind": "fc", "out_features": 10}]})
    axes, cuts = split_axes(net)
    assert axes == [None, 0, 1, 0, 0, 0, 0, 0, 0]
    assert [c > 0 for c in cuts] == [False, False, True, False, False, False, True, False, False]
    assert cuts[2] == 2 * 6 * 4 * 4  # the regathered input, both ways


def test_a_product_keeps_a_split_by_heads_and_otherwise_assembles_what_its_rows_need() -> None:
    """q (4, 6, 8) @ kᵀ (4, 8, 6): both split by heads, nothing assembled; q split by its rows and kᵀ held
    whole, nothing; q and kᵀ split by the summed axis, both assembled (2·N each); a broadcast operand held
    whole beside a split by heads, nothing; one split though broadcast over the heads, by rows."""
    q, kt, out = (4, 6, 8), (4, 8, 6), (4, 6, 6)
    assert product_split([q, kt], [0, 0], out) == (0, 0.0)
    assert product_split([q, kt], [1, None], out) == (1, 0.0)
    assert product_split([q, kt], [2, 1], out) == (1, 2.0 * 192 + 2.0 * 192)
    assert product_split([q, (1, 8, 6)], [0, None], out) == (0, 0.0)
    assert product_split([q, (1, 8, 6)], [0, 0], out) == (1, 2.0 * 192 + 2.0 * 48)  # one split broadcast: by rows
    assert product_split([q, kt], [None, None], out) == (None, 0.0)


def test_an_add_takes_its_first_split_operand_s_axis_and_assembles_one_split_along_another() -> None:
    assert elementwise_split([(6, 9), (6, 9)], [1, 1], (6, 9)) == (1, 0.0)
    assert elementwise_split([(6, 9), (6, 9)], [1, 0], (6, 9)) == (1, 2.0 * 54)
    assert elementwise_split([(6, 9), (9,)], [0, None], (6, 9)) == (0, 0.0)  # broadcast, held whole
    assert elementwise_split([(6, 9), (1, 9)], [1, 1], (6, 9)) == (1, 0.0)
    assert elementwise_split([(6, 9), (1, 9)], [0, 1], (6, 9)) == (0, 2.0 * 9)  # split, broadcast along axis 0
