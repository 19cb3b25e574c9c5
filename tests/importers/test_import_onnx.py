"""dnnbench.from_onnx (issue 10): torch-exported ONNX files import to the presets' specs and counts."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
import torch
from import_helpers import Odd, Residual, without_names
from onnx_export import export
from torch import nn
from torch_nets import build

import dnnbench
from dnnbench import presets
from dnnbench.counts import totals
from dnnbench.errors import SpecError
from dnnbench.model import predict
from dnnbench.specs import Configuration, Network
from dnnbench.specs.io import load, save


@pytest.mark.parametrize("name", ["lenet5", "mnist-adam", "alexnet"])  # alexnet: ~8 s (export writes 244 MB)
def test_exported_preset_mirror_imports_to_the_preset(name: str, tmp_path) -> None:
    module, shape = build(name, device="cpu")  # export needs real weights: small networks only
    path = export(module, shape, tmp_path / f"{name}.onnx")
    net, preset = dnnbench.from_onnx(path), presets.network(name)
    assert net.name == name
    assert without_names(net) == without_names(preset)
    assert net.layer_counts == preset.layer_counts
    cl, ds = presets.cluster("adam-2014"), presets.default_dataset_for(preset)
    for cfg in ({"workers_per_replica": 2, "replicas": 4, "ps_machines": 2}, {"workers_per_replica": 1}):
        config = Configuration.build(cfg)
        assert predict(net, cl, ds, config).item() == predict(preset, cl, ds, config).item()
    # round trip
    again = load(Network, save(net, tmp_path / f"{name}.dnn.json"))
    assert again == net and totals(again) == totals(net)


def test_layer_names_are_the_exported_module_paths(tmp_path) -> None:
    module, shape = build("lenet5", device="cpu")
    net = dnnbench.from_onnx(export(module, shape, tmp_path / "lenet.onnx"), name="LeNet")
    assert net.name == "LeNet"
    assert net.layer_names[:3] == ("input", "features.0", "features.2")


def test_onnx_and_torch_imports_agree_on_odd_layers(tmp_path) -> None:
    """BN, strided non-square convs, 'same' padding, adaptive pooling, reshape via x.shape[0]."""
    torch.manual_seed(0)
    module = Odd(lrn=False).eval()
    shape = (3, 18, 36)
    from_onnx = dnnbench.from_onnx(export(module, shape, tmp_path / "odd.onnx", training=False))
    from_torch = dnnbench.from_torch(module, shape)
    # an eval export drops dropout (it costs nothing but its activations); compare the rest
    keep = lambda net: [c for layer, c in zip(net.layers, net.layer_counts, strict=True) if layer.kind != "dropout"]  # noqa: E731
    assert keep(from_onnx) == keep(from_torch)
    assert [lay.kind for lay in from_onnx.layers if lay.kind != "dropout"] == \
        [lay.kind for lay in from_torch.layers if lay.kind != "dropout"]


def test_hand_built_graph_with_lrn_matmul_add_and_global_pool() -> None:
    """Operators torch's exporter does not emit: LRN, MatMul + Add (a Linear), GlobalAveragePool."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    inits = [numpy_helper.from_array(np.zeros(s, np.float32), n)
             for n, s in (("w", (4, 3, 3, 3)), ("b", (4,)), ("scale", (4,)), ("shift", (4,)), ("mean", (4,)),
                          ("var", (4,)), ("fc_w", (4, 10)), ("fc_b", (10,)))]
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], name="conv"),
        helper.make_node("LRN", ["c"], ["l"], size=5, name="lrn"),
        helper.make_node("BatchNormalization", ["l", "scale", "shift", "mean", "var"], ["n"], name="bn"),
        helper.make_node("Relu", ["n"], ["r"], name="relu"),
        helper.make_node("GlobalAveragePool", ["r"], ["g"], name="gap"),
        helper.make_node("Flatten", ["g"], ["f"], axis=1, name="flat"),
        helper.make_node("MatMul", ["f", "fc_w"], ["m"], name="fc"),
        helper.make_node("Add", ["m", "fc_b"], ["a"], name="bias"),
        helper.make_node("Softmax", ["a"], ["y"], axis=1, name="prob"),
    ]
    graph = helper.make_graph(nodes, "hand", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 6, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])], inits)
    net = dnnbench.from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    assert net.name == "hand"
    assert [lay.to_dict() for lay in net.layers[1:]] == [
        {"kind": "conv2d", "name": "conv", "out_channels": 4, "kernel": 3, "stride": 1, "padding": 1, "bias": True,
         "activation": "none"},
        {"kind": "lrn", "name": "lrn", "size": 5},
        {"kind": "batchnorm", "name": "bn"},
        {"kind": "activation", "name": "relu", "function": "relu"},
        {"kind": "pool", "name": "gap", "mode": "avg", "window": 6, "stride": 6, "padding": 0, "ceil_mode": False},
        {"kind": "flatten", "name": "flat"},
        {"kind": "fc", "name": "fc", "out_features": 10, "bias": True, "activation": "none"},
        {"kind": "softmax", "name": "prob"},
    ]


