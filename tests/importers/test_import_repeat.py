"""Copies of a sample's values (``x.repeat``, ``torch.tile``, ``x.expand``, ``x.expand_as``,
``x.broadcast_to``, ``x.repeat_interleave``) import as ``repeat`` layers; the runner's build computes what
the module computes, and what cannot be a layer of one sample is a one-line error."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from importers.import_helpers import AfterFc, builds_what_the_module_computes

import dnnbench
from dnnbench.counts import totals
from dnnbench.errors import SpecError
from dnnbench.specs import Network

CASES = {
    "repeat": (lambda x: x.repeat(1, 2, 1, 3), [(0, 2, False), (2, 3, False)]),
    "repeat of one axis": (lambda x: x.repeat(1, 1, 4, 1), [(1, 4, False)]),
    "torch.tile": (lambda x: torch.tile(x, (2, 1, 3)), [(0, 2, False), (2, 3, False)]),
    "x.tile": (lambda x: x.tile((3,)), [(2, 3, False)]),
    "expand": (lambda x: x[:, :, :1].expand(-1, -1, 5, -1), [(1, 5, False)]),
    "expand_as": (lambda x: x[:, :1].expand_as(x), [(0, 2, False)]),
    "broadcast_to": (lambda x: x[:, :, :1].broadcast_to(x.shape[0], 2, 6, 4), [(1, 6, False)]),
    "repeat_interleave": (lambda x: x.repeat_interleave(2, dim=1), [(0, 2, True)]),
    "torch.repeat_interleave": (lambda x: torch.repeat_interleave(x, 3, -1), [(2, 3, True)]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_copies_import_as_repeat_layers_that_compute_what_pytorch_computes(name: str) -> None:
    fn, want = CASES[name]
    net = builds_what_the_module_computes(AfterFc(4, fn), (2, 3, 4))
    got = [(layer.axis, layer.times, layer.interleave) for layer in net.layers if layer.kind == "repeat"]
    assert got == want


@settings(max_examples=30, deadline=None)
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=3), data=st.data())
def test_any_repeat_of_any_axis_builds_back_to_pytorch_s_values(shape: list[int], data: st.DataObject) -> None:
    """Over generated shapes, axes, counts and both kinds of copies."""
    axis = data.draw(st.integers(0, len(shape) - 1), label="axis")
    times = data.draw(st.integers(1, 4), label="times")
    if data.draw(st.booleans(), label="interleave"):
        def fn(x: torch.Tensor) -> torch.Tensor:
            return x.repeat_interleave(times, dim=axis + 1)
    else:
        def fn(x: torch.Tensor) -> torch.Tensor:
            return x.repeat(*[times if d == axis + 1 else 1 for d in range(len(shape) + 1)])
    net = builds_what_the_module_computes(AfterFc(shape[-1], fn), tuple(shape))
    out = list(shape)
    out[axis] *= times
    assert net.shapes[-1] == tuple(out)
    assert totals(net).weights == shape[-1] * (shape[-1] + 1)


def test_a_repeat_counts_one_copy_per_output_value_each_way() -> None:
    net = Network.build({"name": "r", "layers": [{"kind": "input", "shape": [2, 3, 5]},
                                                 {"kind": "conv2d", "out_channels": 2, "kernel": 1},
                                                 {"kind": "repeat", "axis": -2, "times": 4}]})
    counts = net.layer_counts[-1]
    assert net.shapes[-1] == (2, 12, 5)
    assert (counts.elem_ops_forward, counts.elem_ops_backprop, counts.macs_forward) == (120, 120, 0)


@pytest.mark.parametrize("layer,match", [
    ({"kind": "repeat", "axis": 3, "times": 2}, r"layers\[1\]\.axis: 3 must name an axis of the input \[2, 3, 5\]"),
    ({"kind": "repeat", "axis": 0, "times": 0}, r"layers\[1\]\.times: 0 .*greater than or equal to 1"),
])
def test_a_bad_repeat_spec_is_one_line(layer: dict, match: str) -> None:
    with pytest.raises(SpecError, match=match) as err:
        Network.build({"name": "r", "layers": [{"kind": "input", "shape": [2, 3, 5]}, layer]})
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("fn,match", [
    (lambda x: x.repeat(2, 1, 1), r"changes the batch dimension"),
    (lambda x: x.repeat(1, 1, 1, 2), r"adds axes in front of the batch's"),
    (lambda x: x.repeat_interleave(2), r"changes the batch dimension"),  # no dim: the values flattened
    (lambda x: x.repeat_interleave(torch.tensor([1, 2]), dim=1), r"cannot repeat_interleave a meta tensor"),
    (lambda x: x.repeat_interleave(2, dim=0), r"changes the batch dimension"),
])
def test_copies_that_are_no_layer_of_one_sample_are_one_line(fn: Callable[[torch.Tensor], torch.Tensor],
                                                             match: str) -> None:
    with pytest.raises(SpecError, match=match) as err:
        dnnbench.from_torch(AfterFc(4, fn), (2, 4))
    assert "\n" not in str(err.value)
