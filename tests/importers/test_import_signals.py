"""1-D networks (audio, time series, text convolutions) on (C, L) signals: imported from PyTorch and
ONNX as the 2-D layers PyTorch runs them as, on (C, 1, L) maps between views (docs/importing.md), with
PyTorch's weights and FLOPs, trained back by the runner."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from importers.import_helpers import dense_weight_grad, imports_like_pytorch, params, step_flops
from importers.onnx_export import export
from torch import nn

import dnnbench
from dnnbench import presets
from dnnbench.counts import totals
from dnnbench.errors import SpecError
from dnnbench.model import evaluate
from dnnbench.specs import Configuration


class Audio(nn.Module):
    """A 1-D convolutional classifier: strided, dilated ('same'), depthwise and transposed convolutions,
    batch and instance norms, max, average (ceil_mode) and adaptive pooling."""

    def __init__(self, padding_mode: str = "zeros") -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv1d(1, 16, 9, stride=4, padding=4), nn.BatchNorm1d(16), nn.ReLU(), nn.MaxPool1d(4),
            nn.Conv1d(16, 32, 3, padding="same", dilation=2), nn.ReLU(), nn.AvgPool1d(2, ceil_mode=True),
            nn.Conv1d(32, 32, 5, groups=32, padding=2, padding_mode=padding_mode), nn.InstanceNorm1d(32, affine=True),
            nn.ConvTranspose1d(32, 16, 4, stride=2, padding=1), nn.AdaptiveAvgPool1d(1))
        self.head = nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).flatten(1))


class Functional(nn.Module):
    """The functional 1-D calls, a pad, a resize, a group norm and a transformer over the positions."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(8, 2, 5))
        self.up_weight = nn.Parameter(torch.randn(8, 4, 3))
        self.norm = nn.GroupNorm(2, 4)
        self.encoder = nn.TransformerEncoderLayer(4, 2, 16, batch_first=True, dropout=0.0)
        self.head = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(F.conv1d(x, self.weight, None, 2, 2))
        y = F.avg_pool1d(F.max_pool1d(y, 2), 2, 2, 1)
        y = F.conv_transpose1d(F.pad(y, (1, 1), mode="reflect"), self.up_weight, stride=2, output_padding=1)
        y = F.interpolate(self.norm(y), scale_factor=2, mode="linear")
        y = F.adaptive_max_pool1d(y, 16)
        return self.head(self.encoder(y.transpose(1, 2)).mean(1))




@pytest.mark.parametrize("module,shape", [(Audio(), (1, 1600)), (Audio("reflect"), (1, 1600)),
                                          (Functional(), (2, 200))], ids=["audio", "audio-reflect", "functional"])
def test_a_1d_network_imports_with_pytorch_s_weights_and_flops(module: nn.Module, shape: tuple[int, int]) -> None:
    net = imports_like_pytorch(module, shape, torch.zeros(2, *shape))
    assert net.layers[0].shape == (shape[0], 1, shape[1])  # a signal is one row of maps to the spec
    pred = evaluate(net, presets.cluster("modern-2025"), presets.dataset("mnist"), Configuration())
    assert float(pred.time_per_sample_s) > 0


def test_a_1d_convolution_is_the_2d_one_on_one_row_with_its_activation_fused() -> None:
    net = dnnbench.from_torch(nn.Sequential(nn.Conv1d(3, 8, 5, stride=2, padding=2), nn.ReLU(), nn.Flatten()), (3, 64))
    assert [layer.to_dict() for layer in net.layers] == [
        {"name": "input", "kind": "input", "shape": [3, 1, 64]},
        {"name": "0", "kind": "conv2d", "out_channels": 8, "kernel": [1, 5], "stride": [1, 2], "padding": [0, 2],
         "bias": True, "activation": "relu"},
        {"name": "2", "kind": "flatten"}]


def test_the_onnx_export_of_a_1d_network_imports_as_the_module_does(tmp_path: Path) -> None:
    module = Audio()
    with warnings.catch_warnings():  # a training export of batch norm drops its counter's update
        warnings.filterwarnings("ignore", message="ONNX Preprocess - Removing mutation", category=UserWarning)
        net = dnnbench.from_onnx(export(module, (1, 1600), tmp_path / "audio.onnx"))
    assert totals(net) == totals(dnnbench.from_torch(module, (1, 1600)))


