"""Cross-attention and PyTorch's transformer decoder: ``nn.MultiheadAttention`` from one sequence to another,
``nn.TransformerDecoderLayer``, ``nn.TransformerDecoder`` and ``nn.Transformer`` of layer outputs import as
the layers PyTorch runs, with its weights and FlopCounterMode's FLOPs."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import dnnbench
from dnnbench.counts import totals
from dnnbench.errors import SpecError

from .import_helpers import imports_like_pytorch, params

WIDTH, HEADS = 32, 4


class CrossAttend(nn.Module):
    """A few summary tokens (the sequence's last ones, projected) attend to the whole sequence."""

    def __init__(self, packed: bool = True) -> None:
        super().__init__()
        self.embed = nn.Linear(6, WIDTH)
        self.summary = nn.Linear(WIDTH, WIDTH)
        self.attn = nn.MultiheadAttention(WIDTH, HEADS, batch_first=True, dropout=0.1)
        self.packed = packed
        self.head = nn.Linear(WIDTH, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x)
        q = self.summary(h[:, -3:])
        value = h if self.packed else torch.tanh(h)
        out, _ = self.attn(q, h, value)
        return self.head(out.mean(1))


class Forecaster(nn.Module):
    """An encoder-decoder forecaster (time-series transformers): the history is the source, its last
    steps the decoder's target, masked causally."""

    def __init__(self, norm_first: bool = False, activation: str = "relu") -> None:
        super().__init__()
        self.embed = nn.Linear(4, WIDTH)
        self.transformer = nn.Transformer(WIDTH, HEADS, num_encoder_layers=2, num_decoder_layers=2,
                                          dim_feedforward=64, dropout=0.1, batch_first=True, norm_first=norm_first,
                                          activation=activation)
        self.out = nn.Linear(WIDTH, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x)
        tgt = h[:, -6:]
        mask = nn.Transformer.generate_square_subsequent_mask(6)
        return self.out(self.transformer(h, tgt, tgt_mask=mask, tgt_is_causal=True))


class Captioner(nn.Module):
    """A convolutional encoder's feature map as the memory of a decoder over tokens made from its pooled
    features (a stand-in for teacher-forced captions)."""

    def __init__(self, layers: int = 2) -> None:
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(3, WIDTH, 3, stride=2, padding=1), nn.ReLU())
        self.queries = nn.Linear(WIDTH, WIDTH * 4)
        layer = nn.TransformerDecoderLayer(WIDTH, HEADS, dim_feedforward=48, dropout=0.0, batch_first=True)
        self.decoder = nn.TransformerDecoder(layer, layers, norm=nn.LayerNorm(WIDTH))
        self.single = nn.TransformerDecoderLayer(WIDTH, HEADS, dim_feedforward=48, batch_first=True,
                                                 norm_first=True, activation="gelu")
        self.head = nn.Linear(WIDTH, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        maps = self.conv(x)
        memory = maps.flatten(2).transpose(1, 2)
        tokens = self.queries(memory.mean(1)).view(-1, 4, WIDTH)
        h = self.decoder(tokens, memory)
        h = self.single(h, memory)
        return self.head(h)


@pytest.mark.parametrize("packed", [True, False])
def test_cross_attention_imports_as_projections_and_sdpa(packed: bool) -> None:
    net = imports_like_pytorch(CrossAttend(packed).eval(), (12, 6), torch.randn(3, 12, 6))
    kinds = [layer.kind for layer in net.layers]
    assert kinds.count("sdpa") == 1 and "attention" not in kinds
    # PyTorch packs the keys' and values' projections into one product when key and value are one tensor.
    widths = sorted(layer.out_features for layer in net.layers if layer.kind == "fc")
    assert widths == ([5, WIDTH, WIDTH, WIDTH, WIDTH, 2 * WIDTH] if packed else [5] + [WIDTH] * 6)


@pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")  # PyTorch's note on norm_first encoders
@pytest.mark.parametrize("norm_first", [False, True])
def test_transformer_of_layer_outputs(norm_first: bool) -> None:
    module = Forecaster(norm_first, "gelu" if norm_first else "relu").eval()
    net = imports_like_pytorch(module, (20, 4), torch.randn(2, 20, 4))
    names = net.layer_names
    assert sum(1 for n in names if n.endswith(".self_attn")) == 4  # two encoder and two decoder layers
    sdpa = [layer for layer in net.layers if layer.kind == "sdpa"]
    assert len(sdpa) == 2
    assert net.shapes[names.index("transformer.decoder.layers.0.multihead_attn.attend")] == (HEADS, 6, WIDTH // HEADS)
    # The decoder's self-attention is causal, the encoder's is not.
    causal = {n: layer.causal for n, layer in zip(names, net.layers, strict=True) if n.endswith(".self_attn")}
    assert causal == {"transformer.encoder.layers.0.self_attn": False, "transformer.encoder.layers.1.self_attn": False,
                      "transformer.decoder.layers.0.self_attn": True, "transformer.decoder.layers.1.self_attn": True}
    assert {"transformer.encoder.norm", "transformer.decoder.norm"} <= set(names)


def test_decoder_over_a_convolutional_memory() -> None:
    net = imports_like_pytorch(Captioner().eval(), (3, 16, 16), torch.randn(2, 3, 16, 16))
    assert net.shapes[-1] == (4, 10)
    attends = [n for n in net.layer_names if n.endswith(".attend")]
    assert attends == ["decoder.layers.0.multihead_attn.attend", "decoder.layers.1.multihead_attn.attend",
                       "single.multihead_attn.attend"]
    # Memory of 64 positions: the scores of 4 tokens against them, per head.
    sdpa = net.layer_counts[net.layer_names.index("single.multihead_attn.attend")]
    assert sdpa.macs_forward == HEADS * 4 * 64 * 2 * (WIDTH // HEADS)


def test_decoder_names_its_dropouts_and_norms_as_pytorch() -> None:
    layer = nn.TransformerDecoderLayer(WIDTH, HEADS, dim_feedforward=40, dropout=0.2, batch_first=True)

    class Wrap(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(8, WIDTH)
            self.layer = layer

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = self.proj(x)
            return self.layer(h[:, :3], h)

    net = dnnbench.from_torch(Wrap(), (10, 8))
    assert totals(net).weights == params(Wrap())
    names = set(net.layer_names)
    assert {"layer.dropout1", "layer.dropout2", "layer.dropout3", "layer.dropout", "layer.norm1", "layer.norm2",
            "layer.norm3", "layer.multihead_attn.kv_proj", "layer.multihead_attn.out_proj"} <= names


class Perceiver(nn.Module):
    """Perceiver's learned latents attend to the input, then to themselves."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(3, WIDTH)
        self.latents = nn.Parameter(torch.randn(8, WIDTH))
        self.cross = nn.MultiheadAttention(WIDTH, HEADS, batch_first=True)
        self.process = nn.TransformerEncoderLayer(WIDTH, HEADS, dim_feedforward=64, dropout=0.0, batch_first=True)
        self.head = nn.Linear(WIDTH, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x)
        z, _ = self.cross(self.latents.expand(x.shape[0], -1, -1), h, h)
        return self.head(self.process(z).mean(1))


class ObjectQueries(nn.Module):
    """DETR's decoder: learned object queries as the target, a convolutional feature map as the memory."""

    def __init__(self) -> None:
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, WIDTH, 4, stride=4), nn.ReLU())
        self.query_embed = nn.Embedding(5, WIDTH)
        layer = nn.TransformerDecoderLayer(WIDTH, HEADS, dim_feedforward=64, dropout=0.1, batch_first=True)
        self.decoder = nn.TransformerDecoder(layer, 2)
        self.box = nn.Linear(WIDTH, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        memory = self.backbone(x).flatten(2).permute(0, 2, 1)
        queries = self.query_embed.weight.unsqueeze(0).repeat(x.shape[0], 1, 1)
        return self.box(self.decoder(queries, memory)).sigmoid()


@pytest.mark.parametrize(("module", "shape"), [(Perceiver, (50, 3)), (ObjectQueries, (3, 32, 32))])
def test_learned_queries_attend_to_the_data(module: type[nn.Module], shape: tuple[int, ...]) -> None:
    net = imports_like_pytorch(module().eval(), shape, torch.randn(2, *shape))
    learned = [(layer, s) for layer, s in zip(net.layers, net.shapes, strict=True)
               if layer.kind == "position_embedding"]
    assert len(learned) == 1
    layer, table = learned[0]
    assert layer.rows == table[0] and table in ((8, WIDTH), (5, WIDTH))


def test_attention_masked_by_the_data_is_the_attention() -> None:
    """A key-padding mask computed from the data changes no count: the attention, no compare layer
    (tests/importers/test_import_padding_masks.py)."""
    class Net(nn.Module):
        def __init__(self, masked: bool) -> None:
            super().__init__()
            self.masked = masked
            self.attn = nn.MultiheadAttention(8, 2, batch_first=True)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.attn(x, x, x, key_padding_mask=x[..., 0] > 0 if self.masked else None)[0]

    net = dnnbench.from_torch(Net(True), (5, 8))
    assert net.layers == dnnbench.from_torch(Net(False), (5, 8)).layers
    assert [layer.kind for layer in net.layers][-1] == "attention"


def test_transformer_without_batch_first_names_the_flag() -> None:
    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.t = nn.TransformerDecoderLayer(8, 2, dim_feedforward=16)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.t(x, x)

    with pytest.raises(SpecError, match="batch_first=False"):
        dnnbench.from_torch(Net(), (5, 8))
