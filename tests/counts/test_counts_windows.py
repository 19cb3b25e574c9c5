"""Windowed attention and the views it needs, imported and counted against PyTorch's FlopCounterMode.

torchvision's Swin (V1 and V2) and MaxViT fold a map's windows into the batch axis, view one sample with
five axes, roll maps, take every second position (patch merging), add relative-position biases and
write attention as einsum. Imported with ``dnnbench.from_torch`` they must have the module's parameters
as weights and, run forward and backward with batch 1 on the meta device under FlopCounterMode,
2 x dnnbench's MACs as FLOPs. Swin-V2's continuous position bias is an MLP over a constant table: computed
from parameters alone, once per step whatever the batch, it is no layer, and its FLOPs (counted here apart)
are the only difference. Hand-written modules check what the torchvision ones do not: positive axes on
folded values, a split of them, YOLO's space-to-depth, einsum orders, and the errors.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from importers.import_helpers import dense_weight_grad
from importers.import_helpers import step_flops as _flops
from torch import nn
from torchvision_models import models

import dnnbench
from dnnbench.counts import totals
from dnnbench.errors import SpecError
from dnnbench.measure import torchnet


def _position_mlps(module: nn.Module) -> tuple[int, int]:
    """(forward, backward) FLOPs of Swin-V2's continuous position-bias MLPs, every block's once."""
    blocks = [m for m in module.modules() if hasattr(m, "cpb_mlp")]
    return _flops(lambda: sum(m.get_relative_position_bias().sum() for m in blocks)) if blocks else (0, 0)


@pytest.mark.parametrize("name", ["swin_t", "swin_v2_t", "maxvit_t"])
def test_torchvision_window_attention_counts_equal_flop_counter(name: str) -> None:
    with torch.device("meta"):
        module = getattr(models(), name)(weights=None)
    net = dnnbench.from_torch(module, (3, 224, 224))
    t = totals(net)
    assert t.weights == sum(p.numel() for p in module.parameters())
    x = torch.zeros((1, 3, 224, 224), device="meta")
    forward, backward = _flops(lambda: module(x))
    mlp_forward, mlp_backward = _position_mlps(module)
    assert (mlp_forward > 0) == (name == "swin_v2_t")
    assert forward - mlp_forward == 2 * t.macs_forward
    assert backward - mlp_backward == 2 * (t.macs_backprop + dense_weight_grad(net))
    kinds = {layer.kind for layer in net.layers}
    assert {"bias", "matmul", "softmax", "reshape", "permute"} <= kinds
    assert max(len(shape) for shape in net.shapes) == 5  # a sample's windows, viewed with five axes
    if name.startswith("swin"):
        assert "concat" in kinds and "slice" in kinds  # the shifted blocks' rolls; patch merging


def test_swin_imports_its_windows_rolls_and_biases_as_layers() -> None:
    with torch.device("meta"):
        module = models().swin_t(weights=None)
    net = dnnbench.from_torch(module, (3, 224, 224))
    layers = dict(zip(net.layer_names, zip(net.layers, net.shapes, strict=True), strict=True))
    # The first block's attention: 64 windows of 7 x 7 tokens, 3 heads of 32.
    qkv, qkv_shape = layers["features.1.0.attn.qkv"]
    assert qkv.kind == "fc" and qkv.out_features == 288 and qkv_shape == (3136, 288)
    table = module.features[1][0].attn.relative_position_bias_table
    bias, bias_shape = layers["features.1.0.attn.relative_position_bias_table"]
    assert bias.kind == "bias" and bias.weights == table.numel() == 13 * 13 * 3 and bias_shape == (64, 3, 49, 49)
    # The second block is shifted by 3: each roll is two slices joined, and its mask a constant bias.
    rolls = [name for name in net.layer_names if name.startswith("roll") and layers[name][0].kind == "concat"]
    assert len(rolls) == 2 * 2 * (1 + 1 + 3)  # two axes, there and back, in the shifted blocks of 56, 28 and 14
    masks = [layer for layer, _ in layers.values() if layer.kind == "bias" and layer.weights == 0]
    assert len(masks) == 1 + 1 + 3  # one per shifted block (at 7 x 7 a window covers the map: no shift)


class Windows(nn.Module):
    """Window attention written by hand: channels-last maps cut into windows folded into the batch, the
    projection split by ``chunk`` along a positive axis, heads moved by positive axes, a softmax along
    axis 3, a learned bias per head and position pair broadcast over the windows."""

    def __init__(self, dim: int = 16, window: int = 4, heads: int = 2) -> None:
        super().__init__()
        self.window, self.heads = window, heads
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.bias = nn.Parameter(torch.zeros(heads, window * window, window * window))
        self.head = nn.Linear(dim, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c, h, w = x.shape
        s = self.window
        x = x.permute(0, 2, 3, 1).reshape(b, h // s, s, w // s, s, c).transpose(2, 3).reshape(-1, s * s, c)
        q, k, v = self.qkv(x).chunk(3, dim=2)
        q, k, v = (t.reshape(t.shape[0], s * s, self.heads, c // self.heads).transpose(1, 2) for t in (q, k, v))
        scores = torch.matmul(q, k.transpose(2, 3)) + self.bias
        out = torch.matmul(F.softmax(scores, dim=3), v).transpose(1, 2).reshape(-1, s * s, c)
        out = self.proj(out).reshape(b, h // s, w // s, s, s, c).transpose(2, 3).reshape(b, h, w, c)
        return self.head(out.reshape(b, h * w, c)[:, 0])


def test_hand_written_window_attention_folds_windows_into_the_batch() -> None:
    module = Windows()
    net = dnnbench.from_torch(module, (16, 8, 8))
    t = totals(net)
    assert t.weights == sum(p.numel() for p in module.parameters())
    forward, backward = _flops(lambda: module(torch.zeros(1, 16, 8, 8)))
    assert forward == 2 * t.macs_forward and backward == 2 * (t.macs_backprop + t.macs_weight_grad)
    scores = next(s for layer, s in zip(net.layers, net.shapes, strict=True) if layer.kind == "bias")
    assert scores == (4, 2, 16, 16)  # four windows per sample, two heads, 16 x 16 position pairs
    model = torchnet.build_model(net)  # the spec trains as a network of its own
    x, y = torchnet.batch(net, 2)
    torchnet.loss_fn(net)(model(x), y).backward()
    assert totals(dnnbench.from_torch(model, net.input_shape)) == t


class Focus(nn.Module):
    """YOLOv5's space-to-depth: every second row and column from four offsets, joined, then a conv."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(12, 8, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        parts = [x[..., ::2, ::2], x[..., 1::2, ::2], x[..., ::2, 1::2], x[..., 1::2, 1::2]]
        return self.conv(torch.cat(parts, 1))


