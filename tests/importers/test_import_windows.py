"""Windows that overlap or leave gaps (``x.unfold(d, size, step)`` with ``step != size``: a signal cut into
frames, HaloNet's overlapping blocks) import as ``windows`` layers; the runner's build computes what the
module computes."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from importers.import_helpers import AfterFc, builds_what_the_module_computes

import dnnbench
from dnnbench.errors import SpecError
from dnnbench.specs import Network


@pytest.mark.parametrize("fn,shape,want", [
    (lambda x: x.unfold(-1, 5, 2), (3, 16), [(1, 5, 2)]),                               # frames of a signal
    (lambda x: x.unfold(2, 4, 2).unfold(3, 4, 2), (2, 8, 8), [(1, 4, 2), (2, 4, 2)]),  # overlapping blocks
    (lambda x: x.unfold(1, 2, 3), (4, 11), [(0, 2, 3)]),                                # spaced windows
])
def test_windows_that_overlap_or_leave_gaps_compute_what_pytorch_computes(
        fn: Callable[[torch.Tensor], torch.Tensor], shape: tuple[int, ...], want: list[tuple[int, int, int]]) -> None:
    net = builds_what_the_module_computes(AfterFc(shape[-1], fn), shape)
    assert [(layer.axis, layer.size, layer.step) for layer in net.layers if layer.kind == "windows"] == want


@settings(max_examples=30, deadline=None)
@given(shape=st.lists(st.integers(1, 7), min_size=1, max_size=3), data=st.data())
def test_any_sliding_window_builds_back_to_pytorch_s_values(shape: list[int], data: st.DataObject) -> None:
    axis = data.draw(st.integers(0, len(shape) - 1), label="axis")
    size = data.draw(st.integers(1, shape[axis]), label="size")
    step = data.draw(st.integers(1, 4).filter(lambda s: s != size), label="step")
    net = builds_what_the_module_computes(AfterFc(shape[-1], lambda x: x.unfold(axis + 1, size, step)), tuple(shape))
    out = list(shape)
    out[axis] = (shape[axis] - size) // step + 1
    assert net.shapes[-1] == (*out, size)


def test_windows_count_one_copy_per_output_value_each_way() -> None:
    net = Network.build({"name": "w", "layers": [{"kind": "input", "shape": [2, 9, 4]},
                                                 {"kind": "conv2d", "out_channels": 2, "kernel": 1},
                                                 {"kind": "windows", "axis": 1, "size": 3, "step": 2}]})
    counts = net.layer_counts[-1]
    assert net.shapes[-1] == (2, 4, 4, 3)
    assert (counts.elem_ops_forward, counts.elem_ops_backprop, counts.macs_forward) == (96, 96, 0)


@pytest.mark.parametrize("layer,match", [
    ({"kind": "windows", "axis": 1, "size": 10, "step": 1}, r"layers\[1\]\.size: 10 must be at most the axis's size 9"),
    ({"kind": "windows", "axis": 3, "size": 2, "step": 1}, r"layers\[1\]\.axis: 3 must name an axis"),
    ({"kind": "windows", "axis": 0, "size": 2, "step": 0}, r"layers\[1\]\.step: 0 .*greater than 0"),
])
def test_a_bad_windows_spec_is_one_line(layer: dict, match: str) -> None:
    with pytest.raises(SpecError, match=match) as err:
        Network.build({"name": "w", "layers": [{"kind": "input", "shape": [2, 9, 4]}, layer]})
    assert "\n" not in str(err.value)


def test_windows_of_the_batch_axis_are_one_line() -> None:
    with pytest.raises(SpecError, match=r"unfolds the batch axis") as err:
        dnnbench.from_torch(AfterFc(4, lambda x: x.unfold(0, 1, 2)), (3, 4))
    assert "\n" not in str(err.value)


def test_a_global_query_copied_once_per_window_folded_into_the_batch_builds_back() -> None:
    """GC-ViT's global query: a value of each sample copied once per window of that sample
    (``q.repeat_interleave(windows, dim=0)`` beside the windows a view folded into the batch, image-major)
    is a ``repeat`` along a new axis, and the runner's build computes what the module computes."""
    import torch.nn.functional as F
    from torch import nn

    class GlobalQuery(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed, self.kv = nn.Conv2d(3, 8, 1), nn.Linear(8, 16)
            self.q, self.head = nn.Linear(8, 8), nn.Linear(8, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            maps = self.embed(x)  # (B, 8, 4, 4)
            b = maps.shape[0]
            y = maps.permute(0, 2, 3, 1)
            windows = y.view(b, 2, 2, 2, 2, 8).permute(0, 1, 3, 2, 4, 5).reshape(-1, 4, 8)  # (B·4, 4, 8)
            k, v = self.kv(windows).chunk(2, -1)
            pooled = F.adaptive_avg_pool2d(maps, 2).permute(0, 2, 3, 1)  # one window's size, per sample
            q = self.q(pooled).reshape(b, 4, 8).repeat_interleave(windows.shape[0] // b, dim=0)
            att = (q @ k.transpose(-2, -1)) @ v  # (no softmax: the runner's is a log-softmax, the same work)
            out = att.view(b, 2, 2, 2, 2, 8).permute(0, 1, 3, 2, 4, 5).reshape(b, 16, 8)
            return self.head(out.mean(1))

    from importers.import_helpers import imports_like_pytorch

    from dnnbench.measure import torchnet

    module = GlobalQuery()
    net = imports_like_pytorch(module, (3, 4, 4), torch.randn(2, 3, 4, 4))
    built = torchnet.build_model(net)
    for mine, theirs in zip(built.parameters(), module.parameters(), strict=True):
        mine.data.copy_(theirs.data)
    x = torch.randn(3, 3, 4, 4)
    assert torch.allclose(built(x), module(x), rtol=1e-5, atol=1e-6)  # its mean is a pooling: rounding differs
    copies = [(layer.axis, layer.times, shape) for layer, shape in zip(net.layers, net.shapes, strict=True)
              if layer.kind == "repeat"]
    assert copies == [(0, 4, (4, 4, 8))]
