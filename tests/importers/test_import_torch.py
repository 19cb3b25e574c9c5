"""dnnbench.from_torch (issue 10): presets' torch mirrors import to equal specs, counts equal FlopCounterMode."""

from __future__ import annotations

import math
import re
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from import_helpers import Odd, Residual, step_flops, structure, without_names
from torch import nn
from torch.utils.flop_counter import FlopCounterMode
from torch_nets import PRESET_MODULES, LeNet5, build

import dnnbench
from dnnbench import presets
from dnnbench.counts import totals
from dnnbench.errors import SpecError
from dnnbench.model import predict
from dnnbench.specs import Configuration, Network
from dnnbench.specs.io import load, save

CONFIGS = [
    {"workers_per_replica": 1, "replicas": 1, "ps_machines": 0},
    {"workers_per_replica": 4, "replicas": 1, "ps_machines": 0},
    {"workers_per_replica": 2, "replicas": 8, "ps_machines": 4},
    {"workers_per_replica": 4, "replicas": 16, "ps_machines": 10, "mode": "sync", "overlap": 0.5},
    {"workers_per_replica": 8, "replicas": 4, "ps_machines": 2, "partitioning": "spatial"},
]


@pytest.fixture(scope="module")
def imported() -> dict[str, Network]:
    out = {}
    for name in PRESET_MODULES:
        module, shape = build(name)
        out[name] = dnnbench.from_torch(module, shape)
    return out


@pytest.mark.parametrize("name", list(PRESET_MODULES))
def test_imported_layers_equal_the_preset(name: str, imported: dict[str, Network]) -> None:
    net, preset = imported[name], presets.network(name)
    assert without_names(net) == without_names(preset)
    assert net.layer_counts == preset.layer_counts
    assert net.shapes == preset.shapes


@pytest.mark.parametrize("name", list(PRESET_MODULES))
@pytest.mark.parametrize("cluster", ["adam-2014", "modern-2025"])
def test_imported_spec_predicts_like_the_preset(name: str, cluster: str, imported: dict[str, Network]) -> None:
    preset = presets.network(name)
    cl, ds = presets.cluster(cluster), presets.default_dataset_for(preset)
    for cfg in CONFIGS:
        config = Configuration.build(cfg)
        assert predict(imported[name], cl, ds, config).item() == predict(preset, cl, ds, config).item(), cfg


def test_layer_names_are_module_paths_and_name_defaults_to_class(imported: dict[str, Network]) -> None:
    net = imported["alexnet"]
    assert net.name == "alexnet"
    assert net.layer_names[:3] == ("input", "features.0", "features.2")
    assert "classifier.1" in net.layer_names and "softmax" in net.layer_names
    assert imported["mnist-adam"].name == "mnistadam"
    assert dnnbench.from_torch(LeNet5(), (1, 32, 32), name="my-lenet").name == "my-lenet"
    # a module called three times gives three layers with distinct names
    assert [n for n in imported["imagenet22k-adam"].layer_names if n.startswith("pool")] == ["pool", "pool:2", "pool:3"]


def test_round_trip_save_load_keeps_counts(imported: dict[str, Network], tmp_path) -> None:
    for name, net in imported.items():
        path = save(net, tmp_path / f"{name}.dnn.json")
        again = load(Network, path)
        assert again == net
        assert again.layer_counts == net.layer_counts
        assert totals(again) == totals(net)


def test_module_is_not_changed_and_stays_on_its_device() -> None:
    module = LeNet5()
    before = {k: v.clone() for k, v in module.state_dict().items()}
    module.train()
    dnnbench.from_torch(module, (1, 32, 32))
    assert module.training
    assert all(p.device.type == "cpu" for p in module.parameters())
    assert all(torch.equal(before[k], v) for k, v in module.state_dict().items())


