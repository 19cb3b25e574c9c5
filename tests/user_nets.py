"""Networks as users write them, in no preset: teaching networks, generative and graph models, recommenders,
and the small idioms of research code (a quantiser's straight-through estimator, a stopped branch, a fixed
adjacency, a Fourier encoding, a tied decoder, masked and weight-standardised convolutions, LoRA, a
Gumbel sample, a mixture density head, a recurrent cell unrolled by hand, gradient checkpointing).

``NETWORKS`` maps a name to (module factory, per-sample input shape or shapes, which inputs are ids).
tests/importers/test_import_user_networks.py imports each and holds its counts against FlopCounterMode."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint


class VQVAE(nn.Module):
    """A vector quantiser between a conv encoder and decoder: nearest codes by ``torch.cdist``, passed on
    straight through."""

    def __init__(self, codes: int = 32, width: int = 16) -> None:
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(1, 32, 4, 2, 1), nn.ReLU(), nn.Conv2d(32, width, 4, 2, 1))
        self.codebook = nn.Embedding(codes, width)
        self.dec = nn.Sequential(nn.ConvTranspose2d(width, 32, 4, 2, 1), nn.ReLU(),
                                 nn.ConvTranspose2d(32, 1, 4, 2, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = self.enc(x).permute(0, 2, 3, 1)
        flat = z.reshape(z.shape[0], -1, z.shape[-1])
        ids = torch.cdist(flat, self.codebook.weight).argmin(-1)
        zq = z + (self.codebook(ids).view_as(z) - z).detach()
        return self.dec(zq.permute(0, 3, 1, 2))


class VAE(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.mu, self.logvar, self.fc2 = nn.Linear(784, 200), nn.Linear(200, 20), nn.Linear(200, 20), \
            nn.Linear(20, 784)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.fc1(x.view(-1, 784)))
        mu, logvar = self.mu(h), self.logvar(h)
        return torch.sigmoid(self.fc2(mu + torch.randn_like(mu) * torch.exp(0.5 * logvar)))


class UNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.d1 = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU())
        self.d2 = nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(16, 32, 3, padding=1), nn.ReLU())
        self.up, self.out = nn.ConvTranspose2d(32, 16, 2, 2), nn.Conv2d(32, 2, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.d1(x)
        u = F.interpolate(self.up(self.d2(a)), size=a.shape[-2:], mode="bilinear", align_corners=False)
        return self.out(torch.cat([a, u], dim=1))


class GraphConv(nn.Module):
    """Two graph convolutions over a fixed adjacency of 10 nodes (a buffer)."""

    def __init__(self, n: int = 10) -> None:
        super().__init__()
        self.register_buffer("adjacency", torch.eye(n) + (torch.rand(n, n) > 0.6).float())
        self.w1, self.w2 = nn.Linear(8, 16), nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (self.adjacency @ self.w2(F.relu(self.adjacency @ self.w1(x)))).mean(1)


class NeRF(nn.Module):
    def __init__(self, levels: int = 6) -> None:
        super().__init__()
        self.levels = levels
        self.mlp = nn.Sequential(nn.Linear(3 + 6 * levels, 64), nn.ReLU(), nn.Linear(64, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        freqs = 2.0 ** torch.arange(self.levels, device=x.device, dtype=x.dtype) * math.pi
        xb = x[..., None] * freqs
        return self.mlp(torch.cat([x, torch.sin(xb).flatten(-2), torch.cos(xb).flatten(-2)], -1))


class Mixer(nn.Module):
    def __init__(self, d: int = 32, tokens: int = 16) -> None:
        super().__init__()
        self.patch, self.ln1, self.ln2 = nn.Conv2d(3, d, 4, 4), nn.LayerNorm(d), nn.LayerNorm(d)
        self.tok = nn.Sequential(nn.Linear(tokens, 64), nn.GELU(), nn.Linear(64, tokens))
        self.ch = nn.Sequential(nn.Linear(d, 64), nn.GELU(), nn.Linear(64, d))
        self.head = nn.Linear(d, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.patch(x).flatten(2).transpose(1, 2)
        h = h + self.tok(self.ln1(h).transpose(1, 2)).transpose(1, 2)
        return self.head((h + self.ch(self.ln2(h))).mean(1))


class SelfAttention2d(nn.Module):
    """SAGAN's attention over a map's positions, written with bmm."""

    def __init__(self, c: int = 16) -> None:
        super().__init__()
        self.stem, self.head = nn.Conv2d(3, c, 3, padding=1), nn.Linear(c, 10)
        self.q, self.k, self.v = nn.Conv2d(c, c // 8, 1), nn.Conv2d(c, c // 8, 1), nn.Conv2d(c, c, 1)
        self.gamma = nn.Parameter(torch.zeros(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        n, c, h, w = x.shape
        att = torch.softmax(torch.bmm(self.q(x).view(n, -1, h * w).permute(0, 2, 1), self.k(x).view(n, -1, h * w)), -1)
        o = torch.bmm(self.v(x).view(n, -1, h * w), att.permute(0, 2, 1)).view(n, c, h, w)
        return self.head((self.gamma * o + x).mean((2, 3)))


class FiLM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv, self.cond, self.head = nn.Conv2d(3, 16, 3, padding=1), nn.Linear(4, 32), nn.Linear(16, 10)

    def forward(self, x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        g, b = self.cond(c).chunk(2, dim=-1)
        h = self.conv(x) * g[:, :, None, None] + b[:, :, None, None]
        return self.head(F.adaptive_avg_pool2d(F.relu(h), 1).flatten(1))


class RotaryAttention(nn.Module):
    """A causal attention layer with rotary position embeddings computed in the forward."""

    def __init__(self, d: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.emb, self.qkv, self.o, self.head = nn.Embedding(100, d), nn.Linear(d, 3 * d), nn.Linear(d, d), \
            nn.Linear(d, 100)
        self.heads = heads
        self.register_buffer("inv", 1.0 / (10000 ** (torch.arange(0, d // heads, 2).float() / (d // heads))))

    @staticmethod
    def rotated(x: torch.Tensor) -> torch.Tensor:
        return torch.stack((-x[..., 1::2], x[..., ::2]), -1).flatten(-2)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.emb(ids)
        b, t, d = x.shape
        q, k, v = [a.view(b, t, self.heads, -1).transpose(1, 2) for a in self.qkv(x).split(d, -1)]
        angles = torch.outer(torch.arange(t, device=x.device).float(), self.inv)
        angles = torch.cat((angles, angles), -1)
        cos, sin = angles.cos(), angles.sin()
        q, k = q * cos + self.rotated(q) * sin, k * cos + self.rotated(k) * sin
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.head(self.o(y.transpose(1, 2).reshape(b, t, d)))


class ConvLSTM(nn.Module):
    """A convolutional LSTM cell unrolled over 5 frames, its state starting at zeros."""

    def __init__(self, c: int = 4, hidden: int = 8) -> None:
        super().__init__()
        self.conv, self.head = nn.Conv2d(c + hidden, 4 * hidden, 3, padding=1), nn.Linear(hidden, 2)
        self.hidden = hidden

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, steps, _, h, w = x.shape
        hs = torch.zeros(n, self.hidden, h, w, device=x.device)
        cs = torch.zeros_like(hs)
        for t in range(steps):
            i, f, o, g = torch.split(self.conv(torch.cat([x[:, t], hs], 1)), self.hidden, 1)
            cs = torch.sigmoid(f) * cs + torch.sigmoid(i) * torch.tanh(g)
            hs = torch.sigmoid(o) * torch.tanh(cs)
        return self.head(hs.mean((2, 3)))


class DenseMoE(nn.Module):
    """A mixture of experts that runs every expert and weighs them by the gate (soft routing)."""

    def __init__(self, d: int = 16, experts: int = 4) -> None:
        super().__init__()
        self.inp, self.gate, self.out = nn.Linear(8, d), nn.Linear(d, experts), nn.Linear(d, 2)
        self.experts = nn.ModuleList(nn.Linear(d, d) for _ in range(experts))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.inp(x)
        ys = torch.stack([e(h) for e in self.experts], -1)
        return self.out((ys * self.gate(h).softmax(-1).unsqueeze(-2)).sum(-1).mean(1))


class DeepCross(nn.Module):
    def __init__(self, d: int = 12, layers: int = 2) -> None:
        super().__init__()
        self.w = nn.ParameterList(nn.Parameter(torch.randn(d, 1) * 0.01) for _ in range(layers))
        self.b = nn.ParameterList(nn.Parameter(torch.zeros(d)) for _ in range(layers))
        self.out = nn.Linear(d, 1)

    def forward(self, x0: torch.Tensor) -> torch.Tensor:
        x = x0
        for w, b in zip(self.w, self.b, strict=True):
            x = x0 * (x @ w) + b + x
        return self.out(x)


class TiedAutoencoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.enc = nn.Linear(64, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(torch.relu(self.enc(x)), self.enc.weight.t())


class GramHead(nn.Module):
    """Style features: a Gram matrix of a conv's maps."""

    def __init__(self) -> None:
        super().__init__()
        self.conv, self.fc = nn.Conv2d(3, 8, 3, padding=1), nn.Linear(64, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        f = self.conv(x)
        b, c, h, w = f.shape
        f = f.view(b, c, h * w)
        return self.fc((f @ f.transpose(1, 2) / (c * h * w)).flatten(1))


class MaskedConv(nn.Conv2d):
    """PixelCNN's masked convolution: the weight times a constant mask in the forward."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        mask = torch.ones_like(self.weight)
        kh, kw = self.kernel_size
        mask[:, :, kh // 2, kw // 2:] = 0
        mask[:, :, kh // 2 + 1:] = 0
        self.register_buffer("mask", mask)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.conv2d(x, self.weight * self.mask, self.bias, self.stride, self.padding)


class PixelCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c1, self.c2 = MaskedConv(1, 16, 7, padding=3), MaskedConv(16, 16, 3, padding=1)
        self.out = nn.Conv2d(16, 256, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(F.relu(self.c2(F.relu(self.c1(x)))))


class StandardisedConv(nn.Conv2d):
    """BiT's weight standardisation in the forward."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.weight
        w = (w - w.mean(dim=(1, 2, 3), keepdim=True)) / (w.std(dim=(1, 2, 3), keepdim=True) + 1e-5)
        return F.conv2d(x, w, self.bias, self.stride, self.padding)


class BiT(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c, self.gn, self.fc = StandardisedConv(3, 16, 3, padding=1), nn.GroupNorm(4, 16), nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(F.relu(self.gn(self.c(x))).mean((2, 3)))


class LoRA(nn.Module):
    def __init__(self, d: int = 32, rank: int = 4) -> None:
        super().__init__()
        self.base, self.head = nn.Linear(d, d), nn.Linear(d, 2)
        self.a, self.b = nn.Parameter(torch.randn(rank, d) * 0.01), nn.Parameter(torch.zeros(d, rank))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.base(x) + (x @ self.a.T @ self.b.T) * 0.5)


class GumbelLatent(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc, self.dec = nn.Linear(10, 6), nn.Linear(6, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dec(F.gumbel_softmax(self.fc(x), tau=0.5, hard=True))


class SpectralDiscriminator(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c = nn.utils.spectral_norm(nn.Conv2d(3, 16, 4, 2, 1))
        self.fc = nn.utils.parametrizations.spectral_norm(nn.Linear(16 * 4 * 4, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(F.leaky_relu(self.c(x), 0.2).flatten(1))


class MixtureDensity(nn.Module):
    def __init__(self, k: int = 5) -> None:
        super().__init__()
        self.h, self.pi, self.mu, self.sigma = nn.Linear(3, 32), nn.Linear(32, k), nn.Linear(32, 2 * k), \
            nn.Linear(32, 2 * k)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(self.h(x))
        return torch.cat([F.softmax(self.pi(h), -1), self.mu(h), torch.exp(self.sigma(h))], -1)


class AttentionGate(nn.Module):
    """Attention U-Net's gate on a skip connection."""

    def __init__(self) -> None:
        super().__init__()
        self.stem, self.down = nn.Conv2d(3, 8, 3, padding=1), nn.Conv2d(8, 8, 3, 2, 1)
        self.g, self.x, self.psi, self.out = nn.Conv2d(8, 4, 1), nn.Conv2d(8, 4, 2, 2), nn.Conv2d(4, 1, 1), \
            nn.Conv2d(8, 2, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skip = self.stem(x)
        a = torch.sigmoid(self.psi(F.relu(self.g(self.down(skip)) + self.x(skip))))
        return self.out(skip * F.interpolate(a, scale_factor=2, mode="bilinear", align_corners=False))


class RelativeBias(nn.Module):
    """Attention with a learned relative-position bias gathered by a buffer of indices."""

    def __init__(self, s: int = 8, d: int = 16, heads: int = 2) -> None:
        super().__init__()
        self.emb, self.qkv, self.out, self.heads = nn.Linear(4, d), nn.Linear(d, 3 * d), nn.Linear(d, 2), heads
        self.table = nn.Parameter(torch.zeros(2 * s - 1, heads))
        self.register_buffer("index", torch.arange(s)[:, None] - torch.arange(s)[None, :] + s - 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.emb(x)
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        bias = self.table[self.index].permute(2, 0, 1)
        att = (q @ k.transpose(-2, -1) / math.sqrt(d // self.heads) + bias).softmax(-1)
        return self.out((att @ v).transpose(1, 2).reshape(b, s, d).mean(1))


class Standardised(nn.Module):
    """An input standardised by buffers in the forward."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("mean", torch.randn(3, 1, 1))
        self.register_buffer("std", torch.rand(3, 1, 1) + 0.5)
        self.c, self.fc = nn.Conv2d(3, 4, 3), nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.c((x - self.mean) / self.std).mean((2, 3)))


class Checkpointed(nn.Module):
    """A block under gradient checkpointing (``torch.utils.checkpoint``)."""

    def __init__(self) -> None:
        super().__init__()
        self.block, self.head = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 16)), nn.Linear(16, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(x + checkpoint(self.block, x, use_reentrant=False))


class TokenPruning(nn.Module):
    """Tokens scored, the best half kept by their top-k positions, then a block on them (DynamicViT-like,
    the kept tokens weighed by their scores)."""

    def __init__(self, d: int = 16) -> None:
        super().__init__()
        self.embed, self.score, self.block, self.head = nn.Linear(8, d), nn.Linear(d, 1), nn.Linear(d, d), \
            nn.Linear(d, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.embed(x))
        s = self.score(h).squeeze(-1)
        idx = s.topk(h.shape[1] // 2, dim=1).indices
        kept = h.gather(1, idx.unsqueeze(-1).expand(-1, -1, h.shape[-1])) * torch.sigmoid(s.gather(1, idx))[..., None]
        return self.head(torch.relu(self.block(kept)).mean(1))


class PrototypeHead(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features, self.centres = nn.Linear(12, 32), nn.Parameter(torch.randn(10, 32))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return -torch.cdist(torch.relu(self.features(x)), self.centres)


class LSTMByHand(nn.Module):
    """An LSTM written with two nn.Linear gates, its state starting at ``x.new_zeros(B, H)``: the hidden
    product runs on the zeros at the first step too."""

    def __init__(self, hidden: int = 8) -> None:
        super().__init__()
        self.ih, self.hh = nn.Linear(4, 4 * hidden), nn.Linear(hidden, 4 * hidden, bias=False)
        self.out, self.hidden = nn.Linear(hidden, 2), hidden

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.new_zeros(x.shape[0], self.hidden)
        c = torch.zeros(x.size(0), self.hidden, device=x.device)
        for t in range(x.shape[1]):
            i, f, g, o = (self.ih(x[:, t]) + self.hh(h)).chunk(4, 1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
        return self.out(h)


class InPlace(nn.Module):
    """In-place updates whose results are not assigned (``h += ...``, ``h.relu_()``), and a stack with zeros."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.out = nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(16, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.a(x)
        h += self.b(x)
        h.relu_()
        return self.out(torch.stack([h, torch.zeros_like(h)], 1).flatten(1))


class ZerosBranches(nn.Module):
    """``torch.where`` between a layer output and ``torch.zeros_like`` of it, by a mask of data and by a fixed
    mask (a buffer)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc, self.out = nn.Linear(8, 8), nn.Linear(8, 2)
        self.register_buffer("keep", torch.arange(8) % 2 == 0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc(x)
        h = torch.where(h > 0, h, torch.zeros_like(h))
        return self.out(torch.where(self.keep, h, torch.zeros_like(h)))


class CycleGANGenerator(nn.Module):
    """CycleGAN's ResNet generator in small: reflection padding, instance norms, a residual block, a
    transposed convolution with output padding, a tanh."""

    def __init__(self, c: int = 16) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.ReflectionPad2d(3), nn.Conv2d(3, c, 7), nn.InstanceNorm2d(c), nn.ReLU(True))
        self.block = nn.Sequential(nn.ReflectionPad2d(1), nn.Conv2d(c, c, 3), nn.InstanceNorm2d(c), nn.ReLU(True),
                                   nn.ReflectionPad2d(1), nn.Conv2d(c, c, 3), nn.InstanceNorm2d(c))
        self.up = nn.Sequential(nn.ConvTranspose2d(c, 8, 3, 2, 1, output_padding=1), nn.InstanceNorm2d(8),
                                nn.ReLU(True), nn.ReflectionPad2d(3), nn.Conv2d(8, 3, 7), nn.Tanh())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.stem(x)
        return self.up(h + self.block(h))


class MapLayerNorm(nn.Module):
    """A layer norm over a whole (C, H, W) map, after a channel dropout."""

    def __init__(self) -> None:
        super().__init__()
        self.c, self.drop, self.ln, self.fc = nn.Conv2d(3, 8, 3), nn.Dropout2d(0.2), nn.LayerNorm([8, 6, 6]), \
            nn.Linear(288, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(F.dropout(self.ln(self.drop(self.c(x))), 0.1).view(x.size(0), -1))


class DecoderLoop(nn.Module):
    """A greedy decoder's loop as tutorials write it: each step's logits written into a buffer of zeros
    (``outputs[:, t] = o``, the first position left at zeros), the next input its arg-max."""

    def __init__(self) -> None:
        super().__init__()
        self.emb, self.cell, self.out = nn.Embedding(20, 8), nn.GRUCell(8, 16), nn.Linear(16, 20)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        b, steps = ids.shape
        h = torch.zeros(b, 16, device=ids.device)
        outputs = torch.zeros(b, steps, 20, device=ids.device)
        token = ids[:, 0]
        for t in range(1, steps):
            h = self.cell(self.emb(token), h)
            o = self.out(h)
            outputs[:, t] = o
            token = o.argmax(1)
        return outputs


class SelectiveScan(nn.Module):
    """A state space layer's scan written as a loop over the tokens (as teaching code writes Mamba's): the
    state decays by the learned ``exp(A)`` (a product with a learned (D, N) tensor) and takes in the input
    spread over the state's N axis by the input-chosen B; read out by C."""

    def __init__(self, d: int = 8, n: int = 4) -> None:
        super().__init__()
        self.inp, self.b, self.c, self.out = nn.Linear(d, d), nn.Linear(d, n), nn.Linear(d, n), nn.Linear(d, d)
        self.a = nn.Parameter(-torch.rand(d, n))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        u, bm, cm = self.inp(x), self.b(x), self.c(x)
        h = torch.zeros(x.shape[0], x.shape[2], self.a.shape[1])
        ys = []
        for t in range(x.shape[1]):
            h = h * torch.exp(self.a) + u[:, t, :, None] * bm[:, t, None, :]
            ys.append((h * cm[:, t, None, :]).sum(-1))
        return self.out(torch.stack(ys, 1))


class MambaBlock(nn.Module):
    """mamba-minimal's block (its einops written as permutes): an input projection split in two, a causal
    depthwise convolution, the selective scan's einsums (an outer product with the learned A, a product
    of three layer outputs, a batched product per token) in a loop over the tokens, a skip by D, a gate."""

    def __init__(self, d_model: int = 16, d_state: int = 4, d_conv: int = 4, expand: int = 2) -> None:
        super().__init__()
        self.d_inner, self.dt_rank = expand * d_model, math.ceil(d_model / 16)
        self.in_proj = nn.Linear(d_model, self.d_inner * 2, bias=False)
        self.conv1d = nn.Conv1d(self.d_inner, self.d_inner, d_conv, groups=self.d_inner, padding=d_conv - 1)
        self.x_proj = nn.Linear(self.d_inner, self.dt_rank + d_state * 2, bias=False)
        self.dt_proj = nn.Linear(self.dt_rank, self.d_inner)
        self.A_log = nn.Parameter(torch.log(torch.arange(1, d_state + 1).float().repeat(self.d_inner, 1)))
        self.D = nn.Parameter(torch.ones(self.d_inner))
        self.out_proj = nn.Linear(self.d_inner, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, length, _ = x.shape
        x, res = self.in_proj(x).split([self.d_inner, self.d_inner], dim=-1)
        x = F.silu(self.conv1d(x.permute(0, 2, 1))[:, :, :length].permute(0, 2, 1))
        n = self.A_log.shape[1]
        a = -torch.exp(self.A_log.float())
        delta, bm, cm = self.x_proj(x).split([self.dt_rank, n, n], dim=-1)
        delta = F.softplus(self.dt_proj(delta))
        delta_a = torch.exp(torch.einsum("bld,dn->bldn", delta, a))
        delta_b_u = torch.einsum("bld,bln,bld->bldn", delta, bm, x)
        h = torch.zeros((b, self.d_inner, n))
        ys = []
        for i in range(length):
            h = delta_a[:, i] * h + delta_b_u[:, i]
            ys.append(torch.einsum("bdn,bn->bd", h, cm[:, i, :]))
        y = torch.stack(ys, dim=1) + x * self.D.float()
        return self.out_proj(y * F.silu(res))


class Seq2SeqGRU(nn.Module):
    """The translation tutorial's encoder and decoder: the encoder's final state starts the decoder, which
    runs one token per call on its own last state (teacher forcing on the source tokens)."""

    def __init__(self) -> None:
        super().__init__()
        self.enc_emb, self.enc = nn.Embedding(20, 8), nn.GRU(8, 12, batch_first=True)
        self.dec_emb, self.dec, self.out = nn.Embedding(20, 8), nn.GRU(8, 12, batch_first=True), nn.Linear(12, 20)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        _, hidden = self.enc(self.enc_emb(ids))
        outs = []
        for t in range(3):
            o, hidden = self.dec(F.relu(self.dec_emb(ids[:, t].unsqueeze(1))), hidden)
            outs.append(self.out(o))
        return F.log_softmax(torch.cat(outs, 1), -1)


class ChannelAttention(nn.Module):
    """CBAM's channel attention (Woo et al. 2018): a shared MLP of 1×1 convolutions on the average- and
    max-pooled maps."""

    def __init__(self, c: int, r: int = 4) -> None:
        super().__init__()
        self.avg_pool, self.max_pool = nn.AdaptiveAvgPool2d(1), nn.AdaptiveMaxPool2d(1)
        self.fc = nn.Sequential(nn.Conv2d(c, c // r, 1, bias=False), nn.ReLU(), nn.Conv2d(c // r, c, 1, bias=False))
        self.sigmoid = nn.Sigmoid()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.sigmoid(self.fc(self.avg_pool(x)) + self.fc(self.max_pool(x)))


class SpatialAttention(nn.Module):
    """CBAM's spatial attention: a 7×7 convolution of the channels' mean and maximum (2 input channels,
    whose input gradient training computes)."""

    def __init__(self, k: int = 7) -> None:
        super().__init__()
        self.conv1, self.sigmoid = nn.Conv2d(2, 1, k, padding=k // 2, bias=False), nn.Sigmoid()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        avg_out = torch.mean(x, dim=1, keepdim=True)
        max_out, _ = torch.max(x, dim=1, keepdim=True)
        return self.sigmoid(self.conv1(torch.cat([avg_out, max_out], dim=1)))


class CBAMNet(nn.Module):
    """A convolution refined by CBAM's two attentions, pooled, a classifier."""

    def __init__(self) -> None:
        super().__init__()
        self.conv, self.ca, self.sa = nn.Conv2d(3, 16, 3, padding=1), ChannelAttention(16), SpatialAttention()
        self.fc = nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.conv(x))
        x = self.ca(x) * x
        x = self.sa(x) * x
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


class GAT(nn.Module):
    """A graph attention layer (Veličković et al. 2018) as its reference code writes it, on a dense
    adjacency given per sample: one learned vector a, used in two halves (``a[:F]``, ``a[F:]``)."""

    def __init__(self, fin: int = 8, fout: int = 16) -> None:
        super().__init__()
        self.W = nn.Parameter(nn.init.xavier_uniform_(torch.empty(fin, fout)))
        self.a = nn.Parameter(nn.init.xavier_uniform_(torch.empty(2 * fout, 1)))
        self.leakyrelu, self.fout, self.out = nn.LeakyReLU(0.2), fout, nn.Linear(fout, 3)

    def forward(self, h: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
        wh = torch.matmul(h, self.W)
        wh1, wh2 = torch.matmul(wh, self.a[:self.fout, :]), torch.matmul(wh, self.a[self.fout:, :])
        e = self.leakyrelu(wh1 + wh2.transpose(1, 2))
        attention = F.softmax(torch.where(adj > 0, e, -9e15 * torch.ones_like(e)), dim=-1)
        return self.out(F.elu(torch.matmul(attention, wh)).mean(1))


class TNet(nn.Module):
    """PointNet's input transform as its reference code writes it: a 3×3 matrix per sample predicted from
    the points, the identity added from a numpy constant repeated over the batch, a branch on
    ``x.is_cuda``."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1, self.conv2 = nn.Conv1d(3, 16, 1), nn.Conv1d(16, 32, 1)
        self.fc1, self.fc3 = nn.Linear(32, 16), nn.Linear(16, 9)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batchsize = x.size()[0]
        x = torch.max(F.relu(self.conv2(F.relu(self.conv1(x)))), 2, keepdim=True)[0].view(-1, 32)
        x = self.fc3(F.relu(self.fc1(x)))
        iden = torch.from_numpy(np.array([1, 0, 0, 0, 1, 0, 0, 0, 1]).astype(np.float32)).view(1, 9)
        iden = iden.repeat(batchsize, 1)
        if x.is_cuda:
            iden = iden.cuda()
        return (x + iden).view(-1, 3, 3)


class PointNetTransformed(nn.Module):
    """Points multiplied by their T-Net's matrix (``torch.bmm``), then shared layers, a max, a head."""

    def __init__(self) -> None:
        super().__init__()
        self.stn, self.conv1, self.fc = TNet(), nn.Conv1d(3, 32, 1), nn.Linear(32, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        trans = self.stn(x)
        x = torch.bmm(x.transpose(2, 1), trans).transpose(2, 1)
        x = torch.max(F.relu(self.conv1(x)), 2, keepdim=True)[0]
        return self.fc(x.view(-1, 32))


class ConditionalGenerator(nn.Module):
    """PyTorch-GAN's conditional generator: ``forward(noise, labels)``, the labels one class id per sample
    (input shape ``()``), embedded and joined to the noise."""

    def __init__(self) -> None:
        super().__init__()
        self.label_emb = nn.Embedding(20, 10)
        self.model = nn.Sequential(nn.Linear(110, 64), nn.LeakyReLU(0.2, inplace=True), nn.Linear(64, 784), nn.Tanh())

    def forward(self, noise: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        img = self.model(torch.cat((self.label_emb(labels), noise), -1))
        return img.view(img.size(0), 1, 28, 28)


class TimeConditioned(nn.Module):
    """A diffusion denoiser's time conditioning: a step t per sample (input shape ``()``), its sinusoidal
    embedding through an MLP, added to the data's features."""

    def __init__(self) -> None:
        super().__init__()
        self.time = nn.Sequential(nn.Linear(16, 32), nn.SiLU(), nn.Linear(32, 32))
        self.inp, self.out = nn.Linear(8, 32), nn.Linear(32, 8)

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        freqs = torch.exp(-math.log(10000) * torch.arange(8, dtype=torch.float32, device=t.device) / 8)
        args = t[:, None].float() * freqs[None]
        emb = torch.cat([torch.cos(args), torch.sin(args)], dim=-1)
        return self.out(F.silu(self.inp(x) + self.time(emb)))


class NoisyTopKMoE(nn.Module):
    """A sparsely gated mixture of experts (Shazeer et al. 2017) as tutorials write its gate: noisy logits,
    the top k kept and softmaxed, scattered into zeros (``zeros.scatter(-1, top_idx, gates)``); every
    expert is run and weighed by its gate."""

    def __init__(self, d: int = 16, experts: int = 4, k: int = 2) -> None:
        super().__init__()
        self.w_gate, self.w_noise, self.k = nn.Linear(d, experts), nn.Linear(d, experts), k
        self.experts = nn.ModuleList([nn.Linear(d, d) for _ in range(experts)])
        self.out = nn.Linear(d, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        clean_logits = self.w_gate(x)
        logits = clean_logits + torch.randn_like(clean_logits) * F.softplus(self.w_noise(x))
        top_logits, top_idx = logits.topk(self.k, dim=-1)
        gates = torch.zeros_like(logits).scatter(-1, top_idx, F.softmax(top_logits, dim=-1))
        out = torch.stack([expert(x) for expert in self.experts], dim=1)
        return self.out((gates.unsqueeze(-1) * out).sum(1))


class NCF(nn.Module):
    """Neural collaborative filtering (He et al. 2017): a user id and an item id per sample (input shapes
    ``()``), a generalised matrix factorisation beside an MLP of their embeddings."""

    def __init__(self, users: int = 50, items: int = 40, d: int = 8) -> None:
        super().__init__()
        self.ug, self.ig = nn.Embedding(users, d), nn.Embedding(items, d)
        self.um, self.im = nn.Embedding(users, d), nn.Embedding(items, d)
        self.mlp = nn.Sequential(nn.Linear(2 * d, 16), nn.ReLU(), nn.Linear(16, 8), nn.ReLU())
        self.pred = nn.Linear(d + 8, 1)

    def forward(self, user: torch.Tensor, item: torch.Tensor) -> torch.Tensor:
        gmf = self.ug(user) * self.ig(item)
        mlp = self.mlp(torch.cat([self.um(user), self.im(item)], dim=-1))
        return torch.sigmoid(self.pred(torch.cat([gmf, mlp], dim=-1))).view(-1)


def _annotated_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                         mask: torch.Tensor | None = None) -> torch.Tensor:
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(query.size(-1))
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    return torch.matmul(scores.softmax(dim=-1), value)


class AnnotatedHeads(nn.Module):
    """The Annotated Transformer's multi-headed attention: four linears, views and transposes, the mask
    unsqueezed over the heads."""

    def __init__(self, h: int, d: int) -> None:
        super().__init__()
        self.d_k, self.h = d // h, h
        self.linears = nn.ModuleList([nn.Linear(d, d) for _ in range(4)])

    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                mask: torch.Tensor | None = None) -> torch.Tensor:
        if mask is not None:
            mask = mask.unsqueeze(1)
        nb = query.size(0)
        query, key, value = [lin(x).view(nb, -1, self.h, self.d_k).transpose(1, 2)
                             for lin, x in zip(self.linears, (query, key, value), strict=False)]
        x = _annotated_attention(query, key, value, mask)
        return self.linears[-1](x.transpose(1, 2).contiguous().view(nb, -1, self.h * self.d_k))


class AnnotatedEncoderDecoder(nn.Module):
    """The Annotated Transformer's ``forward(src, tgt, src_mask, tgt_mask)`` in small: both masks taken
    as inputs, (1, S) and (T, T) per sample."""

    def __init__(self) -> None:
        super().__init__()
        self.se, self.te = nn.Embedding(30, 16), nn.Embedding(30, 16)
        self.enc_att, self.dec_self, self.dec_src = AnnotatedHeads(2, 16), AnnotatedHeads(2, 16), AnnotatedHeads(2, 16)
        self.gen = nn.Linear(16, 30)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor, src_mask: torch.Tensor,
                tgt_mask: torch.Tensor) -> torch.Tensor:
        m = self.se(src)
        m = m + self.enc_att(m, m, m, src_mask)
        x = self.te(tgt)
        x = x + self.dec_self(x, x, x, tgt_mask)
        x = x + self.dec_src(x, m, m, src_mask)
        return F.log_softmax(self.gen(x), dim=-1)


#: name -> (module factory, per-sample input shape(s), positions of the inputs that are token ids)
NETWORKS: dict[str, tuple[Callable[[], nn.Module], Any, tuple[int, ...]]] = {
    "vqvae": (VQVAE, (1, 28, 28), ()),
    "vae": (VAE, (784,), ()),
    "unet": (UNet, (3, 32, 32), ()),
    "graph_conv": (GraphConv, (10, 8), ()),
    "nerf": (NeRF, (3,), ()),
    "mixer": (Mixer, (3, 16, 16), ()),
    "sagan": (SelfAttention2d, (3, 8, 8), ()),
    "film": (FiLM, [(3, 8, 8), (4,)], ()),
    "rotary": (RotaryAttention, (16,), (0,)),
    "conv_lstm": (ConvLSTM, (5, 4, 8, 8), ()),
    "dense_moe": (DenseMoE, (6, 8), ()),
    "deep_cross": (DeepCross, (12,), ()),
    "tied_autoencoder": (TiedAutoencoder, (64,), ()),
    "gram": (GramHead, (3, 8, 8), ()),
    "pixelcnn": (PixelCNN, (1, 12, 12), ()),
    "bit": (BiT, (3, 8, 8), ()),
    "lora": (LoRA, (5, 32), ()),
    "gumbel": (GumbelLatent, (10,), ()),
    "spectral_disc": (SpectralDiscriminator, (3, 8, 8), ()),
    "mixture_density": (MixtureDensity, (3,), ()),
    "attention_gate": (AttentionGate, (3, 8, 8), ()),
    "relative_bias": (RelativeBias, (8, 4), ()),
    "standardised": (Standardised, (3, 8, 8), ()),
    "checkpointed": (Checkpointed, (16,), ()),
    "token_pruning": (TokenPruning, (12, 8), ()),
    "prototypes": (PrototypeHead, (12,), ()),
    "lstm_by_hand": (LSTMByHand, (5, 4), ()),
    "in_place": (InPlace, (8,), ()),
    "zeros_branches": (ZerosBranches, (8,), ()),
    "cyclegan": (CycleGANGenerator, (3, 16, 16), ()),
    "map_layer_norm": (MapLayerNorm, (3, 8, 8), ()),
    "decoder_loop": (DecoderLoop, (6,), (0,)),
    "seq2seq_gru": (Seq2SeqGRU, (4,), (0,)),
    "cbam": (CBAMNet, (3, 16, 16), ()),
    "gat": (GAT, [(10, 8), (10, 10)], ()),
    "pointnet_tnet": (PointNetTransformed, (3, 20), ()),
    "conditional_gan": (ConditionalGenerator, [(100,), ()], (1,)),
    "time_conditioned": (TimeConditioned, [(8,), ()], ()),
    "noisy_top_k_moe": (NoisyTopKMoE, (16,), ()),
    "ncf": (NCF, [(), ()], (0, 1)),
    "annotated_transformer": (AnnotatedEncoderDecoder, [(6,), (5,), (1, 6), (5, 5)], (0, 1)),
    "selective_scan": (SelectiveScan, (6, 8), ()),
    "mamba_block": (MambaBlock, (6, 16), ()),
}
