"""Networks of several inputs: a forward that takes two tensors (a Siamese pair, a translation model's
source and target, dense features beside categorical ids) imports with one ``input`` layer per tensor, its
weights and FlopCounterMode's FLOPs, and the runner builds and trains it back."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
from torch import nn

import dnnbench
from dnnbench.counts import totals
from dnnbench.errors import SpecError
from dnnbench.measure import torchnet
from dnnbench.specs import Network

from .import_helpers import dense_weight_grad, params, step_flops


class Siamese(nn.Module):
    """One encoder applied to two images, their features compared by a head."""

    def __init__(self) -> None:
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                 nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.head = nn.Linear(32, 2)

    def forward(self, left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
        return self.head(torch.cat([self.enc(left), self.enc(right)], dim=1))


class Translator(nn.Module):
    """``nn.Transformer`` of a source and a target sequence of token ids, each with its own embedding."""

    def __init__(self) -> None:
        super().__init__()
        self.src_embed, self.tgt_embed = nn.Embedding(100, 32), nn.Embedding(120, 32)
        self.transformer = nn.Transformer(32, 4, num_encoder_layers=2, num_decoder_layers=1, dim_feedforward=64,
                                          dropout=0.1, batch_first=True)
        self.out = nn.Linear(32, 120)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        mask = nn.Transformer.generate_square_subsequent_mask(tgt.shape[1])
        h = self.transformer(self.src_embed(src), self.tgt_embed(tgt), tgt_mask=mask, tgt_is_causal=True)
        return self.out(h)


class DenseAndIds(nn.Module):
    """A recommender's two inputs: dense features through an MLP, categorical ids through a table, joined."""

    def __init__(self) -> None:
        super().__init__()
        self.bottom = nn.Sequential(nn.Linear(13, 16), nn.ReLU())
        self.table = nn.Embedding(1000, 16)
        self.top = nn.Sequential(nn.Linear(16 * 27, 32), nn.ReLU(), nn.Linear(32, 2))

    def forward(self, dense: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        return self.top(torch.cat([self.bottom(dense).unsqueeze(1), self.table(ids)], dim=1).flatten(1))


class Dlrm(nn.Module):
    """DLRM: dense features through a bottom MLP, each categorical feature's id (``sparse[:, i]``, one per
    sample) through a table of its own, the vectors joined as rows, their pairwise dot products
    (``torch.bmm``), the upper triangle picked by ``torch.triu_indices`` held as buffers, a top MLP to
    one click logit."""

    def __init__(self, features: int = 4, dim: int = 8) -> None:
        super().__init__()
        self.bottom = nn.Sequential(nn.Linear(13, 16), nn.ReLU(), nn.Linear(16, dim), nn.ReLU())
        self.tables = nn.ModuleList([nn.Embedding(50 + 10 * k, dim) for k in range(features)])
        rows, cols = torch.triu_indices(features + 1, features + 1, offset=1)
        self.register_buffer("rows", rows)
        self.register_buffer("cols", cols)
        self.top = nn.Sequential(nn.Linear(dim + len(rows), 16), nn.ReLU(), nn.Linear(16, 1))

    def forward(self, dense: torch.Tensor, sparse: torch.Tensor) -> torch.Tensor:
        x = self.bottom(dense)
        ids = [table(sparse[:, k]).unsqueeze(1) for k, table in enumerate(self.tables)]
        vectors = torch.cat([x.unsqueeze(1), *ids], dim=1)
        pairs = vectors @ vectors.transpose(1, 2)
        return self.top(torch.cat([x, pairs[:, self.rows, self.cols]], dim=1))


def _imports_like_pytorch(module: nn.Module, shapes: list[tuple[int, ...]], examples: tuple[torch.Tensor, ...]
                          ) -> Network:
    """``from_torch(module, shapes)``, checked as ``import_helpers.imports_like_pytorch`` checks one
    input: weights, forward and backward FLOPs, the runner's build with its weights, its output shape on
    the runner's own mini-batch, and a training step of it."""
    net = dnnbench.from_torch(module, shapes)
    t = totals(net)
    assert t.weights == params(module)
    batch = examples[0].shape[0]
    forward, backward = step_flops(lambda: module(*examples))
    assert forward == 2 * batch * t.macs_forward
    assert backward == 2 * batch * (t.macs_backprop + dense_weight_grad(net))
    built = torchnet.build_model(net)
    assert params(built) == t.weights
    x, y = torchnet.batch(net, 3)
    assert isinstance(x, tuple) and [tuple(v.shape[1:]) for v in x] == [net.shapes[i] for i in net.input_layers]
    out = built(x)
    assert tuple(out.shape[1:]) == net.shapes[-1]
    torchnet.loss_fn(net)(out, y).backward()
    assert all(p.grad is not None for p in built.parameters())
    return net


def test_a_siamese_pair_shares_its_encoder() -> None:
    m = Siamese()
    net = _imports_like_pytorch(m, [(3, 16, 16), (3, 16, 16)], (torch.randn(2, 3, 16, 16), torch.randn(2, 3, 16, 16)))
    assert net.input_layers == (0, 1) and [net.layer_names[i] for i in net.input_layers] == ["left", "right"]
    assert sum(1 for layer in net.layers if layer.shares) == 2  # the second image's convolutions


def test_a_translation_model_of_source_and_target_tokens() -> None:
    """Both inputs are token ids (each feeds an embedding); the decoder's causal mask is a constant."""
    m = Translator()
    src, tgt = torch.randint(0, 100, (2, 10)), torch.randint(0, 120, (2, 7))
    net = _imports_like_pytorch(m, [(10,), (7,)], (src, tgt))
    assert net.shapes[-1] == (7, 120)
    x, _ = torchnet.batch(net, 4)
    assert all(v.dtype == torch.int64 for v in x) and int(x[0].max()) < 100 and int(x[1].max()) < 120


def test_dense_features_beside_categorical_ids() -> None:
    net = _imports_like_pytorch(DenseAndIds(), [(13,), (26,)],
                                (torch.randn(2, 13), torch.randint(0, 1000, (2, 26))))
    x, _ = torchnet.batch(net, 2)
    assert x[0].dtype == torch.float32 and x[1].dtype == torch.int64


def test_dlrm_s_one_id_per_table_and_pairwise_interactions() -> None:
    """Each table's one id per sample an embedding viewed as a vector; the token ids the runner draws for
    the sparse input lie below the smallest table's vocabulary."""
    net = _imports_like_pytorch(Dlrm(), [(13,), (4,)], (torch.randn(2, 13), torch.randint(0, 50, (2, 4))))
    assert [layer.kind for layer in net.layers].count("embedding") == 4 and net.shapes[-1] == (1,)
    x, _ = torchnet.batch(net, 64)
    assert x[1].dtype == torch.int64 and int(x[1].max()) < 50


def test_the_model_prices_every_input() -> None:
    """The inputs' values count in the memory kept for backward, and predictions run on them."""
    from dnnbench.model.arrays import network_arrays
    from dnnbench.model.evaluate import single_machine_time_per_sample
    from dnnbench.presets import resolve
    from dnnbench.specs import Cluster, Configuration

    net = dnnbench.from_torch(Siamese(), [(3, 16, 16), (3, 16, 16)])
    one = dnnbench.from_torch(Siamese().enc, (3, 16, 16))
    cluster = resolve(Cluster, "adam-2014")
    pair, single = (single_machine_time_per_sample(n, cluster, Configuration()) for n in (net, one))
    assert pair > 1.9 * single  # two encoders' worth, and a head

    assert network_arrays(net).input_kept_values == 2 * 3 * 16 * 16


def test_bad_input_shapes_are_one_line_errors() -> None:
    with pytest.raises(SpecError, match=r"takes another input 'right'; give one shape per input"):
        dnnbench.from_torch(Siamese(), (3, 16, 16))
    with pytest.raises(SpecError, match=r"input_shape: .* gives 3 inputs; Siamese.forward takes 2 \(left, right\)"):
        dnnbench.from_torch(Siamese(), [(3, 16, 16)] * 3)
    with pytest.raises(SpecError, match=r"mixes sizes and shapes"):
        dnnbench.from_torch(Siamese(), [3, (16, 16)])
    with pytest.raises(SpecError, match=r"does not fit the module"):
        dnnbench.from_torch(Siamese(), [(3, 16, 16), (4, 16, 16)])


def test_a_spec_of_several_inputs_is_checked() -> None:
    base = [{"kind": "input", "shape": [8]}, {"kind": "fc", "name": "a", "out_features": 4},
            {"kind": "input", "name": "extra", "shape": [4]}, {"kind": "add", "inputs": ["a", "extra"]}]
    net = Network.build({"name": "two", "layers": base})
    assert net.input_layers == (0, 2) and net.shapes[-1] == (4,)
    with pytest.raises(SpecError, match=r"layers\[2\]\.inputs: \['a'\] must be empty \(an input takes no inputs\)"):
        Network.build({"name": "two", "layers": [*base[:2], {**base[2], "inputs": ["a"]}, base[3]]})
    with pytest.raises(SpecError, match=r"layers\[2\]: 'extra' is never used"):
        Network.build({"name": "two", "layers": [*base[:3], {"kind": "activation", "function": "relu",
                                                              "inputs": ["a"]}]})


def test_the_import_command_takes_one_shape_per_input(tmp_path: object) -> None:
    out = f"{tmp_path}/pair.dnn.json"
    run = [sys.executable, "-m", "dnnbench.cli", "import", "tests.importers.test_import_inputs:Siamese", "-o", out]
    res = subprocess.run([*run, "--input-shape", "3,16,16", "--input-shape", "3", "16", "16"], capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "after 2 inputs" in res.stdout
    with open(out) as f:
        spec = json.load(f)
    assert [layer["kind"] for layer in spec["layers"][:2]] == ["input", "input"]
    res = subprocess.run([*run, "--input-shape", "3,16,16"], capture_output=True, text=True, timeout=300)
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1
    assert "takes another input 'right'" in res.stderr


def test_an_onnx_graph_of_two_inputs_imports_as_the_module_does(tmp_path: object) -> None:
    """The exported Siamese pair (two named ONNX inputs) imports with an input layer for each, named after
    them, and the same counts as the module; a wrong number of override shapes is a one-line error."""
    from pathlib import Path

    from .onnx_export import export

    m = Siamese()
    path = export(m, [(3, 16, 16), (3, 16, 16)], Path(f"{tmp_path}/pair.onnx"), input_names=["left", "right"])
    net = dnnbench.from_onnx(path)
    assert [net.layer_names[i] for i in net.input_layers] == ["left", "right"]
    assert totals(net) == totals(dnnbench.from_torch(m, [(3, 16, 16), (3, 16, 16)]))
    bigger = dnnbench.from_onnx(path, input_shape=[(3, 32, 32), (3, 32, 32)])
    assert totals(bigger).macs_forward > totals(net).macs_forward
    with pytest.raises(SpecError, match=r"gives 1 input\(s\); pair.onnx has 2 \(left, right\): give one shape per "
                                        r"input$"):
        dnnbench.from_onnx(path, input_shape=(3, 16, 16))