def test_layers_before_the_first_parameters_send_no_error_down() -> None:
    """The input scaled and padded (TensorFlow's "same" padding as nn.ZeroPad2d) before the first
    convolution: nothing before the convolution needs a gradient, so it computes none for its input, as
    FlopCounterMode counts."""

    class Padded(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.pad = nn.ZeroPad2d((1, 0, 1, 0))
            self.conv = nn.Conv2d(3, 8, 3)
            self.fc = nn.Linear(8 * 7 * 7, 10)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(torch.flatten(self.conv(self.pad(x * 0.5)), 1))

    module = Padded()
    net = dnnbench.from_torch(module, (3, 8, 8))
    assert [layer.kind for layer in net.layers] == ["input", "scale", "pad", "conv2d", "flatten", "fc"]
    assert net.needs_gradient == (False, False, False, True, True, True)
    assert net.layer_counts[3].macs_backprop == 0 and net.layer_counts[2].elem_ops_backprop == 0
    t = totals(net)
    forward, backward = step_flops(lambda: module(torch.zeros(1, 3, 8, 8)))
    assert (forward, backward) == (2 * t.macs_forward, 2 * (t.macs_backprop + t.macs_weight_grad))
    ones = dnnbench.from_torch(nn.Sequential(nn.ConstantPad2d(1, 1.0), nn.Conv2d(3, 4, 3)), (3, 8, 8))
    assert (ones.layers[1].kind, ones.layers[1].value) == ("pad", 1.0)


def test_odd_layers_map_and_match_flop_counter() -> None:
    with torch.device("meta"):
        module = Odd()
    net = dnnbench.from_torch(module, (3, 18, 36))
    kinds = [(layer.kind, getattr(layer, "activation", None)) for layer in net.layers]
    assert kinds == [("input", None), ("conv2d", "none"), ("batchnorm", None), ("activation", None), ("pool", None),
                     ("conv2d", "relu"), ("lrn", None), ("conv2d", "tanh"), ("pool", None), ("pool", None),
                     ("flatten", None), ("fc", "none"), ("dropout", None), ("fc", "none"), ("softmax", None)]
    assert net.layers[9].window == 2 and net.layers[9].stride == 2  # adaptive 4x4 -> 2x2
    assert net.layers[7].padding == 1  # 'same' for a 3x3 kernel
    assert net.layers[1].kernel == (3, 5) and net.layers[1].stride == (1, 2)
    # FlopCounterMode per module, forward and backward, against the imported counts
    flops = {}
    for frozen in (False, True):
        with torch.device("meta"):
            m = Odd()
        if frozen:
            for mod in (m.c1, m.c2, m.c3, m.fc1, m.fc2):
                mod.weight.requires_grad_(False)  # biases of c1, c3, fc2 stay trainable: errors still flow
        counter = FlopCounterMode(display=False)
        with counter:
            fwd = FlopCounterMode(display=False)
            with fwd:
                y = m(torch.empty(1, 3, 18, 36, device="meta"))
            y.sum().backward()
        flops[frozen] = ({k.removeprefix("Odd."): sum(v.values()) for k, v in counter.get_flop_counts().items()},
                         {k.removeprefix("Odd."): sum(v.values()) for k, v in fwd.get_flop_counts().items()})
    (full, forward), (frozen_all, _) = flops[False], flops[True]
    by_name = dict(zip(net.layer_names, net.layer_counts, strict=True))
    for path in ("c1", "c2", "c3", "fc1", "fc2"):
        c = by_name[path]
        assert forward[path] == 2 * c.macs_forward, path
        assert full[path] - forward[path] == 2 * (c.macs_backprop + c.macs_weight_grad), path
        # weights frozen: only the input gradient is left (none for the first layer); c2 is strided
        assert frozen_all.get(path, 0) - forward[path] == 2 * c.macs_backprop, path
    assert by_name["c1"].macs_backprop == 0 and by_name["c2"].macs_backprop > 0


class SequenceNet(nn.Module):
    """Token ids (S,) -> an embedding of width 8 -> ``inner`` (attention called as self-attention)."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.embed = nn.Embedding(11, 8)
        self.inner = inner

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)
        if isinstance(self.inner, nn.MultiheadAttention):
            return self.inner(x, x, x)[0]
        return self.inner(x)


class Scaled(nn.Module):
    """A product with a part of a learned tensor (not computed value for value from the parameter), which
    is neither a number, a constant, a learned scale per channel nor a learned tensor of the values."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3)
        self.mask = nn.Parameter(torch.ones(5, 6, 6))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x) * self.mask[:4]