class Resampled(nn.Module):
    """A signal padded (constant, reflect, replicate) and resized (nearest, linear). (torch exports a circular
    pad as a Slice and a Concat, which import as such.)"""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(2, 8, 5)
        self.up = nn.Conv1d(8, 8, 3, padding=1)
        self.head = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.pad(self.conv(F.pad(x, (2, 1))), (1, 2), mode="reflect")
        y = F.interpolate(F.pad(y, (1, 1), mode="replicate"), scale_factor=2, mode="nearest")
        y = F.interpolate(self.up(F.pad(y, (3, 0), value=1.0)), size=150, mode="linear")
        return self.head(y.mean(2))


def test_the_onnx_export_of_a_padded_and_resized_signal_imports_as_the_module_does(tmp_path: Path) -> None:
    module = Resampled()
    net = dnnbench.from_onnx(export(module, (2, 40), tmp_path / "resampled.onnx"))
    from_torch = dnnbench.from_torch(module, (2, 40))
    assert totals(net) == totals(from_torch)
    assert [(layer.kind, layer.to_dict().get("padding"), layer.to_dict().get("mode")) for layer in net.layers
            if layer.kind in ("pad", "upsample")] == [
        (layer.kind, layer.to_dict().get("padding"), layer.to_dict().get("mode")) for layer in from_torch.layers
        if layer.kind in ("pad", "upsample")]
    assert net.shapes[-2] == (8,)


@st.composite
def _conv1d(draw: Any) -> tuple[dict[str, Any], tuple[int, int]]:
    groups = draw(st.integers(1, 3))
    layer = {"out_channels": groups * draw(st.integers(1, 4)), "kernel_size": draw(st.integers(1, 7)),
             "stride": draw(st.integers(1, 3)), "padding": draw(st.integers(0, 3)),
             "dilation": draw(st.integers(1, 3)), "groups": groups, "bias": draw(st.booleans())}
    return layer, (groups * draw(st.integers(1, 3)), draw(st.integers(1, 40)))


@given(_conv1d(), st.sampled_from(["none", "max", "avg"]))
@settings(max_examples=40, deadline=None)
def test_every_1d_convolution_counts_as_pytorch_runs_it(case: tuple[dict[str, Any], tuple[int, int]],
                                                        pool: str) -> None:
    layer, shape = case
    conv = nn.Conv1d(shape[0], **layer)
    span = layer["dilation"] * (layer["kernel_size"] - 1) + 1
    out_length = (shape[1] + 2 * layer["padding"] - span) // layer["stride"] + 1
    if out_length < 1:  # PyTorch refuses it; so does the importer, in one line
        with pytest.raises(SpecError) as err:
            dnnbench.from_torch(conv, shape)
        assert "\n" not in str(err.value)
        return
    mods: list[nn.Module] = [conv]
    if pool != "none" and out_length >= 2:
        mods.append(nn.MaxPool1d(2) if pool == "max" else nn.AvgPool1d(2, ceil_mode=True))
    module = nn.Sequential(*mods)
    net = dnnbench.from_torch(module, shape)
    assert net.shapes[-1] == tuple(module(torch.zeros(1, *shape)).shape[1:])
    t = totals(net)
    assert t.weights == params(module)
    forward, backward = step_flops(lambda: module(torch.zeros(2, *shape)))
    assert forward == 2 * 2 * t.macs_forward
    assert backward == 2 * 2 * (t.macs_backprop + dense_weight_grad(net))


@pytest.mark.parametrize("module", [nn.Conv1d(2, 4, 4, padding="same"), nn.Conv2d(2, 4, (2, 3), padding="same"),
                                    nn.Conv2d(2, 4, 3, padding="same", dilation=(1, 3), padding_mode="reflect")])
def test_same_padding_of_an_even_span_is_the_extra_row_padded_first(module: nn.Module) -> None:
    """PyTorch splits an even span's padding, the extra row and column below and right; ATen pads them
    with zeros first and convolves with the rest (another mode: all of it padded first)."""
    import warnings

    shape = (2, 16) if isinstance(module, nn.Conv1d) else (2, 7, 9)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # (PyTorch's note of the copy it makes)
        net = dnnbench.from_torch(nn.Sequential(module), shape)
        assert net.shapes[-1] == tuple(module(torch.zeros(1, *shape)).shape[1:])
        forward, backward = step_flops(lambda: module(torch.randn(2, *shape)))
    t = totals(net)
    assert t.weights == params(module) and forward == 2 * 2 * t.macs_forward
    assert backward == 2 * 2 * (t.macs_backprop + dense_weight_grad(net))
    assert net.layers[1].kind == "pad"


def test_what_a_1d_layer_cannot_import_is_one_line() -> None:
    with pytest.raises(SpecError, match=r"^input_shape: \[2, 3, 4, 5, ...\] must be \(C, H, W\), \(C, L\) signals"):
        dnnbench.from_torch(nn.Sequential(nn.Flatten()), (2, 3, 4, 5, 6))