def test_torch_exported_lrn_is_a_clear_error(tmp_path) -> None:
    module = nn.Sequential(nn.Conv2d(1, 4, 3), nn.LocalResponseNorm(3))
    # torch exports LRN as x·x (a Mul dnnbench takes), then Pad (of the channels), AveragePool, Pow, Div.
    with pytest.raises(SpecError, match="pads other than the height and width of feature maps") as info:
        dnnbench.from_onnx(export(module, (1, 8, 8), tmp_path / "lrn.onnx"))
    assert "Pad node '/1/Pad'" in str(info.value) and "\n" not in str(info.value)


def test_graphs_import_as_from_torch_does(tmp_path) -> None:
    """A residual add, a depthwise (grouped) and a dilated conv, GELU and ReLU6 through ONNX."""
    net = dnnbench.from_onnx(export(Residual(), (4, 8, 8), tmp_path / "res.onnx"))
    assert [layer.kind for layer in net.layers] == ["input", "conv2d", "add"]
    assert len(net.layers[2].inputs) == 2
    module = nn.Sequential(nn.Conv2d(2, 4, 3, groups=2), nn.ReLU6(), nn.Conv2d(4, 4, 3, dilation=2), nn.GELU())
    a = dnnbench.from_onnx(export(module, (2, 12, 12), tmp_path / "grouped.onnx"))
    b = dnnbench.from_torch(module, (2, 12, 12))
    assert a.layer_counts == b.layer_counts
    assert [(x.kind, getattr(x, "activation", None)) for x in a.layers] == [
        ("input", None), ("conv2d", "relu6"), ("conv2d", "gelu")]


def test_input_shape_overrides_the_file(tmp_path) -> None:
    module = nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.MaxPool2d(2))
    path = export(module, (1, 16, 16), tmp_path / "fcn.onnx")
    assert dnnbench.from_onnx(path).shapes[-1] == (4, 7, 7)
    assert dnnbench.from_onnx(path, input_shape=(1, 32, 32)).shapes[-1] == (4, 15, 15)


class _TopK(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 2, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x).topk(2).values