class Shuffle(nn.Module):
    """A channel shuffle over three axes of groups and a split row: a view of one sample with seven axes,
    which no spec layer has (ShuffleNet's, with four, and Swin's windows, with five, import)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, c, h, w = x.size()
        return x.view(n, 2, 2, 2, c // 8, h, 1, w).transpose(1, 3).reshape(n, c, h, w)


class Mean(nn.Module):
    """A convolution, then a mean over ``dim``."""

    def __init__(self, dim: Any, keepdim: bool = False) -> None:
        super().__init__()
        self.conv, self.dim, self.keepdim = nn.Conv2d(4, 6, 3), dim, keepdim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x).mean(self.dim, keepdim=self.keepdim)


@pytest.mark.parametrize(("dim", "keepdim", "kinds"), [
    ((2, 3), False, ["input", "conv2d", "pool", "flatten"]),
    ([-1, -2], True, ["input", "conv2d", "pool"]),
])
def test_a_mean_over_height_and_width_is_global_average_pooling(dim: Any, keepdim: bool, kinds: list[str]) -> None:
    net = dnnbench.from_torch(Mean(dim, keepdim), (4, 8, 8))
    assert [layer.kind for layer in net.layers] == kinds
    assert net.shapes[-1] == ((6, 1, 1) if keepdim else (6,))
    pool = net.layers[2]
    assert (pool.mode, pool.window) == ("avg", 6)


def test_ceil_mode_pooling_imports_with_its_shape() -> None:
    net = dnnbench.from_torch(nn.Sequential(nn.Conv2d(1, 2, 1), nn.MaxPool2d(2, ceil_mode=True)), (1, 5, 5))
    assert net.layers[-1].ceil_mode and net.shapes[-1] == (2, 3, 3)
    floor = dnnbench.from_torch(nn.Sequential(nn.Conv2d(1, 2, 1), nn.MaxPool2d(2)), (1, 5, 5))
    assert not floor.layers[-1].ceil_mode and floor.shapes[-1] == (2, 2, 2)


@pytest.mark.parametrize(
    ("module", "shape", "message"),
    [
        (nn.Sequential(nn.Conv2d(1, 4, 3), nn.Flatten(), nn.LSTM(4, 4)), (1, 3, 3), "2 (torch.nn.LSTM)"),
        (nn.Sequential(nn.Conv2d(1, 4, 3), nn.FractionalMaxPool2d(2, output_size=3, return_indices=True)), (1, 8, 8),
         "1 (torch.nn.FractionalMaxPool2d)"),
        (SequenceNet(nn.MultiheadAttention(8, 2)), (5,), "batch_first=False"),
        (SequenceNet(nn.MultiheadAttention(8, 2, batch_first=True, add_zero_attn=True)), (5,), "add_zero_attn=True"),
        (SequenceNet(nn.MultiheadAttention(8, 2, batch_first=True, add_bias_kv=True)), (5,), "add_bias_kv=True"),
        (Scaled(), (1, 8, 8), "mul"),
        (Mean(dim=(0, 1), keepdim=True), (4, 8, 8), "takes a mean over the batch axis; dnnbench reduces axes of one"),
        (Shuffle(), (16, 8, 8), "view (Tensor.view): views one sample with 7 axes"),
        (nn.Sequential(nn.Conv2d(1, 4, 3)), (2, 8, 8), "does not fit the module"),
    ],
)
def test_unsupported_layers_name_the_module(module: nn.Module, shape: tuple, message: str) -> None:
    with pytest.raises(SpecError, match=re.escape(message)) as info:
        dnnbench.from_torch(module, shape)
    assert "\n" not in str(info.value)


class DataDependent(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 1, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x) if x.sum() > 0 else x


class Inception(nn.Module):
    """Two branches of different widths joined by torch.cat, a depthwise dilated conv, a residual add."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.a = nn.Conv2d(8, 4, 1)
        self.b = nn.Conv2d(8, 4, 3, padding=2, dilation=2)
        self.depthwise = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.act = nn.SiLU()
        self.pool = nn.AdaptiveAvgPool2d(3)
        self.fc = nn.Linear(8 * 3 * 3, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.stem(x))
        y = torch.cat([self.a(x), self.b(x)], dim=1)
        y = self.act(self.depthwise(y) + x)
        return self.fc(torch.flatten(self.pool(y), 1))


