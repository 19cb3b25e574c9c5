"""Models as training code writes them (docs/importing.md, "Training code"): the labels beside the input
and the loss in ``forward`` (nanoGPT's ``forward(idx, targets=None)``), shape checks, tied weights,
attention written out by hand, slicing, and the CLI's ``--labels``."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F
from import_helpers import MultiTask, builds_what_the_module_computes, step_flops
from onnx_export import export
from torch import nn
from transformer_nets import StackedAttentionClassifier, TrainingGPT

import dnnbench
from dnnbench.cli import main
from dnnbench.counts import totals
from dnnbench.errors import SpecError
from dnnbench.measure import torchnet
from dnnbench.specs import Network

FORMS = [pytest.param(fused, dropout, bias, id=f"{'fused' if fused else 'written-out'}-p{dropout}-bias{bias}")
         for fused in (True, False) for dropout in (0.0, 0.1) for bias in (True, False)]


def _kinds(net: Network) -> list[str]:
    return [layer.kind for layer in net.layers]


@pytest.mark.parametrize(("fused", "dropout", "bias"), FORMS)
def test_the_training_branch_imports_with_its_loss_and_its_tied_head(fused: bool, dropout: float, bias: bool) -> None:
    module = TrainingGPT(fused=fused, dropout=dropout, bias=bias)
    net = dnnbench.from_torch(module, (64,), labels="targets")
    assert totals(net).weights == sum(p.numel() for p in module.parameters())  # the tied matrix once
    head = net.layers[net.layer_names.index("lm_head")]
    assert head.kind == "fc" and head.tied_to == "wte"
    assert net.layers[-1].kind == "softmax" and net.layer_names[-1] == "cross_entropy"
    assert net.shapes[-1] == (64, 100)  # every token's logits, not the last one's
    kinds = _kinds(net)
    if fused:
        assert kinds.count("sdpa") == 2 and "matmul" not in kinds
    else:  # q @ kᵀ, the 1/sqrt(d) factor, the mask, softmax, (dropout,) @ v
        assert kinds.count("matmul") == 4 and kinds.count("sdpa") == 0
        assert kinds.count("softmax") == 3  # two blocks' scores and the loss
    # Per block the residual branches' dropouts, and written out the attention's (fused, it is the kernel's);
    # then the embeddings' dropout.
    assert kinds.count("dropout") == (0 if dropout == 0 else 2 * (2 if fused else 3) + 1)


@pytest.mark.parametrize("fused", [True, False])
def test_without_labels_the_inference_branch_is_what_imports(fused: bool) -> None:
    net = dnnbench.from_torch(TrainingGPT(fused=fused), (64,))
    assert net.layers[-1].kind == "fc" and net.shapes[-1] == (1, 100)  # the last token's logits alone
    piece = net.layers[-2]
    assert piece.kind == "slice" and (piece.axis, piece.start, piece.stop) == (0, 63, 64)


@pytest.mark.parametrize("fused", [True, False])
def test_training_flops_equal_flop_counter(fused: bool) -> None:
    """The whole training step's forward and backward FLOPs (PyTorch's math attention, which
    FlopCounterMode counts) equal 2 x dnnbench's MACs; the loss adds none."""
    module = TrainingGPT(fused=fused, layers=3)
    net = dnnbench.from_torch(module, (64,), labels="targets")
    idx, targets = torch.randint(0, 100, (1, 64)), torch.randint(0, 100, (1, 64))
    forward, backward = step_flops(lambda: module(idx, targets)[1])
    t = totals(net)
    assert forward == 2 * t.macs_forward
    assert backward == 2 * (t.macs_backprop + t.macs_weight_grad)


@pytest.mark.parametrize("fused", [True, False])
def test_the_runner_trains_the_imported_spec_with_the_head_tied(fused: bool) -> None:
    module = TrainingGPT(fused=fused, dropout=0.1)
    net = dnnbench.from_torch(module, (64,), labels="targets")
    model = torchnet.build_model(net)
    assert sum(p.numel() for p in model.parameters()) == sum(p.numel() for p in module.parameters())
    x, y = torchnet.batch(net, 4)
    loss = torchnet.loss_fn(net)(model(x), y)
    loss.backward()
    assert torch.isfinite(loss)
    assert all(p.grad is not None for p in model.parameters())