def test_bad_files_and_unsupported_graphs_are_one_line_errors(tmp_path) -> None:
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"\x00\xffnot a protobuf at all" * 10)
    text = tmp_path / "net.onnx"
    text.write_text('{"name": "not onnx"}')
    truncated = tmp_path / "truncated.onnx"
    full = export(nn.Sequential(nn.Conv2d(1, 2, 3)), (1, 8, 8), tmp_path / "full.onnx").read_bytes()
    truncated.write_bytes(full[: len(full) // 2])
    cases = [
        (tmp_path / "missing.onnx", "does not exist"),
        (tmp_path, "is a folder"),
        (garbage, "not a valid ONNX model"),
        (text, "not a valid ONNX model"),
        (truncated, "not a valid ONNX model"),
        (export(_TopK(), (1, 8, 8), tmp_path / "topk.onnx"), "has the operator TopK"),
    ]
    for path, message in cases:
        with pytest.raises(SpecError, match=message) as info:
            dnnbench.from_onnx(path)
        assert "\n" not in str(info.value), path


class _Gated(nn.Module):
    """A squeeze-and-excitation gate (x · sigmoid(fc(pool(x)))) and SiLU (x · sigmoid(x)) side by side."""

    def __init__(self) -> None:
        super().__init__()
        self.conv, self.act = nn.Conv2d(3, 8, 3, padding=1), nn.SiLU()
        self.pool, self.fc1, self.fc2 = nn.AdaptiveAvgPool2d(1), nn.Conv2d(8, 2, 1), nn.Conv2d(2, 8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.act(self.conv(x))
        return x * torch.sigmoid(self.fc2(torch.relu(self.fc1(self.pool(x)))))


def test_a_gate_through_onnx_equals_from_torch(tmp_path) -> None:
    module = _Gated()
    a = dnnbench.from_onnx(export(module, (3, 8, 8), tmp_path / "gate.onnx"))
    b = dnnbench.from_torch(module, (3, 8, 8))
    assert a.layer_counts == b.layer_counts and a.input_indices == b.input_indices
    assert [layer.kind for layer in a.layers].count("mul") == 1
    assert [getattr(layer, "activation", None) for layer in a.layers][1] == "silu"


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2", "googlenet", "mnasnet0_5", "mobilenet_v3_small",
                                  "shufflenet_v2_x0_5"])
def test_torchvision_graphs_through_onnx_equal_from_torch(name: str, tmp_path) -> None:
    """googlenet: max pooling with ceil_mode; mnasnet: a mean over height and width (ReduceMean);
    mobilenet_v3: HardSwish, and squeeze-and-excitation gates through HardSigmoid (Mul); shufflenet:
    x.chunk as Slice nodes whose bounds the exporter computes from the tensor's Shape, and the channel
    shuffle (Reshape to four axes per sample, Transpose, Reshape back)."""
    from torchvision_models import models

    kwargs = {"aux_logits": False, "init_weights": False} if name == "googlenet" else {}
    module = getattr(models(), name)(weights=None, **kwargs)
    with warnings.catch_warnings():  # the exporter notes BatchNorm's num_batches_tracked update it drops
        warnings.filterwarnings("ignore", message="ONNX Preprocess - Removing mutation", category=UserWarning)
        path = export(module, (3, 224, 224), tmp_path / f"{name}.onnx")
    a, b = dnnbench.from_onnx(path), dnnbench.from_torch(module, (3, 224, 224))
    assert a.layer_counts == b.layer_counts and a.input_indices == b.input_indices
    assert not a.is_chain


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """The legacy exporter's deprecation notices, and its advice against folding constants in training
    mode (folding is what a user's default export does; both ways are tested)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.filterwarnings("ignore", message="It is recommended that constant folding be turned off",
                                category=UserWarning)
        warnings.filterwarnings("ignore", message="ONNX Preprocess - Removing mutation", category=UserWarning)
        # nn.MultiheadAttention's shape checks become constants in a trace: true of any fixed input shape.
        warnings.filterwarnings("ignore", message="Converting a tensor to a Python", category=torch.jit.TracerWarning)
        warnings.filterwarnings("ignore", message="Converting a tensor to a Python", category=UserWarning)
        yield


def _export_tokens(module: nn.Module, seq: int, path: Any, fold: bool) -> Any:
    with _quiet():
        torch.onnx.export(module, (torch.zeros(1, seq, dtype=torch.int64),), str(path), dynamo=False,
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=fold)
    return path


@pytest.mark.parametrize("fold", [True, False])
def test_transformers_through_onnx_equal_from_torch(fold: bool, tmp_path) -> None:
    """GPT-2 and BERT (tests/transformer_nets.py) and torchvision's VisionTransformer, small, exported by
    torch: each exported nn.MultiheadAttention is one attention layer (heads, bias, causal mask), and
    embeddings, position tables, the class token, layer norms, GELU, dropout ratios and token selection
    map as from_torch; so do nn.TransformerEncoder's exported layers."""
    from torchvision_models import models
    from transformer_nets import GPT2, Bert, TorchEncoder

    cases = [(GPT2(vocabulary=50, context=16, width=16, layers=2, heads=2), (8,)),
             (Bert(vocabulary=40, positions=16, width=16, layers=2, heads=4), (8,)),
             (TorchEncoder(vocabulary=30, context=16, width=16, heads=2, feed_forward=24, dropout=0.2), (8,)),
             (TorchEncoder(vocabulary=30, context=16, width=16, heads=4, feed_forward=24, norm_first=True,
                           activation="gelu", causal=True), (8,))]
    for module, shape in cases:
        a = dnnbench.from_onnx(_export_tokens(module, shape[0], tmp_path / "t.onnx", fold))
        b = dnnbench.from_torch(module, shape)
        assert a.input_indices == b.input_indices
        if fold:  # a folded export keeps a position table only at the positions used (docs/importing.md)
            tables = [i for i, x in enumerate(b.layers) if x.kind == "position_embedding"]
            assert all(a.layers[i].rows == shape[0] for i in tables)
            same = [i for i in range(len(b.layers)) if i not in tables]
            assert [a.layer_counts[i] for i in same] == [b.layer_counts[i] for i in same]
        else:
            assert a.layer_counts == b.layer_counts
        for kind in ("attention", "dropout", "fc", "layer_norm"):
            assert [x.to_dict() | {"name": "", "inputs": []} for x in a.layers if x.kind == kind] == [
                x.to_dict() | {"name": "", "inputs": []} for x in b.layers if x.kind == kind], kind
    vit = models().vision_transformer.VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2,
                                                        hidden_dim=16, mlp_dim=32, num_classes=10)
    with _quiet():
        torch.onnx.export(vit, (torch.zeros(1, 3, 32, 32),), str(tmp_path / "vit.onnx"), dynamo=False,
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=fold)
    a, b = dnnbench.from_onnx(tmp_path / "vit.onnx"), dnnbench.from_torch(vit, (3, 32, 32))
    assert a.layer_counts == b.layer_counts and a.input_indices == b.input_indices
    assert {"class_token", "position_embedding", "attention", "select_token"} <= {x.kind for x in a.layers}


