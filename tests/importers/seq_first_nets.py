"""Networks whose layers take sequences first (``batch_first=False``, the batch on axis 1), each beside
its batch-first twin: the same layers and weights, the batch on axis 0."""

from __future__ import annotations

import math

import torch
from torch import nn


class TokensEncoder(nn.Module):
    """CLIP's text and image towers: tokens (N, S, D) made (S, N, D) by a permute for an
    ``nn.TransformerEncoder`` of ``batch_first=False`` layers and back, then the first token's features;
    ``seq_first=False``: the same encoder with ``batch_first=True`` and no permutes."""

    def __init__(self, seq_first: bool = True, tokens: int = 6, width: int = 16) -> None:
        super().__init__()
        self.seq_first = seq_first
        self.proj = nn.Linear(8, width)
        self.pos = nn.Parameter(torch.randn(tokens, width))
        layer = nn.TransformerEncoderLayer(width, 4, 2 * width, dropout=0.0, batch_first=not seq_first)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.ln = nn.LayerNorm(width)
        self.fc = nn.Linear(width, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.proj(x) + self.pos
        if self.seq_first:
            x = self.encoder(x.permute(1, 0, 2)).permute(1, 0, 2)
        else:
            x = self.encoder(x)
        return self.fc(self.ln(x[:, 0, :]))


class WordLanguageModel(nn.Module):
    """PyTorch's word language model: token ids (S, N) in (the forward takes the sequence first), an
    embedding scaled by √d, a sine position table held as a (max, 1, d) buffer, a causal mask of
    constants without ``is_causal``, an encoder of ``batch_first=False`` layers, logits (S, N, V) out.
    ``seq_first=False``: the same model on (N, S) ids."""

    def __init__(self, seq_first: bool = True, vocabulary: int = 50, width: int = 16) -> None:
        super().__init__()
        self.seq_first, self.width = seq_first, width
        self.embed = nn.Embedding(vocabulary, width)
        positions = torch.arange(100).unsqueeze(1)
        rate = torch.exp(torch.arange(0, width, 2) * (-math.log(10000.0) / width))
        table = torch.zeros(100, width)
        table[:, 0::2], table[:, 1::2] = torch.sin(positions * rate), torch.cos(positions * rate)
        self.register_buffer("table", table.unsqueeze(1) if seq_first else table.unsqueeze(0))
        layer = nn.TransformerEncoderLayer(width, 2, 2 * width, dropout=0.0, batch_first=not seq_first)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.decoder = nn.Linear(width, vocabulary)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids) * math.sqrt(self.width)
        tokens = ids.size(0) if self.seq_first else ids.size(1)
        x = x + (self.table[:tokens] if self.seq_first else self.table[:, :tokens])
        return self.decoder(self.encoder(x, nn.Transformer.generate_square_subsequent_mask(tokens)))


class LastStep(nn.Module):
    """A sequence classifier of the older style: ``x.transpose(0, 1)`` into an ``nn.LSTM`` of
    ``batch_first=False``, its last step's output ``out[-1]`` to a linear layer."""

    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(8, 12, num_layers=2)
        self.fc = nn.Linear(12, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(x.transpose(0, 1))
        return self.fc(out[-1])


class AttentionPool(nn.Module):
    """Self-attention of ``batch_first=False`` on the transposed tokens, a residual layer norm, the mean
    over the sequence (axis 0 of the (S, N, D) value) and a linear head."""

    def __init__(self) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(16, 4)
        self.norm = nn.LayerNorm(16)
        self.fc = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x.transpose(0, 1)
        y = self.norm(y + self.attn(y, y, y, need_weights=False)[0])
        return self.fc(y.mean(dim=0))


class FinalStates(nn.Module):
    """A two-layer bidirectional ``nn.LSTM`` of ``batch_first=False`` on the transposed sequence, its last
    layer's final states in both directions (``h_n[-2]``, ``h_n[-1]``) joined for a linear head;
    ``seq_first=False``: the same LSTM with ``batch_first=True`` and no transpose."""

    def __init__(self, seq_first: bool = True) -> None:
        super().__init__()
        self.seq_first = seq_first
        self.lstm = nn.LSTM(8, 12, num_layers=2, batch_first=not seq_first, bidirectional=True)
        self.fc = nn.Linear(24, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _, (h, _) = self.lstm(x.transpose(0, 1) if self.seq_first else x)
        return self.fc(torch.cat([h[-2], h[-1]], 1))