def test_branches_import_as_a_graph_with_named_inputs() -> None:
    net = dnnbench.from_torch(Residual(), (4, 8, 8))
    assert [layer.kind for layer in net.layers] == ["input", "conv2d", "add"]
    assert net.layers[2].inputs == ("input", "conv")
    net = dnnbench.from_torch(Inception(), (3, 10, 10))
    by_name = dict(zip(net.layer_names, net.layers, strict=True))
    assert by_name["cat"].kind == "concat" and by_name["cat"].inputs == ("a", "b")
    assert by_name["b"].dilation == 2 and by_name["depthwise"].groups == 8
    add = next(layer for layer in net.layers if layer.kind == "add")
    assert add.inputs == ("depthwise", "stem") and add.activation == "silu"  # SiLU fused into the add
    assert by_name["pool"].kind == "adaptive_pool" and by_name["pool"].output_size == 3  # 10 -> 3: uneven
    # The spec saved and loaded is the same graph.
    assert Network.build(net.to_dict()) == net
    assert not net.is_chain


def test_untraceable_modules_are_clear_errors() -> None:
    with pytest.raises(SpecError, match="cannot be traced with torch.fx"):
        dnnbench.from_torch(DataDependent(), (1, 8, 8))
    with pytest.raises(SpecError, match="input_shape"):
        dnnbench.from_torch(LeNet5(), (1, 0, 32))
    with pytest.raises(SpecError, match="not a torch.nn.Module"):
        dnnbench.from_torch("lenet", (1, 32, 32))  # type: ignore[arg-type]


def test_vector_input_mlp() -> None:
    net = dnnbench.from_torch(nn.Sequential(nn.Linear(10, 7), nn.ReLU(), nn.Linear(7, 2)), (10,), name="mlp")
    assert [layer.kind for layer in net.layers] == ["input", "fc", "fc"]
    assert net.layer_counts[1].macs_forward == 70 and net.layer_counts[1].macs_backprop == 0


