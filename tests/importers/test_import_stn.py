"""Spatial transformers (Jaderberg et al. 2015) as PyTorch's tutorial writes one: a localisation network
computes θ, ``F.affine_grid`` turns it into a grid of positions, ``F.grid_sample`` warps the input on it.
They import from PyTorch with their weights and FLOPs (FlopCounterMode sees the affine grid's product in
backward only), from ONNX (``AffineGrid``, ``GridSample``) with the same counts, and build back to what
PyTorch computes (docs/importing.md)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from importers.import_helpers import imports_like_pytorch
from importers.onnx_export import export
from torch import nn

import dnnbench
from dnnbench import presets
from dnnbench.counts import totals
from dnnbench.errors import SpecError
from dnnbench.measure import torchnet
from dnnbench.model import evaluate
from dnnbench.model.arrays import network_arrays
from dnnbench.specs import Configuration, Network
from dnnbench.specs.layers import AffineGrid, GridSample


class TutorialSTN(nn.Module):
    """The spatial transformer network of PyTorch's tutorial (MNIST), ``x.size()`` passed to affine_grid;
    ``drop`` keeps its dropouts (torch's ONNX export of a training graph with them needs the batch it
    traced)."""

    def __init__(self, drop: bool = True) -> None:
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(1, 10, 5), nn.Conv2d(10, 20, 5)
        self.conv2_drop = nn.Dropout2d() if drop else nn.Identity()
        self.fc1, self.fc2 = nn.Linear(320, 50), nn.Linear(50, 10)
        self.localization = nn.Sequential(nn.Conv2d(1, 8, 7), nn.MaxPool2d(2, stride=2), nn.ReLU(True),
                                          nn.Conv2d(8, 10, 5), nn.MaxPool2d(2, stride=2), nn.ReLU(True))
        self.fc_loc = nn.Sequential(nn.Linear(10 * 3 * 3, 32), nn.ReLU(True), nn.Linear(32, 3 * 2))
        self.drop = drop

    def stn(self, x: torch.Tensor) -> torch.Tensor:
        theta = self.fc_loc(self.localization(x).view(-1, 10 * 3 * 3)).view(-1, 2, 3)
        grid = F.affine_grid(theta, x.size(), align_corners=False)
        return F.grid_sample(x, grid, align_corners=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stn(x)
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = F.relu(self.fc1(x.view(-1, 320)))
        if self.drop:
            x = F.dropout(x, training=self.training)
        return F.log_softmax(self.fc2(x), dim=1)


def test_the_tutorial_stn_imports_with_pytorch_s_weights_and_flops(tmp_path: Path) -> None:
    module = TutorialSTN()
    # θ's gradient is a bmm of H·W·6 MACs that FlopCounterMode counts; the grid's forward products it does not see
    net = imports_like_pytorch(module, (1, 28, 28), torch.randn(2, 1, 28, 28))
    kinds = [layer.kind for layer in net.layers]
    assert kinds.count("affine_grid") == 1 and kinds.count("grid_sample") == 1
    # nn.Dropout2d drops whole maps: one mask value per channel (F.dropout after fc1: one per value)
    assert [layer.per_channel for layer in net.layers if layer.kind == "dropout"] == [True, False]
    assert sorted(network_arrays(net).mask_values[network_arrays(net).mask_values > 0]) == [20, 50]
    assert net.shapes[kinds.index("affine_grid")] == (28, 28, 2)
    plain = TutorialSTN(drop=False)
    assert totals(dnnbench.from_onnx(export(plain, (1, 28, 28), tmp_path / "stn.onnx"))) == totals(
        dnnbench.from_torch(plain, (1, 28, 28)))
    assert net.layer_counts[kinds.index("grid_sample")].elem_ops_forward == 4 * 28 * 28  # bilinear: four values each
    pred = evaluate(net, presets.cluster("modern-2025"), presets.dataset("mnist"), Configuration())
    assert float(pred.time_per_sample_s) > 0


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_the_runner_s_layers_compute_what_pytorch_computes(mode: str, padding_mode: str, align_corners: bool) -> None:
    theta = torch.randn(3, 2, 3)
    maps = torch.randn(3, 4, 6, 5)
    grid = torchnet._affine_grid(AffineGrid(size=(7, 4), align_corners=align_corners), (2, 3))(theta)
    assert torch.equal(grid, F.affine_grid(theta, [3, 4, 7, 4], align_corners=align_corners))
    layer = GridSample(mode=mode, padding_mode=padding_mode, align_corners=align_corners)
    got = torchnet._grid_sample(layer, (4, 6, 5))(maps, grid)
    assert torch.equal(got, F.grid_sample(maps, grid, mode=mode, padding_mode=padding_mode,
                                          align_corners=align_corners))


def test_a_grid_sample_keeps_its_maps_and_grid_and_counts_by_its_mode() -> None:
    def net(mode: str) -> Network:
        return Network.build({"name": "warp", "layers": [
            {"kind": "input", "shape": [3, 8, 8], "needs_gradient": True},
            {"kind": "flatten", "name": "f"}, {"kind": "fc", "out_features": 6}, {"kind": "reshape", "shape": [2, 3]},
            {"kind": "affine_grid", "name": "g", "size": [5, 4]},
            {"kind": "grid_sample", "inputs": ["input", "g"], "mode": mode}]})
    for mode, taps in (("nearest", 1), ("bilinear", 4), ("bicubic", 16)):
        n = net(mode)
        grid, sample = n.layer_counts[-2], n.layer_counts[-1]
        assert n.shapes[-1] == (3, 5, 4)
        assert (grid.macs_forward, grid.elem_ops_forward, grid.macs_backprop) == (0, 5 * 4 * 6, 5 * 4 * 6)
        assert (sample.elem_ops_forward, sample.elem_ops_backprop) == (taps * 60, 2 * taps * 60)
    arr = network_arrays(net("bilinear"))
    # the sample keeps its maps (the input) and its grid; the grid's own backward keeps nothing
    assert arr.input_kept_values == 3 * 8 * 8 and arr.kept_values[-2] == 5 * 4 * 2


@pytest.mark.parametrize("layers,message", [
    ([{"kind": "affine_grid", "size": [4, 4]}], r"needs a \(2, 3\) matrix per sample, got shape \[3, 8, 8\]"),
    ([{"kind": "affine_grid", "size": [0, 4]}], "size: 0 must be >= 1"),
    ([{"kind": "flatten", "name": "f"}, {"kind": "fc", "out_features": 6}, {"kind": "reshape", "shape": [2, 3]},
      {"kind": "affine_grid", "name": "g", "size": 4}, {"kind": "grid_sample", "inputs": ["g", "input"]}],
     r"\(C, H, W\) maps and an \(H', W', 2\) grid of positions"),
])
def test_a_grid_that_does_not_fit_is_one_line(layers: list[dict], message: str) -> None:
    with pytest.raises(SpecError, match=message) as err:
        Network.build({"name": "bad", "layers": [{"kind": "input", "shape": [3, 8, 8]}, *layers]})
    assert "\n" not in str(err.value)


def test_a_volume_s_grid_is_a_one_line_import_error() -> None:
    class Volume(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.loc = nn.Linear(2 * 4 * 4 * 4, 12)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            grid = F.affine_grid(self.loc(x.flatten(1)).view(-1, 3, 4), x.size(), align_corners=False)
            return F.grid_sample(x, grid, align_corners=False)

    with pytest.raises(SpecError, match=r"makes a grid from \[3, 4\] matrices") as err:
        dnnbench.from_torch(Volume(), (2, 4, 4, 4))
    assert "\n" not in str(err.value)
