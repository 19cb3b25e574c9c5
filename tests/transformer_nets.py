"""GPT-2 small and BERT-base in plain torch.nn, without weights, for counting and importing.

The sizes are the published ones: GPT-2 small (Radford et al. 2019, "Language Models are Unsupervised
Multitask Learners", table 2: 12 layers, width 768; vocabulary 50,257, context 1,024) and BERT-base
(Devlin et al. 2019, NAACL, §3: L = 12, H = 768, A = 12, feed-forward 4H; vocabulary 30,522, 512
positions, 2 token types). The blocks follow the published architectures (GPT-2: pre-norm blocks, a final
layer norm, GELU; BERT: post-norm blocks, an embedding layer norm, a tanh pooler on the first token).
GPT-2's output head is tied to the token embedding, as in the released model. Attention is
``nn.MultiheadAttention`` with ``batch_first=True``. Build under ``torch.device("meta")``; the input is a
batch of token ids. Smaller GPTs follow in the forms people write them (by hand, as training code).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


class GPT2Block(nn.Module):
    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(width)
        self.attn = nn.MultiheadAttention(width, heads, batch_first=True)
        self.ln_2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width), nn.Dropout(0.1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = x.shape[1]
        mask = torch.triu(torch.full((s, s), float("-inf"), device=x.device), 1)
        h = self.ln_1(x)
        a, _ = self.attn(h, h, h, attn_mask=mask, need_weights=False, is_causal=True)
        x = x + a
        return x + self.mlp(self.ln_2(x))


class GPT2(nn.Module):
    def __init__(self, vocabulary: int = 50257, context: int = 1024, width: int = 768, layers: int = 12,
                 heads: int = 12) -> None:
        super().__init__()
        self.wte = nn.Embedding(vocabulary, width)
        self.wpe = nn.Embedding(context, width)
        self.drop = nn.Dropout(0.1)
        self.h = nn.Sequential(*(GPT2Block(width, heads) for _ in range(layers)))
        self.ln_f = nn.LayerNorm(width)
        self.lm_head = nn.Linear(width, vocabulary, bias=False)
        self.lm_head.weight = self.wte.weight  # tied, as the released model

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(ids.shape[1], device=ids.device)
        x = self.drop(self.wte(ids) + self.wpe(positions))
        return self.lm_head(self.ln_f(self.h(x)))


class BertLayer(nn.Module):
    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.attention = nn.MultiheadAttention(width, heads, batch_first=True)
        self.attention_dropout = nn.Dropout(0.1)
        self.attention_norm = nn.LayerNorm(width)
        self.intermediate = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU())
        self.output = nn.Sequential(nn.Linear(4 * width, width), nn.Dropout(0.1))
        self.output_norm = nn.LayerNorm(width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, _ = self.attention(x, x, x, need_weights=False)
        x = self.attention_norm(x + self.attention_dropout(a))
        return self.output_norm(x + self.output(self.intermediate(x)))


class Bert(nn.Module):
    def __init__(self, vocabulary: int = 30522, positions: int = 512, types: int = 2, width: int = 768,
                 layers: int = 12, heads: int = 12) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(vocabulary, width)
        self.position_embeddings = nn.Embedding(positions, width)
        self.token_type_embeddings = nn.Embedding(types, width)
        self.embedding_norm = nn.LayerNorm(width)
        self.embedding_dropout = nn.Dropout(0.1)
        self.encoder = nn.Sequential(*(BertLayer(width, heads) for _ in range(layers)))
        self.pooler = nn.Linear(width, width)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        s = ids.shape[1]
        positions = torch.arange(s, device=ids.device)
        types = torch.zeros(s, dtype=torch.int64, device=ids.device)
        x = self.word_embeddings(ids) + self.position_embeddings(positions) + self.token_type_embeddings(types)
        x = self.encoder(self.embedding_dropout(self.embedding_norm(x)))
        return torch.tanh(self.pooler(x[:, 0]))


class TorchEncoder(nn.Module):
    """A text classifier on ``nn.TransformerEncoder`` (token and position embeddings, the encoder, a final
    norm when pre-norm, a linear head on the first token), as PyTorch's own tutorials build one.
    ``causal`` passes a causal mask; ``activation`` is what ``nn.TransformerEncoderLayer`` takes."""

    def __init__(self, vocabulary: int = 1000, context: int = 128, width: int = 64, heads: int = 4,
                 layers: int = 2, feed_forward: int = 256, norm_first: bool = False, activation: object = "relu",
                 causal: bool = False, dropout: float = 0.1) -> None:
        super().__init__()
        self.causal = causal
        self.tokens = nn.Embedding(vocabulary, width)
        self.positions = nn.Embedding(context, width)
        layer = nn.TransformerEncoderLayer(width, heads, feed_forward, dropout=dropout, activation=activation,
                                           batch_first=True, norm_first=norm_first)
        self.encoder = nn.TransformerEncoder(layer, layers, norm=nn.LayerNorm(width) if norm_first else None,
                                             enable_nested_tensor=False)
        self.head = nn.Linear(width, 10)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        s = ids.shape[1]
        x = self.tokens(ids) + self.positions(torch.arange(s, device=ids.device))
        if self.causal:
            mask = nn.Transformer.generate_square_subsequent_mask(s, device=ids.device)
            x = self.encoder(x, mask=mask, is_causal=True)
        else:
            x = self.encoder(x)
        return self.head(x[:, 0])


class CausalSelfAttention(nn.Module):
    """Attention written by hand, as nanoGPT (Karpathy) and many research codes write it: one projection
    to queries, keys and values, split, viewed as heads, ``F.scaled_dot_product_attention``, the heads
    merged back and projected."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.c_attn = nn.Linear(width, 3 * width)
        self.c_proj = nn.Linear(width, width)
        self.heads, self.width = heads, width

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.size()
        q, k, v = self.c_attn(x).split(self.width, dim=2)
        q = q.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))