@pytest.mark.parametrize("bias", [True, False])
def test_a_layer_norm_without_a_shift_counts_its_scale_alone(bias: bool) -> None:
    class Tokens(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed, self.norm, self.head = nn.Embedding(100, 16), nn.LayerNorm(16, bias=bias), nn.Linear(16, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.head(self.norm(self.embed(x)))

    module = Tokens()
    net = dnnbench.from_torch(module, (8,))
    assert totals(net).weights == sum(p.numel() for p in module.parameters())
    norm = next(layer for layer in net.layers if layer.kind == "layer_norm")
    assert norm.bias is bias


class _HandEncoder(nn.Module):
    """The layers ``nn.TransformerEncoderLayer`` runs in training, written out by hand."""

    def __init__(self, width: int, heads: int, hidden: int, norm_first: bool, activation: nn.Module,
                 causal: bool, bias: bool) -> None:
        super().__init__()
        self.norm_first, self.causal = norm_first, causal
        self.attn = nn.MultiheadAttention(width, heads, batch_first=True, bias=bias)
        self.drop1, self.drop, self.drop2 = nn.Dropout(0.1), nn.Dropout(0.1), nn.Dropout(0.1)
        self.norm1, self.norm2 = nn.LayerNorm(width, bias=bias), nn.LayerNorm(width, bias=bias)
        self.ff = nn.Sequential(nn.Linear(width, hidden, bias=bias), activation, self.drop,
                                nn.Linear(hidden, width, bias=bias), self.drop2)

    def block(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop1(self.attn(x, x, x, need_weights=False, is_causal=self.causal,
                                    attn_mask=torch.ones((x.shape[1], x.shape[1])) if self.causal else None)[0])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.norm_first:
            x = x + self.block(self.norm1(x))
            return x + self.ff(self.norm2(x))
        x = self.norm1(x + self.block(x))
        return self.norm2(x + self.ff(x))


class _Tokens(nn.Module):
    def __init__(self, body: nn.Module, width: int, causal: bool = False) -> None:
        super().__init__()
        self.embed, self.body, self.head, self.causal = nn.Embedding(50, width), body, nn.Linear(width, 3), causal

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)
        if isinstance(self.body, nn.TransformerEncoder) and self.causal:
            x = self.body(x, mask=nn.Transformer.generate_square_subsequent_mask(ids.shape[1]), is_causal=True)
        elif isinstance(self.body, nn.TransformerEncoderLayer) and self.causal:
            x = self.body(x, src_mask=nn.Transformer.generate_square_subsequent_mask(ids.shape[1]), is_causal=True)
        else:
            x = self.body(x)
        return self.head(x[:, 0])


@pytest.mark.parametrize(("norm_first", "activation", "causal", "bias"), [
    (False, "relu", False, True), (True, "gelu", True, True), (False, nn.SiLU(), True, False),
    (True, F.gelu, False, False)])
@pytest.mark.parametrize("stack", [False, True])
def test_a_transformer_encoder_imports_as_its_layers(norm_first: bool, activation: Any, causal: bool, bias: bool,
                                                      stack: bool) -> None:
    """nn.TransformerEncoderLayer and nn.TransformerEncoder import as the layers they run in training: the
    spec equals that of the same block written out in nn.MultiheadAttention, nn.LayerNorm and nn.Linear,
    names aside, and holds every parameter of the module."""
    width, heads, hidden = 16, 4, 24
    layer = nn.TransformerEncoderLayer(width, heads, hidden, activation=activation, batch_first=True,
                                       norm_first=norm_first, bias=bias)
    body: nn.Module = (nn.TransformerEncoder(layer, 2, enable_nested_tensor=False) if stack else layer)
    module = _Tokens(body, width, causal)
    net = dnnbench.from_torch(module, (7,))
    function = {"relu": nn.ReLU(), "gelu": nn.GELU()}.get(activation, activation)
    if function is F.gelu:
        function = nn.GELU()
    hand = [_HandEncoder(width, heads, hidden, norm_first, function, causal, bias) for _ in range(2 if stack else 1)]
    by_hand = dnnbench.from_torch(_Tokens(nn.Sequential(*hand), width), (7,))
    assert structure(net) == structure(by_hand)
    assert totals(net).weights == sum(p.numel() for p in module.parameters())
    names = set(net.layer_names)
    prefix = "body.layers.0" if stack else "body"
    assert {f"{prefix}.self_attn", f"{prefix}.linear1", f"{prefix}.norm2"} <= names
    attention = next(lay for lay in net.layers if lay.kind == "attention")
    assert attention.causal is causal and attention.bias is bias


def test_a_pre_norm_encoder_keeps_its_final_norm_and_a_dropout_of_zero_is_nothing() -> None:
    layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True, norm_first=True)
    module = _Tokens(nn.TransformerEncoder(layer, 3, norm=nn.LayerNorm(16), enable_nested_tensor=False), 16)
    net = dnnbench.from_torch(module, (5,))
    kinds = [lay.kind for lay in net.layers]
    assert "dropout" not in kinds  # PyTorch returns the input of a dropout of p = 0 itself
    assert kinds.count("attention") == 3 and net.layer_names[-3] == "body.norm"
    assert totals(net).weights == sum(p.numel() for p in module.parameters())
    plain = dnnbench.from_torch(nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.0), nn.Linear(4, 2)), (4,))
    assert [lay.kind for lay in plain.layers] == ["input", "fc", "fc"]


@pytest.mark.parametrize(("body", "message"), [
    (nn.TransformerEncoderLayer(8, 2, 16), "batch_first=False"),
    (nn.TransformerEncoderLayer(8, 2, 16, batch_first=True, activation=nn.PReLU()), "activation PReLU"),
    (nn.TransformerEncoderLayer(8, 2, 16, batch_first=True, activation=lambda x: x * 2), "activation <lambda>"),
    (nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, batch_first=True), 1, norm=nn.RMSNorm(8),
                           enable_nested_tensor=False), "final norm"),
])
def test_encoders_dnnbench_does_not_model_are_one_line_errors(body: nn.Module, message: str) -> None:
    with pytest.raises(SpecError, match=re.escape(message)) as info:
        dnnbench.from_torch(_Tokens(body, 8), (6,))
    assert "\n" not in str(info.value) and "body (torch.nn.TransformerEncoder" in str(info.value)


