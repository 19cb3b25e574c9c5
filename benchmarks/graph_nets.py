"""Small networks written as plain PyTorch modules (residual, inception, inverted residual, ConvNeXt, ShuffleNet, a GPT,
nanoGPT's attention written by hand, a ViT, an LSTM classifier, a GRU tagger, a multi-task network, DLRM, a
sequence-first text classifier with a padding mask), in no
preset, for `dnnbench validate`'s model-parallel runs of graphs
(docs/validation.md §"Graphs: residual, branching and gated networks"). Import one and validate it:

    PYTHONPATH=benchmarks dnnbench import graph_nets:resnet_mini --input-shape 3 32 32 -o resnet-mini.dnn.json
    dnnbench validate --network resnet-mini.dnn.json --link 1g --launches 3

(from the repository's root).
"""

from __future__ import annotations

import torch
from torch import nn


class _Basic(nn.Module):
    """ResNet's basic block: two 3x3 convolutions with batch norms, the input added back."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.c1, self.n1 = nn.Conv2d(width, width, 3, padding=1, bias=False), nn.BatchNorm2d(width)
        self.c2, self.n2 = nn.Conv2d(width, width, 3, padding=1, bias=False), nn.BatchNorm2d(width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.n1(self.c1(x)))
        return torch.relu(x + self.n2(self.c2(y)))


def resnet_mini() -> nn.Module:
    """A ResNet of two stages of basic blocks on 3x32x32 images, ending in a plain FC layer."""
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
        _Basic(16), _Basic(16), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), _Basic(32), nn.MaxPool2d(2),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))


class _Inception(nn.Module):
    """GoogLeNet's inception module: 1x1, 3x3 and 5x5 branches and a pooled projection, joined."""

    def __init__(self, c: int, a: int, b: int, d: int, e: int) -> None:
        super().__init__()
        self.one = nn.Conv2d(c, a, 1)
        self.three = nn.Sequential(nn.Conv2d(c, b // 2, 1), nn.ReLU(), nn.Conv2d(b // 2, b, 3, padding=1))
        self.five = nn.Sequential(nn.Conv2d(c, d // 2, 1), nn.ReLU(), nn.Conv2d(d // 2, d, 5, padding=2))
        self.pool = nn.Sequential(nn.MaxPool2d(3, 1, 1), nn.Conv2d(c, e, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(torch.cat([self.one(x), self.three(x), self.five(x), self.pool(x)], 1))


def inception_mini() -> nn.Module:
    """Two inception modules on 1x28x28 digits, then two FC layers."""
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        _Inception(16, 8, 16, 8, 8), nn.MaxPool2d(2), _Inception(40, 16, 24, 8, 8), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(56 * 3 * 3, 128), nn.ReLU(), nn.Linear(128, 10))


class _MobileBlock(nn.Module):
    """MobileNet-V2's inverted residual: a 1x1 expansion, a 3x3 depthwise convolution, a 1x1 projection,
    a squeeze-and-excitation gate on the expanded maps, the input added back."""

    def __init__(self, width: int, expand: int) -> None:
        super().__init__()
        wide = width * expand
        self.expand = nn.Sequential(nn.Conv2d(width, wide, 1), nn.BatchNorm2d(wide), nn.ReLU6())
        self.depthwise = nn.Sequential(nn.Conv2d(wide, wide, 3, padding=1, groups=wide), nn.BatchNorm2d(wide),
                                       nn.ReLU6())
        self.gate = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(wide, wide // 4, 1), nn.ReLU(),
                                  nn.Conv2d(wide // 4, wide, 1), nn.Sigmoid())
        self.project = nn.Sequential(nn.Conv2d(wide, width, 1), nn.BatchNorm2d(width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.depthwise(self.expand(x))
        return x + self.project(h * self.gate(h))


def mobile_mini() -> nn.Module:
    """Inverted residual blocks with depthwise convolutions and gates on 3x32x32 images."""
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.BatchNorm2d(16), nn.ReLU6(),
        _MobileBlock(16, 4), _MobileBlock(16, 4), nn.Conv2d(16, 32, 1), nn.ReLU6(),
        _MobileBlock(32, 2), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))


class _TinyGPT(nn.Module):
    """A decoder-only language model: token and position embeddings, pre-norm transformer blocks with
    causal self-attention, a final layer norm and a per-token head."""

    def __init__(self, vocabulary: int = 512, width: int = 64, heads: int = 4, blocks: int = 2,
                 tokens: int = 32) -> None:
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocabulary, width), nn.Embedding(tokens, width)
        layer = nn.TransformerEncoderLayer(width, heads, 4 * width, dropout=0.0, activation="gelu",
                                           batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, blocks, enable_nested_tensor=False)
        self.norm, self.head = nn.LayerNorm(width), nn.Linear(width, vocabulary)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(tokens), persistent=False)
        self.tokens = tokens

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.tok(ids) + self.pos(torch.arange(self.tokens, device=ids.device))
        return self.head(self.norm(self.blocks(x, mask=self.mask, is_causal=True)))


def tiny_gpt() -> nn.Module:
    """A two-block GPT of width 64 on 32 tokens of a 512-token vocabulary (import with --input-shape 32)."""
    return _TinyGPT()


class _TinyViT(nn.Module):
    """A vision transformer: patches by a convolution of stride = kernel, viewed as a sequence (as
    torchvision's ``VisionTransformer`` does), a class token, a learned position table, pre-norm
    transformer blocks, a final layer norm and a head on the class token."""

    def __init__(self, image: int = 32, patch: int = 4, width: int = 64, heads: int = 4, blocks: int = 2,
                 classes: int = 10) -> None:
        super().__init__()
        tokens = (image // patch) ** 2
        self.patches = nn.Conv2d(3, width, patch, stride=patch)
        self.cls = nn.Parameter(torch.zeros(1, 1, width))
        self.pos = nn.Parameter(torch.randn(1, tokens + 1, width) * 0.02)
        layer = nn.TransformerEncoderLayer(width, heads, 2 * width, dropout=0.0, activation="gelu",
                                           batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, blocks, enable_nested_tensor=False)
        self.norm, self.head = nn.LayerNorm(width), nn.Linear(width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patches(x)
        x = x.reshape(x.shape[0], x.shape[1], -1).permute(0, 2, 1)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        return self.head(self.norm(self.blocks(x))[:, 0])


def tiny_vit() -> nn.Module:
    """A two-block ViT of width 64 on 32×32 images in 4×4 patches (import with --input-shape 3 32 32)."""
    return _TinyViT()


class _ConvNeXtBlock(nn.Module):
    """ConvNeXt's block: a depthwise 7×7 convolution, channels last for a layer norm and an MLP on every
    position, a layer scale, channels first again, a residual add."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.dw = nn.Conv2d(width, width, 7, padding=3, groups=width)
        self.norm = nn.LayerNorm(width)
        self.up, self.down = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)
        self.gamma = nn.Parameter(torch.full((width,), 1e-6))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.dw(x).permute(0, 2, 3, 1)
        y = self.gamma * self.down(nn.functional.gelu(self.up(self.norm(y))))
        return x + y.permute(0, 3, 1, 2)


class _ConvNeXtMini(nn.Module):
    def __init__(self, width: int = 32, blocks: int = 2, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, width, 4, stride=4)
        self.blocks = nn.Sequential(*(_ConvNeXtBlock(width) for _ in range(blocks)))
        self.norm, self.head = nn.LayerNorm(width), nn.Linear(width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(self.blocks(self.stem(x)).mean((2, 3))))


def convnext_mini() -> nn.Module:
    """Two ConvNeXt blocks of width 32 on 32×32 images (import with --input-shape 3 32 32)."""
    return _ConvNeXtMini()


def _shuffle(x: torch.Tensor, groups: int = 2) -> torch.Tensor:
    """ShuffleNet's channel shuffle: (C, H, W) viewed as (g, C/g, H, W), the two swapped, viewed back."""
    b, c, h, w = x.shape
    return x.view(b, groups, c // groups, h, w).transpose(1, 2).reshape(b, c, h, w)


class _ShuffleUnit(nn.Module):
    """ShuffleNet V2's unit of stride 1: the maps chunked in two by channels, the second half through a
    1x1, depthwise 3x3, 1x1 branch, the halves joined and their channels shuffled."""

    def __init__(self, width: int) -> None:
        super().__init__()
        half = width // 2
        self.branch = nn.Sequential(
            nn.Conv2d(half, half, 1, bias=False), nn.BatchNorm2d(half), nn.ReLU(),
            nn.Conv2d(half, half, 3, padding=1, groups=half, bias=False), nn.BatchNorm2d(half),
            nn.Conv2d(half, half, 1, bias=False), nn.BatchNorm2d(half), nn.ReLU())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b = x.chunk(2, dim=1)
        return _shuffle(torch.cat([a, self.branch(b)], 1))


class _ShuffleMini(nn.Module):
    def __init__(self, width: int = 48, units: int = 3, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(width),
                                  nn.ReLU())
        self.units = nn.Sequential(*(_ShuffleUnit(width) for _ in range(units)))
        self.head = nn.Linear(width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.units(self.stem(x)).mean((2, 3)))


def shuffle_mini() -> nn.Module:
    """Three ShuffleNet V2 units of width 48 on 32×32 images (import with --input-shape 3 32 32)."""
    return _ShuffleMini()


class _NanoBlock(nn.Module):
    """nanoGPT's block, attention written by hand: one linear layer of queries, keys and values, split,
    viewed as heads and transposed, ``F.scaled_dot_product_attention`` (causal), transposed back and
    projected; then a GELU MLP; pre-norm, residual adds."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.c_attn, self.c_proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.up, self.down = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.c_attn(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.c_proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.down(nn.functional.gelu(self.up(self.ln2(x))))


class _NanoGPT(nn.Module):
    def __init__(self, vocabulary: int = 512, tokens: int = 32, width: int = 64, heads: int = 2,
                 blocks: int = 2) -> None:
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocabulary, width), nn.Embedding(tokens, width)
        self.blocks = nn.Sequential(*(_NanoBlock(width, heads) for _ in range(blocks)))
        self.norm, self.head = nn.LayerNorm(width), nn.Linear(width, vocabulary)
        self.tokens = tokens

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.tok(ids) + self.pos(torch.arange(self.tokens, device=ids.device))
        return self.head(self.norm(self.blocks(x)))


def nano_gpt() -> nn.Module:
    """A two-block GPT of width 64 (2 heads of 32) on 32 tokens of a 512-token vocabulary, its attention
    written by hand as nanoGPT's (import with --input-shape 32). Split over machines, its queries, keys
    and values regather by their 32 columns per head, so each machine computes its rows of attention."""
    return _NanoGPT()


class _LSTMClassifier(nn.Module):
    """Token ids embedded, an LSTM over them, a head on its last step's state."""

    def __init__(self, vocabulary: int = 1000, width: int = 64, hidden: int = 128, classes: int = 10) -> None:
        super().__init__()
        self.emb, self.lstm = nn.Embedding(vocabulary, width), nn.LSTM(width, hidden, batch_first=True)
        self.head = nn.Linear(hidden, classes)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(self.emb(idx))
        return self.head(out[:, -1])


def lstm_classifier() -> nn.Module:
    """A sequence classifier: an embedding of 1000 tokens, an LSTM of 128 units, a 10-way head (32 tokens)."""
    return _LSTMClassifier()


class _GRUTagger(nn.Module):
    """Token ids embedded, two stacked bidirectional GRUs, a tag per token."""

    def __init__(self, vocabulary: int = 500, width: int = 32, hidden: int = 48, tags: int = 12) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocabulary, width)
        self.gru = nn.GRU(width, hidden, num_layers=2, bidirectional=True, batch_first=True)
        self.head = nn.Linear(2 * hidden, tags)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.head(self.gru(self.emb(idx))[0])


def gru_tagger() -> nn.Module:
    """A sequence tagger: an embedding of 500 tokens, two stacked bidirectional GRUs of 48 units, 12 tags per token
    (16 tokens)."""
    return _GRUTagger()


class _MultiTask(nn.Module):
    """A shared convolutional trunk and three heads of different shapes, returned as a dict."""

    def __init__(self) -> None:
        super().__init__()
        self.trunk = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
                                   nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU())
        self.classes, self.box = nn.Linear(32, 10), nn.Linear(32, 4)
        self.seg = nn.Sequential(nn.Conv2d(32, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 2, 1))

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        maps = self.trunk(x)
        pooled = maps.mean((2, 3))
        return {"classes": self.classes(pooled), "box": self.box(pooled), "segments": self.seg(maps)}


def multitask_mini() -> nn.Module:
    """A multi-task network on 3x32x32 images: 10 class logits, a box and a 2x16x16 segment map from one trunk."""
    return _MultiTask()


class _Dlrm(nn.Module):
    """DLRM as its reference code writes it: a bottom MLP of the dense features, one table per categorical
    feature (one id each), the pairwise dot products of all the vectors, their lower triangle, a top MLP to
    one click logit."""

    def __init__(self, dense: int = 13, features: int = 8, rows: int = 1000, dim: int = 16) -> None:
        super().__init__()
        self.bottom = nn.Sequential(nn.Linear(dense, 64), nn.ReLU(), nn.Linear(64, dim), nn.ReLU())
        self.tables = nn.ModuleList([nn.Embedding(rows, dim) for _ in range(features)])
        pairs = (features + 1) * features // 2
        self.top = nn.Sequential(nn.Linear(dim + pairs, 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, dense: torch.Tensor, sparse: torch.Tensor) -> torch.Tensor:
        x = self.bottom(dense)
        vectors = torch.stack([x] + [table(sparse[:, k]) for k, table in enumerate(self.tables)], dim=1)
        z = torch.bmm(vectors, vectors.transpose(1, 2))
        li, lj = torch.tril_indices(vectors.shape[1], vectors.shape[1], offset=-1)
        return self.top(torch.cat([x, z[:, li, lj]], dim=1))


def dlrm_mini() -> nn.Module:
    """A click model: 13 dense features and 8 categorical ones (tables of 1000 rows of 16), one logit (inputs
    `--input-shape 13 --input-shape 8`)."""
    return _Dlrm()


class _SeqFirstText(nn.Module):
    """A text classifier written sequence-first, as PyTorch's own transformer tutorial is: token ids (S, N),
    an embedding scaled by √d, a sine position table held as a (max, 1, d) buffer, an encoder of
    ``batch_first=False`` layers whose padding (id 0) is masked by ``src_key_padding_mask``, a mean over
    the tokens weighed by the same mask, a head."""

    def __init__(self, vocabulary: int = 1000, width: int = 64, classes: int = 4) -> None:
        super().__init__()
        import math

        self.scale = math.sqrt(width)
        self.embed = nn.Embedding(vocabulary, width)
        positions = torch.arange(256).unsqueeze(1)
        rate = torch.exp(torch.arange(0, width, 2) * (-math.log(10000.0) / width))
        table = torch.zeros(256, 1, width)
        table[:, 0, 0::2], table[:, 0, 1::2] = torch.sin(positions * rate), torch.cos(positions * rate)
        self.register_buffer("table", table)
        layer = nn.TransformerEncoderLayer(width, 4, 2 * width, dropout=0.1)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(width, classes)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        keep = ids != 0  # (S, N)
        x = self.embed(ids) * self.scale + self.table[:ids.size(0)]
        x = self.encoder(x, src_key_padding_mask=~keep.transpose(0, 1))
        w = keep.unsqueeze(-1).float()
        return self.head((x * w).sum(0) / w.sum(0).clamp(min=1.0))


def seqfirst_text_mini() -> nn.Module:
    """A sequence-first text classifier with a padding mask: 32 tokens of a 1000-token vocabulary, a two-layer
    encoder of width 64, 4 classes (import with `--input-shape 32 --batch-axis 1`)."""
    return _SeqFirstText()