@pytest.mark.parametrize("training", [False, True])
def test_a_convnext_through_onnx_equals_from_torch(training: bool, tmp_path) -> None:
    """torchvision's ConvNeXt, small: layer norms over permuted maps, MatMul on channels-last maps (an fc
    between two views, its bias the Add after it) and the learned layer scale (Mul by a (C, 1, 1)
    constant) map as from_torch maps them. A training export's stochastic depth (a random draw below the
    keep probability, times the branch) is a per-sample dropout of its p; an eval export has none."""
    from torchvision_models import models

    cn = models().convnext
    module = cn.ConvNeXt([cn.CNBlockConfig(16, 32, 2), cn.CNBlockConfig(32, None, 2)], stochastic_depth_prob=0.1,
                         num_classes=10).train(training)
    a = dnnbench.from_onnx(export(module, (3, 32, 32), tmp_path / "convnext.onnx", training=training))
    b = dnnbench.from_torch(module, (3, 32, 32))
    assert a.layer_counts == b.layer_counts and a.input_indices == b.input_indices
    for x, y in zip(a.layers, b.layers, strict=True):
        left, right = x.to_dict() | {"name": "", "inputs": []}, y.to_dict() | {"name": "", "inputs": []}
        if x.kind == "dropout":  # the keep probability is a float32 constant in the file
            assert left.pop("p") == pytest.approx(right.pop("p"), abs=1e-6)
        assert left == right
    assert {"scale", "permute", "layer_norm", "reshape"} <= {x.kind for x in a.layers}
    assert ("dropout" in {x.kind for x in a.layers}) is training


def test_constant_factors_through_onnx_equal_from_torch(tmp_path) -> None:
    """x * sqrt(D) and x / 4 export as Mul and Div by one constant: scales that learn nothing."""

    class Scaled(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv, self.fc = nn.Conv2d(3, 4, 3), nn.Linear(4 * 6 * 6, 5)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(torch.flatten(self.conv(x) * 3.0 / 4, 1))

    module = Scaled()
    a = dnnbench.from_onnx(export(module, (3, 8, 8), tmp_path / "scaled.onnx", training=False))
    b = dnnbench.from_torch(module, (3, 8, 8))
    assert [x.kind for x in a.layers] == [x.kind for x in b.layers] == ["input", "conv2d", "scale", "scale",
                                                                        "flatten", "fc"]
    assert a.layer_counts == b.layer_counts