def test_labels_must_name_a_parameter_and_a_second_input_needs_a_default() -> None:
    with pytest.raises(SpecError, match=r"^labels: 'y' is not a parameter of TrainingGPT.forward after its input; "
                                        r"expected one of targets$"):
        dnnbench.from_torch(TrainingGPT(), (64,), labels="y")

    class TwoInputs(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(8, 4)

        def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return F.cross_entropy(self.fc(x), y)

    with pytest.raises(SpecError, match=r"takes another input 'y'; give one shape per input.*labels='y'") as err:
        dnnbench.from_torch(TwoInputs(), (8,))
    assert "\n" not in str(err.value)
    net = dnnbench.from_torch(TwoInputs(), (8,), labels="y")  # a classifier's labels: one per sample
    assert _kinds(net) == ["input", "fc", "softmax"]


def test_a_loss_after_log_softmax_adds_nothing() -> None:
    class Classifier(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(8, 4)

        def forward(self, x: torch.Tensor, labels: torch.Tensor | None = None) -> torch.Tensor:
            out = F.log_softmax(self.fc(x), dim=1)
            return out if labels is None else F.nll_loss(out, labels)

    assert _kinds(dnnbench.from_torch(Classifier(), (8,), labels="labels")) == ["input", "fc", "softmax"]
    assert _kinds(dnnbench.from_torch(Classifier(), (8,))) == ["input", "fc", "softmax"]


def test_code_that_checks_and_branches_on_shapes_traces_at_the_input_shape() -> None:
    class Checked(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.grey, self.colour = nn.Conv2d(1, 8, 3), nn.Conv2d(3, 8, 3)
            self.fc = nn.Linear(8 * 30 * 30, 10)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            assert x.dim() == 4 and x.shape[-1] == 32, "32x32 images"
            x = self.colour(x) if x.size(1) == 3 else self.grey(x)
            b, c, h, w = x.shape
            return self.fc(x.reshape(b, c * h * w))

    colour = dnnbench.from_torch(Checked(), (3, 32, 32))
    assert colour.layer_names[1] == "colour" and totals(colour).weights == 8 * 27 + 8 + 7200 * 10 + 10
    assert dnnbench.from_torch(Checked(), (1, 32, 32)).layer_names[1] == "grey"
    with pytest.raises(SpecError, match="32x32 images"):
        dnnbench.from_torch(Checked(), (3, 28, 28))


def test_slices_of_one_axis_import_as_slice_layers() -> None:
    class Pieces(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 16, 3, padding=1)
            self.fc = nn.Linear(8 * 8, 10)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = self.conv(x)[:, 4:12]  # channels 4..11
            x = x[..., :8]  # the first 8 columns
            x = x[:, :, 2]  # row 2: drops the axis
            return self.fc(x.flatten(1))

    net = dnnbench.from_torch(Pieces(), (3, 8, 16))
    slices = [(layer.axis, layer.start, layer.stop) for layer in net.layers if layer.kind == "slice"]
    assert slices == [(0, 4, 12), (2, 0, 8), (1, 2, 3)]
    assert net.shapes[net.layer_names.index("fc") - 1] == (64,)


@pytest.mark.parametrize("index", [(slice(None), slice(None, None, 3)), (slice(None), slice(1, 7, 2)),
                                   (slice(None), slice(2, None, 5)), (slice(None), slice(0, 3, 4))])
def test_every_kth_position_of_an_axis_of_any_size(index: tuple[slice, ...]) -> None:
    """x[:, a:b:k] of 8 positions: the whole groups of k and a last, incomplete group's first position."""
    class Strided(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x[index]

    net = dnnbench.from_torch(Strided(), (8,))  # the builder checks every layer's shape against the trace
    assert net.shapes[-1] == tuple(torch.zeros(1, 8)[index].shape[1:])
    model = torchnet.build_model(net)
    x = torch.arange(16.0).view(2, 8)
    assert torch.equal(model(x), x[index])  # the spec's layers take the same positions


def test_an_unsupported_index_names_what_is_imported() -> None:
    class Picked(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x[:, 2, 1:3]  # an index beside a slice of (C, H, W) maps

    with pytest.raises(SpecError, match=r"indexes a tensor with .*contiguous positions of one axis"):
        dnnbench.from_torch(Picked(), (4, 8, 8))


def test_a_product_by_a_learned_tensor_of_three_axes_is_a_one_line_error() -> None:
    """(A learned matrix is an fc layer: tests/importers/test_import_learned_products.py.)"""
    class ByParameter(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.zeros(1, 8, 4))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x @ self.w

    with pytest.raises(SpecError, match=r"neither another layer output, a learned matrix") as err:
        dnnbench.from_torch(ByParameter(), (3, 8))
    assert "\n" not in str(err.value)


def test_tied_to_is_checked_and_saved_only_when_set() -> None:
    base = [{"kind": "input", "shape": [16]}, {"kind": "embedding", "name": "wte", "vocabulary": 50, "dim": 8},
            {"kind": "fc", "name": "head", "out_features": 50, "bias": False}]
    tied = Network.build({"name": "t", "layers": [*base[:2], {**base[2], "tied_to": "wte"}]})
    untied = Network.build({"name": "u", "layers": base})
    assert totals(untied).weights - totals(tied).weights == 50 * 8
    assert totals(untied).macs_weight_grad == totals(tied).macs_weight_grad  # the gradient is still computed
    assert "tied_to" not in json.dumps(untied.to_dict()) and '"tied_to": "wte"' in json.dumps(tied.to_dict())
    cases = [("nope", "names no earlier layer"), ("head", "names no earlier layer"),
             ("input", "is a input layer; expected an embedding or fc layer")]
    for ref, message in cases:
        with pytest.raises(SpecError, match=rf"^layers\[2\]\.tied_to: '{ref}' {message}"):
            Network.build({"name": "t", "layers": [*base[:2], {**base[2], "tied_to": ref}]})
    wide = {"kind": "fc", "name": "head", "out_features": 60, "bias": False, "tied_to": "wte"}
    with pytest.raises(SpecError, match=r"has a weight matrix of 400 values; this layer's has 480"):
        Network.build({"name": "t", "layers": [*base[:2], wide]})


def test_cli_labels(tmp_path, capsys) -> None:
    out = tmp_path / "gpt.dnn.json"
    assert main(["import", "transformer_nets:TrainingGPT", "-o", str(out), "--input-shape", "64",
                 "--labels", "targets"]) == 0
    assert "111 k weights" in capsys.readouterr().out  # 110,592: the tied matrix once
    layers = json.loads(out.read_text())["layers"]
    assert layers[-1]["kind"] == "softmax" and any(layer.get("tied_to") == "wte" for layer in layers)
    assert main(["import", "transformer_nets:TrainingGPT", "-o", str(tmp_path / "x.json"), "--input-shape", "64",
                 "--label-shape", "64"]) == 2
    assert "--label-shape: needs --labels" in capsys.readouterr().err


def test_onnx_products_of_two_data_tensors_are_matmul_layers(tmp_path) -> None:
    class Scores(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.q, self.k = nn.Linear(16, 16), nn.Linear(16, 16)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = x.view(-1, 8, 16)
            return torch.softmax(self.q(x) @ self.k(x).transpose(1, 2), dim=-1) @ x

    path = export(Scores(), (128,), tmp_path / "scores.onnx")
    net = dnnbench.from_onnx(path)
    assert _kinds(net).count("matmul") == 2
    assert totals(net).macs_forward == totals(dnnbench.from_torch(Scores(), (128,))).macs_forward


@pytest.mark.parametrize(("fused", "dropout"), [(True, 0.0), (False, 0.0), (False, 0.1)])
def test_onnx_export_of_the_gpt_imports_its_causal_mask_and_last_token(tmp_path, fused: bool,
                                                                       dropout: float) -> None:
    """nanoGPT's form exported to ONNX (no labels: the last token's logits, ``x[:, [-1], :]``, a Gather of
    one index that keeps the axis), its causal mask a ``Where`` of a constant mask (written out) or of
    the exporter's ``Trilu`` (fused): the counts equal from_torch's, the tied matrix once."""
    module = TrainingGPT(fused=fused, dropout=dropout)
    net = dnnbench.from_onnx(export(module, (16,), tmp_path / "gpt.onnx", dtype=torch.long))
    same = dnnbench.from_torch(module, (16,))
    a, b = totals(net), totals(same)
    assert (a.weights, a.macs_forward, a.macs_backprop, a.macs_weight_grad) == (
        b.weights, b.macs_forward, b.macs_backprop, b.macs_weight_grad)
    assert a.weights == sum(p.numel() for p in module.parameters())
    assert net.layers[-2].kind == "slice" and net.layer_counts[-1].output_shape == (1, 100)


def test_where_between_two_layer_outputs_is_a_one_line_error(tmp_path) -> None:
    class Choose(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b = nn.Linear(8, 8), nn.Linear(8, 8)
            self.register_buffer("mask", torch.arange(8) % 2 == 0)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.where(self.mask, self.a(x), self.b(x))

    path = export(Choose(), (8,), tmp_path / "choose.onnx")
    with pytest.raises(SpecError, match=r"^Where node .*: selects by a constant mask between two layer outputs; "
                                        r"dnnbench imports Where of a constant mask"):
        dnnbench.from_onnx(path)


@pytest.mark.parametrize(("fused", "unbind"), [(True, True), (True, False), (False, True), (False, False)])
def test_queries_keys_and_values_stacked_in_front_of_the_batch(fused: bool, unbind: bool) -> None:
    """timm's attention: qkv viewed as (B, N, 3, H, d), permuted to (3, B, H, N, d), taken apart by
    ``unbind(0)`` or ``qkv[i]``: each piece a slice of the '3' axis, that axis dropped, the heads in front.
    The network's training FLOPs (math attention) equal 2 x its MACs."""
    module = StackedAttentionClassifier(fused=fused, unbind=unbind)
    net = dnnbench.from_torch(module, (64,))
    pieces = [layer for layer in net.layers if layer.kind == "slice"]
    assert [(p.axis, p.start, p.stop) for p in pieces] == [(1, i, i + 1) for i in range(3)] * 2
    assert any(layer.kind == "reshape" and len(layer.shape) == 4 for layer in net.layers)  # (N, 3, H, d)
    assert _kinds(net).count("sdpa" if fused else "matmul") == (2 if fused else 4)
    ids = torch.randint(0, 100, (1, 64))
    forward, backward = step_flops(lambda: module(ids))
    t = totals(net)
    assert forward == 2 * t.macs_forward
    assert backward == 2 * (t.macs_backprop + t.macs_weight_grad)
    model = torchnet.build_model(net)  # the runner trains the spec
    x, y = torchnet.batch(net, 2)
    torchnet.loss_fn(net)(model(x), y).backward()


def test_a_permute_of_the_batch_used_whole_is_one_samples_layer() -> None:
    """``(N, 3, 8)`` permuted to ``(3, N, 8)`` and summed over its first axis: each sample's three rows
    added, imported with the batch counted first (a reduce over the sample's axis 0)."""
    class Whole(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(8, 24)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(x).reshape(x.shape[0], 3, 8).permute(1, 0, 2).sum(0)

    net = builds_what_the_module_computes(Whole(), (8,))
    assert [layer.kind for layer in net.layers] == ["input", "fc", "reshape", "reduce"]


def test_auxiliary_classifiers_in_training_mode_are_summed_into_the_output() -> None:
    """GoogLeNet's and Inception-v3's training-mode forward returns its logits beside auxiliary ones (a
    named tuple): their sum is the output, so every head's layers are priced forward and backward, the
    FLOPs FlopCounterMode counts for a step whose loss takes every head."""
    from collections import namedtuple

    Outputs = namedtuple("Outputs", ["logits", "aux"])

    class WithAux(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem, self.body = nn.Conv2d(3, 8, 3, padding=1), nn.Conv2d(8, 8, 3, padding=1)
            self.aux_head, self.head = nn.Linear(8, 5), nn.Linear(8, 5)

        def forward(self, x: torch.Tensor) -> Outputs | torch.Tensor:
            y = torch.relu(self.stem(x))
            aux = self.aux_head(y.mean((2, 3)))
            logits = self.head(torch.relu(self.body(y)).mean((2, 3)))
            return Outputs(logits, aux) if self.training else logits

    module = WithAux()
    net = dnnbench.from_torch(module, (3, 8, 8))
    assert (net.layers[-1].kind, net.layers[-1].inputs) == ("add", ("head", "aux_head"))
    assert totals(net).weights == sum(p.numel() for p in module.parameters())
    forward, backward = step_flops(lambda: sum(module(torch.randn(2, 3, 8, 8))))
    assert (forward, backward) == (2 * 2 * totals(net).macs_forward,
                                   2 * 2 * (totals(net).macs_backprop + totals(net).macs_weight_grad))
    assert "aux_head" not in dnnbench.from_torch(module.eval(), (3, 8, 8)).layer_names


def test_outputs_of_different_shapes_are_flattened_and_joined() -> None:
    """A multi-task network's heads of different shapes (a dict of class logits, a box and a dense map):
    each flattened and joined into one output, a ``concat``, so every head's layers are priced forward and
    backward, the FLOPs FlopCounterMode counts for a step whose loss takes every head; the runner trains
    the spec, and a model-parallel split at W = 2 computes what the whole network computes."""

    module = MultiTask()
    net = dnnbench.from_torch(module, (3, 8, 8))
    outputs = net.layers[-1]
    assert (outputs.kind, outputs.inputs, net.shapes[-1]) == ("concat", ("cls", "box", "seg_flat"), (5 + 4 + 128,))
    assert net.layers[-2].kind == "flatten" and net.shapes[-2] == (128,)
    assert totals(net).weights == sum(p.numel() for p in module.parameters())
    forward, backward = step_flops(lambda: sum(v.sum() for v in module(torch.randn(2, 3, 8, 8)).values()))
    assert (forward, backward) == (2 * 2 * totals(net).macs_forward,
                                   2 * 2 * (totals(net).macs_backprop + totals(net).macs_weight_grad))
    model = torchnet.build_model(net)
    x, y = torchnet.batch(net, 2)
    torchnet.loss_fn(net)(model(x), y).backward()

    class Pair(nn.Module):  # two vectors: joined without a flatten
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b = nn.Linear(4, 3), nn.Linear(4, 2)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return self.a(x), self.b(x)

    pair = dnnbench.from_torch(Pair(), (4,))
    assert [layer.kind for layer in pair.layers[1:]] == ["fc", "fc", "concat"] and pair.shapes[-1] == (5,)


@pytest.mark.parametrize("reduce", ["mean", "sum"])
def test_heads_stacked_in_front_of_the_batch_and_averaged_are_an_add(reduce: str) -> None:
    """CrossViT's ``torch.mean(torch.stack([head(x) for head in heads], 0), 0)``: the heads' outputs added
    (and scaled by 1/n for the mean), their FLOPs what FlopCounterMode counts; a stack in front of the batch
    used otherwise is still a one-line error."""

    class Heads(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3)
            self.heads = nn.ModuleList([nn.Linear(8, 5) for _ in range(3)])

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.conv(x).mean((2, 3))
            stacked = torch.stack([head(y) for head in self.heads], dim=0)
            return torch.mean(stacked, dim=0) if reduce == "mean" else stacked.sum(0)

    module = Heads()
    net = dnnbench.from_torch(module, (3, 8, 8))
    tail = [layer.kind for layer in net.layers[-2:]]
    assert tail == (["add", "scale"] if reduce == "mean" else ["fc", "add"])
    assert net.shapes[-1] == (5,) and totals(net).weights == sum(p.numel() for p in module.parameters())
    forward, backward = step_flops(lambda: module(torch.randn(2, 3, 8, 8)))
    assert (forward, backward) == (2 * 2 * totals(net).macs_forward,
                                   2 * 2 * (totals(net).macs_backprop + totals(net).macs_weight_grad))

    class Kept(Heads):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.conv(x).mean((2, 3))
            return torch.stack([head(y) for head in self.heads], dim=0)[0]

    with pytest.raises(SpecError) as err:
        dnnbench.from_torch(Kept(), (3, 8, 8))
    assert "\n" not in str(err.value)