class _LayerScale(nn.Module):
    """A learned factor of ``shape`` times the output of a conv (maps) or an embedding (a sequence)."""

    def __init__(self, shape: tuple[int, ...], tokens: bool = False) -> None:
        super().__init__()
        self.body = nn.Embedding(20, 6) if tokens else nn.Conv2d(2, 6, 3, padding=1)
        self.gamma = nn.Parameter(torch.ones(shape))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.gamma * self.body(x)


@pytest.mark.parametrize(("shape", "tokens", "axis"), [
    ((6, 1, 1), False, 0), ((1, 6, 1, 1), False, 0), ((6,), True, -1), ((1, 6), True, -1)])
def test_a_learned_factor_per_channel_is_a_scale_layer(shape: tuple[int, ...], tokens: bool, axis: int) -> None:
    module = _LayerScale(shape, tokens)
    net = dnnbench.from_torch(module, (5,) if tokens else (2, 7, 7))
    scale = net.layers[-1]
    assert scale.kind == "scale" and scale.axis == axis and scale.name == "gamma"
    c = net.layer_counts[-1]
    n = 5 * 6 if tokens else 6 * 7 * 7
    assert (c.weights, c.elem_ops_forward, c.elem_ops_backprop) == (6, n, 2 * n)
    assert totals(net).weights == sum(p.numel() for p in module.parameters())


def test_one_learned_number_is_a_shared_scale() -> None:
    module = _LayerScale((1,))
    net = dnnbench.from_torch(module, (2, 7, 7))
    assert net.layers[-1].kind == "scale" and net.layers[-1].shared and net.layer_counts[-1].weights == 1
    assert totals(net).weights == sum(p.numel() for p in module.parameters())


@pytest.mark.parametrize("shape", [(6, 7, 7), (6, 7, 1)])
def test_other_learned_products_are_a_product_with_the_learned_tensor(shape: tuple[int, ...]) -> None:
    module = _LayerScale(shape)
    net = dnnbench.from_torch(module, (2, 7, 7))
    assert [layer.kind for layer in net.layers[-4:]] in (["zeros", "position_embedding", "reshape", "mul"],
                                                         ["conv2d", "zeros", "position_embedding", "mul"])
    assert totals(net).weights == sum(p.numel() for p in module.parameters())
    assert net.shapes[-1] == (6, 7, 7)