class HandBlock(nn.Module):
    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.ln_1, self.attn, self.ln_2 = nn.LayerNorm(width), CausalSelfAttention(width, heads), nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class HandAttentionGPT(nn.Module):
    """A small GPT in nanoGPT's form (hand-written attention; the head untied from the embedding)."""

    def __init__(self, vocabulary: int = 100, context: int = 64, width: int = 64, heads: int = 4,
                 layers: int = 2) -> None:
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocabulary, width), nn.Embedding(context, width)
        self.h = nn.Sequential(*(HandBlock(width, heads) for _ in range(layers)))
        self.ln_f = nn.LayerNorm(width)
        self.lm_head = nn.Linear(width, vocabulary, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(0, idx.size(1), dtype=torch.long, device=idx.device)
        return self.lm_head(self.ln_f(self.h(self.wte(idx) + self.wpe(pos))))


class TrainingGPT(nn.Module):
    """A small GPT written as training code writes it (nanoGPT's form): ``forward(idx, targets=None)``
    checks the sequence length, returns ``(logits, loss)`` with the loss taken on logits folded to
    (batch·tokens, vocabulary) when given targets, and the last token's logits alone without them; the
    head is tied to the token embedding; attention is ``F.scaled_dot_product_attention`` (``fused``) or
    written out (``q @ kᵀ``, a causal mask buffer filled with -inf, softmax, dropout, ``@ v``); layer norms
    with an optional bias through ``F.layer_norm``."""

    def __init__(self, vocabulary: int = 100, context: int = 64, width: int = 64, heads: int = 4,
                 layers: int = 2, dropout: float = 0.0, bias: bool = True, fused: bool = True) -> None:
        super().__init__()
        self.context = context
        self.wte, self.wpe = nn.Embedding(vocabulary, width), nn.Embedding(context, width)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(_TrainingBlock(width, heads, context, dropout, bias, fused) for _ in range(layers))
        self.ln_f = _BiasNorm(width, bias)
        self.lm_head = nn.Linear(width, vocabulary, bias=False)
        self.wte.weight = self.lm_head.weight

    def forward(self, idx: torch.Tensor,
                targets: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        _, t = idx.size()
        assert t <= self.context, f"a sequence of {t} tokens is longer than the context {self.context}"
        x = self.drop(self.wte(idx) + self.wpe(torch.arange(0, t, dtype=torch.long, device=idx.device)))
        for block in self.blocks:
            x = block(x)
        x = self.ln_f(x)
        if targets is None:
            return self.lm_head(x[:, [-1], :]), None
        logits = self.lm_head(x)
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)


class _BiasNorm(nn.Module):
    def __init__(self, width: int, bias: bool) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))
        self.bias = nn.Parameter(torch.zeros(width)) if bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)


