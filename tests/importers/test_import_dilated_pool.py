"""Max pooling with dilated windows (``nn.MaxPool2d(k, dilation=d)``, ``F.max_pool2d(..., dilation=d)``,
``nn.MaxPool1d``, ``nn.MaxPool3d``, ONNX ``MaxPool`` with ``dilations``): a ``pool`` or ``pool3d`` layer
with ``dilation``, whose window spans d·(k − 1) + 1 positions and still compares every tap's value per
output (docs/importing.md)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

import dnnbench
from dnnbench.counts import totals
from dnnbench.errors import SpecError
from dnnbench.measure import torchnet
from dnnbench.specs import Network
from dnnbench.specs.layers import Pool, Pool3d

from .import_helpers import imports_like_pytorch
from .onnx_export import export


class DilatedPools(nn.Module):
    """A dilated max pooling as a module, then as a function with ceil_mode, then a 1-D one on rows."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.pool = nn.MaxPool2d(3, stride=2, padding=1, dilation=2)
        self.rows = nn.MaxPool1d(2, dilation=3)
        self.head = nn.LazyLinear(4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.max_pool2d(self.pool(torch.relu(self.conv(x))), 2, 1, 0, (1, 2), ceil_mode=True)
        return self.head(self.rows(y.flatten(2)).flatten(1))


def _module() -> DilatedPools:
    module = DilatedPools()
    module(torch.zeros(1, 3, 21, 19))  # the lazy head takes its width
    return module


def test_dilated_max_pools_import_with_pytorchs_shapes_and_counts() -> None:
    net = imports_like_pytorch(_module(), (3, 21, 19), torch.randn(2, 3, 21, 19))
    pools = [(layer, shape) for layer, shape in zip(net.layers, net.shapes, strict=True) if layer.kind == "pool"]
    assert [layer.dilation for layer, _ in pools] == [2, (1, 2), (1, 3)]
    y = torch.relu(torch.randn(1, 8, 21, 19))
    assert pools[0][1] == tuple(F.max_pool2d(y, 3, 2, 1, 2).shape[1:])
    # k·k compares per output, whatever the spacing of the taps
    counts = net.layer_counts[net.layers.index(pools[0][0])]
    assert counts.elem_ops_forward == 9 * pools[0][1][0] * pools[0][1][1] * pools[0][1][2]


def test_the_runner_pools_as_pytorch_does() -> None:
    x = torch.randn(2, 4, 13, 11)
    for window, stride, padding, dilation, ceil in [(3, 2, 1, 2, False), (2, 1, 0, (1, 2), True), (2, 2, 1, 3, True)]:
        layer = Pool(mode="max", window=window, stride=stride, padding=padding, dilation=dilation, ceil_mode=ceil)
        built = torchnet._pool(layer, (4, 13, 11))
        expected = F.max_pool2d(x, window, stride, padding, dilation, ceil_mode=ceil)
        assert torch.equal(built(x), expected)
        assert layer.output_shape((4, 13, 11), "pool") == tuple(expected.shape[1:])


@settings(max_examples=60, deadline=None)
@given(size=st.integers(3, 30), window=st.integers(1, 4), stride=st.integers(1, 3), dilation=st.integers(1, 4),
       ceil=st.booleans(), data=st.data())
def test_output_sizes_are_pytorchs(size: int, window: int, stride: int, dilation: int, ceil: bool, data) -> None:
    padding = data.draw(st.integers(0, window // 2))
    x = torch.zeros(1, 1, size, size)
    layer = {"kind": "pool", "mode": "max", "window": window, "stride": stride, "padding": padding,
             "dilation": dilation, "ceil_mode": ceil}
    spec = {"name": "n", "layers": [{"kind": "input", "shape": [1, size, size]}, layer]}
    if dilation * (window - 1) + 1 > size + 2 * padding:
        # a window wider than the padded input (PyTorch takes one with ceil_mode: a single, partial window)
        with pytest.raises(SpecError) as err:
            Network.build(spec)
        assert "\n" not in str(err.value) and "window" in str(err.value)
        return
    expected = tuple(F.max_pool2d(x, window, stride, padding, dilation, ceil_mode=ceil).shape[1:])
    assert Network.build(spec).shapes[-1] == expected


def test_an_average_pool_has_no_dilation_and_a_plain_one_saves_none() -> None:
    with pytest.raises(SpecError) as err:
        Pool(mode="avg", window=2, dilation=2)
    assert "\n" not in str(err.value) and "dilation" in str(err.value)
    with pytest.raises(SpecError):
        Pool(mode="max", window=2, dilation=0)
    assert "dilation" not in Pool(mode="max", window=2).to_dict()
    assert Pool(mode="max", window=2, dilation=2).to_dict()["dilation"] == 2


def test_onnx_dilated_max_pools_import_with_the_same_counts(tmp_path) -> None:
    module = _module()
    via_onnx = dnnbench.from_onnx(export(module, (3, 21, 19), tmp_path / "net.onnx"))
    via_torch = dnnbench.from_torch(module, (3, 21, 19))
    assert [layer.dilation for layer in via_onnx.layers if layer.kind == "pool"] == [2, (1, 2), (1, 3)]
    assert totals(via_onnx) == totals(via_torch)


class DilatedVolumes(nn.Module):
    """A dilated 3-D max pooling as a module, then as a function with ceil_mode."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv3d(2, 4, 3, padding=1)
        self.pool = nn.MaxPool3d((1, 3, 3), stride=(1, 2, 2), padding=(0, 1, 1), dilation=(1, 2, 2))
        self.head = nn.LazyLinear(3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.max_pool3d(self.pool(torch.relu(self.conv(x))), 2, 1, 0, (2, 1, 2), ceil_mode=True)
        return self.head(y.flatten(1))


def _volumes() -> DilatedVolumes:
    module = DilatedVolumes()
    module(torch.zeros(1, 2, 6, 13, 11))
    return module


def test_dilated_3d_max_pools_import_run_and_export_as_pytorchs(tmp_path) -> None:
    net = imports_like_pytorch(_volumes(), (2, 6, 13, 11), torch.randn(2, 2, 6, 13, 11))
    pools = [(layer, shape) for layer, shape in zip(net.layers, net.shapes, strict=True) if layer.kind == "pool3d"]
    assert [layer.dilation for layer, _ in pools] == [(1, 2, 2), (2, 1, 2)]
    counts = net.layer_counts[net.layers.index(pools[0][0])]
    assert counts.elem_ops_forward == 9 * pools[0][1][0] * pools[0][1][1] * pools[0][1][2] * pools[0][1][3]
    x = torch.randn(2, 4, 6, 13, 11)
    for window, stride, padding, dilation, ceil in [((1, 3, 3), (1, 2, 2), (0, 1, 1), (1, 2, 2), False),
                                                    (2, 1, 0, (2, 1, 2), True), (2, 2, 1, 3, True)]:
        layer = Pool3d(mode="max", window=window, stride=stride, padding=padding, dilation=dilation, ceil_mode=ceil)
        expected = F.max_pool3d(x, window, stride, padding, dilation, ceil_mode=ceil)
        assert torch.equal(torchnet._pool3d(layer, (4, 6, 13, 11))(x), expected)
        assert layer.output_shape((4, 6, 13, 11), "pool3d") == tuple(expected.shape[1:])
    via_onnx = dnnbench.from_onnx(export(_volumes(), (2, 6, 13, 11), tmp_path / "volumes.onnx"))
    assert [layer.dilation for layer in via_onnx.layers if layer.kind == "pool3d"] == [(1, 2, 2), (2, 1, 2)]
    assert totals(via_onnx) == totals(net)


def test_a_3d_average_pool_has_no_dilation_and_a_window_wider_than_the_volume_is_named() -> None:
    with pytest.raises(SpecError, match=r"dilation: 2 must be 1 for average pooling"):
        Pool3d(mode="avg", window=2, dilation=2)
    assert "dilation" not in Pool3d(mode="max", window=2).to_dict()
    with pytest.raises(SpecError, match=r"layers\[1\]\.window: 3 spans 7 positions with dilation 3, more than the "
                                        r"input depth 4 \(with padding 1\)"):
        Network.build({"name": "n", "layers": [{"kind": "input", "shape": [1, 4, 9, 9]},
                                               {"kind": "pool3d", "window": 3, "padding": 1, "dilation": 3}]})