def test_every_second_position_is_a_view_and_a_slice() -> None:
    net = dnnbench.from_torch(Focus(), (3, 16, 16))
    assert net.shapes[-1] == (8, 8, 8)
    split = [s for layer, s in zip(net.layers, net.shapes, strict=True) if layer.kind == "reshape"]
    assert (3, 8, 2, 8, 2) in split
    slices = [(layer.axis, layer.start) for layer in net.layers if layer.kind == "slice"]
    assert sorted(slices) == sorted([(2, 0), (4, 0), (2, 1), (4, 0), (2, 0), (4, 1), (2, 1), (4, 1)])
    assert totals(net).macs_forward == 8 * 8 * 8 * 12 * 9


class Einsums(nn.Module):
    """Attention scores and the weighted sum as einsum, the second in another output order."""

    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(8, 24)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n = x.shape[0], 6
        q, k, v = self.qkv(x.view(b, n, 8)).reshape(b, n, 3, 2, 4).unbind(2)  # (b, n, heads, d) each
        scores = torch.einsum("bihd,bjhd->bhij", q, k).softmax(-1)
        return torch.einsum("bhij,bjhd->bihd", scores, v).reshape(b, n, 8)


def test_einsum_that_is_a_batched_product_is_a_matmul() -> None:
    module = Einsums()
    x = torch.zeros(1, 48)
    net = dnnbench.from_torch(module, (48,))
    forward, backward = _flops(lambda: module(x))
    t = totals(net)
    assert forward == 2 * t.macs_forward and backward == 2 * (t.macs_backprop + t.macs_weight_grad)
    assert [layer.kind for layer in net.layers].count("matmul") == 2