class _TrainingAttention(nn.Module):
    def __init__(self, width: int, heads: int, context: int, dropout: float, bias: bool, fused: bool) -> None:
        super().__init__()
        self.c_attn, self.c_proj = nn.Linear(width, 3 * width, bias=bias), nn.Linear(width, width, bias=bias)
        self.attn_dropout, self.resid_dropout = nn.Dropout(dropout), nn.Dropout(dropout)
        self.heads, self.width, self.dropout, self.fused = heads, width, dropout, fused
        if not fused:
            self.register_buffer("mask", torch.tril(torch.ones(context, context)).view(1, 1, context, context))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.size()
        q, k, v = (p.view(b, t, self.heads, c // self.heads).transpose(1, 2)
                   for p in self.c_attn(x).split(self.width, dim=2))
        if self.fused:
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout if self.training else 0.0,
                                               is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.mask[:, :, :t, :t] == 0, float("-inf"))
            y = self.attn_dropout(F.softmax(att, dim=-1)) @ v
        return self.resid_dropout(self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c)))


class _TrainingBlock(nn.Module):
    def __init__(self, width: int, heads: int, context: int, dropout: float, bias: bool, fused: bool) -> None:
        super().__init__()
        self.ln_1, self.ln_2 = _BiasNorm(width, bias), _BiasNorm(width, bias)
        self.attn = _TrainingAttention(width, heads, context, dropout, bias, fused)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width, bias=bias), nn.GELU(),
                                 nn.Linear(4 * width, width, bias=bias), nn.Dropout(dropout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class StackedAttention(nn.Module):
    """Attention as timm and DeiT write it: one projection viewed as (B, N, 3, H, d) and permuted to
    (3, B, H, N, d), its queries, keys and values taken by ``unbind(0)`` or by index, then
    ``F.scaled_dot_product_attention`` (``fused``) or the products written out with the scale on q."""

    def __init__(self, width: int, heads: int, fused: bool = True, unbind: bool = True) -> None:
        super().__init__()
        self.heads, self.head_width = heads, width // heads
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.fused, self.unbind, self.scale = fused, unbind, self.head_width ** -0.5

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, c = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.heads, self.head_width).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0) if self.unbind else (qkv[0], qkv[1], qkv[2])
        if self.fused:
            x = F.scaled_dot_product_attention(q, k, v)
        else:
            x = ((q * self.scale) @ k.transpose(-2, -1)).softmax(dim=-1) @ v
        return self.proj(x.transpose(1, 2).reshape(b, n, c))


class StackedAttentionClassifier(nn.Module):
    """Token ids, an embedding, two pre-norm blocks of :class:`StackedAttention` and an MLP, the first
    token classified."""

    def __init__(self, vocabulary: int = 100, width: int = 32, heads: int = 4, fused: bool = True,
                 unbind: bool = True) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocabulary, width)
        self.norms = nn.ModuleList(nn.LayerNorm(width) for _ in range(4))
        self.attn = nn.ModuleList(StackedAttention(width, heads, fused, unbind) for _ in range(2))
        self.mlp = nn.ModuleList(nn.Sequential(nn.Linear(width, 2 * width), nn.GELU(), nn.Linear(2 * width, width))
                                 for _ in range(2))
        self.head = nn.Linear(width, 10)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)
        for i in range(2):
            x = x + self.attn[i](self.norms[2 * i](x))
            x = x + self.mlp[i](self.norms[2 * i + 1](x))
        return self.head(x[:, 0])