class _ChannelsLast(nn.Module):
    """ConvNeXt's block in miniature: a layer norm over the channels of permuted maps (F.layer_norm with
    the caller's parameters, as torchvision's LayerNorm2d) and Linear layers on channels-last maps."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1, groups=1)
        self.weight, self.bias = nn.Parameter(torch.ones(8)), nn.Parameter(torch.zeros(8))
        self.up, self.down = nn.Linear(8, 32), nn.Linear(32, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x).permute(0, 2, 3, 1)
        y = F.layer_norm(y, (8,), self.weight, self.bias, 1e-6)
        y = self.down(F.gelu(self.up(y)))
        return y.permute(0, 3, 1, 2)


def test_linear_layers_on_channels_last_maps_are_fc_layers_on_their_positions() -> None:
    module = _ChannelsLast()
    net = dnnbench.from_torch(module, (3, 5, 6))
    assert [lay.kind for lay in net.layers] == ["input", "conv2d", "permute", "layer_norm", "reshape", "fc",
                                                "reshape", "activation", "reshape", "fc", "reshape", "permute"]
    by_name = dict(zip(net.layer_names, net.layer_counts, strict=True))
    assert by_name["up"].input_shape == (30, 8) and by_name["up"].macs_forward == 30 * 8 * 32
    assert net.shapes[-1] == (8, 5, 6)
    assert totals(net).weights == sum(p.numel() for p in module.parameters())
    with FlopCounterMode(display=False) as counter:
        module(torch.zeros(1, 3, 5, 6))
    assert counter.get_total_flops() == 2 * totals(net).macs_forward


class _ScaledTokens(nn.Module):
    """Token embeddings times sqrt(D), as "Attention Is All You Need" scales them, and halved again."""

    def __init__(self) -> None:
        super().__init__()
        self.embed, self.head = nn.Embedding(100, 16), nn.Linear(16, 4)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids) * math.sqrt(16)
        return self.head(torch.div(2.0 * x, 4))


def test_a_constant_factor_is_a_scale_that_learns_nothing() -> None:
    net = dnnbench.from_torch(_ScaledTokens(), (8,))
    scales = [lay for lay in net.layers if lay.kind == "scale"]
    assert len(scales) == 3 and not any(lay.learned for lay in scales)
    for lay, c in zip(net.layers, net.layer_counts, strict=True):
        if lay.kind == "scale":
            assert (c.weights, c.elem_ops_forward, c.elem_ops_backprop) == (0, 8 * 16, 8 * 16)
    assert totals(net).weights == 100 * 16 + 16 * 4 + 4


class _Divided(nn.Module):
    def __init__(self, by_buffer: bool = False, buffer_over: bool = False) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 2, 3)
        self.register_buffer("scale", torch.full((2, 6, 6), 3.0))
        self.by_buffer, self.buffer_over = by_buffer, buffer_over

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        if self.buffer_over:
            return self.scale / y
        return y / self.scale if self.by_buffer else 2 / y


def test_a_number_divided_by_a_tensor_is_its_reciprocal_times_the_number() -> None:
    """PyTorch computes ``2 / y`` as ``y.reciprocal() * 2``: two kernels, two layers."""
    net = dnnbench.from_torch(_Divided(), (1, 8, 8))
    assert [(lay.kind, getattr(lay, "activation", None)) for lay in net.layers[1:]] == [("conv2d", "reciprocal"),
                                                                                        ("scale", None)]


def test_a_tensor_divided_by_a_constant_tensor_is_a_constant_factor() -> None:
    net = dnnbench.from_torch(_Divided(by_buffer=True), (1, 8, 8))
    assert [(lay.kind, getattr(lay, "learned", None)) for lay in net.layers[2:]] == [("scale", False)]


def test_a_constant_tensor_divided_by_a_tensor_is_a_one_line_error() -> None:
    with pytest.raises(SpecError, match="divides by a tensor that is no layer output") as info:
        dnnbench.from_torch(_Divided(buffer_over=True), (1, 8, 8))
    assert "\n" not in str(info.value)


def test_hand_written_attention_imports_and_counts_as_flop_counter() -> None:
    """nanoGPT's form: a projection split into queries, keys and values (slices), viewed as heads,
    F.scaled_dot_product_attention (sdpa), merged and projected. Forward and backward FLOPs equal
    FlopCounterMode's for the whole network; the weights equal the module's parameters."""
    from transformer_nets import HandAttentionGPT

    module = HandAttentionGPT(layers=2)
    net = dnnbench.from_torch(module, (32,))
    kinds = [lay.kind for lay in net.layers]
    assert kinds.count("slice") == 6 and kinds.count("sdpa") == 2
    assert all(lay.causal for lay in net.layers if lay.kind == "sdpa")
    t = totals(net)
    assert t.weights == sum(p.numel() for p in module.parameters())
    x = torch.zeros((1, 32), dtype=torch.int64)
    forward, backward = step_flops(lambda: module(x))
    assert forward == 2 * t.macs_forward
    assert backward == 2 * (t.macs_backprop + t.macs_weight_grad)


class _Pieces(nn.Module):
    def __init__(self, how: str) -> None:
        super().__init__()
        self.conv, self.how = nn.Conv2d(2, 6, 3, padding=1), how

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        if self.how == "chunk":
            a, b = y.chunk(2, dim=1)
        elif self.how == "split":
            a, b = torch.split(y, [2, 4], dim=1)
            b = b.narrow(1, 1, 2)
        else:
            return y.split(1, dim=0)[0]
        return a + b


@pytest.mark.parametrize("how", ["chunk", "split"])
def test_pieces_of_a_tensor_are_slices(how: str) -> None:
    net = dnnbench.from_torch(_Pieces(how), (2, 5, 5))
    slices = [lay for lay in net.layers if lay.kind == "slice"]
    assert len(slices) == (2 if how == "chunk" else 3) and all(lay.axis == 0 for lay in slices)
    assert net.shapes[-1] == ((3, 5, 5) if how == "chunk" else (2, 5, 5))


def test_splitting_the_batch_is_a_one_line_error() -> None:
    with pytest.raises(SpecError, match="splits the batch axis") as info:
        dnnbench.from_torch(_Pieces("batch"), (2, 5, 5))
    assert "\n" not in str(info.value)
