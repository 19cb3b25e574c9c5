"""Parameters used by more than one layer: a module called twice (a Siamese encoder, ALBERT's repeated
block, a recurrent step) is one set of parameters.

Imported with ``dnnbench.from_torch`` or ``dnnbench.from_onnx``, the second call's layers ``share`` the
first's: the network's weights equal the module's parameters, while FLOPs (FlopCounterMode's) still count
every call. The model reads the shared weights in every call's compute and holds, updates and sends them
once. The spec checks what a layer shares, and the PyTorch runner builds the sharing back.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from importers.import_helpers import step_flops
from importers.onnx_export import export
from torch import nn

import dnnbench
from dnnbench import presets
from dnnbench.counts import totals
from dnnbench.errors import SpecError
from dnnbench.measure import torchnet
from dnnbench.model import predict
from dnnbench.specs import Configuration, Network


class Siamese(nn.Module):
    """One encoder (conv, fc, layer norm) on a sample and on a filtered copy of it; a head on both."""

    def __init__(self) -> None:
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(1, 8, 3), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 10 * 10, 32))
        self.norm = nn.LayerNorm(32)
        self.head = nn.Linear(64, 3)
        self.filter = nn.Conv2d(1, 1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.norm(self.enc(self.filter(x)))
        b = self.norm(self.enc(x))
        return self.head(torch.cat([a, b], 1))


class Albert(nn.Module):
    """ALBERT's habit: one transformer layer applied ``depth`` times, a head tied to the embedding."""

    def __init__(self, depth: int = 4) -> None:
        super().__init__()
        self.emb = nn.Embedding(500, 64)
        self.block = nn.TransformerEncoderLayer(64, 4, 128, batch_first=True, dropout=0.0)
        self.depth = depth
        self.head = nn.Linear(64, 500, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.emb(x)
        for _ in range(self.depth):
            h = self.block(h)
        return self.head(h)


class Functional(nn.Module):
    """One learned matrix and bias used by F.linear twice (a hand-written recurrent step)."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(16, 16))
        self.b = nn.Parameter(torch.zeros(16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(nn.functional.linear(x, self.w, self.b))
        return nn.functional.linear(h, self.w, self.b)


def _params(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())  # each shared parameter once


def test_a_siamese_encoder_counts_its_parameters_once_and_every_call_flops() -> None:
    module = Siamese()
    net = dnnbench.from_torch(module, (1, 12, 12))
    shared = {name: layer.shares for name, layer in zip(net.layer_names, net.layers, strict=True) if layer.shares}
    assert shared == {"enc.0:2": "enc.0", "enc.3:2": "enc.3", "norm:2": "norm"}
    t = totals(net)
    assert t.weights == _params(module) == 2 + 8 * 9 + 8 + 800 * 32 + 32 + 64 + 64 * 3 + 3
    forward, backward = step_flops(lambda: module(torch.zeros(1, 1, 12, 12)))
    assert forward == 2 * t.macs_forward
    assert backward == 2 * (t.macs_backprop + t.macs_weight_grad)  # both calls' weight gradients
    # Every call reads the weights: the per-call counts keep them.
    index = net.layer_names.index("enc.3:2")
    assert net.layer_counts[index].weights == 0 and net.call_counts[index].weights == 800 * 32 + 32
    # Saved and loaded, the sharing stays; a layer that shares nothing saves no field.
    text = json.dumps(net.to_dict())
    assert text.count('"shares"') == 3 and Network.build(json.loads(text)) == net


def test_a_repeated_transformer_layer_round_trips_through_pytorch() -> None:
    module = Albert()
    net = dnnbench.from_torch(module, (16,))
    assert totals(net).weights == _params(module)
    repeated = [layer for layer in net.layers if layer.shares]
    assert repeated and {layer.kind for layer in repeated} >= {"attention", "fc", "layer_norm"}
    assert net.layers[-1].tied_to == "emb"
    built = torchnet.build_model(net)  # the runner shares the modules' parameters again
    assert _params(built) == _params(module)
    back = dnnbench.from_torch(built, (16,))
    assert totals(back) == totals(net)
    assert sum(1 for layer in back.layers if layer.shares) == len(repeated)


def test_a_functional_call_on_the_same_parameters_shares_them() -> None:
    module = Functional()
    net = dnnbench.from_torch(module, (16,))
    assert totals(net).weights == _params(module) == 16 * 16 + 16
    assert [layer.shares for layer in net.layers if layer.kind == "fc"] == ["", "w"]


def test_an_onnx_export_of_a_module_called_twice_shares_its_initializers(tmp_path: Path) -> None:
    module = Siamese()
    net = dnnbench.from_onnx(export(module, (1, 12, 12), tmp_path / "siamese.onnx"))
    assert totals(net).weights == _params(module)
    assert sum(1 for layer in net.layers if layer.shares) == 3


def test_a_module_whose_second_call_is_left_out_keeps_its_parameters() -> None:
    """A value computed and never used is left out; the layers it shared with keep theirs."""

    class Unused(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(8, 8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.fc(x * 2.0)  # noqa: B018 - computed and dropped, as some forwards do
            return self.fc(x)

    module = Unused()
    net = dnnbench.from_torch(module, (8,))
    assert totals(net).weights == _params(module) and not any(layer.shares for layer in net.layers)


def _chain(shares: bool) -> Network:
    second = {"kind": "fc", "name": "again", "out_features": 256, "activation": "relu"}
    return Network.build({"name": "recurrent", "layers": [
        {"kind": "input", "shape": [256]},
        {"kind": "fc", "name": "step", "out_features": 256, "activation": "relu"},
        {**second, **({"shares": "step"} if shares else {})},
        {"kind": "fc", "out_features": 10},
    ]})


@pytest.mark.parametrize(("cluster", "precision"), [("adam-2014", "fp32"), ("modern-2025", "fp32"),
                                                     ("dgx-a100", "fp16")])
def test_shared_weights_cost_every_call_and_are_held_once(cluster: str, precision: str) -> None:
    shared, own = _chain(True), _chain(False)
    held = 256 * 256 + 256
    assert totals(own).weights - totals(shared).weights == held
    cfg = Configuration(local_batch_samples=32, precision=precision, workers_per_replica=1, replicas=2,
                        ps_machines=1)
    a, b = (predict(net, presets.cluster(cluster), "mnist", cfg) for net in (shared, own))
    for part in ("compute_forward_s", "compute_backprop_s", "compute_weight_grad_s"):
        assert float(getattr(a.breakdown, part)) == pytest.approx(float(getattr(b.breakdown, part)), rel=1e-12)
    # What depends on the weights held: the update, the PS's traffic and work (Adam's scheme has the PS
    # update the large fc layers: their update moves there).
    def held_costs(p: Any) -> float:
        return sum(float(getattr(p.breakdown, f"{part}_s")) for part in ("compute_update", "ps_push", "ps_pull",
                                                                         "ps_compute", "allreduce"))
    assert float(a.breakdown.compute_update_s) <= float(b.breakdown.compute_update_s)
    assert held_costs(a) < held_costs(b) and float(a.samples_per_s) >= float(b.samples_per_s)
    weights = a.memory_parts_bytes_per_worker["weights"], b.memory_parts_bytes_per_worker["weights"]
    per_value = float(weights[1]) / totals(own).weights
    assert float(weights[1]) - float(weights[0]) == pytest.approx(held * per_value)
    assert np.isfinite(float(a.epoch_time_s))


BASE = [{"kind": "input", "shape": [3, 8, 8]},
        {"kind": "conv2d", "name": "c1", "out_channels": 3, "kernel": 3, "padding": 1},
        {"kind": "conv2d", "name": "c2", "out_channels": 3, "kernel": 3, "padding": 1},
        {"kind": "pool", "name": "p", "mode": "max", "window": 2},
        {"kind": "flatten", "name": "f"},
        {"kind": "fc", "name": "h", "out_features": 48}]


@pytest.mark.parametrize(("index", "change", "message"), [
    (2, {"shares": "nope"}, "names no earlier layer"),
    (1, {"shares": "c2"}, "names no earlier layer"),
    (2, {"shares": "c1", "kernel": 1, "padding": 0}, r"holds parameter tensors of \[3, 81\] values; this layer's "
                                                     r"are \[3, 9\]"),
    (3, {"shares": "c1"}, "is set on a pool layer without parameters"),
    (0, {"shares": "c1"}, "names no earlier layer"),
])
def test_what_a_layer_shares_is_checked_in_one_line(index: int, change: dict, message: str) -> None:
    layers = [dict(layer) for layer in BASE]
    layers[index].update(change)
    with pytest.raises(SpecError, match=rf"^layers\[{index}\]\.shares: '{change['shares']}' {message}$"):
        Network.build({"name": "bad", "layers": layers})


def test_a_layer_shares_a_holder_only() -> None:
    ok = Network.build({"name": "ok", "layers": [*BASE[:3], {**BASE[2], "name": "c3", "shares": "c1"}]})
    assert totals(ok).weights == 2 * (3 * 27 + 3)
    Network.build({"name": "ok", "layers": [*BASE[:2], {**BASE[2], "shares": "c1"}]})
    with pytest.raises(SpecError, match=r"^layers\[3\]\.shares: 'c2' is a conv2d layer that shares another's; "
                                        r"expected a layer holding its parameters$"):
        Network.build({"name": "bad", "layers": [*BASE[:2], {**BASE[2], "shares": "c1"},
                                                 {**BASE[2], "name": "c3", "shares": "c2"}]})
    # One tensor used two ways (CaiT's class token, also added to the tokens as a one-row table).
    tokens = Network.build({"name": "cait", "layers": [
        {"kind": "input", "shape": [4]}, {"kind": "embedding", "vocabulary": 10, "dim": 8},
        {"kind": "class_token", "name": "cls"}, {"kind": "position_embedding", "rows": 1, "shares": "cls"}]})
    assert totals(tokens).weights == 10 * 8 + 8
    built = torchnet.build_model(tokens)  # the runner shares the tensor too
    assert _params(built) == totals(tokens).weights
    assert totals(dnnbench.from_torch(built, (4,))) == totals(tokens)
    layers = [{"kind": "input", "shape": [8]}, {"kind": "fc", "name": "a", "out_features": 8},
              {"kind": "fc", "name": "b", "out_features": 8, "shares": "a", "tied_to": "a"}]
    with pytest.raises(SpecError, match=r"^layers\[2\]\.shares: 'a' is set beside tied_to"):
        Network.build({"name": "bad", "layers": layers})
