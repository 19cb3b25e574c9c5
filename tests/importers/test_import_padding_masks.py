"""Padding: masks (``src_key_padding_mask=ids == pad``, ``key_padding_mask``, an ``attn_mask`` computed from an
attention-mask input, or a mask taken as an input of its own): masking changes no count, so the mask is
no layer and the network imports as the same network without it; FLOPs are FlopCounterMode's; the
runner trains the spec. Packed sequences import as the padded ones."""

from __future__ import annotations

import pytest
import torch
from importers.import_helpers import step_flops
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

import dnnbench
from dnnbench.counts import totals
from dnnbench.measure import torchnet


class _Encoder(nn.Module):
    """Token ids through an embedding and a two-layer encoder, a mean over the tokens, three classes;
    ``mask`` chooses how a padding mask (id 0) reaches attention."""

    def __init__(self, mask: str = "none") -> None:
        super().__init__()
        self.mask = mask
        self.emb = nn.Embedding(100, 32)
        layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.fc = nn.Linear(32, 3)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        if self.mask == "computed":
            return self.fc(self.enc(self.emb(ids), src_key_padding_mask=ids == 0).mean(1))
        if self.mask == "masked-mean":  # the mask also weighs the mean over the tokens (a compare layer)
            keep = ids != 0
            x = self.enc(self.emb(ids), src_key_padding_mask=~keep)
            w = keep.unsqueeze(-1).float()
            return self.fc((x * w).sum(1) / w.sum(1).clamp(min=1))
        return self.fc(self.enc(self.emb(ids)).mean(1))


class _GivenMask(_Encoder):
    def forward(self, ids: torch.Tensor, padding: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return self.fc(self.enc(self.emb(ids), src_key_padding_mask=padding > 0).mean(1))


class _Attention(nn.Module):
    """``nn.MultiheadAttention`` with a key-padding mask, or F.scaled_dot_product_attention with an additive
    mask made from the ids (BERT's extended attention mask), or neither."""

    def __init__(self, mask: str = "none") -> None:
        super().__init__()
        self.mask = mask
        self.emb = nn.Embedding(100, 32)
        self.attn = nn.MultiheadAttention(32, 4, batch_first=True)
        self.fc = nn.Linear(32, 3)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.emb(ids)
        if self.mask == "sdpa":
            extended = (1.0 - (ids != 0).float()[:, None, None, :]) * -1e4
            q = x.view(x.shape[0], x.shape[1], 4, 8).transpose(1, 2)
            a = nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=extended)
            return self.fc(a.transpose(1, 2).reshape(x.shape[0], x.shape[1], 32).mean(1))
        if self.mask == "sdpa-none":
            q = x.view(x.shape[0], x.shape[1], 4, 8).transpose(1, 2)
            a = nn.functional.scaled_dot_product_attention(q, q, q)
            return self.fc(a.transpose(1, 2).reshape(x.shape[0], x.shape[1], 32).mean(1))
        padding = ids == 0 if self.mask == "key" else None
        return self.fc(self.attn(x, x, x, key_padding_mask=padding, need_weights=False)[0].mean(1))


def _ids(batch: int = 2, tokens: int = 16) -> torch.Tensor:
    ids = torch.randint(1, 100, (batch, tokens))
    ids[:, tokens // 2:] = 0  # padding
    return ids


def _flops_match(module: nn.Module, net: dnnbench.Network, *inputs: torch.Tensor) -> None:
    t = totals(net)
    batch = inputs[0].shape[0]
    forward, backward = step_flops(lambda: module(*inputs))
    assert forward == 2 * batch * t.macs_forward
    assert backward == 2 * batch * (t.macs_backprop + t.macs_weight_grad)


@pytest.mark.parametrize("module,plain", [(_Encoder("computed"), _Encoder()), (_Attention("key"), _Attention()),
                                          (_Attention("sdpa"), _Attention("sdpa-none"))],
                         ids=["encoder-computed-mask", "attention-key-padding", "sdpa-additive-mask"])
def test_a_padding_mask_is_no_layer(module: nn.Module, plain: nn.Module) -> None:
    net = dnnbench.from_torch(module, (16,))
    without = dnnbench.from_torch(plain, (16,))
    assert [layer.kind for layer in net.layers] == [layer.kind for layer in without.layers]
    assert net.shapes == without.shapes and totals(net).macs_training == totals(without).macs_training
    assert not any(layer.kind == "compare" for layer in net.layers)
    _flops_match(module, net, _ids())


def test_a_mask_taken_as_an_input_is_no_input_layer() -> None:
    net = dnnbench.from_torch(_GivenMask(), [(16,), (16,)])
    assert len(net.input_layers) == 1 and net.layers[1:] == dnnbench.from_torch(_Encoder(), (16,)).layers[1:]
    ids = _ids()
    _flops_match(_GivenMask(), net, ids, (ids == 0).float())


def test_a_mask_that_also_weighs_the_mean_imports_and_trains() -> None:
    module = _Encoder("masked-mean")
    net = dnnbench.from_torch(module, (16,))
    kinds = [layer.kind for layer in net.layers]
    assert kinds.count("compare") == 1 and kinds.count("attention") == 2
    _flops_match(module, net, _ids())
    model = torchnet.build_model(net)
    x, y = torchnet.batch(net, 4)
    torchnet.loss_fn(net)(model(x), y).backward()


class _Packed(nn.Module):
    """A GRU over ids packed by their lengths (``pack_padded_sequence``, called as ``nn.utils.rnn``'s or as a
    name this module imported; unpacked by ``pad_packed_sequence`` for a tag per token), or the same GRU
    over the padded ids (``pack=None``)."""

    def __init__(self, pack: str | None, tags: bool = False) -> None:
        super().__init__()
        self.pack, self.tags = pack, tags
        self.emb = nn.Embedding(100, 16)
        self.rnn = nn.GRU(16, 16, batch_first=True, bidirectional=tags)
        self.fc = nn.Linear(32 if tags else 16, 3)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.emb(ids)
        if self.pack is not None:
            lengths = (ids != 0).sum(1).cpu()
            pack = nn.utils.rnn.pack_padded_sequence if self.pack == "attribute" else pack_padded_sequence
            x = pack(x, lengths, batch_first=True, enforce_sorted=False)
        out, h = self.rnn(x)
        if not self.tags:
            return self.fc(h[-1])
        if self.pack is not None:
            out, _ = pad_packed_sequence(out, batch_first=True, total_length=ids.size(1))
        return self.fc(out)


@pytest.mark.parametrize("pack,tags", [("attribute", False), ("imported", False), ("imported", True)])
def test_a_packed_sequence_imports_as_the_padded_one(pack: str, tags: bool) -> None:
    """The recurrent layer is priced over every step of the padded sequence (an upper bound: packing skips
    the padding, which depends on the data); the lengths, computed and then unused, are no layers; the
    packing functions are torch's own again afterwards."""
    net = dnnbench.from_torch(_Packed(pack, tags), (16,))
    assert net.layers == dnnbench.from_torch(_Packed(None, tags), (16,)).layers
    assert nn.utils.rnn.pack_padded_sequence is pack_padded_sequence
    assert nn.utils.rnn.pad_packed_sequence is pad_packed_sequence
    model = torchnet.build_model(net)
    x, y = torchnet.batch(net, 4)
    torchnet.loss_fn(net)(model(x), y).backward()