class MovesWindows(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c, h, w = x.shape
        windows = x.reshape(b * 2, c // 2, h, w)
        return windows.transpose(0, 1).reshape(b, c, h, w)


class BadEinsum(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.einsum("bcij,bcjk,bckl->bcil", x, x, x)


@pytest.mark.parametrize(("module", "shape", "message"), [
    (MovesWindows(), (2, 8, 4), r"transpose \(Tensor.transpose\): works along the batch axis, which holds positions "
                             r"of one sample here"),
    (BadEinsum(), (1, 4, 4), r"einsum \(torch.functional.einsum\): is einsum 'bcij,bcjk,bckl->bcil' of 3 layer "
                             r"outputs"),
])
def test_what_windows_cannot_import_is_one_line(module: nn.Module, shape: tuple[int, ...], message: str) -> None:
    with pytest.raises(SpecError, match=message) as info:
        dnnbench.from_torch(module, shape)
    assert "\n" not in str(info.value)


class TimmHabits(nn.Module):
    """What timm's Swin does besides windows: a residual branch dropped per sample by a random mask made
    from the input's dtype and device (``drop_path``), a bias computed from one parameter along two paths,
    and a mean over channels-last maps' height and width."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.table = nn.Parameter(torch.zeros(8, 1, 1))
        self.head = nn.Linear(8, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        mask = y.new_empty((y.shape[0], 1, 1, 1)).bernoulli_(0.75)
        mask.div_(0.75)
        shift = self.table.exp()
        y = y + (y * mask) + (shift + shift.tanh())
        return self.head(y.permute(0, 2, 3, 1).mean((1, 2)))


def test_drop_path_shared_parameters_and_channels_last_means() -> None:
    module = TimmHabits()
    net = dnnbench.from_torch(module, (3, 6, 6))
    kinds = [layer.kind for layer in net.layers]
    drop = next(layer for layer in net.layers if layer.kind == "dropout")
    assert drop.p == pytest.approx(0.25) and drop.per_sample
    bias = next(layer for layer in net.layers if layer.kind == "bias")
    assert bias.weights == 8  # the table once, though two paths lead from it
    assert totals(net).weights == sum(p.numel() for p in module.parameters())
    assert "pool" in kinds and net.shapes[-1] == (10,)


class BiasedAttention(nn.Module):
    """BEiT's and TinyViT's habits: a relative-position bias gathered from a learned table and passed to
    ``scaled_dot_product_attention`` as its mask; rotary-style products with tables of constants; a
    number added; ``reshape_as``; and a value computed and never used."""

    def __init__(self, tokens: int = 6, dim: int = 8, heads: int = 2) -> None:
        super().__init__()
        self.tokens, self.heads = tokens, heads
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.table = nn.Parameter(torch.zeros(2 * tokens - 1, heads))
        index = torch.arange(tokens)[:, None] - torch.arange(tokens)[None, :] + tokens - 1
        self.register_buffer("index", index, persistent=False)
        self.register_buffer("cos", torch.ones(tokens, dim // heads), persistent=False)
        self.unused = nn.Linear(dim, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b = x.shape[0]
        x = x.view(b, self.tokens, -1)
        q, k, v = self.qkv(x).reshape(b, self.tokens, 3, self.heads, -1).permute(2, 0, 3, 1, 4).unbind(0)
        q, k = q * self.cos, k * self.cos  # (heads, S, d) times an (S, d) table of constants
        bias = self.table[self.index].permute(2, 0, 1).unsqueeze(0)  # (1, heads, S, S)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
        out = out.transpose(1, 2).reshape_as(x) + 1.0
        self.unused(out)  # computed, never used
        return self.proj(out)


def test_a_learned_mask_a_constant_table_a_number_and_an_unused_value() -> None:
    module = BiasedAttention()
    net = dnnbench.from_torch(module, (48,))
    sdpa = next(layer for layer in net.layers if layer.kind == "sdpa")
    assert sdpa.bias_weights == module.table.numel() == 22 and not sdpa.causal
    assert [layer.kind for layer in net.layers].count("scale") == 2  # the products with the cos table
    number = next(layer for layer in net.layers if layer.kind == "bias")
    assert number.weights == 0
    assert "unused" not in net.layer_names and net.layer_names[-1] == "proj"
    t = totals(net)
    assert t.weights == sum(p.numel() for p in module.parameters()) - module.unused.weight.numel() - 5
    forward, backward = _flops(lambda: module(torch.zeros(1, 48)))
    unused = 2 * 6 * 8 * 5  # the unused Linear's forward, which PyTorch runs and the spec leaves out
    assert forward - unused == 2 * t.macs_forward and backward == 2 * (t.macs_backprop + t.macs_weight_grad)
    model = torchnet.build_model(net)  # the learned mask trains in the runner's module too
    x, y = torchnet.batch(net, 2)
    torchnet.loss_fn(net)(model(x), y).backward()
    assert totals(dnnbench.from_torch(model, net.input_shape)) == t


class Rotary(nn.Module):
    """EVA's rotary embedding: ``rotate_half`` by a negation and ``torch.stack``, products with constant
    cos and sin tables, a cast by ``.to``."""

    def __init__(self, tokens: int = 4, dim: int = 8) -> None:
        super().__init__()
        self.register_buffer("cos", torch.ones(tokens, dim), persistent=False)
        self.register_buffer("sin", torch.zeros(tokens, dim), persistent=False)
        self.fc = nn.Linear(dim, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.fc.weight.new_zeros(()) + x.view(x.shape[0], 4, 8)  # a constant made from a parameter
        half = torch.stack((-x[..., 1::2], x[..., ::2]), -1).reshape(x.shape)
        return self.fc((x * self.cos + half * self.sin).to(torch.float32))


def test_rotary_embeddings_negation_stack_and_casts() -> None:
    module = Rotary()
    net = dnnbench.from_torch(module, (32,))
    kinds = [layer.kind for layer in net.layers]
    assert kinds.count("concat") == 1 and kinds.count("scale") == 3 and "bias" in kinds
    assert net.shapes[-1] == (4, 3) and totals(net).weights == 8 * 3 + 3
    model = torchnet.build_model(net)
    x, y = torchnet.batch(net, 2)
    torchnet.loss_fn(net)(model(x), y).backward()


class TokensNormed(nn.Module):
    """LeViT's linear-norm: a Linear on tokens, then BatchNorm1d over the tokens folded into the batch."""

    def __init__(self) -> None:
        super().__init__()
        self.fc, self.bn = nn.Linear(6, 10), nn.BatchNorm1d(10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.fc(x.view(x.shape[0], 4, 6))
        return self.bn(x.flatten(0, 1)).reshape_as(x)[:, ::3]  # every third token of 4: 0 and 3


def test_batch_norm_over_tokens_folded_into_the_batch_normalises_the_channels() -> None:
    module = TokensNormed()
    net = dnnbench.from_torch(module, (24,))
    bn = next(c for layer, c in zip(net.layers, net.layer_counts, strict=True) if layer.kind == "batchnorm")
    assert bn.input_shape == (10, 4) and bn.weights == 20
    assert totals(net).weights == sum(p.numel() for p in module.parameters()) and net.shapes[-1] == (2, 10)


class ReZero(nn.Module):
    """ReZero's residual, x + α·f(x) with one learned number α, and a learned temperature on logits."""

    def __init__(self) -> None:
        super().__init__()
        self.fc, self.head = nn.Linear(8, 8), nn.Linear(8, 4)
        self.alpha, self.temperature = nn.Parameter(torch.zeros(())), nn.Parameter(torch.ones(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.alpha * self.fc(x)
        return self.temperature.exp() * self.head(x)


def test_one_learned_number_times_a_tensor_is_a_shared_scale() -> None:
    module = ReZero()
    net = dnnbench.from_torch(module, (8,))
    scales = [(layer.shared, c.weights) for layer, c in zip(net.layers, net.layer_counts, strict=True)
              if layer.kind == "scale"]
    assert scales == [(True, 1), (True, 1)]
    assert totals(net).weights == sum(p.numel() for p in module.parameters())
    model = torchnet.build_model(net)
    assert sum(p.numel() for p in model.parameters()) == totals(net).weights
    assert totals(dnnbench.from_torch(model, net.input_shape)) == totals(net)
